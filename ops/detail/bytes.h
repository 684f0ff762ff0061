// Element types by size, for ops that only move values (copy, gather):
// they are instantiated once per element size instead of once per dtype.
#pragma once

#include <cstdint>

#include "ops/error.h"

namespace scatterx::detail {

struct Bytes16 {
  uint64_t lo;
  uint64_t hi;
};

template <typename F>
decltype(auto) dispatch_element_size(int64_t size, const char* op, F&& f) {
  switch (size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    case 16:
      return f(Bytes16{});
    default:
      break;
  }
  raise<DTypeError>(op, "unsupported element size ", size);
}

}  // namespace scatterx::detail

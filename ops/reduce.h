// Reduce modes and the dtypes each supports. The functors that implement
// them live in reduce_ops.h.
#pragma once

#include <cstdint>
#include <string>

#include "ops/dtype.h"

namespace scatterx {

// _(Name, name as scatter_reduce spells it)
#define SCATTERX_FORALL_REDUCES(_) \
  _(None, "none")                  \
  _(Sum, "sum")                    \
  _(Prod, "prod")                  \
  _(Mean, "mean")                  \
  _(Amax, "amax")                  \
  _(Amin, "amin")

enum class Reduce : uint8_t {
#define SCATTERX_REDUCE_ENUM(name, str) name,
  SCATTERX_FORALL_REDUCES(SCATTERX_REDUCE_ENUM)
#undef SCATTERX_REDUCE_ENUM
};

constexpr const char* reduce_name(Reduce r) {
  switch (r) {
#define SCATTERX_REDUCE_NAME(name, str) \
  case Reduce::name:                    \
    return str;
    SCATTERX_FORALL_REDUCES(SCATTERX_REDUCE_NAME)
#undef SCATTERX_REDUCE_NAME
  }
  return "unknown";
}

// Whether a dtype supports a reduce: complex numbers have no order (no
// amax/amin), and a mean of booleans is undefined.
constexpr bool reduce_supported(Reduce r, DType d) {
  if (is_complex(d)) return r != Reduce::Amax && r != Reduce::Amin;
  if (d == DType::Bool) return r != Reduce::Mean;
  return true;
}

// Parses a reduce name: scatter_reduce's spellings ("sum", "prod", "mean",
// "amax", "amin"), scatter_'s ("add", "multiply") and "none" (a plain
// write); throws ArgumentError naming `op` for anything else.
Reduce reduce_from_name(const std::string& name, const char* op);

}  // namespace scatterx

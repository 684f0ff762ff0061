// Software prefetches of rows read at random addresses (the grouped folds,
// the row gathers), where the hardware prefetcher cannot guess the next one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/macros.h"

namespace scatterx::detail {

// Prefetches the first cache lines (up to 8) of a row about to be read at a
// random address. The lines are counted from the one holding its first byte:
// numpy allocates with 16-byte alignment, and a 256-byte row that starts
// mid-line spans 5 lines, whose last one would otherwise be missed on every
// row (a demand miss to memory per row: 13 -> 21 ms for the GNN scatter-add).
// Straight-line code on purpose: this is the grouped fold's inner loop, and
// prefetch_bytes' loop capped at 8 lines in its place took the GNN
// scatter-add from 12 to 15.4-16.5 ms (2026-11-28).
SCATTERX_INLINE void prefetch_row(const void* p, int64_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const char* c = reinterpret_cast<const char*>(at & ~uintptr_t{63});
  const int64_t span = static_cast<int64_t>(at & 63) + bytes;
  __builtin_prefetch(c);
  if (span > 64) __builtin_prefetch(c + 64);
  if (span > 128) __builtin_prefetch(c + 128);
  if (span > 192) __builtin_prefetch(c + 192);
  if (span > 256) {
    __builtin_prefetch(c + 256);
    if (span > 320) __builtin_prefetch(c + 320);
    if (span > 384) __builtin_prefetch(c + 384);
    if (span > 448) __builtin_prefetch(c + 448);
  }
}

// Prefetches every cache line of [p, p + bytes), for tiles that may be wider
// than prefetch_row's 8 lines; counted from the line of the first byte, as
// there.
SCATTERX_INLINE void prefetch_bytes(const void* p, size_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t line = at & ~uintptr_t{63}; line < at + bytes; line += 64)
    __builtin_prefetch(reinterpret_cast<const char*>(line));
}

}  // namespace scatterx::detail

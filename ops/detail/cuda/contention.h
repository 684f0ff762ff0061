// Internal: when a CUDA scatter with a reduce leaves atomics for the sorted
// path (scatterx::cuda::ScatterPath::Auto).
//
// Atomics on distinct addresses retire in parallel all over the L2; atomics
// on one address, and on one row (its columns share a few L2 slices), wait
// on each other. A destination drawing a large share of a scatter's values
// therefore sets the atomic path's time, and the sorted path, which folds a
// hot destination in parallel pieces, wins although sorting costs a few
// passes over the index. The index check samples the index and measures the
// share of its most frequent value (checks.cu); the rule below compares it
// with a threshold.
//
// Tuned on an H100 (bench/RESULTS.md, GPU section, 2026-11-24) against the
// forced paths of bench_cuda.cpp: with the hottest destination holding a
// quarter of 2^24 single-element values, atomics still won (sum 1.84 ms
// against 2.05 sorted: lanes of a warp fold their shared destination before
// the atomic; amax 0.77 against 2.10), and on the power-law GNN rows (hottest
// node ~1%) the two paths tied or atomics won. So Auto sorts only where one
// destination holds half of the values or more; shares above a quarter were
// not measured.
#pragma once

#include <cstdint>

#include "ops/cuda.h"
#include "ops/scatter/scatter_args.h"

namespace scatterx::detail::cuda {

// The most frequent index value's share at and above which Auto sorts.
constexpr double kContendedShare = 1.0 / 2;
// Folds by a compare-and-swap loop that every value must win (prod, the sums
// of small integers) serialize far sooner: each value of a hot destination
// retries until its swap lands, where an add retires in the L2 in one step.
// On the H100 the power-law GNN rows (hottest node ~1% of 2^23 rows) took
// prod 17.9 ms by swaps against amax's 4.4 ms, whose swaps mostly find
// nothing to change. For these Auto sorts once the hottest destination
// expects this many values (its share of the index values times their
// number, per column of a row).
constexpr double kContendedSwapHits = 256;
// Below this many positions the sort's fixed cost (a dozen kernel launches)
// outweighs any contention.
constexpr int64_t kMinSortedPositions = int64_t{1} << 16;

// The path the calling thread's last CUDA scatter took (for tests).
scatterx::cuda::ScatterPath last_scatter_path();
void set_last_scatter_path(scatterx::cuda::ScatterPath path);

// Whether the index check should measure contention: only Auto reads it,
// and deterministic mode sorts anyway.
inline bool measures_contention() {
  return !scatterx::cuda::deterministic() && scatterx::cuda::scatter_path() == scatterx::cuda::ScatterPath::Auto;
}

// positions: the scatter's element positions, in rows of row_len columns
// that one index value sends to one destination row; swaps: the fold is a
// compare-and-swap loop that every value must win (atomics.cuh).
inline bool prefers_sorted(const ScatterArgs& a, int64_t positions, int64_t row_len, bool swaps) {
  switch (scatterx::cuda::scatter_path()) {
    case scatterx::cuda::ScatterPath::Atomic:
      return false;
    case scatterx::cuda::ScatterPath::Sorted:
      return true;
    case scatterx::cuda::ScatterPath::Auto:
      break;
  }
  if (positions < kMinSortedPositions) return false;
  if (swaps) return a.hottest_index_share * static_cast<double>(positions / row_len) >= kContendedSwapHits;
  return a.hottest_index_share >= kContendedShare;
}

}  // namespace scatterx::detail::cuda

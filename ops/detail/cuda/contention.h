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
// The constants are provisional until tuned on a GPU against the forced
// paths (bench_cuda.cpp's power-law and skewed workloads, each beside its
// /atomic and /sorted variants; scripts/gpu_suite.sh runs them).
#pragma once

#include <cstdint>

#include "ops/cuda.h"
#include "ops/scatter/scatter_args.h"

namespace scatterx::detail::cuda {

// The most frequent index value's share at and above which Auto sorts.
constexpr double kContendedShare = 1.0 / 16;
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

inline bool prefers_sorted(const ScatterArgs& a, int64_t positions) {
  switch (scatterx::cuda::scatter_path()) {
    case scatterx::cuda::ScatterPath::Atomic:
      return false;
    case scatterx::cuda::ScatterPath::Sorted:
      return true;
    case scatterx::cuda::ScatterPath::Auto:
      break;
  }
  return positions >= kMinSortedPositions && a.hottest_index_share >= kContendedShare;
}

}  // namespace scatterx::detail::cuda

// Grouping index positions by the target they hit: the sorted fast path of
// slice-wise scatter (GNN aggregation, index_add) reduces each group in one
// thread, so no two threads write one destination and no atomics are used.
#pragma once

#include <cstdint>

#include "ops/runtime/parallel.h"

namespace scatterx::detail {

struct TargetGroups {
  int64_t num_groups = 0;
  // Dense: one group per target (group g is target g, and may be empty).
  // Sparse: one group per distinct target hit, listed in `target`.
  bool dense = false;
  Buffer<int64_t> target;   // sparse only: [num_groups] distinct targets, ascending
  Buffer<int64_t> offsets;  // [num_groups + 1] group g is order[offsets[g], offsets[g+1])
  Buffer<int64_t> order;    // [count] positions, grouped by target, ascending within a group

  int64_t target_of(int64_t group) const { return dense ? group : target[group]; }
};

// Groups positions 0..count-1 by values[p * stride], which must already be
// checked to lie in [0, num_targets). Stable (positions keep index order
// inside a group) and deterministic. A parallel counting sort when targets
// are few next to positions (dense groups), else a parallel LSD radix sort.
template <typename I>
TargetGroups group_by_target(const I* values, int64_t stride, int64_t count, int64_t num_targets);

}  // namespace scatterx::detail

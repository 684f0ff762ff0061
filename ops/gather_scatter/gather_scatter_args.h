// Internal: what the gather_scatter front end hands to the CPU kernel after
// validation. The kernel trusts these arguments completely.
#pragma once

#include <cstdint>

#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx::detail {

struct TargetGroups;

struct GatherScatterArgs {
  const char* op = "";
  Reduce reduce = Reduce::Sum;
  TensorView x;                          // contiguous [N, F]
  TensorView src_index;                  // 1-d, values in [0, N); data null: the identity (row e of x for edge e)
  const TargetGroups* groups = nullptr;  // the destinations grouped (an IndexPlan's), values in [0, num_out)
  TensorView dst_index;                  // when groups is null: 1-d, values in [0, num_out), grouped densely here
  TensorView weight;                     // 1-d in x's dtype; data null when unweighted
  TensorView out;                        // contiguous [num_out, F]
  int64_t edges = 0;
  int64_t features = 0;  // F: the product of x's sizes after dim 0
  int64_t num_out = 0;
};

void gather_scatter_cpu(const GatherScatterArgs& args);

// Per-dtype entry points for the floating dtypes, one explicit
// instantiation per generated file (ops/CMakeLists.txt).
template <DType D>
void gather_scatter_cpu_dtype(const GatherScatterArgs& args);

}  // namespace scatterx::detail

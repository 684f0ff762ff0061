// Internal: the gather_scatter family on CUDA tensors (gather_scatter.cu,
// groups.cu, gather_dot.cu, scatter_softmax.cu), called by the front ends in
// ops/gather_scatter/ after validation. Plain C++ (no CUDA types), so host
// code compiled without nvcc can hold the groups of a CUDA IndexPlan; a
// build without the backend raises from each (no_cuda.cpp).
//
// Every kernel here folds each output element in position order, one thread
// per element, with the shared functors of ops/reduce_ops.h (gather_dot: a
// few lanes per dot, in a fixed order): results are deterministic and do not
// depend on the launch shape. Nothing synchronizes
// the host except index_range (it returns values the host needs).
#pragma once

#include <cstdint>
#include <memory>

#include "ops/gather_scatter/gather_scatter_args.h"
#include "ops/tensor.h"

namespace scatterx::detail::cuda {

// The positions of a 1-d index grouped by value on the device, densely: group
// t holds the positions p with index[p] == t, t in [0, num_groups), as
// order[offsets[t] .. offsets[t + 1]), in ascending p (stable). Values outside
// [0, num_groups) (possible only with index checks off) are in no group.
//
// A group too long for one thread to fold quickly (a hub of a power-law
// graph) is cut into chunks of consecutive slots (chunks.cuh: their length
// depends on the group's length alone), which the kernels fold in parallel
// and then combine in chunk order: group t's chunks are chunk_offsets[t] ..
// chunk_offsets[t + 1] - 1 (none for a short group), and there are at most
// max_chunks of them in all (the exact number stays on the device).
struct DeviceGroups {
  int64_t num_groups = 0;
  int64_t positions = 0;
  int64_t max_chunks = 0;
  bool every_position_grouped = true;  // false when built with index checks off (values may be out of range)
  Device device = Device::cpu();
  const int64_t* offsets = nullptr;        // device memory, [num_groups + 1]
  const int64_t* chunk_offsets = nullptr;  // device memory, [num_groups + 1]
  const int64_t* order = nullptr;          // device memory, [positions]
  std::shared_ptr<void> storage;           // owns all three
};

// Groups a 1-d int32/int64 CUDA index (any stride) whose values were checked
// against num_groups (CUB's stable radix sort; enqueued, not waited for).
DeviceGroups group_by_value(const char* op, const TensorView& index, int64_t num_groups);

// out[t] = offsets[t + 1] - offsets[t]: a contiguous [num_groups] int64 tensor
// on the groups' device.
void group_counts(const char* op, const DeviceGroups& groups, const TensorView& out);

// The smallest and largest value of a non-empty 1-d int32/int64 CUDA index.
// Synchronizes the current stream (the host needs the values).
struct IndexRange {
  int64_t min = 0;
  int64_t max = 0;
};
IndexRange index_range(const char* op, const TensorView& index);

// gather_scatter's kernel: args as for the CPU kernel (x contiguous [N, F],
// out contiguous [num_out, F], every row written), except that the
// destinations come grouped in `groups` (args.groups and args.dst_index are
// unused). src_index values outside [0, N) (index checks off) are skipped.
void gather_scatter(const GatherScatterArgs& args, const DeviceGroups& groups);

// gather_dot's kernel: out[e] = sum over f < features of a[a_index[e], f] *
// b[b_index[e], f] for contiguous a [Na, features], b [Nb, features] and a
// contiguous [E] out, all of one floating dtype, folded in the accumulation
// type in an order fixed by `features` alone (strided partial sums, then a
// fixed tree). An edge whose index is out of range (checks off) gets 0.
void gather_dot(const char* op, const TensorView& a, const TensorView& a_index, const TensorView& b,
                const TensorView& b_index, int64_t features, const TensorView& out);

// scatter_softmax's kernel: src and out contiguous [positions, features] of
// one floating dtype, the rows grouped by `groups`; scatter_softmax.h's
// arithmetic (max, then the sum of exp(x - max) in position order, then each
// output). A row in no group (checks off) is left as 0.
void scatter_softmax(const char* op, const TensorView& src, const DeviceGroups& groups, const TensorView& out, bool log,
                     double eps);

}  // namespace scatterx::detail::cuda

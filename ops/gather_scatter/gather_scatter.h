// Fused gather-scatter: the message-passing aggregation of a graph network,
// out[n] = reduce over the edges e with dst_index[e] == n of
// x[src_index[e]] * edge_weight[e], without materialising the E x F
// messages that index_select + index_add_ would.
//
// Contract:
//  - x is [N, F...] (rows along dim 0, any strides); src_index and dst_index
//    are 1-d int32 or int64 of one length E (their dtypes may differ);
//    edge_weight is null or 1-d of length E in x's dtype. x is a floating
//    dtype (float16, bfloat16, float32, float64).
//  - out is a new contiguous [dim_size, F...] tensor on x's device;
//    dim_size < 0 means max(dst_index) + 1 (0 for E == 0).
//  - reduce is Sum, Mean, Amax or Amin. Each destination row folds its edges
//    in edge order with the functors of ops/reduce_ops.h in the accumulation
//    type (float for 16-bit floats), the product x * w formed there, and is
//    written once: mean divides by max(count, 1); a row no edge reaches is 0
//    for every reduce (torch_scatter's rule).
//  - Deterministic: results do not depend on the thread count.
//  - Extra memory: the grouping of edges by destination (O(E + num_out)
//    int64; on CUDA also the sort's keys and scratch during the call) and a
//    contiguous copy of x when x is not contiguous; never E x F.
//  - Invalid arguments raise before anything is computed: ArgumentError for
//    shapes and the reduce, DTypeError for dtypes, IndexError for an index
//    value out of range (naming the first bad position).
//  - CPU and CUDA (every tensor on one device; a plan on theirs). On CUDA
//    the destinations are grouped by a stable radix sort on the GPU (or come
//    from a CUDA IndexPlan) and each output element is folded by one thread
//    in edge order: no atomics, and the result equals the CPU backend's bit
//    for bit. The index checks read one small result back (a synchronization,
//    as every checked CUDA op; scatterx::cuda::set_index_checks(false) skips
//    them, and then an edge whose index is out of range is skipped).
#pragma once

#include <cstdint>

#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx {

Tensor gather_scatter(const TensorView& x, const TensorView& src_index, const TensorView& dst_index, Reduce reduce,
                      const TensorView* edge_weight = nullptr, int64_t dim_size = -1);

// As gather_scatter, into the caller's `out`: a contiguous [num_out, F...]
// tensor of x's dtype and device, every row of which is written (dst_index's
// values must lie in [0, num_out)); for callers that reuse their buffers.
void gather_scatter_out(const TensorView& out, const TensorView& x, const TensorView& src_index,
                        const TensorView& dst_index, Reduce reduce, const TensorView* edge_weight = nullptr);

// out[n] = reduce of the rows src[p] (along dim 0) with index[p] == n, for
// reduce Sum, Mean, Amax, Amin (a row no position reaches is 0): torch_scatter's
// scatter(src, index, dim=0, dim_size, reduce) of a 1-d index, the unplanned
// form of scatter_by_plan (index_plan.h), with the same results bit for bit
// (a small float sum, amax or amin on the CPU: the same values, though a
// NaN's payload may differ). The index is grouped for this call alone (on
// the CPU by the kernel's counting sort, which lays the rows out as it places
// them: one pass fewer than building a plan); a small float sum, amax or amin
// on the CPU is index_add_ or index_reduce_ into zeros instead, whose direct
// rows need no grouping. dim_size < 0 means max(index) + 1. With a weight
// (1-d, one per position, src's dtype) each row is src[p] * weight[p]:
// gather_scatter with the identity for src_index, without building it.
Tensor scatter_rows(const TensorView& src, const TensorView& index, Reduce reduce, int64_t dim_size = -1,
                    const TensorView* weight = nullptr);

}  // namespace scatterx

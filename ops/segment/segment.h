// Segment reductions and the arg forms of scatter min/max: the reductions a
// graph network aggregates messages with (torch_scatter's segment_csr,
// segment_coo, gather_csr, gather_coo and scatter_min/max).
//
// Common contract:
//  - The reduced dimension `dim` splits src as outer x dim x inner. For the
//    CSR/COO forms dim is indptr.dim() - 1 (index.dim() - 1): indptr / index
//    hold the segments of each outer row, their leading dims are src's first
//    dims (size 1 broadcasts, as torch.expand).
//  - indptr and index have dtype int32 or int64; any strides work for every
//    argument. Results are new contiguous tensors on src's device; inputs are
//    never written.
//  - Reduce is Sum, Prod, Mean, Amax or Amin, where the dtype supports it
//    (ops/reduce.h). A segment of values v1..vn (in position order) becomes
//    finalize(combine(...combine(identity, v1)..., vn), max(n, 1)) with the
//    functors of ops/reduce_ops.h (16-bit floats accumulate in float and
//    round once; integer means floor; amax/amin propagate NaN), except that
//    an empty segment gives 0 for Amax and Amin (torch_scatter's rule), and
//    1 for Prod.
//  - The *_arg forms (Amax or Amin only) also return, as int64, the position
//    along dim of the winner: the first value in position order that equals
//    the result (the first NaN when there is one). An empty segment's arg is
//    src.size(dim), its value 0.
//  - Deterministic on every backend: each output element is folded by one
//    thread in position order, so float sums are bit-identical across runs,
//    thread counts, and the CPU and CUDA backends.
//  - Invalid arguments raise before anything is computed: ArgumentError for
//    shapes, an unsorted indptr/index or a bad reduce; DTypeError for dtypes;
//    IndexError for an indptr or index value out of range, naming the first
//    bad value and its position.
#pragma once

#include <cstdint>

#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx {

// A reduction's values and, per value, the position along dim it came from.
struct ValuesAndArgs {
  Tensor values;
  Tensor args;  // int64, values' shape
};

// Reduces src over the CSR segments of indptr: with dim = indptr.dim() - 1,
// out[..., n, ...] reduces src[..., indptr[..., n] : indptr[..., n + 1], ...].
// indptr is non-decreasing along dim, its values in [0, src.size(dim)); it
// need not start at 0 or end at src.size(dim) (positions outside are not
// read). out has src's shape with size(dim) = max(indptr.size(dim) - 1, 0).
Tensor segment_csr(const TensorView& src, const TensorView& indptr, Reduce reduce);
ValuesAndArgs segment_csr_arg(const TensorView& src, const TensorView& indptr, Reduce reduce);

// Reduces src over runs of equal values of a sorted index: with dim =
// index.dim() - 1, out[..., n, ...] reduces the src[..., e, ...] whose
// index[..., e] == n. index.size(dim) == src.size(dim); index is
// non-decreasing along dim (ArgumentError otherwise) with values in
// [0, dim_size). dim_size < 0 means max(index) + 1 (0 for an empty index).
Tensor segment_coo(const TensorView& src, const TensorView& index, Reduce reduce, int64_t dim_size = -1);
ValuesAndArgs segment_coo_arg(const TensorView& src, const TensorView& index, Reduce reduce, int64_t dim_size = -1);

// The inverse of segment_csr's shape: out[..., e, ...] = src[..., n, ...] for
// e in [indptr[..., n], indptr[..., n + 1]). src.size(dim) ==
// indptr.size(dim) - 1 (or src is empty); out.size(dim) is the last value of
// indptr (0 for an empty src); positions no segment covers are 0.
Tensor gather_csr(const TensorView& src, const TensorView& indptr);

// out[..., e, ...] = src[..., index[..., e], ...]: index_select per outer
// row. index need not be sorted; its values lie in [0, src.size(dim)).
// out has src's shape with size(dim) = index.size(dim).
Tensor gather_coo(const TensorView& src, const TensorView& index);

// torch_scatter's scatter_max / scatter_min: index has src's shape (a
// broadcast index is a stride-0 view), out[..., index[..., e, ...], ...]
// reduces the src values sent there. reduce is Amax or Amin; dim_size < 0
// means max(index) + 1. No ordering of index is needed.
ValuesAndArgs scatter_arg_reduce(const TensorView& src, int64_t dim, const TensorView& index, Reduce reduce,
                                 int64_t dim_size = -1);

}  // namespace scatterx

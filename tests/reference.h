// A serial reference implementation of scatterx's ops, for the tests only.
//
// Written from the public contract (ops/scatter/scatter.h, ops/gather/gather.h,
// ops/reduce_ops.h's comment) and torch's documentation with plain loops over
// coordinates; it shares no code with the library's kernels, dispatch or
// reduction functors. Every function reads its arguments through their
// strides, never writes to them, and returns a new contiguous tensor.
// Arguments must be valid (the reference does not validate like the library
// does; it throws std::logic_error on an index it cannot use).
#pragma once

#include <cstdint>
#include <utility>

#include "scatterx.h"

namespace sxt::ref {

// A contiguous copy of any view.
scatterx::Tensor materialize(const scatterx::TensorView& view);

// torch.gather / torch.index_select.
scatterx::Tensor gather(const scatterx::TensorView& input, int64_t dim, const scatterx::TensorView& index);
scatterx::Tensor index_select(const scatterx::TensorView& input, int64_t dim, const scatterx::TensorView& index);

// torch.Tensor.scatter(dim, index, src, reduce): reduce None, Sum or Prod.
scatterx::Tensor scatter(const scatterx::TensorView& self, int64_t dim, const scatterx::TensorView& index,
                         const scatterx::TensorView& src, scatterx::Reduce reduce);
// The same with every source value equal to value converted to self's dtype.
scatterx::Tensor scatter_value(const scatterx::TensorView& self, int64_t dim, const scatterx::TensorView& index,
                               const scatterx::Scalar& value, scatterx::Reduce reduce);
// torch.Tensor.scatter_reduce(dim, index, src, reduce, include_self).
scatterx::Tensor scatter_reduce(const scatterx::TensorView& self, int64_t dim, const scatterx::TensorView& index,
                                const scatterx::TensorView& src, scatterx::Reduce reduce, bool include_self);
// torch.Tensor.index_add(dim, index, source, alpha).
scatterx::Tensor index_add(const scatterx::TensorView& self, int64_t dim, const scatterx::TensorView& index,
                           const scatterx::TensorView& source, const scatterx::Scalar& alpha);
// index_add with source's slice i multiplied by weights[i] (in the
// accumulation type, unrounded) before it is added.
scatterx::Tensor index_add_weighted(const scatterx::TensorView& self, int64_t dim, const scatterx::TensorView& index,
                                    const scatterx::TensorView& source, const scatterx::TensorView& weights);
// torch.Tensor.index_reduce(dim, index, source, reduce, include_self).
scatterx::Tensor index_reduce(const scatterx::TensorView& self, int64_t dim, const scatterx::TensorView& index,
                              const scatterx::TensorView& source, scatterx::Reduce reduce, bool include_self);

// torch_scatter's segment ops, as ops/segment/segment.h states them: every
// src element is sent to the output row its indptr segment / index value
// names and folded there in position order. The *_arg forms also return the
// position of the first element equal to the result (values, args).
using ValuesArgs = std::pair<scatterx::Tensor, scatterx::Tensor>;
scatterx::Tensor segment_csr(const scatterx::TensorView& src, const scatterx::TensorView& indptr,
                             scatterx::Reduce reduce);
ValuesArgs segment_csr_arg(const scatterx::TensorView& src, const scatterx::TensorView& indptr,
                           scatterx::Reduce reduce);
// dim_size < 0: max(index) + 1.
scatterx::Tensor segment_coo(const scatterx::TensorView& src, const scatterx::TensorView& index,
                             scatterx::Reduce reduce, int64_t dim_size);
ValuesArgs segment_coo_arg(const scatterx::TensorView& src, const scatterx::TensorView& index, scatterx::Reduce reduce,
                           int64_t dim_size);
// index has src's shape.
ValuesArgs scatter_arg_reduce(const scatterx::TensorView& src, int64_t dim, const scatterx::TensorView& index,
                              scatterx::Reduce reduce, int64_t dim_size);
scatterx::Tensor gather_csr(const scatterx::TensorView& src, const scatterx::TensorView& indptr);
scatterx::Tensor gather_coo(const scatterx::TensorView& src, const scatterx::TensorView& index);

}  // namespace sxt::ref

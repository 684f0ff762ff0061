// scatter_, scatter_add_, scatter_reduce_, index_add_ and index_reduce_:
// write values into `self` at positions given by an index, with torch's
// semantics. Each has an out-of-place form without the trailing underscore
// that returns a new tensor and leaves `self` untouched.
//
// Common contract:
//  - dim may be negative; 0-d tensors act as 1-d of size 1. No broadcasting.
//  - index has dtype int32 or int64 and is used as given. Every value must
//    lie in [0, self.size(dim)); negative values are errors, not wrapped.
//    Indices are checked before anything is written: on any error `self` is
//    unchanged.
//  - self and src (source) have the same dtype. Any strides work for every
//    argument. In-place forms reject a `self` that overlaps itself (a stride
//    of 0) or overlaps index or src; the out-of-place forms accept aliasing.
//  - A position of self hit by values v1..vn, in index order, becomes
//        finalize(combine(...combine(start, v1)..., vn), n + include_self)
//    with start = include_self ? self : identity, computed in float for
//    float16/bfloat16 and rounded once (see ops/reduce_ops.h). Positions no
//    index hits keep their value, for every reduce and include_self.
//  - Deterministic: every reduce, including float sums and means, gives
//    bit-identical results across runs and OMP_NUM_THREADS, because each
//    destination is folded by one thread in index order.
//  - Reduce support by dtype: complex has none/sum/prod/mean (amax/amin raise
//    DTypeError); bool has everything but mean; all others have everything.
//  - An empty index is a no-op.
#pragma once

#include <cstdint>

#include "ops/reduce.h"
#include "ops/scalar.h"
#include "ops/tensor.h"

namespace scatterx {

// self[index[i][j][k]][j][k] = src[i][j][k]   (dim == 0), or with reduce
// Reduce::Sum ("add") / Reduce::Prod ("multiply") combined into self, as
// torch's Tensor.scatter_(dim, index, src, reduce=...). index has self's
// rank, index.size(d) <= src.size(d) for every d and <= self.size(d) for
// d != dim. With duplicate indices and Reduce::None the last value in index
// order wins (torch leaves this undefined; scatterx makes it deterministic).
TensorView scatter_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
                    Reduce reduce = Reduce::None);
// As above with every src value equal to `value` (converted to self's dtype).
TensorView scatter_(const TensorView& self, int64_t dim, const TensorView& index, const Scalar& value,
                    Reduce reduce = Reduce::None);
Tensor scatter(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
               Reduce reduce = Reduce::None);
Tensor scatter(const TensorView& self, int64_t dim, const TensorView& index, const Scalar& value,
               Reduce reduce = Reduce::None);

// self[index[i][j]][j] += src[i][j]: scatter_reduce_ with Reduce::Sum.
TensorView scatter_add_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src);
Tensor scatter_add(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src);

// torch.Tensor.scatter_reduce_: reduce is Sum, Prod, Mean, Amax or Amin.
// With include_self = false the values already in self at hit positions
// take no part (they are replaced by the reduction of the scattered values).
TensorView scatter_reduce_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
                           Reduce reduce, bool include_self = true);
Tensor scatter_reduce(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
                      Reduce reduce, bool include_self = true);

// self[..., index[i], ...] += alpha * source[..., i, ...]. index is 1-d (or
// 0-d) with source.size(dim) entries; source matches self in every other
// dim. alpha must be integral for integer tensors and bool for bool tensors.
TensorView index_add_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                      const Scalar& alpha = Scalar(int64_t{1}));
Tensor index_add(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                 const Scalar& alpha = Scalar(int64_t{1}));

// self[..., index[i], ...] += weights[i] * source[..., i, ...]: index_add_
// with one weight per index entry, in one pass (MoE combine: expert outputs
// weighted by their router probabilities, summed into their tokens).
// weights is 1-d (or 0-d) with index's length and self's dtype; the product
// is formed in the accumulation type and not rounded to self's dtype before
// the sum (so float16/bfloat16 results can differ from torch's
// index_add_(dim, index, source * weights[:, None]) by that rounding).
TensorView index_add_weighted_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                               const TensorView& weights);
Tensor index_add_weighted(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                          const TensorView& weights);

// torch.Tensor.index_reduce_: index_add_'s shapes with reduce Prod, Mean,
// Amax or Amin and include_self as in scatter_reduce_.
TensorView index_reduce_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                         Reduce reduce, bool include_self = true);
Tensor index_reduce(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                    Reduce reduce, bool include_self = true);

}  // namespace scatterx

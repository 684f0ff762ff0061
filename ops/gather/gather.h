// gather and index_select: read values of `input` at positions given by an
// index, with torch's semantics.
//
// Common contract:
//  - dim may be negative (counts from the end); 0-d tensors act as 1-d of size 1.
//  - index has dtype int32 or int64 and is used as given (no copy, no upcast).
//    Every value must lie in [0, input.size(dim)); negative values are errors,
//    not wrapped. A bad value raises IndexError naming the value and its
//    position before anything is written.
//  - Any strides work (transposed, sliced, expanded, reversed views).
//  - The *_out forms write into `out`, which must have the result's shape and
//    dtype and must not overlap `input` or `index`.
//  - Results are exact copies, so they are bit-identical across runs and
//    thread counts.
#pragma once

#include <cstdint>

#include "ops/tensor.h"

namespace scatterx {

// out[i][j][k] = input[index[i][j][k]][j][k]   (dim == 0; likewise for other dims)
// index has input's rank and index.size(d) <= input.size(d) for d != dim;
// the result has index's shape.
Tensor gather(const TensorView& input, int64_t dim, const TensorView& index);
TensorView gather_out(const TensorView& out, const TensorView& input, int64_t dim, const TensorView& index);

// out = input with dimension dim replaced by the slices input[..., index[i], ...].
// index is 1-d (or 0-d); the result has input's shape with size(dim) = index.numel().
// Contiguous rows are copied with memcpy.
Tensor index_select(const TensorView& input, int64_t dim, const TensorView& index);
TensorView index_select_out(const TensorView& out, const TensorView& input, int64_t dim, const TensorView& index);

}  // namespace scatterx

// Per-edge dot products of gathered rows (the SDDMM of a graph network):
// out[e] = sum over the features f of a[a_index[e], f] * b[b_index[e], f].
// gather_scatter's backward uses it for the gradient in edge_weight
// (a = the output gradient by dst_index, b = x by src_index); attention
// scores are the same shape of work.
//
// Contract:
//  - a is [Na, F...] and b is [Nb, F...] (rows along dim 0, any strides, the
//    same sizes after dim 0 and the same floating dtype); a_index and
//    b_index are 1-d int32 or int64 of one length E (their dtypes may differ).
//  - out is a new contiguous [E] tensor in a's dtype, on a's device. Each dot
//    is summed in the accumulation type (float for 16-bit floats) in a fixed
//    order that does not depend on the thread count or the CUDA grid:
//    deterministic on either device.
//  - E == 0 gives an empty out; F == 0 gives zeros.
//  - Extra memory: a contiguous copy of a or b when it is not contiguous;
//    never E x F.
//  - Invalid arguments raise before anything is computed (ArgumentError,
//    DTypeError, IndexError naming the first bad position).
//  - CPU and CUDA (all four tensors on one device). The two backends sum in
//    different orders, so they agree within rounding, not bit for bit.
#pragma once

#include "ops/tensor.h"

namespace scatterx {

Tensor gather_dot(const TensorView& a, const TensorView& a_index, const TensorView& b, const TensorView& b_index);

}  // namespace scatterx

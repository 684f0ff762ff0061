// Fused scatter softmax: the softmax (or log-softmax) over the rows that
// share a destination, torch_scatter's scatter_softmax / scatter_log_softmax
// of a 1-d index along dim 0, in one kernel instead of an amax scatter, a
// subtraction, exp over E x F, a sum scatter and a division.
//
// For every destination group of the plan and every feature k, over the
// group's rows p: m = max(src[p, k]) (NaN wins, as torch's amax), s = sum of
// exp(src[p, k] - m); then
//   softmax:     out[p, k] = exp(src[p, k] - m) / s
//   log-softmax: out[p, k] = (src[p, k] - m) - log(s + eps)
// the composite's arithmetic, so its special values carry over: a group
// whose values are all -inf gives NaN (-inf - -inf), a +inf gives NaN for
// itself and for the group's other values (their sum is NaN). A group of up
// to 512 rows sums in index order, as the composite. A larger one is cut in
// index order into chunks of 512 rows, and s is the sum over the chunks, in
// order, of exp(m_c - m) * (the chunk's sum of exp(src - m_c)), m_c the
// chunk's maximum (a chunk of only -inf adds 0): within rounding of the
// composite's sum, and computed by all threads, so that one hub of a
// power-law graph does not run on one thread.
//
// Contract:
//  - src is [positions, F...] (rows along dim 0, any strides) of a floating
//    dtype; plan.positions() == src.size(0). float16 / bfloat16 compute in
//    float and round once at the end.
//  - out is a new contiguous tensor of src's shape (never aliases src);
//    every element is written once. An empty src gives an empty out.
//  - Deterministic: the chunks are cut by row count alone and combined in
//    order, so results do not depend on the thread count (nor on the CPU's
//    ISA: the AVX2 build does the same operations). exp is scatterx's own in
//    float (within 2 ulp of the correctly rounded value) and std::exp in
//    double; log is std::log. CUDA chunks long groups its own way
//    (scatter_softmax.cu) and uses its expf / exp / logf / log: results
//    agree with the CPU within rounding, not bit for bit.
//  - Extra memory: a contiguous copy of src when src is not contiguous, a
//    fixed scratch per thread, and two accumulators per feature for every
//    512 rows of the groups over 512 rows; never another E x F.
//  - Invalid arguments raise before anything is computed: ArgumentError for
//    shapes, DTypeError for a non-floating src.
//  - CPU and CUDA: the plan must live on src's device (ArgumentError
//    otherwise). On CUDA with index checks off, a row whose index value was
//    out of range belongs to no group and reads 0.
#pragma once

#include <cstdint>

#include "ops/gather_scatter/index_plan.h"
#include "ops/tensor.h"

namespace scatterx {

Tensor scatter_softmax(const TensorView& src, const IndexPlan& plan, bool log, double eps = 0);

// The gradient of scatter_softmax (log = false) or scatter_log_softmax (log
// = true) with respect to src, from the forward's output `out`, the gradient
// `grad` of out, and the forward's plan. For every group and feature k, with
// S over the group's rows q:
//   softmax:     grad_src[p, k] = out[p, k] * (grad[p, k] - S),  S = sum of grad[q, k] * out[q, k]
//   log-softmax: grad_src[p, k] = grad[p, k] - exp(out[p, k]) * S,  S = sum of grad[q, k]
// the composite backward's math (torch_scatter's autograd), in one pass
// over the rows of each group that sits in cache, two for larger ones.
//
// Contract:
//  - out and grad have the same shape [positions, F...] and floating dtype
//    (any strides; a non-contiguous one is copied once);
//    plan.positions() == out.size(0). float16 / bfloat16 compute in float
//    and round once, where the composite rounds each step.
//  - Returns a new contiguous tensor of out's shape; every element written.
//  - Deterministic, independent of the thread count and ISA: S sums in
//    index order over groups of up to 512 rows, and over larger ones in
//    chunks of 512 rows whose sums are added in order (as the forward).
//  - CPU only for now: CUDA tensors raise ArgumentError (scatterx.torch_scatter
//    differentiates through its ops on CUDA).
//  - Invalid arguments raise before anything is computed: ArgumentError for
//    shapes and devices, DTypeError for dtypes.
Tensor scatter_softmax_backward(const TensorView& out, const TensorView& grad, const IndexPlan& plan, bool log);

namespace detail {

// Internal: the CPU kernel behind scatter_softmax, for a checked contiguous
// src viewed as [positions, features] and out of the same shape.
void scatter_softmax_cpu(const TensorView& src, const TargetGroups& groups, const TensorView& out, bool log,
                         double eps);

// Internal: the CPU kernel behind scatter_softmax_backward, for checked
// contiguous out and grad viewed as [positions, features], and grad_src of
// the same shape.
void scatter_softmax_backward_cpu(const TensorView& out, const TensorView& grad, const TargetGroups& groups,
                                  const TensorView& grad_src, bool log);

// exp(x) for x <= 0 (or NaN), vectorizable: within 2 ulp of the correctly
// rounded value, subnormal results included; exposed for the tests.
float exp_nonpositive(float x);

}  // namespace detail

}  // namespace scatterx

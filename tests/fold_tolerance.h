// How far a fold whose order is not fixed may land from the serial
// reference, so that a GPU comparison fails only on a kernel bug.
//
// Atomics fold in arrival order, 16-bit floats round at every atomic step,
// and the sorted path folds long runs in chunks: float and complex sums,
// means and products then differ from the reference by rounding alone. Two
// things keep the comparison honest:
//   - inputs whose result cannot depend on the order (fold_values): no
//     +-max-finite, which overflows in one order and not in another, and for
//     products factors near one, whose partial products stay far from
//     overflow and underflow; NaN, +-inf and +-0 stay, since no order
//     changes what they give;
//   - a bound per element that rounding alone cannot exceed, whatever the
//     order: any order of folding n values in a type of unit roundoff u
//     lands within gamma_n = n u / (1 - n u) times the fold of the absolute
//     values (sums, means) or of the result (products) of the exact value,
//     so the kernel and the serial reference lie within twice that of each
//     other, plus half a subnormal step per step for results that
//     underflow. A statistical bound (a multiple of sqrt(n) u) was tried first
//     and failed on an H100 on correct results, by up to 2.7 times, where
//     long runs of same-signed values were folded in chunks.

#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "tests/test_util.h"

namespace sxt {

// Float / complex sums, means and products: the result depends on the order
// of the fold.
bool order_dependent(DType dtype, Reduce reduce);

// value_options_for(reduce), made order-independent where the fold is not.
ValueOptions fold_values(DType dtype, Reduce reduce);

// 2^-(mantissa bits + 1): float16 2^-11, bfloat16 2^-8, float32 2^-24, ...
double unit_roundoff(DType dtype);
// The smallest positive subnormal: float16 2^-24, float32 2^-149, ...
double smallest_subnormal(DType dtype);

// Per element of the result (for_each_coord order), per real part (real,
// imaginary): the error allowed beside the reference.
using FoldBounds = std::vector<std::pair<double, double>>;

// Reruns the test's reference op on other inputs of the same shapes: with
// `reduce` in place of the test's, and, when `counting`, with a unit alpha
// or weight (index_add), else with the absolute value of the test's.
using ReferenceFold =
    std::function<Tensor(const TensorView& self, const TensorView& src, Reduce reduce, bool counting)>;

// A contiguous copy with every real part made non-negative; a float64
// tensor of ones (inputs of a ReferenceFold).
Tensor abs_copy(const TensorView& view);
Tensor float64_ones(const Shape& shape);
// |alpha| per real part, of alpha's kind.
Scalar abs_scalar(const Scalar& alpha);

// The bounds of an order-dependent fold of `src` into `self` by `reduce`
// whose reference result is `expected`.
FoldBounds fold_bounds(const TensorView& expected, Reduce reduce, const TensorView& self, const TensorView& src,
                       const ReferenceFold& fold);

// Within atol + rtol * |expected| (+ the bound, when given) per real part;
// NaN matches NaN, an infinity the same infinity.
::testing::AssertionResult close_values(const TensorView& actual, const TensorView& expected, double rtol, double atol,
                                        const FoldBounds* bounds = nullptr);

// actual against the reference's expected for a fold by `reduce`: bitwise
// where the order cannot matter (integers, amax/amin in a fixed order),
// numerically for amax/amin in arrival order (+0 and -0 tie), within the
// bounds (or a fixed tolerance without them) for order-dependent folds.
::testing::AssertionResult fold_matches(const TensorView& actual, const TensorView& expected, Reduce reduce,
                                        bool ordered, const FoldBounds* bounds = nullptr);

}  // namespace sxt

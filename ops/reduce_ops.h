// The reduction contract shared by every backend (CPU now, CUDA later).
//
// For a reduce R and an element type T, ReduceOp<R, acc_t<T>> provides
//   identity()            the value a destination starts from when
//                         include_self is false;
//   combine(acc, value)   folds one more value into the accumulator;
//   finalize(acc, count)  the result after `count` values were folded (the
//                         destination's own value included when it was).
// A destination hit by values v1..vn (in index order) therefore becomes
//   finalize(combine(...combine(start, v1)..., vn), n + include_self)
// with start = include_self ? self : identity(), computed in acc_t<T> and
// converted to T once. Every backend must produce exactly this.
//
// Amax and Amin also provide
//   replaces(acc, value)  whether value takes the accumulator's place: it is
//                         strictly better, or the first NaN. The arg forms
//                         (ops/segment) fold with it, so the arg they report
//                         is the first winner in index order and the value
//                         equals combine's (up to which NaN it is).
//
// Semantics follow torch.scatter_reduce: integer sums and products wrap,
// bool sum is "or" and bool prod is "and", amax/amin propagate NaN, integer
// means floor, 16-bit floats accumulate in float. Reduce::None is a plain
// write: the last value in index order wins.
//
// This header is plain C++17 and compiles with nvcc as host/device code.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/macros.h"
#include "ops/numeric.h"
#include "ops/reduce.h"

namespace scatterx {

template <typename T>
struct AccTypeOf {
  using type = T;
};
template <>
struct AccTypeOf<Half> {
  using type = float;
};
template <>
struct AccTypeOf<BFloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename AccTypeOf<T>::type;

template <typename A>
constexpr bool is_complex_v = std::is_same_v<A, Complex<float>> || std::is_same_v<A, Complex<double>>;

namespace arith {

// Integer arithmetic is done in uint64 so that overflow wraps (as in torch)
// instead of being undefined behaviour.
template <typename A>
SCATTERX_INLINE A add(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

template <typename A>
SCATTERX_INLINE A mul(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

template <typename A>
SCATTERX_INLINE bool is_nan(A a) {
  if constexpr (std::is_floating_point_v<A>) {
    return a != a;  // NOLINT(misc-redundant-expression)
  } else {
    return false;
  }
}

// torch's amax: a NaN on either side wins; on ties the accumulator stays.
template <typename A>
SCATTERX_INLINE A max(A acc, A value) {
  if (is_nan(value)) return value;
  return acc < value ? value : acc;
}

template <typename A>
SCATTERX_INLINE A min(A acc, A value) {
  if (is_nan(value)) return value;
  return value < acc ? value : acc;
}

template <typename A>
SCATTERX_INLINE A divide_by_count(A sum, int64_t count) {
  if constexpr (is_complex_v<A>) {
    return sum / static_cast<decltype(sum.re)>(count);
  } else if constexpr (std::is_floating_point_v<A>) {
    return sum / static_cast<A>(count);
  } else if constexpr (std::is_signed_v<A>) {
    // floor division, as torch's div(rounding_mode="floor")
    const int64_t s = static_cast<int64_t>(sum);
    int64_t q = s / count;
    if (s % count != 0 && s < 0) --q;
    return static_cast<A>(q);
  } else {
    return static_cast<A>(static_cast<uint64_t>(sum) / static_cast<uint64_t>(count));
  }
}

template <typename A>
SCATTERX_INLINE A lowest() {
  if constexpr (std::is_floating_point_v<A>) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}

template <typename A>
SCATTERX_INLINE A highest() {
  if constexpr (std::is_floating_point_v<A>) {
    return std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::max();
  }
}

}  // namespace arith

template <Reduce R, typename A>
struct ReduceOp;

template <typename A>
struct ReduceOp<Reduce::None, A> {
  static SCATTERX_INLINE A identity() { return A(0); }
  static SCATTERX_INLINE A combine(A, A value) { return value; }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
};

template <typename A>
struct ReduceOp<Reduce::Sum, A> {
  static SCATTERX_INLINE A identity() { return A(0); }
  static SCATTERX_INLINE A combine(A acc, A value) { return arith::add(acc, value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
};

template <typename A>
struct ReduceOp<Reduce::Prod, A> {
  static SCATTERX_INLINE A identity() { return A(1); }
  static SCATTERX_INLINE A combine(A acc, A value) { return arith::mul(acc, value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
};

template <typename A>
struct ReduceOp<Reduce::Mean, A> {
  static SCATTERX_INLINE A identity() { return A(0); }
  static SCATTERX_INLINE A combine(A acc, A value) { return arith::add(acc, value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t count) { return arith::divide_by_count(acc, count); }
};

template <typename A>
struct ReduceOp<Reduce::Amax, A> {
  static SCATTERX_INLINE A identity() { return arith::lowest<A>(); }
  static SCATTERX_INLINE A combine(A acc, A value) { return arith::max(acc, value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
  static SCATTERX_INLINE bool replaces(A acc, A value) {
    return arith::is_nan(value) ? !arith::is_nan(acc) : acc < value;
  }
};

template <typename A>
struct ReduceOp<Reduce::Amin, A> {
  static SCATTERX_INLINE A identity() { return arith::highest<A>(); }
  static SCATTERX_INLINE A combine(A acc, A value) { return arith::min(acc, value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
  static SCATTERX_INLINE bool replaces(A acc, A value) {
    return arith::is_nan(value) ? !arith::is_nan(acc) : value < acc;
  }
};

// The bitwise folds (integers and bool only; see ops/reduce.h). Integer
// accumulators are the storage type, so no widening changes the bits.
template <typename A>
struct ReduceOp<Reduce::BitAnd, A> {
  static SCATTERX_INLINE A identity() {
    if constexpr (std::is_same_v<A, bool>) {
      return true;
    } else {
      return static_cast<A>(~A(0));
    }
  }
  static SCATTERX_INLINE A combine(A acc, A value) { return static_cast<A>(acc & value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
};

template <typename A>
struct ReduceOp<Reduce::BitOr, A> {
  static SCATTERX_INLINE A identity() { return A(0); }
  static SCATTERX_INLINE A combine(A acc, A value) { return static_cast<A>(acc | value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
};

template <typename A>
struct ReduceOp<Reduce::BitXor, A> {
  static SCATTERX_INLINE A identity() { return A(0); }
  static SCATTERX_INLINE A combine(A acc, A value) { return static_cast<A>(acc ^ value); }
  static SCATTERX_INLINE A finalize(A acc, int64_t) { return acc; }
};

// Whether finalize does anything: lets kernels skip counting hits.
template <Reduce R>
constexpr bool kNeedsCount = R == Reduce::Mean;

}  // namespace scatterx

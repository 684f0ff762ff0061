#include "tests/fold_tolerance.h"

#include <cmath>
#include <string>

#include "tests/op_checks.h"

namespace sxt {

namespace {

// The real parts of one element as doubles.
template <typename T>
std::pair<double, double> parts(const T& v) {
  if constexpr (is_complex_type_v<T>) {
    return {static_cast<double>(v.re), static_cast<double>(v.im)};
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return {static_cast<double>(static_cast<float>(v)), 0.0};
  } else {
    return {static_cast<double>(v), 0.0};
  }
}

template <typename R>
R finite_or_zero(R x) {
  return std::isfinite(x) ? x : R(0);
}

}  // namespace

Tensor abs_copy(const TensorView& view) {
  Tensor out = Tensor::empty(view.sizes(), view.dtype());
  visit_dtype(view.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_coord(view.sizes(), [&](const int64_t* c) {
      T v = load<T>(view, c);
      if constexpr (is_complex_type_v<T>) {
        // A complex product mixes the parts (re = a.re b.re - a.im b.im):
        // |re| + |im| bounds either part of any product it enters. A NaN or
        // infinite part makes the parts it reaches NaN or infinite (which
        // the comparison matches exactly) and adds no rounding to the others.
        v = T(finite_or_zero(std::abs(v.re)) + finite_or_zero(std::abs(v.im)), 0);
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        v = T(std::abs(static_cast<float>(v)));
      } else if constexpr (std::is_floating_point_v<T>) {
        v = std::abs(v);
      }
      store<T>(out, c, v);
    });
  });
  return out;
}

Tensor float64_ones(const Shape& shape) {
  Tensor out = Tensor::empty(shape, DType::Float64);
  for_each_coord(shape, [&](const int64_t* c) { store<double>(out, c, 1.0); });
  return out;
}

Scalar abs_scalar(const Scalar& alpha) {
  if (alpha.is_complex()) return Scalar(Complex<double>(std::abs(alpha.real()) + std::abs(alpha.imag()), 0.0));
  if (alpha.is_floating_point()) return Scalar(std::abs(alpha.real()));
  if (alpha.is_bool()) return alpha;
  return Scalar(alpha.as_int() < 0 ? -alpha.as_int() : alpha.as_int());
}

bool order_dependent(DType dtype, Reduce reduce) {
  const bool real_or_complex = scatterx::is_floating_point(dtype) || scatterx::is_complex(dtype);
  return real_or_complex && (reduce == Reduce::Sum || reduce == Reduce::Mean || reduce == Reduce::Prod);
}

ValueOptions fold_values(DType dtype, Reduce reduce) {
  ValueOptions o = value_options_for(reduce);
  if (order_dependent(dtype, reduce)) {
    o.finite_extremes = false;
    // A complex product with an infinite part gives inf or NaN in either
    // part depending on the order (inf * 0 is NaN only if it happens).
    if (reduce == Reduce::Prod && scatterx::is_complex(dtype)) o.infinities = false;
    if (reduce == Reduce::Prod) {
      // |log2(1.1)| ~ 0.14 per factor: a thousand factors in any order stay
      // within 2^+-140 only in the worst case, and within 2^+-10 in practice.
      o.near_one_max = 1.1;
      o.small_integers = false;
    }
  }
  return o;
}

namespace {

// Unit roundoff 2^-(mantissa bits + 1) and smallest positive subnormal.
struct Precision {
  int roundoff_exponent;
  int subnormal_exponent;
};

Precision precision_of(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return {-11, -24};
    case DType::BFloat16:
      return {-8, -133};
    case DType::Float32:
    case DType::Complex64:
      return {-24, -149};
    default:
      return {-53, -1074};
  }
}

}  // namespace

double unit_roundoff(DType dtype) { return std::ldexp(1.0, precision_of(dtype).roundoff_exponent); }
double smallest_subnormal(DType dtype) { return std::ldexp(1.0, precision_of(dtype).subnormal_exponent); }

FoldBounds fold_bounds(const TensorView& expected, Reduce reduce, const TensorView& self, const TensorView& src,
                       const ReferenceFold& fold) {
  const Tensor count = fold(float64_ones(self.sizes()), float64_ones(src.sizes()), Reduce::Sum, true);
  const Tensor scale = reduce == Reduce::Prod ? Tensor() : fold(abs_copy(self), abs_copy(src), reduce, false);
  const TensorView magnitude = reduce == Reduce::Prod ? expected : TensorView(scale);
  const double u = unit_roundoff(expected.dtype());
  const double eta = smallest_subnormal(expected.dtype());
  FoldBounds bounds;
  bounds.reserve(static_cast<size_t>(expected.numel()));
  visit_dtype(expected.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_coord(expected.sizes(), [&](const int64_t* c) {
      // n values, one scale (alpha, a weight) and the finalize each round
      // once per step; a complex product rounds up to three times.
      const double steps = (is_complex_type_v<T> && reduce == Reduce::Prod ? 3.0 : 1.0) * load<double>(count, c) + 2.0;
      const double gamma = steps * u < 0.5 ? steps * u / (1.0 - steps * u) : 1.0;
      const auto [re, im] = parts(load<T>(magnitude, c));
      // Complex magnitudes hold |re| + |im| (abs_copy); a product's bounds
      // both parts through its finite parts' modulus.
      const double m =
          is_complex_type_v<T> ? finite_or_zero(std::abs(re)) + finite_or_zero(std::abs(im)) : std::abs(re);
      // Below the smallest normal a step also rounds by up to half a
      // subnormal step, whatever the relative precision (products of values
      // near zero land there).
      const double bound = 2.0 * (gamma * m + steps * eta);
      bounds.emplace_back(bound, is_complex_type_v<T> ? bound : 0.0);
    });
  });
  return bounds;
}

::testing::AssertionResult close_values(const TensorView& actual, const TensorView& expected, double rtol, double atol,
                                        const FoldBounds* bounds) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual.sizes().str() << " vs " << expected.sizes().str();
  }
  if (bounds != nullptr && static_cast<int64_t>(bounds->size()) != expected.numel()) {
    return ::testing::AssertionFailure() << bounds->size() << " bounds for " << expected.numel() << " elements";
  }
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  int reported = 0;
  size_t at = 0;
  visit_dtype(actual.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto near = [&](double a, double e, double bound) {
      if (std::isnan(e)) return std::isnan(a);
      if (std::isinf(e)) return a == e;
      return std::abs(a - e) <= atol + rtol * std::abs(e) + bound;
    };
    for_each_coord(actual.sizes(), [&](const int64_t* c) {
      const auto [ar, ai] = parts(load<T>(actual, c));
      const auto [er, ei] = parts(load<T>(expected, c));
      const auto [br, bi] = bounds != nullptr ? (*bounds)[at] : std::pair<double, double>{0.0, 0.0};
      ++at;
      if (!near(ar, er, br) || !near(ai, ei, bi)) {
        if (reported++ < 5) {
          result = ::testing::AssertionFailure();
          result << "at element offset " << element_offset(expected, c) << ": got (" << ar << ", " << ai
                 << "), expected (" << er << ", " << ei << "), allowed error (" << atol + rtol * std::abs(er) + br
                 << ", " << atol + rtol * std::abs(ei) + bi << ")\n";
        }
      }
    });
  });
  return result;
}

::testing::AssertionResult fold_matches(const TensorView& actual, const TensorView& expected, Reduce reduce,
                                        bool ordered, const FoldBounds* bounds) {
  const bool extremum = reduce == Reduce::Amax || reduce == Reduce::Amin;
  if (extremum && !ordered && scatterx::is_floating_point(actual.dtype())) {
    // Ties between +0 and -0 keep whichever arrived first: compare numerically.
    return close_values(actual, expected, 0.0, 0.0);
  }
  if (!order_dependent(actual.dtype(), reduce)) return same_values(actual, expected);
  if (bounds != nullptr) return close_values(actual, expected, 0.0, 0.0, bounds);
  switch (actual.dtype()) {
    case DType::Float16:
    case DType::BFloat16:
      return close_values(actual, expected, 5e-2, 5e-2);
    case DType::Float32:
    case DType::Complex64:
      return close_values(actual, expected, 1e-4, 1e-4);
    default:
      return close_values(actual, expected, 1e-10, 1e-10);
  }
}

}  // namespace sxt

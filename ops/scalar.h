// A number passed by value (scatter_'s value, index_add_'s alpha), converted
// to the tensor's dtype the way torch converts Python numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "ops/dtype.h"
#include "ops/error.h"

namespace scatterx {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float, Complex };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), int_(v ? 1 : 0), real_(v ? 1.0 : 0.0) {}  // NOLINT
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Scalar(I v) : kind_(Kind::Int), int_(static_cast<int64_t>(v)), real_(static_cast<double>(v)) {}  // NOLINT
  Scalar(double v) : kind_(Kind::Float), real_(v) {}                                               // NOLINT
  Scalar(float v) : Scalar(static_cast<double>(v)) {}                                              // NOLINT
  Scalar(Complex<double> v) : kind_(Kind::Complex), real_(v.re), imag_(v.im) {}                    // NOLINT

  Kind kind() const { return kind_; }
  bool is_complex() const { return kind_ == Kind::Complex; }
  bool is_floating_point() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double real() const { return real_; }
  double imag() const { return imag_; }
  int64_t as_int() const { return kind_ == Kind::Int || kind_ == Kind::Bool ? int_ : static_cast<int64_t>(real_); }

  // Value converted to T as torch converts a Python number: floating to
  // integer truncates toward zero, any nonzero to bool is true. A value
  // outside T's range (a finite one beyond T's largest finite value for
  // floating T) and a complex with a nonzero imaginary part for non-complex
  // T are refused with ArgumentError.
  template <typename T>
  T to(const char* op, const char* argument) const {
    if constexpr (std::is_same_v<T, Complex<float>> || std::is_same_v<T, Complex<double>>) {
      using Part = decltype(T{}.re);
      check_fits<Part>(real_, op, argument);
      check_fits<Part>(imag_, op, argument);
      return T(static_cast<Part>(real_), static_cast<Part>(imag_));
    } else {
      SCATTERX_CHECK(imag_ == 0.0, ArgumentError, op, argument, " must be real for ", dtype_name(dtype_of<T>()),
                     " tensors, got ", str());
      if constexpr (std::is_same_v<T, bool>) {
        return kind_ == Kind::Int || kind_ == Kind::Bool ? int_ != 0 : real_ != 0.0;
      } else if constexpr (std::is_integral_v<T>) {
        // torch's range: [lowest, max], and for unsigned T also down to -max
        // (which wraps, as C does).
        constexpr double kMax = static_cast<double>(std::numeric_limits<T>::max());
        constexpr double kLowest =
            std::is_unsigned_v<T> ? -kMax : static_cast<double>(std::numeric_limits<T>::lowest());
        if (kind_ == Kind::Int || kind_ == Kind::Bool) {
          bool fits = true;  // every int64 fits an int64 (and 2^63 as a double would not convert back)
          if constexpr (!std::is_same_v<T, int64_t>) {
            fits = int_ >= static_cast<int64_t>(kLowest) && int_ <= static_cast<int64_t>(kMax);
          }
          SCATTERX_CHECK(fits, ArgumentError, op, argument, " ", str(), " cannot be converted to ",
                         dtype_name(dtype_of<T>()), " without overflow");
          return static_cast<T>(int_);
        }
        // max + 1 and lowest are powers of two, exact as doubles
        SCATTERX_CHECK(real_ > kLowest - 1.0 && real_ < kMax + 1.0, ArgumentError, op, argument, " ", str(),
                       " cannot be converted to ", dtype_name(dtype_of<T>()), " without overflow");
        return static_cast<T>(static_cast<int64_t>(real_));
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        const double largest = std::is_same_v<T, Half> ? 65504.0 : 3.3895313892515355e38;
        SCATTERX_CHECK(!(std::abs(real_) > largest) || std::isinf(real_), ArgumentError, op, argument, " ", str(),
                       " cannot be converted to ", dtype_name(dtype_of<T>()), " without overflow");
        return T(static_cast<float>(real_));
      } else {
        const double v = kind_ == Kind::Int ? static_cast<double>(int_) : real_;
        check_fits<T>(v, op, argument);
        return static_cast<T>(kind_ == Kind::Int ? static_cast<T>(int_) : static_cast<T>(real_));
      }
    }
  }

  // "3", "2.5", "true", "(1+2j)"
  std::string str() const;

 private:
  template <typename F>
  void check_fits(double v, const char* op, const char* argument) const {
    SCATTERX_CHECK(std::isinf(v) || std::isnan(v) || std::abs(v) <= static_cast<double>(std::numeric_limits<F>::max()),
                   ArgumentError, op, argument, " ", str(), " cannot be converted to ", dtype_name(dtype_of<F>()),
                   " without overflow");
  }

  Kind kind_;
  int64_t int_ = 0;
  double real_ = 0.0;
  double imag_ = 0.0;
};

}  // namespace scatterx

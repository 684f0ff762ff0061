// Storage types for the element types C++ lacks: IEEE half, bfloat16 and a
// complex number usable in device code.
//
// Each is layout-compatible with its PyTorch / numpy / DLPack counterpart
// (c10::Half, c10::BFloat16, c10::complex<T>, std::complex<T>), so buffers
// from those libraries can be reinterpreted without copies. Arithmetic on
// Half and BFloat16 is done by converting to float: scatterx accumulates them
// in float and rounds once (see reduce_ops.h). Conversions round to nearest
// even and keep NaN a NaN; they are plain bit manipulation, so this header
// compiles with any C++17 compiler and with nvcc.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/macros.h"

namespace scatterx {

namespace detail {

SCATTERX_INLINE uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

SCATTERX_INLINE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

SCATTERX_INLINE uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf or NaN; NaN stays quiet NaN with its top payload bits
    return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u));
  }
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (x < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5f puts the half's
    // subnormal unit (2^-24) in the float's last mantissa bit, so the float
    // adder does the round-to-nearest-even for us.
    const float shifted = bits_float(x) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(shifted) - 0x3f000000u));
  }
  const uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd;  // rebias the exponent (127 -> 15) and round to nearest even
  return static_cast<uint16_t>(sign | (x >> 13));
}

SCATTERX_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // zero or subnormal: mantissa * 2^-24 is exact in float
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return bits_float(sign | float_bits(magnitude));
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

SCATTERX_INLINE uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t x = float_bits(f);
  // Both outcomes computed, one selected: loops of conversions vectorize.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (x >> 16) | 0x0040u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

SCATTERX_INLINE float bfloat16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace detail

// IEEE 754 binary16.
struct alignas(2) Half {
  uint16_t bits = 0;

  Half() = default;
  SCATTERX_INLINE Half(float f) : bits(detail::float_to_half_bits(f)) {}  // NOLINT(google-explicit-constructor)
  SCATTERX_INLINE operator float() const { return detail::half_bits_to_float(bits); }  // NOLINT
  static SCATTERX_INLINE Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the top half of an IEEE binary32.
struct alignas(2) BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  SCATTERX_INLINE BFloat16(float f) : bits(detail::float_to_bfloat16_bits(f)) {}           // NOLINT
  SCATTERX_INLINE operator float() const { return detail::bfloat16_bits_to_float(bits); }  // NOLINT
  static SCATTERX_INLINE BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

// A complex number with the textbook arithmetic (no Annex G inf/NaN
// recovery), as PyTorch's c10::complex does.
template <typename T>
struct alignas(2 * sizeof(T)) Complex {
  T re = T(0);
  T im = T(0);

  Complex() = default;
  SCATTERX_INLINE Complex(T real) : re(real), im(T(0)) {}  // NOLINT(google-explicit-constructor)
  SCATTERX_INLINE Complex(T real, T imag) : re(real), im(imag) {}

  friend SCATTERX_INLINE Complex operator+(Complex a, Complex b) { return {a.re + b.re, a.im + b.im}; }
  friend SCATTERX_INLINE Complex operator*(Complex a, Complex b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
  friend SCATTERX_INLINE Complex operator/(Complex a, T divisor) { return {a.re / divisor, a.im / divisor}; }
  friend SCATTERX_INLINE bool operator==(Complex a, Complex b) { return a.re == b.re && a.im == b.im; }
  friend SCATTERX_INLINE bool operator!=(Complex a, Complex b) { return !(a == b); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit storage types must be 2 bytes");
static_assert(sizeof(Complex<float>) == 8 && sizeof(Complex<double>) == 16, "complex must be two packed parts");

}  // namespace scatterx

// Half and BFloat16 conversions against an independent reference: the exact
// value of every bit pattern computed with ldexp, and float -> 16-bit
// rounding by comparing distances to the two neighbouring representable
// values in double (ties to the even one), overflow to inf, NaN kept NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/test_util.h"

namespace sxt {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Magnitude of a non-negative half bit pattern below 0x7c00; 0x7c00 itself
// stands for 2^16, the next value the format would have, so that rounding
// up past 65504 can be told from rounding down.
double half_magnitude(uint32_t h) {
  const uint32_t e = (h >> 10) & 0x1f;
  const uint32_t m = h & 0x3ff;
  if (h == 0x7c00) return 65536.0;
  return e == 0 ? std::ldexp(static_cast<double>(m), -24) : std::ldexp(static_cast<double>(1024 + m), int(e) - 25);
}

// Round-to-nearest-even float -> half, by search and distance comparison.
uint16_t reference_half_bits(float f) {
  const uint32_t sign = (bits_of(f) >> 16) & 0x8000u;
  if (std::isnan(f)) return 0;  // callers check NaN separately
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(f) || a >= 65536.0) return static_cast<uint16_t>(sign | 0x7c00u);
  // largest pattern lo in [0, 0x7c00] with magnitude <= a
  uint32_t lo = 0;
  uint32_t hi = 0x7c00;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (half_magnitude(mid) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  uint32_t result = lo;
  if (half_magnitude(lo) != a) {
    const double down = a - half_magnitude(lo);
    const double up = half_magnitude(lo + 1) - a;
    if (up < down || (up == down && (lo & 1u) != 0)) result = lo + 1;
  }
  return static_cast<uint16_t>(sign | result);
}

// Round-to-nearest-even float -> bfloat16 by distance comparison.
uint16_t reference_bfloat16_bits(float f) {
  const uint32_t x = bits_of(f);
  const uint32_t sign = x & 0x80000000u;
  const uint32_t mag = x & 0x7fffffffu;
  const uint32_t lo = mag & 0xffff0000u;
  if (lo == mag) return static_cast<uint16_t>(x >> 16);
  const double a = static_cast<double>(float_of(mag));
  const double down = a - static_cast<double>(float_of(lo));
  const uint32_t next = lo + 0x10000u;
  const double up_value = next == 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(float_of(next));
  const double up = up_value - a;
  const uint32_t r = (up < down || (up == down && ((lo >> 16) & 1u) != 0)) ? next : lo;
  return static_cast<uint16_t>((sign | r) >> 16);
}

bool half_bits_nan(uint16_t b) { return (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0; }
bool bfloat16_bits_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

TEST(HalfTest, EveryBitPatternConvertsExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = static_cast<float>(Half::from_bits(static_cast<uint16_t>(h)));
    const bool negative = (h & 0x8000u) != 0;
    const uint32_t mag = h & 0x7fffu;
    if (mag > 0x7c00u) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), negative) << std::hex << h;
      const uint16_t back = Half(f).bits;
      ASSERT_TRUE(half_bits_nan(back)) << std::hex << h << " -> " << back;
      ASSERT_EQ((back & 0x8000u) != 0, negative) << std::hex << h;
      continue;
    }
    const double want = mag == 0x7c00u ? std::numeric_limits<double>::infinity() : half_magnitude(mag);
    ASSERT_EQ(static_cast<double>(f), negative ? -want : want) << std::hex << h;
    ASSERT_EQ(std::signbit(f), negative) << std::hex << h;
    ASSERT_EQ(Half(f).bits, h) << std::hex << h;
  }
}

TEST(HalfTest, RoundsToNearestEvenAtEveryTie) {
  // For every positive finite half: the value, the midpoint to the next one
  // (an exact tie), and the floats just either side of the midpoint.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const double v = half_magnitude(h);
    const float mid = static_cast<float>((v + half_magnitude(h + 1)) / 2);  // exact: one more bit than half
    ASSERT_EQ(static_cast<double>(mid), (v + half_magnitude(h + 1)) / 2);
    for (float f : {static_cast<float>(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      ASSERT_EQ(Half(f).bits, reference_half_bits(f)) << "f = " << f << " (0x" << std::hex << bits_of(f) << ")";
      ASSERT_EQ(Half(-f).bits, reference_half_bits(-f)) << "f = " << -f;
    }
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(-2.0f).bits, 0xc000);
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(65519.99f).bits, 0x7bff);  // below the overflow tie
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00);   // the tie rounds to even: inf
  EXPECT_EQ(Half(1e6f).bits, 0x7c00);       // overflow
  EXPECT_EQ(Half(-1e6f).bits, 0xfc00);
  EXPECT_EQ(Half(std::ldexp(1.0f, -24)).bits, 0x0001);             // smallest subnormal
  EXPECT_EQ(Half(std::ldexp(1.0f, -25)).bits, 0x0000);             // tie between 0 and 2^-24: even (0)
  EXPECT_EQ(Half(std::ldexp(3.0f, -25)).bits, 0x0002);             // tie between 1 and 2 units: even (2)
  EXPECT_EQ(Half(std::ldexp(1.0f, -14)).bits, 0x0400);             // smallest normal
  EXPECT_EQ(Half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);      // tie: even
  EXPECT_EQ(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);  // tie: even
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
  EXPECT_EQ(Half(1e-30f).bits, 0x0000);
  EXPECT_EQ(Half(-1e-30f).bits, 0x8000);
}

TEST(HalfTest, RandomFloatsMatchReference) {
  Rng rng(case_seed(current_test_name(), 0));
  for (int i = 0; i < 1000000; ++i) {
    const float f = float_of(static_cast<uint32_t>(rng.bits()));
    const uint16_t got = Half(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(half_bits_nan(got)) << std::hex << bits_of(f) << " -> " << got;
      ASSERT_EQ((got & 0x8000u) != 0, std::signbit(f));
    } else {
      ASSERT_EQ(got, reference_half_bits(f)) << "f = " << f << " (0x" << std::hex << bits_of(f) << ")";
    }
  }
  // and densely in the range that matters for halves (exponents -26 to 16)
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t exponent = static_cast<uint32_t>(rng.uniform(127 - 26, 127 + 16));
    const float f = float_of((static_cast<uint32_t>(rng.bits()) & 0x807fffffu) | (exponent << 23));
    ASSERT_EQ(Half(f).bits, reference_half_bits(f)) << "f = " << f << " (0x" << std::hex << bits_of(f) << ")";
  }
}

TEST(HalfTest, NaNStaysNaN) {
  for (uint32_t x : {0x7fc00000u, 0x7f800001u, 0x7f802000u, 0x7fffffffu, 0xffc00000u, 0xff800001u, 0x7fa00000u}) {
    const uint16_t h = Half(float_of(x)).bits;
    EXPECT_TRUE(half_bits_nan(h)) << std::hex << x << " -> " << h;
    EXPECT_EQ((h & 0x8000u) != 0, (x & 0x80000000u) != 0) << std::hex << x;
  }
  EXPECT_EQ(Half(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(Half(-std::numeric_limits<float>::infinity()).bits, 0xfc00);
}

TEST(BFloat16Test, EveryBitPatternConvertsExactlyAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = static_cast<float>(BFloat16::from_bits(static_cast<uint16_t>(b)));
    ASSERT_EQ(bits_of(f), b << 16) << std::hex << b;  // bfloat16 is the top half of a float
    const uint16_t back = BFloat16(f).bits;
    if (bfloat16_bits_nan(static_cast<uint16_t>(b))) {
      ASSERT_TRUE(bfloat16_bits_nan(back)) << std::hex << b << " -> " << back;
      ASSERT_EQ(back & 0x8000u, b & 0x8000u);
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16(float_of(0x3f808000u)).bits, 0x3f80);  // tie, even down
  EXPECT_EQ(BFloat16(float_of(0x3f818000u)).bits, 0x3f82);  // tie, even up
  EXPECT_EQ(BFloat16(float_of(0x3f808001u)).bits, 0x3f81);  // above the tie
  EXPECT_EQ(BFloat16(float_of(0x3f807fffu)).bits, 0x3f80);  // below the tie
  EXPECT_EQ(BFloat16(float_of(0x7f7f8000u)).bits, 0x7f80);  // overflow tie: inf
  EXPECT_EQ(BFloat16(float_of(0x7f7f7fffu)).bits, 0x7f7f);
  EXPECT_EQ(BFloat16(float_of(0x00008000u)).bits, 0x0000);  // subnormal tie: even
  EXPECT_EQ(BFloat16(float_of(0x00018000u)).bits, 0x0002);
  EXPECT_EQ(BFloat16(-0.0f).bits, 0x8000);
  Rng rng(case_seed(current_test_name(), 0));
  for (int i = 0; i < 2000000; ++i) {
    const float f = float_of(static_cast<uint32_t>(rng.bits()));
    const uint16_t got = BFloat16(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(bfloat16_bits_nan(got)) << std::hex << bits_of(f) << " -> " << got;
      ASSERT_EQ((got & 0x8000u) != 0, std::signbit(f));
    } else {
      ASSERT_EQ(got, reference_bfloat16_bits(f)) << "f = " << f << " (0x" << std::hex << bits_of(f) << ")";
    }
  }
}

TEST(BFloat16Test, NaNStaysNaN) {
  // NaNs whose payload lies only in the low 16 bits must not become inf.
  for (uint32_t x : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0xff800001u, 0x7fffffffu}) {
    const uint16_t b = BFloat16(float_of(x)).bits;
    EXPECT_TRUE(bfloat16_bits_nan(b)) << std::hex << x << " -> " << b;
    EXPECT_EQ((b & 0x8000u) != 0, (x & 0x80000000u) != 0) << std::hex << x;
  }
}

TEST(ComplexTest, TextbookArithmetic) {
  const Complex<double> a(1.5, -2.0);
  const Complex<double> b(-0.5, 4.0);
  const Complex<double> p = a * b;
  EXPECT_EQ(p.re, 1.5 * -0.5 - (-2.0 * 4.0));
  EXPECT_EQ(p.im, 1.5 * 4.0 + (-2.0 * -0.5));
  const Complex<double> s = a + b;
  EXPECT_EQ(s.re, 1.0);
  EXPECT_EQ(s.im, 2.0);
  const Complex<double> q = a / 2.0;
  EXPECT_EQ(q.re, 0.75);
  EXPECT_EQ(q.im, -1.0);
  EXPECT_TRUE(Complex<float>(2.0f) == Complex<float>(2.0f, 0.0f));
  EXPECT_TRUE(Complex<float>(2.0f) != Complex<float>(2.0f, 1.0f));
  static_assert(alignof(Complex<double>) == 16 && sizeof(Complex<double>) == 16, "layout");
}

}  // namespace
}  // namespace sxt

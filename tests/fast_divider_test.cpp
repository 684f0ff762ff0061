// FastDivider (ops/detail/fast_divider.h) against the division operator: the
// CUDA kernels decode every position with it, so a wrong quotient would send
// values to wrong destinations. Host and device share the arithmetic; the
// CUDA suite covers the device side through every op's results.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/detail/fast_divider.h"

namespace {

using scatterx::detail::FastDivider;

constexpr uint32_t kMaxDividend = (uint32_t{1} << 31) - 1;

std::vector<uint32_t> interesting_divisors() {
  std::vector<uint32_t> d;
  for (uint32_t v = 1; v <= 1024; ++v) d.push_back(v);
  for (int bit = 10; bit <= 31; ++bit) {
    const uint32_t p = uint32_t{1} << bit;
    for (uint32_t v : {p - 3, p - 1, p, p + 1, p + 3}) {
      if (v >= 1 && v <= (uint32_t{1} << 31)) d.push_back(v);
    }
  }
  for (uint32_t v : {3u * 5 * 7 * 11 * 13, 1000003u, 2147483647u, 1431655765u, 4096u * 4096u - 1}) d.push_back(v);
  return d;
}

TEST(FastDivider, MatchesDivisionNearEveryMultipleEdgeAndAtRandom) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, kMaxDividend);
  for (uint32_t divisor : interesting_divisors()) {
    const FastDivider fast(divisor);
    ASSERT_EQ(fast.divisor(), divisor);
    std::vector<uint32_t> dividends = {0, 1, divisor - 1, divisor, kMaxDividend, kMaxDividend - 1};
    // Either side of multiples of the divisor, low and near the top.
    for (uint64_t q : {uint64_t{1}, uint64_t{2}, uint64_t{kMaxDividend} / divisor}) {
      const uint64_t m = q * divisor;
      for (int64_t delta = -2; delta <= 2; ++delta) {
        const int64_t n = static_cast<int64_t>(m) + delta;
        if (n >= 0 && n <= kMaxDividend) dividends.push_back(static_cast<uint32_t>(n));
      }
    }
    for (int r = 0; r < 200; ++r) dividends.push_back(any(rng));
    for (uint32_t n : dividends) {
      if (n > kMaxDividend) continue;
      ASSERT_EQ(fast.quotient(n), n / divisor) << n << " / " << divisor;
    }
  }
}

TEST(FastDivider, SmallDivisorsOverEverySmallDividend) {
  for (uint32_t divisor = 1; divisor <= 300; ++divisor) {
    const FastDivider fast(divisor);
    for (uint32_t n = 0; n < 100000; ++n) ASSERT_EQ(fast.quotient(n), n / divisor) << n << " / " << divisor;
  }
}

TEST(FastDivider, ZeroIsTakenAsOne) {
  const FastDivider fast(0);
  EXPECT_EQ(fast.divisor(), 1u);
  EXPECT_EQ(fast.quotient(12345), 12345u);
}

}  // namespace

// Division by a divisor fixed before a kernel launches, for dividends below
// 2^31: a multiply-high, an add and a shift (Granlund and Montgomery's
// round-up method), where a 64-bit division on a GPU costs dozens of
// instructions. The CUDA kernels decode every position's coordinates by
// such divisions (positions.cuh), so with 64-bit arithmetic the decode, not
// memory, set the speed of the element-wise scatters.
//
// Contract: quotient(n) == n / divisor for every n < 2^31 and every divisor
// in [1, 2^31]; a divisor of 0 is taken as 1 (a zero-sized dimension has no
// positions to decode). Host and device compute the same bits.
#pragma once

#include <cstdint>

#include "ops/macros.h"

namespace scatterx::detail {

class FastDivider {
 public:
  FastDivider() = default;
  explicit FastDivider(uint32_t divisor) : divisor_(divisor == 0 ? 1 : divisor) {
    while ((uint64_t{1} << shift_) < divisor_) ++shift_;  // shift = ceil(log2(divisor))
    // multiplier = floor(2^32 (2^shift - divisor) / divisor) + 1 < 2^32,
    // since 2^shift < 2 divisor.
    const uint64_t excess = (uint64_t{1} << shift_) - divisor_;
    multiplier_ = static_cast<uint32_t>((excess << 32) / divisor_ + 1);
  }

  SCATTERX_HOST_DEVICE uint32_t divisor() const { return divisor_; }

  // n / divisor for n < 2^31 (then high + n < 2^32: no overflow).
  SCATTERX_HOST_DEVICE uint32_t quotient(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier_);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{n} * multiplier_) >> 32);
#endif
    return (high + n) >> shift_;
  }

 private:
  uint32_t divisor_ = 1;
  uint32_t multiplier_ = 1;
  uint32_t shift_ = 0;
};

}  // namespace scatterx::detail

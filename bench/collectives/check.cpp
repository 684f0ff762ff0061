#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/numeric.h"

namespace scatterx_bench_collectives {
namespace {

namespace sx = scatterx;

template <typename T>
double as_double(T v) {
  return static_cast<double>(static_cast<float>(v));
}
template <>
double as_double<double>(double v) {
  return v;
}

template <typename T>
void compare_typed(const void* got_p, const void* want_p, int64_t n, double rtol, double atol, Check& c) {
  const auto* got = static_cast<const T*>(got_p);
  const auto* want = static_cast<const T*>(want_p);
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    c.bitwise = 0;
    const double a = as_double(got[i]);
    const double b = as_double(want[i]);
    double diff = std::fabs(a - b);
    if (std::isnan(diff)) diff = INFINITY;
    c.max_abs = std::max(c.max_abs, diff);
    if (!(diff <= atol + rtol * std::fabs(b))) ++c.mismatches;
  }
}

}  // namespace

void compare(const sx::TensorView& got, const sx::TensorView& want, bool exact, Check& c) {
  if (got.numel() != want.numel() || got.dtype() != want.dtype()) {
    c.error = 1;
    c.message = "scatterx's result is " + got.str() + ", MPI's " + want.str();
    return;
  }
  double rtol = 0, atol = 0;
  if (!exact) {
    rtol = atol = want.dtype() == sx::DType::BFloat16 ? 1e-2 : want.dtype() == sx::DType::Float64 ? 1e-12 : 1e-5;
  }
  switch (want.dtype()) {
    case sx::DType::Float32:
      compare_typed<float>(got.data(), want.data(), want.numel(), rtol, atol, c);
      break;
    case sx::DType::Float64:
      compare_typed<double>(got.data(), want.data(), want.numel(), rtol, atol, c);
      break;
    case sx::DType::BFloat16:
      compare_typed<sx::BFloat16>(got.data(), want.data(), want.numel(), rtol, atol, c);
      break;
    default:
      break;
  }
}

}  // namespace scatterx_bench_collectives

#include "data.h"

#include <cstring>

#include "ops/numeric.h"

namespace scatterx_bench_collectives {
namespace {

namespace sx = scatterx;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Value i of stream `seed`: uniform in [-1, 1), exactly representable in every dtype used here after
// rounding (the rounding is the dtype's).
float value_at(uint64_t seed, int64_t i) {
  const uint64_t bits = splitmix64(seed * 0x100000001B3ull + static_cast<uint64_t>(i));
  return static_cast<float>(static_cast<double>(bits >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

}  // namespace

void fill(const sx::TensorView& t, uint64_t seed) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case sx::DType::Float32: {
      auto* p = static_cast<float*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = value_at(seed, i);
      break;
    }
    case sx::DType::Float64: {
      auto* p = static_cast<double*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(value_at(seed, i)) + 0x1.0p-40 * value_at(~seed, i);
      break;
    }
    case sx::DType::BFloat16: {
      auto* p = static_cast<sx::BFloat16*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = sx::BFloat16(value_at(seed, i));
      break;
    }
    default:
      break;
  }
}

void poison(const sx::TensorView& t) { std::memset(t.data(), 0xff, static_cast<size_t>(t.numel() * t.element_size())); }

size_t nbytes(const sx::TensorView& t) { return static_cast<size_t>(t.numel() * t.element_size()); }

sx::Tensor touched(const sx::Shape& shape, sx::DType dtype) {
  sx::Tensor t = sx::Tensor::empty(shape, dtype);
  std::memset(t.data(), 0, nbytes(t));
  return t;
}

}  // namespace scatterx_bench_collectives

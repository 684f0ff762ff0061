#include "bench_data.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

namespace scatterx_bench {

using scatterx::DType;
using scatterx::Tensor;

namespace {

constexpr uint64_t kSeed = 20261122;

// Fills n values with f(rng) in parallel. Each block of 64k values has its
// own generator seeded from (seed, block), so the data does not depend on the
// thread count.
template <typename T, typename F>
void fill(T* data, int64_t n, uint64_t seed, F f) {
  constexpr int64_t kBlock = int64_t{1} << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    Rng rng(seed * 0x100000001b3ull + static_cast<uint64_t>(b));
    const int64_t end = std::min(n, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < end; ++i) data[i] = f(rng);
  }
}

// +-1: repeated scatters into the same destination (the benchmarks never
// reset it) then stay finite and normal for every reduce, prod included, so
// no denormal or overflow slows down later iterations.
template <typename T>
T plus_minus_one(Rng& rng) {
  return T((rng.next() >> 63) ? 1.0f : -1.0f);
}

template <typename T>
T symmetric_uniform(Rng& rng) {
  return T(static_cast<float>(2.0 * rng.uniform() - 1.0));
}

// An uninitialized tensor whose pages are all written (in parallel, as the
// kernels will write them), so that no page fault lands in a timed region.
Tensor touched_zeros(const scatterx::Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<char*>(t.data());
  const int64_t bytes = t.numel() * t.element_size();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < bytes; i += 4096)
    std::memset(p + i, 0, static_cast<size_t>(std::min<int64_t>(4096, bytes - i)));
  return t;
}

}  // namespace

Sizes& sizes() {
  static Sizes s;
  return s;
}

const char* dist_name(Dist d) { return d == Dist::Uniform ? "uniform" : "powerlaw"; }

Tensor make_permutation(int64_t n, uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::Int64);
  auto* p = t.data_as<int64_t>();
  std::iota(p, p + n, int64_t{0});
  Rng rng(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.below(i + 1)]);  // Fisher-Yates
  return t;
}

Tensor make_index(int64_t count, int64_t range, Dist dist, uint64_t seed) {
  Tensor t = Tensor::empty({count}, DType::Int64);
  auto* p = t.data_as<int64_t>();
  Rng rng(seed);
  if (dist == Dist::Uniform) {
    for (int64_t i = 0; i < count; ++i) p[i] = rng.below(range);
    return t;
  }
  std::vector<double> cdf(static_cast<size_t>(range));
  double total = 0.0;
  for (int64_t k = 0; k < range; ++k) cdf[static_cast<size_t>(k)] = total += 1.0 / static_cast<double>(k + 1);
  const Tensor ids = make_permutation(range, seed ^ 0x5bd1e995ull);
  const auto* id = ids.data_as<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const double u = rng.uniform() * total;
    const auto rank = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    p[i] = id[std::min<int64_t>(rank, range - 1)];
  }
  return t;
}

const GnnData& gnn_data() {
  static const GnnData data = [] {
    const Sizes& s = sizes();
    GnnData d;
    d.table = Tensor::empty({s.nodes, s.features}, DType::Float32);
    fill(d.table.data_as<float>(), d.table.numel(), kSeed + 1, symmetric_uniform<float>);
    d.messages = Tensor::empty({s.edges, s.features}, DType::Float32);
    fill(d.messages.data_as<float>(), d.messages.numel(), kSeed + 2, plus_minus_one<float>);
    d.gathered = touched_zeros({s.edges, s.features}, DType::Float32);
    d.aggregate = touched_zeros({s.nodes, s.features}, DType::Float32);
    d.index[static_cast<int>(Dist::Uniform)] = make_index(s.edges, s.nodes, Dist::Uniform, kSeed + 3);
    d.index[static_cast<int>(Dist::PowerLaw)] = make_index(s.edges, s.nodes, Dist::PowerLaw, kSeed + 4);
    d.src_index = make_index(s.edges, s.nodes, Dist::Uniform, kSeed + 5);
    return d;
  }();
  return data;
}

scatterx::TensorView gnn_messages_at_16_bytes() {
  static const Tensor storage = [] {
    const Tensor& m = gnn_data().messages;
    Tensor t = Tensor::empty({m.numel() + 16}, DType::Float32);
    std::memcpy(t.data_as<float>() + 4, m.data(), static_cast<size_t>(m.numel()) * sizeof(float));
    return t;
  }();
  const Tensor& m = gnn_data().messages;
  return scatterx::TensorView(storage.data_as<float>() + 4, DType::Float32, m.sizes());
}

const MoeData& moe_data() {
  static const MoeData data = [] {
    const Sizes& s = sizes();
    using scatterx::BFloat16;
    MoeData d;
    d.tokens = Tensor::empty({s.tokens, s.hidden}, DType::BFloat16);
    fill(d.tokens.data_as<BFloat16>(), d.tokens.numel(), kSeed + 5, symmetric_uniform<BFloat16>);
    d.permuted = Tensor::empty({s.tokens, s.hidden}, DType::BFloat16);
    fill(d.permuted.data_as<BFloat16>(), d.permuted.numel(), kSeed + 6, plus_minus_one<BFloat16>);
    d.combined = touched_zeros({s.tokens, s.hidden}, DType::BFloat16);
    d.perm = make_permutation(s.tokens, kSeed + 7);
    return d;
  }();
  return data;
}

CopyBuffers copy_buffers(int64_t bytes) {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  static std::unique_ptr<char, Free> src, dst;
  static int64_t capacity = 0;
  if (bytes > capacity) {
    const int64_t rounded = (bytes + 4095) / 4096 * 4096;
    src.reset(static_cast<char*>(std::aligned_alloc(4096, static_cast<size_t>(rounded))));
    dst.reset(static_cast<char*>(std::aligned_alloc(4096, static_cast<size_t>(rounded))));
    if (!src || !dst) std::abort();
      // Touch every page (in parallel, as the copies will run) so that page
      // faults stay out of the measurement.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rounded; i += 4096) {
      std::memset(src.get() + i, 1, 4096);
      std::memset(dst.get() + i, 0, 4096);
    }
    capacity = rounded;
  }
  return {src.get(), dst.get()};
}

}  // namespace scatterx_bench

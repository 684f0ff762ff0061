// scatterx_bench_cuda: the CUDA backend's throughput on the GNN, MoE and
// row-gather workloads of issue 5, beside a device-to-device copy measured in
// the same run (the bandwidth the floors are stated against).
//
// Each benchmark times one op call with CUDA events (manual time); state the
// outputs are reset outside the timed region. Counters: `bytes` is the byte
// model of one call (index read + source read + destination write, or
// read-modify-write for the scatters), and bytes_per_second follows from it.
// bench/bench_cuda_torch.py times torch's ops on the same workloads, built by
// the same index formulas (keep the two in sync); bench/gpu_report.py puts
// both side by side with the floors; scripts/gpu_suite.sh runs all three.
//
// Float inputs are filled with the byte 0x3f (0.747 in float32, 0.746 in
// bfloat16), except the sources of amax, amin and prod: there every value
// would equal the destination's and an atomic extremum would never write, so
// they take a Weyl sequence in [0.5, 1.5) (random_values) and the running
// extremum and product keep changing, as on real data.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "scatterx.h"

namespace {

using scatterx::Device;
using scatterx::DType;
using scatterx::Reduce;
using scatterx::Shape;
using scatterx::Tensor;
using scatterx::TensorView;

constexpr int64_t kGiB = int64_t{1} << 30;
const Device kGpu = Device::cuda(0);

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "scatterx_bench_cuda: %s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

// ---------------------------------------------------------------- inputs
// The formulas of bench/bench_cuda_torch.py, bit for bit.

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform(uint64_t seed, uint64_t i) {
  return static_cast<double>(splitmix64((seed << 32) + i) >> 11) * 0x1.0p-53;
}

std::vector<int64_t> uniform_index(uint64_t seed, int64_t n, int64_t count) {
  std::vector<int64_t> idx(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) idx[i] = static_cast<int64_t>(std::floor(uniform(seed, i) * n));
  return idx;
}

std::vector<int64_t> powerlaw_index(uint64_t seed, int64_t n, int64_t count) {
  std::vector<int64_t> idx(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double u = uniform(seed, i);
    idx[i] = std::min<int64_t>(n - 1, static_cast<int64_t>(std::floor(n * u * u * u)));
  }
  return idx;
}

// Far more skewed than powerlaw_index: value 0 takes a quarter of the index
// (u^8 < 1/n for u < n^(-1/8)), as a hot expert or a hub node does. The
// product is taken left to right, as the Python side does.
std::vector<int64_t> skewed_index(uint64_t seed, int64_t n, int64_t count) {
  std::vector<int64_t> idx(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double u = uniform(seed, i);
    idx[i] = std::min<int64_t>(n - 1, static_cast<int64_t>(std::floor(n * u * u * u * u * u * u * u * u)));
  }
  return idx;
}

std::vector<int64_t> permutation_index(int64_t n) {  // n a power of two: an odd multiplier is a bijection
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    idx[i] = static_cast<int64_t>((static_cast<uint64_t>(i) * 0x9E3779B1ull + 7) & (n - 1));
  return idx;
}

// MoE routing: expert of (token t, slot k) = floor(uniform(3, t * K + k) * X);
// the rows in expert order are a stable sort of (t, k) by expert, and each
// row's token is its flat position / K.
std::vector<int64_t> moe_sorted_token_ids(int64_t tokens, int64_t top_k, int64_t experts) {
  const int64_t rows = tokens * top_k;
  std::vector<int64_t> expert(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) expert[r] = static_cast<int64_t>(std::floor(uniform(3, r) * experts));
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return expert[a] < expert[b]; });
  for (int64_t& o : order) o /= top_k;
  return order;
}

Tensor device_index(const std::vector<int64_t>& host) {
  Tensor t = Tensor::empty({static_cast<int64_t>(host.size())}, DType::Int64, kGpu);
  check(cudaMemcpy(t.data(), host.data(), host.size() * sizeof(int64_t), cudaMemcpyHostToDevice), "cudaMemcpy");
  return t;
}

Tensor device_values(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype, kGpu);
  check(cudaMemset(t.data(), 0x3f, static_cast<size_t>(t.numel() * t.element_size())), "cudaMemset");
  return t;
}

// float32 values[i] = 0.5 + w * 2^-24, w = the top 24 bits of i * 0x9E3779B97F4A7C15
// (mod 2^64), computed in double and rounded to float32 as torch does: spread
// over [0.5, 1.5) in no order that a destination's arrivals follow.
Tensor random_values(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::Float32, kGpu);
  std::vector<float> host(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < host.size(); ++i) {
    const uint64_t w = (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull) >> 40;
    host[i] = static_cast<float>(0.5 + static_cast<double>(w) * 0x1.0p-24);
  }
  check(cudaMemcpy(t.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  return t;
}

// A 1-d index seen as [n, cols] with stride 0 along the columns (torch's
// index[:, None].expand(n, cols)).
TensorView expanded(const Tensor& index, int64_t cols) {
  return TensorView(index.data(), DType::Int64, {index.numel(), cols}, {1, 0}, kGpu);
}

// ---------------------------------------------------------------- timing

// Times `op` with CUDA events; `reset` runs before each call, untimed.
void time_calls(benchmark::State& state, double bytes, const std::function<void()>& op,
                const std::function<void()>& reset = {}) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int warm = 0; warm < 2; ++warm) {
    if (reset) reset();
    op();
  }
  check(cudaDeviceSynchronize(), "warm-up");
  for (auto _ : state) {
    if (reset) reset();
    check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    op();
    check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3);
  }
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  state.counters["bytes"] = bytes;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * static_cast<double>(state.iterations())));
}

// Runs the op with index checks off (the caller validated) when `unchecked`.
struct Checks {
  explicit Checks(bool unchecked) : previous_(scatterx::cuda::index_checks()) {
    scatterx::cuda::set_index_checks(!unchecked);
  }
  ~Checks() { scatterx::cuda::set_index_checks(previous_); }
  bool previous_;
};

struct Deterministic {
  explicit Deterministic(bool on) : previous_(scatterx::cuda::deterministic()) {
    scatterx::cuda::set_deterministic(on);
  }
  ~Deterministic() { scatterx::cuda::set_deterministic(previous_); }
  bool previous_;
};

using Path = scatterx::cuda::ScatterPath;
struct ForcedPath {
  explicit ForcedPath(Path path) : previous_(scatterx::cuda::scatter_path()) { scatterx::cuda::set_scatter_path(path); }
  ~ForcedPath() { scatterx::cuda::set_scatter_path(previous_); }
  Path previous_;
};

// Workload name suffixes of the forced paths ("" for Auto).
std::string path_suffix(Path path) { return path == Path::Atomic ? "/atomic" : path == Path::Sorted ? "/sorted" : ""; }

// ---------------------------------------------------------------- workloads

void copy(benchmark::State& state) {
  const Tensor src = device_values({kGiB}, DType::UInt8);
  const Tensor dst = Tensor::empty({kGiB}, DType::UInt8, kGpu);
  time_calls(state, 2.0 * kGiB, [&] {
    check(cudaMemcpyAsync(dst.data(), src.data(), kGiB, cudaMemcpyDeviceToDevice, nullptr), "cudaMemcpyAsync");
  });
}

// index_select (or gather with an expanded index) of rows of `row_bytes`
// from a 1 GiB float32 table, n = rows of the table, uniform random rows.
void row_gather(benchmark::State& state, int64_t row_bytes, bool use_gather, bool unchecked) {
  const int64_t n = kGiB / row_bytes;
  const int64_t cols = row_bytes / 4;
  const Tensor table = device_values({n, cols}, DType::Float32);
  const Tensor index = device_index(uniform_index(1, n, n));
  const Tensor out = Tensor::empty({n, cols}, DType::Float32, kGpu);
  const Checks checks(unchecked);
  time_calls(state, 8.0 * n + 2.0 * n * row_bytes, [&] {
    if (use_gather) {
      scatterx::gather_out(out, table, 0, expanded(index, cols));
    } else {
      scatterx::index_select_out(out, table, 0, index);
    }
  });
}

void scatter_add_unique(benchmark::State& state) {
  const int64_t n = int64_t{1} << 21;
  const Tensor self = Tensor::empty({n, 128}, DType::Float32, kGpu);
  const Tensor index = device_index(permutation_index(n));
  const Tensor src = device_values({n, 128}, DType::Float32);
  time_calls(
      state, 8.0 * n + 3.0 * n * 512, [&] { scatterx::scatter_add_(self, 0, expanded(index, 128), src); },
      [&] { check(cudaMemsetAsync(self.data(), 0, static_cast<size_t>(n) * 512, nullptr), "cudaMemsetAsync"); });
}

// GNN aggregation: 2^23 edges onto 2^20 nodes with power-law in-degrees, 64
// float32 features per edge.
void gnn_powerlaw(benchmark::State& state, Reduce reduce, bool deterministic, bool unchecked, Path path = Path::Auto) {
  const int64_t nodes = int64_t{1} << 20;
  const int64_t edges = int64_t{1} << 23;
  const int64_t features = 64;
  const Tensor self = Tensor::empty({nodes, features}, DType::Float32, kGpu);
  const Tensor index = device_index(powerlaw_index(2, nodes, edges));
  const Tensor src =
      reduce == Reduce::Sum ? device_values({edges, features}, DType::Float32) : random_values({edges, features});
  const Deterministic mode(deterministic);
  const Checks checks(unchecked);
  const ForcedPath forced(path);
  const TensorView idx = expanded(index, features);
  time_calls(
      state, 8.0 * edges + 3.0 * edges * features * 4,
      [&] {
        if (reduce == Reduce::Sum) {
          scatterx::scatter_add_(self, 0, idx, src);
        } else {
          scatterx::scatter_reduce_(self, 0, idx, src, reduce, true);
        }
      },
      [&] {
        check(cudaMemsetAsync(self.data(), 0x3f, static_cast<size_t>(nodes * features * 4), nullptr),
              "cudaMemsetAsync");
      });
}

// Element scatter (1-d, one float32 per position): 2^24 values onto 2^16
// destinations by skewed_index, the case where one destination's atomics
// serialize (Auto sorts here; /atomic and /sorted force a path).
void skewed_elements(benchmark::State& state, Reduce reduce, Path path) {
  const int64_t n = int64_t{1} << 16;
  const int64_t count = int64_t{1} << 24;
  const Tensor self = Tensor::empty({n}, DType::Float32, kGpu);
  const Tensor index = device_index(skewed_index(4, n, count));
  const Tensor src = reduce == Reduce::Sum ? device_values({count}, DType::Float32) : random_values({count});
  const ForcedPath forced(path);
  time_calls(
      state, 12.0 * count + 8.0 * n,
      [&] {
        if (reduce == Reduce::Sum) {
          scatterx::scatter_add_(self, 0, index, src);
        } else {
          scatterx::scatter_reduce_(self, 0, index, src, reduce, true);
        }
      },
      [&] { check(cudaMemsetAsync(self.data(), 0x3f, static_cast<size_t>(n * 4), nullptr), "cudaMemsetAsync"); });
}

// MoE with 2^16 tokens of 4096 bfloat16 (8 KiB rows), top-2 of 64 experts.
constexpr int64_t kTokens = int64_t{1} << 16;
constexpr int64_t kTopK = 2;
constexpr int64_t kExperts = 64;
constexpr int64_t kHidden = 4096;

void moe_permute(benchmark::State& state) {
  const Tensor tokens = device_values({kTokens, kHidden}, DType::BFloat16);
  const Tensor ids = device_index(moe_sorted_token_ids(kTokens, kTopK, kExperts));
  const Tensor out = Tensor::empty({kTokens * kTopK, kHidden}, DType::BFloat16, kGpu);
  const double rows = static_cast<double>(kTokens * kTopK);
  time_calls(state, 8.0 * rows + 2.0 * rows * kHidden * 2, [&] { scatterx::index_select_out(out, tokens, 0, ids); });
}

// Rows back to their tokens, weighted by their router probabilities and
// summed (index_add_weighted_, one pass; torch: index_add_ of rows * probs).
void moe_unpermute(benchmark::State& state) {
  const Tensor expert_out = device_values({kTokens * kTopK, kHidden}, DType::BFloat16);
  const Tensor ids = device_index(moe_sorted_token_ids(kTokens, kTopK, kExperts));
  const Tensor probs = device_values({kTokens * kTopK}, DType::BFloat16);
  const Tensor out = Tensor::empty({kTokens, kHidden}, DType::BFloat16, kGpu);
  const double rows = static_cast<double>(kTokens * kTopK);
  time_calls(
      state, 10.0 * rows + 3.0 * rows * kHidden * 2,
      [&] { scatterx::index_add_weighted_(out, 0, ids, expert_out, probs); },
      [&] {
        check(cudaMemsetAsync(out.data(), 0, static_cast<size_t>(kTokens * kHidden * 2), nullptr), "cudaMemsetAsync");
      });
}

void register_all() {
  auto add = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(("cuda/" + name).c_str(), fn)->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  add("copy", copy);
  for (int64_t row : {512, 2048, 8192}) {
    add("index_select/row_bytes:" + std::to_string(row),
        [row](benchmark::State& s) { row_gather(s, row, false, false); });
  }
  add("index_select/row_bytes:512/unchecked", [](benchmark::State& s) { row_gather(s, 512, false, true); });
  add("gather_rows/row_bytes:512", [](benchmark::State& s) { row_gather(s, 512, true, false); });
  add("scatter_add/unique/row_bytes:512", scatter_add_unique);
  add("scatter_add/powerlaw/feat:64", [](benchmark::State& s) { gnn_powerlaw(s, Reduce::Sum, false, false); });
  add("scatter_add/powerlaw/feat:64/unchecked", [](benchmark::State& s) { gnn_powerlaw(s, Reduce::Sum, false, true); });
  add("scatter_add/powerlaw/feat:64/deterministic",
      [](benchmark::State& s) { gnn_powerlaw(s, Reduce::Sum, true, false); });
  // The path choice: Auto beside both forced paths, on the GNN rows and on
  // the skewed elements (tuning data for ops/detail/cuda/contention.h).
  for (Path path : {Path::Atomic, Path::Sorted}) {
    add("scatter_add/powerlaw/feat:64" + path_suffix(path),
        [path](benchmark::State& s) { gnn_powerlaw(s, Reduce::Sum, false, false, path); });
    add("scatter_reduce/amax/powerlaw/feat:64" + path_suffix(path),
        [path](benchmark::State& s) { gnn_powerlaw(s, Reduce::Amax, false, false, path); });
    add("scatter_reduce/prod/powerlaw/feat:64" + path_suffix(path),
        [path](benchmark::State& s) { gnn_powerlaw(s, Reduce::Prod, false, false, path); });
  }
  for (Path path : {Path::Auto, Path::Atomic, Path::Sorted}) {
    add("scatter_add/skewed/elements" + path_suffix(path),
        [path](benchmark::State& s) { skewed_elements(s, Reduce::Sum, path); });
    add("scatter_reduce/amax/skewed/elements" + path_suffix(path),
        [path](benchmark::State& s) { skewed_elements(s, Reduce::Amax, path); });
  }
  for (auto [name, reduce] :
       {std::pair{"amax", Reduce::Amax}, std::pair{"amin", Reduce::Amin}, std::pair{"prod", Reduce::Prod}}) {
    const Reduce r = reduce;
    add(std::string("scatter_reduce/") + name + "/powerlaw/feat:64",
        [r](benchmark::State& s) { gnn_powerlaw(s, r, false, false); });
  }
  add("moe/permute/hidden:4096", moe_permute);
  add("moe/unpermute/hidden:4096", moe_unpermute);
}

}  // namespace

int main(int argc, char** argv) {
  if (scatterx::cuda::device_count() == 0) {
    std::printf("scatterx_bench_cuda: no CUDA device (or no CUDA backend in this build); nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  benchmark::AddCustomContext("device", prop.name);
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

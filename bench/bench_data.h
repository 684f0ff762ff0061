// Inputs for scatterx_bench: seeded generators and the GNN / MoE datasets,
// built once (outside any timed region) and shared by every benchmark.
#pragma once

#include <cstdint>
#include <string>

#include "scatterx.h"

namespace scatterx_bench {

// Problem sizes. kFull is what the benchmark names describe (1M edges x 64
// float32 into 100k nodes; 16k tokens x 4096 bfloat16); kSmall is a quick
// smoke-test size selected with --size=small.
struct Sizes {
  int64_t nodes = 100000;
  int64_t edges = 1000000;
  int64_t features = 64;
  int64_t tokens = 16384;
  int64_t hidden = 4096;
};
Sizes& sizes();

// splitmix64: small, fast, and the same sequence on every platform (unlike
// the std:: distributions), so every run benchmarks the same data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n).
  int64_t below(int64_t n) {
    const auto v = static_cast<int64_t>(uniform() * static_cast<double>(n));
    return v < n ? v : n - 1;
  }

 private:
  uint64_t state_;
};

enum class Dist { Uniform, PowerLaw };
const char* dist_name(Dist d);  // "uniform", "powerlaw"

// A 1-d int64 tensor of `count` values in [0, range). PowerLaw draws ranks
// from a Zipf distribution with exponent 1 (P(rank k) ~ 1 / (k + 1)) and maps
// them through a random permutation of [0, range), so the hub nodes are
// scattered over the id space instead of sitting at the front.
scatterx::Tensor make_index(int64_t count, int64_t range, Dist dist, uint64_t seed);
// A random permutation of [0, n) as a 1-d int64 tensor.
scatterx::Tensor make_permutation(int64_t n, uint64_t seed);

// GNN message passing: `edges` messages of `features` float32 scattered into
// `nodes` nodes, and the matching gather of `edges` rows from a node table.
struct GnnData {
  scatterx::Tensor table;      // [nodes, features]: gather / index_select source
  scatterx::Tensor messages;   // [edges, features]: scatter source, values +-1 (see bench_data.cpp)
  scatterx::Tensor gathered;   // [edges, features]: gather / index_select output
  scatterx::Tensor aggregate;  // [nodes, features]: scatter destination
  scatterx::Tensor index[2];   // [edges] int64, by Dist
  scatterx::Tensor src_index;  // [edges] int64 uniform: gather_scatter's source nodes (index[] its destinations)
};
const GnnData& gnn_data();
// GnnData::messages' values at an address 16 bytes past a cache line, as
// numpy allocates (torch.from_numpy keeps that address): each 256-byte row
// then spans 5 cache lines. Built on first use.
scatterx::TensorView gnn_messages_at_16_bytes();

// MoE token routing: `tokens` rows of `hidden` bfloat16 permuted and back.
struct MoeData {
  scatterx::Tensor tokens;    // [tokens, hidden]: dispatch source
  scatterx::Tensor permuted;  // [tokens, hidden]: dispatch output, unpermute source (values +-1)
  scatterx::Tensor combined;  // [tokens, hidden]: unpermute destination
  scatterx::Tensor perm;      // [tokens] int64 random permutation
};
const MoeData& moe_data();

// Two buffers of at least `bytes` bytes each, touched, 64-byte aligned, for
// the memcpy baselines. Grows (reallocates) on demand.
struct CopyBuffers {
  char* src = nullptr;
  char* dst = nullptr;
};
CopyBuffers copy_buffers(int64_t bytes);

}  // namespace scatterx_bench

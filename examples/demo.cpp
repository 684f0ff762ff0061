// scatterx_demo: the two workloads scatterx is built for, end to end, with
// timings and a check of the results against plain loops.
//
//  (a) GNN message passing on a random power-law graph: gather source-node
//      features along the edges (index_select), then aggregate the messages
//      into their destination nodes with scatter_reduce_ (sum, mean, amax;
//      index expanded over the features as torch_scatter users do) and with
//      index_add_ (1-d index).
//  (b) MoE token routing: sort tokens by their (top-1) expert, dispatch them
//      with index_select, scale per expert, and combine them back with
//      index_add_ weighted by the router probability.
//
// Usage: scatterx_demo [--nodes N] [--edges E] [--features F] [--tokens T]
//                      [--hidden H] [--threads P]
// Exits 1 if a check fails, 2 on bad arguments.

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "scatterx.h"

namespace {

using scatterx::BFloat16;
using scatterx::DType;
using scatterx::Reduce;
using scatterx::Tensor;
using scatterx::TensorView;
using Clock = std::chrono::steady_clock;

struct Options {
  int64_t nodes = 100000;
  int64_t edges = 1000000;
  int64_t features = 64;
  int64_t tokens = 16384;
  int64_t hidden = 4096;
  int threads = 0;  // 0: OpenMP's default
};

// splitmix64, so that the demo generates the same data everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t below(int64_t n) {
    return std::min<int64_t>(static_cast<int64_t>(uniform() * static_cast<double>(n)), n - 1);
  }

 private:
  uint64_t state_;
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Best of `reps` timed runs of op(), each preceded by an untimed reset().
template <typename Reset, typename Op>
double best_ms(int reps, Reset reset, Op op) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    reset();
    const auto start = Clock::now();
    op();
    best = std::min(best, ms_since(start));
  }
  return best;
}
constexpr int kReps = 3;
auto no_reset = [] {};

void zero(const Tensor& t) { std::memset(t.data(), 0, static_cast<size_t>(t.numel() * t.element_size())); }

template <typename T>
double checksum(const Tensor& t) {
  const T* p = t.data_as<T>();
  double s = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) s += static_cast<double>(static_cast<float>(p[i]));
  return s;
}

// One line per step: what, time, GB/s under the byte model of bench/ (index
// + rows read + rows written, destination rows counted twice for reductions).
void print_step(const char* step, const std::string& what, double ms, double bytes, double sum) {
  std::printf("  %-9s %-48s %8.2f ms %7.2f GB/s   checksum %+.6e\n", step, what.c_str(), ms, bytes / (ms * 1e6), sum);
}

// ---- (a) GNN ----------------------------------------------------------------

// `count` node ids in [0, nodes) drawn from a Zipf law (exponent 1) over a
// random permutation of the nodes: a few hubs, a long tail.
std::vector<int64_t> power_law_ids(int64_t count, int64_t nodes, Rng& rng) {
  std::vector<int64_t> id(static_cast<size_t>(nodes));
  std::iota(id.begin(), id.end(), int64_t{0});
  for (int64_t i = nodes - 1; i > 0; --i) std::swap(id[i], id[rng.below(i + 1)]);
  std::vector<double> cdf(static_cast<size_t>(nodes));
  double total = 0.0;
  for (int64_t k = 0; k < nodes; ++k) cdf[k] = total += 1.0 / static_cast<double>(k + 1);
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (auto& v : out) {
    const auto rank = std::upper_bound(cdf.begin(), cdf.end(), rng.uniform() * total) - cdf.begin();
    v = id[std::min<int64_t>(rank, nodes - 1)];
  }
  return out;
}

Tensor to_tensor(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::Int64);
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}

// Checks node `node` of every aggregate against a loop over its incoming
// edges (in edge order, as scatterx folds them). Returns the mismatch count.
int check_node(int64_t node, const std::vector<int64_t>& src, const std::vector<int64_t>& dst, const Tensor& x,
               const Tensor& sum, const Tensor& mean, const Tensor& amax, const Tensor& added) {
  std::vector<int64_t> sources;  // source node of each incoming edge, in edge order
  for (size_t e = 0; e < dst.size(); ++e) {
    if (dst[e] == node) sources.push_back(src[e]);
  }
  const auto degree = static_cast<int64_t>(sources.size());
  const int64_t f_count = x.size(1);
  int bad = 0;
  for (int64_t f = 0; f < f_count; ++f) {
    float s = 0.0f, m = -INFINITY;
    for (const int64_t from : sources) {
      const float v = x.data_as<float>()[from * f_count + f];
      s += v;
      m = std::max(m, v);
    }
    // Nodes without incoming edges keep the initial zeros (include_self=false).
    const float want_mean = degree ? s / static_cast<float>(degree) : 0.0f;
    const float want_amax = degree ? m : 0.0f;
    const int64_t at = node * f_count + f;
    bad += sum.data_as<float>()[at] != s;
    bad += mean.data_as<float>()[at] != want_mean;
    bad += amax.data_as<float>()[at] != want_amax;
    bad += added.data_as<float>()[at] != s;
  }
  std::printf("  check     node %-7lld in-degree %-7lld sum, mean, amax, index_add vs a plain loop: %s\n",
              static_cast<long long>(node), static_cast<long long>(degree), bad ? "MISMATCH" : "OK");
  return bad;
}

int run_gnn(const Options& o) {
  const int64_t n = o.nodes, e = o.edges, f = o.features;
  std::printf("[GNN] power-law graph: %lld nodes, %lld edges, %lld float32 features per node\n",
              static_cast<long long>(n), static_cast<long long>(e), static_cast<long long>(f));
  auto start = Clock::now();
  Rng rng(20261122);
  const std::vector<int64_t> src = power_law_ids(e, n, rng);
  const std::vector<int64_t> dst = power_law_ids(e, n, rng);
  const Tensor src_index = to_tensor(src), dst_index = to_tensor(dst);
  // torch_scatter style: one index per edge, broadcast over the features
  // (stride 0, no copy).
  const TensorView dst_expanded = dst_index.unsqueeze(1).expand({e, f});
  const Tensor x = Tensor::empty({n, f}, DType::Float32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>(2.0 * rng.uniform() - 1.0);
  std::vector<int64_t> in_degree(static_cast<size_t>(n), 0);
  for (const int64_t d : dst) ++in_degree[d];
  const int64_t hub = std::max_element(in_degree.begin(), in_degree.end()) - in_degree.begin();
  const int64_t isolated = std::count(in_degree.begin(), in_degree.end(), 0);
  std::printf("  data      generated in %.0f ms; max in-degree %lld (node %lld), %lld nodes (%.1f%%) have none\n",
              ms_since(start), static_cast<long long>(in_degree[hub]), static_cast<long long>(hub),
              static_cast<long long>(isolated), 100.0 * static_cast<double>(isolated) / static_cast<double>(n));

  const double row = static_cast<double>(f) * 4.0, idx = static_cast<double>(e) * 8.0;
  const double copy_bytes = idx + 2.0 * row * static_cast<double>(e);
  // the destination [n, f] is read and written once, however many edges land on a node
  const double reduce_bytes = idx + row * static_cast<double>(e) + 2.0 * row * static_cast<double>(n);

  const Tensor messages = Tensor::empty({e, f}, DType::Float32);
  double ms = best_ms(kReps, no_reset, [&] { scatterx::index_select_out(messages, x, 0, src_index); });
  print_step("gather", "index_select(x, 0, src) -> messages [E, F]", ms, copy_bytes, checksum<float>(messages));

  struct Agg {
    Reduce reduce;
    const char* what;
    Tensor out;
  };
  Agg aggs[] = {{Reduce::Sum, "scatter_reduce_(sum,  dim 0, dst expanded)", {}},
                {Reduce::Mean, "scatter_reduce_(mean, dim 0, dst expanded)", {}},
                {Reduce::Amax, "scatter_reduce_(amax, dim 0, dst expanded)", {}}};
  for (Agg& a : aggs) {
    a.out = Tensor::empty({n, f}, DType::Float32);
    // As PyG: zeros, include_self=false, so nodes without edges stay 0.
    ms = best_ms(
        kReps, [&] { zero(a.out); },
        [&] { scatterx::scatter_reduce_(a.out, 0, dst_expanded, messages, a.reduce, /*include_self=*/false); });
    print_step("aggregate", a.what, ms, reduce_bytes, checksum<float>(a.out));
  }
  const Tensor added = Tensor::empty({n, f}, DType::Float32);
  ms = best_ms(
      kReps, [&] { zero(added); }, [&] { scatterx::index_add_(added, 0, dst_index, messages); });
  print_step("aggregate", "index_add_(dim 0, dst 1-d)", ms, reduce_bytes, checksum<float>(added));

  // Both sums fold each node's messages in edge order: bit-identical.
  int bad = std::memcmp(added.data(), aggs[0].out.data(), static_cast<size_t>(n * f * 4)) != 0;
  std::printf("  check     index_add_ == scatter_reduce_(sum) for all %lld values: %s\n", static_cast<long long>(n * f),
              bad ? "MISMATCH" : "OK");
  // A hub, a typical node and a node without edges, recomputed from x itself
  // (so the gather is checked too).
  std::vector<int64_t> probe = {hub};
  const auto typical = std::find_if(in_degree.begin(), in_degree.end(), [](int64_t d) { return d >= 2 && d <= 10; });
  if (typical != in_degree.end()) probe.push_back(typical - in_degree.begin());
  const auto none = std::find(in_degree.begin(), in_degree.end(), 0);
  if (none != in_degree.end()) probe.push_back(none - in_degree.begin());
  for (const int64_t node : probe) bad += check_node(node, src, dst, x, aggs[0].out, aggs[1].out, aggs[2].out, added);
  return bad;
}

// ---- (b) MoE ----------------------------------------------------------------

constexpr int kExperts = 8;

int run_moe(const Options& o) {
  const int64_t t_count = o.tokens, h = o.hidden;
  std::printf("[MoE] %lld tokens x %lld bfloat16 hidden, top-1 routing over %d experts\n",
              static_cast<long long>(t_count), static_cast<long long>(h), kExperts);
  auto start = Clock::now();
  Rng rng(7);
  const Tensor x = Tensor::empty({t_count, h}, DType::BFloat16);
  BFloat16* xs = x.data_as<BFloat16>();
  for (int64_t i = 0; i < x.numel(); ++i) xs[i] = BFloat16(static_cast<float>(2.0 * rng.uniform() - 1.0));
  // Skewed router: expert k is picked with probability ~ 1 / (k + 1); the
  // router probability of the chosen expert is in [0.3, 1).
  double weights[kExperts], total = 0.0;
  for (int k = 0; k < kExperts; ++k) total += weights[k] = 1.0 / (k + 1);
  std::vector<int> expert(static_cast<size_t>(t_count));
  std::vector<float> prob(static_cast<size_t>(t_count));
  for (int64_t t = 0; t < t_count; ++t) {
    double u = rng.uniform() * total;
    int k = 0;
    while (k < kExperts - 1 && u >= weights[k]) u -= weights[k++];
    expert[t] = k;
    prob[t] = static_cast<float>(0.3 + 0.7 * rng.uniform());
  }
  float scale[kExperts];
  for (int k = 0; k < kExperts; ++k) scale[k] = 0.5f + 0.25f * static_cast<float>(k);
  std::printf("  data      generated in %.0f ms\n", ms_since(start));

  // Route: stable counting sort of the tokens by expert. perm[j] is the
  // token at sorted position j; expert k owns rows [offset[k], offset[k+1]).
  const Tensor perm = Tensor::empty({t_count}, DType::Int64);
  int64_t offset[kExperts + 1] = {};
  start = Clock::now();
  {
    int64_t count[kExperts] = {};
    for (const int k : expert) ++count[k];
    for (int k = 0; k < kExperts; ++k) offset[k + 1] = offset[k] + count[k];
    int64_t next[kExperts];
    std::copy(offset, offset + kExperts, next);
    int64_t* p = perm.data_as<int64_t>();
    for (int64_t t = 0; t < t_count; ++t) p[next[expert[t]]++] = t;
  }
  const double route_ms = ms_since(start);
  std::printf("  %-9s %-48s %8.2f ms   tokens per expert:", "route", "stable counting sort by expert", route_ms);
  for (int k = 0; k < kExperts; ++k) std::printf(" %lld", static_cast<long long>(offset[k + 1] - offset[k]));
  std::printf("\n");

  const double row = static_cast<double>(h) * 2.0, idx = static_cast<double>(t_count) * 8.0;
  const double rows = static_cast<double>(t_count);
  const Tensor dispatched = Tensor::empty({t_count, h}, DType::BFloat16);
  double ms = best_ms(kReps, no_reset, [&] { scatterx::index_select_out(dispatched, x, 0, perm); });
  print_step("dispatch", "index_select(x, 0, perm)", ms, idx + 2.0 * row * rows, checksum<BFloat16>(dispatched));

  // The "experts": scale each expert's rows, then weight every row by its
  // token's router probability (plain loops; the combine is what scatterx does).
  const Tensor expert_out = Tensor::empty({t_count, h}, DType::BFloat16);
  const int64_t* p = perm.data_as<int64_t>();
  auto expert_and_weight = [&] {
    const BFloat16* in = dispatched.data_as<BFloat16>();
    BFloat16* out = expert_out.data_as<BFloat16>();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < t_count; ++j) {
      const int k = expert[p[j]];
      const float w = prob[p[j]];
      for (int64_t c = 0; c < h; ++c) {
        const BFloat16 scaled(static_cast<float>(in[j * h + c]) * scale[k]);
        out[j * h + c] = BFloat16(static_cast<float>(scaled) * w);
      }
    }
  };
  ms = best_ms(kReps, no_reset, expert_and_weight);
  std::printf("  %-9s %-48s %8.2f ms\n", "expert", "scale x router prob (plain loop, not scatterx)", ms);

  const Tensor combined = Tensor::empty({t_count, h}, DType::BFloat16);
  ms = best_ms(
      kReps, [&] { zero(combined); }, [&] { scatterx::index_add_(combined, 0, perm, expert_out); });
  print_step("combine", "index_add_(y, 0, perm, weighted)", ms, idx + 3.0 * row * rows, checksum<BFloat16>(combined));

  // Verify a few tokens exactly: y[t] = bf16(bf16(x[t] * scale[expert]) * prob).
  std::vector<int64_t> probe = {0, t_count / 3, 2 * t_count / 3, t_count - 1};
  probe.push_back(p[offset[kExperts - 1]]);  // a token of the least popular expert
  std::sort(probe.begin(), probe.end());
  probe.erase(std::unique(probe.begin(), probe.end()), probe.end());
  int bad = 0;
  const BFloat16* y = combined.data_as<BFloat16>();
  for (const int64_t t : probe) {
    for (int64_t c = 0; c < h; ++c) {
      const BFloat16 scaled(static_cast<float>(xs[t * h + c]) * scale[expert[t]]);
      const BFloat16 want(static_cast<float>(scaled) * prob[t]);
      bad += y[t * h + c].bits != want.bits;
    }
  }
  std::printf("  check     tokens");
  for (const int64_t t : probe) std::printf(" %lld", static_cast<long long>(t));
  std::printf(" vs a plain loop: %s\n", bad ? "MISMATCH" : "OK");
  return bad;
}

// Returns -1 to go on, or the exit status: 0 after --help, 2 for a bad argument.
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const bool help = arg == "--help" || arg == "-h";
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (i + 1 < argc && !help) {
      value = argv[++i];
    }
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    const bool ok = !value.empty() && *end == '\0' && v > 0;
    if (arg == "--nodes" && ok) {
      o->nodes = v;
    } else if (arg == "--edges" && ok) {
      o->edges = v;
    } else if (arg == "--features" && ok) {
      o->features = v;
    } else if (arg == "--tokens" && ok) {
      o->tokens = v;
    } else if (arg == "--hidden" && ok) {
      o->hidden = v;
    } else if (arg == "--threads" && ok) {
      o->threads = static_cast<int>(v);
    } else {
      std::fprintf(help ? stdout : stderr,
                   "usage: %s [--nodes N] [--edges E] [--features F] [--tokens T] [--hidden H] [--threads P]\n"
                   "  (positive integers; defaults 100000 nodes, 1000000 edges, 64 features, 16384 tokens,\n"
                   "   4096 hidden, OpenMP's default thread count)\n",
                   argv[0]);
      return help ? 0 : 2;
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  if (o.threads > 0) omp_set_num_threads(o.threads);
  std::printf("scatterx %s demo, %d OpenMP threads; times are the best of %d runs\n", SCATTERX_VERSION,
              omp_get_max_threads(), kReps);
  const auto start = Clock::now();
  int bad = 0;
  try {
    bad += run_gnn(o);
    bad += run_moe(o);
  } catch (const scatterx::Error& err) {
    std::fprintf(stderr, "scatterx error: %s\n", err.what());
    return 1;
  }
  std::printf("%s in %.1f s\n", bad ? "FAILED: results differ from the plain loops" : "all checks passed",
              ms_since(start) / 1000.0);
  return bad ? 1 : 0;
}

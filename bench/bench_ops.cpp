// scatterx_bench: throughput of the CPU kernels at GNN and MoE sizes, next to
// memcpy baselines that move the same number of bytes, so that every kernel
// can be read as a fraction of the machine's copy bandwidth (bench/compare.py
// prints that table).
//
// Workloads (--size=full, the default):
//   gnn  1M edges x 64 float32 features, 100k nodes; index distributions
//        /uniform and /powerlaw (Zipf, exponent 1, node ids permuted).
//        gather / index_select read 1M rows of a [100k, 64] table; scatter_add_,
//        scatter_reduce_ and index_add_ fold [1M, 64] messages into [100k, 64].
//        gather and the scatters take the 1-d index expanded to [1M, 64] with
//        unsqueeze(1).expand() (stride 0 along the features), as torch_scatter
//        users broadcast it; index_select and index_add_ take it 1-d.
//        BM_scatter_add/gnn/*/src_at_16B reads the messages 16 bytes past a
//        cache line, where numpy's arrays start (5 lines a row, not 4).
//        BM_gather_scatter folds table[src_index] into [100k, 64] by index
//        (fused, a new output per call) next to BM_index_select_index_add, the
//        same result in two steps through the [1M, 64] messages (index_select_out
//        into a kept buffer, then index_add_ into aggregate). BM_row_read_limit
//        is no kernel: it reads the messages' rows in destination order and
//        writes nothing, the least a fold in that order can cost.
//   moe  16k tokens x 4096 bfloat16 rows permuted by a random permutation
//        (index_select / gather: dispatch) and back (index_add_ / scatter_add_ /
//        scatter_: unpermute).
//
// Byte model (SetBytesProcessed per iteration; also in each label and in the
// counters idx_bytes, src_bytes and dst_bytes, whose sum is model_bytes):
//   copy-like   gather, index_select, scatter_ without reduce:
//                 idx + src rows read + dst rows written
//   reduce-like scatter_add_, scatter_reduce_, index_add_:
//                 idx + src rows read + destination read + destination written
//                 (the destination tensor counted once each way, however many
//                 rows land on each of its rows)
//   idx is the size of the 1-d int64 index array, also when it is passed
//   expanded: stride 0 means those bytes are all the kernel has to read.
// Items (SetItemsProcessed) are elements of src: for gathers, the elements read
// from the table (= elements written).
//
// Baselines: BM_memcpy/<label>/serial (one std::memcpy) and
// BM_memcpy/<label>/omp (the range split into one chunk per OpenMP thread)
// copy model_bytes / 2 bytes and count 2x that (read + write), so their
// bytes_per_second is directly comparable with the kernels naming <label> as
// baseline in their label.
//
// Google Benchmark appends /real_time to every name (UseRealTime); compare.py
// drops it. --size=small (10k nodes, 100k edges, 1k tokens x 1024) is a quick
// smoke test; the names stay the same, the "gnn" / "moe" context lines say
// which sizes ran.
//
// Destinations are never reset: every iteration scatters into what the last
// one left (values do not change the timing; see bench_data.cpp for why the
// sources are +-1).

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_data.h"
#include "scatterx.h"

namespace scatterx_bench {
namespace {

using scatterx::Reduce;

struct ByteModel {
  int64_t idx = 0;
  int64_t src = 0;
  int64_t dst = 0;
  int64_t items = 0;
  const char* formula = "";
  std::string baseline;  // the BM_memcpy/<baseline> that copies the same bytes
  int64_t total() const { return idx + src + dst; }
};

ByteModel copy_like(int64_t rows, int64_t row_bytes, int64_t row_elems, int64_t idx_bytes, std::string baseline) {
  return {idx_bytes,          rows * row_bytes, rows * row_bytes, rows * row_elems, "bytes=idx+src_rows+dst_rows",
          std::move(baseline)};
}

ByteModel reduce_like(int64_t rows, int64_t dst_rows, int64_t row_bytes, int64_t row_elems, int64_t idx_bytes,
                      std::string baseline) {
  return {idx_bytes,
          rows * row_bytes,
          2 * dst_rows * row_bytes,
          rows * row_elems,
          "bytes=idx+src_rows+2*dst_tensor(read+write)",
          std::move(baseline)};
}

// Bytes per baseline label, filled while the kernels are registered.
std::map<std::string, int64_t>& baseline_bytes() {
  static std::map<std::string, int64_t> m;
  return m;
}

void report(benchmark::State& state, const ByteModel& m) {
  state.SetBytesProcessed(state.iterations() * m.total());
  state.SetItemsProcessed(state.iterations() * m.items);
  state.counters["model_bytes"] = benchmark::Counter(static_cast<double>(m.total()));
  state.counters["idx_bytes"] = benchmark::Counter(static_cast<double>(m.idx));
  state.counters["src_bytes"] = benchmark::Counter(static_cast<double>(m.src));
  state.counters["dst_bytes"] = benchmark::Counter(static_cast<double>(m.dst));
  state.SetLabel(std::string(m.formula) + " baseline=BM_memcpy/" + m.baseline);
}

// Registers one kernel benchmark; `op` is called once per iteration.
template <typename Op>
void add(const std::string& name, ByteModel model, Op op) {
  auto& b = baseline_bytes()[model.baseline];
  if (b == 0) b = model.total();
  auto run = [model, op](benchmark::State& state) {
    op();  // warm-up outside the timed loop (first touch of outputs, caches)
    for (auto _ : state) {
      op();
      benchmark::ClobberMemory();
    }
    report(state, model);
  };
  benchmark::RegisterBenchmark(name.c_str(), run)->UseRealTime()->Unit(benchmark::kMillisecond);
}

// ---- memcpy baselines -------------------------------------------------------

void parallel_memcpy(char* dst, const char* src, int64_t bytes) {
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t chunk = (bytes / threads + 63) / 64 * 64;  // cache-line aligned chunks
    const int64_t begin = std::min(bytes, omp_get_thread_num() * chunk);
    const int64_t end = std::min(bytes, begin + chunk);
    if (end > begin) std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin));
  }
}

void copy(const CopyBuffers& buf, int64_t bytes, bool parallel) {
  if (parallel) {
    parallel_memcpy(buf.dst, buf.src, bytes);
  } else {
    std::memcpy(buf.dst, buf.src, static_cast<size_t>(bytes));
  }
}

void register_memcpy_baselines() {
  for (const auto& [label, model_bytes] : baseline_bytes()) {
    const int64_t copied = model_bytes / 2;
    for (const bool parallel : {false, true}) {
      auto run = [copied, parallel](benchmark::State& state) {
        const CopyBuffers buf = copy_buffers(copied);
        copy(buf, copied, parallel);  // warm-up, as for the kernels
        for (auto _ : state) {
          copy(buf, copied, parallel);
          benchmark::ClobberMemory();
        }
        state.SetBytesProcessed(state.iterations() * 2 * copied);
        state.counters["model_bytes"] = benchmark::Counter(static_cast<double>(2 * copied));
        state.counters["copied_bytes"] = benchmark::Counter(static_cast<double>(copied));
        state.SetLabel("bytes=2*copied(read+write)");
      };
      const std::string name = "BM_memcpy/" + label + (parallel ? "/omp" : "/serial");
      benchmark::RegisterBenchmark(name.c_str(), run)->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  }
}

// ---- GNN --------------------------------------------------------------------

// Positions 0..E-1 sorted by index[position], stable (a counting sort).
std::vector<int64_t> destination_order(const scatterx::Tensor& index, int64_t nodes) {
  const auto* idx = static_cast<const int64_t*>(index.data());
  const int64_t edges = index.numel();
  std::vector<int64_t> start(static_cast<size_t>(nodes) + 1, 0);
  for (int64_t e = 0; e < edges; ++e) ++start[static_cast<size_t>(idx[e]) + 1];
  for (int64_t v = 0; v < nodes; ++v) start[static_cast<size_t>(v) + 1] += start[static_cast<size_t>(v)];
  std::vector<int64_t> order(static_cast<size_t>(edges));
  for (int64_t e = 0; e < edges; ++e) order[static_cast<size_t>(start[static_cast<size_t>(idx[e])]++)] = e;
  return order;
}

// Sums the 64-float rows of `rows` in `order`, split between the OpenMP
// threads, prefetching kAhead rows ahead; returns a checksum so nothing is
// elided.
float read_rows_in_order(const float* rows, const std::vector<int64_t>& order) {
  constexpr int64_t kFeatures = 64;
  // The block fold's distance for rows of 256 bytes (block_fold_prefetch_rows
  // in ops/detail/block_fold.h). Rows read this way, 2 threads, the median of
  // 15 calls: 8 rows ahead 10.1-11.0 ms, 16 7.3-8.3, 32 6.3-7.2, 64 6.9-9.0
  // (2026-11-29); until then this read 8 ahead, slower than the machine can.
  constexpr int64_t kAhead = 24;
  const auto n = static_cast<int64_t>(order.size());
  float total = 0;
#pragma omp parallel reduction(+ : total)
  {
    float acc[kFeatures] = {};
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      if (i + kAhead < n) {
        const char* next = reinterpret_cast<const char*>(rows + order[static_cast<size_t>(i + kAhead)] * kFeatures);
        for (int b = 0; b < kFeatures * 4; b += 64) __builtin_prefetch(next + b);
      }
      const float* row = rows + order[static_cast<size_t>(i)] * kFeatures;
      for (int64_t f = 0; f < kFeatures; ++f) acc[f] += row[f];
    }
    for (float a : acc) total += a;
  }
  return total;
}

struct ReduceCase {
  Reduce reduce;
  const char* name;
};

void register_gnn() {
  const Sizes& s = sizes();
  const int64_t row_bytes = s.features * 4;
  const int64_t idx_bytes = s.edges * 8;
  const ByteModel gather_model = copy_like(s.edges, row_bytes, s.features, idx_bytes, "gnn_gather");
  const ByteModel scatter_model = reduce_like(s.edges, s.nodes, row_bytes, s.features, idx_bytes, "gnn_scatter");
  // Two indices read; the messages of the two-step form are not counted.
  const ByteModel fused_model =
      reduce_like(s.edges, s.nodes, row_bytes, s.features, 2 * idx_bytes, "gnn_gather_scatter");
  const ByteModel two_layer_model =
      reduce_like(2 * s.edges, 2 * s.nodes, row_bytes, s.features, 4 * idx_bytes, "gnn_two_layers");

  for (const Dist dist : {Dist::Uniform, Dist::PowerLaw}) {
    const std::string tail = std::string("/gnn/") + dist_name(dist);
    const int d = static_cast<int>(dist);
    // The data are built on first use, inside the first benchmark's set-up,
    // never in a timed loop.
    auto index1d = [d] { return gnn_data().index[d].view(); };
    auto index2d = [d] { return gnn_data().index[d].unsqueeze(1).expand({sizes().edges, sizes().features}); };

    add("BM_gather" + tail, gather_model, [index2d] {
      const GnnData& g = gnn_data();
      scatterx::gather_out(g.gathered, g.table, 0, index2d());
    });
    add("BM_index_select" + tail, gather_model, [index1d] {
      const GnnData& g = gnn_data();
      scatterx::index_select_out(g.gathered, g.table, 0, index1d());
    });
    add("BM_scatter_add" + tail, scatter_model, [index2d] {
      const GnnData& g = gnn_data();
      scatterx::scatter_add_(g.aggregate, 0, index2d(), g.messages);
    });
    // The same with the messages 16 bytes past a cache line, as a numpy
    // array's are: 5 lines a row instead of 4.
    add("BM_scatter_add" + tail + "/src_at_16B", scatter_model, [index2d] {
      const GnnData& g = gnn_data();
      scatterx::scatter_add_(g.aggregate, 0, index2d(), gnn_messages_at_16_bytes());
    });
    for (const ReduceCase rc :
         {ReduceCase{Reduce::Sum, "sum"}, ReduceCase{Reduce::Prod, "prod"}, ReduceCase{Reduce::Mean, "mean"},
          ReduceCase{Reduce::Amax, "amax"}, ReduceCase{Reduce::Amin, "amin"}}) {
      add(std::string("BM_scatter_reduce/gnn/") + rc.name + "/" + dist_name(dist), scatter_model, [index2d, rc] {
        const GnnData& g = gnn_data();
        scatterx::scatter_reduce_(g.aggregate, 0, index2d(), g.messages, rc.reduce, /*include_self=*/true);
      });
    }
    // The floor any fold in destination order stands on: reading the
    // messages' rows in that order (grouped by destination, stable), with
    // the same prefetch distance and threads as the kernels, summed into a
    // register row and nothing written. Same byte model as the scatters, so
    // it reads as a fraction of memcpy beside them.
    add("BM_row_read_limit" + tail, scatter_model, [d] {
      const GnnData& g = gnn_data();
      static std::vector<int64_t> orders[2];
      std::vector<int64_t>& order = orders[d];
      if (order.empty()) order = destination_order(g.index[d], sizes().nodes);
      benchmark::DoNotOptimize(read_rows_in_order(static_cast<const float*>(g.messages.data()), order));
    });
    add("BM_index_add" + tail, scatter_model, [index1d] {
      const GnnData& g = gnn_data();
      scatterx::index_add_(g.aggregate, 0, index1d(), g.messages);
    });
    add("BM_gather_scatter" + tail, fused_model, [index1d] {
      const GnnData& g = gnn_data();
      const scatterx::Tensor out = scatterx::gather_scatter(g.table, g.src_index, index1d(), Reduce::Sum);
      benchmark::DoNotOptimize(out.data());
    });
    add("BM_index_select_index_add" + tail, fused_model, [index1d] {
      const GnnData& g = gnn_data();
      scatterx::index_select_out(g.gathered, g.table, 0, g.src_index);
      scatterx::index_add_(g.aggregate, 0, index1d(), g.gathered);
    });
    // Two layers of mean aggregation over one graph (the second aggregates
    // the first's output): the destination index checked and grouped in
    // every call, against an IndexPlan built once (in the warm-up call,
    // outside the timed loop), as a model reuses it across layers and epochs.
    auto two_layers = [](const scatterx::IndexPlan* plan, const scatterx::TensorView& dst) {
      const GnnData& g = gnn_data();
      const int64_t n = sizes().nodes;
      const scatterx::Tensor h = plan ? scatterx::gather_scatter(g.table, g.src_index, *plan, Reduce::Mean)
                                      : scatterx::gather_scatter(g.table, g.src_index, dst, Reduce::Mean, nullptr, n);
      const scatterx::Tensor out = plan ? scatterx::gather_scatter(h, g.src_index, *plan, Reduce::Mean)
                                        : scatterx::gather_scatter(h, g.src_index, dst, Reduce::Mean, nullptr, n);
      benchmark::DoNotOptimize(out.data());
    };
    add("BM_gnn_two_layers/index" + tail, two_layer_model, [index1d, two_layers] { two_layers(nullptr, index1d()); });
    auto plan = std::make_shared<std::optional<scatterx::IndexPlan>>();
    add("BM_gnn_two_layers/plan" + tail, two_layer_model, [index1d, two_layers, plan] {
      if (!plan->has_value()) plan->emplace(index1d(), sizes().nodes);
      two_layers(&**plan, index1d());
    });
  }
}

// ---- MoE --------------------------------------------------------------------

void register_moe() {
  const Sizes& s = sizes();
  const int64_t row_bytes = s.hidden * 2;
  const int64_t idx_bytes = s.tokens * 8;
  const ByteModel dispatch_model = copy_like(s.tokens, row_bytes, s.hidden, idx_bytes, "moe_gather");
  const ByteModel combine_model = reduce_like(s.tokens, s.tokens, row_bytes, s.hidden, idx_bytes, "moe_scatter");
  auto index2d = [] { return moe_data().perm.unsqueeze(1).expand({sizes().tokens, sizes().hidden}); };

  add("BM_index_select/moe/permute", dispatch_model, [] {
    const MoeData& m = moe_data();
    scatterx::index_select_out(m.permuted, m.tokens, 0, m.perm);
  });
  add("BM_gather/moe/permute", dispatch_model, [index2d] {
    const MoeData& m = moe_data();
    scatterx::gather_out(m.permuted, m.tokens, 0, index2d());
  });
  add("BM_index_add/moe/unpermute", combine_model, [] {
    const MoeData& m = moe_data();
    scatterx::index_add_(m.combined, 0, m.perm, m.permuted);
  });
  add("BM_scatter_add/moe/unpermute", combine_model, [index2d] {
    const MoeData& m = moe_data();
    scatterx::scatter_add_(m.combined, 0, index2d(), m.permuted);
  });
  // A plain scatter_ by a permutation is a write-only unpermute: copy-like.
  add("BM_scatter/moe/unpermute", dispatch_model, [index2d] {
    const MoeData& m = moe_data();
    scatterx::scatter_(m.combined, 0, index2d(), m.permuted);
  });
}

// Removes --size=small|full from argv (Google Benchmark rejects flags it does
// not know). Returns false on a bad value.
bool parse_own_flags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--size=", 0) == 0) {
      const std::string v = arg.substr(7);
      if (v == "small") {
        sizes() = Sizes{10000, 100000, 64, 1024, 1024};
      } else if (v != "full") {
        std::fprintf(stderr, "scatterx_bench: --size must be small or full, got %s\n", v.c_str());
        return false;
      }
      continue;
    }
    argv[out++] = argv[i];
  }
  *argc = out;
  return true;
}

}  // namespace
}  // namespace scatterx_bench

int main(int argc, char** argv) {
  using namespace scatterx_bench;  // NOLINT(google-build-using-namespace)
  if (!parse_own_flags(&argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const Sizes& s = sizes();
  benchmark::AddCustomContext("scatterx_version", SCATTERX_VERSION);
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("gnn", std::to_string(s.edges) + " edges x " + std::to_string(s.features) +
                                         " float32 -> " + std::to_string(s.nodes) + " nodes");
  benchmark::AddCustomContext("moe", std::to_string(s.tokens) + " tokens x " + std::to_string(s.hidden) + " bfloat16");

  register_gnn();
  register_moe();
  register_memcpy_baselines();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// CPU scatter_softmax kernel. Positions are grouped by destination (an
// IndexPlan's groups, stable), and every group is cut into chunks of at most
// kChunkRows rows, a tile of features at a time:
//  - a group of one chunk is computed by one thread in three passes over its
//    rows while they sit in cache: the maximum, the sum of the exponentials
//    (kept in a per-thread scratch for the softmax), and the output;
//  - a larger group's chunks are spread over all threads: each chunk's
//    maximum and sum of exp(x - its maximum) (its rows read once from memory,
//    then from cache), the group's maximum M and sum S combined from them in
//    chunk order, then each chunk's output. That reads the rows twice from
//    memory where one thread's three passes over a group too big for cache
//    read them three times, and one hub of a power-law graph no longer runs
//    on one thread while the others wait.
// The chunks are cut by row count alone, so no result depends on the thread
// count. No atomics. The loops are compiled for the baseline ISA and for
// AVX2 (cpu_isa.h): the same operations, so the same bits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/detail/prefetch.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/scatter_softmax.h"
#include "ops/gather_scatter/softmax_cpu_steps.h"
#include "ops/reduce_ops.h"

namespace scatterx::detail {

namespace softmax_cpu {
namespace {

// The forward's passes over a tile of rows of x.
template <typename T, int64_t kCount>
struct Tile : TileRows<kCount> {
  using A = acc_t<T>;
  using TileRows<kCount>::count;
  using TileRows<kCount>::at;
  using TileRows<kCount>::r;
  using TileRows<kCount>::begin;
  using TileRows<kCount>::end;
  const T* x;

  SCATTERX_INLINE const T* row(int64_t p) const { return x + at(p); }

  // m[j] = the maximum over the rows (NaN wins, as torch's amax), reading
  // them from memory with a prefetch along the grouped order.
  SCATTERX_INLINE void max(A* m) const {
    const int64_t n = count();
    for (int64_t j = 0; j < n; ++j) m[j] = arith::lowest<A>();
    for (int64_t p = begin; p < end; ++p) {
      if (p + kPrefetch < r.positions) {
        prefetch_bytes(row(p + kPrefetch), static_cast<size_t>(n) * sizeof(T));
      }
      const T* v = row(p);
      for (int64_t j = 0; j < n; ++j) m[j] = arith::max(m[j], static_cast<A>(v[j]));
    }
  }

  // s[j] = the sum of exp(x - m[j]) in row order; with a cache, each row's
  // exponentials are kept there (count() values a row).
  SCATTERX_INLINE void exp_sum(const A* m, A* s, A* cache) const {
    const int64_t n = count();
    A e[kTile];
    for (int64_t j = 0; j < n; ++j) s[j] = A(0);
    for (int64_t p = begin; p < end; ++p) {
      const T* v = row(p);
      A* ex = cache != nullptr ? cache + (p - begin) * n : e;
      for (int64_t j = 0; j < n; ++j) ex[j] = exp_shifted(static_cast<A>(v[j]) - m[j]);
      for (int64_t j = 0; j < n; ++j) s[j] += ex[j];
    }
  }

  // The outputs: softmax exp(x - m) / s (the exponentials from the cache
  // when given, computed again otherwise: the same bits), log-softmax
  // (x - m) - log_s. from_memory: the rows are prefetched as for max().
  template <bool kLog>
  SCATTERX_INLINE void write(T* out, const A* m, const A* s_or_log_s, const A* cache, bool from_memory) const {
    const int64_t n = count();
    A e[kTile];
    for (int64_t p = begin; p < end; ++p) {
      if (from_memory && p + kPrefetch < r.positions) {
        prefetch_bytes(row(p + kPrefetch), static_cast<size_t>(n) * sizeof(T));
      }
      const T* v = row(p);
      T* o = out + at(p);
      if constexpr (kLog) {
        for (int64_t j = 0; j < n; ++j) o[j] = static_cast<T>((static_cast<A>(v[j]) - m[j]) - s_or_log_s[j]);
      } else {
        const A* ex = cache + (p - begin) * n;
        if (cache == nullptr) {
          for (int64_t j = 0; j < n; ++j) e[j] = exp_shifted(static_cast<A>(v[j]) - m[j]);
          ex = e;
        }
        for (int64_t j = 0; j < n; ++j) o[j] = static_cast<T>(ex[j] / s_or_log_s[j]);
      }
    }
  }
};

template <typename T, bool kLog>
struct SoftmaxKernel {
  using A = acc_t<T>;
  const T* x;
  T* out;
  Rows r;
  const TargetGroups& groups;
  const std::vector<Chunk>& chunks;
  A* chunk_max;  // [chunks, features]
  A* chunk_sum;  // [chunks, features]
  A eps;

  // What a tile of features of a run of rows gets (the loops below are
  // plain inline functions rather than lambdas: a lambda would be compiled
  // once, for the baseline ISA, and called from the AVX2 build).
  enum class TileStep {
    Group,     // a whole group of at most kChunkRows rows
    Partials,  // a chunk's maximum and sum of exp(x - its maximum)
    Outputs,   // a chunk's outputs from its group's M and S
  };

  template <TileStep kStep, typename TileT>
  SCATTERX_INLINE void tile_step(const TileT& t, int64_t chunk, A* cache) const {
    const int64_t F = r.features;
    if constexpr (kStep == TileStep::Group) {
      A m[kTile];
      A s[kTile];
      t.max(m);
      t.exp_sum(m, s, kLog ? nullptr : cache);
      if constexpr (kLog) {
        for (int64_t j = 0; j < t.count(); ++j) s[j] = std::log(s[j] + eps);
      }
      t.template write<kLog>(out, m, s, cache, false);
    } else if constexpr (kStep == TileStep::Partials) {
      A* m = chunk_max + chunk * F + t.k0;
      t.max(m);
      t.exp_sum(m, chunk_sum + chunk * F + t.k0, nullptr);
    } else {
      const int64_t head = chunks[chunk].first * F + t.k0;
      t.template write<kLog>(out, chunk_max + head, chunk_sum + head, nullptr, true);
    }
  }

  // tile_step on each tile of features of the rows order[begin, end).
  template <TileStep kStep>
  SCATTERX_INLINE void for_each_tile(int64_t begin, int64_t end, int64_t chunk, A* cache) const {
    for (int64_t k0 = 0; k0 < r.features; k0 += kTile) {
      const int64_t count = std::min(kTile, r.features - k0);
      if (count == kTile) {
        tile_step<kStep>(Tile<T, kTile>{{r, begin, end, k0, count}, x}, chunk, cache);
      } else {
        tile_step<kStep>(Tile<T, 0>{{r, begin, end, k0, count}, x}, chunk, cache);
      }
    }
  }

  // Groups [first, last) of at most kChunkRows rows, each start to end.
  SCATTERX_INLINE void small_groups(int64_t first, int64_t last, A* cache) const {
    for (int64_t g = first; g < last; ++g) {
      const int64_t begin = groups.offsets[g];
      const int64_t end = groups.offsets[g + 1];
      if (end - begin <= kChunkRows) for_each_tile<TileStep::Group>(begin, end, 0, cache);
    }
  }

  SCATTERX_INLINE void chunk_partials(int64_t first, int64_t last) const {
    for (int64_t c = first; c < last; ++c)
      for_each_tile<TileStep::Partials>(chunks[c].begin, chunks[c].end, c, nullptr);
  }

  // For the groups whose first chunk is in [first, last): M = the maximum of
  // the chunks' maxima, S = the sum over the chunks, in order, of
  // s_c * exp(m_c - M), stored over the first chunk's partials (log(S + eps)
  // for the log-softmax). A chunk of all -inf adds nothing: its own sum is
  // NaN (-inf - -inf) where the composite's exp(-inf - M) is 0. Where M is
  // NaN or -inf, every x - M is NaN and the outputs are NaN whatever S is;
  // a +inf makes its chunk's sum NaN, and so S, as in the composite.
  SCATTERX_INLINE void combine(int64_t first, int64_t last) const {
    const int64_t F = r.features;
    for (int64_t c = first; c < last; ++c) {
      if (chunks[c].first != c) continue;
      A* gm = chunk_max + c * F;
      A* gs = chunk_sum + c * F;
      for (int64_t j = 0; j < F; ++j) {
        A m = gm[j];
        for (int64_t k = c + 1; k < chunks[c].last; ++k) m = arith::max(m, chunk_max[k * F + j]);
        A s = A(0);
        for (int64_t k = c; k < chunks[c].last; ++k) {
          const A mk = chunk_max[k * F + j];
          if (mk == -std::numeric_limits<A>::infinity()) continue;
          s += chunk_sum[k * F + j] * exp_shifted(mk - m);
        }
        gm[j] = m;
        gs[j] = kLog ? std::log(s + eps) : s;
      }
    }
  }

  SCATTERX_INLINE void chunk_outputs(int64_t first, int64_t last) const {
    for (int64_t c = first; c < last; ++c) for_each_tile<TileStep::Outputs>(chunks[c].begin, chunks[c].end, c, nullptr);
  }

  SCATTERX_INLINE void run_body(Step step, int64_t first, int64_t last, A* cache) const {
    switch (step) {
      case Step::SmallGroups:
        small_groups(first, last, cache);
        break;
      case Step::ChunkPartials:
        chunk_partials(first, last);
        break;
      case Step::Combine:
        combine(first, last);
        break;
      case Step::ChunkOutputs:
        chunk_outputs(first, last);
        break;
    }
  }
  void run(Step step, int64_t first, int64_t last, A* cache) const { run_body(step, first, last, cache); }
  SCATTERX_TARGET_AVX2 void run_avx2(Step step, int64_t first, int64_t last, A* cache) const {
    run_body(step, first, last, cache);
  }
};

template <typename T, bool kLog>
void softmax_groups(const TensorView& src, const TargetGroups& groups, const TensorView& out, double eps) {
  using A = acc_t<T>;
  const Rows r{groups.order.data(), src.size(0), src.size(1)};
  const int64_t F = r.features;
  const std::vector<Chunk> chunks = chunk_long_groups(groups);
  const auto num_chunks = static_cast<int64_t>(chunks.size());
  Buffer<A> chunk_max(num_chunks * F);
  Buffer<A> chunk_sum(num_chunks * F);
  const SoftmaxKernel<T, kLog> kernel{static_cast<const T*>(src.data()),
                                      static_cast<T*>(out.data()),
                                      r,
                                      groups,
                                      chunks,
                                      chunk_max.data(),
                                      chunk_sum.data(),
                                      static_cast<A>(eps)};
  // The softmax keeps a small group's exponentials between its passes.
  run_steps<A>(kernel, groups, r.positions, F, num_chunks, kLog ? 0 : kChunkRows * kTile);
}

}  // namespace
}  // namespace softmax_cpu

float exp_nonpositive(float x) { return softmax_cpu::exp_core(x); }

void scatter_softmax_cpu(const TensorView& src, const TargetGroups& groups, const TensorView& out, bool log,
                         double eps) {
  softmax_cpu::dispatch_floating(src.dtype(), "scatter_softmax", log, [&](auto dtype_tag, auto log_tag) {
    softmax_cpu::softmax_groups<CppType<decltype(dtype_tag)::value>, decltype(log_tag)::value>(src, groups, out, eps);
  });
}

}  // namespace scatterx::detail

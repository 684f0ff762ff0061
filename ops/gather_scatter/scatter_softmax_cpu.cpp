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
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/detail/prefetch.h"
#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/scatter_softmax.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cpu_isa.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

namespace {

constexpr int64_t kTile = 64;        // features the passes over a chunk handle together
constexpr int64_t kChunkRows = 512;  // rows of a chunk: its exponentials stay in cache between passes
constexpr int64_t kPrefetch = 8;     // positions ahead whose source row is prefetched

SCATTERX_INLINE float float_of_bits(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

SCATTERX_INLINE int32_t bits_of_float(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Cephes' expf for x <= 0 (or NaN), written so GCC vectorizes it at SSE2
// without -ffast-math: no float compares or conversions (a select on them
// leaves a branch, the loop stays scalar), only integer min / masks on the
// bits. x is clamped to [-104, 0] (exp of anything below rounds to 0 in
// float; a positive x, outside the domain, counts as 0); x * log2(e) is
// rounded by adding 1.5 * 2^23, whose low bits are then the integer n; the
// scaling by 2^n is split in two so subnormal results round once. A NaN x
// gives a NaN.
SCATTERX_INLINE float exp_core(float x) {
  const int32_t b = bits_of_float(x);
  const auto low = static_cast<uint32_t>(bits_of_float(-104.0f));
  // Negative floats order as their bits (unsigned); b >> 31 is 0 for a positive sign.
  const uint32_t clamped = std::min(static_cast<uint32_t>(b), low) & static_cast<uint32_t>(b >> 31);
  const float c = float_of_bits(static_cast<int32_t>(clamped));
  const float t = c * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const int32_t k = bits_of_float(t) - bits_of_float(12582912.0f);  // n, in [-150, 0]
  const int32_t k1 = k / 2;  // both halves >= -75: 2^k1 and 2^k2 are normal floats
  const int32_t k2 = k - k1;
  y = y * float_of_bits((k1 + 127) << 23) * float_of_bits((k2 + 127) << 23);
  const int32_t nan = (0x7F800000 - (b & 0x7FFFFFFF)) >> 31;  // all ones for a NaN x
  return float_of_bits(bits_of_float(y) | (nan & 0x7FC00000));
}

// exp(x) for x <= 0 or NaN (a shifted value x - max), in the accumulation type.
template <typename A>
SCATTERX_INLINE A exp_shifted(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return exp_core(x);
  } else {
    return std::exp(x);
  }
}

struct Rows {
  const int64_t* order;  // positions grouped by destination
  int64_t positions;
  int64_t features;
};

// A run of rows order[begin, end) of one group, over features [k0, k0 + count).
// kCount > 0 fixes count at compile time (whole tiles), 0 takes it at run time.
template <typename T, int64_t kCount>
struct Tile {
  using A = acc_t<T>;
  const T* x;
  const Rows& r;
  int64_t begin;
  int64_t end;
  int64_t k0;
  int64_t runtime_count;

  SCATTERX_INLINE int64_t count() const { return kCount > 0 ? kCount : runtime_count; }
  SCATTERX_INLINE const T* row(int64_t p) const { return x + r.order[p] * r.features + k0; }

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
      T* o = out + r.order[p] * r.features + k0;
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

// A chunk of a group of more than kChunkRows rows.
struct Chunk {
  int64_t begin;  // rows order[begin, end)
  int64_t end;
  int64_t first;  // the group's first chunk, whose partials end up holding the group's M and S
  int64_t last;   // one past the group's last chunk
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
        tile_step<kStep>(Tile<T, kTile>{x, r, begin, end, k0, count}, chunk, cache);
      } else {
        tile_step<kStep>(Tile<T, 0>{x, r, begin, end, k0, count}, chunk, cache);
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

  enum class Step { SmallGroups, ChunkPartials, Combine, ChunkOutputs };

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
  using Kernel = SoftmaxKernel<T, kLog>;
  using Step = typename Kernel::Step;
  const Rows r{groups.order.data(), src.size(0), src.size(1)};
  const int64_t F = r.features;
  std::vector<Chunk> chunks;
  for (int64_t g = 0; g < groups.num_groups; ++g) {
    const int64_t begin = groups.offsets[g];
    const int64_t end = groups.offsets[g + 1];
    if (end - begin <= kChunkRows) continue;
    const auto first = static_cast<int64_t>(chunks.size());
    const int64_t last = first + (end - begin + kChunkRows - 1) / kChunkRows;
    for (int64_t b = begin; b < end; b += kChunkRows) chunks.push_back({b, std::min(b + kChunkRows, end), first, last});
  }
  const auto num_chunks = static_cast<int64_t>(chunks.size());
  Buffer<A> chunk_max(num_chunks * F);
  Buffer<A> chunk_sum(num_chunks * F);
  const Kernel kernel{static_cast<const T*>(src.data()),
                      static_cast<T*>(out.data()),
                      r,
                      groups,
                      chunks,
                      chunk_max.data(),
                      chunk_sum.data(),
                      static_cast<A>(eps)};
  const bool avx2 = use_avx2();
  auto run = [&](Step step, int64_t first, int64_t last, A* cache) {
    if (avx2) {
      kernel.run_avx2(step, first, last, cache);
    } else {
      kernel.run(step, first, last, cache);
    }
  };
  // One exp cache per thread, allocated before the parallel region.
  const bool nested = omp_in_parallel() != 0;
  const int64_t slots = nested ? 1 : omp_get_max_threads();
  Buffer<A> cache(kLog ? 0 : slots * kChunkRows * kTile);
  const int64_t reads = std::max<int64_t>(1, r.positions * F);
  const int64_t grain = std::max<int64_t>(1, kGroupedReadsPerPiece * groups.num_groups / reads);
  parallel_for_dynamic(groups.num_groups, grain, [&](int64_t first, int64_t last) {
    A* mine = kLog ? nullptr : cache.data() + (nested ? 0 : omp_get_thread_num()) * kChunkRows * kTile;
    run(Step::SmallGroups, first, last, mine);
  });
  if (num_chunks == 0) return;
  const int64_t chunk_grain = std::max<int64_t>(1, kGroupedReadsPerPiece / (kChunkRows * F));
  parallel_for_dynamic(num_chunks, chunk_grain,
                       [&](int64_t first, int64_t last) { run(Step::ChunkPartials, first, last, nullptr); });
  parallel_for(num_chunks, chunk_grain, [&](int64_t first, int64_t last) { run(Step::Combine, first, last, nullptr); });
  parallel_for_dynamic(num_chunks, chunk_grain,
                       [&](int64_t first, int64_t last) { run(Step::ChunkOutputs, first, last, nullptr); });
}

}  // namespace

float exp_nonpositive(float x) { return exp_core(x); }

void scatter_softmax_cpu(const TensorView& src, const TargetGroups& groups, const TensorView& out, bool log,
                         double eps) {
  dispatch_dtype(src.dtype(), "scatter_softmax", [&](auto dtype_tag) {
    constexpr DType D = decltype(dtype_tag)::value;
    if constexpr (is_floating_point(D)) {
      using T = CppType<D>;
      if (log) {
        softmax_groups<T, true>(src, groups, out, eps);
      } else {
        softmax_groups<T, false>(src, groups, out, eps);
      }
    }
  });
}

}  // namespace scatterx::detail

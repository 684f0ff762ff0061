// What the CPU scatter_softmax kernels (forward and backward) share: the
// float exp, the rows of a group, and how a group is cut into chunks and the
// four steps run over them.
//
// A group of up to kChunkRows rows is computed by one thread, start to end.
// A larger group is cut, in index order, into chunks of kChunkRows rows that
// all threads share: a partial result per chunk, then the group's result
// combined from the chunks in chunk order, then each chunk's outputs. The
// chunks depend on row counts alone, so no result depends on the thread
// count. Internal to ops/gather_scatter/scatter_softmax*_cpu.cpp.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/macros.h"
#include "ops/runtime/cpu_isa.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail::softmax_cpu {

constexpr int64_t kTile = 64;        // features the passes over a chunk handle together
constexpr int64_t kChunkRows = 512;  // rows of a chunk: its rows (and exponentials) stay in cache between passes
constexpr int64_t kPrefetch = 8;     // positions ahead whose source rows are prefetched

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

// Rows order[begin, end) of one group, over features [k0, k0 + count()).
// kCount > 0 fixes the count at compile time (whole tiles), 0 takes
// runtime_count.
template <int64_t kCount>
struct TileRows {
  const Rows& r;
  int64_t begin;
  int64_t end;
  int64_t k0;
  int64_t runtime_count;

  SCATTERX_INLINE int64_t count() const { return kCount > 0 ? kCount : runtime_count; }
  // The element offset of row p's feature k0.
  SCATTERX_INLINE int64_t at(int64_t p) const { return r.order[p] * r.features + k0; }
};

// A chunk of a group of more than kChunkRows rows.
struct Chunk {
  int64_t begin;  // rows order[begin, end)
  int64_t end;
  int64_t first;  // the group's first chunk, whose partials end up holding the group's result
  int64_t last;   // one past the group's last chunk
};

inline std::vector<Chunk> chunk_long_groups(const TargetGroups& groups) {
  std::vector<Chunk> chunks;
  for (int64_t g = 0; g < groups.num_groups; ++g) {
    const int64_t begin = groups.offsets[g];
    const int64_t end = groups.offsets[g + 1];
    if (end - begin <= kChunkRows) continue;
    const auto first = static_cast<int64_t>(chunks.size());
    const int64_t last = first + (end - begin + kChunkRows - 1) / kChunkRows;
    for (int64_t b = begin; b < end; b += kChunkRows) chunks.push_back({b, std::min(b + kChunkRows, end), first, last});
  }
  return chunks;
}

enum class Step {
  SmallGroups,    // groups [first, last) of at most kChunkRows rows, each start to end (others skipped)
  ChunkPartials,  // each chunk's partial result
  Combine,        // each group whose first chunk is in [first, last): its result from its chunks'
  ChunkOutputs,   // each chunk's outputs from its group's result
};

// Runs the four steps of `kernel` (run / run_avx2(Step, first, last, scratch),
// scratch being `scratch_per_thread` values of type A for this thread, or
// null) over rows of `features` values grouped by `groups`, cut into `chunks`.
template <typename A, typename Kernel>
void run_steps(const Kernel& kernel, const TargetGroups& groups, int64_t positions, int64_t features,
               int64_t num_chunks, int64_t scratch_per_thread) {
  const bool avx2 = use_avx2();
  auto run = [&](Step step, int64_t first, int64_t last, A* scratch) {
    if (avx2) {
      kernel.run_avx2(step, first, last, scratch);
    } else {
      kernel.run(step, first, last, scratch);
    }
  };
  // One scratch per thread, allocated before the parallel region.
  const bool nested = omp_in_parallel() != 0;
  PerThreadRuns<A> scratch(nested ? 1 : omp_get_max_threads(), scratch_per_thread);
  const int64_t reads = std::max<int64_t>(1, positions * features);
  const int64_t grain = std::max<int64_t>(1, kGroupedReadsPerPiece * groups.num_groups / reads);
  parallel_for_dynamic(groups.num_groups, grain, [&](int64_t first, int64_t last) {
    A* mine = scratch_per_thread == 0 ? nullptr : scratch.run(nested ? 0 : omp_get_thread_num());
    run(Step::SmallGroups, first, last, mine);
  });
  if (num_chunks == 0) return;
  const int64_t chunk_grain = std::max<int64_t>(1, kGroupedReadsPerPiece / (kChunkRows * features));
  parallel_for_dynamic(num_chunks, chunk_grain,
                       [&](int64_t first, int64_t last) { run(Step::ChunkPartials, first, last, nullptr); });
  parallel_for(num_chunks, chunk_grain, [&](int64_t first, int64_t last) { run(Step::Combine, first, last, nullptr); });
  parallel_for_dynamic(num_chunks, chunk_grain,
                       [&](int64_t first, int64_t last) { run(Step::ChunkOutputs, first, last, nullptr); });
}

// Calls f(dtype_tag, log_tag) once, with dispatch_dtype's tag of a floating
// dtype and std::bool_constant<log>.
template <typename F>
void dispatch_floating(DType dtype, const char* op, bool log, const F& f) {
  dispatch_dtype(dtype, op, [&](auto dtype_tag) {
    if constexpr (is_floating_point(decltype(dtype_tag)::value)) {
      if (log) {
        f(dtype_tag, std::true_type{});
      } else {
        f(dtype_tag, std::false_type{});
      }
    }
  });
}

}  // namespace scatterx::detail::softmax_cpu

// CPU scatter_softmax kernel. Positions are grouped by destination (an
// IndexPlan's groups, stable); groups are spread over threads and each is
// computed by one thread, a tile of features at a time, in three passes over
// its rows while they sit in cache: the maximum, the sum of the exponentials
// (kept in a per-thread scratch for the softmax), and the output, written
// once. No atomics; results do not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "ops/detail/prefetch.h"
#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/scatter_softmax.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

namespace {

constexpr int64_t kTile = 64;         // features the passes over a group handle together
constexpr int64_t kCachedRows = 512;  // groups up to this many rows keep exp() between passes
constexpr int64_t kPrefetch = 8;      // positions ahead whose source row is prefetched

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

// out[j] = exp(in[j]) for in[j] <= 0 or NaN (the shifted values x - max).
template <typename A>
SCATTERX_INLINE void exp_row(const A* in, A* out, int64_t count) {
  if constexpr (std::is_same_v<A, float>) {
    for (int64_t j = 0; j < count; ++j) out[j] = exp_core(in[j]);
  } else {
    for (int64_t j = 0; j < count; ++j) out[j] = std::exp(in[j]);
  }
}

struct Rows {
  const int64_t* order;  // positions grouped by destination
  int64_t positions;
  int64_t features;
};

// One group's positions [begin, end) over features [k0, k0 + count).
// kCount > 0 fixes count at compile time (whole tiles), 0 takes it at run
// time. cache holds kCachedRows * kTile values.
template <typename T, bool kLog, int64_t kCount>
void softmax_tile(const T* x, T* out, const Rows& r, int64_t begin, int64_t end, int64_t k0, int64_t runtime_count,
                  acc_t<T> eps, acc_t<T>* cache) {
  using A = acc_t<T>;
  const int64_t count = kCount > 0 ? kCount : runtime_count;
  const int64_t F = r.features;
  A m[kTile];
  A s[kTile];
  A d[kTile];
  A e[kTile];
  for (int64_t j = 0; j < count; ++j) m[j] = arith::lowest<A>();
  for (int64_t p = begin; p < end; ++p) {
    if (p + kPrefetch < r.positions) {
      const char* ahead = reinterpret_cast<const char*>(x + r.order[p + kPrefetch] * F + k0);
      prefetch_bytes(ahead, static_cast<size_t>(count) * sizeof(T));
    }
    const T* row = x + r.order[p] * F + k0;
    for (int64_t j = 0; j < count; ++j) m[j] = arith::max(m[j], static_cast<A>(row[j]));
  }
  const bool cached = !kLog && end - begin <= kCachedRows;
  for (int64_t j = 0; j < count; ++j) s[j] = A(0);
  for (int64_t p = begin; p < end; ++p) {
    const T* row = x + r.order[p] * F + k0;
    A* ex = cached ? cache + (p - begin) * count : e;
    for (int64_t j = 0; j < count; ++j) d[j] = static_cast<A>(row[j]) - m[j];
    exp_row(d, ex, count);
    for (int64_t j = 0; j < count; ++j) s[j] += ex[j];
  }
  if constexpr (kLog) {
    for (int64_t j = 0; j < count; ++j) s[j] = std::log(s[j] + eps);
    for (int64_t p = begin; p < end; ++p) {
      const T* row = x + r.order[p] * F + k0;
      T* o = out + r.order[p] * F + k0;
      for (int64_t j = 0; j < count; ++j) o[j] = static_cast<T>((static_cast<A>(row[j]) - m[j]) - s[j]);
    }
  } else {
    for (int64_t p = begin; p < end; ++p) {
      T* o = out + r.order[p] * F + k0;
      const A* ex = cache + (p - begin) * count;
      if (!cached) {  // a large group: the same exp again (bit-identical)
        const T* row = x + r.order[p] * F + k0;
        for (int64_t j = 0; j < count; ++j) d[j] = static_cast<A>(row[j]) - m[j];
        exp_row(d, e, count);
        ex = e;
      }
      for (int64_t j = 0; j < count; ++j) o[j] = static_cast<T>(ex[j] / s[j]);
    }
  }
}

template <typename T, bool kLog>
void softmax_groups(const TensorView& src, const TargetGroups& groups, const TensorView& out, double eps) {
  using A = acc_t<T>;
  const T* x = static_cast<const T*>(src.data());
  T* o = static_cast<T*>(out.data());
  const Rows r{groups.order.data(), src.size(0), src.size(1)};
  const int64_t F = r.features;
  // One exp cache per thread, allocated before the parallel region.
  const bool nested = omp_in_parallel() != 0;
  const int64_t slots = nested ? 1 : omp_get_max_threads();
  Buffer<A> cache(kLog ? 0 : slots * kCachedRows * kTile);
  const A e = static_cast<A>(eps);
  const int64_t reads = std::max<int64_t>(1, r.positions * F);
  const int64_t grain = std::max<int64_t>(1, kGroupedReadsPerPiece * groups.num_groups / reads);
  parallel_for_dynamic(groups.num_groups, grain, [&](int64_t first, int64_t last) {
    A* mine = kLog ? nullptr : cache.data() + (nested ? 0 : omp_get_thread_num()) * kCachedRows * kTile;
    for (int64_t g = first; g < last; ++g) {
      const int64_t begin = groups.offsets[g];
      const int64_t end = groups.offsets[g + 1];
      for (int64_t k0 = 0; k0 < F; k0 += kTile) {
        const int64_t count = std::min(kTile, F - k0);
        if (count == kTile) {
          softmax_tile<T, kLog, kTile>(x, o, r, begin, end, k0, count, e, mine);
        } else {
          softmax_tile<T, kLog, 0>(x, o, r, begin, end, k0, count, e, mine);
        }
      }
    }
  });
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

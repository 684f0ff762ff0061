// CPU scatter_softmax_backward kernel: the gradient of the (log-)softmax
// over grouped rows with respect to its input, from the forward's output y
// and the output's gradient g. Per group and feature, one sum S over the
// group's rows (of g * y for the softmax, of g for the log-softmax), then
// every row's gradient, y * (g - S) or g - exp(y) * S, rounded once. Groups
// and chunks as in the forward (softmax_cpu_steps.h): a group of up to 512
// rows by one thread, reading its rows from memory once and then from
// cache; a larger one in chunks of 512 rows over all threads, their sums
// added in chunk order. Results do not depend on the thread count or the
// ISA.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/detail/prefetch.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/scatter_softmax.h"
#include "ops/gather_scatter/softmax_cpu_steps.h"
#include "ops/reduce_ops.h"

namespace scatterx::detail {

namespace softmax_cpu {
namespace {

// exp(v[j]) for any v: the vectorized float exp covers v <= 0 and NaN (a
// log-softmax output, when eps >= 0); the rare positive value is redone
// with std::exp.
template <typename A>
SCATTERX_INLINE void exp_row(const A* v, A* e, int64_t n) {
  if constexpr (std::is_same_v<A, float>) {
    uint32_t positive = 0;
    for (int64_t j = 0; j < n; ++j) {
      e[j] = exp_core(v[j]);
      positive |= static_cast<uint32_t>(static_cast<uint32_t>(bits_of_float(v[j])) - 1u < 0x7F800000u);
    }
    if (positive != 0) {
      for (int64_t j = 0; j < n; ++j) e[j] = v[j] > 0 ? std::exp(v[j]) : e[j];
    }
  } else {
    for (int64_t j = 0; j < n; ++j) e[j] = std::exp(v[j]);
  }
}

// The backward's passes over a tile of rows of y and g.
template <typename T, int64_t kCount>
struct GradTile : TileRows<kCount> {
  using A = acc_t<T>;
  using TileRows<kCount>::count;
  using TileRows<kCount>::at;
  using TileRows<kCount>::r;
  using TileRows<kCount>::begin;
  using TileRows<kCount>::end;
  const T* y;
  const T* g;

  SCATTERX_INLINE void prefetch(int64_t p) const {
    if (p + kPrefetch < r.positions) {
      const auto bytes = static_cast<size_t>(count()) * sizeof(T);
      prefetch_bytes(y + at(p + kPrefetch), bytes);
      prefetch_bytes(g + at(p + kPrefetch), bytes);
    }
  }

  // s[j] = the sum over the rows, in row order, of g * y (softmax) or g.
  template <bool kLog>
  SCATTERX_INLINE void sum(A* s) const {
    const int64_t n = count();
    for (int64_t j = 0; j < n; ++j) s[j] = A(0);
    for (int64_t p = begin; p < end; ++p) {
      prefetch(p);
      const T* yr = y + at(p);
      const T* gr = g + at(p);
      if constexpr (kLog) {
        for (int64_t j = 0; j < n; ++j) s[j] += static_cast<A>(gr[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) s[j] += static_cast<A>(gr[j]) * static_cast<A>(yr[j]);
      }
    }
  }

  // The rows' gradients from the group's sums; from_memory: prefetch the rows.
  template <bool kLog>
  SCATTERX_INLINE void write(T* gx, const A* s, bool from_memory) const {
    const int64_t n = count();
    A v[kTile];
    A e[kTile];
    for (int64_t p = begin; p < end; ++p) {
      if (from_memory) prefetch(p);
      const T* yr = y + at(p);
      const T* gr = g + at(p);
      T* o = gx + at(p);
      if constexpr (kLog) {
        for (int64_t j = 0; j < n; ++j) v[j] = static_cast<A>(yr[j]);
        exp_row(v, e, n);
        for (int64_t j = 0; j < n; ++j) o[j] = static_cast<T>(static_cast<A>(gr[j]) - e[j] * s[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) {
          o[j] = static_cast<T>(static_cast<A>(yr[j]) * (static_cast<A>(gr[j]) - s[j]));
        }
      }
    }
  }
};

template <typename T, bool kLog>
struct GradKernel {
  using A = acc_t<T>;
  const T* y;
  const T* g;
  T* gx;
  Rows r;
  const TargetGroups& groups;
  const std::vector<Chunk>& chunks;
  A* chunk_sum;  // [chunks, features]

  enum class TileStep { Group, Partials, Outputs };

  // Plain inline functions, not lambdas: a lambda would be compiled for the
  // baseline ISA only, and called from the AVX2 build.
  template <TileStep kStep, typename TileT>
  SCATTERX_INLINE void tile_step(const TileT& t, int64_t chunk) const {
    const int64_t F = r.features;
    if constexpr (kStep == TileStep::Group) {
      A s[kTile];
      t.template sum<kLog>(s);
      t.template write<kLog>(gx, s, false);
    } else if constexpr (kStep == TileStep::Partials) {
      t.template sum<kLog>(chunk_sum + chunk * F + t.k0);
    } else {
      t.template write<kLog>(gx, chunk_sum + chunks[chunk].first * F + t.k0, true);
    }
  }

  template <TileStep kStep>
  SCATTERX_INLINE void for_each_tile(int64_t begin, int64_t end, int64_t chunk) const {
    for (int64_t k0 = 0; k0 < r.features; k0 += kTile) {
      const int64_t count = std::min(kTile, r.features - k0);
      if (count == kTile) {
        tile_step<kStep>(GradTile<T, kTile>{{r, begin, end, k0, count}, y, g}, chunk);
      } else {
        tile_step<kStep>(GradTile<T, 0>{{r, begin, end, k0, count}, y, g}, chunk);
      }
    }
  }

  SCATTERX_INLINE void run_body(Step step, int64_t first, int64_t last) const {
    const int64_t F = r.features;
    switch (step) {
      case Step::SmallGroups:
        for (int64_t grp = first; grp < last; ++grp) {
          const int64_t begin = groups.offsets[grp];
          const int64_t end = groups.offsets[grp + 1];
          if (end - begin <= kChunkRows) for_each_tile<TileStep::Group>(begin, end, 0);
        }
        break;
      case Step::ChunkPartials:
        for (int64_t c = first; c < last; ++c) for_each_tile<TileStep::Partials>(chunks[c].begin, chunks[c].end, c);
        break;
      case Step::Combine:  // S = the chunks' sums added in chunk order, over the first chunk's
        for (int64_t c = first; c < last; ++c) {
          if (chunks[c].first != c) continue;
          for (int64_t k = c + 1; k < chunks[c].last; ++k) {
            for (int64_t j = 0; j < F; ++j) chunk_sum[c * F + j] += chunk_sum[k * F + j];
          }
        }
        break;
      case Step::ChunkOutputs:
        for (int64_t c = first; c < last; ++c) for_each_tile<TileStep::Outputs>(chunks[c].begin, chunks[c].end, c);
        break;
    }
  }
  void run(Step step, int64_t first, int64_t last, A* /*scratch*/) const { run_body(step, first, last); }
  SCATTERX_TARGET_AVX2 void run_avx2(Step step, int64_t first, int64_t last, A* /*scratch*/) const {
    run_body(step, first, last);
  }
};

template <typename T, bool kLog>
void softmax_grad_groups(const TensorView& out, const TensorView& grad, const TargetGroups& groups,
                         const TensorView& grad_src) {
  using A = acc_t<T>;
  const Rows r{groups.order.data(), out.size(0), out.size(1)};
  const std::vector<Chunk> chunks = chunk_long_groups(groups);
  const auto num_chunks = static_cast<int64_t>(chunks.size());
  Buffer<A> chunk_sum(num_chunks * r.features);
  const GradKernel<T, kLog> kernel{static_cast<const T*>(out.data()),
                                   static_cast<const T*>(grad.data()),
                                   static_cast<T*>(grad_src.data()),
                                   r,
                                   groups,
                                   chunks,
                                   chunk_sum.data()};
  run_steps<A>(kernel, groups, r.positions, r.features, num_chunks, 0);
}

}  // namespace
}  // namespace softmax_cpu

void scatter_softmax_backward_cpu(const TensorView& out, const TensorView& grad, const TargetGroups& groups,
                                  const TensorView& grad_src, bool log) {
  softmax_cpu::dispatch_floating(out.dtype(), "scatter_softmax_backward", log, [&](auto dtype_tag, auto log_tag) {
    softmax_cpu::softmax_grad_groups<CppType<decltype(dtype_tag)::value>, decltype(log_tag)::value>(out, grad, groups,
                                                                                                    grad_src);
  });
}

}  // namespace scatterx::detail

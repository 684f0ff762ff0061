// CUDA scatter kernels for one dtype (every reduce and index type), included
// by the generated per-dtype files scatter_cuda_<dtype>.cu so that the dtypes
// compile in parallel.
//
// Two paths, both producing the contract of reduce_ops.h:
//  - atomic: every position folds its value into its destination with an
//    atomic (atomics.cuh). include_self = false first resets the hit
//    destinations to the reduce's identity; mean counts hits per
//    destination and divides in a last pass. Values arrive in any order, so
//    float sums round differently from run to run.
//  - sorted: positions are stably radix-sorted by destination (scatter_sort.cu)
//    and each destination's values are folded in a fixed order: by one
//    thread in index order for element scatters (the CPU backend's result,
//    bit for bit), by warps over columns for row scatters (chunked for long
//    runs, see run_sorted_rows). Used in deterministic mode, and for the
//    folds no atomic implements (kAtomicFold).
#pragma once

#include "ops/cuda.h"
#include "ops/cuda/atomics.cuh"
#include "ops/cuda/backend.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/positions.cuh"
#include "ops/cuda/scatter_sort.h"
#include "ops/detail/index_geometry.h"
#include "ops/dispatch.h"

namespace scatterx::detail::cuda {

namespace {

template <typename T, bool kScaled>
__device__ __forceinline__ acc_t<T> load_value(const T* src, int64_t at, acc_t<T> alpha) {
  using A = acc_t<T>;
  if constexpr (kScaled) {
    return arith::mul(static_cast<A>(src[at]), alpha);
  } else {
    return static_cast<A>(src[at]);
  }
}

template <typename T, Reduce R, typename I>
__global__ void fill_identity(T* self, const I* index, const IndexGeometry g, int64_t bound, int64_t total) {
  SCATTERX_GRID_LOOP(u, total) {
    const Position p = decode_position(g, u);
    const int64_t v = static_cast<int64_t>(index[p.index]);
    if (v < 0 || v >= bound) continue;
    self[p.indexed + v * g.dim_stride[0]] = static_cast<T>(ReduceOp<R, acc_t<T>>::identity());
  }
}

template <typename T, Reduce R, typename I, bool kScaled, bool kCount>
__global__ void fold_atomic(T* self, const T* src, const I* index, const IndexGeometry g, int64_t bound, int64_t total,
                            acc_t<T> alpha, int* counts, int64_t self_lowest) {
  SCATTERX_GRID_LOOP(u, total) {
    const Position p = decode_position(g, u);
    const int64_t v = static_cast<int64_t>(index[p.index]);
    if (v < 0 || v >= bound) continue;
    const int64_t dest = p.indexed + v * g.dim_stride[0];
    atomic_fold<R>(self + dest, load_value<T, kScaled>(src, p.positional, alpha));
    if constexpr (kCount) atomicAdd(counts + (dest - self_lowest), 1);
  }
}

// Sums of single elements (row_len 1: a 1-d scatter, a histogram): lanes of
// a warp that hit the same destination add their values first (in lane
// order, through shared memory) and one of them makes the atomic, so a hot
// destination takes up to 32 times fewer atomics.
template <typename T, Reduce R, typename I, bool kScaled, bool kCount>
__global__ void fold_atomic_aggregated(T* self, const T* src, const I* index, const IndexGeometry g, int64_t bound,
                                       int64_t total, acc_t<T> alpha, int* counts, int64_t self_lowest) {
  using A = acc_t<T>;
  // Raw storage: A may have a constructor, which __shared__ variables cannot run.
  __shared__ alignas(16) unsigned char storage[kThreads * sizeof(A)];
  A* values = reinterpret_cast<A*>(storage);
  const int lane = threadIdx.x % 32;
  const int warp_base = threadIdx.x - lane;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Every lane runs the same number of rounds, so the warp stays converged.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x + warp_base; base < total; base += step) {
    const int64_t u = base + lane;
    int64_t dest = -1;  // lanes without a destination group among themselves and do nothing
    A value = ReduceOp<R, A>::identity();
    if (u < total) {
      const Position p = decode_position(g, u);
      const int64_t v = static_cast<int64_t>(index[p.index]);
      if (v >= 0 && v < bound) {
        dest = p.indexed + v * g.dim_stride[0];
        value = load_value<T, kScaled>(src, p.positional, alpha);
      }
    }
    values[threadIdx.x] = value;
    const unsigned peers = __match_any_sync(0xffffffffu, static_cast<unsigned long long>(dest));
    __syncwarp();
    if (dest >= 0 && lane == __ffs(peers) - 1) {
      A sum = ReduceOp<R, A>::identity();
      for (unsigned rest = peers; rest != 0; rest &= rest - 1) {
        sum = ReduceOp<R, A>::combine(sum, values[warp_base + __ffs(rest) - 1]);
      }
      atomic_fold<R>(self + dest, sum);
      if constexpr (kCount) atomicAdd(counts + (dest - self_lowest), __popc(peers));
    }
    __syncwarp();
  }
}

// Mean's last pass over self: divide every hit destination by its count.
template <typename T>
__global__ void finalize_mean(T* self, const StridedLayout<1> layout, int64_t total, const int* counts,
                              int64_t self_lowest, int include_self) {
  using A = acc_t<T>;
  SCATTERX_GRID_LOOP(u, total) {
    int64_t off[1];
    layout.offsets(u, off);
    const int hits = counts[off[0] - self_lowest];
    if (hits == 0) continue;
    self[off[0]] =
        static_cast<T>(ReduceOp<Reduce::Mean, A>::finalize(static_cast<A>(self[off[0]]), int64_t{hits} + include_self));
  }
}

// One thread per destination of the sorted positions: folds its run of
// values in index order (the sort is stable), then writes once.
template <typename T, Reduce R, bool kScaled>
__global__ void fold_sorted(T* self, const T* src, const IndexGeometry g, const uint64_t* keys,
                            const int64_t* positions, int64_t total, uint64_t skipped_key, int64_t self_lowest,
                            bool include_self, acc_t<T> alpha) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  SCATTERX_GRID_LOOP(s, total) {
    const uint64_t key = keys[s];
    if (key == skipped_key || (s > 0 && keys[s - 1] == key)) continue;  // not the head of a run
    T* dest = self + (static_cast<int64_t>(key) + self_lowest);
    A acc = include_self ? static_cast<A>(*dest) : Op::identity();
    int64_t n = 0;
    for (int64_t q = s; q < total && keys[q] == key; ++q, ++n) {
      acc = Op::combine(acc, load_value<T, kScaled>(src, decode_position(g, positions[q]).positional, alpha));
    }
    *dest = static_cast<T>(Op::finalize(acc, n + (include_self ? 1 : 0)));
  }
}

// Rows (one index value per row of row_len elements: index_add_, an
// expanded index): positions are sorted by destination row, and each run of
// rows is folded by warps whose lanes take consecutive columns. A run longer
// than kChunkRows is first folded chunk by chunk into partial rows (in
// parallel), then the partials in chunk order: a fixed order, so results are
// still the same run to run; runs of kChunkRows or fewer rows fold straight
// from self in index order, the CPU backend's order.
constexpr int64_t kChunkRows = 64;

// Calls f(item, column) for every item (chunk or run) and column of a row,
// a warp per (item, 32 columns): lanes take consecutive columns, so the
// rows' loads and stores are coalesced.
template <typename F>
__device__ __forceinline__ void for_each_warp_column(int64_t items, int64_t row_len, F f) {
  const int64_t tiles = (row_len + 31) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < items * tiles; w += warps) {
    const int64_t j = (w % tiles) * 32 + lane;
    if (j < row_len) f(w / tiles, j);
  }
}

__device__ __forceinline__ int64_t run_of_chunk(const int64_t* chunk_offsets, int64_t runs, int64_t chunk) {
  int64_t lo = 0;  // the last run whose first chunk is <= chunk (upper bound - 1)
  int64_t hi = runs;
  while (lo + 1 < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (chunk_offsets[mid] <= chunk) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <typename T, Reduce R, bool kScaled>
__global__ void fold_row_chunks(acc_t<T>* partial, const T* src, const IndexGeometry rows_g, int64_t row_len,
                                int64_t src_row_stride, const int64_t* positions, RunsView runs, acc_t<T> alpha) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  for_each_warp_column(runs.chunks, row_len, [&](int64_t chunk, int64_t j) {
    const int64_t run = run_of_chunk(runs.chunk_offsets, runs.runs, chunk);
    const int64_t first = runs.offsets[run] + (chunk - runs.chunk_offsets[run]) * kChunkRows;
    const int64_t last = min(first + kChunkRows, runs.offsets[run] + runs.counts[run]);
    A acc = Op::identity();
    for (int64_t s = first; s < last; ++s) {
      const int64_t at = decode_position(rows_g, positions[s]).positional + j * src_row_stride;
      acc = Op::combine(acc, load_value<T, kScaled>(src, at, alpha));
    }
    partial[chunk * row_len + j] = acc;
  });
}

template <typename T, Reduce R, bool kScaled>
__global__ void fold_row_runs(T* self, const T* src, const acc_t<T>* partial, const IndexGeometry rows_g,
                              int64_t row_len, int64_t self_row_stride, int64_t src_row_stride,
                              const int64_t* positions, RunsView runs, uint64_t skipped_key, int64_t self_lowest,
                              bool include_self, acc_t<T> alpha) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  for_each_warp_column(runs.runs, row_len, [&](int64_t run, int64_t j) {
    if (runs.keys[run] == skipped_key) return;
    T* dest = self + (static_cast<int64_t>(runs.keys[run]) + self_lowest) + j * self_row_stride;
    A acc = include_self ? static_cast<A>(*dest) : Op::identity();
    const int64_t count = runs.counts[run];
    if (count <= kChunkRows) {
      for (int64_t s = runs.offsets[run]; s < runs.offsets[run] + count; ++s) {
        const int64_t at = decode_position(rows_g, positions[s]).positional + j * src_row_stride;
        acc = Op::combine(acc, load_value<T, kScaled>(src, at, alpha));
      }
    } else {
      for (int64_t c = runs.chunk_offsets[run]; c < runs.chunk_offsets[run + 1]; ++c) {
        acc = Op::combine(acc, partial[c * row_len + j]);
      }
    }
    *dest = static_cast<T>(Op::finalize(acc, count + (include_self ? 1 : 0)));
  });
}

template <typename T, Reduce R, typename I, bool kScaled>
void run_atomic(const ScatterArgs& a, const IndexGeometry& g, const SelfSpan& span, int64_t total, acc_t<T> alpha) {
  T* self = static_cast<T*>(a.self.data());
  const T* src = static_cast<const T*>(a.src.data());
  const I* index = static_cast<const I*>(a.index.data());
  const int64_t bound = a.self.size(a.dim);
  const unsigned blocks = blocks_for(total);
  // Lanes of a warp share destinations only when positions are single
  // elements (in rows they take consecutive columns).
  constexpr bool kAggregates = R == Reduce::Sum || R == Reduce::Mean;
  if (!a.include_self && R != Reduce::None) {
    fill_identity<T, R, I><<<blocks, kThreads, 0, stream()>>>(self, index, g, bound, total);
    check_launch(a.op, "fill_identity");
  }
  std::shared_ptr<void> counts;  // hits per destination, for mean
  if constexpr (kNeedsCount<R>) {
    counts = allocate(span.elements * int64_t{sizeof(int)}, a.self.device(), a.op);
    fill_zero(counts.get(), span.elements * int64_t{sizeof(int)}, a.op);
  }
  constexpr bool kCount = kNeedsCount<R>;
  auto* hits = static_cast<int*>(counts.get());
  if (kAggregates && g.row_len == 1) {
    if constexpr (kAggregates) {
      fold_atomic_aggregated<T, R, I, kScaled, kCount>
          <<<blocks, kThreads, 0, stream()>>>(self, src, index, g, bound, total, alpha, hits, span.lowest);
    }
  } else {
    fold_atomic<T, R, I, kScaled, kCount>
        <<<blocks, kThreads, 0, stream()>>>(self, src, index, g, bound, total, alpha, hits, span.lowest);
  }
  check_launch(a.op, "fold_atomic");
  if constexpr (kCount) {
    const TensorView* views[1] = {&a.self};
    const StridedLayout<1> layout = layout_of<1>(a.self.sizes(), views);
    const int64_t n = a.self.numel();
    finalize_mean<T>
        <<<blocks_for(n), kThreads, 0, stream()>>>(self, layout, n, hits, span.lowest, a.include_self ? 1 : 0);
    check_launch(a.op, "finalize_mean");
  }
}

template <typename T, Reduce R, bool kScaled>
void run_sorted_rows(const ScatterArgs& a, const IndexGeometry& g, const SelfSpan& span, acc_t<T> alpha) {
  using A = acc_t<T>;
  IndexGeometry rows_g = g;  // one position per row: the index is constant along it
  rows_g.row_len = 1;
  const int64_t rows = g.outer_numel * g.k;
  const SortedPositions sorted = sort_by_destination(a, rows_g, span, rows);
  const Runs found = find_runs(a, sorted, rows, kChunkRows);
  const RunsView& runs = found.view;
  const int64_t tiles = (g.row_len + 31) / 32;
  std::shared_ptr<void> partial =
      allocate(std::max<int64_t>(1, runs.chunks * g.row_len) * int64_t{sizeof(A)}, a.self.device(), a.op);
  auto* partials = static_cast<A*>(partial.get());
  const T* src = static_cast<const T*>(a.src.data());
  if (runs.chunks > 0) {
    fold_row_chunks<T, R, kScaled><<<blocks_for(runs.chunks * tiles * 32), kThreads, 0, stream()>>>(
        partials, src, rows_g, g.row_len, g.row_stride[1], sorted.positions, runs, alpha);
    check_launch(a.op, "fold_row_chunks");
  }
  fold_row_runs<T, R, kScaled><<<blocks_for(runs.runs * tiles * 32), kThreads, 0, stream()>>>(
      static_cast<T*>(a.self.data()), src, partials, rows_g, g.row_len, g.row_stride[0], g.row_stride[1],
      sorted.positions, runs, sorted.skipped_key, span.lowest, a.include_self, alpha);
  check_launch(a.op, "fold_row_runs");
}

template <typename T, Reduce R, bool kScaled>
void run_sorted(const ScatterArgs& a, const IndexGeometry& g, const SelfSpan& span, int64_t total, acc_t<T> alpha) {
  if (g.slice_index && g.row_len > 1) {
    run_sorted_rows<T, R, kScaled>(a, g, span, alpha);
    return;
  }
  const SortedPositions sorted = sort_by_destination(a, g, span, total);
  fold_sorted<T, R, kScaled><<<blocks_for(total), kThreads, 0, stream()>>>(
      static_cast<T*>(a.self.data()), static_cast<const T*>(a.src.data()), g, sorted.keys, sorted.positions, total,
      sorted.skipped_key, span.lowest, a.include_self, alpha);
  check_launch(a.op, "fold_sorted");
}

}  // namespace

template <DType D>
void scatter_cuda_dtype(const ScatterArgs& a, const IndexGeometry& g) {
  using T = CppType<D>;
  using A = acc_t<T>;
  const int64_t total = g.outer_numel * g.k * g.row_len;
  if (total == 0) return;
  const SelfSpan span = self_span(a.self);
  dispatch_reduce(a.reduce, [&](auto reduce_tag) {
    constexpr Reduce R = decltype(reduce_tag)::value;
    if constexpr (reduce_supported(R, D)) {
      const bool scaled = R == Reduce::Sum && a.scaled;
      const A alpha = scaled ? a.alpha.to<A>(a.op, "alpha") : A(1);
      const bool sorted = scatterx::cuda::deterministic() || !kAtomicFold<R, T>;
      auto run = [&](auto scaled_tag) {
        constexpr bool kScaled = decltype(scaled_tag)::value;
        if (sorted) {
          run_sorted<T, R, kScaled>(a, g, span, total, alpha);
          return;
        }
        if constexpr (kAtomicFold<R, T>) {
          dispatch_index_dtype(a.index.dtype(), a.op, [&](auto index_tag) {
            run_atomic<T, R, typename decltype(index_tag)::type, kScaled>(a, g, span, total, alpha);
          });
        }
      };
      if constexpr (R == Reduce::Sum) {
        if (scaled) {
          run(std::true_type{});
          return;
        }
      }
      run(std::false_type{});
    } else {
      raise<DTypeError>(a.op, "reduce '", reduce_name(R), "' is not supported for ", dtype_name(D), " tensors");
    }
  });
}

}  // namespace scatterx::detail::cuda

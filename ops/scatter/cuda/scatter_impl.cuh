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
//    and each destination's values are folded in a fixed order (see
//    run_sorted): the same result run to run. Used in deterministic mode,
//    for the folds no atomic implements (kAtomicFold), and when the index
//    check found a destination hot enough that its atomics would serialize
//    (contention.h).
#pragma once

#include <cstdint>

#include "ops/cuda.h"
#include "ops/detail/cuda/contention.h"
#include "ops/detail/cuda/positions.cuh"
#include "ops/detail/index_geometry.h"
#include "ops/dispatch.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"
#include "ops/scatter/cuda/atomic_rows.cuh"
#include "ops/scatter/cuda/atomics.cuh"
#include "ops/scatter/cuda/scatter_cuda.h"
#include "ops/scatter/cuda/scatter_items.cuh"
#include "ops/scatter/cuda/scatter_sort.h"

namespace scatterx::detail::cuda {

namespace {

template <typename T, Reduce R, typename I>
__global__ void fill_identity(T* self, const I* index, const DeviceGeometry g, int64_t bound, int64_t total) {
  SCATTERX_GRID_LOOP(u, total) {
    const Position p = decode_position(g, u);
    const int64_t v = static_cast<int64_t>(index[p.index]);
    if (v < 0 || v >= bound) continue;
    self[p.indexed + v * g.dim_stride[0]] = static_cast<T>(ReduceOp<R, acc_t<T>>::identity());
  }
}

template <typename T, Reduce R, typename I, bool kScaled, bool kCount>
__global__ void fold_atomic(T* self, const T* src, const I* index, const DeviceGeometry g, int64_t bound, int64_t total,
                            const Scale<T> scale, int* counts, int64_t self_lowest) {
  SCATTERX_GRID_LOOP(u, total) {
    const Position p = decode_position(g, u);
    const int64_t v = static_cast<int64_t>(index[p.index]);
    if (v < 0 || v >= bound) continue;
    const int64_t dest = p.indexed + v * g.dim_stride[0];
    atomic_fold<R>(self + dest, load_value<T, kScaled>(src, p, 0, scale));
    if constexpr (kCount) atomicAdd(counts + (dest - self_lowest), 1);
  }
}

// Marks a lane with no destination in fold_atomic_aggregated.
constexpr int64_t kNoDestination = INT64_MIN;

// Sums of single elements (row_len 1: a 1-d scatter, a histogram): lanes of
// a warp that hit the same destination add their values first (in lane
// order, through shared memory) and one of them makes the atomic, so a hot
// destination takes up to 32 times fewer atomics.
template <typename T, Reduce R, typename I, bool kScaled, bool kCount>
__global__ void fold_atomic_aggregated(T* self, const T* src, const I* index, const DeviceGeometry g, int64_t bound,
                                       int64_t total, const Scale<T> scale, int* counts, int64_t self_lowest) {
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
    // Lanes without a destination group among themselves and do nothing.
    // Not -1: with negative strides (flipped views) a real destination's
    // offset from self's data pointer can be negative.
    int64_t dest = kNoDestination;
    A value = ReduceOp<R, A>::identity();
    if (u < total) {
      const Position p = decode_position(g, u);
      const int64_t v = static_cast<int64_t>(index[p.index]);
      if (v >= 0 && v < bound) {
        dest = p.indexed + v * g.dim_stride[0];
        value = load_value<T, kScaled>(src, p, 0, scale);
      }
    }
    values[threadIdx.x] = value;
    const unsigned peers = __match_any_sync(0xffffffffu, static_cast<unsigned long long>(dest));
    __syncwarp();
    if (dest != kNoDestination && lane == __ffs(peers) - 1) {
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

// The sorted path. Positions ("items": single elements, or whole rows of
// row_len columns when one index value selects a row) are stably sorted by
// destination, and each destination's run of items is folded in a fixed
// order, so the result is the same run to run:
//  - runs of kChunkRows items or fewer fold straight from self in index
//    order (the CPU backend's order, so its result bit for bit), one thread
//    per (run, column);
//  - longer runs (hot destinations: power-law degrees, skewed routing) are
//    cut into chunks of kChunkRows items folded in parallel into partials,
//    one thread per (chunk, column); then a block per run folds its partials,
//    each group of threads a contiguous share and then the shares in order.
//    A hot destination thus costs a few parallel steps, not a serial walk
//    over all of its items.
// The numbers of runs and chunks stay on the device (find_runs): the path
// synchronizes nothing.
constexpr int64_t kChunkRows = 64;

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

template <typename T, bool kScaled>
__device__ __forceinline__ acc_t<T> load_item(const T* src, const SortedItems& it, int64_t s, int64_t j,
                                              const Scale<T>& scale) {
  return load_value<T, kScaled>(src, decode_position(it.items, it.positions[s]), j * it.src_col, scale);
}

// Folds column j of sorted items [first, end) into acc in their order. The
// items' loads are issued four at a time before their folds: each load waits
// on the one before it for its position, and runs are short (8 items on
// average in the GNN rows), so one at a time a thread spent most of its run
// waiting on memory. The folds stay in item order: the same bits.
template <typename T, Reduce R, bool kScaled>
__device__ __forceinline__ acc_t<T> fold_items(acc_t<T> acc, const T* src, const SortedItems& it, int64_t first,
                                               int64_t end, int64_t j, const Scale<T>& scale) {
  using Op = ReduceOp<R, acc_t<T>>;
  constexpr int kInFlight = 4;
  int64_t s = first;
  for (; s + kInFlight <= end; s += kInFlight) {
    acc_t<T> values[kInFlight];
#pragma unroll
    for (int q = 0; q < kInFlight; ++q) values[q] = load_item<T, kScaled>(src, it, s + q, j, scale);
#pragma unroll
    for (int q = 0; q < kInFlight; ++q) acc = Op::combine(acc, values[q]);
  }
  for (; s < end; ++s) acc = Op::combine(acc, load_item<T, kScaled>(src, it, s, j, scale));
  return acc;
}

// Consecutive threads take consecutive columns of an item, then the next
// item: coalesced row reads when rows are wide, one item per thread when not.
template <typename T, Reduce R, bool kScaled>
__global__ void fold_chunks(acc_t<T>* partial, const T* src, const SortedItems it, RunsView runs,
                            const Scale<T> scale) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  const int64_t n_runs = *runs.runs;
  SCATTERX_GRID_LOOP(t, runs.chunk_offsets[n_runs] * it.row_len) {
    const int64_t chunk = t / it.row_len;
    const int64_t j = t % it.row_len;
    const int64_t run = run_of_chunk(runs.chunk_offsets, n_runs, chunk);
    const int64_t first = runs.offsets[run] + (chunk - runs.chunk_offsets[run]) * kChunkRows;
    const int64_t last = min(first + kChunkRows, runs.offsets[run] + runs.counts[run]);
    partial[t] = fold_items<T, R, kScaled>(Op::identity(), src, it, first, last, j, scale);
  }
}

template <typename T, Reduce R, bool kScaled>
__global__ void fold_short_runs(T* self, const T* src, const SortedItems it, RunsView runs, uint64_t skipped_key,
                                int64_t self_lowest, bool include_self, const Scale<T> scale) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  SCATTERX_GRID_LOOP(t, *runs.runs * it.row_len) {
    const int64_t run = t / it.row_len;
    const int64_t j = t % it.row_len;
    const int64_t count = runs.counts[run];
    if (runs.keys[run] == skipped_key || count > kChunkRows) continue;
    T* dest = self + (static_cast<int64_t>(runs.keys[run]) + self_lowest) + j * it.self_col;
    const A first = include_self ? static_cast<A>(*dest) : Op::identity();
    const A acc = fold_items<T, R, kScaled>(first, src, it, runs.offsets[run], runs.offsets[run] + count, j, scale);
    *dest = static_cast<T>(Op::finalize(acc, count + (include_self ? 1 : 0)));
  }
}

// A block per long run (grid-stride over runs; short runs are skipped by the
// whole block at once). Threads split into `shares` groups of `width`
// columns: share s folds the s-th contiguous slice of the run's partials in
// its column, then share 0 folds self and the shares in order, so the
// partials fold in chunk order (scatter_ without reduce: the last wins).
template <typename T, Reduce R>
__global__ void fold_long_runs(T* self, const acc_t<T>* partial, const SortedItems it, RunsView runs,
                               uint64_t skipped_key, int64_t self_lowest, bool include_self) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  __shared__ alignas(16) unsigned char storage[kThreads * sizeof(A)];
  A* shares_acc = reinterpret_cast<A*>(storage);
  const int64_t width = it.row_len < 32 ? it.row_len : 32;
  const int64_t shares = kThreads / width;
  const int64_t share = threadIdx.x / width;
  const int64_t c = threadIdx.x % width;
  const int64_t n_runs = *runs.runs;
  for (int64_t run = blockIdx.x; run < n_runs; run += gridDim.x) {
    const int64_t first_chunk = runs.chunk_offsets[run];
    const int64_t end_chunk = runs.chunk_offsets[run + 1];
    if (first_chunk == end_chunk || runs.keys[run] == skipped_key) continue;  // uniform over the block
    T* base = self + (static_cast<int64_t>(runs.keys[run]) + self_lowest);
    const int64_t per_share = (end_chunk - first_chunk + shares - 1) / shares;
    const int64_t from = first_chunk + share * per_share;
    const int64_t to = min(from + per_share, end_chunk);
    for (int64_t tile = 0; tile < it.row_len; tile += width) {
      const int64_t j = tile + c;
      const bool active = share < shares && j < it.row_len;
      A acc = Op::identity();
      if (active) {
        for (int64_t q = from; q < to; ++q) acc = Op::combine(acc, partial[q * it.row_len + j]);
      }
      shares_acc[threadIdx.x] = acc;
      __syncthreads();
      if (active && share == 0) {
        T* dest = base + j * it.self_col;
        A total = include_self ? static_cast<A>(*dest) : Op::identity();
        // Empty shares (fewer chunks than shares) hold no value, not an identity.
        for (int64_t s = 0; s < shares && s * per_share < end_chunk - first_chunk; ++s) {
          total = Op::combine(total, shares_acc[s * width + c]);
        }
        *dest = static_cast<T>(Op::finalize(total, runs.counts[run] + (include_self ? 1 : 0)));
      }
      __syncthreads();
    }
  }
}

// Rows as items: the geometry walks (outer, i) with one item per row of
// row_len columns (slice_index geometries only).
SortedItems rows_of(const IndexGeometry& g) {
  SortedItems it;
  IndexGeometry items = g;
  items.row_len = 1;
  it.items = DeviceGeometry(items);
  it.row_len = g.row_len;
  it.self_col = g.row_stride[0];
  it.src_col = g.row_stride[1];
  return it;
}

// Rows shorter than this fold element by element: a group of lanes per row
// would leave most of each group idle.
constexpr int64_t kMinRowForRowKernel = 8;

template <typename T, Reduce R, typename I, bool kScaled>
void run_atomic(const ScatterArgs& a, const DeviceGeometry& g, const SelfSpan& span, int64_t total,
                const Scale<T>& scale) {
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
          <<<blocks, kThreads, 0, stream()>>>(self, src, index, g, bound, total, scale, hits, span.lowest);
    }
  } else if (kRowVectors<T, R, kCount> && g.slice_index && g.row_len >= kMinRowForRowKernel) {
    // Only where a row folds in vectors: on an H100 the column-by-column
    // row kernel ran amax (a compare-and-swap per element) 1.35x slower than
    // fold_atomic over the same 2^23 x 64 power-law scatter (5.9 vs 4.4 ms).
    SortedItems it = rows_of(g);
    // The smallest power of two of lanes that covers a row's vectors, up to
    // a warp: short rows share a warp instead of idling most of it.
    constexpr int kWidth = RowVector<T, R>::kWidth;
    const int64_t per_row = (g.row_len + kWidth - 1) / kWidth;
    int group = 1;
    while (group < 32 && group < per_row) group *= 2;
    const int64_t rows = g.outer_numel * g.k;
    const int64_t batches = (rows + kRowBatch<R> - 1) / kRowBatch<R>;
    fold_atomic_rows<T, R, I, kScaled, kCount><<<blocks_for(batches * group), kThreads, 0, stream()>>>(
        self, src, index, it, bound, rows, scale, hits, span.lowest, group);
  } else {
    fold_atomic<T, R, I, kScaled, kCount>
        <<<blocks, kThreads, 0, stream()>>>(self, src, index, g, bound, total, scale, hits, span.lowest);
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
void run_sorted(const ScatterArgs& a, const DeviceGeometry& g, const SelfSpan& span, int64_t total,
                const Scale<T>& scale) {
  using A = acc_t<T>;
  SortedItems it;
  it.items = g;
  int64_t items = total;
  if (g.slice_index && g.row_len > 1) {  // one index value per row: sort rows
    it = rows_of(g);
    items = g.outer_numel * g.k;
  }
  const SortedPositions sorted = sort_by_destination(a, it.items, span, items);
  it.positions = sorted.positions;
  const Runs found = find_runs(a, sorted, items, kChunkRows);
  const RunsView& runs = found.view;
  T* self = static_cast<T*>(a.self.data());
  const T* src = static_cast<const T*>(a.src.data());
  // Grids cover the bounds on runs and chunks; the kernels stop at the
  // counts they read on the device.
  fold_short_runs<T, R, kScaled><<<blocks_for(runs.max_runs * it.row_len), kThreads, 0, stream()>>>(
      self, src, it, runs, sorted.skipped_key, span.lowest, a.include_self, scale);
  check_launch(a.op, "fold_short_runs");
  if (runs.max_chunks == 0) return;  // no run can be longer than a chunk
  std::shared_ptr<void> partial = allocate(runs.max_chunks * it.row_len * int64_t{sizeof(A)}, a.self.device(), a.op);
  auto* partials = static_cast<A*>(partial.get());
  fold_chunks<T, R, kScaled>
      <<<blocks_for(runs.max_chunks * it.row_len), kThreads, 0, stream()>>>(partials, src, it, runs, scale);
  check_launch(a.op, "fold_chunks");
  const unsigned long_run_blocks = static_cast<unsigned>(std::min<int64_t>(runs.max_chunks, 4096));
  fold_long_runs<T, R><<<long_run_blocks, kThreads, 0, stream()>>>(self, partials, it, runs, sorted.skipped_key,
                                                                   span.lowest, a.include_self);
  check_launch(a.op, "fold_long_runs");
}

}  // namespace

template <DType D>
void scatter_cuda_dtype(const ScatterArgs& a, const IndexGeometry& geometry) {
  using T = CppType<D>;
  using A = acc_t<T>;
  const int64_t total = geometry.outer_numel * geometry.k * geometry.row_len;
  if (total == 0) return;
  const DeviceGeometry g(geometry);
  const SelfSpan span = self_span(a.self);
  dispatch_reduce(a.reduce, [&](auto reduce_tag) {
    constexpr Reduce R = decltype(reduce_tag)::value;
    if constexpr (reduce_supported(R, D)) {
      const bool scaled = R == Reduce::Sum && (a.scaled || a.weighted);
      Scale<T> scale{A(1), nullptr, 0};
      if (R == Reduce::Sum && a.scaled) scale.alpha = a.alpha.to<A>(a.op, "alpha");
      if (R == Reduce::Sum && a.weighted) {
        scale.weights = static_cast<const T*>(a.weights.data());
        scale.weight_stride = a.weights.stride(0);
      }
      const bool sorted = scatterx::cuda::deterministic() || !kAtomicFold<R, T> ||
                          (R != Reduce::None && prefers_sorted(a, total, g.row_len, kFoldsBySwaps<R, T>));
      set_last_scatter_path(sorted ? scatterx::cuda::ScatterPath::Sorted : scatterx::cuda::ScatterPath::Atomic);
      auto run = [&](auto scaled_tag) {
        constexpr bool kScaled = decltype(scaled_tag)::value;
        if (sorted) {
          run_sorted<T, R, kScaled>(a, g, span, total, scale);
          return;
        }
        if constexpr (kAtomicFold<R, T>) {
          dispatch_index_dtype(a.index.dtype(), a.op, [&](auto index_tag) {
            run_atomic<T, R, typename decltype(index_tag)::type, kScaled>(a, g, span, total, scale);
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

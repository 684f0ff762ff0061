// CPU scatter kernels, templated on (element type, index type, reduce).
// Included only by the generated per-dtype instantiation files.
//
// The strategies all produce the fold that reduce_ops.h defines (each
// destination folded by one thread, in index order), and which one runs
// depends on the shape only, never on the thread count:
//  - direct rows: a slice-wise index over contiguous rows into a small
//    destination slab, with little work. One thread folds each source row
//    into its destination row as the index lists them: no sort.
//  - target blocks: a slice-wise index over contiguous short rows into many
//    targets (GNN aggregation). Positions are split, in index order, into
//    blocks of consecutive targets whose rows fit a core's L2; each block is
//    folded by one thread, position by position, into an accumulator copy
//    of its rows. One pass over the index instead of a full sort, and the
//    destination rows are read and written once, in order (block_fold.h,
//    shared with gather_scatter).
//  - grouped: the index is slice-wise (index_add, index_reduce, broadcast
//    index) and rows are long, or the fold needs an accumulator (16-bit
//    floats, mean). Positions are radix-sorted by target once; each
//    (target, row chunk) is then folded by one thread in a stack
//    accumulator over contiguous rows. No atomics, no contention.
//  - direct: the fold can run in self itself (no widening, no count).
//    Threads own disjoint chunks of the row dim and walk the index in order.
//  - shadow: general index needing an accumulator, with few targets per
//    position (self.size(dim) <= 8 * index.size(dim)). Each work unit folds
//    in order into a scratch copy of its destination columns, with hit
//    counts, and writes back the positions that were hit.
//  - sorted lines: the same with many targets per position. Each line
//    along dim is sorted by target, then folded group by group.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/detail/block_fold.h"
#include "ops/detail/index_geometry.h"
#include "ops/detail/prefetch.h"
#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cpu_isa.h"
#include "ops/runtime/parallel.h"
#include "ops/scatter/scatter_args.h"

namespace scatterx::detail {

// Slice-wise scatters with rows at least this long take the grouped path
// even when the direct one would do: reducing whole rows per target beats
// read-modify-writing random destination rows, and it spreads over threads.
constexpr int64_t kMinGroupedRow = 16;
// Elements of a row one work unit folds at once (its accumulator is on the stack).
constexpr int64_t kRowChunk = 256;
// Element folds per piece of work handed to a thread.
constexpr int64_t kFoldsPerPiece = int64_t{1} << 14;

// Scratch one shadow work unit may use (accumulators and hit counts).
constexpr int64_t kShadowBytes = int64_t{4} << 20;

// One position of a line, ordered by (target, position).
struct LineHit {
  int64_t target;
  int64_t position;
  bool operator<(const LineHit& o) const { return target < o.target || (target == o.target && position < o.position); }
};

template <typename T, typename I, Reduce R>
class CpuScatter {
 public:
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  static constexpr bool kDirect = std::is_same_v<A, T> && !kNeedsCount<R>;

  CpuScatter(const ScatterArgs& args, const IndexGeometry& geometry)
      : g_(geometry),
        self_(static_cast<T*>(args.self.data())),
        src_(static_cast<const T*>(args.src.data())),
        index_(static_cast<const I*>(args.index.data())),
        num_targets_(args.self.size(args.dim)),
        include_self_(args.include_self),
        scaled_(R == Reduce::Sum && (args.scaled || args.weighted)) {
    if (R == Reduce::Sum && args.scaled) alpha_ = args.alpha.to<A>(args.op, "alpha");
    if (R == Reduce::Sum && args.weighted) {
      weights_ = static_cast<const T*>(args.weights.data());
      weight_stride_ = args.weights.stride(0);
    }
  }

  void run() const {
    // Weights are applied per source row, which only the grouped path
    // (always available: index_add_weighted_'s index is slice-wise) does.
    if (direct_rows_pay()) {
      run_direct_rows();
    } else if (target_blocks_pay()) {
      run_target_blocks();
    } else if (g_.slice_index && (g_.row_len >= kMinGroupedRow || !kDirect || weights_ != nullptr)) {
      run_grouped();
    } else if constexpr (kDirect) {
      run_direct();
    } else if (shadow_fits()) {
      run_shadow();
    } else {
      run_sorted_lines();
    }
  }

 private:
  template <bool kScaled>
  SCATTERX_INLINE A value(const T& v, const A& factor) const {
    if constexpr (kScaled) {
      return arith::mul(static_cast<A>(v), factor);
    } else {
      return static_cast<A>(v);
    }
  }
  template <bool kScaled>
  SCATTERX_INLINE A value(const T& v) const {
    return value<kScaled>(v, alpha_);
  }

  // What source row i is multiplied by on the scaled path.
  SCATTERX_INLINE A row_factor(int64_t i) const {
    return weights_ != nullptr ? static_cast<A>(weights_[i * weight_stride_]) : alpha_;
  }

  SCATTERX_INLINE A start(const T& current) const { return include_self_ ? static_cast<A>(current) : Op::identity(); }

  // ---- target blocks (block_fold.h) ---------------------------------------
  int block_shift() const {
    return block_fold_shift(g_.row_len * int64_t{sizeof(A)}, num_targets_, kScatterAccumulatorBytes);
  }

  // Decided by the shape alone.
  bool target_blocks_pay() const {
    if constexpr (R == Reduce::None) {
      return false;  // the grouped path copies only each target's last row
    } else {
      return g_.slice_index && g_.outer_numel == 1 && g_.row_stride[0] == 1 && g_.row_stride[1] == 1 &&
             block_fold_pays(g_.row_len * int64_t{sizeof(A)}, g_.row_len * int64_t{sizeof(T)}, g_.k, num_targets_);
    }
  }

  // Each block is folded by one thread, its positions in index order, so
  // every target gets the grouped path's fold, to the bit.
  void run_target_blocks() const {
    const int shift = block_shift();
    const TargetBlocks tb =
        split_by_target_block(index_, g_.dim_stride[2], g_.k, num_targets_, shift, threads_for(g_.k, kSortGrain),
                              streams_block_hits(g_.k, g_.row_len * int64_t{sizeof(T)}));
    const int64_t block_rows = int64_t{1} << shift;
    const int threads = threads_for(tb.blocks, 1);
    PerThreadRuns<A> accumulators(threads, block_rows * g_.row_len);
    PerThreadRuns<uint32_t> counts(threads, block_rows);
    const BlockFoldFn fold = scaled_ ? pick_block_fold<true>() : pick_block_fold<false>();
    for_each_block_heaviest_first(tb, threads, [&](int64_t t, int64_t block, int64_t hits) {
      if (hits == 0) return;  // its rows stay as they are
      (this->*fold)(BlockFold{&tb, shift, accumulators.run(t), counts.run(t), block});
    });
  }

  struct BlockFold {
    const TargetBlocks* tb;
    int shift;
    A* acc;           // [2^shift, row_len]
    uint32_t* count;  // [2^shift]
    int64_t block;
  };

  using BlockFoldFn = void (CpuScatter::*)(const BlockFold&) const;

  // kLen: the row length where with_block_row_len knows it, else 0.
  template <bool kScaled, int64_t kLen>
  void fold_block(const BlockFold& f) const {
    fold_block_body<kScaled, kLen>(f);
  }
  template <bool kScaled, int64_t kLen>
  SCATTERX_TARGET_AVX2 void fold_block_avx2(const BlockFold& f) const {
    fold_block_body<kScaled, kLen>(f);
  }
  template <bool kScaled>
  BlockFoldFn pick_block_fold() const {
    return with_block_row_len<A>(g_.row_len, [&](auto row_len) -> BlockFoldFn {
      constexpr int64_t kLen = decltype(row_len)::value;
      return use_avx2() ? &CpuScatter::fold_block_avx2<kScaled, kLen> : &CpuScatter::fold_block<kScaled, kLen>;
    });
  }

  // The accumulator rows start as the grouped fold starts (from self or the
  // identity), all of them in one sequential pass over the block's rows:
  // started at each target's first hit instead, every target's row was a
  // cache miss of its own, and the GNN scatter-add gained nothing over the
  // grouped path. Targets no position hits keep their rows untouched.
  template <bool kScaled, int64_t kLen>
  SCATTERX_INLINE void fold_block_body(const BlockFold& f) const {
    const int64_t len = kLen > 0 ? kLen : g_.row_len;
    const int64_t step = g_.dim_stride[1];
    const int64_t first_target = f.block << f.shift;
    const int64_t targets = std::min(int64_t{1} << f.shift, num_targets_ - first_target);
    T* const dst = self_ + first_target * g_.dim_stride[0];
    const int64_t ahead = block_fold_prefetch_rows(len * int64_t{sizeof(T)});
    for (int64_t t = 0; t < targets; ++t) {
      const T* d = dst + t * g_.dim_stride[0];
      A* acc = f.acc + t * len;
      for (int64_t j = 0; j < len; ++j) acc[j] = start(d[j]);
      f.count[t] = 0;
    }
    for (int64_t p = 0; p < f.tb->pieces; ++p) {
      const BlockHit* h = f.tb->hits.data() + f.tb->begin(f.block, p);
      const int64_t n = f.tb->count(f.block, p);
      for (int64_t e = 0; e < n; ++e) {
        // The hits themselves come from memory where the split streamed
        // them: a line of them at a time, 8 rows' look-ahead further on
        // (1M rows of 64 float32 into 100k targets: 9.0-9.7 ms against
        // 9.7-10.1 without, 9 alternating runs, 2026-11-29).
        if (e % kHitsPerLine == 0 && e + 8 * ahead < n) __builtin_prefetch(h + e + 8 * ahead);
        if (e + ahead < n) prefetch_block_fold_row(src_ + int64_t{h[e + ahead].item} * step, len * int64_t{sizeof(T)});
        const int64_t pos = h[e].item;
        const T* row = src_ + pos * step;
        const A factor = kScaled ? row_factor(pos) : A(1);
        A* acc = f.acc + int64_t{h[e].local} * len;
        ++f.count[h[e].local];
        fold_block_row<kLen>(acc, row, len,
                             [this, factor](A a, T v) { return Op::combine(a, value<kScaled>(v, factor)); });
      }
    }
    const int64_t self_count = include_self_ ? 1 : 0;
    for (int64_t t = 0; t < targets; ++t) {
      if (f.count[t] == 0) continue;
      const A* acc = f.acc + t * len;
      T* d = dst + t * g_.dim_stride[0];
      const int64_t count = int64_t{f.count[t]} + self_count;
      for (int64_t j = 0; j < len; ++j) d[j] = static_cast<T>(Op::finalize(acc[j], count));
    }
  }

  // ---- grouped --------------------------------------------------------------
  void run_grouped() const {
    const TargetGroups groups = group_by_target(index_, g_.dim_stride[2], g_.k, num_targets_);
    const int64_t chunk = std::min(g_.row_len, kRowChunk);
    const bool unit_rows = g_.row_stride[0] == 1 && g_.row_stride[1] == 1;
    // Source rows come at random addresses; keep ~4 KiB of them in flight.
    // The look-ahead runs along the whole sorted order, across group ends.
    const int64_t ahead = std::clamp<int64_t>(4096 / (chunk * int64_t{sizeof(T)}), 2, 16);
    // Each piece of work is a run of consecutive groups holding about the
    // same number of source rows (groups.offsets counts rows), so prefetching
    // streams through a piece and skewed (power-law) groups still balance.
    const int64_t wanted = (8 * static_cast<int64_t>(omp_get_max_threads()) + g_.outer_numel - 1) / g_.outer_numel;
    const int64_t affordable = std::max<int64_t>(1, g_.k * g_.row_len / kFoldsPerPiece);
    const int64_t group_pieces = std::max<int64_t>(1, std::min({wanted, affordable, groups.num_groups}));
    Buffer<int64_t> first_group(group_pieces + 1);
    for (int64_t p = 0; p < group_pieces; ++p) {
      const int64_t rows_before = g_.k * p / group_pieces;
      first_group[p] = std::lower_bound(groups.offsets.data(), groups.offsets.data() + groups.num_groups, rows_before) -
                       groups.offsets.data();
    }
    first_group[group_pieces] = groups.num_groups;
    const FoldFn fold_fn = unit_rows ? (scaled_ ? pick_fold<true, true>() : pick_fold<true, false>())
                                     : (scaled_ ? pick_fold<false, true>() : pick_fold<false, false>());
    parallel_for_dynamic(g_.outer_numel * group_pieces, 1, [&](int64_t begin, int64_t end) {
      int64_t off[3] = {};
      GroupFold fold;
      fold.ahead = ahead;
      for (int64_t u = begin; u < end; ++u) {
        const int64_t piece = u % group_pieces;
        g_.outer.offsets(u / group_pieces, off);
        for (int64_t group = first_group[piece]; group < first_group[piece + 1]; ++group) {
          const int64_t first = groups.offsets[group];
          const int64_t n = groups.offsets[group + 1] - first;
          if (n == 0) continue;  // a target no index hits (dense groups) keeps its value
          fold.pos = groups.order.data() + first;
          fold.n = n;
          fold.prefetchable = unit_rows ? std::min(ahead, g_.k - first - n) : 0;
          // a long row is folded chunk by chunk (the accumulator is on the stack)
          for (int64_t j0 = 0; j0 < g_.row_len; j0 += chunk) {
            fold.dst = self_ + off[0] + groups.target_of(group) * g_.dim_stride[0] + j0 * g_.row_stride[0];
            fold.src = src_ + off[1] + j0 * g_.row_stride[1];
            fold.len = std::min(chunk, g_.row_len - j0);
            (this->*fold_fn)(fold);
          }
        }
      }
    });
  }

  struct GroupFold {
    T* dst;
    const T* src;
    const int64_t* pos;  // n positions of this group, then the rest of the sorted order
    int64_t n;
    int64_t ahead;         // rows to prefetch ahead
    int64_t prefetchable;  // positions readable past this group's end (at most `ahead`)
    int64_t len;
  };

  using FoldFn = void (CpuScatter::*)(const GroupFold&) const;

  // The fold, compiled for the baseline ISA and for AVX2 (see cpu_isa.h).
  template <bool kUnitStride, bool kScaled>
  void fold_group(const GroupFold& f) const {
    fold_group_body<kUnitStride, kScaled>(f);
  }
  template <bool kUnitStride, bool kScaled>
  SCATTERX_TARGET_AVX2 void fold_group_avx2(const GroupFold& f) const {
    fold_group_body<kUnitStride, kScaled>(f);
  }

  template <bool kUnitStride, bool kScaled>
  FoldFn pick_fold() const {
    return use_avx2() ? &CpuScatter::fold_group_avx2<kUnitStride, kScaled>
                      : &CpuScatter::fold_group<kUnitStride, kScaled>;
  }

  template <bool kUnitStride, bool kScaled>
  SCATTERX_INLINE void fold_group_body(const GroupFold& f) const {
    const int64_t ds = kUnitStride ? 1 : g_.row_stride[0];
    const int64_t ss = kUnitStride ? 1 : g_.row_stride[1];
    const int64_t step = g_.dim_stride[1];
    if constexpr (R == Reduce::None) {  // a plain write: the last row wins, no arithmetic
      const T* row = f.src + f.pos[f.n - 1] * step;
      if constexpr (kUnitStride) {
        std::memcpy(static_cast<void*>(f.dst), row, static_cast<size_t>(f.len) * sizeof(T));
      } else {
        for (int64_t j = 0; j < f.len; ++j) f.dst[j * ds] = row[j * ss];
      }
      return;
    }
    T* dst = f.dst;
    A acc[kRowChunk];
    for (int64_t j = 0; j < f.len; ++j) acc[j] = start(dst[j * ds]);
    const int64_t prefetch_end = f.n + f.prefetchable;
    for (int64_t p = 0; p < f.n; ++p) {
      if (kUnitStride && p + f.ahead < prefetch_end) {
        prefetch_row(f.src + f.pos[p + f.ahead] * step, f.len * int64_t{sizeof(T)});
      }
      const T* row = f.src + f.pos[p] * step;
      const A factor = kScaled ? row_factor(f.pos[p]) : A(1);
      for (int64_t j = 0; j < f.len; ++j) acc[j] = Op::combine(acc[j], value<kScaled>(row[j * ss], factor));
    }
    const int64_t count = f.n + (include_self_ ? 1 : 0);
    for (int64_t j = 0; j < f.len; ++j) dst[j * ds] = static_cast<T>(Op::finalize(acc[j], count));
  }

  // ---- direct ---------------------------------------------------------------
  // Whether a slice-wise index over contiguous rows is folded by
  // run_direct_rows: its destinations stay in cache and there is little work,
  // so grouping's sort would be most of the time (8192 rows of 16 floats into
  // 4096: grouped 90 us on one thread and 79 us on two, direct rows 31 us).
  // Decided by the shape alone, never by the thread count: a shape is folded
  // by the same code, to the same bits (NaN payloads included), at every
  // thread count.
  bool direct_rows_pay() const {
    if constexpr (!kDirect) {
      return false;
    } else {
      return g_.slice_index && weights_ == nullptr && g_.row_stride[0] == 1 && g_.row_stride[1] == 1 &&
             direct_rows_fit(num_targets_ * g_.row_len * int64_t{sizeof(T)}, g_.outer_numel * g_.k * g_.row_len);
    }
  }

  // One thread folds each source row straight into its destination row, in
  // index order: each destination element gets the fold reduce_ops.h defines.
  void run_direct_rows() const {
    int64_t off[3] = {};
    for (int64_t o = 0; o < g_.outer_numel; ++o) {
      g_.outer.offsets(o, off);
      T* dst = self_ + off[0];
      const T* src = src_ + off[1];
      const I* idx = index_ + off[2];
      auto row_of = [&](int64_t i) { return dst + static_cast<int64_t>(idx[i * g_.dim_stride[2]]) * g_.dim_stride[0]; };
      if (!include_self_ && R != Reduce::None) {  // every row the index hits starts from the identity
        for (int64_t i = 0; i < g_.k; ++i) std::fill(row_of(i), row_of(i) + g_.row_len, static_cast<T>(Op::identity()));
      }
      for (int64_t i = 0; i < g_.k; ++i) {
        T* d = row_of(i);
        const T* s = src + i * g_.dim_stride[1];
        if (scaled_) {
          for (int64_t j = 0; j < g_.row_len; ++j) d[j] = Op::combine(d[j], value<true>(s[j]));
        } else {
          for (int64_t j = 0; j < g_.row_len; ++j) d[j] = Op::combine(d[j], value<false>(s[j]));
        }
      }
    }
  }

  void run_direct() const {
    const RowTiling tiling = tile_rows(g_, 16, g_.row_len);
    const int64_t grain = std::max<int64_t>(1, kFoldsPerPiece / std::max<int64_t>(1, g_.k * tiling.chunk));
    parallel_for(tiling.units, grain, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const RowTile tile = row_tile(g_, tiling, u);
        const int64_t len = tile.len;
        T* dst = self_ + tile.offset[0];
        const T* src = src_ + tile.offset[1];
        const I* idx = index_ + tile.offset[2];
        if (!include_self_ && R != Reduce::None) {
          for (int64_t i = 0; i < g_.k; ++i) {
            for (int64_t j = 0; j < len; ++j) *target(dst, idx, i, j) = Op::identity();
          }
        }
        scaled_ ? direct_fold<true>(dst, src, idx, len) : direct_fold<false>(dst, src, idx, len);
      }
    });
  }

  SCATTERX_INLINE T* target(T* dst, const I* idx, int64_t i, int64_t j) const {
    const int64_t t = static_cast<int64_t>(idx[i * g_.dim_stride[2] + j * g_.row_stride[2]]);
    return dst + t * g_.dim_stride[0] + j * g_.row_stride[0];
  }

  template <bool kScaled>
  void direct_fold(T* dst, const T* src, const I* idx, int64_t len) const {
    for (int64_t i = 0; i < g_.k; ++i) {
      const T* s = src + i * g_.dim_stride[1];
      for (int64_t j = 0; j < len; ++j) {
        T* d = target(dst, idx, i, j);
        *d = Op::combine(*d, value<kScaled>(s[j * g_.row_stride[1]]));
      }
    }
  }

  // ---- shadow -----------------------------------------------------------------
  int64_t shadow_bytes_per_column() const { return num_targets_ * int64_t{sizeof(A) + sizeof(uint32_t)}; }

  bool shadow_fits() const {
    return num_targets_ <= 8 * g_.k && shadow_bytes_per_column() <= kShadowBytes &&
           g_.k < int64_t{std::numeric_limits<uint32_t>::max()};
  }

  void run_shadow() const {
    const int64_t targets = num_targets_;
    const RowTiling tiling = tile_rows(g_, 1, kShadowBytes / shadow_bytes_per_column());
    const int64_t chunk = tiling.chunk;
    const int64_t grain = std::max<int64_t>(1, kFoldsPerPiece / std::max<int64_t>(1, g_.k * chunk));
    const int64_t pieces = pieces_for(tiling.units, grain);
    PerThreadRuns<A> shadow(pieces, targets * chunk);
    PerThreadRuns<uint32_t> hits(pieces, targets * chunk);
    parallel_pieces(tiling.units, grain, [&](int64_t piece, int64_t begin, int64_t end) {
      A* acc = shadow.run(piece);
      uint32_t* count = hits.run(piece);
      for (int64_t u = begin; u < end; ++u) {
        const RowTile tile = row_tile(g_, tiling, u);
        const int64_t len = tile.len;
        T* dst = self_ + tile.offset[0];
        const T* src = src_ + tile.offset[1];
        const I* idx = index_ + tile.offset[2];
        for (int64_t t = 0; t < targets; ++t) {
          for (int64_t j = 0; j < len; ++j) {
            acc[t * len + j] = start(dst[t * g_.dim_stride[0] + j * g_.row_stride[0]]);
            count[t * len + j] = 0;
          }
        }
        scaled_ ? shadow_fold<true>(acc, count, src, idx, len) : shadow_fold<false>(acc, count, src, idx, len);
        const int64_t self_count = include_self_ ? 1 : 0;
        for (int64_t t = 0; t < targets; ++t) {
          for (int64_t j = 0; j < len; ++j) {
            const uint32_t n = count[t * len + j];
            if (n != 0) {
              dst[t * g_.dim_stride[0] + j * g_.row_stride[0]] =
                  static_cast<T>(Op::finalize(acc[t * len + j], n + self_count));
            }
          }
        }
      }
    });
  }

  template <bool kScaled>
  void shadow_fold(A* acc, uint32_t* count, const T* src, const I* idx, int64_t len) const {
    for (int64_t i = 0; i < g_.k; ++i) {
      const I* ix = idx + i * g_.dim_stride[2];
      const T* s = src + i * g_.dim_stride[1];
      for (int64_t j = 0; j < len; ++j) {
        const int64_t slot = static_cast<int64_t>(ix[j * g_.row_stride[2]]) * len + j;
        acc[slot] = Op::combine(acc[slot], value<kScaled>(s[j * g_.row_stride[1]]));
        ++count[slot];
      }
    }
  }

  // ---- sorted lines -----------------------------------------------------------
  void run_sorted_lines() const {
    const int64_t lines = g_.outer_numel * g_.row_len;
    const int64_t grain = std::max<int64_t>(1, kFoldsPerPiece / std::max<int64_t>(1, g_.k));
    Buffer<LineHit> hits(pieces_for(lines, grain) * g_.k);
    parallel_pieces(lines, grain, [&](int64_t piece, int64_t begin, int64_t end) {
      LineHit* line_hits = hits.data() + piece * g_.k;
      int64_t off[3];
      for (int64_t line = begin; line < end; ++line) {
        g_.outer.offsets(line / g_.row_len, off);
        const int64_t j = line % g_.row_len;
        T* dst = self_ + off[0] + j * g_.row_stride[0];
        const T* src = src_ + off[1] + j * g_.row_stride[1];
        const I* idx = index_ + off[2] + j * g_.row_stride[2];
        for (int64_t i = 0; i < g_.k; ++i) line_hits[i] = {static_cast<int64_t>(idx[i * g_.dim_stride[2]]), i};
        std::sort(line_hits, line_hits + g_.k);  // (target, position): index order within a target
        scaled_ ? fold_line<true>(dst, src, line_hits) : fold_line<false>(dst, src, line_hits);
      }
    });
  }

  template <bool kScaled>
  void fold_line(T* dst, const T* src, const LineHit* line_hits) const {
    for (int64_t a = 0; a < g_.k;) {
      const int64_t t = line_hits[a].target;
      T* d = dst + t * g_.dim_stride[0];
      A acc = start(*d);
      int64_t b = a;
      for (; b < g_.k && line_hits[b].target == t; ++b) {
        acc = Op::combine(acc, value<kScaled>(src[line_hits[b].position * g_.dim_stride[1]]));
      }
      *d = static_cast<T>(Op::finalize(acc, (b - a) + (include_self_ ? 1 : 0)));
      a = b;
    }
  }

  const IndexGeometry& g_;
  T* self_;
  const T* src_;
  const I* index_;
  int64_t num_targets_;
  bool include_self_;
  bool scaled_;
  A alpha_{1};
  const T* weights_ = nullptr;
  int64_t weight_stride_ = 0;
};

template <DType D>
void scatter_cpu_dtype(const ScatterArgs& args, const IndexGeometry& geometry) {
  using T = CppType<D>;
  dispatch_index_dtype(args.index.dtype(), args.op, [&](auto index_tag) {
    using I = typename std::decay_t<decltype(index_tag)>::type;
    dispatch_reduce(args.reduce, [&](auto reduce_tag) {
      constexpr Reduce R = decltype(reduce_tag)::value;
      if constexpr (reduce_supported(R, D)) {
        CpuScatter<T, I, R>(args, geometry).run();
      } else {
        raise<DTypeError>(args.op, "reduce '", reduce_name(R), "' is not supported for ", dtype_name(D), " tensors");
      }
    });
  });
}

}  // namespace scatterx::detail

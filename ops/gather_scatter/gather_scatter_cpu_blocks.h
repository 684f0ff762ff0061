// gather_scatter's fold by blocks of destinations (block_fold.h), for short
// rows into many destinations with no IndexPlan: the edges are split once by
// destination block, in edge order, and each block's rows of out are
// accumulated in L2 and written once, whole, in order. Each destination folds
// its edges in edge order, as the grouped fold (gather_scatter_cpu_impl.h)
// does, so the results are the same to the bit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/detail/block_fold.h"
#include "ops/detail/segments.h"
#include "ops/gather_scatter/gather_scatter_args.h"
#include "ops/macros.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cpu_isa.h"

namespace scatterx::detail::gather_scatter_cpu_impl {

// gather_scatter folds by blocks from twice the scatter's minimum of target
// rows: with no destination rows to read, it gains less. 200k edges of 256
// bytes into 20k nodes (5 MiB), 2 threads: 0.92 ms grouped, 1.1 by blocks;
// 300k edges of 128 bytes into 64k (8 MiB): 1.8 ms grouped, 1.4 by blocks
// (2026-11-29).
constexpr int64_t kMinOutBlockFoldBytes = 2 * kMinBlockFoldBytes;

inline bool out_blocks_pay(int64_t acc_row_bytes, int64_t row_bytes, int64_t edges, int64_t num_out) {
  return block_fold_pays(acc_row_bytes, row_bytes, edges, num_out) && num_out * acc_row_bytes >= kMinOutBlockFoldBytes;
}

// Destinations per block, as a shift.
inline int out_block_shift(int64_t acc_row_bytes, int64_t num_out) {
  return block_fold_shift(acc_row_bytes, num_out, kGatherScatterAccumulatorBytes);
}

// With no plan; x's rows are numbered in 32 bits, as the hits hold them.
template <typename T>
bool blocks_pay(const GatherScatterArgs& a) {
  return a.groups == nullptr && a.x.size(0) <= int64_t{UINT32_MAX} &&
         out_blocks_pay(a.features * int64_t{sizeof(acc_t<T>)}, a.features * int64_t{sizeof(T)}, a.edges, a.num_out);
}

// What each hit holds: unweighted, the edge's row of x, looked up by the
// split in edge order (looked up by the fold instead, in block order, every
// lookup missed cache and the fold ran at half speed); weighted, the edge.
template <typename I, bool kWeighted>
struct EdgeItem {
  const I* src;  // null: the identity
  int64_t stride;
  uint32_t operator()(int64_t e) const {
    return static_cast<uint32_t>(!kWeighted && src != nullptr ? static_cast<int64_t>(src[e * stride]) : e);
  }
};

struct OutBlock {
  int64_t first;    // its first destination
  int64_t targets;  // destinations in it
  int64_t block;
};

// Folds one block's edges into acc ([targets, F]) with count ([targets]),
// then writes the block's rows of out: every one, as the grouped fold
// writes the rows of destinations no edge reaches (0, or the identity's
// finalized value). Weighted, the edges' rows and weights are looked up
// here, prefetched twice as far ahead as the rows. kLen: the row length where
// with_block_row_len knows it, else 0.
template <typename T, Reduce R, typename I, bool kWeighted, int64_t kLen>
SCATTERX_INLINE void fold_out_block_body(const GatherScatterArgs& a, const TargetBlocks& tb, const OutBlock& ob,
                                         acc_t<T>* acc, uint32_t* count) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  const int64_t F = kLen > 0 ? kLen : a.features;
  const T* x = static_cast<const T*>(a.x.data());
  const I* src = static_cast<const I*>(a.src_index.data());  // null: the identity
  const int64_t src_stride = src != nullptr ? a.src_index.strides()[0] : 0;
  const T* weight = static_cast<const T*>(a.weight.data());
  const int64_t weight_stride = kWeighted ? a.weight.strides()[0] : 0;
  const auto row_of = [&](uint32_t item) {
    const int64_t e = item;
    return x + (kWeighted && src != nullptr ? static_cast<int64_t>(src[e * src_stride]) : e) * F;
  };
  std::fill(acc, acc + ob.targets * F, Op::identity());
  std::fill(count, count + ob.targets, 0u);
  const int64_t ahead = block_fold_prefetch_rows(F * int64_t{sizeof(T)});
  for (int64_t p = 0; p < tb.pieces; ++p) {
    const BlockHit* h = tb.hits.data() + tb.begin(ob.block, p);
    const int64_t n = tb.count(ob.block, p);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kWeighted) {
        if (i + 2 * ahead < n) {
          const int64_t later = h[i + 2 * ahead].item;
          if (src != nullptr) __builtin_prefetch(src + later * src_stride);
          __builtin_prefetch(weight + later * weight_stride);
        }
      }
      if (i + ahead < n) prefetch_block_fold_row(row_of(h[i + ahead].item), F * int64_t{sizeof(T)});
      const T* row = row_of(h[i].item);
      A* ac = acc + int64_t{h[i].local} * F;
      ++count[h[i].local];
      if constexpr (kWeighted) {
        const A w = static_cast<A>(weight[int64_t{h[i].item} * weight_stride]);
        fold_block_row<kLen>(ac, row, F,
                             [w](A acc_j, T v) { return Op::combine(acc_j, arith::mul(static_cast<A>(v), w)); });
      } else {
        fold_block_row<kLen>(ac, row, F, [](A acc_j, T v) { return Op::combine(acc_j, static_cast<A>(v)); });
      }
    }
  }
  T* out = static_cast<T*>(a.out.data()) + ob.first * F;
  for (int64_t t = 0; t < ob.targets; ++t) {
    const bool empty_is_zero = count[t] == 0 && (R == Reduce::Amax || R == Reduce::Amin);
    const int64_t n = std::max<int64_t>(count[t], 1);
    const A* ac = acc + t * F;
    for (int64_t j = 0; j < F; ++j) out[t * F + j] = empty_is_zero ? T(0) : static_cast<T>(Op::finalize(ac[j], n));
  }
}

template <typename T, Reduce R, typename I, bool kWeighted, int64_t kLen>
void fold_out_block(const GatherScatterArgs& a, const TargetBlocks& tb, const OutBlock& ob, acc_t<T>* acc,
                    uint32_t* count) {
  fold_out_block_body<T, R, I, kWeighted, kLen>(a, tb, ob, acc, count);
}

template <typename T, Reduce R, typename I, bool kWeighted, int64_t kLen>
SCATTERX_TARGET_AVX2 void fold_out_block_avx2(const GatherScatterArgs& a, const TargetBlocks& tb, const OutBlock& ob,
                                              acc_t<T>* acc, uint32_t* count) {
  fold_out_block_body<T, R, I, kWeighted, kLen>(a, tb, ob, acc, count);
}

// The whole op by blocks; blocks_pay(a) holds.
template <typename T, Reduce R, typename I, bool kWeighted>
void run_by_blocks(const GatherScatterArgs& a) {
  const int shift = out_block_shift(a.features * int64_t{sizeof(acc_t<T>)}, a.num_out);
  // The hits stay cached for the fold (unlike the scatter's, whose source
  // rows stream through the cache in between): the fold's rows come from a
  // table that mostly sits in the L3. Streamed as the scatter's are, 1M edges
  // of 64 float32 into 100k nodes took 7.8-8.3 ms against 7.2-7.7 (2026-11-29).
  const TargetBlocks tb = dispatch_index_dtype(a.dst_index.dtype(), a.op, [&](auto dst_tag) {
    using D = typename decltype(dst_tag)::type;
    const EdgeItem<I, kWeighted> item{static_cast<const I*>(a.src_index.data()),
                                      a.src_index.data() != nullptr ? a.src_index.strides()[0] : 0};
    return split_by_target_block(static_cast<const D*>(a.dst_index.data()), a.dst_index.strides()[0], a.edges,
                                 a.num_out, shift, threads_for(a.edges, kSortGrain), streams_block_hits(a.edges), item);
  });
  const int64_t block_rows = int64_t{1} << shift;
  const int threads = threads_for(tb.blocks, 1);
  PerThreadRuns<acc_t<T>> accumulators(threads, block_rows * a.features);
  PerThreadRuns<uint32_t> counts(threads, block_rows);
  using FoldFn = void (*)(const GatherScatterArgs&, const TargetBlocks&, const OutBlock&, acc_t<T>*, uint32_t*);
  const FoldFn fold = with_block_row_len<acc_t<T>>(a.features, [](auto row_len) -> FoldFn {
    constexpr int64_t kLen = decltype(row_len)::value;
    return use_avx2() ? &fold_out_block_avx2<T, R, I, kWeighted, kLen> : &fold_out_block<T, R, I, kWeighted, kLen>;
  });
  for_each_block_heaviest_first(tb, threads, [&](int64_t t, int64_t block, int64_t) {
    const int64_t first = block << shift;
    const OutBlock ob{first, std::min(block_rows, a.num_out - first), block};
    fold(a, tb, ob, accumulators.run(t), counts.run(t));
  });
}

}  // namespace scatterx::detail::gather_scatter_cpu_impl

// CPU gather_scatter kernel, templated on (element type, reduce, index
// types, weighted). Included only by the generated per-dtype instantiation
// files (gather_scatter_cpu_dtype.cpp.in): each floating dtype's
// combinations compile in a file of their own, in parallel.
//
// Edges are grouped by destination (stable, so
// each group lists its edges in edge order: by an IndexPlan, or here by a
// counting sort that lays the edges out as it places them); groups are spread over threads
// and each destination row is folded by one thread, a tile of features at a
// time, and written once: no atomics, results independent of the thread count.
// Short rows into many destinations, with no plan, fold by blocks of
// destinations instead (gather_scatter_cpu_blocks.h), to the same bits.
// The fold is compiled for the baseline ISA and again for AVX2 (cpu_isa.h):
// the same additions in the same order, so the results are bit-identical.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/detail/prefetch.h"
#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/gather_scatter_args.h"
#include "ops/gather_scatter/gather_scatter_cpu_blocks.h"
#include "ops/gather_scatter/gather_scatter_dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cpu_isa.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

namespace gather_scatter_cpu_impl {

constexpr int64_t kTile = 64;  // features one pass over a group folds together

// Edges ahead whose source row (tile) is prefetched. Random 512-byte rows of
// a 256 MiB table (the embedding-bag owner's pooling, 328k ids): 8 ahead
// 16.4 ms, 12 ahead 17.4, 20 ahead 17.6 with AVX2 (baseline SSE2: 20.1).
constexpr int64_t kPrefetch = 8;

// The grouped edges' source rows (and weights, in the accumulation type)
// laid out in group order, so the fold reads them sequentially and its row
// loads do not wait on two dependent index loads each. RowId is uint32_t
// whenever x's rows allow: half the bytes to place and read back (the
// placement's random writes then cost 0.4 ms less per 1M edges).
template <typename T, typename RowId>
struct LaidOutEdges {
  using Row = RowId;
  Buffer<RowId> rows;
  Buffer<acc_t<T>> weights;  // empty when unweighted
  Buffer<int64_t> offsets;   // dense grouping only: [num_out + 1]
};

template <typename T, typename I, bool kWeighted>
struct EdgeSource {
  const I* src;  // null: the identity
  int64_t src_stride;
  const T* weight;
  int64_t weight_stride;

  explicit EdgeSource(const GatherScatterArgs& a)
      : src(static_cast<const I*>(a.src_index.data())),
        src_stride(src != nullptr ? a.src_index.strides()[0] : 0),
        weight(static_cast<const T*>(a.weight.data())),
        weight_stride(kWeighted ? a.weight.strides()[0] : 0) {}

  // Edge e's entry at slot p.
  template <typename RowId>
  void place(LaidOutEdges<T, RowId>& out, int64_t e, int64_t p) const {
    out.rows[p] = static_cast<RowId>(src != nullptr ? static_cast<int64_t>(src[e * src_stride]) : e);
    if constexpr (kWeighted) out.weights[p] = static_cast<acc_t<T>>(weight[e * weight_stride]);
  }
};

// From a plan's grouping: one pass over its order.
template <typename T, typename I, bool kWeighted, typename RowId>
LaidOutEdges<T, RowId> lay_out_by_plan(const GatherScatterArgs& a) {
  LaidOutEdges<T, RowId> out{Buffer<RowId>(a.edges), Buffer<acc_t<T>>(kWeighted ? a.edges : 0), {}};
  const EdgeSource<T, I, kWeighted> source(a);
  const TargetGroups& groups = *a.groups;
  parallel_for(a.edges, int64_t{1} << 14, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) source.place(out, groups.order[p], p);
  });
  return out;
}

// From dst_index itself, densely: the counting sort places each edge's
// entry directly (no order array and no second pass over it).
template <typename T, typename I, typename D, bool kWeighted, typename RowId>
LaidOutEdges<T, RowId> lay_out_by_counting(const GatherScatterArgs& a) {
  LaidOutEdges<T, RowId> out{Buffer<RowId>(a.edges), Buffer<acc_t<T>>(kWeighted ? a.edges : 0), {}};
  const EdgeSource<T, I, kWeighted> source(a);
  counting_sort_by_target(static_cast<const D*>(a.dst_index.data()), a.dst_index.strides()[0], a.edges, a.num_out,
                          out.offsets, [&](int64_t e, int64_t slot) { source.place(out, e, slot); });
  return out;
}

// Folds the edges [begin, end) of one group over features [k0, k0 + count)
// into o. kCount > 0 fixes count at compile time (whole tiles: the
// accumulators stay in registers), 0 takes it at run time.
template <typename T, Reduce R, bool kWeighted, int64_t kCount, typename RowId>
SCATTERX_INLINE void fold_tile(const GatherScatterArgs& a, const Buffer<RowId>& rows, const Buffer<acc_t<T>>& weights,
                               int64_t begin, int64_t end, int64_t k0, int64_t runtime_count, T* o) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  const T* x = static_cast<const T*>(a.x.data());
  const int64_t count = kCount > 0 ? kCount : runtime_count;
  A acc[kTile];
  for (int64_t j = 0; j < count; ++j) acc[j] = Op::identity();
  for (int64_t p = begin; p < end; ++p) {
    if (p + kPrefetch < a.edges) {
      const char* ahead =
          reinterpret_cast<const char*>(x + static_cast<int64_t>(rows[p + kPrefetch]) * a.features + k0);
      prefetch_bytes(ahead, static_cast<size_t>(count) * sizeof(T));
    }
    const T* row = x + static_cast<int64_t>(rows[p]) * a.features + k0;
    if constexpr (kWeighted) {
      const A w = weights[p];
      for (int64_t j = 0; j < count; ++j) acc[j] = Op::combine(acc[j], arith::mul(static_cast<A>(row[j]), w));
    } else {
      for (int64_t j = 0; j < count; ++j) acc[j] = Op::combine(acc[j], static_cast<A>(row[j]));
    }
  }
  const bool empty_is_zero = begin == end && (R == Reduce::Amax || R == Reduce::Amin);
  const int64_t n = std::max<int64_t>(end - begin, 1);
  for (int64_t j = 0; j < count; ++j) o[k0 + j] = empty_is_zero ? T(0) : static_cast<T>(Op::finalize(acc[j], n));
}

// Folds the groups [first, last): group g's edges [offsets[g], offsets[g +
// 1]) of the laid-out entries into row target_of(g) of out.
template <typename T, Reduce R, bool kWeighted, typename Edges, typename TargetOf>
SCATTERX_INLINE void fold_range_body(const GatherScatterArgs& a, const Edges& edges, const int64_t* offsets,
                                     const TargetOf& target_of, int64_t first, int64_t last) {
  T* out = static_cast<T*>(a.out.data());
  const int64_t F = a.features;
  for (int64_t g = first; g < last; ++g) {
    const int64_t begin = offsets[g];
    const int64_t end = offsets[g + 1];
    T* o = out + target_of(g) * F;
    for (int64_t k0 = 0; k0 < F; k0 += kTile) {
      const int64_t count = std::min(kTile, F - k0);
      if (count == kTile) {
        fold_tile<T, R, kWeighted, kTile>(a, edges.rows, edges.weights, begin, end, k0, count, o);
      } else {
        fold_tile<T, R, kWeighted, 0>(a, edges.rows, edges.weights, begin, end, k0, count, o);
      }
    }
  }
}

template <typename T, Reduce R, bool kWeighted, typename Edges, typename TargetOf>
void fold_range(const GatherScatterArgs& a, const Edges& edges, const int64_t* offsets, const TargetOf& target_of,
                int64_t first, int64_t last) {
  fold_range_body<T, R, kWeighted>(a, edges, offsets, target_of, first, last);
}

template <typename T, Reduce R, bool kWeighted, typename Edges, typename TargetOf>
SCATTERX_TARGET_AVX2 void fold_range_avx2(const GatherScatterArgs& a, const Edges& edges, const int64_t* offsets,
                                          const TargetOf& target_of, int64_t first, int64_t last) {
  fold_range_body<T, R, kWeighted>(a, edges, offsets, target_of, first, last);
}

// Folds every group, [0, num_groups), spread over the threads. An x of more
// than 2^32 rows (64-bit row ids) takes the baseline fold only: the same
// results, and half the instantiations this file would otherwise compile.
template <typename T, Reduce R, bool kWeighted, typename Edges, typename TargetOf>
void fold_groups(const GatherScatterArgs& a, const Edges& edges, int64_t num_groups, const int64_t* offsets,
                 const TargetOf& target_of) {
  const int64_t reads = std::max<int64_t>(1, a.edges * a.features);
  const int64_t grain = std::max<int64_t>(1, kGroupedReadsPerPiece * num_groups / reads);
  constexpr bool kNarrowIds = std::is_same_v<typename Edges::Row, uint32_t>;
  const bool avx2 = kNarrowIds && use_avx2();
  parallel_for_dynamic(num_groups, grain, [&](int64_t first, int64_t last) {
    if constexpr (kNarrowIds) {
      if (avx2) {
        fold_range_avx2<T, R, kWeighted>(a, edges, offsets, target_of, first, last);
        return;
      }
    }
    fold_range<T, R, kWeighted>(a, edges, offsets, target_of, first, last);
  });
}

template <typename T, Reduce R, typename I, bool kWeighted, typename RowId>
void run_laid_out(const GatherScatterArgs& a) {
  if (a.groups != nullptr) {
    const TargetGroups& groups = *a.groups;
    const auto edges = lay_out_by_plan<T, I, kWeighted, RowId>(a);
    fold_groups<T, R, kWeighted>(a, edges, groups.num_groups, groups.offsets.data(),
                                 [&](int64_t g) { return groups.target_of(g); });
    return;
  }
  dispatch_index_dtype(a.dst_index.dtype(), a.op, [&](auto dst_tag) {
    using D = typename decltype(dst_tag)::type;
    const auto edges = lay_out_by_counting<T, I, D, kWeighted, RowId>(a);
    fold_groups<T, R, kWeighted>(a, edges, a.num_out, edges.offsets.data(), [](int64_t g) { return g; });
  });
}

template <typename T, Reduce R, typename I, bool kWeighted>
void run_typed(const GatherScatterArgs& a) {
  if (blocks_pay<T>(a)) {
    run_by_blocks<T, R, I, kWeighted>(a);
  } else if (a.x.size(0) <= int64_t{UINT32_MAX}) {
    run_laid_out<T, R, I, kWeighted, uint32_t>(a);
  } else {
    run_laid_out<T, R, I, kWeighted, int64_t>(a);
  }
}

}  // namespace gather_scatter_cpu_impl

// The kernel for x of the floating dtype D (gather_scatter_cpu dispatched
// it); each dtype's combinations compile in a file of their own.
template <DType D>
void gather_scatter_cpu_dtype(const GatherScatterArgs& a) {
  dispatch_gather_scatter_for<D>(a, [&](auto, auto reduce_tag, auto index_tag, auto weighted) {
    gather_scatter_cpu_impl::run_typed<CppType<D>, decltype(reduce_tag)::value, typename decltype(index_tag)::type,
                                       decltype(weighted)::value>(a);
  });
}

}  // namespace scatterx::detail

// CPU gather_scatter kernel. Edges are grouped by destination (stable, so
// each group lists its edges in edge order); groups are spread over threads
// and each destination row is folded by one thread, a tile of features at a
// time, and written once: no atomics, results independent of the thread count.
#include <algorithm>
#include <cstring>

#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/gather_scatter_args.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

namespace {

constexpr int64_t kTile = 64;           // features one pass over a group folds together
constexpr int64_t kUnitElements = 4096;  // about this many source reads per dynamic piece

template <typename T, Reduce R, typename I, bool kWeighted>
void fold_groups(const GatherScatterArgs& a, const TargetGroups& groups) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  const T* x = static_cast<const T*>(a.x.data());
  const I* src = static_cast<const I*>(a.src_index.data());
  const int64_t src_stride = a.src_index.strides()[0];
  const T* weight = static_cast<const T*>(a.weight.data());
  const int64_t weight_stride = kWeighted ? a.weight.strides()[0] : 0;
  T* out = static_cast<T*>(a.out.data());
  const int64_t F = a.features;
  const int64_t reads = std::max<int64_t>(1, a.edges * F);
  const int64_t grain = std::max<int64_t>(1, kUnitElements * groups.num_groups / reads);
  parallel_for_dynamic(groups.num_groups, grain, [&](int64_t first, int64_t last) {
    A acc[kTile];
    for (int64_t g = first; g < last; ++g) {
      const int64_t begin = groups.offsets[g];
      const int64_t end = groups.offsets[g + 1];
      T* o = out + groups.target_of(g) * F;
      const bool empty_is_zero = begin == end && (R == Reduce::Amax || R == Reduce::Amin);
      for (int64_t k0 = 0; k0 < F; k0 += kTile) {
        const int64_t count = std::min(kTile, F - k0);
        for (int64_t j = 0; j < count; ++j) acc[j] = Op::identity();
        for (int64_t p = begin; p < end; ++p) {
          const int64_t e = groups.order[p];
          const T* row = x + static_cast<int64_t>(src[e * src_stride]) * F + k0;
          if constexpr (kWeighted) {
            const A w = static_cast<A>(weight[e * weight_stride]);
            for (int64_t j = 0; j < count; ++j) acc[j] = Op::combine(acc[j], arith::mul(static_cast<A>(row[j]), w));
          } else {
            for (int64_t j = 0; j < count; ++j) acc[j] = Op::combine(acc[j], static_cast<A>(row[j]));
          }
        }
        const int64_t n = std::max<int64_t>(end - begin, 1);
        for (int64_t j = 0; j < count; ++j) {
          o[k0 + j] = empty_is_zero ? T(0) : static_cast<T>(Op::finalize(acc[j], n));
        }
      }
    }
  });
}

template <typename J>
TargetGroups group_destinations(const GatherScatterArgs& a) {
  return group_by_target(static_cast<const J*>(a.dst_index.data()), a.dst_index.strides()[0], a.edges, a.num_out);
}

}  // namespace

void gather_scatter_cpu(const GatherScatterArgs& a) {
  const TargetGroups groups = dispatch_index_dtype(
      a.dst_index.dtype(), a.op, [&](auto tag) { return group_destinations<typename decltype(tag)::type>(a); });
  // Sparse groups list only the destinations hit: the others are 0.
  if (!groups.dense) std::memset(a.out.data(), 0, static_cast<size_t>(a.out.numel() * a.out.element_size()));
  const bool weighted = a.weight.data() != nullptr;
  dispatch_dtype(a.x.dtype(), a.op, [&](auto dtype_tag) {
    constexpr DType D = decltype(dtype_tag)::value;
    if constexpr (is_floating_point(D)) {
      using T = CppType<D>;
      dispatch_reduce(a.reduce, [&](auto reduce_tag) {
        constexpr Reduce R = decltype(reduce_tag)::value;
        if constexpr (R == Reduce::Sum || R == Reduce::Mean || R == Reduce::Amax || R == Reduce::Amin) {
          dispatch_index_dtype(a.src_index.dtype(), a.op, [&](auto index_tag) {
            using I = typename decltype(index_tag)::type;
            if (weighted) {
              fold_groups<T, R, I, true>(a, groups);
            } else {
              fold_groups<T, R, I, false>(a, groups);
            }
          });
        }
      });
    }
  });
}

}  // namespace scatterx::detail

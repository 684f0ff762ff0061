// CUDA scatter_softmax / scatter_log_softmax over grouped rows, in three
// passes over src: each group's maximum m per feature (torch's amax: NaN
// wins), then its sum s of exp(x - m), one thread per (group, feature)
// folding the group's rows in position order; then every output element,
// one thread each. A long group (chunks.cuh) is folded a chunk per thread
// first and its chunks' results then in chunk order, so a hub of a
// power-law graph does not leave one thread walking all its rows. Threads
// take consecutive features of one row, so for F >= 32 a warp reads
// contiguous row pieces. Every fold has a fixed order: deterministic. The
// arithmetic is scatter_softmax.h's, with CUDA's expf / exp / logf / log in
// place of the CPU's (within a few ulp) and long groups summed in chunks,
// so results agree with the CPU within rounding.
#include <cstdint>
#include <type_traits>

#include "ops/dispatch.h"
#include "ops/gather_scatter/cuda/chunks.cuh"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx::detail::cuda {

namespace {

// CUDA's math library (expf / logf within 2 / 1 ulp, exp / log within 1),
// named from the global namespace so no scatterx name can stand in.
template <typename A>
__device__ __forceinline__ A exp_of(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return ::expf(x);
  } else {
    return ::exp(x);
  }
}

template <typename A>
__device__ __forceinline__ A log_of(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return ::logf(x);
  } else {
    return ::log(x);
  }
}

// The fold of one column (feature k) of the slots [begin, end) in slot
// order: value(x) of each element x = src[order[p], k], folded by Op.
template <typename Op, typename T, typename Value>
__device__ __forceinline__ acc_t<T> fold_column(const T* src, const int64_t* order, int64_t features, int64_t k,
                                                int64_t begin, int64_t end, const Value& value) {
  acc_t<T> acc = Op::identity();
  for (int64_t p = begin; p < end; ++p)
    acc = Op::combine(acc, value(static_cast<acc_t<T>>(src[order[p] * features + k])));
  return acc;
}

// Thread (chunk c, feature k) of the long groups' chunks: the fold of the
// chunk's slots into partial[c * F + k]. `stat` holds each group's maximum
// (the sum pass reads it; the max pass gets null).
template <typename Op, typename T, bool kExp>
__global__ void fold_chunk_columns(acc_t<T>* partial, const T* src, const DeviceGroupsView g, const acc_t<T>* stat,
                                   int64_t features, int64_t total) {
  using A = acc_t<T>;
  const int64_t chunks = g.chunk_offsets[g.num_groups];
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t c = u / features;
    if (c >= chunks) break;  // u only grows
    const int64_t k = u - c * features;
    const int64_t group = group_of(g.chunk_offsets, g.num_groups, c);
    const int64_t length = chunk_length(g.offsets[group + 1] - g.offsets[group]);
    const int64_t begin = g.offsets[group] + (c - g.chunk_offsets[group]) * length;
    const int64_t end = begin + length < g.offsets[group + 1] ? begin + length : g.offsets[group + 1];
    if constexpr (kExp) {
      const A m = stat[group * features + k];
      partial[u] = fold_column<Op>(src, g.order, features, k, begin, end, [m](A x) { return exp_of(x - m); });
    } else {
      partial[u] = fold_column<Op>(src, g.order, features, k, begin, end, [](A x) { return x; });
    }
  }
}

// Thread (group t, feature k): the group's maximum (kExp false) or its sum
// of exp(x - max) (kExp true; with kLog its log(sum + eps)), from its slots
// (a short group) or from its chunks' partial results, in chunk order.
template <typename Op, typename T, bool kExp, bool kLog>
__global__ void fold_group_columns(acc_t<T>* result, const T* src, const DeviceGroupsView g, const acc_t<T>* partial,
                                   const acc_t<T>* stat, int64_t features, int64_t total, acc_t<T> eps) {
  using A = acc_t<T>;
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t group = u / features;
    const int64_t k = u - group * features;
    A acc;
    if (g.chunk_offsets[group + 1] == g.chunk_offsets[group]) {
      if constexpr (kExp) {
        const A m = stat[u];
        acc = fold_column<Op>(src, g.order, features, k, g.offsets[group], g.offsets[group + 1],
                              [m](A x) { return exp_of(x - m); });
      } else {
        acc = fold_column<Op>(src, g.order, features, k, g.offsets[group], g.offsets[group + 1], [](A x) { return x; });
      }
    } else {
      acc = Op::identity();
      for (int64_t c = g.chunk_offsets[group]; c < g.chunk_offsets[group + 1]; ++c)
        acc = Op::combine(acc, partial[c * features + k]);
    }
    if constexpr (kLog) acc = log_of(acc + eps);
    result[u] = acc;
  }
}

// Thread (slot p, feature k) over the grouped slots: the output of the
// element at row order[p], from its group's maximum and sum (or log-sum).
template <typename T, bool kLog>
__global__ void write_columns(T* out, const T* src, const DeviceGroupsView g, const acc_t<T>* group_max,
                              const acc_t<T>* group_sum, int64_t features, int64_t total) {
  using A = acc_t<T>;
  const int64_t grouped = g.offsets[g.num_groups];
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t p = u / features;
    if (p >= grouped) break;  // slots past the groups hold positions in none (index checks off)
    const int64_t k = u - p * features;
    const int64_t group = group_of(g.offsets, g.num_groups, p);
    const int64_t at = g.order[p] * features + k;
    const A shifted = static_cast<A>(src[at]) - group_max[group * features + k];
    if constexpr (kLog)
      out[at] = static_cast<T>(shifted - group_sum[group * features + k]);
    else
      out[at] = static_cast<T>(exp_of(shifted) / group_sum[group * features + k]);
  }
}

template <typename T>
void run_typed(const char* op, const TensorView& src, const DeviceGroups& groups, const TensorView& out, bool log,
               double eps) {
  using A = acc_t<T>;
  using Max = ReduceOp<Reduce::Amax, A>;
  using Sum = ReduceOp<Reduce::Sum, A>;
  const int64_t features = src.size(1);
  const DeviceGroupsView g{groups.num_groups, groups.offsets, groups.chunk_offsets, groups.order};
  const int64_t columns = groups.num_groups * features;
  const int64_t chunk_columns = groups.max_chunks * features;
  const size_t stat_bytes = (static_cast<size_t>(columns) * sizeof(A) + 255) / 256 * 256;
  const std::shared_ptr<void> scratch =
      allocate(static_cast<int64_t>(2 * stat_bytes + static_cast<size_t>(chunk_columns) * sizeof(A)), out.device(), op);
  auto* group_max = static_cast<A*>(scratch.get());
  auto* group_sum = reinterpret_cast<A*>(static_cast<char*>(scratch.get()) + stat_bytes);
  auto* partial = reinterpret_cast<A*>(static_cast<char*>(scratch.get()) + 2 * stat_bytes);
  const auto* x = static_cast<const T*>(src.data());
  const A e = static_cast<A>(eps);
  if (chunk_columns > 0) {
    fold_chunk_columns<Max, T, false>
        <<<blocks_for(chunk_columns), kThreads, 0, stream()>>>(partial, x, g, nullptr, features, chunk_columns);
    check_launch(op, "fold_chunk_columns");
  }
  fold_group_columns<Max, T, false, false>
      <<<blocks_for(columns), kThreads, 0, stream()>>>(group_max, x, g, partial, nullptr, features, columns, e);
  check_launch(op, "fold_group_columns");
  if (chunk_columns > 0) {
    fold_chunk_columns<Sum, T, true>
        <<<blocks_for(chunk_columns), kThreads, 0, stream()>>>(partial, x, g, group_max, features, chunk_columns);
    check_launch(op, "fold_chunk_columns");
  }
  if (log)
    fold_group_columns<Sum, T, true, true>
        <<<blocks_for(columns), kThreads, 0, stream()>>>(group_sum, x, g, partial, group_max, features, columns, e);
  else
    fold_group_columns<Sum, T, true, false>
        <<<blocks_for(columns), kThreads, 0, stream()>>>(group_sum, x, g, partial, group_max, features, columns, e);
  check_launch(op, "fold_group_columns");
  const int64_t elements = groups.positions * features;
  if (log)
    write_columns<T, true><<<blocks_for(elements), kThreads, 0, stream()>>>(static_cast<T*>(out.data()), x, g,
                                                                            group_max, group_sum, features, elements);
  else
    write_columns<T, false><<<blocks_for(elements), kThreads, 0, stream()>>>(static_cast<T*>(out.data()), x, g,
                                                                             group_max, group_sum, features, elements);
  check_launch(op, "write_columns");
}

}  // namespace

void scatter_softmax(const char* op, const TensorView& src, const DeviceGroups& groups, const TensorView& out, bool log,
                     double eps) {
  DeviceGuard guard(out.device(), op);
  if (groups.num_groups * src.size(1) == 0) return;
  dispatch_dtype(src.dtype(), op, [&](auto dtype_tag) {
    constexpr DType D = decltype(dtype_tag)::value;
    if constexpr (is_floating_point(D)) run_typed<CppType<D>>(op, src, groups, out, log, eps);
  });
}

}  // namespace scatterx::detail::cuda

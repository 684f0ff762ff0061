// CUDA scatter_softmax / scatter_log_softmax over grouped rows. One thread
// per (group, feature) makes three passes over a short group's rows in
// position order: the maximum m (torch's amax: NaN wins), the sum s of
// exp(x - m), then the outputs. A long group (chunks.cuh) is done a chunk
// per thread in each pass instead, with the chunks' maxima and sums
// combined in chunk order between the passes, so a hub of a power-law
// graph does not leave one thread walking all its rows. Threads
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

// Writes the outputs of column k of the slots [begin, end) from their
// group's maximum m and its sum s (log-softmax: log(s + eps)).
template <bool kLog, typename T, typename A>
__device__ __forceinline__ void write_column(T* out, const T* src, const int64_t* order, int64_t features, int64_t k,
                                             int64_t begin, int64_t end, A m, A s) {
  for (int64_t p = begin; p < end; ++p) {
    const int64_t at = order[p] * features + k;
    const A shifted = static_cast<A>(src[at]) - m;
    out[at] = static_cast<T>(kLog ? shifted - s : exp_of(shifted) / s);
  }
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
    const auto [group, begin, end] = chunk_slots(g.offsets, g.chunk_offsets, g.num_groups, c);
    if constexpr (kExp) {
      const A m = stat[group * features + k];
      partial[u] = fold_column<Op>(src, g.order, features, k, begin, end, [m](A x) { return exp_of(x - m); });
    } else {
      partial[u] = fold_column<Op>(src, g.order, features, k, begin, end, [](A x) { return x; });
    }
  }
}

// Thread (group t, feature k) of a short group: the three passes over its
// rows (the maximum, the sum of exp(x - max), the outputs). Long groups
// are left to the chunk kernels below.
template <typename T, bool kLog>
__global__ void softmax_short_groups(T* out, const T* src, const DeviceGroupsView g, int64_t features, int64_t total,
                                     acc_t<T> eps) {
  using A = acc_t<T>;
  using Max = ReduceOp<Reduce::Amax, A>;
  using Sum = ReduceOp<Reduce::Sum, A>;
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t group = u / features;
    if (g.chunk_offsets[group + 1] != g.chunk_offsets[group]) continue;
    const int64_t k = u - group * features;
    const int64_t begin = g.offsets[group];
    const int64_t end = g.offsets[group + 1];
    const A m = fold_column<Max>(src, g.order, features, k, begin, end, [](A x) { return x; });
    const A s = fold_column<Sum>(src, g.order, features, k, begin, end, [m](A x) { return exp_of(x - m); });
    write_column<kLog>(out, src, g.order, features, k, begin, end, m, kLog ? log_of(s + eps) : s);
  }
}

// Thread (group t, feature k) of a long group: its maximum (kExp false) or
// its sum of exp(x - max) (kExp true; with kLog log(sum + eps)), folded from
// its chunks' partial results in chunk order.
template <typename Op, typename T, bool kLog>
__global__ void combine_chunk_columns(acc_t<T>* result, const DeviceGroupsView g, const acc_t<T>* partial,
                                      int64_t features, int64_t total, acc_t<T> eps) {
  using A = acc_t<T>;
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t group = u / features;
    const int64_t k = u - group * features;
    if (g.chunk_offsets[group + 1] == g.chunk_offsets[group]) continue;
    A acc = Op::identity();
    for (int64_t c = g.chunk_offsets[group]; c < g.chunk_offsets[group + 1]; ++c)
      acc = Op::combine(acc, partial[c * features + k]);
    if constexpr (kLog) acc = log_of(acc + eps);
    result[u] = acc;
  }
}

// Thread (chunk c, feature k): the outputs of the chunk's rows, from its
// group's maximum and sum (or log-sum).
template <typename T, bool kLog>
__global__ void write_chunk_columns(T* out, const T* src, const DeviceGroupsView g, const acc_t<T>* group_max,
                                    const acc_t<T>* group_sum, int64_t features, int64_t total) {
  const int64_t chunks = g.chunk_offsets[g.num_groups];
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t c = u / features;
    if (c >= chunks) break;  // u only grows
    const int64_t k = u - c * features;
    const auto [group, begin, end] = chunk_slots(g.offsets, g.chunk_offsets, g.num_groups, c);
    write_column<kLog>(out, src, g.order, features, k, begin, end, group_max[group * features + k],
                       group_sum[group * features + k]);
  }
}

// The long groups: partial maxima per chunk, then per group, then the
// chunks' partial sums of exp(x - max), then per group, then the outputs.
template <typename T, bool kLog>
void softmax_long_groups(const char* op, T* out, const T* x, const DeviceGroups& groups, int64_t features,
                         acc_t<T> eps) {
  using A = acc_t<T>;
  using Max = ReduceOp<Reduce::Amax, A>;
  using Sum = ReduceOp<Reduce::Sum, A>;
  const DeviceGroupsView g{groups.num_groups, groups.offsets, groups.chunk_offsets, groups.order};
  const int64_t columns = groups.num_groups * features;
  const int64_t chunk_columns = groups.max_chunks * features;
  const size_t stat_bytes = (static_cast<size_t>(columns) * sizeof(A) + 255) / 256 * 256;
  const std::shared_ptr<void> scratch = allocate(
      static_cast<int64_t>(2 * stat_bytes + static_cast<size_t>(chunk_columns) * sizeof(A)), groups.device, op);
  auto* group_max = static_cast<A*>(scratch.get());
  auto* group_sum = reinterpret_cast<A*>(static_cast<char*>(scratch.get()) + stat_bytes);
  auto* partial = reinterpret_cast<A*>(static_cast<char*>(scratch.get()) + 2 * stat_bytes);
  const unsigned chunk_blocks = blocks_for(chunk_columns);
  const unsigned group_blocks = blocks_for(columns);
  fold_chunk_columns<Max, T, false>
      <<<chunk_blocks, kThreads, 0, stream()>>>(partial, x, g, nullptr, features, chunk_columns);
  check_launch(op, "fold_chunk_columns");
  combine_chunk_columns<Max, T, false>
      <<<group_blocks, kThreads, 0, stream()>>>(group_max, g, partial, features, columns, eps);
  check_launch(op, "combine_chunk_columns");
  fold_chunk_columns<Sum, T, true>
      <<<chunk_blocks, kThreads, 0, stream()>>>(partial, x, g, group_max, features, chunk_columns);
  check_launch(op, "fold_chunk_columns");
  combine_chunk_columns<Sum, T, kLog>
      <<<group_blocks, kThreads, 0, stream()>>>(group_sum, g, partial, features, columns, eps);
  check_launch(op, "combine_chunk_columns");
  write_chunk_columns<T, kLog>
      <<<chunk_blocks, kThreads, 0, stream()>>>(out, x, g, group_max, group_sum, features, chunk_columns);
  check_launch(op, "write_chunk_columns");
}

template <typename T, bool kLog>
void run_typed(const char* op, const TensorView& src, const DeviceGroups& groups, const TensorView& out, double eps) {
  using A = acc_t<T>;
  const int64_t features = src.size(1);
  const DeviceGroupsView g{groups.num_groups, groups.offsets, groups.chunk_offsets, groups.order};
  const int64_t columns = groups.num_groups * features;
  auto* o = static_cast<T*>(out.data());
  const auto* x = static_cast<const T*>(src.data());
  softmax_short_groups<T, kLog>
      <<<blocks_for(columns), kThreads, 0, stream()>>>(o, x, g, features, columns, static_cast<A>(eps));
  check_launch(op, "softmax_short_groups");
  if (groups.max_chunks > 0) softmax_long_groups<T, kLog>(op, o, x, groups, features, static_cast<A>(eps));
}

}  // namespace

void scatter_softmax(const char* op, const TensorView& src, const DeviceGroups& groups, const TensorView& out, bool log,
                     double eps) {
  DeviceGuard guard(out.device(), op);
  if (groups.num_groups * src.size(1) == 0) return;
  dispatch_dtype(src.dtype(), op, [&](auto dtype_tag) {
    constexpr DType D = decltype(dtype_tag)::value;
    if constexpr (is_floating_point(D)) {
      if (log)
        run_typed<CppType<D>, true>(op, src, groups, out, eps);
      else
        run_typed<CppType<D>, false>(op, src, groups, out, eps);
    }
  });
}

}  // namespace scatterx::detail::cuda

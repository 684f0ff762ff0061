// CUDA gather_scatter kernel: the CPU kernel's plan on the GPU. The edges,
// grouped by destination (groups.cu), are first laid out in group order
// (each one's source row offset and weight), so that the folds read them
// sequentially; then one thread per (destination, feature) folds its group's
// edges in edge order and writes the output element once. Consecutive
// threads take consecutive features of one destination, so each edge's row
// is read coalesced and its offset and weight are one broadcast load.
// A long group (chunks.cuh) is folded a chunk per thread first, each chunk
// in edge order, and its destination's thread then folds the chunks' results
// in chunk order. No atomics: the result does not depend on the launch, and
// for groups of up to kSerialGroup edges it equals the CPU backend's bit for
// bit (the same folds in the same order; the weighted product is rounded
// before it is added, as the CPU computes it, so the compiler may not fuse
// the two into one FMA); longer groups differ from it by rounding alone.
#include <type_traits>

#include "ops/dispatch.h"
#include "ops/gather_scatter/cuda/chunks.cuh"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/gather_scatter/gather_scatter_dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx::detail::cuda {

namespace {

// a * b rounded on its own (no contraction into a following add).
template <typename A>
__device__ __forceinline__ A product(A a, A b) {
  if constexpr (std::is_same_v<A, float>)
    return __fmul_rn(a, b);
  else if constexpr (std::is_same_v<A, double>)
    return __dmul_rn(a, b);
  else
    return a * b;
}

// Slot p of the grouped order: the element offset of its edge's source row
// in x (-1 for a source out of range, possible only with index checks off)
// and its weight in the accumulation type.
template <typename I, typename T, bool kWeighted>
__global__ void lay_out_edges(int64_t* rows, acc_t<T>* weights, const int64_t* order, const I* src_index,
                              int64_t src_stride, const T* weight, int64_t weight_stride, int64_t slots,
                              int64_t num_rows, int64_t features) {
  SCATTERX_GRID_LOOP(p, slots) {
    const int64_t e = order[p];
    const int64_t r = src_index != nullptr ? static_cast<int64_t>(src_index[e * src_stride]) : e;
    rows[p] = r >= 0 && r < num_rows ? r * features : -1;
    if constexpr (kWeighted) weights[p] = static_cast<acc_t<T>>(weight[e * weight_stride]);
  }
}

// Folds the laid-out slots [begin, end) for feature k in slot order from
// the identity; `folded` counts the edges taken (a skipped source is none).
template <typename T, Reduce R, bool kWeighted>
__device__ __forceinline__ acc_t<T> fold_slots(const T* x, const int64_t* rows, const acc_t<T>* weights, int64_t begin,
                                               int64_t end, int64_t k, int64_t& folded) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  A acc = Op::identity();
#pragma unroll 4
  for (int64_t p = begin; p < end; ++p) {
    const int64_t row = rows[p];
    if (row < 0) continue;
    A value = static_cast<A>(x[row + k]);
    if constexpr (kWeighted) value = product(value, weights[p]);
    acc = Op::combine(acc, value);
    ++folded;
  }
  return acc;
}

// The chunks of the long groups: thread (c, k) folds chunk c for feature k
// into partial[c * F + k]; the k == 0 thread records the chunk's edge count.
template <typename T, Reduce R, bool kWeighted>
__global__ void fold_chunks(acc_t<T>* partial, int64_t* partial_count, const T* x, const int64_t* rows,
                            const acc_t<T>* weights, const int64_t* offsets, const int64_t* chunk_offsets,
                            int64_t num_groups, int64_t features, int64_t total) {
  const int64_t chunks = chunk_offsets[num_groups];
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t c = u / features;
    if (c >= chunks) break;  // u only grows
    const int64_t k = u - c * features;
    const ChunkSlots chunk = chunk_slots(offsets, chunk_offsets, num_groups, c);
    int64_t folded = 0;
    partial[u] = fold_slots<T, R, kWeighted>(x, rows, weights, chunk.begin, chunk.end, k, folded);
    if (k == 0) partial_count[c] = folded;
  }
}

template <typename T, Reduce R, bool kWeighted>
__global__ void fold_groups(T* out, const T* x, const int64_t* rows, const acc_t<T>* weights, const int64_t* offsets,
                            const int64_t* chunk_offsets, const acc_t<T>* partial, const int64_t* partial_count,
                            int64_t features, int64_t total) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t g = u / features;
    const int64_t k = u - g * features;
    int64_t folded = 0;
    A acc;
    if (chunk_offsets[g + 1] == chunk_offsets[g]) {
      acc = fold_slots<T, R, kWeighted>(x, rows, weights, offsets[g], offsets[g + 1], k, folded);
    } else {
      acc = Op::identity();
      for (int64_t c = chunk_offsets[g]; c < chunk_offsets[g + 1]; ++c) {
        acc = Op::combine(acc, partial[c * features + k]);
        folded += partial_count[c];
      }
    }
    const bool empty_is_zero = folded == 0 && (R == Reduce::Amax || R == Reduce::Amin);
    out[u] = empty_is_zero ? T(0) : static_cast<T>(Op::finalize(acc, folded > 0 ? folded : 1));
  }
}

template <typename T, Reduce R, typename I, bool kWeighted>
void run_typed(const GatherScatterArgs& a, const DeviceGroups& groups) {
  using A = acc_t<T>;
  const int64_t slots = groups.positions;
  const int64_t features = a.features;
  std::shared_ptr<void> laid_out;
  int64_t* rows = nullptr;
  A* weights = nullptr;
  if (slots > 0) {
    const size_t row_bytes = (static_cast<size_t>(slots) * sizeof(int64_t) + 255) / 256 * 256;
    laid_out = allocate(static_cast<int64_t>(row_bytes + (kWeighted ? slots * sizeof(A) : 0)), a.out.device(), a.op);
    rows = static_cast<int64_t*>(laid_out.get());
    if (kWeighted) weights = reinterpret_cast<A*>(static_cast<char*>(laid_out.get()) + row_bytes);
    const I* src = static_cast<const I*>(a.src_index.data());
    lay_out_edges<I, T, kWeighted><<<blocks_for(slots), kThreads, 0, stream()>>>(
        rows, weights, groups.order, src, src != nullptr ? a.src_index.strides()[0] : 0,
        static_cast<const T*>(a.weight.data()), kWeighted ? a.weight.strides()[0] : 0, slots, a.x.size(0), features);
    check_launch(a.op, "lay_out_edges");
  }
  // The long groups' chunks (none when every group is short: max_chunks bounds them, and the
  // kernel reads how many there are).
  std::shared_ptr<void> partials;
  A* partial = nullptr;
  int64_t* partial_count = nullptr;
  if (groups.max_chunks > 0) {
    const size_t partial_bytes = (static_cast<size_t>(groups.max_chunks * features) * sizeof(A) + 255) / 256 * 256;
    partials =
        allocate(static_cast<int64_t>(partial_bytes + groups.max_chunks * sizeof(int64_t)), a.out.device(), a.op);
    partial = static_cast<A*>(partials.get());
    partial_count = reinterpret_cast<int64_t*>(static_cast<char*>(partials.get()) + partial_bytes);
    const int64_t chunk_total = groups.max_chunks * features;
    fold_chunks<T, R, kWeighted><<<blocks_for(chunk_total), kThreads, 0, stream()>>>(
        partial, partial_count, static_cast<const T*>(a.x.data()), rows, weights, groups.offsets, groups.chunk_offsets,
        groups.num_groups, features, chunk_total);
    check_launch(a.op, "fold_chunks");
  }
  const int64_t total = groups.num_groups * features;
  fold_groups<T, R, kWeighted><<<blocks_for(total), kThreads, 0, stream()>>>(
      static_cast<T*>(a.out.data()), static_cast<const T*>(a.x.data()), rows, weights, groups.offsets,
      groups.chunk_offsets, partial, partial_count, features, total);
  check_launch(a.op, "fold_groups");
}

}  // namespace

void gather_scatter(const GatherScatterArgs& a, const DeviceGroups& groups) {
  DeviceGuard guard(a.out.device(), a.op);
  if (groups.num_groups * a.features == 0) return;
  dispatch_gather_scatter(a, [&](auto dtype_tag, auto reduce_tag, auto index_tag, auto weighted) {
    run_typed<CppType<decltype(dtype_tag)::value>, decltype(reduce_tag)::value, typename decltype(index_tag)::type,
              decltype(weighted)::value>(a, groups);
  });
}

}  // namespace scatterx::detail::cuda

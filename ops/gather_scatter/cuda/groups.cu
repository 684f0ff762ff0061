// A 1-d index's positions grouped by value on the GPU: the grouping of a
// CUDA IndexPlan and of each unplanned gather_scatter call. CUB's LSD radix
// sort of (value, position) pairs is stable, so each group lists its
// positions in ascending order, as the CPU's grouping does; a binary search
// per value then finds where its group starts. One translation unit, so CUB
// compiles once for this family.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <limits>
#include <type_traits>

#include "ops/cuda.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/cuda/chunks.cuh"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx::detail::cuda {

namespace {

// Keys of the sort: the value, or num_groups for one out of range (checks
// off), which sorts after every group and so lands in none.
template <typename K, typename I>
__global__ void value_keys(K* keys, int64_t* positions, const I* index, int64_t stride, int64_t count,
                           int64_t num_groups) {
  SCATTERX_GRID_LOOP(p, count) {
    const int64_t v = static_cast<int64_t>(index[p * stride]);
    keys[p] = static_cast<K>(v >= 0 && v < num_groups ? v : num_groups);
    positions[p] = p;
  }
}

// offsets[t] = the first sorted slot whose key is >= t, for t in [0, num_groups].
template <typename K>
__global__ void group_starts(int64_t* offsets, const K* sorted_keys, int64_t count, int64_t num_groups) {
  SCATTERX_GRID_LOOP(t, num_groups + 1) {
    int64_t lo = 0;
    int64_t hi = count;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<int64_t>(sorted_keys[mid]) < t)
        lo = mid + 1;
      else
        hi = mid;
    }
    offsets[t] = lo;
  }
}

// chunks[t] = the number of chunks of group t (chunks.cuh), and 0 at t == num_groups.
__global__ void chunks_per_group(int64_t* chunks, const int64_t* offsets, int64_t num_groups) {
  SCATTERX_GRID_LOOP(t, num_groups + 1) { chunks[t] = t < num_groups ? chunks_of(offsets[t + 1] - offsets[t]) : 0; }
}

__global__ void counts_of_groups(int64_t* counts, const int64_t* offsets, int64_t num_groups) {
  SCATTERX_GRID_LOOP(t, num_groups) { counts[t] = offsets[t + 1] - offsets[t]; }
}

__global__ void start_range(long long* range) {
  range[0] = std::numeric_limits<long long>::max();
  range[1] = std::numeric_limits<long long>::min();
}

// Each warp folds its threads' minima and maxima and sends one atomic of each.
template <typename I>
__global__ void fold_range(long long* range, const I* index, int64_t stride, int64_t count) {
  long long lo = std::numeric_limits<long long>::max();
  long long hi = std::numeric_limits<long long>::min();
  SCATTERX_GRID_LOOP(p, count) {
    const auto v = static_cast<long long>(index[p * stride]);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  for (int shift = 16; shift > 0; shift /= 2) {
    const long long other_lo = __shfl_down_sync(0xffffffffu, lo, shift);
    const long long other_hi = __shfl_down_sync(0xffffffffu, hi, shift);
    lo = other_lo < lo ? other_lo : lo;
    hi = other_hi > hi ? other_hi : hi;
  }
  if (threadIdx.x % 32 == 0) {
    atomicMin(&range[0], lo);
    atomicMax(&range[1], hi);
  }
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

int bit_width(uint64_t x) {
  int bits = 0;
  for (; x != 0; x >>= 1) ++bits;
  return bits;
}

// The sort with keys of type K (32 bits whenever the values allow: half the
// passes of 64-bit keys), the groups' starts, and their chunks.
template <typename K>
void sort_into(const char* op, const TensorView& index, DeviceGroups& groups) {
  const int64_t count = groups.positions;
  const int64_t slots = groups.num_groups + 1;
  const int end_bit = std::max(1, bit_width(static_cast<uint64_t>(groups.num_groups)));
  size_t sort_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const K*>(nullptr), static_cast<K*>(nullptr),
                                        static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr), count, 0,
                                        end_bit, stream()),
        op, "cub::DeviceRadixSort::SortPairs");
  size_t scan_bytes = 0;
  check(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int64_t*>(nullptr),
                                      static_cast<int64_t*>(nullptr), slots, stream()),
        op, "cub::DeviceScan::ExclusiveSum");
  const size_t key_bytes = aligned(static_cast<size_t>(count) * sizeof(K));
  const size_t position_bytes = aligned(static_cast<size_t>(count) * sizeof(int64_t));
  const size_t chunk_bytes = aligned(static_cast<size_t>(slots) * sizeof(int64_t));
  const size_t scratch_bytes = std::max(sort_bytes, scan_bytes);
  // Freed (stream-ordered, after the work below) when this returns; the groups keep their offsets and order.
  const std::shared_ptr<void> temporary =
      allocate(static_cast<int64_t>(2 * key_bytes + position_bytes + chunk_bytes + scratch_bytes), index.device(), op);
  char* base = static_cast<char*>(temporary.get());
  auto* keys_in = reinterpret_cast<K*>(base);
  auto* keys_out = reinterpret_cast<K*>(base + key_bytes);
  auto* positions_in = reinterpret_cast<int64_t*>(base + 2 * key_bytes);
  auto* chunks = reinterpret_cast<int64_t*>(base + 2 * key_bytes + position_bytes);
  void* scratch = base + 2 * key_bytes + position_bytes + chunk_bytes;
  auto* offsets = const_cast<int64_t*>(groups.offsets);
  auto* chunk_offsets = const_cast<int64_t*>(groups.chunk_offsets);
  auto* order = const_cast<int64_t*>(groups.order);
  dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    value_keys<K, I><<<blocks_for(count), kThreads, 0, stream()>>>(
        keys_in, positions_in, static_cast<const I*>(index.data()), index.strides()[0], count, groups.num_groups);
    check_launch(op, "value_keys");
  });
  size_t bytes = sort_bytes;
  check(cub::DeviceRadixSort::SortPairs(scratch, bytes, keys_in, keys_out, positions_in, order, count, 0, end_bit,
                                        stream()),
        op, "cub::DeviceRadixSort::SortPairs");
  group_starts<K><<<blocks_for(slots), kThreads, 0, stream()>>>(offsets, keys_out, count, groups.num_groups);
  check_launch(op, "group_starts");
  chunks_per_group<<<blocks_for(slots), kThreads, 0, stream()>>>(chunks, offsets, groups.num_groups);
  check_launch(op, "chunks_per_group");
  bytes = scan_bytes;
  check(cub::DeviceScan::ExclusiveSum(scratch, bytes, chunks, chunk_offsets, slots, stream()), op,
        "cub::DeviceScan::ExclusiveSum");
}

}  // namespace

DeviceGroups group_by_value(const char* op, const TensorView& index, int64_t num_groups) {
  DeviceGuard guard(index.device(), op);
  DeviceGroups groups;
  groups.num_groups = num_groups;
  groups.positions = index.size(0);
  groups.device = index.device();
  groups.every_position_grouped = scatterx::cuda::index_checks();
  // A chunked group has more than kSerialGroup positions, so fewer than 2 n / kSerialGroup chunks.
  groups.max_chunks = 2 * groups.positions / kSerialGroup;
  const size_t offset_bytes = aligned(static_cast<size_t>(num_groups + 1) * sizeof(int64_t));
  const size_t order_bytes = aligned(static_cast<size_t>(std::max<int64_t>(groups.positions, 1)) * sizeof(int64_t));
  groups.storage = allocate(static_cast<int64_t>(2 * offset_bytes + order_bytes), index.device(), op);
  char* base = static_cast<char*>(groups.storage.get());
  groups.offsets = reinterpret_cast<const int64_t*>(base);
  groups.chunk_offsets = reinterpret_cast<const int64_t*>(base + offset_bytes);
  groups.order = reinterpret_cast<const int64_t*>(base + 2 * offset_bytes);
  if (groups.positions == 0) {
    fill_zero(base, static_cast<int64_t>(2 * offset_bytes), op);  // every group empty, no chunks
    return groups;
  }
  // num_groups itself must be a key (out-of-range values), hence < max, not <=.
  if (num_groups < static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
    sort_into<uint32_t>(op, index, groups);
  else
    sort_into<uint64_t>(op, index, groups);
  return groups;
}

void group_counts(const char* op, const DeviceGroups& groups, const TensorView& out) {
  if (groups.num_groups == 0) return;
  DeviceGuard guard(groups.device, op);
  counts_of_groups<<<blocks_for(groups.num_groups), kThreads, 0, stream()>>>(static_cast<int64_t*>(out.data()),
                                                                             groups.offsets, groups.num_groups);
  check_launch(op, "counts_of_groups");
}

IndexRange index_range(const char* op, const TensorView& index) {
  DeviceGuard guard(index.device(), op);
  const int64_t count = index.size(0);
  const std::shared_ptr<void> scratch = allocate(2 * sizeof(long long), index.device(), op);
  auto* range = static_cast<long long*>(scratch.get());
  start_range<<<1, 1, 0, stream()>>>(range);
  check_launch(op, "start_range");
  dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    fold_range<I><<<blocks_for(count), kThreads, 0, stream()>>>(range, static_cast<const I*>(index.data()),
                                                                index.strides()[0], count);
    check_launch(op, "fold_range");
  });
  long long found[2] = {0, 0};
  copy_to_host(found, range, sizeof found, op);
  return IndexRange{static_cast<int64_t>(found[0]), static_cast<int64_t>(found[1])};
}

}  // namespace scatterx::detail::cuda

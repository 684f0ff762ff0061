// The sorted path's dtype-independent half: destination keys and CUB's
// stable radix sort of the positions by them. One translation unit, so CUB
// compiles once.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "ops/detail/cuda/positions.cuh"
#include "ops/detail/index_geometry.h"
#include "ops/dispatch.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"
#include "ops/scatter/cuda/scatter_sort.h"

namespace scatterx::detail::cuda {

namespace {

template <typename I>
__global__ void destination_keys(uint64_t* keys, int64_t* positions, const I* index, const DeviceGeometry g,
                                 int64_t bound, int64_t total, int64_t self_lowest, uint64_t skipped_key) {
  SCATTERX_GRID_LOOP(u, total) {
    const Position p = decode_position(g, u);
    const int64_t v = static_cast<int64_t>(index[p.index]);
    const bool in_range = v >= 0 && v < bound;
    keys[u] = in_range ? static_cast<uint64_t>(p.indexed + v * g.dim_stride[0] - self_lowest) : skipped_key;
    positions[u] = u;
  }
}

// Chunks of each run, 0 past the last run (n: the bound on runs, plus one).
__global__ void chunks_per_run(int64_t* chunks, const int64_t* counts, const int64_t* runs, int64_t n, int64_t chunk) {
  const int64_t found = *runs;
  SCATTERX_GRID_LOOP(r, n) { chunks[r] = r < found && counts[r] > chunk ? (counts[r] + chunk - 1) / chunk : 0; }
}

int bit_width(uint64_t x) {
  int bits = 0;
  while (x != 0) {
    ++bits;
    x >>= 1;
  }
  return bits;
}

}  // namespace

SelfSpan self_span(const TensorView& self) {
  SelfSpan span;
  int64_t highest = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    const int64_t reach = (self.size(d) - 1) * self.stride(d);
    if (reach < 0)
      span.lowest += reach;
    else
      highest += reach;
  }
  span.elements = self.numel() == 0 ? 0 : highest - span.lowest + 1;
  return span;
}

SortedPositions sort_by_destination(const ScatterArgs& a, const DeviceGeometry& g, const SelfSpan& span,
                                    int64_t total) {
  SortedPositions out;
  out.skipped_key = static_cast<uint64_t>(span.elements);
  const int end_bit = std::max(1, bit_width(out.skipped_key));
  const size_t n = static_cast<size_t>(total);
  // keys in / out, positions in / out, then CUB's scratch
  size_t scratch_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, static_cast<const uint64_t*>(nullptr),
                                        static_cast<uint64_t*>(nullptr), static_cast<const int64_t*>(nullptr),
                                        static_cast<int64_t*>(nullptr), static_cast<int64_t>(n), 0, end_bit, stream()),
        a.op, "cub::DeviceRadixSort::SortPairs");
  const size_t array_bytes = (n * 8 + 255) / 256 * 256;
  out.storage = allocate(static_cast<int64_t>(4 * array_bytes + scratch_bytes), a.self.device(), a.op);
  char* base = static_cast<char*>(out.storage.get());
  auto* keys_in = reinterpret_cast<uint64_t*>(base);
  auto* keys_out = reinterpret_cast<uint64_t*>(base + array_bytes);
  auto* positions_in = reinterpret_cast<int64_t*>(base + 2 * array_bytes);
  auto* positions_out = reinterpret_cast<int64_t*>(base + 3 * array_bytes);
  void* scratch = base + 4 * array_bytes;
  const int64_t bound = a.self.size(a.dim);
  dispatch_index_dtype(a.index.dtype(), a.op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    destination_keys<I><<<blocks_for(total), kThreads, 0, stream()>>>(
        keys_in, positions_in, static_cast<const I*>(a.index.data()), g, bound, total, span.lowest, out.skipped_key);
    check_launch(a.op, "destination_keys");
  });
  // LSD radix sort: stable, so each destination's positions stay in index order.
  check(cub::DeviceRadixSort::SortPairs(scratch, scratch_bytes, keys_in, keys_out, positions_in, positions_out, total,
                                        0, end_bit, stream()),
        a.op, "cub::DeviceRadixSort::SortPairs");
  out.keys = keys_out;
  out.positions = positions_out;
  return out;
}

Runs find_runs(const ScatterArgs& a, const SortedPositions& sorted, int64_t total, int64_t chunk) {
  Runs out;
  // At most `total` runs (and one slot more: the scans' totals); a chunked
  // run has more than `chunk` positions, so it has fewer than 2 * count /
  // chunk chunks, and all of them fewer than 2 * total / chunk.
  const int64_t slots = total + 1;
  const size_t array_bytes = (static_cast<size_t>(slots) * 8 + 255) / 256 * 256;
  size_t encode_bytes = 0;
  size_t scan_bytes = 0;
  check(cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, sorted.keys, static_cast<uint64_t*>(nullptr),
                                           static_cast<int64_t*>(nullptr), static_cast<int64_t*>(nullptr), total,
                                           stream()),
        a.op, "cub::DeviceRunLengthEncode::Encode");
  check(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int64_t*>(nullptr),
                                      static_cast<int64_t*>(nullptr), slots, stream()),
        a.op, "cub::DeviceScan::ExclusiveSum");
  // keys, counts, offsets, chunks per run, chunk offsets, the run count, scratch
  out.storage =
      allocate(static_cast<int64_t>(5 * array_bytes + 256 + std::max(encode_bytes, scan_bytes)), a.self.device(), a.op);
  char* base = static_cast<char*>(out.storage.get());
  auto* keys = reinterpret_cast<uint64_t*>(base);
  auto* counts = reinterpret_cast<int64_t*>(base + array_bytes);
  auto* offsets = reinterpret_cast<int64_t*>(base + 2 * array_bytes);
  auto* chunks = reinterpret_cast<int64_t*>(base + 3 * array_bytes);
  auto* chunk_offsets = reinterpret_cast<int64_t*>(base + 4 * array_bytes);
  auto* runs = reinterpret_cast<int64_t*>(base + 5 * array_bytes);
  void* scratch = base + 5 * array_bytes + 256;
  // Counts past the last run stay 0, so that scanning all slots gives the
  // offsets of the runs and, after the last, the totals.
  fill_zero(counts, slots * int64_t{sizeof(int64_t)}, a.op);
  size_t bytes = encode_bytes;
  check(cub::DeviceRunLengthEncode::Encode(scratch, bytes, sorted.keys, keys, counts, runs, total, stream()), a.op,
        "cub::DeviceRunLengthEncode::Encode");
  bytes = scan_bytes;
  check(cub::DeviceScan::ExclusiveSum(scratch, bytes, counts, offsets, slots, stream()), a.op,
        "cub::DeviceScan::ExclusiveSum");
  chunks_per_run<<<blocks_for(slots), kThreads, 0, stream()>>>(chunks, counts, runs, slots, chunk);
  check_launch(a.op, "chunks_per_run");
  bytes = scan_bytes;
  check(cub::DeviceScan::ExclusiveSum(scratch, bytes, chunks, chunk_offsets, slots, stream()), a.op,
        "cub::DeviceScan::ExclusiveSum");
  out.view.keys = keys;
  out.view.offsets = offsets;
  out.view.counts = counts;
  out.view.chunk_offsets = chunk_offsets;
  out.view.runs = runs;
  out.view.max_runs = total;
  out.view.max_chunks = total > chunk ? 2 * total / chunk : 0;
  return out;
}

}  // namespace scatterx::detail::cuda

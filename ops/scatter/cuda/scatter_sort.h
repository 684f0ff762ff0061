// Internal: the sorted path's shared, dtype-independent half (scatter_sort.cu):
// where self lies in memory, and its positions sorted by destination.
#pragma once

#include <cstdint>
#include <memory>

#include "ops/detail/cuda/positions.cuh"
#include "ops/scatter/scatter_args.h"

namespace scatterx::detail::cuda {

// Element offsets of self relative to its data pointer: the lowest (<= 0
// with negative strides) and how many elements lie from there to the highest.
struct SelfSpan {
  int64_t lowest = 0;
  int64_t elements = 0;
};
SelfSpan self_span(const TensorView& self);

// The positions of index's shape (row-major ranks in the geometry's order),
// stably sorted by destination: keys[s] is the destination of positions[s]
// as an offset from span.lowest; skipped_key marks positions whose index is
// out of range (only with index checks off), sorted last.
struct SortedPositions {
  const uint64_t* keys = nullptr;
  const int64_t* positions = nullptr;
  uint64_t skipped_key = 0;
  std::shared_ptr<void> storage;
};
SortedPositions sort_by_destination(const ScatterArgs& args, const DeviceGeometry& geometry, const SelfSpan& span,
                                    int64_t total);

// The runs of equal keys in sorted positions (one run per destination),
// each cut into chunks of `chunk` positions when it is longer than that:
// run r holds sorted positions [offsets[r], offsets[r] + counts[r]) of
// destination keys[r], and its chunks (none for a run of `chunk` or fewer)
// are chunk_offsets[r] .. chunk_offsets[r + 1] - 1. The numbers of runs and
// chunks stay on the device (no synchronization): kernels read them there,
// and the host sizes grids and buffers by the bounds max_runs and max_chunks.
struct RunsView {  // plain data: what the kernels take
  const uint64_t* keys = nullptr;
  const int64_t* offsets = nullptr;
  const int64_t* counts = nullptr;
  const int64_t* chunk_offsets = nullptr;
  const int64_t* runs = nullptr;  // device: the number of runs; chunk_offsets[*runs] is the number of chunks
  int64_t max_runs = 0;
  int64_t max_chunks = 0;
};
struct Runs {
  RunsView view;
  std::shared_ptr<void> storage;
};
Runs find_runs(const ScatterArgs& args, const SortedPositions& sorted, int64_t total, int64_t chunk);

}  // namespace scatterx::detail::cuda

// Grouping index positions by the target they hit: the sorted fast path of
// slice-wise scatter (GNN aggregation, index_add) reduces each group in one
// thread, so no two threads write one destination and no atomics are used.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/detail/target_blocks.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

struct TargetGroups {
  int64_t num_groups = 0;
  // Dense: one group per target (group g is target g, and may be empty).
  // Sparse: one group per distinct target hit, listed in `target`.
  bool dense = false;
  Buffer<int64_t> target;   // sparse only: [num_groups] distinct targets, ascending
  Buffer<int64_t> offsets;  // [num_groups + 1] group g is order[offsets[g], offsets[g+1])
  Buffer<int64_t> order;    // [count] positions, grouped by target, ascending within a group

  int64_t target_of(int64_t group) const { return dense ? group : target[group]; }
};

constexpr int64_t kSortGrain = 1 << 15;  // items per thread below which threads cost more than they save

// About this many source reads per dynamic piece of a fold over grouped rows
// (gather_scatter, scatter_softmax). Their row prefetch looks a few positions
// ahead along the grouped order, so each piece starts with its first rows
// unfetched and ends fetching rows another thread may fold. Pieces of 4096
// reads (64 rows of 64 floats) lost 1 row in 8 that way: at 64Ki, scatter_rows
// of 1M x 64 float32 rows into 100k took 23.3-24.1 ms instead of 25.2-26.2 on
// 2 threads, and the ~1000 pieces still balance power-law groups.
constexpr int64_t kGroupedReadsPerPiece = int64_t{1} << 16;

// Whether counting_sort_by_target sorts in two levels (target_blocks.h):
// from 2^18 targets, where one level's per-thread counters (1 MiB and more)
// outgrow a core's L2. Index_add_ of 2M x 16 float32 rows into 1M targets, 2
// threads: 30.6 -> 20.5 ms; 20M rows into 2M targets: 290-370 -> 155-180 ms;
// into 100k targets, where the counters fit, the two matched (2026-11-28).
inline bool sorts_in_blocks(int64_t count, int64_t num_targets) {
  return num_targets >= (int64_t{1} << 18) && count <= int64_t{UINT32_MAX};
}

// Whether group_by_target groups these sizes densely (a counting sort): its
// per-thread histograms are no bigger than the data, or it sorts in blocks
// and the index is no sparser than one position in four targets.
inline bool groups_densely(int64_t count, int64_t num_targets) {
  return threads_for(count, kSortGrain) * num_targets <= 2 * count ||
         (sorts_in_blocks(count, num_targets) && 4 * count >= num_targets);
}

// counting_sort_by_target's histogram, prefix sum and placement. Counter
// holds a count and a slot: 32 bits whenever the positions fit, which halves
// the per-thread histograms (100k targets: 400 KiB, inside a core's L2 beside
// the streaming index) and took the sort of 1M positions into 100k targets
// from 3.1 to 1.9 ms on 2 threads.
template <typename Counter, typename I, typename Place>
void counting_sort_unsorted(const I* values, int64_t stride, int64_t count, int64_t num_targets,
                            Buffer<int64_t>& offsets, const Place& place) {
  const int64_t pieces = threads_for(count, kSortGrain);
  PerThreadRuns<Counter> histograms(pieces, num_targets);
  offsets = Buffer<int64_t>(num_targets + 1);
  for_each_piece(pieces, static_cast<int>(pieces), [&](int64_t p) {
    Counter* hist = histograms.run(p);
    std::fill(hist, hist + num_targets, Counter{0});
    const int64_t end = piece_start(p + 1, pieces, count);
    for (int64_t i = piece_start(p, pieces, count); i < end; ++i) ++hist[values[i * stride]];
  });
  int64_t running = 0;
  for (int64_t t = 0; t < num_targets; ++t) {
    offsets[t] = running;
    for (int64_t p = 0; p < pieces; ++p) {
      Counter& h = histograms.run(p)[t];
      const int64_t c = h;
      h = static_cast<Counter>(running);
      running += c;
    }
  }
  offsets[num_targets] = running;
  for_each_piece(pieces, static_cast<int>(pieces), [&](int64_t p) {
    Counter* next = histograms.run(p);
    const int64_t end = piece_start(p + 1, pieces, count);
    for (int64_t i = piece_start(p, pieces, count); i < end; ++i)
      place(i, static_cast<int64_t>(next[values[i * stride]]++));
  });
}

// The counting sort of the dense grouping, with the placement left to the
// caller: fills offsets[0..num_targets] (target t's run is [offsets[t],
// offsets[t + 1])) and calls place(p, slot) once for each position p with
// its slot in the grouped order; stable, and the slots do not depend on the
// thread count. A histogram pass, a prefix sum (target-major, piece-minor)
// and a placement pass; values must already be checked to lie in
// [0, num_targets). Callers that lay out their payload in `place` save a
// pass over the positions. Values already grouped (non-decreasing, as the
// ids an embedding-bag owner receives, bag after bag) skip the sort: the
// stable order is then the identity, so one pass finds the runs and the
// placement reads and writes in order.
template <typename I, typename Place>
void counting_sort_by_target(const I* values, int64_t stride, int64_t count, int64_t num_targets,
                             Buffer<int64_t>& offsets, const Place& place) {
  int64_t sorted_prefix = 1;
  while (sorted_prefix < count && values[sorted_prefix * stride] >= values[(sorted_prefix - 1) * stride])
    ++sorted_prefix;
  if (count == 0 || sorted_prefix == count) {
    offsets = Buffer<int64_t>(num_targets + 1);
    int64_t t = 0;
    for (int64_t i = 0; i < count; ++i) {
      const auto v = static_cast<int64_t>(values[i * stride]);
      while (t <= v) offsets[t++] = i;
    }
    while (t <= num_targets) offsets[t++] = count;
    parallel_for(count, kSortGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) place(i, i);
    });
    return;
  }
  if (sorts_in_blocks(count, num_targets)) {
    counting_sort_in_blocks(values, stride, count, num_targets, threads_for(count, kSortGrain),
                            streams_block_hits(count), offsets, place);
  } else if (count <= int64_t{UINT32_MAX}) {
    counting_sort_unsorted<uint32_t>(values, stride, count, num_targets, offsets, place);
  } else {
    counting_sort_unsorted<int64_t>(values, stride, count, num_targets, offsets, place);
  }
}

// Groups positions 0..count-1 by values[p * stride], which must already be
// checked to lie in [0, num_targets). Stable (positions keep index order
// inside a group) and deterministic. A parallel counting sort when targets
// are few next to positions (dense groups), else a parallel LSD radix sort.
template <typename I>
TargetGroups group_by_target(const I* values, int64_t stride, int64_t count, int64_t num_targets);

}  // namespace scatterx::detail

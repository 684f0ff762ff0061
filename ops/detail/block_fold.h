// The block fold's shape rules and schedule, shared by the scatter
// (scatter_cpu_impl.h, "target blocks") and gather_scatter
// (gather_scatter_cpu_blocks.h).
//
// For short rows into many targets (GNN aggregation), the index positions are
// split once, in index order, into blocks of consecutive targets
// (split_by_target_block, target_blocks.h), and one thread folds a block at a
// time into an accumulator copy of its rows kept in a core's L2. One pass over
// the index instead of a full sort by target, and the destination rows are
// read and written once, in order. Each target still folds its values in
// index order, so the results are those of a fold over the sorted index, to
// the bit.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "ops/detail/prefetch.h"
#include "ops/detail/target_blocks.h"
#include "ops/macros.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

// The accumulator rows of a block: kept in a core's L2 while the block's
// source rows stream past.
constexpr int64_t kBlockAccumulatorBytes = int64_t{256} << 10;
// Rows longer than this (in accumulator bytes) fold grouped: a block would
// hold few targets, and the grouped fold's cost per target is amortised.
constexpr int64_t kBlockFoldMaxRowBytes = 1024;
// Rows shorter than a cache line (in element bytes) do not fold by blocks:
// reading them in a block's order fetches a whole line for each, where the
// scatter's direct path reads the source in order. 4M rows of 2 float64 into
// 1M targets, 2 threads: 25.5 ms in blocks, 13-24 ms direct (2026-11-28).
constexpr int64_t kBlockFoldMinRowBytes = 64;
// At least this many blocks, to spread over threads.
constexpr int64_t kMinTargetBlocks = 16;

// Targets per block, as a shift: as many rows of acc_row_bytes as
// kBlockAccumulatorBytes holds.
inline int block_fold_shift(int64_t acc_row_bytes) {
  const int64_t rows = std::max<int64_t>(kBlockAccumulatorBytes / std::max<int64_t>(acc_row_bytes, 1), 1);
  return 63 - __builtin_clzll(static_cast<uint64_t>(rows));
}

// Whether `positions` rows of row_bytes (acc_row_bytes once accumulated)
// fold faster by blocks into num_targets targets than grouped by a sort. An
// index sparser than a position per four targets goes grouped: the split
// counts every block, the sort only the targets hit.
inline bool block_fold_pays(int64_t acc_row_bytes, int64_t row_bytes, int64_t positions, int64_t num_targets) {
  return acc_row_bytes <= kBlockFoldMaxRowBytes && row_bytes >= kBlockFoldMinRowBytes &&
         positions <= int64_t{UINT32_MAX} && 4 * positions >= num_targets &&
         (num_targets >> block_fold_shift(acc_row_bytes)) >= kMinTargetBlocks;
}

// Prefetch distance, in rows, for source rows of row_bytes read at random:
// about 6 KiB in flight, 2 to 24 rows.
inline int64_t block_fold_prefetch_rows(int64_t row_bytes) {
  return std::clamp<int64_t>(6144 / std::max<int64_t>(row_bytes, 1), 2, 24);
}

// Prefetches a source row of row_bytes about to be folded: prefetch_row's
// straight-line 8 lines where they cover it, else every line. Rows of 768
// and 1024 bytes with only their first 512 prefetched, gather_scatter of 1M
// edges into 100k nodes, 2 threads: 35 and 46 ms, against 19 and 25 ms with
// every line (2026-11-29).
SCATTERX_INLINE void prefetch_block_fold_row(const void* row, int64_t row_bytes) {
  if (row_bytes <= 448) {  // 8 lines from any start within a line
    prefetch_row(row, row_bytes);
  } else {
    prefetch_bytes(row, static_cast<size_t>(row_bytes));
  }
}

// Calls f(thread, block, hits) once for every block of tb, from up to
// `threads` threads (thread in [0, threads): its scratch), hits being the
// block's positions. Blocks are handed out heaviest first, so that a
// power-law graph's hub blocks do not start last.
template <typename F>
void for_each_block_heaviest_first(const TargetBlocks& tb, int threads, const F& f) {
  Buffer<int64_t> order(tb.blocks);
  Buffer<int64_t> block_hits(tb.blocks);
  for (int64_t b = 0; b < tb.blocks; ++b) {
    order[b] = b;
    block_hits[b] = 0;
    for (int64_t p = 0; p < tb.pieces; ++p) block_hits[b] += tb.count(b, p);
  }
  std::stable_sort(order.data(), order.data() + tb.blocks,
                   [&](int64_t x, int64_t y) { return block_hits[x] > block_hits[y]; });
  std::atomic<int64_t> next{0};
  for_each_piece(threads, threads, [&](int64_t t) {
    for (int64_t i = next++; i < tb.blocks; i = next++) f(t, order[i], block_hits[order[i]]);
  });
}

}  // namespace scatterx::detail

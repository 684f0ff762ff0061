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
#include <type_traits>

#include "ops/detail/prefetch.h"
#include "ops/detail/target_blocks.h"
#include "ops/macros.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

// The accumulator rows of a block, kept in a core's L2 while the block's
// source rows stream past; each op picks its size (block_fold_shift). The
// scatter streams its source rows from memory, and where its two threads
// share one core (SMT siblings, as this project's VM places its two vCPUs
// for minutes at a time) two accumulators of 256 KiB and the rows in flight
// crowd the core's L2: 1M rows of 64 float32 into 100k targets, 2 threads,
// one process alternating sizes: on one core's siblings 12.3 ms with 256
// KiB, 11.2 with 128 and 10.3 with 64; on separate cores 9.85, 9.87 and
// 10.2 (2026-11-29). gather_scatter's rows come from a table that mostly
// sits in the L3; it keeps 256 KiB (7.55 ms on separate cores, 7.82 with 128).
constexpr int64_t kScatterAccumulatorBytes = int64_t{128} << 10;
constexpr int64_t kGatherScatterAccumulatorBytes = int64_t{256} << 10;
// Blocks grow past the accumulator size rather than number more than this:
// each block is a stream of the split and a pass of its own. 2M rows of 16
// float32 into 1M targets: 15.4-15.6 ms in 245-489 blocks, 20.1 ms in 1953;
// 20M into 2M: 127-129 ms in 244-488 blocks, 134 in 1953 (2026-11-29).
constexpr int64_t kMaxTargetBlocks = 512;
// ...up to this accumulator size, where a block would no longer stay in L2.
constexpr int64_t kMaxBlockAccumulatorBytes = int64_t{1} << 20;
// Rows longer than this (in accumulator bytes) fold grouped: a block would
// hold few targets, and the grouped fold's cost per target is amortised.
constexpr int64_t kBlockFoldMaxRowBytes = 1024;
// Rows shorter than a cache line (in element bytes) do not fold by blocks:
// reading them in a block's order fetches a whole line for each, where the
// scatter's direct path reads the source in order. 4M rows of 2 float64 into
// 1M targets, 2 threads: 25.5 ms in blocks, 13-24 ms direct (2026-11-28).
constexpr int64_t kBlockFoldMinRowBytes = 64;
// Fewer target rows than this (in accumulator bytes; 16 blocks of 256 KiB)
// fold grouped: too few blocks to spread over threads, and the sort by
// target is cheap while its counters fit a core's cache.
constexpr int64_t kMinBlockFoldBytes = int64_t{4} << 20;

// Targets per block, as a shift: as many rows of acc_row_bytes as
// accumulator_bytes holds (a power of two), or more where num_targets
// would otherwise make more than kMaxTargetBlocks blocks.
inline int block_fold_shift(int64_t acc_row_bytes, int64_t num_targets, int64_t accumulator_bytes) {
  const int64_t row = std::max<int64_t>(acc_row_bytes, 1);
  const int64_t rows = std::max<int64_t>(accumulator_bytes / row, 1);
  int shift = 63 - __builtin_clzll(static_cast<uint64_t>(rows));
  while (((num_targets - 1) >> shift) + 1 > kMaxTargetBlocks && (row << (shift + 1)) <= kMaxBlockAccumulatorBytes)
    ++shift;
  return shift;
}

// Whether `positions` rows of row_bytes (acc_row_bytes once accumulated)
// fold faster by blocks into num_targets targets than grouped by a sort. An
// index sparser than a position per four targets goes grouped: the split
// counts every block, the sort only the targets hit.
inline bool block_fold_pays(int64_t acc_row_bytes, int64_t row_bytes, int64_t positions, int64_t num_targets) {
  return acc_row_bytes <= kBlockFoldMaxRowBytes && row_bytes >= kBlockFoldMinRowBytes &&
         positions <= int64_t{UINT32_MAX} && 4 * positions >= num_targets &&
         num_targets * acc_row_bytes >= kMinBlockFoldBytes;
}

// Calls f(std::integral_constant<int64_t, kLen>{}) and returns what it
// returns: kLen is row_len where rows of it fill 64, 128, 256 or 512 bytes of
// accumulator A, and 0 (length known only at run time) otherwise. The folds
// instantiate their inner loops on it, so that the common row sizes unroll
// fully. Index_add_ of float32 rows into targets, 2 threads, medians of 10
// calls, length known against read at run time (2026-11-29): 1M rows of 64
// into 100k 9.0-9.1 ms against 9.9; 2M of 32 into 200k 13.8 against 16.1;
// 2M of 16 into 1M 16.5-17.1 against 17.3. gather_scatter of 1M edges of 64
// into 100k: 6.4-6.8 against 7.3-7.8, weighted 8.4-8.5 against 9.8-10.7.
template <typename A, typename F>
decltype(auto) with_block_row_len(int64_t row_len, const F& f) {
  switch (row_len * int64_t{sizeof(A)}) {
    case 64:
      return f(std::integral_constant<int64_t, 64 / int64_t{sizeof(A)}>{});
    case 128:
      return f(std::integral_constant<int64_t, 128 / int64_t{sizeof(A)}>{});
    case 256:
      return f(std::integral_constant<int64_t, 256 / int64_t{sizeof(A)}>{});
    case 512:
      return f(std::integral_constant<int64_t, 512 / int64_t{sizeof(A)}>{});
    default:
      return f(std::integral_constant<int64_t, 0>{});
  }
}

// Folds one source row into its accumulator row, acc[j] = combine(acc[j],
// row[j]); kLen as with_block_row_len gives it, len the run-time length.
// Restrict pointers and, for rows of at most 16 elements, no unrolling
// before vectorizing: GCC 12 otherwise unrolled rows of 16 float32 of known
// length into 16 scalar adds (2M rows into 1M targets: 17.9 ms against 15.1
// with the length read at run time, 2026-11-29).
template <int64_t kLen, typename A, typename T, typename Combine>
SCATTERX_INLINE void fold_block_row(A* __restrict acc, const T* __restrict row, int64_t len, const Combine& combine) {
  if constexpr (kLen > 0 && kLen <= 16) {
#pragma GCC unroll 1
    for (int64_t j = 0; j < kLen; ++j) acc[j] = combine(acc[j], row[j]);
  } else {
    for (int64_t j = 0; j < len; ++j) acc[j] = combine(acc[j], row[j]);
  }
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

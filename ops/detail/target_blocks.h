// The counting sort of positions by target (segments.h) in two levels, for
// many targets (GNN aggregation over graphs of millions of nodes), and the
// split of positions into blocks of consecutive targets that the scatter's
// block fold (scatter_cpu_impl.h) reads.
//
// The one-level sort keeps a counter per target and thread and places each
// position at a random slot of an order as long as the index. Past a few
// hundred thousand targets its counters no longer fit a core's L2, and both
// of its passes miss cache on every position. Here the positions are first
// split into blocks of 2^shift consecutive targets (hundreds to thousands of
// streams), and each block is then counted and placed on its own (its
// counters and slots stay in L1/L2), blocks spread over threads.
//
// Both levels are stable, so the slots are the one-level sort's: each
// target's positions ascending, targets in order. How the index is cut into
// pieces depends on the thread count; the slots never do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops/macros.h"
#include "ops/runtime/parallel.h"
#include "ops/runtime/stream_copy.h"

namespace scatterx::detail {

// One index position (or what the split's item_of made of it) and its
// target's offset inside its block.
struct BlockHit {
  uint32_t item;
  uint32_t local;
};

// The split's default item: the position itself.
struct PositionItem {
  uint32_t operator()(int64_t i) const { return static_cast<uint32_t>(i); }
};

// The first level: each piece of the index wrote its hits of block b to
// hits[begin(b, p), begin(b, p) + count(b, p)), ascending; pieces in index
// order, so reading the pieces of a block in turn gives its positions in
// ascending order. Written with streaming stores, each run starts on a cache
// line; else the runs follow each other, gapless.
struct TargetBlocks {
  int64_t blocks = 0;
  int64_t pieces = 0;
  Buffer<int64_t> begins;   // [blocks * pieces], block-major
  Buffer<uint32_t> counts;  // [blocks * pieces], block-major
  Buffer<BlockHit> hits;

  int64_t begin(int64_t block, int64_t piece) const { return begins[block * pieces + piece]; }
  int64_t count(int64_t block, int64_t piece) const { return counts[block * pieces + piece]; }
};

constexpr int64_t kHitsPerLine = 64 / int64_t{sizeof(BlockHit)};

// split_by_target_block's placement of positions [begin, end) when the hits
// stay in cache for their reader: each goes straight to its block's cursor.
// Restrict pointers and plain arguments: as a lambda over captured
// references the loop reloaded its bounds after every store (item_of is
// copied for the same reason).
template <typename I, typename ItemOf>
void place_block_hits(const I* __restrict values, int64_t stride, int64_t begin, int64_t end, int shift,
                      const ItemOf& item_of, int64_t* __restrict cursor, BlockHit* __restrict out) {
  const uint32_t mask = (uint32_t{1} << shift) - 1;
  const ItemOf item = item_of;
  for (int64_t i = begin; i < end; ++i) {
    const auto t = static_cast<uint32_t>(values[i * stride]);
    out[cursor[t >> shift]++] = BlockHit{item(i), t & mask};
  }
}

// The same when the hits outgrow the cache: each hit is staged in its
// block's line, and a full line is written out at once, with stores that do
// not read the line first.
template <typename I, typename ItemOf>
void stream_block_hits(const I* __restrict values, int64_t stride, int64_t begin, int64_t end, int shift,
                       const ItemOf& item_of, BlockHit* __restrict stage, uint32_t* __restrict filled,
                       int64_t* __restrict cursor, BlockHit* __restrict out) {
  const uint32_t mask = (uint32_t{1} << shift) - 1;
  const ItemOf item = item_of;
  for (int64_t i = begin; i < end; ++i) {
    const auto t = static_cast<uint32_t>(values[i * stride]);
    const uint32_t b = t >> shift;
    BlockHit* line = stage + int64_t{b} * kHitsPerLine;
    const uint32_t f = filled[b];
    line[f] = BlockHit{item(i), t & mask};
    filled[b] = f + 1;
    if (f + 1 == kHitsPerLine) {
      store_line_streaming(out + cursor[b], line);
      cursor[b] += kHitsPerLine;
      filled[b] = 0;
    }
  }
  streaming_store_fence();
}

// Whether split_by_target_block should write the hits of `count` positions
// with streaming stores: they pay only for hits that leave the cache before
// they are read, because they outgrow it or because their reader streams
// `bytes_read_per_hit` more (a block fold's source rows) through it first.
// Measured hot, split alone, 1M positions into 100k targets (8 MiB of hits),
// 2 threads: 1.6 ms with them and 0.66 ms without; 20M into 2M (160 MiB),
// 31-33 ms with and 44 without (2026-11-28). Measured where it is used, in a
// loop of 1M rows of 64 float32 split and folded into 100k targets, the
// split took 1.29-1.48 ms with them and 1.62-1.87 without (2026-11-29).
inline bool streams_block_hits(int64_t count, int64_t bytes_read_per_hit = 0) {
  return count * (int64_t{sizeof(BlockHit)} + bytes_read_per_hit) >= streaming_store_threshold();
}

// Splits positions 0..count-1 (count < 2^32), cut into `pieces` pieces, by
// values[p * stride] >> shift; values must already be checked to lie in
// [0, num_targets). `streaming`: see streams_block_hits. Each hit holds
// item_of(position): the position itself by default; a caller that would
// only look something up by it at fold time can store that instead, read
// here in position order.
template <typename I, typename ItemOf = PositionItem>
TargetBlocks split_by_target_block(const I* values, int64_t stride, int64_t count, int64_t num_targets, int shift,
                                   int64_t pieces, bool streaming, const ItemOf& item_of = {}) {
  TargetBlocks tb;
  tb.blocks = ((num_targets - 1) >> shift) + 1;
  tb.pieces = pieces;
  const int64_t blocks = tb.blocks;
  // Per piece: its block counts, then its block write cursors and staging
  // lines; piece-major here so one piece's scratch is contiguous.
  PerThreadRuns<uint32_t> piece_counts(pieces, blocks);
  for_each_piece(pieces, static_cast<int>(pieces), [&](int64_t p) {
    uint32_t* hist = piece_counts.run(p);
    std::fill(hist, hist + blocks, 0u);
    const I* v = values;
    const int s = shift;
    const int64_t end = piece_start(p + 1, pieces, count);
    for (int64_t i = piece_start(p, pieces, count); i < end; ++i) ++hist[static_cast<int64_t>(v[i * stride]) >> s];
  });
  const int64_t line = streaming ? kHitsPerLine : 1;  // runs start on a line only for the streaming stores
  tb.begins = Buffer<int64_t>(blocks * pieces);
  tb.counts = Buffer<uint32_t>(blocks * pieces);
  int64_t running = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t p = 0; p < pieces; ++p) {
      const uint32_t c = piece_counts.run(p)[b];
      tb.begins[b * pieces + p] = running;
      tb.counts[b * pieces + p] = c;
      running += (c + line - 1) / line * line;
    }
  }
  tb.hits = Buffer<BlockHit>(std::max<int64_t>(running, 1));
  if (!streaming) {
    for_each_piece(pieces, static_cast<int>(pieces), [&](int64_t p) {
      Buffer<int64_t> cursor(blocks);
      for (int64_t b = 0; b < blocks; ++b) cursor[b] = tb.begins[b * pieces + p];
      place_block_hits(values, stride, piece_start(p, pieces, count), piece_start(p + 1, pieces, count), shift, item_of,
                       cursor.data(), tb.hits.data());
    });
    return tb;
  }
  // A line of staging per block and piece (256 blocks: 16 KiB a piece).
  Buffer<BlockHit> staging(pieces * blocks * kHitsPerLine);
  PerThreadRuns<int64_t> cursors(pieces, blocks);
  for_each_piece(pieces, static_cast<int>(pieces), [&](int64_t p) {
    int64_t* cursor = cursors.run(p);
    for (int64_t b = 0; b < blocks; ++b) cursor[b] = tb.begins[b * pieces + p];
    uint32_t* filled = piece_counts.run(p);  // reused: hits staged per block
    std::fill(filled, filled + blocks, 0u);
    stream_block_hits(values, stride, piece_start(p, pieces, count), piece_start(p + 1, pieces, count), shift, item_of,
                      staging.data() + p * blocks * kHitsPerLine, filled, cursor, tb.hits.data());
    for (int64_t b = 0; b < blocks; ++b) {  // the partly filled last lines
      std::memcpy(tb.hits.data() + cursor[b], staging.data() + (p * blocks + b) * kHitsPerLine,
                  filled[b] * sizeof(BlockHit));
    }
  });
  return tb;
}

constexpr int kTargetBlockShift = 10;  // 1024 targets a block: 8 KiB of offsets

// counting_sort_by_target's contract (segments.h), in two levels: fills
// offsets[0..num_targets] and calls place(p, slot) once for each position p
// with its slot, from several threads (distinct slots). count < 2^32;
// `streaming`: see streams_block_hits.
template <typename I, typename Place>
void counting_sort_in_blocks(const I* values, int64_t stride, int64_t count, int64_t num_targets, int64_t pieces,
                             bool streaming, Buffer<int64_t>& offsets, const Place& place) {
  const TargetBlocks tb =
      split_by_target_block(values, stride, count, num_targets, kTargetBlockShift, pieces, streaming);
  Buffer<int64_t> block_start(tb.blocks);
  int64_t running = 0;
  for (int64_t b = 0; b < tb.blocks; ++b) {
    block_start[b] = running;
    for (int64_t p = 0; p < tb.pieces; ++p) running += tb.count(b, p);
  }
  offsets = Buffer<int64_t>(num_targets + 1);
  offsets[num_targets] = count;
  parallel_for_dynamic(tb.blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      // The block's own run of offsets: counts, then each target's next
      // slot, then (shifted back by one target) each target's first slot.
      const int64_t first_target = b << kTargetBlockShift;
      const int64_t targets = std::min(int64_t{1} << kTargetBlockShift, num_targets - first_target);
      int64_t* next = offsets.data() + first_target;
      std::fill(next, next + targets, int64_t{0});
      for (int64_t p = 0; p < tb.pieces; ++p) {
        const BlockHit* h = tb.hits.data() + tb.begin(b, p);
        for (int64_t e = 0, n = tb.count(b, p); e < n; ++e) ++next[h[e].local];
      }
      int64_t slot = block_start[b];
      for (int64_t t = 0; t < targets; ++t) {
        const int64_t c = next[t];
        next[t] = slot;
        slot += c;
      }
      for (int64_t p = 0; p < tb.pieces; ++p) {
        const BlockHit* h = tb.hits.data() + tb.begin(b, p);
        for (int64_t e = 0, n = tb.count(b, p); e < n; ++e) place(int64_t{h[e].item}, next[h[e].local]++);
      }
      for (int64_t t = targets - 1; t > 0; --t) next[t] = next[t - 1];
      next[0] = block_start[b];
    }
  });
}

}  // namespace scatterx::detail

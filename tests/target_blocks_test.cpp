// The two-level counting sort (ops/detail/target_blocks.h) against the
// one-level one and against a direct construction: the same offsets and the
// same slot for every position (targets in order, each target's positions
// ascending), whatever the number of pieces the index is cut into and
// whether its hits are written with streaming stores or not, for int32
// and int64 indices; with a hot target, empty blocks, a last block only
// partly filled, and an index sparser than its targets.
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "ops/detail/block_fold.h"
#include "ops/detail/segments.h"
#include "ops/detail/target_blocks.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

namespace detail = scatterx::detail;

struct Sorted {
  std::vector<int64_t> offsets;  // [num_targets + 1]
  std::vector<int64_t> slot;     // slot of each position
};

// Position p's slot: the positions before it in target order.
template <typename I>
Sorted direct_sort(const std::vector<I>& values, int64_t num_targets) {
  Sorted s{std::vector<int64_t>(static_cast<size_t>(num_targets + 1), 0), std::vector<int64_t>(values.size())};
  for (I v : values) ++s.offsets[static_cast<size_t>(v) + 1];
  for (int64_t t = 0; t < num_targets; ++t) s.offsets[t + 1] += s.offsets[t];
  std::vector<int64_t> next(s.offsets.begin(), s.offsets.end() - 1);
  for (size_t p = 0; p < values.size(); ++p) s.slot[p] = next[static_cast<size_t>(values[p])]++;
  return s;
}

template <typename I>
Sorted in_blocks(const std::vector<I>& values, int64_t num_targets, int64_t pieces, bool streaming) {
  Sorted s{{}, std::vector<int64_t>(values.size(), -1)};
  detail::Buffer<int64_t> offsets;
  detail::counting_sort_in_blocks(values.data(), 1, static_cast<int64_t>(values.size()), num_targets, pieces, streaming,
                                  offsets, [&](int64_t p, int64_t slot) { s.slot[static_cast<size_t>(p)] = slot; });
  s.offsets.assign(offsets.data(), offsets.data() + num_targets + 1);
  return s;
}

template <typename I>
void check_sizes(Rng& rng, int64_t num_targets, int64_t count) {
  SCOPED_TRACE(::testing::Message() << num_targets << " targets, " << count << " positions, " << sizeof(I) * 8
                                    << "-bit index");
  std::vector<I> values(static_cast<size_t>(count));
  const int64_t hot = num_targets / 3;
  for (int64_t p = 0; p < count; ++p) {
    // every 7th position hits one target; the rest skip the middle third of the blocks
    int64_t v = p % 7 == 0 ? hot : rng.uniform(0, num_targets - 1);
    if (p % 7 != 0 && (v >> detail::kTargetBlockShift) % 3 == 1) v = num_targets - 1 - (v % 100);
    values[static_cast<size_t>(p)] = static_cast<I>(v);
  }
  const Sorted want = direct_sort(values, num_targets);
  for (bool streaming : {false, true}) {
    for (int64_t pieces : {1, 2, 3, 5}) {
      const Sorted got = in_blocks(values, num_targets, pieces, streaming);
      EXPECT_EQ(got.offsets, want.offsets) << pieces << " pieces, streaming stores " << streaming;
      EXPECT_EQ(got.slot, want.slot) << pieces << " pieces, streaming stores " << streaming;
    }
  }
  // counting_sort_by_target takes this path from 2^18 targets: the same slots.
  if (detail::sorts_in_blocks(count, num_targets)) {
    Sorted by_target{{}, std::vector<int64_t>(values.size(), -1)};
    detail::Buffer<int64_t> offsets;
    detail::counting_sort_by_target(values.data(), 1, count, num_targets, offsets,
                                    [&](int64_t p, int64_t slot) { by_target.slot[static_cast<size_t>(p)] = slot; });
    EXPECT_EQ(by_target.slot, want.slot);
  }
}

TEST(TargetBlocks, SameSlotsAsADirectCountingSort) {
  Rng rng(case_seed("TargetBlocks.SameSlotsAsADirectCountingSort", 0));
  check_sizes<int64_t>(rng, 5000, 3001);                        // a few blocks, the last one partly filled
  check_sizes<int32_t>(rng, (int64_t{1} << 18) + 333, 200003);  // past the two-level threshold
  check_sizes<int64_t>(rng, (int64_t{1} << 18) + 333, 70001);   // sparser than its targets
  check_sizes<int32_t>(rng, 1 << 12, 1);                        // one position
}

// The block fold's block size (block_fold.h): as many rows as the accumulator
// size holds, rounded down to a power of two, and grown rather than cut into
// more than kMaxTargetBlocks blocks, up to kMaxBlockAccumulatorBytes.
TEST(TargetBlocks, BlockFoldShift) {
  constexpr int64_t kKiB = 1024;
  struct Case {
    int64_t row_bytes, targets, accumulator_bytes;
    int want;
  };
  for (const Case& c : {Case{256, 100000, 128 * kKiB, 9},            // 512 rows of 128 KiB, 196 blocks
                        Case{192, 100000, 128 * kKiB, 9},            // 682 rows fit: 512 of them
                        Case{256, 100000, 256 * kKiB, 10},           // gather_scatter's size
                        Case{64, 1000000, 128 * kKiB, 11},           // 489 blocks of 2048 rows
                        Case{64, 2000000, 128 * kKiB, 12},           // 977 blocks would be too many: 489 of 4096
                        Case{64, int64_t{1} << 30, 128 * kKiB, 14},  // grown no further than 1 MiB
                        Case{4096, 100000, 128 * kKiB, 8},           // 32 rows would make 3125 blocks: 391 of 1 MiB
                        Case{64, 1, 128 * kKiB, 11}}) {              // one target, one block
    SCOPED_TRACE(::testing::Message() << c.row_bytes << "-byte rows into " << c.targets << " targets, "
                                      << c.accumulator_bytes / kKiB << " KiB");
    const int shift = detail::block_fold_shift(c.row_bytes, c.targets, c.accumulator_bytes);
    EXPECT_EQ(shift, c.want);
    const int64_t blocks = ((c.targets - 1) >> shift) + 1;
    EXPECT_TRUE(blocks <= detail::kMaxTargetBlocks || (c.row_bytes << (shift + 1)) > detail::kMaxBlockAccumulatorBytes)
        << blocks << " blocks";
  }
}

// Per-thread scratch (parallel.h): each thread's run of n elements starts a
// whole number of cache lines after the last, with less than a line of
// padding.
template <typename T>
void expect_runs_of_whole_lines() {
  for (int64_t n = 0; n <= 70; ++n) {
    const int64_t stride = detail::per_thread_stride<T>(n);
    EXPECT_EQ(stride * int64_t{sizeof(T)} % 64, 0) << n << " elements of " << sizeof(T) << " bytes";
    EXPECT_GE(stride, n);
    EXPECT_LT((stride - n) * int64_t{sizeof(T)}, 64) << n << " elements of " << sizeof(T) << " bytes";
    detail::PerThreadRuns<T> runs(3, n);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(runs.run(i)) % 64, 0u) << "run " << i << " of " << n << " elements";
      EXPECT_EQ(runs.run(i) - runs.run(0), i * stride) << "run " << i << " of " << n << " elements";
    }
  }
}

TEST(TargetBlocks, PerThreadRunsAreWholeCacheLines) {
  expect_runs_of_whole_lines<uint8_t>();
  expect_runs_of_whole_lines<uint32_t>();
  expect_runs_of_whole_lines<int64_t>();
  expect_runs_of_whole_lines<std::complex<double>>();
}

}  // namespace
}  // namespace sxt

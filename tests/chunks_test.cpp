// How the CUDA kernels cut a long group into chunks (ops/gather_scatter/
// cuda/chunks.cuh): plain functions compiled for the host too, so the
// partition is checked here, without a GPU, against a direct construction.
// Each long group's slots must be covered once, in order, by its chunks;
// short groups get none; no chunk is longer than about 2 sqrt(n); the chunk
// count stays under the bound the kernels size their buffers by.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/gather_scatter/cuda/chunks.cuh"
#include "tests/test_util.h"

namespace sxt {
namespace {

namespace chunks = scatterx::detail::cuda;

TEST(CudaChunks, LengthsAndCounts) {
  EXPECT_EQ(chunks::chunks_of(0), 0);
  EXPECT_EQ(chunks::chunks_of(chunks::kSerialGroup), 0);
  EXPECT_EQ(chunks::chunks_of(chunks::kSerialGroup + 1), 2);
  for (int64_t n : {65, 100, 4096, 4097, 100000, 1000000, 12345678}) {
    const int64_t length = chunks::chunk_length(n);
    EXPECT_GE(length, chunks::kSerialGroup) << n;
    EXPECT_GE(length * length, n) << n;                     // at most about sqrt(n) chunks ...
    EXPECT_LE(length, 2 * std::sqrt(double(n)) + 64) << n;  // ... of at most about 2 sqrt(n) slots
    EXPECT_EQ(chunks::chunks_of(n), (n + length - 1) / length) << n;
    EXPECT_LT(chunks::chunks_of(n), 2 * n / chunks::kSerialGroup + 1) << n;  // the kernels' bound, per group
  }
}

TEST(CudaChunks, GroupOfSkipsEmptyGroups) {
  // Starts of 6 groups (1, 3 and 4 empty) over 9 items.
  const std::vector<int64_t> starts = {0, 2, 2, 5, 5, 5, 9};
  const std::vector<int64_t> want = {0, 0, 2, 2, 2, 5, 5, 5, 5};
  for (int64_t u = 0; u < 9; ++u) EXPECT_EQ(chunks::group_of(starts.data(), 6, u), want[u]) << u;
}

// Random groups, some far above kSerialGroup: the chunks of each long group
// cover its slots in order, each once; a short group has none.
TEST(CudaChunks, ChunksCoverEveryLongGroupOnceInOrder) {
  Rng rng(case_seed("CudaChunks.ChunksCoverEveryLongGroupOnceInOrder", 0));
  for (int rep = 0; rep < 20; ++rep) {
    const int64_t groups = rng.uniform(1, 200);
    std::vector<int64_t> offsets(static_cast<size_t>(groups + 1), 0);
    std::vector<int64_t> chunk_offsets(static_cast<size_t>(groups + 1), 0);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t n = rng.chance(0.1) ? rng.uniform(65, 30000) : rng.uniform(0, 64);
      offsets[g + 1] = offsets[g] + n;
      chunk_offsets[g + 1] = chunk_offsets[g] + chunks::chunks_of(n);
    }
    const int64_t positions = offsets[groups];
    EXPECT_LE(chunk_offsets[groups], 2 * positions / chunks::kSerialGroup);
    std::vector<int64_t> covered(static_cast<size_t>(positions), 0);
    int64_t expected_begin = -1;
    int64_t previous_group = -1;
    for (int64_t c = 0; c < chunk_offsets[groups]; ++c) {
      const chunks::ChunkSlots slots = chunks::chunk_slots(offsets.data(), chunk_offsets.data(), groups, c);
      ASSERT_GE(slots.group, 0);
      ASSERT_LT(slots.group, groups);
      ASSERT_GT(offsets[slots.group + 1] - offsets[slots.group], chunks::kSerialGroup);
      if (slots.group != previous_group) expected_begin = offsets[slots.group];
      EXPECT_EQ(slots.begin, expected_begin) << "chunk " << c;  // in order, no gap
      EXPECT_LT(slots.begin, slots.end);
      EXPECT_LE(slots.end, offsets[slots.group + 1]);
      for (int64_t p = slots.begin; p < slots.end; ++p) ++covered[p];
      expected_begin = slots.end;
      previous_group = slots.group;
    }
    for (int64_t g = 0; g < groups; ++g) {
      const bool long_group = offsets[g + 1] - offsets[g] > chunks::kSerialGroup;
      for (int64_t p = offsets[g]; p < offsets[g + 1]; ++p) EXPECT_EQ(covered[p], long_group ? 1 : 0) << p;
    }
  }
}

}  // namespace
}  // namespace sxt

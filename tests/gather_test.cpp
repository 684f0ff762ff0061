// gather / gather_out and index_select / index_select_out against the serial
// reference, for every dtype x index dtype: random shapes of rank 0 to 4,
// every dim given positive and negative, non-contiguous views of every
// argument (expanded input and index included), empty results, and
// index_select of rows 1 to 300 elements wide; the non-temporal row copy of
// large gathers at every alignment (ctest runs the suite with the AVX2 and
// the baseline ISA).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/runtime/stream_copy.h"
#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

class GatherTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(GatherTest, MatchesReference) {
  const OpParam& p = GetParam();
  run_cases(40, [&](Rng& rng, int case_number) {
    const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
    static const int64_t kMaxSize[] = {1, 24, 9, 5, 4};
    const int64_t max_size = kMaxSize[rank];
    Shape input;
    Shape index;
    int64_t dim = 0;
    if (rank > 0) {
      dim = rng.uniform(0, rank - 1);
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t n = rng.chance(0.04) ? 0 : rng.uniform(1, d == dim ? 2 * max_size : max_size);
        index.push_back(n);
        input.push_back(d == dim ? rng.uniform(1, max_size) : n + (rng.chance(0.5) ? 0 : rng.uniform(1, 2)));
      }
      if (case_number == 1) {  // empty input along dim: only an empty index is valid
        input[dim] = 0;
        index[dim] = 0;
      }
    }
    const int64_t bound = rank == 0 ? 1 : input[dim];
    const int64_t passed_dim = rng.chance(0.35) ? dim - std::max(rank, 1) : dim;
    Buf in = random_buf(input, p.dtype, random_layout(rng, true), rng);
    Buf idx = index_buf(index, p.index_dtype, random_layout(rng, true), rng, 0, bound - 1);
    Buf out = random_buf(index, p.dtype, random_layout(rng, false), rng);
    check_gather(false, passed_dim, in, idx, &out);
  });
}

INSTANTIATE_TEST_SUITE_P(Gather, GatherTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.name_reduce = false;
                           return spec;
                         }())),
                         param_name);

class IndexSelectTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(IndexSelectTest, MatchesReference) {
  const OpParam& p = GetParam();
  run_cases(40, [&](Rng& rng, int case_number) {
    const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
    static const int64_t kMaxSize[] = {1, 24, 9, 5, 4};
    const int64_t max_size = kMaxSize[rank];
    Shape input;
    int64_t dim = 0;
    for (int64_t d = 0; d < rank; ++d) input.push_back(rng.chance(0.04) ? 0 : rng.uniform(1, max_size));
    if (rank > 0) dim = rng.uniform(0, rank - 1);
    if (rank > 0 && input[dim] == 0) input[dim] = 1;
    if (case_number == 1 && rank > 0) input[dim] = 0;
    const int64_t bound = rank == 0 ? 1 : input[dim];
    // The index: 0-d (one value) or 1-d, empty when nothing can be selected.
    Shape index;
    if (rank == 0) {
      if (rng.chance(0.5)) index.push_back(1);
    } else if (bound == 0) {
      index.push_back(0);
    } else if (!rng.chance(0.15)) {
      index.push_back(rng.chance(0.05) ? 0 : rng.uniform(1, 2 * max_size));
    }
    const int64_t passed_dim = rng.chance(0.35) ? dim - std::max(rank, 1) : dim;
    Buf in = random_buf(input, p.dtype, random_layout(rng, true), rng);
    Buf idx = index_buf(index, p.index_dtype, random_layout(rng, true), rng, 0, bound - 1);
    const Tensor shape_of = ref::index_select(in.view, passed_dim, idx.view);
    Buf out = random_buf(shape_of.sizes(), p.dtype, random_layout(rng, false), rng);
    check_gather(true, passed_dim, in, idx, &out);
  });
}

// Rows of 1 to 300 elements, selected along dim 0 (whole rows are copied),
// with contiguous and strided inputs and outputs.
TEST_P(IndexSelectTest, Rows) {
  const OpParam& p = GetParam();
  run_cases(10, [&](Rng& rng, int) {
    for (int64_t width : {1, 3, 16, 64, 300}) {
      const int64_t n = rng.uniform(1, 40);
      const int64_t k = rng.uniform(0, 80);
      const unsigned layout = rng.chance(0.5) ? kContiguous : random_layout(rng, false);
      Buf in = random_buf({n, width}, p.dtype, layout, rng);
      Buf idx = index_buf({k}, p.index_dtype, rng.chance(0.7) ? kContiguous : random_layout(rng, true), rng, 0, n - 1);
      Buf out = random_buf({k, width}, p.dtype, rng.chance(0.5) ? kContiguous : random_layout(rng, false), rng);
      check_gather(true, rng.chance(0.5) ? 0 : -2, in, idx, &out);
      // The same rows through gather with a broadcast index.
      Buf gidx = make_buf({k, width}, p.index_dtype, kExpand, rng,
                          [&](const TensorView& base) { fill_index(base, rng, 0, n - 1); });
      check_gather(false, 0, in, gidx, nullptr);
      if (::testing::Test::HasFailure()) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(IndexSelect, IndexSelectTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.name_reduce = false;
                           return spec;
                         }())),
                         param_name);

TEST(GatherKnownAnswers, TorchDocExamples) {
  // torch.gather(tensor([[1, 2], [3, 4]]), 1, tensor([[0, 0], [1, 0]])) == [[1, 1], [4, 3]]
  Tensor t = make_tensor<int64_t>({2, 2}, {1, 2, 3, 4});
  Tensor index = make_tensor<int64_t>({2, 2}, {0, 0, 1, 0});
  EXPECT_TRUE(same_values(scatterx::gather(t, 1, index), make_tensor<int64_t>({2, 2}, {1, 1, 4, 3})));
  // index_select(x (3x4), 0, [0, 2]) takes rows 0 and 2; along dim 1 columns.
  Tensor x = make_tensor<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor i = make_tensor<int32_t>({2}, {0, 2});
  EXPECT_TRUE(same_values(scatterx::index_select(x, 0, i), make_tensor<float>({2, 4}, {0, 1, 2, 3, 8, 9, 10, 11})));
  EXPECT_TRUE(same_values(scatterx::index_select(x, -1, i), make_tensor<float>({3, 2}, {0, 2, 4, 6, 8, 10})));
  // A 0-d index keeps the dimension with size 1; a 0-d input gives a 0-d result.
  Tensor i0 = make_tensor<int64_t>({}, {1});
  EXPECT_TRUE(same_values(scatterx::index_select(x, 0, i0), make_tensor<float>({1, 4}, {4, 5, 6, 7})));
  Tensor s = make_tensor<double>({}, {2.5});
  EXPECT_TRUE(same_values(scatterx::index_select(s, 0, make_tensor<int64_t>({1}, {0})), s));
  EXPECT_TRUE(same_values(scatterx::gather(s, -1, make_tensor<int32_t>({}, {0})), s));
}

// A 0-d input acts as 1-d of size 1, so a 1-d index may repeat its value.
TEST(GatherKnownAnswers, ZeroDimInputWithVectorIndex) {
  Tensor s = make_tensor<int16_t>({}, {-5});
  EXPECT_TRUE(same_values(scatterx::gather(s, 0, make_tensor<int64_t>({3}, {0, 0, 0})),
                          make_tensor<int16_t>({3}, {-5, -5, -5})));
  Tensor self = make_tensor<int16_t>({}, {1});
  scatterx::scatter_add_(self, 0, make_tensor<int32_t>({2}, {0, 0}), make_tensor<int16_t>({2}, {10, 100}));
  EXPECT_TRUE(same_values(self, make_tensor<int16_t>({}, {111})));
}

TEST(GatherKnownAnswers, EmptyResults) {
  Tensor x = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = scatterx::gather(x, 1, Tensor::empty({2, 0}, DType::Int64));
  EXPECT_EQ(r.sizes(), Shape({2, 0}));
  Tensor r2 = scatterx::index_select(x, 0, Tensor::empty({0}, DType::Int32));
  EXPECT_EQ(r2.sizes(), Shape({0, 3}));
  Tensor e = Tensor::empty({0, 3}, DType::Float32);
  Tensor r3 = scatterx::index_select(e, 1, make_tensor<int64_t>({2}, {2, 0}));
  EXPECT_EQ(r3.sizes(), Shape({0, 2}));
}

// copy_streaming copies exactly [dst, dst + bytes): the stores' alignment
// head, the wide loop and the ragged tail, for destinations at every offset
// within a 32-byte line and sizes around each width.
TEST(StreamCopy, CopiesExactlyTheBytesAtEveryAlignment) {
  constexpr int64_t kMaxBytes = 4096 + 7;
  std::vector<uint8_t> src(kMaxBytes + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<uint8_t> dst(kMaxBytes + 128);
  for (int64_t bytes : {0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 1000, 4096, 4103}) {
    for (int64_t dst_offset = 0; dst_offset < 34; ++dst_offset) {
      for (int64_t src_offset : {0, 3}) {
        std::fill(dst.begin(), dst.end(), uint8_t{0xA5});
        // dst.data() is at least 16-byte aligned: offsets 0-33 cover every
        // position within a 32-byte line.
        uint8_t* to = dst.data() + 32 - reinterpret_cast<uintptr_t>(dst.data()) % 32 + dst_offset;
        scatterx::detail::copy_streaming(to, src.data() + src_offset, bytes);
        scatterx::detail::streaming_store_fence();
        for (size_t i = 0; i < dst.size(); ++i) {
          const int64_t at = dst.data() + i - to;
          const uint8_t expected = at >= 0 && at < bytes ? src[src_offset + at] : uint8_t{0xA5};
          ASSERT_EQ(dst[i], expected) << bytes << " bytes to offset " << dst_offset << " from offset " << src_offset
                                      << ": byte " << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sxt

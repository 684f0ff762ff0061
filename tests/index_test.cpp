// index_add_ / index_add (alpha 1 and another alpha), index_add_weighted_ /
// index_add_weighted and index_reduce_ / index_reduce (prod, mean, amax,
// amin; include_self both ways) against the serial reference, for every dtype x index dtype: random shapes of rank 0 to
// 4, every dim given positive and negative, heavy duplicates, empty index or
// source, non-contiguous views of every argument.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

class IndexOpSuite : public ::testing::TestWithParam<OpParam> {
 protected:
  void run(int cases, bool weighted = false) {
    const OpParam& p = GetParam();
    const bool add = p.reduce == Reduce::Sum;
    const ValueOptions values = value_options_for(p.reduce);
    run_cases(cases, [&](Rng& rng, int case_number) {
      const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
      static const int64_t kMaxSize[] = {1, 24, 9, 5, 4};
      const int64_t max_size = kMaxSize[rank];
      const bool heavy = rng.chance(0.3);
      Shape self_shape;
      Shape source_shape;
      Shape index_shape;
      int64_t dim = 0;
      if (rank == 0) {
        if (rng.chance(0.5)) index_shape.push_back(1);
      } else {
        dim = rng.uniform(0, rank - 1);
        for (int64_t d = 0; d < rank; ++d) self_shape.push_back(rng.chance(0.04) ? 0 : rng.uniform(1, max_size));
        self_shape[dim] = heavy ? rng.uniform(1, 2) : rng.uniform(1, max_size);
        int64_t length = heavy ? rng.uniform(max_size, 3 * max_size) : rng.uniform(0, 2 * max_size);
        if (case_number == 1) length = 0;
        if (case_number == 2) self_shape[dim] = length = 0;
        source_shape = self_shape;
        source_shape[dim] = length;
        if (length == 1 && rng.chance(0.5)) {
          // a 0-d index
        } else {
          index_shape.push_back(length);
        }
      }
      const int64_t bound = rank == 0 ? 1 : self_shape[dim];
      const int64_t hi = heavy ? std::min<int64_t>(bound, 2) - 1 : bound - 1;
      const int64_t passed_dim = rng.chance(0.35) ? dim - std::max(rank, 1) : dim;
      Buf self = random_buf(self_shape, p.dtype, random_layout(rng, false), rng, values);
      Buf index = index_buf(index_shape, p.index_dtype, random_layout(rng, true), rng, 0, hi);
      Buf source = random_buf(source_shape, p.dtype, random_layout(rng, true), rng, values);
      if (weighted) {
        Buf weights = random_buf(index_shape, p.dtype, random_layout(rng, false), rng, values);
        check_index_add_weighted(passed_dim, self, index, source, weights);
      } else if (add) {
        // (bool tensors get an explicit alpha=true: see IndexKnownAnswers.BoolWithDefaultAlpha)
        const bool default_alpha = !p.variant && p.dtype != DType::Bool && rng.chance(0.5);
        const Scalar alpha = p.variant ? other_alpha(p.dtype, rng) : one_alpha(p.dtype);
        check_index_op(Reduce::Sum, true, alpha, default_alpha, passed_dim, self, index, source);
      } else {
        check_index_op(p.reduce, p.include_self, Scalar(), false, passed_dim, self, index, source);
      }
    });
  }
};

using IndexAddTest = IndexOpSuite;
TEST_P(IndexAddTest, MatchesReference) { run(40); }
INSTANTIATE_TEST_SUITE_P(IndexAdd, IndexAddTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Sum};
                           spec.name_reduce = false;
                           spec.variant_names[0] = "AlphaOne";
                           spec.variant_names[1] = "AlphaOther";
                           return spec;
                         }())),
                         param_name);

// One weight per index entry, any layout of it.
using IndexAddWeightedTest = IndexOpSuite;
TEST_P(IndexAddWeightedTest, MatchesReference) { run(40, true); }
INSTANTIATE_TEST_SUITE_P(IndexAddWeighted, IndexAddWeightedTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Sum};
                           spec.name_reduce = false;
                           return spec;
                         }())),
                         param_name);

// MoE combine: top-2 rows of 300 float32 weighted back into 100 tokens.
TEST(IndexAddWeighted, MoeCombineEqualsTheWeightedSum) {
  Rng rng(21);
  const int64_t tokens = 100;
  const int64_t hidden = 300;
  Buf out = random_buf({tokens, hidden}, DType::Float32, kContiguous, rng);
  Buf ids = index_buf({2 * tokens}, DType::Int64, kContiguous, rng, 0, tokens - 1);
  Buf rows = random_buf({2 * tokens, hidden}, DType::Float32, kContiguous, rng);
  Buf probs = random_buf({2 * tokens}, DType::Float32, kContiguous, rng);
  check_index_add_weighted(0, out, ids, rows, probs);
}

// Weights that do not fit the index or self raise, naming the argument.
TEST(IndexAddWeighted, BadWeightsRaise) {
  const Tensor self = Tensor::zeros({4, 3}, DType::Float32);
  const Tensor index = make_tensor<int64_t>({2}, {0, 3});
  const Tensor source = Tensor::zeros({2, 3}, DType::Float32);
  expect_error<scatterx::ArgumentError>(
      [&] { scatterx::index_add_weighted_(self, 0, index, source, Tensor::zeros({3}, DType::Float32)); },
      {"index_add_weighted_", "weights", "one weight per index entry (2)", "[3]"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::index_add_weighted_(self, 0, index, source, Tensor::zeros({2, 1}, DType::Float32));
      },
      {"index_add_weighted_", "weights", "[2, 1]"});
  expect_error<scatterx::DTypeError>(
      [&] { scatterx::index_add_weighted(self, 0, index, source, Tensor::zeros({2}, DType::Float64)); },
      {"index_add_weighted", "weights", "float64", "float32"});
  const Tensor bad_index = make_tensor<int64_t>({2}, {0, 4});
  const Tensor before = Tensor::clone(self);
  expect_error<scatterx::IndexError>(
      [&] { scatterx::index_add_weighted_(self, 0, bad_index, source, Tensor::zeros({2}, DType::Float32)); },
      {"index_add_weighted_", "index 4 is out of bounds"});
  EXPECT_TRUE(same_values(self, before));
}

using IndexReduceTest = IndexOpSuite;
TEST_P(IndexReduceTest, MatchesReference) { run(40); }
INSTANTIATE_TEST_SUITE_P(IndexReduce, IndexReduceTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};
                           spec.vary_include_self = true;
                           return spec;
                         }())),
                         param_name);

TEST(IndexKnownAnswers, TorchDocExamples) {
  // x = ones(5, 3); x.index_add_(0, tensor([0, 4, 2]), t (1..9 as 3x3), alpha=2)
  Tensor x = make_tensor<float>({5, 3}, std::vector<float>(15, 1.0f));
  Tensor t = make_tensor<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor index = make_tensor<int64_t>({3}, {0, 4, 2});
  scatterx::index_add_(x, 0, index, t, Scalar(int64_t{2}));
  EXPECT_TRUE(same_values(x, make_tensor<float>({5, 3}, {3, 5, 7, 1, 1, 1, 15, 17, 19, 1, 1, 1, 9, 11, 13})));

  // index_reduce_(0, [0, 4, 2, 0], t (1..12 as 4x3), 'prod') on x = full((5, 3), 2)
  Tensor y = make_tensor<float>({5, 3}, std::vector<float>(15, 2.0f));
  Tensor t2 = make_tensor<float>({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor index2 = make_tensor<int32_t>({4}, {0, 4, 2, 0});
  Tensor prod = scatterx::index_reduce(y, 0, index2, t2, Reduce::Prod);
  EXPECT_TRUE(same_values(prod, make_tensor<float>({5, 3}, {20, 44, 72, 2, 2, 2, 14, 16, 18, 2, 2, 2, 8, 10, 12})));
  Tensor prod2 = scatterx::index_reduce(y, 0, index2, t2, Reduce::Prod, false);
  EXPECT_TRUE(same_values(prod2, make_tensor<float>({5, 3}, {10, 22, 36, 2, 2, 2, 7, 8, 9, 2, 2, 2, 4, 5, 6})));
  Tensor mean = scatterx::index_reduce(y, 0, index2, t2, Reduce::Mean, true);
  // row 0: (2 + 1 + 10) / 3, (2 + 2 + 11) / 3, (2 + 3 + 12) / 3
  EXPECT_TRUE(same_values(
      mean, make_tensor<float>({5, 3}, {13.0f / 3, 5, 17.0f / 3, 2, 2, 2, 4.5f, 5, 5.5f, 2, 2, 2, 3, 3.5f, 4})));
}

TEST(IndexKnownAnswers, IntegerAlphaWrapsAndBoolAlpha) {
  Tensor x = make_tensor<int8_t>({2}, {0, 1});
  Tensor index = make_tensor<int64_t>({3}, {0, 0, 1});
  Tensor src = make_tensor<int8_t>({3}, {100, 1, 2});
  // 0 + 100 * 3 + 1 * 3 = 303 = 0x12f -> 47 (int8); 1 + 6 = 7.
  EXPECT_TRUE(
      same_values(scatterx::index_add(x, 0, index, src, Scalar(int64_t{3})), make_tensor<int8_t>({2}, {47, 7})));
  Tensor b = make_tensor<bool>({2}, {false, true});
  Tensor bsrc = make_tensor<bool>({3}, {true, false, false});
  EXPECT_TRUE(same_values(scatterx::index_add(b, 0, index, bsrc, Scalar(true)), make_tensor<bool>({2}, {true, true})));
  EXPECT_TRUE(same_values(scatterx::index_add(b, 0, index, bsrc, Scalar(false)), b));
}

// torch: bool_tensor.index_add_(0, index, source) works (alpha defaults to 1,
// i.e. true). The default argument must not trip the "bool alpha for a bool
// tensor" check.
TEST(IndexKnownAnswers, BoolWithDefaultAlpha) {
  Tensor b = make_tensor<bool>({2}, {false, false});
  Tensor index = make_tensor<int64_t>({2}, {1, 1});
  Tensor bsrc = make_tensor<bool>({2}, {false, true});
  EXPECT_NO_THROW({
    Tensor r = scatterx::index_add(b, 0, index, bsrc);
    EXPECT_TRUE(same_values(r, make_tensor<bool>({2}, {false, true})));
  });
  EXPECT_NO_THROW(scatterx::index_add_(b, 0, index, bsrc));
  EXPECT_TRUE(same_values(b, make_tensor<bool>({2}, {false, true})));
}

}  // namespace
}  // namespace sxt

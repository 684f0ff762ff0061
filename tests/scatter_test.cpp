// scatter_ / scatter (src and value forms), scatter_add_ / scatter_add and
// scatter_reduce_ / scatter_reduce against the serial reference, for every
// dtype x reduce x index dtype: random shapes of rank 0 to 4, every dim given
// positive and negative, index smaller than src and self, heavy duplicates,
// empty tensors and non-contiguous views of every argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

struct ScatterShapes {
  Shape self;
  Shape index;
  Shape src;
  int64_t dim = 0;  // as passed to the op (maybe negative)
  int64_t bound = 0;
};

// index.size(d) <= src.size(d) for every d and <= self.size(d) for d != dim;
// with heavy duplicates, self.size(dim) is 1 or 2 and index.size(dim) large.
ScatterShapes random_scatter_shapes(Rng& rng, int rank, bool heavy) {
  ScatterShapes s;
  if (rank == 0) {
    s.dim = rng.chance(0.5) ? 0 : -1;
    s.bound = 1;
    return s;
  }
  static const int64_t kMaxSize[] = {0, 24, 9, 5, 4};
  const int64_t max_size = kMaxSize[rank];
  const int64_t dim = rng.uniform(0, rank - 1);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = rng.chance(0.04) ? 0 : rng.uniform(1, max_size);
    if (d == dim && heavy) n = rng.uniform(max_size, 3 * max_size);
    s.index.push_back(n);
    s.src.push_back(n + (rng.chance(0.5) ? 0 : rng.uniform(1, 2)));
    if (d == dim) {
      s.self.push_back(heavy ? rng.uniform(1, 2) : rng.uniform(1, max_size));
    } else {
      s.self.push_back(n + (rng.chance(0.5) ? 0 : rng.uniform(1, 2)));
    }
  }
  if (rng.chance(0.03)) {  // self empty along dim: only an empty index is valid
    s.self[dim] = 0;
    s.index[dim] = 0;
  }
  s.bound = s.self[dim];
  s.dim = rng.chance(0.35) ? dim - rank : dim;
  return s;
}

class ScatterSuite : public ::testing::TestWithParam<OpParam> {
 protected:
  void run(ScatterForm form, int cases) {
    const OpParam& p = GetParam();
    const ValueOptions values = value_options_for(p.reduce);
    run_cases(cases, [&](Rng& rng, int case_number) {
      const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
      const bool heavy = rng.chance(0.3);
      ScatterShapes s = random_scatter_shapes(rng, rank, heavy);
      if (case_number == 1 && rank > 0) s.index[rng.uniform(0, rank - 1)] = 0;  // an empty index: a no-op
      Buf self = random_buf(s.self, p.dtype, random_layout(rng, false), rng, values);
      const int64_t hi = heavy ? std::min<int64_t>(s.bound, 2) - 1 : s.bound - 1;
      Buf index = index_buf(s.index, p.index_dtype, random_layout(rng, true), rng, 0, hi);
      Buf src = random_buf(s.src, p.dtype, random_layout(rng, true), rng, values);
      const Scalar value = random_scalar(p.dtype, rng);
      check_scatter(form, p.reduce, p.include_self, s.dim, self, index, &src, value);
    });
  }
};

using ScatterTest = ScatterSuite;
TEST_P(ScatterTest, MatchesReference) { run(GetParam().variant ? ScatterForm::Value : ScatterForm::Src, 40); }
INSTANTIATE_TEST_SUITE_P(Scatter, ScatterTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::None, Reduce::Sum, Reduce::Prod};
                           spec.variant_names[0] = "Src";
                           spec.variant_names[1] = "Value";
                           return spec;
                         }())),
                         param_name);

using ScatterAddTest = ScatterSuite;
TEST_P(ScatterAddTest, MatchesReference) { run(ScatterForm::Add, 40); }
INSTANTIATE_TEST_SUITE_P(ScatterAdd, ScatterAddTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Sum};
                           spec.name_reduce = false;
                           return spec;
                         }())),
                         param_name);

using ScatterReduceTest = ScatterSuite;
TEST_P(ScatterReduceTest, MatchesReference) { run(ScatterForm::Reduce, 40); }
INSTANTIATE_TEST_SUITE_P(ScatterReduce, ScatterReduceTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};
                           spec.vary_include_self = true;
                           return spec;
                         }())),
                         param_name);

// ---------------------------------------------------------------- hand-written cases

// Known answers worked out by hand (not by the library), in the doc's example form.
TEST(ScatterKnownAnswers, TorchDocExamples) {
  // torch.zeros(3, 5).scatter_(0, tensor([[0, 1, 2, 0]]), arange(1, 11).view(2, 5))
  Tensor src = make_tensor<float>({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor index = make_tensor<int64_t>({1, 4}, {0, 1, 2, 0});
  Tensor self = Tensor::zeros({3, 5}, DType::Float32);
  scatterx::scatter_(self, 0, index, src);
  Tensor want = make_tensor<float>({3, 5}, {1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0});
  EXPECT_TRUE(same_values(self, want));

  // torch.full((2, 4), 2.).scatter_(1, tensor([[2], [3]]), 1.23, reduce='multiply')
  Tensor self2 = make_tensor<double>({2, 4}, {2, 2, 2, 2, 2, 2, 2, 2});
  Tensor index2 = make_tensor<int32_t>({2, 1}, {2, 3});
  scatterx::scatter_(self2, 1, index2, Scalar(1.23), Reduce::Prod);
  Tensor want2 = make_tensor<double>({2, 4}, {2, 2, 2 * 1.23, 2, 2, 2, 2, 2 * 1.23});
  EXPECT_TRUE(same_values(self2, want2));

  // scatter_reduce: src [1..6], index [0,1,0,1,2,1], input [1,2,3,4]
  Tensor src3 = make_tensor<float>({6}, {1, 2, 3, 4, 5, 6});
  Tensor index3 = make_tensor<int64_t>({6}, {0, 1, 0, 1, 2, 1});
  Tensor input3 = make_tensor<float>({4}, {1, 2, 3, 4});
  EXPECT_TRUE(same_values(scatterx::scatter_reduce(input3, 0, index3, src3, Reduce::Sum),
                          make_tensor<float>({4}, {5, 14, 8, 4})));
  EXPECT_TRUE(same_values(scatterx::scatter_reduce(input3, 0, index3, src3, Reduce::Amax, false),
                          make_tensor<float>({4}, {3, 6, 5, 4})));
  EXPECT_TRUE(same_values(scatterx::scatter_reduce(input3, 0, index3, src3, Reduce::Mean, true),
                          make_tensor<float>({4}, {5.0f / 3.0f, 3.5f, 4, 4})));
  EXPECT_TRUE(same_values(scatterx::scatter_reduce(input3, 0, index3, src3, Reduce::Prod, false),
                          make_tensor<float>({4}, {3, 48, 5, 4})));
}

TEST(ScatterKnownAnswers, IntegerMeanFloorsAndSumsWrap) {
  // int8: 100 + 100 wraps to -56; (-56 + (-1)) / 2 floors to -29 (not -28).
  Tensor self = make_tensor<int8_t>({2}, {100, -1});
  Tensor index = make_tensor<int64_t>({3}, {0, 1, 1});
  Tensor src = make_tensor<int8_t>({3}, {100, -56, 0});
  Tensor sum = scatterx::scatter_reduce(self, 0, index, src, Reduce::Sum, true);
  EXPECT_TRUE(same_values(sum, make_tensor<int8_t>({2}, {-56, -57})));
  // mean accumulates in int8 too: {100, 100} sums to -56, / 2 = -28; {-1, -56, 0} = -57 / 3 = -19.
  EXPECT_TRUE(same_values(scatterx::scatter_reduce(self, 0, index, src, Reduce::Mean, true),
                          make_tensor<int8_t>({2}, {-28, -19})));
  Tensor src2 = make_tensor<int8_t>({3}, {100, -7, 0});
  // {-1, -7, 0}: -8 / 3 floors to -3 (truncation would give -2).
  EXPECT_TRUE(same_values(scatterx::scatter_reduce(self, 0, index, src2, Reduce::Mean, true),
                          make_tensor<int8_t>({2}, {-28, -3})));
  // uint8 product wraps: 16 * 16 * 3 = 768 = 0x300 -> 0.
  Tensor u = make_tensor<uint8_t>({1}, {3});
  Tensor ui = make_tensor<int32_t>({2}, {0, 0});
  Tensor us = make_tensor<uint8_t>({2}, {16, 16});
  EXPECT_TRUE(same_values(scatterx::scatter_reduce(u, 0, ui, us, Reduce::Prod, true), make_tensor<uint8_t>({1}, {0})));
}

TEST(ScatterKnownAnswers, AmaxAminPropagateNaNAndKeepTies) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor self = make_tensor<float>({4}, {0.0f, 1.0f, nan, 5.0f});
  Tensor index = make_tensor<int64_t>({5}, {0, 1, 1, 2, 3});
  Tensor src = make_tensor<float>({5}, {-0.0f, nan, 7.0f, 9.0f, 5.0f});
  Tensor amax = scatterx::scatter_reduce(self, 0, index, src, Reduce::Amax, true);
  // +0 vs -0 tie keeps the accumulator (+0); a NaN wins over the later 7; NaN self stays.
  Tensor want = make_tensor<float>({4}, {0.0f, nan, nan, 5.0f});
  EXPECT_TRUE(same_values(amax, want));
  Tensor amin = scatterx::scatter_reduce(self, 0, index, src, Reduce::Amin, false);
  Tensor want_min = make_tensor<float>({4}, {-0.0f, nan, 9.0f, 5.0f});
  EXPECT_TRUE(same_values(amin, want_min));
}

TEST(ScatterKnownAnswers, HalfAccumulatesInFloatAndRoundsOnce) {
  // 2048 + 1 + 1 in half: rounding after each step gives 2048 (ties to even),
  // accumulating in float gives 2050, which half holds exactly.
  Tensor self = make_tensor<Half>({1}, {Half(2048.0f)});
  Tensor index = make_tensor<int64_t>({2}, {0, 0});
  Tensor src = make_tensor<Half>({2}, {Half(1.0f), Half(1.0f)});
  Tensor sum = scatterx::scatter_add(self, 0, index, src);
  EXPECT_EQ(static_cast<float>(static_cast<const Half*>(sum.data())[0]), 2050.0f);
  Tensor bself = make_tensor<BFloat16>({1}, {BFloat16(256.0f)});
  Tensor bsrc = make_tensor<BFloat16>({2}, {BFloat16(1.0f), BFloat16(1.0f)});
  Tensor bsum = scatterx::scatter_add(bself, 0, index, bsrc);
  EXPECT_EQ(static_cast<float>(static_cast<const BFloat16*>(bsum.data())[0]), 258.0f);
}

TEST(ScatterKnownAnswers, NoneLastWriteWinsAndUnhitPositionsStay) {
  Tensor self = make_tensor<int32_t>({3}, {7, 8, 9});
  Tensor index = make_tensor<int64_t>({4}, {2, 0, 2, 2});
  Tensor src = make_tensor<int32_t>({4}, {1, 2, 3, 4});
  scatterx::scatter_(self, 0, index, src);
  EXPECT_TRUE(same_values(self, make_tensor<int32_t>({3}, {2, 8, 4})));
  // include_self = false never touches positions that no index hits.
  Tensor self2 = make_tensor<int32_t>({3}, {7, 8, 9});
  scatterx::scatter_reduce_(self2, 0, make_tensor<int64_t>({1}, {1}), make_tensor<int32_t>({1}, {5}), Reduce::Prod,
                            false);
  EXPECT_TRUE(same_values(self2, make_tensor<int32_t>({3}, {7, 5, 9})));
}

TEST(ScatterKnownAnswers, ZeroDimTensors) {
  Tensor self = make_tensor<double>({}, {2.0});
  Tensor index = make_tensor<int64_t>({}, {0});
  Tensor src = make_tensor<double>({}, {5.0});
  Tensor r = scatterx::scatter_reduce(self, 0, index, src, Reduce::Sum);
  EXPECT_EQ(r.dim(), 0);
  EXPECT_TRUE(same_values(r, make_tensor<double>({}, {7.0})));
  scatterx::scatter_(self, -1, index, src);
  EXPECT_TRUE(same_values(self, make_tensor<double>({}, {5.0})));
}

TEST(ScatterKnownAnswers, EmptyIndexIsANoOp) {
  Tensor self = make_tensor<float>({2, 2}, {1, 2, 3, 4});
  Tensor index = Tensor::empty({0, 2}, DType::Int64);
  Tensor src = Tensor::empty({0, 2}, DType::Float32);
  Tensor r = scatterx::scatter_reduce(self, 0, index, src, Reduce::Mean, false);
  EXPECT_TRUE(same_values(r, self));
  EXPECT_NE(r.data(), self.data());
  scatterx::scatter_add_(self, 1, index, src);
  EXPECT_TRUE(same_values(self, make_tensor<float>({2, 2}, {1, 2, 3, 4})));
  Tensor empty_self = Tensor::empty({0, 3}, DType::Float32);
  Tensor r2 = scatterx::scatter(empty_self, 0, index, Scalar(1.0));
  EXPECT_EQ(r2.sizes(), Shape({0, 3}));
}

// Views that share a buffer but no element (even and odd columns) do not
// overlap: in-place ops and _out forms must accept them.
TEST(ScatterKnownAnswers, InterleavedDisjointViewsAreNotOverlapping) {
  Rng rng(case_seed(current_test_name(), 0));
  Buf buf = random_buf({4, 8}, DType::Float32, kContiguous, rng);
  const TensorView even = buf.view.slice(1, 0, 8, 2);
  const TensorView odd = buf.view.slice(1, 1, 8, 2);
  Buf index = index_buf({4, 4}, DType::Int64, kContiguous, rng, 0, 3);
  const Tensor expected = ref::scatter_reduce(even, 0, index.view, odd, Reduce::Sum, true);
  const Tensor odd_before = ref::materialize(odd);
  EXPECT_NO_THROW(scatterx::scatter_add_(even, 0, index.view, odd));
  EXPECT_TRUE(same_values(even, expected));
  EXPECT_TRUE(same_values(odd, odd_before));
  const Tensor gathered = ref::gather(odd, 1, index.view);
  EXPECT_NO_THROW(scatterx::gather_out(even, odd, 1, index.view));
  EXPECT_TRUE(same_values(even, gathered));
}

// kMaxDims (16) dimensions: every op against the reference, each argument
// with sizes 1 to 3 and some dims transposed, sliced or reversed.
TEST(ScatterKnownAnswers, MaximumRank) {
  run_cases(6, [&](Rng& rng, int) {
    Shape self_shape;
    Shape index_shape;
    for (int d = 0; d < scatterx::kMaxDims; ++d) {
      const int64_t n = rng.chance(0.25) ? 2 : 1;
      index_shape.push_back(n);
      self_shape.push_back(n + (rng.chance(0.15) ? 1 : 0));
    }
    const int64_t dim = rng.uniform(-scatterx::kMaxDims, scatterx::kMaxDims - 1);
    const int64_t wrapped = dim < 0 ? dim + scatterx::kMaxDims : dim;
    index_shape[wrapped] = 3;
    const DType dtype = rng.pick(all_dtypes());
    const DType index_dtype = rng.chance(0.5) ? DType::Int32 : DType::Int64;
    Buf self = random_buf(self_shape, dtype, random_layout(rng, false), rng);
    Buf index = index_buf(index_shape, index_dtype, random_layout(rng, true), rng, 0, self_shape[wrapped] - 1);
    Buf src = random_buf(index_shape, dtype, random_layout(rng, true), rng);
    SCOPED_TRACE(std::string(scatterx::dtype_name(dtype)) + " dim " + std::to_string(dim));
    check_scatter(ScatterForm::Reduce, Reduce::Sum, rng.chance(0.5), dim, self, index, &src, Scalar());
    check_scatter(ScatterForm::Src, Reduce::None, true, dim, self, index, &src, Scalar());
    check_gather(false, dim, self, index, nullptr);
    Buf index1 = index_buf({3}, index_dtype, kContiguous, rng, 0, self_shape[wrapped] - 1);
    check_gather(true, dim, self, index1, nullptr);
    Shape source_shape = self_shape;
    source_shape[wrapped] = 3;
    Buf source = random_buf(source_shape, dtype, random_layout(rng, true), rng);
    check_index_op(Reduce::Prod, false, Scalar(), false, dim, self, index1, source);
  });
  expect_error<scatterx::ArgumentError>([] { (void)Tensor::empty(Shape(std::vector<int64_t>(17, 1)), DType::Int8); },
                                        {"IntArray: ", "at most 16 dimensions", "got 17"});
}

// The out-of-place forms accept arguments that alias self (in-place ones refuse).
TEST(ScatterKnownAnswers, OutOfPlaceAcceptsAliasing) {
  Rng rng(case_seed("OutOfPlaceAcceptsAliasing", 0));
  for (DType dtype : {DType::Float32, DType::Int64, DType::Float16}) {
    SCOPED_TRACE(scatterx::dtype_name(dtype));
    Buf self = random_buf({6, 5}, dtype, kContiguous, rng);
    Buf index = index_buf({6, 5}, DType::Int64, kContiguous, rng, 0, 5);
    self.take_snapshot();
    // src is self itself, and a transposed view of self.
    const Tensor expected = ref::scatter_reduce(self.view, 0, index.view, self.view, Reduce::Sum, true);
    EXPECT_TRUE(same_values(scatterx::scatter_reduce(self.view, 0, index.view, self.view, Reduce::Sum), expected));
    const TensorView square = self.view.slice(0, 0, 5);
    Buf sq_index = index_buf({5, 5}, DType::Int32, kContiguous, rng, 0, 4);
    const TensorView t = square.transpose(0, 1);
    EXPECT_TRUE(same_values(scatterx::scatter(square, 1, sq_index.view, t),
                            ref::scatter(square, 1, sq_index.view, t, Reduce::None)));
    EXPECT_TRUE(same_values(scatterx::index_add(square, 0, make_tensor<int64_t>({5}, {4, 0, 4, 1, 1}), t, Scalar(2)),
                            ref::index_add(square, 0, make_tensor<int64_t>({5}, {4, 0, 4, 1, 1}), t, Scalar(2))));
    EXPECT_TRUE(self.unchanged());
  }
}

}  // namespace
}  // namespace sxt

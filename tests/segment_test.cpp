// segment_csr / segment_coo (and their arg forms), scatter_arg_reduce,
// gather_csr and gather_coo against the serial reference, for every dtype x
// reduce x index dtype: random shapes of rank 1 to 4, every reduced dim,
// batched and broadcast indptr / index, empty segments, zero-size tensors
// and non-contiguous views of every argument; then hand-checked answers and
// every error path.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

// A tensor of position values (indptr / index) held in storage it owns,
// sometimes read through a step-2 or transposed view.
struct Positions {
  Tensor storage;
  TensorView view;
};

Positions positions_of(const Shape& shape, DType dtype, const std::vector<int64_t>& values, Rng& rng) {
  Positions p;
  Tensor contiguous = Tensor::empty(shape, dtype);
  visit_index_dtype(dtype, [&](auto tag) {
    using I = typename decltype(tag)::type;
    for (size_t i = 0; i < values.size(); ++i) static_cast<I*>(contiguous.data())[i] = static_cast<I>(values[i]);
  });
  if (shape.size() == 0 || rng.chance(0.5)) {
    p.storage = contiguous;
    p.view = contiguous;
    return p;
  }
  Shape wide = shape;  // every other element of a twice-as-long last dim
  wide[wide.size() - 1] *= 2;
  p.storage = Tensor::zeros(wide, dtype);
  p.view = p.storage.slice(-1, 0, wide[wide.size() - 1], 2);
  scatterx::copy_(p.view, contiguous);
  return p;
}

struct SegmentCase {
  Shape src;
  int64_t dim = 0;
  Shape positions;  // src's first dim + 1 dims (leading ones 1 or src's)
};

SegmentCase random_case(Rng& rng, int64_t last_size_plus) {
  SegmentCase c;
  const int rank = static_cast<int>(rng.uniform(1, 4));
  static const int64_t kMaxSize[] = {0, 40, 12, 6, 4};
  for (int d = 0; d < rank; ++d) c.src.push_back(rng.chance(0.04) ? 0 : rng.uniform(1, kMaxSize[rank]));
  c.dim = rng.uniform(0, rank - 1);
  for (int64_t d = 0; d < c.dim; ++d) c.positions.push_back(rng.chance(0.3) ? 1 : c.src[d]);
  c.positions.push_back(c.src[c.dim] + last_size_plus);
  return c;
}

// Sorted values in [lo, hi] for every row of `shape` (rows along the last dim).
std::vector<int64_t> sorted_rows(const Shape& shape, Rng& rng, int64_t lo, int64_t hi) {
  std::vector<int64_t> values(static_cast<size_t>(scatterx::shape_numel(shape)));
  const int64_t len = shape[shape.size() - 1];
  for (size_t r = 0; len > 0 && r < values.size(); r += static_cast<size_t>(len)) {
    for (int64_t i = 0; i < len; ++i) values[r + i] = rng.uniform(lo, hi);
    std::sort(values.begin() + static_cast<int64_t>(r), values.begin() + static_cast<int64_t>(r) + len);
  }
  return values;
}

void expect_same(const scatterx::ValuesAndArgs& got, const ref::ValuesArgs& want, bool with_arg) {
  EXPECT_TRUE(same_values(got.values, want.first));
  if (with_arg) {
    EXPECT_TRUE(same_values(got.args, want.second));
  }
}

bool has_arg(Reduce r) { return r == Reduce::Amax || r == Reduce::Amin; }

class SegmentSuite : public ::testing::TestWithParam<OpParam> {};

using SegmentCsrTest = SegmentSuite;
TEST_P(SegmentCsrTest, MatchesReference) {
  const OpParam& p = GetParam();
  run_cases(40, [&](Rng& rng, int) {
    const int64_t segments = rng.uniform(0, 6);
    SegmentCase c = random_case(rng, 0);
    const int64_t len = c.src[c.dim];
    c.positions[c.positions.size() - 1] = segments + 1;
    Buf src = random_buf(c.src, p.dtype, random_layout(rng, true), rng, value_options_for(p.reduce));
    const Positions indptr = positions_of(c.positions, p.index_dtype, sorted_rows(c.positions, rng, 0, len), rng);
    SCOPED_TRACE("src " + src.str() + ", indptr " + indptr.view.str());
    EXPECT_TRUE(same_values(scatterx::segment_csr(src.view, indptr.view, p.reduce),
                            ref::segment_csr(src.view, indptr.view, p.reduce)));
    if (has_arg(p.reduce)) {
      expect_same(scatterx::segment_csr_arg(src.view, indptr.view, p.reduce),
                  ref::segment_csr_arg(src.view, indptr.view, p.reduce), true);
    }
  });
}

using SegmentCooTest = SegmentSuite;
TEST_P(SegmentCooTest, MatchesReference) {
  const OpParam& p = GetParam();
  run_cases(40, [&](Rng& rng, int) {
    const SegmentCase c = random_case(rng, 0);
    const int64_t top = rng.uniform(0, 8);
    Buf src = random_buf(c.src, p.dtype, random_layout(rng, true), rng, value_options_for(p.reduce));
    const Positions index = positions_of(c.positions, p.index_dtype, sorted_rows(c.positions, rng, 0, top), rng);
    const int64_t dim_size = rng.chance(0.5) ? -1 : top + rng.uniform(1, 3);
    SCOPED_TRACE("src " + src.str() + ", index " + index.view.str() + ", dim_size " + std::to_string(dim_size));
    EXPECT_TRUE(same_values(scatterx::segment_coo(src.view, index.view, p.reduce, dim_size),
                            ref::segment_coo(src.view, index.view, p.reduce, dim_size)));
    if (has_arg(p.reduce)) {
      expect_same(scatterx::segment_coo_arg(src.view, index.view, p.reduce, dim_size),
                  ref::segment_coo_arg(src.view, index.view, p.reduce, dim_size), true);
    }
  });
}

const std::vector<Reduce> kSegmentReduces = {Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};

INSTANTIATE_TEST_SUITE_P(SegmentCsr, SegmentCsrTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = kSegmentReduces;
                           return spec;
                         }())),
                         param_name);
INSTANTIATE_TEST_SUITE_P(SegmentCoo, SegmentCooTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = kSegmentReduces;
                           return spec;
                         }())),
                         param_name);

using ScatterArgReduceTest = SegmentSuite;
TEST_P(ScatterArgReduceTest, MatchesReference) {
  const OpParam& p = GetParam();
  run_cases(40, [&](Rng& rng, int) {
    const SegmentCase c = random_case(rng, 0);
    const int64_t top = rng.uniform(0, 8);
    Buf src = random_buf(c.src, p.dtype, random_layout(rng, true), rng, value_options_for(p.reduce));
    Buf index = index_buf(c.src, p.index_dtype, random_layout(rng, true), rng, 0, top);
    const int64_t dim = rng.chance(0.3) ? c.dim - static_cast<int64_t>(c.src.size()) : c.dim;
    const int64_t dim_size = rng.chance(0.5) ? -1 : top + rng.uniform(1, 3);
    SCOPED_TRACE("src " + src.str() + ", index " + index.str() + ", dim " + std::to_string(dim));
    expect_same(scatterx::scatter_arg_reduce(src.view, dim, index.view, p.reduce, dim_size),
                ref::scatter_arg_reduce(src.view, dim, index.view, p.reduce, dim_size), true);
  });
}
INSTANTIATE_TEST_SUITE_P(ScatterArgReduce, ScatterArgReduceTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Amax, Reduce::Amin};
                           return spec;
                         }())),
                         param_name);

using GatherSegmentsTest = SegmentSuite;
TEST_P(GatherSegmentsTest, CsrMatchesReference) {
  const OpParam& p = GetParam();
  run_cases(30, [&](Rng& rng, int) {
    const SegmentCase c = random_case(rng, 1);  // one more indptr entry than src rows
    const int64_t out_len = rng.uniform(0, 12);
    std::vector<int64_t> values = sorted_rows(c.positions, rng, 0, out_len);
    if (!values.empty()) values.back() = out_len;
    Buf src = random_buf(c.src, p.dtype, random_layout(rng, true), rng);
    const Positions indptr = positions_of(c.positions, p.index_dtype, values, rng);
    SCOPED_TRACE("src " + src.str() + ", indptr " + indptr.view.str());
    EXPECT_TRUE(same_values(scatterx::gather_csr(src.view, indptr.view), ref::gather_csr(src.view, indptr.view)));
  });
}

TEST_P(GatherSegmentsTest, CooMatchesReference) {
  const OpParam& p = GetParam();
  run_cases(30, [&](Rng& rng, int) {
    SegmentCase c = random_case(rng, 0);
    c.positions[c.positions.size() - 1] = rng.uniform(0, 9);
    const int64_t len = c.src[c.dim];
    if (len == 0) c.positions[c.positions.size() - 1] = 0;
    Buf src = random_buf(c.src, p.dtype, random_layout(rng, true), rng);
    Buf index = index_buf(c.positions, p.index_dtype, random_layout(rng, true), rng, 0, std::max<int64_t>(len - 1, 0));
    SCOPED_TRACE("src " + src.str() + ", index " + index.str());
    EXPECT_TRUE(same_values(scatterx::gather_coo(src.view, index.view), ref::gather_coo(src.view, index.view)));
  });
}
INSTANTIATE_TEST_SUITE_P(GatherSegments, GatherSegmentsTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.name_reduce = false;
                           return spec;
                         }())),
                         param_name);

// ---------------------------------------------------------------- hand-checked answers

TEST(SegmentKnownAnswers, CsrSumMaxAndEmptySegments) {
  const Tensor src = make_tensor<float>({6}, {1, 2, 3, 4, 5, 6});
  const Tensor indptr = make_tensor<int64_t>({4}, {0, 2, 5, 6});
  EXPECT_TRUE(same_values(scatterx::segment_csr(src, indptr, Reduce::Sum), make_tensor<float>({3}, {3, 12, 6})));
  EXPECT_TRUE(same_values(scatterx::segment_csr(src, indptr, Reduce::Mean), make_tensor<float>({3}, {1.5, 4, 6})));
  const Tensor gaps = make_tensor<int32_t>({4}, {1, 3, 3, 5});  // skips src[0] and src[5]; segment 1 empty
  auto [values, args] = scatterx::segment_csr_arg(src, gaps, Reduce::Amax);
  EXPECT_TRUE(same_values(values, make_tensor<float>({3}, {3, 0, 5})));
  EXPECT_TRUE(same_values(args, make_tensor<int64_t>({3}, {2, 6, 4})));
  auto mins = scatterx::segment_csr_arg(src, gaps, Reduce::Amin);
  EXPECT_TRUE(same_values(mins.values, make_tensor<float>({3}, {2, 0, 4})));
  EXPECT_TRUE(same_values(mins.args, make_tensor<int64_t>({3}, {1, 6, 3})));
}

TEST(SegmentKnownAnswers, CooRowsAndTies) {
  // src [4, 2]; rows 0, 1 -> segment 0, rows 2, 3 -> segment 2; segment 1 empty.
  const Tensor src = make_tensor<int32_t>({4, 2}, {5, -1, 5, 7, -3, 2, 4, 2});
  const Tensor index = make_tensor<int64_t>({4}, {0, 0, 2, 2});
  EXPECT_TRUE(
      same_values(scatterx::segment_coo(src, index, Reduce::Sum), make_tensor<int32_t>({3, 2}, {10, 6, 0, 0, 1, 4})));
  // integer means floor: (-3 + 4) / 2 = 0, (-1 + 7) / 2 = 3
  EXPECT_TRUE(same_values(scatterx::segment_coo(src, index, Reduce::Mean, 4),
                          make_tensor<int32_t>({4, 2}, {5, 3, 0, 0, 0, 2, 0, 0})));
  auto [values, args] = scatterx::segment_coo_arg(src, index, Reduce::Amax);
  EXPECT_TRUE(same_values(values, make_tensor<int32_t>({3, 2}, {5, 7, 0, 0, 4, 2})));
  EXPECT_TRUE(same_values(args, make_tensor<int64_t>({3, 2}, {0, 1, 4, 4, 3, 2})));  // ties: the first
}

TEST(SegmentKnownAnswers, ScatterArgAndGathers) {
  const Tensor src = make_tensor<double>({5}, {2, 8, -1, 8, 3});
  const Tensor index = make_tensor<int64_t>({5}, {1, 0, 1, 0, 3});
  auto [values, args] = scatterx::scatter_arg_reduce(src, 0, index, Reduce::Amax);
  EXPECT_TRUE(same_values(values, make_tensor<double>({4}, {8, 2, 0, 3})));
  EXPECT_TRUE(same_values(args, make_tensor<int64_t>({4}, {1, 0, 5, 4})));
  const Tensor rows = make_tensor<float>({3, 1}, {1, 2, 3});
  EXPECT_TRUE(same_values(scatterx::gather_csr(rows, make_tensor<int64_t>({4}, {0, 2, 2, 5})),
                          make_tensor<float>({5, 1}, {1, 1, 3, 3, 3})));
  EXPECT_TRUE(same_values(scatterx::gather_coo(rows, make_tensor<int32_t>({4}, {2, 0, 0, 1})),
                          make_tensor<float>({4, 1}, {3, 1, 1, 2})));
}

// ---------------------------------------------------------------- errors

TEST(SegmentErrors, IndptrChecked) {
  const Tensor src = Tensor::zeros({4, 2}, DType::Float32);
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::segment_csr(src, make_tensor<int64_t>({3}, {0, 3, 2}), Reduce::Sum);
      },
      {"segment_csr: ", "indptr", "sorted", "got 2 after 3", "position [2]"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::segment_csr(src, make_tensor<int64_t>({3}, {0, 2, 5}), Reduce::Sum);
      },
      {"segment_csr: ", "indptr values in [0, src.size(0) = 4]", "got 5", "position [2]"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::segment_csr(src, make_tensor<int32_t>({2}, {-1, 2}), Reduce::Sum);
      },
      {"segment_csr: ", "got -1", "position [0]"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::segment_csr(src, make_tensor<float>({2}, {0, 2}), Reduce::Sum);
      },
      {"segment_csr: ", "expected indptr of dtype int32 or int64, got float32"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::segment_csr(src, Tensor::zeros({4, 2, 3}, DType::Int64), Reduce::Sum);
      },
      {"segment_csr: ", "expected indptr with 1 to src.dim() (2) dimensions, got 3"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::segment_csr(src, make_tensor<int64_t>({2}, {0, 2}), Reduce::None);
      },
      {"segment_csr: ", "expected reduce", "got 'none'"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::segment_csr_arg(src, make_tensor<int64_t>({2}, {0, 2}), Reduce::Sum);
      },
      {"segment_csr_arg: ", "expected reduce to be amax or amin", "got 'sum'"});
}

TEST(SegmentErrors, IndexChecked) {
  const Tensor src = Tensor::zeros({4}, DType::Float64);
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::segment_coo(src, make_tensor<int64_t>({4}, {0, 1, 0, 2}), Reduce::Sum);
      },
      {"segment_coo: ", "index to be sorted", "got 0 after 1", "position [2]"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::segment_coo(src, make_tensor<int64_t>({4}, {0, 1, 1, 3}), Reduce::Sum, 3);
      },
      {"segment_coo: ", "index 3 is out of bounds", "size 3"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::segment_coo(src, make_tensor<int64_t>({3}, {0, 1, 1}), Reduce::Sum);
      },
      {"segment_coo: ", "expected index.size(0) to equal src.size(0) (4), got 3"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::scatter_arg_reduce(src, 0, make_tensor<int64_t>({4}, {0, -2, 1, 1}), Reduce::Amax);
      },
      {"scatter_arg_reduce: ", "got -2", "position [1]"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::scatter_arg_reduce(src, 0, make_tensor<int64_t>({3}, {0, 1, 1}), Reduce::Amin);
      },
      {"scatter_arg_reduce: ", "expected index of src's shape [4]", "got [3]"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::segment_coo_arg(Tensor::zeros({2}, DType::Complex64), make_tensor<int64_t>({2}, {0, 0}),
                                  Reduce::Amax);
      },
      {"segment_coo_arg: ", "reduce 'amax' is not supported for complex64"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::gather_coo(src, make_tensor<int64_t>({2}, {0, 4}));
      },
      {"gather_coo: ", "index 4 is out of bounds", "size 4"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::gather_csr(src, make_tensor<int64_t>({3}, {0, 1, 2}));
      },
      {"gather_csr: ", "expected src.size(0) to equal the number of segments", "got 4"});
}

}  // namespace
}  // namespace sxt

// The reducing collectives: all_reduce, reduce_scatter (list) and
// reduce_scatter_tensor, for every (dtype, ReduceOp): exact results (values
// chosen so that any order of reduction is exact), NaN propagation of
// min/max, integer avg flooring, the unsupported pairs (complex min/max,
// bool avg) rejected naming the op, 0-d tensors, sizes not divisible by the
// world size, non-contiguous views and tensors of a few MiB (chunked
// pipelining).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

using Param = std::tuple<DType, ReduceOp>;

class ReduceTest : public DistTest, public ::testing::WithParamInterface<Param> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  ReduceOp op() const { return std::get<1>(GetParam()); }
  V input(int r, int64_t i) const { return reduce_input(op(), dtype(), r, i); }
  V expected(int64_t i) const { return reduce_expected(op(), dtype(), iota_ranks(ws()), i); }
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return sxt::dtype_label(std::get<0>(info.param)) + "_" + op_label(std::get<1>(info.param));
}

// ---------------------------------------------------------------- all_reduce

class AllReduceTest : public ReduceTest {};

TEST_P(AllReduceTest, Sizes) {
  const std::vector<Shape> shapes = {Shape{}, Shape{1}, Shape{2}, Shape{7}, Shape{3, 5}, Shape{13, 1, 3}, Shape{0}};
  for (const Shape& shape : shapes) {
    Tensor t = make(shape, dtype(), [&](int64_t i) { return input(rank(), i); });
    dist::all_reduce(t, op(), comm());
    EXPECT_TRUE(holds(t, [&](int64_t i) { return expected(i); })) << "shape " << shape.str();
  }
}

TEST_P(AllReduceTest, NonContiguous) {
  for (Layout layout : {Layout::Transposed, Layout::Strided, Layout::Flipped}) {
    Buf b = make_buf({9, 7}, dtype(), layout);
    fill(b.view, [&](int64_t i) { return input(rank(), i); });
    b.take_snapshot();
    dist::all_reduce(b.view, op(), comm());
    EXPECT_TRUE(holds(b.view, [&](int64_t i) { return expected(i); })) << layout_label(layout);
    EXPECT_TRUE(b.unchanged_outside_view()) << layout_label(layout);
  }
}

// ---------------------------------------------------------------- reduce_scatter (list)

class ReduceScatterTest : public ReduceTest {};

TEST_P(ReduceScatterTest, List) {
  const int64_t n = 2 * 3;
  std::vector<Tensor> ins;
  std::vector<TensorView> inputs;
  // input j of rank r holds block j of the rank's (conceptual) [ws * n] data
  for (int j = 0; j < ws(); ++j) {
    ins.push_back(make({2, 3}, dtype(), [&](int64_t i) { return input(rank(), j * n + i); }));
  }
  for (const Tensor& t : ins) inputs.push_back(t);
  Tensor output = Tensor::zeros({2, 3}, dtype());
  dist::reduce_scatter(output, inputs, op(), comm());
  EXPECT_TRUE(holds(output, [&](int64_t i) { return expected(rank() * n + i); }));
  for (int j = 0; j < ws(); ++j) {
    EXPECT_TRUE(holds(inputs[j], [&](int64_t i) { return input(rank(), j * n + i); })) << "input " << j << " modified";
  }
}

TEST_P(ReduceScatterTest, ListNonContiguousAnd0d) {
  {
    const int64_t n = 4 * 3;
    std::vector<Buf> bufs;
    std::vector<TensorView> inputs;
    for (int j = 0; j < ws(); ++j) {
      bufs.push_back(make_buf({4, 3}, dtype(), j % 2 == 0 ? Layout::Transposed : Layout::Flipped));
      fill(bufs.back().view, [&](int64_t i) { return input(rank(), j * n + i); });
    }
    for (const Buf& b : bufs) inputs.push_back(b.view);
    Buf out = make_buf({4, 3}, dtype(), Layout::Strided);
    dist::reduce_scatter(out.view, inputs, op(), comm());
    EXPECT_TRUE(holds(out.view, [&](int64_t i) { return expected(rank() * n + i); }));
    EXPECT_TRUE(out.unchanged_outside_view());
  }
  {
    std::vector<Tensor> ins;
    std::vector<TensorView> inputs;
    for (int j = 0; j < ws(); ++j) ins.push_back(make({}, dtype(), [&](int64_t) { return input(rank(), j); }));
    for (const Tensor& t : ins) inputs.push_back(t);
    Tensor output = Tensor::zeros({}, dtype());
    dist::reduce_scatter(output, inputs, op(), comm());
    EXPECT_TRUE(holds(output, [&](int64_t) { return expected(rank()); })) << "0-d";
  }
}

// ---------------------------------------------------------------- reduce_scatter_tensor

class ReduceScatterTensorTest : public ReduceTest {};

TEST_P(ReduceScatterTensorTest, Concatenated) {
  const int64_t n = 3, m = 5;
  Tensor in = make({ws() * n, m}, dtype(), [&](int64_t i) { return input(rank(), i); });
  Tensor out = Tensor::zeros({n, m}, dtype());
  dist::reduce_scatter_tensor(out, in, op(), comm());
  EXPECT_TRUE(holds(out, [&](int64_t i) { return expected(rank() * n * m + i); }));
  EXPECT_TRUE(holds(in, [&](int64_t i) { return input(rank(), i); })) << "input modified";
}

TEST_P(ReduceScatterTensorTest, Stacked) {
  const int64_t n = 2, m = 7;
  Tensor in = make({ws(), n, m}, dtype(), [&](int64_t i) { return input(rank(), i); });
  Tensor out = Tensor::zeros({n, m}, dtype());
  dist::reduce_scatter_tensor(out, in, op(), comm());
  EXPECT_TRUE(holds(out, [&](int64_t i) { return expected(rank() * n * m + i); }));
}

TEST_P(ReduceScatterTensorTest, OneElementPerRankAnd0dOutput) {
  // input [ws], output 0-d (stacked form of 0-d blocks)
  Tensor in = make({ws()}, dtype(), [&](int64_t i) { return input(rank(), i); });
  Tensor out = Tensor::zeros({}, dtype());
  dist::reduce_scatter_tensor(out, in, op(), comm());
  EXPECT_TRUE(holds(out, [&](int64_t) { return expected(rank()); }));
  // input [ws], output [1]
  Tensor out1 = Tensor::zeros({1}, dtype());
  dist::reduce_scatter_tensor(out1, in, op(), comm());
  EXPECT_TRUE(holds(out1, [&](int64_t) { return expected(rank()); }));
}

TEST_P(ReduceScatterTensorTest, NonContiguous) {
  const int64_t n = 5, m = 3;
  for (Layout in_layout : {Layout::Transposed, Layout::Strided, Layout::Flipped}) {
    for (Layout out_layout : {Layout::Transposed, Layout::Strided, Layout::Flipped}) {
      Buf in = make_buf({ws() * n, m}, dtype(), in_layout);
      fill(in.view, [&](int64_t i) { return input(rank(), i); });
      Buf out = make_buf({n, m}, dtype(), out_layout);
      dist::reduce_scatter_tensor(out.view, in.view, op(), comm());
      EXPECT_TRUE(holds(out.view, [&](int64_t i) { return expected(rank() * n * m + i); }))
          << "input " << layout_label(in_layout) << ", output " << layout_label(out_layout);
      EXPECT_TRUE(out.unchanged_outside_view());
    }
  }
}

TEST_P(ReduceScatterTensorTest, Empty) {
  Tensor in = Tensor::empty({0, 3}, dtype());
  Tensor out = Tensor::empty({0, 3}, dtype());
  dist::reduce_scatter_tensor(out, in, op(), comm());
  EXPECT_EQ(out.numel(), 0);
}

// ---------------------------------------------------------------- unsupported pairs

// complex min/max and bool avg: rejected on every rank before anything moves
// (an argument error naming the collective, the op and the dtype); the
// communicator stays usable.
class UnsupportedReduceTest : public ReduceTest {
 protected:
  void TearDown() override {
    Tensor ok = make({}, DType::Int32, [&](int64_t) { return V{1, 0}; });
    dist::all_reduce(ok, ReduceOp::Sum, comm());
    EXPECT_TRUE(holds(ok, [&](int64_t) {
      return V{static_cast<double>(ws()), 0};
    })) << "the communicator is unusable after a rejected call";
    ReduceTest::TearDown();
  }
  ::testing::AssertionResult names_all(const std::string& msg, const char* collective) const {
    return mentions(msg, {collective, dist::reduce_op_name(op()), scatterx::dtype_name(dtype())});
  }
};

TEST_P(UnsupportedReduceTest, AllReduce) {
  Tensor t = make({4}, dtype(), [&](int64_t i) { return V{1.0 + i, 1.0}; });
  const Tensor before = Tensor::clone(t);
  const std::string msg = expect_local_error([&] { dist::all_reduce(t, op(), comm()); });
  EXPECT_TRUE(names_all(msg, "all_reduce"));
  EXPECT_TRUE(sxt::same_values(t, before)) << "a rejected call modified the tensor";
}

TEST_P(UnsupportedReduceTest, ReduceScatter) {
  std::vector<Tensor> ins;
  for (int j = 0; j < ws(); ++j) ins.push_back(Tensor::zeros({3}, dtype()));
  const std::vector<TensorView> inputs(ins.begin(), ins.end());
  Tensor output = Tensor::zeros({3}, dtype());
  const std::string msg = expect_local_error([&] { dist::reduce_scatter(output, inputs, op(), comm()); });
  EXPECT_TRUE(names_all(msg, "reduce_scatter"));
}

TEST_P(UnsupportedReduceTest, ReduceScatterTensor) {
  Tensor in = Tensor::zeros({ws() * 2}, dtype());
  Tensor out = Tensor::zeros({2}, dtype());
  const std::string msg = expect_local_error([&] { dist::reduce_scatter_tensor(out, in, op(), comm()); });
  EXPECT_TRUE(names_all(msg, "reduce_scatter_tensor"));
}

TEST_P(UnsupportedReduceTest, AllReduceAsync) {
  Tensor t = Tensor::zeros({4}, dtype());
  const std::string msg = expect_local_error([&] { dist::all_reduce_async(t, op(), comm()).wait(); });
  EXPECT_TRUE(names_all(msg, "all_reduce"));
}

std::vector<Param> pairs(bool supported) {
  std::vector<Param> v;
  for (DType d : test_dtypes()) {
    for (ReduceOp op : all_reduce_ops()) {
      if (reduce_supported(op, d) == supported) v.emplace_back(d, op);
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, AllReduceTest, ::testing::ValuesIn(pairs(true)), param_name);
INSTANTIATE_TEST_SUITE_P(All, ReduceScatterTest, ::testing::ValuesIn(pairs(true)), param_name);
INSTANTIATE_TEST_SUITE_P(All, ReduceScatterTensorTest, ::testing::ValuesIn(pairs(true)), param_name);
INSTANTIATE_TEST_SUITE_P(All, UnsupportedReduceTest, ::testing::ValuesIn(pairs(false)), param_name);

// ---------------------------------------------------------------- large tensors

// Sizes of a few MiB, not divisible by the world size (nor by any chunk
// size): the pipelined rings split them into chunks, unevenly.
using LargeParam = std::tuple<DType, ReduceOp, int64_t>;
class LargeReduceTest : public DistTest, public ::testing::WithParamInterface<LargeParam> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  ReduceOp op() const { return std::get<1>(GetParam()); }
  int64_t numel() const { return std::get<2>(GetParam()); }
};

std::string large_name(const ::testing::TestParamInfo<LargeParam>& info) {
  return sxt::dtype_label(std::get<0>(info.param)) + "_" + op_label(std::get<1>(info.param)) + "_" +
         std::to_string(std::get<2>(info.param));
}

TEST_P(LargeReduceTest, AllReduce) {
  Tensor t = make({numel()}, dtype(), [&](int64_t i) { return reduce_input(op(), dtype(), rank(), i); });
  dist::all_reduce(t, op(), comm());
  EXPECT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(op(), dtype(), iota_ranks(ws()), i); }));
}

TEST_P(LargeReduceTest, AllReduceStrided) {
  // a strided view of the same size: packed, reduced, unpacked
  Buf b = make_buf({numel()}, dtype(), Layout::Strided);
  fill(b.view, [&](int64_t i) { return reduce_input(op(), dtype(), rank(), i); });
  b.take_snapshot();
  dist::all_reduce(b.view, op(), comm());
  EXPECT_TRUE(holds(b.view, [&](int64_t i) { return reduce_expected(op(), dtype(), iota_ranks(ws()), i); }));
  EXPECT_TRUE(b.unchanged_outside_view());
}

TEST_P(LargeReduceTest, ReduceScatterTensor) {
  const int64_t n = numel() / ws() + 1;
  Tensor in = make({ws() * n}, dtype(), [&](int64_t i) { return reduce_input(op(), dtype(), rank(), i); });
  Tensor out = Tensor::empty({n}, dtype());
  dist::reduce_scatter_tensor(out, in, op(), comm());
  EXPECT_TRUE(holds(out, [&](int64_t i) { return reduce_expected(op(), dtype(), iota_ranks(ws()), rank() * n + i); }));
}

INSTANTIATE_TEST_SUITE_P(Float32, LargeReduceTest,
                         ::testing::Combine(::testing::Values(DType::Float32),
                                            ::testing::Values(ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg),
                                            ::testing::Values(int64_t{1000003})),
                         large_name);
INSTANTIATE_TEST_SUITE_P(Others, LargeReduceTest,
                         ::testing::Combine(::testing::Values(DType::Float64, DType::Float16, DType::BFloat16,
                                                              DType::Int64, DType::UInt8, DType::Complex128,
                                                              DType::Bool),
                                            ::testing::Values(ReduceOp::Sum), ::testing::Values(int64_t{1000003})),
                         large_name);
INSTANTIATE_TEST_SUITE_P(Prod, LargeReduceTest,
                         ::testing::Combine(::testing::Values(DType::Int32, DType::Complex64),
                                            ::testing::Values(ReduceOp::Prod), ::testing::Values(int64_t{786433})),
                         large_name);

class AllReduceMiscTest : public DistTest {};

// Many small sizes around multiples of the world size.
TEST_F(AllReduceMiscTest, OneToFortyElements) {
  const int r = rank();
  const int n_ranks = ws();
  for (int64_t n = 1; n <= 40; ++n) {
    Tensor t = make({n}, DType::Int64, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Int64, r, i); });
    dist::all_reduce(t, ReduceOp::Sum, world());
    ASSERT_TRUE(
        holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Int64, iota_ranks(n_ranks), i); }))
        << n << " elements";
  }
}

// Integer avg floors (as scatter_reduce's mean): with ranks holding -1 and
// 0 (ws 2) the average -0.5 becomes -1; float avg divides exactly.
TEST_F(AllReduceMiscTest, IntegerAvgFloorsAndFloatAvgDivides) {
  const int r = rank();
  const int n = ws();
  Tensor i32 = make({3}, DType::Int32, [&](int64_t i) { return V{r == 0 ? -1.0 - static_cast<double>(i) : 0.0, 0}; });
  dist::all_reduce(i32, ReduceOp::Avg, world());
  // sum = -1 - i, floor((-1 - i) / n)
  EXPECT_TRUE(holds(i32, [&](int64_t i) {
    const int64_t s = -1 - i;
    int64_t q = s / n;
    if (s % n != 0) --q;
    return V{static_cast<double>(q), 0};
  }));
  Tensor f64 = make({3}, DType::Float64, [&](int64_t i) { return V{r == 0 ? -1.0 - static_cast<double>(i) : 0.0, 0}; });
  dist::all_reduce(f64, ReduceOp::Avg, world());
  EXPECT_TRUE(holds(f64, [&](int64_t i) { return V{(-1.0 - static_cast<double>(i)) / n, 0}; }));
}

}  // namespace
}  // namespace sxd

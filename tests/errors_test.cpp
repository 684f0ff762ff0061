// Error paths: every rejected call is asserted by exception type and by its
// message (op, argument, what was expected and what was received), and
// every in-place call that throws must leave self byte-identical (checks run
// before anything is written).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/detail/checks.h"
#include "tests/op_checks.h"

namespace sxt {
namespace {

using scatterx::ArgumentError;
using scatterx::DTypeError;
using scatterx::IndexError;
using scatterx::TensorView;

static_assert(std::is_base_of_v<scatterx::Error, ArgumentError>, "ArgumentError derives from Error");
static_assert(std::is_base_of_v<scatterx::Error, DTypeError>, "DTypeError derives from Error");
static_assert(std::is_base_of_v<scatterx::Error, IndexError>, "IndexError derives from Error");
static_assert(std::is_base_of_v<std::runtime_error, scatterx::Error>, "Error derives from std::runtime_error");

class ErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Rng rng(case_seed(current_test_name(), 0));
    self_ = random_buf({3, 4}, DType::Float32, kContiguous, rng);
    src_ = random_buf({3, 4}, DType::Float32, kContiguous, rng);
    self_.take_snapshot();
  }

  const TensorView& self() const { return self_.view; }
  const TensorView& src() const { return src_.view; }

  // f throws E with exactly `message`, and self is untouched.
  template <typename E, typename F>
  void expect_exact(F&& f, const std::string& message) {
    EXPECT_EQ(error_message<E>(std::forward<F>(f)), message);
    EXPECT_TRUE(self_.unchanged()) << "a call that threw modified self";
  }

  // f throws E whose message contains every piece, and self is untouched.
  template <typename E, typename F>
  void expect_pieces(F&& f, std::initializer_list<std::string> pieces) {
    expect_error<E>(std::forward<F>(f), pieces);
    EXPECT_TRUE(self_.unchanged()) << "a call that threw modified self";
  }

  Buf self_;
  Buf src_;
};

// Tensors from values, index dtype chosen at run time.
Tensor index_tensor(const Shape& shape, const std::vector<int64_t>& values, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::Int32) {
      static_cast<int32_t*>(t.data())[i] = static_cast<int32_t>(values[i]);
    } else {
      static_cast<int64_t*>(t.data())[i] = values[i];
    }
  }
  return t;
}

// One entry per op form: calls it on (self, dim, index, src).
struct OpCall {
  std::string op;
  bool slice_wise;  // index_* ops: 1-d index, source.size(dim) == index.numel()
  std::function<void(const TensorView&, int64_t, const TensorView&, const TensorView&)> call;
};

std::vector<OpCall> all_op_calls() {
  using scatterx::Scalar;
  using V = const TensorView&;
  return {
      {"scatter_", false, [](V s, int64_t d, V i, V x) { scatterx::scatter_(s, d, i, x); }},
      {"scatter_", false, [](V s, int64_t d, V i, V) { scatterx::scatter_(s, d, i, Scalar(1.5), Reduce::Sum); }},
      {"scatter", false, [](V s, int64_t d, V i, V x) { scatterx::scatter(s, d, i, x, Reduce::Prod); }},
      {"scatter", false, [](V s, int64_t d, V i, V) { scatterx::scatter(s, d, i, Scalar(2)); }},
      {"scatter_add_", false, [](V s, int64_t d, V i, V x) { scatterx::scatter_add_(s, d, i, x); }},
      {"scatter_add", false, [](V s, int64_t d, V i, V x) { scatterx::scatter_add(s, d, i, x); }},
      {"scatter_reduce_", false,
       [](V s, int64_t d, V i, V x) { scatterx::scatter_reduce_(s, d, i, x, Reduce::Mean, false); }},
      {"scatter_reduce", false, [](V s, int64_t d, V i, V x) { scatterx::scatter_reduce(s, d, i, x, Reduce::Amax); }},
      {"gather", false, [](V s, int64_t d, V i, V) { scatterx::gather(s, d, i); }},
      {"gather_out", false,
       [](V s, int64_t d, V i, V) {
         Tensor out = Tensor::empty(i.sizes(), s.dtype());
         scatterx::gather_out(out, s, d, i);
       }},
      {"index_add_", true, [](V s, int64_t d, V i, V x) { scatterx::index_add_(s, d, i, x, Scalar(2)); }},
      {"index_add", true, [](V s, int64_t d, V i, V x) { scatterx::index_add(s, d, i, x); }},
      {"index_reduce_", true,
       [](V s, int64_t d, V i, V x) { scatterx::index_reduce_(s, d, i, x, Reduce::Amin, false); }},
      {"index_reduce", true, [](V s, int64_t d, V i, V x) { scatterx::index_reduce(s, d, i, x, Reduce::Prod); }},
      {"index_select", true, [](V s, int64_t d, V i, V) { scatterx::index_select(s, d, i); }},
      {"index_select_out", true,
       [](V s, int64_t d, V i, V) {
         Shape shape = s.sizes();
         const int64_t wrapped = d < 0 ? d + s.dim() : d;
         if (wrapped >= 0 && wrapped < s.dim()) shape[wrapped] = i.numel();
         Tensor out = Tensor::empty(shape, s.dtype());
         scatterx::index_select_out(out, s, d, i);
       }},
  };
}

// ---------------------------------------------------------------- index values

TEST_F(ErrorTest, IndexOutOfBoundsNamesValueAndPosition) {
  for (DType index_dtype : {DType::Int32, DType::Int64}) {
    // valid values first, so a kernel that wrote before checking would show
    const Tensor index = index_tensor({3, 2}, {0, 1, 2, 0, 1, 7}, index_dtype);
    const Tensor index1 = index_tensor({3}, {0, 1, 7}, index_dtype);
    for (const OpCall& c : all_op_calls()) {
      SCOPED_TRACE(c.op + " index " + scatterx::dtype_name(index_dtype));
      const Tensor source = Tensor::clone(src());
      expect_exact<IndexError>([&] { c.call(self(), 0, c.slice_wise ? index1 : index, source); },
                               c.op + ": index 7 is out of bounds for dimension 0 with size 3 (index position " +
                                   (c.slice_wise ? "[2])" : "[2, 1])"));
    }
  }
}

TEST_F(ErrorTest, NegativeIndexAndIndexEqualToSize) {
  for (DType index_dtype : {DType::Int32, DType::Int64}) {
    SCOPED_TRACE(scatterx::dtype_name(index_dtype));
    const Tensor negative = index_tensor({3, 2}, {0, 1, -1, 0, 1, 2}, index_dtype);
    expect_exact<IndexError>([&] { scatterx::scatter_add_(self(), 0, negative, src()); },
                             "scatter_add_: index -1 is out of bounds for dimension 0 with size 3 "
                             "(index position [1, 0])");
    const Tensor at_size = index_tensor({2, 4}, {0, 1, 2, 3, 3, 4, 0, 1}, index_dtype);
    // dim -1 is dimension 1 (size 4): 4 at [1, 1] is the first bad value
    expect_exact<IndexError>([&] { scatterx::scatter_reduce_(self(), -1, at_size, src(), Reduce::Prod); },
                             "scatter_reduce_: index 4 is out of bounds for dimension 1 with size 4 "
                             "(index position [1, 1])");
    expect_exact<IndexError>([&] { scatterx::gather(self(), 1, at_size); },
                             "gather: index 4 is out of bounds for dimension 1 with size 4 (index position [1, 1])");
    const Tensor neg1 = index_tensor({2}, {2, -3}, index_dtype);
    expect_exact<IndexError>([&] { scatterx::index_select(self(), 0, neg1); },
                             "index_select: index -3 is out of bounds for dimension 0 with size 3 "
                             "(index position [1])");
    const Tensor source = Tensor::clone(self().slice(0, 0, 2));
    expect_exact<IndexError>([&] { scatterx::index_add_(self(), 0, neg1, source); },
                             "index_add_: index -3 is out of bounds for dimension 0 with size 3 "
                             "(index position [1])");
  }
}

TEST_F(ErrorTest, IndexFarOutOfRange) {
  const Tensor big = index_tensor({1, 1}, {int64_t{1} << 40}, DType::Int64);
  expect_exact<IndexError>([&] { scatterx::scatter_(self(), 0, big, src()); },
                           "scatter_: index 1099511627776 is out of bounds for dimension 0 with size 3 "
                           "(index position [0, 0])");
  const Tensor low = index_tensor({1, 1}, {std::numeric_limits<int32_t>::min()}, DType::Int32);
  expect_exact<IndexError>([&] { scatterx::scatter_(self(), 0, low, src()); },
                           "scatter_: index -2147483648 is out of bounds for dimension 0 with size 3 "
                           "(index position [0, 0])");
  const Tensor max64 = index_tensor({1}, {std::numeric_limits<int64_t>::max()}, DType::Int64);
  expect_pieces<IndexError>([&] { scatterx::index_select(self(), 1, max64); },
                            {"index_select: ", "index 9223372036854775807", "dimension 1 with size 4"});
}

// The bounds check folds a bit trick over the index (ops/detail/checks.cpp,
// in_range_bits) rather than comparing: it must agree with v < 0 || v >= bound
// at every edge, for bounds up to int64's largest (beyond int32's for an int32
// index), each value alone and inside a run long enough for the vector loop
// and the pieces.
TEST(IndexBoundsCheck, AgreesWithTheComparisonAtEveryEdge) {
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> bounds = {0,
                                       1,
                                       2,
                                       3,
                                       1000,
                                       INT32_MAX - 1,
                                       INT32_MAX,
                                       int64_t{1} << 31,
                                       (int64_t{1} << 31) + 1,
                                       int64_t{1} << 32,
                                       int64_t{1} << 62,
                                       kMax64 - 1,
                                       kMax64};
  for (DType dtype : {DType::Int32, DType::Int64}) {
    const int64_t lowest = dtype == DType::Int32 ? INT32_MIN : kMin64;
    const int64_t highest = dtype == DType::Int32 ? INT32_MAX : kMax64;
    for (int64_t bound : bounds) {
      std::vector<int64_t> values = {lowest, lowest + 1, -2, -1, 0, 1, 2, highest - 1, highest};
      for (int64_t offset : {-2, -1, 0, 1}) {
        if (offset > 0 && bound > kMax64 - offset) continue;  // bound + 1 past int64: no such value
        const int64_t near = bound + offset;
        if (near >= lowest && near <= highest) values.push_back(near);
      }
      for (int64_t v : values) {
        SCOPED_TRACE(::testing::Message() << scatterx::dtype_name(dtype) << " value " << v << " bound " << bound);
        const bool bad = v < 0 || v >= bound;
        for (int64_t n : {int64_t{1}, int64_t{9000}}) {
          // v among zeros, which are in range unless the bound is 0 (then
          // every call must raise).
          std::vector<int64_t> run(static_cast<size_t>(n), 0);
          run[static_cast<size_t>(n / 2 + 1) % run.size()] = v;
          const Tensor index = index_tensor({n}, run, dtype);
          auto check = [&] { scatterx::detail::check_index_bounds("check", index, 0, bound); };
          if (bad || bound == 0) {
            EXPECT_THROW(check(), IndexError);
          } else {
            EXPECT_NO_THROW(check());
          }
        }
      }
    }
  }
}

// The check folds a run many indices a step (ops/detail/checks.cpp,
// in_range_run), then the rest one by one: a single bad value is found at
// every position of runs of every length up to past two steps, and around the
// 4096-index pieces, in both ISAs (ctest runs this binary with
// SCATTERX_CPU_ISA=baseline too).
TEST(IndexBoundsCheck, FindsOneBadValueAtEveryPositionOfARun) {
  constexpr int64_t kBound = 50;
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n : {4095, 4096, 4097, 4127, 8193}) lengths.push_back(n);
  for (DType dtype : {DType::Int32, DType::Int64}) {
    for (int64_t n : lengths) {
      std::vector<int64_t> run(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) run[static_cast<size_t>(i)] = (i * 7) % kBound;
      EXPECT_NO_THROW(scatterx::detail::check_index_bounds("check", index_tensor({n}, run, dtype), 0, kBound));
      for (int64_t at = 0; at < n; at += n <= 40 ? 1 : 31) {
        for (int64_t bad : {int64_t{-1}, kBound}) {
          SCOPED_TRACE(::testing::Message()
                       << scatterx::dtype_name(dtype) << " length " << n << " value " << bad << " at " << at);
          std::vector<int64_t> with_bad = run;
          with_bad[static_cast<size_t>(at)] = bad;
          EXPECT_THROW(scatterx::detail::check_index_bounds("check", index_tensor({n}, with_bad, dtype), 0, kBound),
                       IndexError);
        }
      }
    }
  }
}

// The reported position is the first bad value in row-major order of the
// index's logical shape, whatever its strides.
TEST_F(ErrorTest, ReportsFirstBadIndexInLogicalOrder) {
  // logical [[0, 9], [1, 1], [-4, 0]] stored transposed (column-major)
  Tensor storage = index_tensor({2, 3}, {0, 1, -4, 9, 1, 0}, DType::Int64);
  const TensorView index = storage.transpose(0, 1);
  expect_exact<IndexError>([&] { scatterx::scatter_(self(), 0, index, src()); },
                           "scatter_: index 9 is out of bounds for dimension 0 with size 3 (index position [0, 1])");
  // reversed: logical [[-4, 0], [1, 1], [0, 9]]
  const TensorView flipped = index.flip(0);
  expect_exact<IndexError>([&] { scatterx::gather(self(), 0, flipped); },
                           "gather: index -4 is out of bounds for dimension 0 with size 3 (index position [0, 0])");
  // a broadcast (stride 0) index
  Tensor one = index_tensor({3, 1}, {0, 3, 1}, DType::Int32);
  expect_exact<IndexError>(
      [&] {
        scatterx::scatter_add_(self(), 0, one.expand({3, 4}), src());
      },
      "scatter_add_: index 3 is out of bounds for dimension 0 with size 3 "
      "(index position [1, 0])");
}

// A bad value anywhere in a large index (checked in parallel pieces) is found
// and self stays untouched.
TEST_F(ErrorTest, BadIndexInLargeIndexLeavesSelfUntouched) {
  Rng rng(case_seed(current_test_name(), 1));
  Buf big_self = random_buf({64, 300}, DType::Float32, kContiguous, rng);
  Buf index = index_buf({5000, 300}, DType::Int64, kContiguous, rng, 0, 63);
  Buf source = random_buf({5000, 300}, DType::Float32, kContiguous, rng);
  static_cast<int64_t*>(index.base.data())[4321 * 300 + 17] = 64;
  big_self.take_snapshot();
  for (Reduce r : {Reduce::Sum, Reduce::Mean, Reduce::Amax}) {
    expect_exact<IndexError>(
        [&] { scatterx::scatter_reduce_(big_self.view, 0, index.view, source.view, r, false); },
        "scatter_reduce_: index 64 is out of bounds for dimension 0 with size 64 (index position [4321, 17])");
    EXPECT_TRUE(big_self.unchanged());
  }
  Buf narrow = index_buf({5000, 1}, DType::Int32, kContiguous, rng, 0, 63);
  static_cast<int32_t*>(narrow.base.data())[4999] = -1;
  expect_exact<IndexError>(
      [&] {
        scatterx::scatter_add_(big_self.view, 0, narrow.view.expand({5000, 300}), source.view);
      },
      "scatter_add_: index -1 is out of bounds for dimension 0 with size 64 (index position [4999, 0])");
  EXPECT_TRUE(big_self.unchanged());
}

// ---------------------------------------------------------------- dims and dtypes

TEST_F(ErrorTest, DimOutOfRange) {
  const Tensor index = index_tensor({1, 1}, {0}, DType::Int64);
  const Tensor index1 = index_tensor({1}, {0}, DType::Int64);
  for (const OpCall& c : all_op_calls()) {
    SCOPED_TRACE(c.op);
    const Tensor source = Tensor::clone(src().slice(0, 0, 1).slice(1, 0, 1));
    const TensorView s = c.slice_wise ? self().slice(0, 0, 1).slice(1, 0, 1) : self();
    for (int64_t dim : {2, -3, 100}) {
      expect_exact<ArgumentError>([&] { c.call(s, dim, c.slice_wise ? index1 : index, source); },
                                  c.op + ": dim " + std::to_string(dim) +
                                      " is out of range for a tensor of 2 dimensions (expected a value in [-2, 1])");
    }
  }
  // a 0-d tensor takes dim 0 or -1 only
  Tensor scalar = make_tensor<float>({}, {1.0f});
  Tensor index0 = make_tensor<int64_t>({}, {0});
  expect_exact<ArgumentError>([&] { scatterx::scatter_(scalar, 1, index0, scalar.view()); },
                              "scatter_: dim 1 is out of range for a tensor of 0 dimensions "
                              "(expected a value in [-1, 0])");
  expect_exact<ArgumentError>([&] { scatterx::gather(scalar, -2, index0); },
                              "gather: dim -2 is out of range for a tensor of 0 dimensions "
                              "(expected a value in [-1, 0])");
}

TEST_F(ErrorTest, IndexDTypeMustBeInt32OrInt64) {
  for (DType bad : {DType::Float32, DType::Int16, DType::UInt8, DType::Bool, DType::Float64}) {
    Tensor index = Tensor::zeros({3, 2}, bad);
    Tensor index1 = Tensor::zeros({3}, bad);
    for (const OpCall& c : all_op_calls()) {
      SCOPED_TRACE(c.op + " with " + scatterx::dtype_name(bad));
      const Tensor source = Tensor::clone(src());
      expect_exact<DTypeError>([&] { c.call(self(), 0, c.slice_wise ? index1 : index, source); },
                               c.op + ": expected index of dtype int32 or int64, got " + scatterx::dtype_name(bad));
    }
  }
}

TEST_F(ErrorTest, SrcDTypeMustMatchSelf) {
  const Tensor index = index_tensor({2, 2}, {0, 1, 2, 0}, DType::Int64);
  const Tensor index1 = index_tensor({3}, {0, 1, 2}, DType::Int64);
  Tensor f64 = Tensor::zeros({3, 4}, DType::Float64);
  Tensor i32 = Tensor::zeros({3, 4}, DType::Int32);
  expect_exact<DTypeError>([&] { scatterx::scatter_(self(), 0, index, f64); },
                           "scatter_: expected src to have the dtype of self (float32), got float64");
  expect_exact<DTypeError>([&] { scatterx::scatter_add(self(), 0, index, i32); },
                           "scatter_add: expected src to have the dtype of self (float32), got int32");
  expect_exact<DTypeError>([&] { scatterx::scatter_reduce_(self(), 0, index, f64, Reduce::Sum); },
                           "scatter_reduce_: expected src to have the dtype of self (float32), got float64");
  expect_exact<DTypeError>([&] { scatterx::index_add_(self(), 0, index1, i32); },
                           "index_add_: expected source to have the dtype of self (float32), got int32");
  expect_exact<DTypeError>([&] { scatterx::index_reduce(self(), 0, index1, f64, Reduce::Mean); },
                           "index_reduce: expected source to have the dtype of self (float32), got float64");
}

TEST_F(ErrorTest, RankMismatch) {
  const Tensor index1 = index_tensor({4}, {0, 1, 2, 0}, DType::Int64);
  expect_exact<ArgumentError>([&] { scatterx::scatter_(self(), 0, index1, src()); },
                              "scatter_: expected index to have as many dimensions as self (2), got 1 "
                              "(index shape [4])");
  const Tensor index = index_tensor({1, 4}, {0, 1, 2, 0}, DType::Int64);
  Tensor src1 = Tensor::zeros({4}, DType::Float32);
  expect_exact<ArgumentError>([&] { scatterx::scatter_add_(self(), 0, index, src1); },
                              "scatter_add_: expected src to have as many dimensions as index (2), got 1 "
                              "(src shape [4])");
  const Tensor index3 = index_tensor({1, 1, 1}, {0}, DType::Int32);
  expect_exact<ArgumentError>([&] { scatterx::gather(self(), 0, index3); },
                              "gather: expected index to have as many dimensions as input (2), got 3 "
                              "(index shape [1, 1, 1])");
  expect_exact<ArgumentError>(
      [&] {
        scatterx::index_add_(self(), 0, index_tensor({4}, {0, 1, 2, 0}, DType::Int64), src1);
      },
      "index_add_: expected source to have as many dimensions as self (2), got 1 "
      "(source shape [4])");
}

TEST_F(ErrorTest, IndexLargerThanSrcOrSelf) {
  // index may be longer than self along dim, but not elsewhere, and never longer than src
  const Tensor wide = index_tensor({2, 5}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, DType::Int64);
  Tensor src_wide = Tensor::zeros({2, 5}, DType::Float32);
  expect_exact<ArgumentError>([&] { scatterx::scatter_(self(), 0, wide, src_wide); },
                              "scatter_: expected index [2, 5] to be no larger than self [3, 4] outside dimension 0, "
                              "got size 5 > 4 in dimension 1");
  expect_exact<ArgumentError>([&] { scatterx::gather(self(), 0, wide); },
                              "gather: expected index [2, 5] to be no larger than input [3, 4] outside dimension 0, "
                              "got size 5 > 4 in dimension 1");
  const Tensor tall = index_tensor({5, 2}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, DType::Int64);
  Tensor src_small = Tensor::zeros({5, 1}, DType::Float32);
  expect_exact<ArgumentError>([&] { scatterx::scatter_reduce_(self(), 0, tall, src_small, Reduce::Sum); },
                              "scatter_reduce_: expected index [5, 2] to be no larger than src [5, 1] in every "
                              "dimension, got size 2 > 1 in dimension 1");
  Tensor src_short = Tensor::zeros({4, 2}, DType::Float32);
  expect_exact<ArgumentError>([&] { scatterx::scatter_add_(self(), 0, tall, src_short); },
                              "scatter_add_: expected index [5, 2] to be no larger than src [4, 2] in every "
                              "dimension, got size 5 > 4 in dimension 0");
  // longer than self along dim is fine
  Tensor src_tall = Tensor::zeros({5, 2}, DType::Float32);
  EXPECT_NO_THROW(scatterx::scatter_add(self(), 0, tall, src_tall));
}

TEST_F(ErrorTest, SliceWiseShapes) {
  const Tensor index3 = index_tensor({3}, {0, 1, 2}, DType::Int64);
  Tensor two_rows = Tensor::zeros({2, 4}, DType::Float32);
  expect_exact<ArgumentError>([&] { scatterx::index_add_(self(), 0, index3, two_rows); },
                              "index_add_: expected source.size(0) to equal the number of indices (3), got 2");
  expect_exact<ArgumentError>([&] { scatterx::index_reduce_(self(), -2, index3, two_rows, Reduce::Prod); },
                              "index_reduce_: expected source.size(0) to equal the number of indices (3), got 2");
  Tensor wide = Tensor::zeros({3, 5}, DType::Float32);
  expect_exact<ArgumentError>([&] { scatterx::index_add_(self(), 0, index3, wide); },
                              "index_add_: expected source [3, 5] to match self [3, 4] outside dimension 0, "
                              "got size 5 != 4 in dimension 1");
  const Tensor index2d = index_tensor({3, 1}, {0, 1, 2}, DType::Int64);
  expect_exact<ArgumentError>([&] { scatterx::index_add_(self(), 0, index2d, src()); },
                              "index_add_: expected index to be a vector (1-d or 0-d), got 2 dimensions "
                              "(shape [3, 1])");
  expect_exact<ArgumentError>([&] { scatterx::index_reduce(self(), 0, index2d, src(), Reduce::Amax); },
                              "index_reduce: expected index to be a vector (1-d or 0-d), got 2 dimensions "
                              "(shape [3, 1])");
  expect_exact<ArgumentError>([&] { scatterx::index_select(self(), 0, index2d); },
                              "index_select: expected index to be a vector (1-d or 0-d), got 2 dimensions "
                              "(shape [3, 1])");
  Tensor scalar = make_tensor<float>({}, {1.0f});
  expect_exact<ArgumentError>(
      [&] {
        scatterx::index_select(scalar, 0, index_tensor({2}, {0, 0}, DType::Int64));
      },
      "index_select: expected exactly one index for a 0-d input, got 2");
}

// ---------------------------------------------------------------- reduce modes

TEST_F(ErrorTest, ReduceNotValidForOp) {
  const Tensor index = index_tensor({2, 2}, {0, 1, 2, 0}, DType::Int64);
  const Tensor index1 = index_tensor({3}, {0, 1, 2}, DType::Int64);
  expect_exact<ArgumentError>([&] { scatterx::scatter_reduce_(self(), 0, index, src(), Reduce::None); },
                              "scatter_reduce_: expected reduce to be one of sum, prod, mean, amax, amin, got 'none'");
  expect_exact<ArgumentError>([&] { scatterx::scatter_reduce(self(), 0, index, src(), Reduce::None, false); },
                              "scatter_reduce: expected reduce to be one of sum, prod, mean, amax, amin, got 'none'");
  for (Reduce r : {Reduce::Sum, Reduce::None}) {
    expect_exact<ArgumentError>(
        [&] { scatterx::index_reduce_(self(), 0, index1, src(), r); },
        std::string("index_reduce_: expected reduce to be one of prod, mean, amax, amin, got '") +
            scatterx::reduce_name(r) + "'");
  }
  for (Reduce r : {Reduce::Mean, Reduce::Amax, Reduce::Amin}) {
    const std::string tail = std::string("expected reduce to be none, 'add' or 'multiply', got '") +
                             scatterx::reduce_name(r) + "' (scatter_reduce_ has mean, amax and amin)";
    expect_exact<ArgumentError>([&] { scatterx::scatter_(self(), 0, index, src(), r); }, "scatter_: " + tail);
    expect_exact<ArgumentError>([&] { scatterx::scatter_(self(), 0, index, Scalar(1.0), r); }, "scatter_: " + tail);
    expect_exact<ArgumentError>([&] { scatterx::scatter(self(), 0, index, src(), r); }, "scatter: " + tail);
  }
}

TEST_F(ErrorTest, ReduceNotSupportedForDType) {
  const Tensor index = index_tensor({2, 2}, {0, 1, 2, 0}, DType::Int64);
  const Tensor index1 = index_tensor({3}, {0, 1, 2}, DType::Int32);
  for (DType complex : {DType::Complex64, DType::Complex128}) {
    Rng rng(case_seed(current_test_name(), 1));
    Buf cself = random_buf({3, 4}, complex, kContiguous, rng);
    Tensor csrc = Tensor::zeros({3, 4}, complex);
    cself.take_snapshot();
    for (Reduce r : {Reduce::Amax, Reduce::Amin}) {
      const std::string what = std::string("reduce '") + scatterx::reduce_name(r) + "' is not supported for " +
                               scatterx::dtype_name(complex) +
                               " tensors (complex numbers have no order; use sum, prod or mean)";
      expect_exact<DTypeError>([&] { scatterx::scatter_reduce_(cself.view, 0, index, csrc, r); },
                               "scatter_reduce_: " + what);
      expect_exact<DTypeError>([&] { scatterx::index_reduce_(cself.view, 0, index1, csrc, r, false); },
                               "index_reduce_: " + what);
      expect_exact<DTypeError>([&] { scatterx::scatter_reduce(cself.view, 0, index, csrc, r); },
                               "scatter_reduce: " + what);
      EXPECT_TRUE(cself.unchanged());
    }
  }
  Tensor bself = Tensor::zeros({3, 4}, DType::Bool);
  Tensor bsrc = Tensor::zeros({3, 4}, DType::Bool);
  const std::string what = "reduce 'mean' is not supported for bool tensors (the mean of booleans is undefined)";
  expect_exact<DTypeError>([&] { scatterx::scatter_reduce_(bself, 0, index, bsrc, Reduce::Mean); },
                           "scatter_reduce_: " + what);
  expect_exact<DTypeError>([&] { scatterx::index_reduce(bself, 0, index1, bsrc, Reduce::Mean); },
                           "index_reduce: " + what);
}

TEST_F(ErrorTest, AlphaAndValueKinds) {
  const Tensor index1 = index_tensor({3}, {0, 1, 2}, DType::Int64);
  Tensor iself = Tensor::zeros({3, 4}, DType::Int32);
  Tensor isrc = Tensor::zeros({3, 4}, DType::Int32);
  expect_exact<DTypeError>([&] { scatterx::index_add_(iself, 0, index1, isrc, Scalar(2.5)); },
                           "index_add_: expected an integral alpha for int32 tensors, got 2.5");
  Tensor bself = Tensor::zeros({3, 4}, DType::Bool);
  Tensor bsrc = Tensor::zeros({3, 4}, DType::Bool);
  expect_exact<DTypeError>([&] { scatterx::index_add(bself, 0, index1, bsrc, Scalar(0.5)); },
                           "index_add: expected an integral alpha for bool tensors, got 0.5");
  expect_exact<DTypeError>([&] { scatterx::index_add(self(), 0, index1, src(), Scalar(true)); },
                           "index_add: expected a non-bool alpha for float32 tensors (a bool alpha is for bool "
                           "tensors), got true");
  expect_exact<DTypeError>([&] { scatterx::index_add_(self(), 0, index1, src(), Scalar(Complex<double>(1.0, 2.0))); },
                           "index_add_: expected a real alpha for float32 tensors, got (1+2j)");
  const Tensor index = index_tensor({2, 2}, {0, 1, 2, 0}, DType::Int64);
  expect_exact<ArgumentError>([&] { scatterx::scatter_(self(), 0, index, Scalar(Complex<double>(1.0, 2.0))); },
                              "scatter_: value must be real for float32 tensors, got (1+2j)");
  // a negative imaginary part prints as Scalar::str() prints it
  expect_exact<ArgumentError>([&] { scatterx::scatter(self(), 0, index, Scalar(Complex<double>(1.0, -2.0))); },
                              "scatter: value must be real for float32 tensors, got (1-2j)");
}

// ---------------------------------------------------------------- aliasing

TEST_F(ErrorTest, InPlaceSelfMustNotOverlapSrcOrIndex) {
  const Tensor index = index_tensor({2, 2}, {0, 1, 2, 0}, DType::Int64);
  const TensorView s = self();
  const std::string self_str = s.str();
  expect_exact<ArgumentError>([&] { scatterx::scatter_(s, 0, index, s); },
                              "scatter_: expected self (written in place) not to overlap src in memory, got "
                              "overlapping " +
                                  self_str + " and " + self_str + " (clone one of them first)");
  const TensorView part = s.slice(0, 1, 3).transpose(0, 1);  // overlaps self, different shape
  expect_pieces<ArgumentError>([&] { scatterx::scatter_add_(s, 1, index, part); },
                               {"scatter_add_: ", "self (written in place) not to overlap src", part.str()});
  expect_pieces<ArgumentError>([&] { scatterx::scatter_reduce_(s, 0, index, s.flip(0), Reduce::Amax); },
                               {"scatter_reduce_: ", "not to overlap src"});
  // index aliasing an int64 self
  Tensor iself = index_tensor({3, 4}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}, DType::Int64);
  const Tensor before = Tensor::clone(iself);
  expect_pieces<ArgumentError>([&] { scatterx::scatter_(iself, 0, iself.slice(0, 0, 2), Scalar(5)); },
                               {"scatter_: ", "self (written in place) not to overlap index"});
  expect_pieces<ArgumentError>(
      [&] {
        scatterx::index_add_(iself, 1, iself.select(0, 2).slice(0, 0, 3), Tensor::zeros({3, 3}, DType::Int64));
      },
      {"index_add_: ", "self (written in place) not to overlap index"});
  EXPECT_TRUE(same_values(iself, before));
  const Tensor index1 = index_tensor({2}, {0, 2}, DType::Int64);
  expect_pieces<ArgumentError>([&] { scatterx::index_add_(s, 0, index1, s.slice(0, 1, 3)); },
                               {"index_add_: ", "self (written in place) not to overlap source"});
  expect_pieces<ArgumentError>([&] { scatterx::index_reduce_(s, 0, index1, s.slice(0, 0, 2), Reduce::Mean); },
                               {"index_reduce_: ", "not to overlap source"});
}

TEST_F(ErrorTest, InPlaceSelfMustNotOverlapItself) {
  Tensor row = make_tensor<float>({1, 4}, {1, 2, 3, 4});
  const TensorView expanded = row.expand({3, 4});
  const Tensor index = index_tensor({1, 4}, {0, 1, 2, 0}, DType::Int64);
  Tensor src4 = Tensor::zeros({1, 4}, DType::Float32);
  const std::string msg =
      "expected self to have no internal overlap (written in place, each element must be "
      "reachable from one position only), got " +
      expanded.str();
  expect_exact<ArgumentError>([&] { scatterx::scatter_add_(expanded, 0, index, src4); }, "scatter_add_: " + msg);
  expect_exact<ArgumentError>([&] { scatterx::scatter_(expanded, 0, index, Scalar(1.0)); }, "scatter_: " + msg);
  expect_exact<ArgumentError>([&] { scatterx::index_add_(expanded, 0, index_tensor({1}, {0}, DType::Int64), src4); },
                              "index_add_: " + msg);
  EXPECT_TRUE(same_values(row, make_tensor<float>({1, 4}, {1, 2, 3, 4})));
  // the out-of-place forms write a fresh tensor, so an expanded self is fine
  Tensor r = scatterx::scatter_add(expanded, 0, index, src4);
  EXPECT_EQ(r.sizes(), Shape({3, 4}));
  EXPECT_TRUE(r.is_contiguous());
}

TEST_F(ErrorTest, OutArgument) {
  const Tensor index = index_tensor({2, 2}, {0, 1, 2, 0}, DType::Int64);
  const Tensor index1 = index_tensor({2}, {0, 2}, DType::Int32);
  Tensor wrong_shape = Tensor::zeros({2, 3}, DType::Float32);
  expect_exact<ArgumentError>([&] { scatterx::gather_out(wrong_shape, self(), 0, index); },
                              "gather_out: expected out of shape [2, 2], got [2, 3]");
  expect_exact<ArgumentError>([&] { scatterx::index_select_out(wrong_shape, self(), 0, index1); },
                              "index_select_out: expected out of shape [2, 4], got [2, 3]");
  Tensor wrong_dtype = Tensor::zeros({2, 2}, DType::Float64);
  expect_exact<DTypeError>([&] { scatterx::gather_out(wrong_dtype, self(), 0, index); },
                           "gather_out: expected out to have the dtype of input (float32), got float64");
  const TensorView out_in_input = self().slice(1, 0, 2).slice(0, 0, 2);
  expect_pieces<ArgumentError>([&] { scatterx::gather_out(out_in_input, self(), 0, index); },
                               {"gather_out: ", "out (written in place) not to overlap input"});
  const TensorView rows_in_input = self().slice(0, 1, 3);
  expect_pieces<ArgumentError>([&] { scatterx::index_select_out(rows_in_input, self(), 0, index1); },
                               {"index_select_out: ", "out (written in place) not to overlap input"});
  Tensor iindex = index_tensor({2, 2}, {0, 1, 0, 1}, DType::Int64);
  Tensor ivalues = index_tensor({3, 2}, {5, 6, 7, 8, 9, 10}, DType::Int64);
  expect_pieces<ArgumentError>([&] { scatterx::gather_out(iindex, ivalues, 0, iindex); },
                               {"gather_out: ", "out (written in place) not to overlap index"});
  Tensor one = Tensor::zeros({1, 2}, DType::Float32);
  expect_pieces<ArgumentError>(
      [&] {
        scatterx::gather_out(one.expand({2, 2}), self(), 0, index);
      },
      {"gather_out: ", "expected out to have no internal overlap"});
}

// ---------------------------------------------------------------- devices

// Built with the backend, but no GPU (or driver) here: a clear error from
// the first CUDA call, never a crash.
TEST_F(ErrorTest, CudaTensorsWithoutDevice) {
  if (!scatterx::cuda::is_built() || scatterx::cuda::device_count() > 0) {
    GTEST_SKIP() << "needs a build with the CUDA backend and no visible device";
  }
  auto fake = [](uintptr_t at) { return reinterpret_cast<void*>(at); };  // disjoint, never dereferenced
  const auto cuda = scatterx::Device::cuda(0);
  const TensorView dself(fake(0x10000), DType::Float32, Shape{3, 4}, cuda);
  const TensorView dindex(fake(0x20000), DType::Int64, Shape{2, 2}, cuda);
  const TensorView dsrc(fake(0x30000), DType::Float32, Shape{3, 4}, cuda);
  expect_error<scatterx::Error>([&] { scatterx::scatter_add_(dself, 0, dindex, dsrc); },
                                {"scatter_add_: CUDA error in "});
  expect_error<scatterx::Error>([&] { (void)scatterx::gather(dself, 1, dindex); }, {"gather: CUDA error in "});
  expect_error<scatterx::Error>([&] { (void)Tensor::empty({4}, DType::Float32, cuda); },
                                {"Tensor::empty: CUDA error in "});
}

TEST_F(ErrorTest, CudaTensorsWithoutCudaBackend) {
  if (scatterx::cuda::is_built()) GTEST_SKIP() << "this build has a CUDA backend";
  // A fake device pointer: the library must refuse before touching it.
  void* fake = reinterpret_cast<void*>(uintptr_t{0x1000});
  const auto cuda = scatterx::Device::cuda(0);
  const TensorView dself(fake, DType::Float32, Shape{3, 4}, cuda);
  const TensorView dindex(fake, DType::Int64, Shape{2, 2}, cuda);
  const TensorView dindex1(fake, DType::Int64, Shape{2}, cuda);
  const TensorView dsrc(fake, DType::Float32, Shape{3, 4}, cuda);
  const std::string none = "expected cpu tensors (this build of scatterx has no CUDA backend), got ";
  expect_exact<ArgumentError>([&] { scatterx::scatter_(dself, 0, dindex, dsrc); },
                              "scatter_: " + none + "self on cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::scatter_add(dself, 0, dindex, dsrc); },
                              "scatter_add: " + none + "self on cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::scatter_reduce_(dself, 0, dindex, dsrc, Reduce::Sum); },
                              "scatter_reduce_: " + none + "self on cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::index_add_(dself, 0, dindex1, dsrc); },
                              "index_add_: " + none + "self on cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::index_reduce(dself, 0, dindex1, dsrc, Reduce::Amax); },
                              "index_reduce: " + none + "self on cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::gather(dself, 0, dindex); }, "gather: " + none + "input on cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::index_select(dself, 0, dindex1); },
                              "index_select: " + none + "input on cuda:0");
  expect_pieces<ArgumentError>([&] { (void)Tensor::clone(dself); }, {"Tensor::clone", "cuda:0"});
}

// Tensors on different devices: the message names the odd one out.
TEST_F(ErrorTest, MixedDevices) {
  void* fake = reinterpret_cast<void*>(uintptr_t{0x1000});
  const auto cuda = scatterx::Device::cuda(0);
  const TensorView dindex(fake, DType::Int64, Shape{2, 2}, cuda);
  const TensorView dsrc(fake, DType::Float32, Shape{3, 4}, cuda);
  const Tensor index = index_tensor({2, 2}, {0, 1, 2, 0}, DType::Int64);
  expect_exact<ArgumentError>([&] { scatterx::scatter_(self(), 0, dindex, src()); },
                              "scatter_: expected index on self's device cpu, got cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::scatter_add_(self(), 0, index, dsrc); },
                              "scatter_add_: expected src on self's device cpu, got cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::gather(self(), 0, dindex); },
                              "gather: expected index on input's device cpu, got cuda:0");
  Tensor out = Tensor::zeros({2, 2}, DType::Float32);
  const TensorView dout(fake, DType::Float32, Shape{2, 2}, cuda);
  expect_exact<ArgumentError>([&] { scatterx::gather_out(dout, self(), 0, index); },
                              "gather_out: expected out on input's device cpu, got cuda:0");
  expect_exact<ArgumentError>([&] { scatterx::copy_(out, dout); },
                              "copy_: expected src on dst's device cpu, got cuda:0");
}

TEST_F(ErrorTest, EveryErrorIsAScatterxError) {
  const Tensor index = index_tensor({1, 1}, {5}, DType::Int64);
  try {
    scatterx::scatter_add_(self(), 0, index, src());
    ADD_FAILURE() << "no exception";
  } catch (const scatterx::Error& e) {
    EXPECT_NE(dynamic_cast<const IndexError*>(&e), nullptr);
  }
  try {
    scatterx::scatter_add_(self(), 5, index, src());
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(dynamic_cast<const ArgumentError*>(&e), nullptr);
  }
  EXPECT_TRUE(self_.unchanged());
}

}  // namespace
}  // namespace sxt

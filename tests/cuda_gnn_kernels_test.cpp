// gather_dot and scatter_softmax on CUDA against the CPU backend on the same
// inputs. The GPU sums in another order (gather_dot) and uses CUDA's exp /
// log (scatter_softmax), so results are compared within what rounding can
// do, NaN positions and infinities exactly. Also the error paths (index
// check, devices, plan device) and the unchecked mode. Every test skips when
// no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/cuda.h"
#include "scatterx.h"
#include "tests/cuda_test_util.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

namespace sxc = scatterx::cuda;
using scatterx::BFloat16;
using scatterx::Device;
using scatterx::IndexPlan;

const std::vector<DType> kFloatDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
const std::vector<DType> kIndexDTypes = {DType::Int32, DType::Int64};

// ---------------------------------------------------------------- element access as double

double value_at(const TensorView& v, const int64_t* c) {
  switch (v.dtype()) {
    case DType::Float32:
      return load<float>(v, c);
    case DType::Float64:
      return load<double>(v, c);
    case DType::Float16:
      return static_cast<float>(load<Half>(v, c));
    case DType::BFloat16:
      return static_cast<float>(load<BFloat16>(v, c));
    case DType::Int32:
      return load<int32_t>(v, c);
    case DType::Int64:
      return static_cast<double>(load<int64_t>(v, c));
    default:
      throw std::logic_error("value_at: unexpected dtype");
  }
}

void set_value(const TensorView& v, const int64_t* c, double x) {
  switch (v.dtype()) {
    case DType::Float32:
      return store<float>(v, c, static_cast<float>(x));
    case DType::Float64:
      return store<double>(v, c, x);
    case DType::Float16:
      return store<Half>(v, c, Half(static_cast<float>(x)));
    case DType::BFloat16:
      return store<BFloat16>(v, c, BFloat16(static_cast<float>(x)));
    default:
      throw std::logic_error("set_value: unexpected dtype");
  }
}

// A contiguous 1-d index tensor of `dtype` holding `values`, viewed with
// stride `step` (the gaps hold -1).
Buf index_of(const std::vector<int64_t>& values, DType dtype, int64_t step) {
  const auto n = static_cast<int64_t>(values.size());
  Buf b;
  b.base = Tensor::empty(Shape{std::max<int64_t>(1, n * step)}, dtype);
  for (int64_t i = 0; i < b.base.numel(); ++i) {
    const int64_t c[1] = {i};
    const int64_t v = i % step == 0 && i / step < n ? values[i / step] : -1;
    dtype == DType::Int32 ? store<int32_t>(b.base, c, static_cast<int32_t>(v)) : store<int64_t>(b.base, c, v);
  }
  b.view = TensorView(b.base.data(), dtype, Shape{n}, Shape{step}, Device::cpu());
  return b;
}

// Unit roundoff of the accumulation type; relative spacing of the output dtype.
double accumulation_eps(DType dtype) { return dtype == DType::Float64 ? 0x1p-53 : 0x1p-24; }
double output_ulp(DType dtype) {
  if (dtype == DType::Float16) return 0x1p-10;
  if (dtype == DType::BFloat16) return 0x1p-7;
  return 0;  // no rounding beyond the accumulation type's
}

// Finite values in +-[1 / max, max], no specials (the tests place their own):
// no 16-bit overflow in a dot, exp(x - max) stays a normal float.
ValueOptions bounded_values(double max) {
  ValueOptions values;
  values.special_rate = 0;
  values.near_one = true;
  values.near_one_max = max;
  return values;
}

class CudaGnnKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sxc::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
  void TearDown() override { sxc::set_index_checks(true); }
};

// ---------------------------------------------------------------- gather_dot

// got (from the GPU) against want (the CPU's) for the same operands: both are
// within F * eps * sum|a_f b_f| of the exact dot, then rounded to the output
// dtype (half an ulp each).
::testing::AssertionResult dot_matches(const Tensor& got, const Tensor& want, const TensorView& a, const TensorView& ai,
                                       const TensorView& b, const TensorView& bi) {
  const int64_t features = a.size(1);
  const double eps = accumulation_eps(a.dtype());
  const double ulp = output_ulp(a.dtype());
  for (int64_t e = 0; e < want.size(0); ++e) {
    const int64_t ce[1] = {e};
    const int64_t ra = static_cast<int64_t>(value_at(ai, ce));
    const int64_t rb = static_cast<int64_t>(value_at(bi, ce));
    double magnitude = 0;
    for (int64_t f = 0; f < features; ++f) {
      const int64_t ca[2] = {ra, f};
      const int64_t cb[2] = {rb, f};
      magnitude += std::fabs(value_at(a, ca) * value_at(b, cb));
    }
    const double g = value_at(got, ce);
    const double w = value_at(want, ce);
    const double bound = 2 * (features + 2) * eps * magnitude + ulp * std::max(std::fabs(g), std::fabs(w)) + 1e-30;
    if (!(std::fabs(g - w) <= bound)) {
      return ::testing::AssertionFailure() << "edge " << e << ": got " << g << ", want " << w << " (bound " << bound
                                           << ", sum|ab| " << magnitude << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(CudaGnnKernelsTest, GatherDotMatchesCpu) {
  constexpr int64_t kRowsA = 37;
  constexpr int64_t kRowsB = 53;
  const ValueOptions values = bounded_values(2);
  int case_number = 0;
  for (DType dtype : kFloatDTypes) {
    for (DType a_index_dtype : kIndexDTypes) {
      for (DType b_index_dtype : kIndexDTypes) {
        for (int64_t features : {1, 3, 64, 257}) {
          for (int64_t edges : {0, 1, 1000}) {
            Rng rng(case_seed(current_test_name(), case_number));
            // Odd cases: a strided (copied by the front end), a_index with stride 2.
            const bool strided = case_number % 2 == 1;
            ++case_number;
            const Buf a = random_buf({kRowsA, features}, dtype, strided ? kStep2 | kOffset : kContiguous, rng, values);
            const Buf b = random_buf({kRowsB, features}, dtype, strided ? kContiguous : kPermute, rng, values);
            const Buf ai = index_buf({edges}, a_index_dtype, strided ? kStep2 : kContiguous, rng, 0, kRowsA - 1);
            const Buf bi = index_buf({edges}, b_index_dtype, strided ? kFlip : kContiguous, rng, 0, kRowsB - 1);
            SCOPED_TRACE(::testing::Message() << dtype_label(dtype) << " a_index " << dtype_label(a_index_dtype)
                                              << " b_index " << dtype_label(b_index_dtype) << " F " << features << " E "
                                              << edges << " a " << a.str() << " a_index " << ai.str());
            const Tensor want = scatterx::gather_dot(a.view, ai.view, b.view, bi.view);
            const DeviceBuf da = to_device(a);
            const DeviceBuf db = to_device(b);
            const DeviceBuf dai = to_device(ai);
            const DeviceBuf dbi = to_device(bi);
            const Tensor got_device = scatterx::gather_dot(da.view, dai.view, db.view, dbi.view);
            ASSERT_EQ(got_device.device(), kGpu);
            ASSERT_EQ(got_device.dtype(), dtype);
            ASSERT_EQ(got_device.size(0), edges);
            const Tensor got = to_host(got_device);
            EXPECT_TRUE(dot_matches(got, want, a.view, ai.view, b.view, bi.view));
            // Run to run: the same bits (the summation order is fixed).
            EXPECT_TRUE(same_values(to_host(scatterx::gather_dot(da.view, dai.view, db.view, dbi.view)), got));
          }
        }
      }
    }
  }
}

TEST_F(CudaGnnKernelsTest, GatherDotErrorsAndUncheckedIndex) {
  Rng rng(case_seed(current_test_name(), 0));
  const Buf a = random_buf({4, 8}, DType::Float32, kContiguous, rng, bounded_values(2));
  const Buf b = random_buf({5, 8}, DType::Float32, kContiguous, rng, bounded_values(2));
  const Buf bad = index_of({0, 1, 2, 4, 3}, DType::Int64, 1);  // 4 is out of range for a
  const Buf good = index_of({0, 1, 2, 3, 3}, DType::Int64, 1);
  const DeviceBuf da = to_device(a);
  const DeviceBuf db = to_device(b);
  const DeviceBuf dbad = to_device(bad);
  const DeviceBuf dgood = to_device(good);
  expect_error<scatterx::IndexError>([&] { scatterx::gather_dot(da.view, dbad.view, db.view, dgood.view); },
                                     {"gather_dot: a_index 4 is out of bounds", "(a_index position [3])"});
  expect_error<scatterx::ArgumentError>([&] { scatterx::gather_dot(da.view, good.view, db.view, dgood.view); },
                                        {"gather_dot: ", "expected a_index on a's device cuda:0, got cpu"});
  expect_error<scatterx::ArgumentError>([&] { scatterx::gather_dot(da.view, dgood.view, b.view, dgood.view); },
                                        {"gather_dot: ", "expected b on a's device cuda:0, got cpu"});

  // Unchecked: the bad edge is 0, the others are the CPU's.
  sxc::set_index_checks(false);
  const Tensor got = to_host(scatterx::gather_dot(da.view, dbad.view, db.view, dgood.view));
  const Tensor want = scatterx::gather_dot(a.view, good.view, b.view, good.view);
  for (int64_t e = 0; e < 5; ++e) {
    const int64_t c[1] = {e};
    if (e == 3) {
      EXPECT_EQ(value_at(got, c), 0.0);
    } else {
      EXPECT_NEAR(value_at(got, c), value_at(want, c), 1e-5 * (1 + std::fabs(value_at(want, c)))) << "edge " << e;
    }
  }
}

// ---------------------------------------------------------------- scatter_softmax

// got against want: NaN where want is NaN, infinities equal, else within a
// few ulp of the accumulation type (and one ulp of a 16-bit output). A
// log-softmax value (x - m) - log(s) may cancel to near 0: its bound scales
// with the terms (|x - m| <= 16, log(s) <= log(rows) here), not the result.
// A group of n rows sums n exponentials, in chunks on the GPU and in one
// run on the CPU: their sums may differ by 2 n u relative (positive terms).
::testing::AssertionResult softmax_matches(const Tensor& got, const Tensor& want, bool log, int64_t longest = 64) {
  const double u = want.dtype() == DType::Float64 ? 0x1p-53 : 0x1p-24;
  const double rel = std::max(want.dtype() == DType::Float64 ? 1e-12 : 1e-5, 2.0 * static_cast<double>(longest) * u);
  const double ulp = output_ulp(want.dtype());
  const int64_t rows = want.size(0);
  const int64_t features = want.size(1);
  for (int64_t p = 0; p < rows; ++p) {
    for (int64_t k = 0; k < features; ++k) {
      const int64_t c[2] = {p, k};
      const double g = value_at(got, c);
      const double w = value_at(want, c);
      bool ok = false;
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (std::isinf(w) || std::isinf(g)) {
        ok = g == w;
      } else {
        const double bound = rel * (std::fabs(w) + (log ? 32 : 0)) + ulp * std::fabs(w) + 0x1p-24;
        ok = std::fabs(g - w) <= bound;
      }
      if (!ok) return ::testing::AssertionFailure() << "at [" << p << ", " << k << "]: got " << g << ", want " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

// Index values over kGroups destinations: 0 and the last are empty, 1 holds
// one position, 2 .. 4 get the special values below, the rest random.
constexpr int64_t kGroups = 12;
std::vector<int64_t> softmax_index(int64_t positions, Rng& rng) {
  std::vector<int64_t> values(static_cast<size_t>(positions));
  for (auto& v : values) v = rng.uniform(2, kGroups - 2);
  if (positions > 0) values[static_cast<size_t>(rng.uniform(0, positions - 1))] = 1;
  return values;
}

// Group 2's first feature all -inf (a NaN group), one NaN in group 3, every
// other row of group 4 -inf (exp gives 0 there, -inf in log-softmax).
void add_special_values(const TensorView& src, const std::vector<int64_t>& index) {
  bool nan_placed = false;
  int64_t group4_rows = 0;
  for (int64_t p = 0; p < static_cast<int64_t>(index.size()); ++p) {
    const int64_t c[2] = {p, 0};
    const int64_t t = index[static_cast<size_t>(p)];
    if (t == 2) set_value(src, c, -std::numeric_limits<double>::infinity());
    if (t == 3 && !nan_placed) set_value(src, c, std::numeric_limits<double>::quiet_NaN()), nan_placed = true;
    if (t == 4 && group4_rows++ % 2 == 1) set_value(src, c, -std::numeric_limits<double>::infinity());
  }
}

// 300 positions over 8 groups: every group folded by one thread; 3000: in
// chunks (chunks.cuh).
TEST_F(CudaGnnKernelsTest, ScatterSoftmaxMatchesCpu) {
  const ValueOptions values = bounded_values(8);
  int case_number = 0;
  for (const int64_t kPositions : {300, 3000})
    for (DType dtype : kFloatDTypes) {
      for (DType index_dtype : kIndexDTypes) {
        for (int64_t features : {1, 5, 64}) {
          for (bool log : {false, true}) {
            Rng rng(case_seed(current_test_name(), case_number));
            const int64_t step = case_number % 2 == 0 ? 1 : 2;  // odd cases: a strided index
            const double eps = case_number % 3 == 2 ? 0.25 : 0.0;
            ++case_number;
            const std::vector<int64_t> index = softmax_index(kPositions, rng);
            const Buf host_index = index_of(index, index_dtype, step);
            Buf src = random_buf({kPositions, features}, dtype, kContiguous, rng, values);
            add_special_values(src.view, index);
            SCOPED_TRACE(::testing::Message() << dtype_label(dtype) << " index " << dtype_label(index_dtype) << " F "
                                              << features << (log ? " log" : "") << " eps " << eps);
            const Tensor want = scatterx::scatter_softmax(src.view, IndexPlan(host_index.view, kGroups), log, eps);
            const DeviceBuf device_index = to_device(host_index);
            const IndexPlan plan(device_index.view, kGroups);
            ASSERT_EQ(plan.device(), kGpu);
            const DeviceBuf device_src = to_device(src);
            const Tensor got_device = scatterx::scatter_softmax(device_src.view, plan, log, eps);
            ASSERT_EQ(got_device.device(), kGpu);
            const Tensor got = to_host(got_device);
            EXPECT_TRUE(softmax_matches(got, want, log, kPositions));
            EXPECT_TRUE(same_values(to_host(scatterx::scatter_softmax(device_src.view, plan, log, eps)), got));
          }
        }
      }
    }
}

// A hub: one group of 20000 rows beside groups of one to a few rows, in
// float32 and float64, softmax and log-softmax.
TEST_F(CudaGnnKernelsTest, ScatterSoftmaxHubGroup) {
  constexpr int64_t kPositions = 24000;
  const ValueOptions values = bounded_values(8);
  int case_number = 0;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t features : {1, 64}) {
      for (bool log : {false, true}) {
        Rng rng(case_seed(current_test_name(), case_number++));
        std::vector<int64_t> index(static_cast<size_t>(kPositions));
        for (auto& v : index) v = rng.chance(20000.0 / kPositions) ? 0 : rng.uniform(1, 3000);
        const Buf host_index = index_of(index, DType::Int64, 1);
        Buf src = random_buf({kPositions, features}, dtype, kContiguous, rng, values);
        SCOPED_TRACE(::testing::Message() << dtype_label(dtype) << " F " << features << (log ? " log" : ""));
        const Tensor want = scatterx::scatter_softmax(src.view, IndexPlan(host_index.view, 3001), log, 0);
        const DeviceBuf device_index = to_device(host_index);
        const DeviceBuf device_src = to_device(src);
        const Tensor got =
            to_host(scatterx::scatter_softmax(device_src.view, IndexPlan(device_index.view, 3001), log, 0));
        EXPECT_TRUE(softmax_matches(got, want, log, kPositions));
      }
    }
  }
}

TEST_F(CudaGnnKernelsTest, ScatterSoftmaxEmptyAndStridedSrc) {
  Rng rng(case_seed(current_test_name(), 0));
  // No positions at all.
  const Buf none = index_of({}, DType::Int64, 1);
  const DeviceBuf device_none = to_device(none);
  const Tensor empty_src = Tensor::empty(Shape{0, 3}, DType::Float32, kGpu);
  const Tensor empty_out = scatterx::scatter_softmax(empty_src, IndexPlan(device_none.view, 3), false);
  EXPECT_EQ(empty_out.size(0), 0);
  EXPECT_EQ(empty_out.device(), kGpu);
  // A transposed src (the front end copies it) with rows of more than one dim.
  const std::vector<int64_t> index = softmax_index(50, rng);
  const Buf host_index = index_of(index, DType::Int32, 1);
  const Buf src = random_buf({50, 3, 4}, DType::Float32, kPermute, rng, bounded_values(8));
  const Tensor want = scatterx::scatter_softmax(src.view, IndexPlan(host_index.view, kGroups), true);
  const DeviceBuf device_index = to_device(host_index);
  const Tensor got =
      to_host(scatterx::scatter_softmax(to_device(src).view, IndexPlan(device_index.view, kGroups), true));
  const TensorView flat_got(got.data(), got.dtype(), Shape{50, 12}, Shape{12, 1}, Device::cpu());
  const TensorView flat_want(want.data(), want.dtype(), Shape{50, 12}, Shape{12, 1}, Device::cpu());
  EXPECT_TRUE(softmax_matches(Tensor::clone(flat_got), Tensor::clone(flat_want), true));
}

TEST_F(CudaGnnKernelsTest, ScatterSoftmaxUncheckedRowIsZero) {
  Rng rng(case_seed(current_test_name(), 0));
  std::vector<int64_t> index = softmax_index(40, rng);
  index[5] = kGroups;  // out of range: in no group of the CUDA plan
  const Buf src = random_buf({40, 5}, DType::Float32, kContiguous, rng, bounded_values(8));
  // The CPU reference puts position 5 alone in an extra group: the others are unchanged.
  const Tensor want = scatterx::scatter_softmax(src.view, IndexPlan(index_of(index, DType::Int64, 1).view), false);
  sxc::set_index_checks(false);
  const DeviceBuf device_index = to_device(index_of(index, DType::Int64, 1));
  const IndexPlan plan(device_index.view, kGroups);
  const Tensor got = to_host(scatterx::scatter_softmax(to_device(src).view, plan, false));
  for (int64_t k = 0; k < 5; ++k) {
    const int64_t c[2] = {5, k};
    EXPECT_EQ(value_at(got, c), 0.0) << "feature " << k;
    set_value(got, c, value_at(want, c));
  }
  EXPECT_TRUE(softmax_matches(got, want, false));
}

TEST_F(CudaGnnKernelsTest, ScatterSoftmaxPlanOnAnotherDevice) {
  Rng rng(case_seed(current_test_name(), 0));
  const Buf host_index = index_of({0, 2, 1}, DType::Int64, 1);
  const DeviceBuf device_index = to_device(host_index);
  const IndexPlan cpu_plan(host_index.view, 3);
  const IndexPlan cuda_plan(device_index.view, 3);
  const Buf src = random_buf({3, 2}, DType::Float32, kContiguous, rng);
  const DeviceBuf device_src = to_device(src);
  expect_error<scatterx::ArgumentError>(
      [&] { scatterx::scatter_softmax(device_src.view, cpu_plan, false); },
      {"scatter_softmax: ", "expected the plan on src's device (cuda:0)", "got a plan on cpu"});
  expect_error<scatterx::ArgumentError>(
      [&] { scatterx::scatter_softmax(src.view, cuda_plan, true); },
      {"scatter_log_softmax: ", "expected the plan on src's device (cpu)", "got a plan on cuda:0"});
}

}  // namespace
}  // namespace sxt

// scatter_softmax / scatter_log_softmax against a serial reference: a plain
// loop over the destinations, the maximum and the differences x - max taken
// in the accumulation type as the kernel does, exp / log / sums / division
// in double, so the kernel's results must agree within a few ulp of the
// dtype (the kernel's float exp is within 2 ulp). Every floating dtype,
// empty groups, sparse groups, E = 0, F = 1, odd F > 64, groups beyond the
// kernel's exp cache, strided src, special values, thread counts; then the
// float exp itself and the error paths.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/reduce_ops.h"
#include "scatterx.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

using scatterx::IndexPlan;

const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
  return kDTypes;
}

int64_t index_at(const TensorView& v, int64_t p) {
  const int64_t c[1] = {p};
  return v.dtype() == DType::Int32 ? int64_t{load<int32_t>(v, c)} : load<int64_t>(v, c);
}

// The reference, as double values of src's shape (contiguous).
template <typename T>
std::vector<double> reference_typed(const TensorView& src, const TensorView& index, int64_t dim_size, bool log,
                                    double eps) {
  using A = scatterx::acc_t<T>;
  const Tensor xc = Tensor::clone(src);
  const int64_t rows = src.size(0);
  const int64_t F = rows == 0 ? 0 : xc.numel() / rows;
  const T* x = static_cast<const T*>(xc.data());
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(dim_size));
  for (int64_t p = 0; p < rows; ++p) members[index_at(index, p)].push_back(p);
  std::vector<double> out(static_cast<size_t>(rows * F));
  for (const auto& group : members) {
    for (int64_t k = 0; k < F; ++k) {
      A m = scatterx::arith::lowest<A>();
      for (int64_t p : group) m = scatterx::arith::max(m, static_cast<A>(x[p * F + k]));
      double s = 0;
      for (int64_t p : group) s += std::exp(static_cast<double>(static_cast<A>(x[p * F + k]) - m));
      for (int64_t p : group) {
        const double d = static_cast<double>(static_cast<A>(x[p * F + k]) - m);
        out[p * F + k] = log ? d - std::log(s + eps) : std::exp(d) / s;
      }
    }
  }
  return out;
}

std::vector<double> reference(const TensorView& src, const TensorView& index, int64_t dim_size, bool log, double eps) {
  std::vector<double> out;
  visit_dtype(src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      out = reference_typed<T>(src, index, dim_size, log, eps);
    }
  });
  return out;
}

double relative_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64:
      return 1e-12;
    case DType::Float32:
      return 1e-5;
    case DType::Float16:
      return 4e-3;
    default:
      return 3e-2;  // bfloat16
  }
}

// got (contiguous, src's dtype) against the reference rounded to that dtype:
// NaN where it is NaN, the same infinity, else within rtol of the value or
// rtol * floor (log-softmax: (x - max) - log(sum) cancels, so the error is
// relative to log(sum), not to the result).
void expect_close(const Tensor& got, const std::vector<double>& want, double rtol, double floor = 1e-3) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  int failures = 0;
  visit_dtype(got.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      const T* g = static_cast<const T*>(got.data());
      for (size_t i = 0; i < want.size() && failures < 5; ++i) {
        const double v = static_cast<double>(static_cast<float>(g[i]));
        const double gv = std::is_same_v<T, double> ? static_cast<double>(g[i]) : v;
        const double w = std::is_same_v<T, double>
                             ? want[i]
                             : static_cast<double>(static_cast<float>(static_cast<T>(static_cast<float>(want[i]))));
        bool ok;
        if (std::isnan(w)) {
          ok = std::isnan(gv);
        } else if (std::isinf(w)) {
          ok = gv == w;
        } else {
          ok = std::fabs(gv - w) <= rtol * std::fabs(w) || std::fabs(gv - w) <= rtol * floor;
        }
        if (!ok) {
          ++failures;
          ADD_FAILURE() << "element " << i << ": got " << gv << ", want " << w;
        }
      }
    }
  });
}

TEST(ScatterSoftmax, MatchesReference) {
  const uint64_t seed = case_seed("ScatterSoftmax.MatchesReference", 0);
  Rng rng(seed);
  ValueOptions values;
  values.special_rate = 0;
  const std::vector<Shape> feature_shapes = {{}, {1}, {3}, {64}, {65}, {131}, {3, 5}};
  for (DType dtype : float_dtypes()) {
    for (const Shape& features : feature_shapes) {
      for (DType index_dtype : {DType::Int32, DType::Int64}) {
        for (int log = 0; log < 2; ++log) {
          const int64_t rows = rng.uniform(0, 300);
          const int64_t dim_size = rng.chance(0.5) ? rng.uniform(1, 40) : rng.uniform(200, 3000);  // sparse groups
          Shape shape{rows};
          for (int64_t d = 0; d < features.size(); ++d) shape.push_back(features[d]);
          SCOPED_TRACE("seed " + std::to_string(seed) + " " + dtype_label(dtype) + " " + shape.str() + " dim_size " +
                       std::to_string(dim_size) + (log ? " log" : ""));
          Tensor src = Tensor::empty(shape, dtype);
          fill_random(src, rng, values);
          Tensor index = Tensor::empty({rows}, index_dtype);
          fill_index(index, rng, 0, dim_size - 1);
          const IndexPlan plan(index, dim_size);
          const double eps = log && rng.chance(0.5) ? 1e-12 : 0.0;
          const Tensor got = scatterx::scatter_softmax(src, plan, log != 0, eps);
          EXPECT_EQ(got.sizes(), src.sizes());
          expect_close(got, reference(src, index, dim_size, log != 0, eps), relative_tolerance(dtype), log ? 8 : 1e-3);
        }
      }
    }
  }
}

TEST(ScatterSoftmax, StridedSrcAndLargeGroups) {
  Rng rng(case_seed("ScatterSoftmax.StridedSrcAndLargeGroups", 0));
  ValueOptions values;
  values.special_rate = 0;
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16}) {
    for (int log = 0; log < 2; ++log) {
      // 1500 rows in 3 groups (one of ~1400: beyond the kernel's exp cache), read through a step-2 view.
      Tensor storage = Tensor::empty({1500, 2 * 70}, dtype);
      fill_random(storage, rng, values);
      const TensorView src = storage.slice(1, 0, 140, 2);
      ASSERT_FALSE(src.is_contiguous());
      Tensor index = Tensor::empty({1500}, DType::Int64);
      for (int64_t p = 0; p < 1500; ++p) static_cast<int64_t*>(index.data())[p] = p % 20 == 0 ? p % 3 : 1;
      const IndexPlan plan(index, 4);
      const Tensor got = scatterx::scatter_softmax(src, plan, log != 0, 0);
      EXPECT_TRUE(got.is_contiguous());
      expect_close(got, reference(src, index, 4, log != 0, 0), relative_tolerance(dtype), log ? 8 : 1e-3);
    }
  }
}

// A contiguous tensor of dtype holding values (rounded once; half types through float).
Tensor from_doubles(const Shape& shape, const std::vector<double>& values, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_type_v<T>) {
      T* p = static_cast<T*>(t.data());
      for (size_t i = 0; i < values.size(); ++i) {
        p[i] = std::is_same_v<T, double> ? static_cast<T>(values[i]) : static_cast<T>(static_cast<float>(values[i]));
      }
    }
  });
  return t;
}

// Groups of more than 512 rows are cut into chunks of 512 whose maxima and
// sums are combined (on all threads): groups of exactly one chunk, one row
// over, several whole chunks and a ragged last chunk, beside small groups.
TEST(ScatterSoftmax, ChunkedGroups) {
  const uint64_t seed = case_seed("ScatterSoftmax.ChunkedGroups", 0);
  Rng rng(seed);
  ValueOptions values;
  values.special_rate = 0;
  const std::vector<int64_t> group_rows = {512, 513, 1024, 1025, 2600, 3, 1};
  int64_t rows = 0;
  for (int64_t n : group_rows) rows += n;
  // Group g's rows interleaved with the others': a random permutation of g repeated group_rows[g] times.
  std::vector<int64_t> targets;
  for (size_t g = 0; g < group_rows.size(); ++g) targets.insert(targets.end(), group_rows[g], static_cast<int64_t>(g));
  for (int64_t i = rows - 1; i > 0; --i) std::swap(targets[i], targets[rng.uniform(0, i)]);
  for (DType dtype : float_dtypes()) {
    for (const int64_t features : {1, 16, 70}) {
      for (int log = 0; log < 2; ++log) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " " + dtype_label(dtype) + " F " + std::to_string(features) +
                     (log ? " log" : ""));
        Tensor src = Tensor::empty({rows, features}, dtype);
        fill_random(src, rng, values);
        const Tensor index = make_tensor<int64_t>({rows}, targets);
        const IndexPlan plan(index, 9);  // targets 7 and 8 empty
        const double eps = log ? 1e-12 : 0.0;
        expect_close(scatterx::scatter_softmax(src, plan, log != 0, eps), reference(src, index, 9, log != 0, eps),
                     relative_tolerance(dtype), log ? 8 : 1e-3);
      }
    }
  }
}

// The special values where the chunks of one group combine: a chunk whose
// values are all -inf adds nothing to a finite group (its own sum is NaN);
// +inf, NaN and an all -inf group make the whole group NaN, as the composite.
TEST(ScatterSoftmax, SpecialValuesInChunkedGroups) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t rows = 1800;  // one group: chunks [0, 512), [512, 1024), [1024, 1536), [1536, 1800)
  const int64_t features = 6;
  std::vector<double> v(static_cast<size_t>(rows * features));
  for (int64_t p = 0; p < rows; ++p) {
    const double finite = std::sin(0.37 * static_cast<double>(p)) * 3;
    double* row = v.data() + p * features;
    row[0] = p >= 512 && p < 1024 ? -inf : finite;  // one chunk all -inf
    row[1] = p < 600 ? -inf : finite;               // the first chunk all -inf, then mixed
    row[2] = p == 1700 ? inf : finite;              // +inf in the last chunk
    row[3] = p == 3 ? nan : finite;                 // NaN in the first chunk
    row[4] = -inf;                                  // every value -inf
    row[5] = p % 2 == 0 ? -inf : finite - 200;      // -inf rows everywhere, the rest far below 0
  }
  const Tensor index = make_tensor<int64_t>({rows}, std::vector<int64_t>(static_cast<size_t>(rows), 0));
  const IndexPlan plan(index, 1);
  for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16}) {
    const Tensor src = from_doubles({rows, features}, v, dtype);
    for (int log = 0; log < 2; ++log) {
      SCOPED_TRACE(dtype_label(dtype) + (log ? " log" : ""));
      const Tensor got = scatterx::scatter_softmax(src, plan, log != 0, 0);
      const std::vector<double> want = reference(src, index, 1, log != 0, 0);
      expect_close(got, want, relative_tolerance(dtype), log ? 8 : 1e-3);
      // the reference's own view of the columns: 0, 1 and 5 finite, 2, 3 and 4 NaN
      for (int64_t k = 0; k < features; ++k) EXPECT_EQ(std::isnan(want[1000 * features + k]), k >= 2 && k <= 4) << k;
    }
  }
}

TEST(ScatterSoftmax, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Groups: {-inf, -inf} -> NaN (-inf - -inf); {+inf, 1} -> NaN (inf - inf, and the sum is NaN);
  // {NaN, 1} -> NaN (the maximum is NaN); {-inf, 0} -> softmax 0, 1; log-softmax -inf, 0.
  const Tensor src = make_tensor<double>({8}, {-inf, -inf, inf, 1, nan, 1, -inf, 0});
  const Tensor index = make_tensor<int64_t>({8}, {0, 0, 1, 1, 2, 2, 3, 3});
  const IndexPlan plan(index, 5);
  const std::vector<double> soft = {nan, nan, nan, nan, nan, nan, 0, 1};
  const std::vector<double> logsoft = {nan, nan, nan, nan, nan, nan, -inf, 0};
  expect_close(scatterx::scatter_softmax(src, plan, false), soft, 0);
  expect_close(scatterx::scatter_softmax(src, plan, true), logsoft, 0);
  const Tensor src32 = make_tensor<float>({8}, {-INFINITY, -INFINITY, INFINITY, 1, NAN, 1, -INFINITY, 0});
  expect_close(scatterx::scatter_softmax(src32, plan, false), soft, 0);
  expect_close(scatterx::scatter_softmax(src32, plan, true), logsoft, 0);
  // Random specials (NaN, +-inf, +-0, +-max) in every dtype, against the reference.
  Rng rng(case_seed("ScatterSoftmax.SpecialValues", 0));
  ValueOptions values;
  values.special_rate = 0.05;
  for (DType dtype : float_dtypes()) {
    for (int log = 0; log < 2; ++log) {
      Tensor x = Tensor::empty({400, 67}, dtype);
      fill_random(x, rng, values);
      Tensor idx = Tensor::empty({400}, DType::Int32);
      fill_index(idx, rng, 0, 99);
      const IndexPlan p(idx, 100);
      expect_close(scatterx::scatter_softmax(x, p, log != 0, 1e-12), reference(x, idx, 100, log != 0, 1e-12),
                   relative_tolerance(dtype), log ? 8 : 1e-3);
    }
  }
}

TEST(ScatterSoftmax, EmptyInputs) {
  const Tensor none = Tensor::empty({0}, DType::Int64);
  const IndexPlan plan(none, 3);
  const Tensor out = scatterx::scatter_softmax(Tensor::empty({0, 4}, DType::Float32), plan, false);
  EXPECT_EQ(out.sizes(), (Shape{0, 4}));
  const Tensor index = make_tensor<int64_t>({2}, {1, 1});
  const Tensor no_features =
      scatterx::scatter_softmax(Tensor::empty({2, 0}, DType::Float64), IndexPlan(index, 2), true);
  EXPECT_EQ(no_features.sizes(), (Shape{2, 0}));
}

TEST(ScatterSoftmax, IndependentOfThreadCount) {
  Rng rng(case_seed("ScatterSoftmax.IndependentOfThreadCount", 0));
  Tensor x = Tensor::empty({20000, 70}, DType::Float32);
  fill_random(x, rng);
  Tensor index = Tensor::empty({20000}, DType::Int64);
  fill_index(index, rng, 0, 999);
  // two hubs of thousands of rows: groups cut into chunks, the chunks spread over the threads
  auto* idx = static_cast<int64_t*>(index.data());
  for (int64_t p = 0; p < 20000; p += 3) idx[p] = p % 2 == 0 ? 7 : 500;
  const IndexPlan plan(index, 1000);
  const int threads = omp_get_max_threads();
  for (int log = 0; log < 2; ++log) {
    omp_set_num_threads(1);
    const Tensor one = scatterx::scatter_softmax(x, plan, log != 0, 1e-12);
    omp_set_num_threads(std::max(threads, 3));
    const Tensor many = scatterx::scatter_softmax(x, plan, log != 0, 1e-12);
    omp_set_num_threads(threads);
    EXPECT_TRUE(same_values(one, many));
  }
}

int64_t ulp_distance(float a, float b) {
  int32_t ia;
  int32_t ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return std::abs(int64_t{ia} - int64_t{ib});  // both <= 0 here: same sign
}

TEST(ScatterSoftmax, FloatExpWithinTwoUlp) {
  int64_t worst = 0;
  float worst_at = 0;
  auto check = [&](float x) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const int64_t d = ulp_distance(scatterx::detail::exp_nonpositive(x), want);
    if (d > worst) {
      worst = d;
      worst_at = x;
    }
  };
  for (int64_t i = 0; i <= 2000000; ++i) check(static_cast<float>(-110.0 * static_cast<double>(i) / 2000000));
  for (int64_t i = 0; i <= 1000000; ++i) check(static_cast<float>(-1.0 * static_cast<double>(i) / 1000000));
  for (uint32_t bits = 0x80000000u; bits < 0xFF800000u; bits += 997) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    check(x);
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_at;
  EXPECT_EQ(scatterx::detail::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(scatterx::detail::exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(scatterx::detail::exp_nonpositive(-INFINITY), 0.0f);
  EXPECT_EQ(scatterx::detail::exp_nonpositive(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(scatterx::detail::exp_nonpositive(NAN)));
  EXPECT_TRUE(std::isnan(scatterx::detail::exp_nonpositive(-NAN)));
}

TEST(ScatterSoftmaxErrors, Checked) {
  const Tensor index = make_tensor<int64_t>({3}, {0, 2, 1});
  const IndexPlan plan(index, 3);
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::scatter_softmax(Tensor::zeros({4, 2}, DType::Float32), plan, false);
      },
      {"scatter_softmax: ", "src.size(0)", "positions (3)", "got 4"});
  expect_error<scatterx::ArgumentError>(
      [&] { scatterx::scatter_softmax(Tensor::zeros({}, DType::Float32), plan, true); },
      {"scatter_log_softmax: ", "at least 1 dimension", "0-d"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::scatter_softmax(Tensor::zeros({3, 2}, DType::Int64), plan, false);
      },
      {"scatter_softmax: ", "src of a floating dtype", "int64"});
  // The plan's device is checked before anything touches src: no GPU needed.
  float dummy[6] = {};
  const TensorView on_gpu(dummy, DType::Float32, Shape{3, 2}, scatterx::Device::cuda(0));
  expect_error<scatterx::ArgumentError>(
      [&] { scatterx::scatter_softmax(on_gpu, plan, false); },
      {"scatter_softmax: ", "expected the plan on src's device (cuda:0)", "got a plan on cpu"});
}

// ---- the backward ------------------------------------------------------------

// Any floating tensor's values as doubles, row-major.
std::vector<double> to_doubles(const TensorView& t) {
  const Tensor c = Tensor::clone(t);
  std::vector<double> out(static_cast<size_t>(c.numel()));
  visit_dtype(c.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_type_v<T>) {
      const T* p = static_cast<const T*>(c.data());
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = std::is_same_v<T, double> ? static_cast<double>(p[i]) : static_cast<double>(static_cast<float>(p[i]));
      }
    }
  });
  return out;
}

// The gradient's reference in double: per group and feature, S over the
// group's rows (of g * y, or of g for the log-softmax), then y * (g - S) or
// g - exp(y) * S, from y and g as their dtype holds them.
std::vector<double> grad_reference(const TensorView& y, const TensorView& g, const TensorView& index, int64_t dim_size,
                                   bool log) {
  const std::vector<double> yv = to_doubles(y);
  const std::vector<double> gv = to_doubles(g);
  const int64_t rows = y.size(0);
  const int64_t F = rows == 0 ? 0 : y.numel() / rows;
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(dim_size));
  for (int64_t p = 0; p < rows; ++p) members[index_at(index, p)].push_back(p);
  std::vector<double> out(static_cast<size_t>(rows * F));
  for (const auto& group : members) {
    for (int64_t k = 0; k < F; ++k) {
      double s = 0;
      for (int64_t p : group) s += log ? gv[p * F + k] : gv[p * F + k] * yv[p * F + k];
      for (int64_t p : group) {
        const double y1 = yv[p * F + k];
        const double g1 = gv[p * F + k];
        out[p * F + k] = log ? g1 - std::exp(y1) * s : y1 * (g1 - s);
      }
    }
  }
  return out;
}

TEST(ScatterSoftmaxBackward, MatchesReference) {
  const uint64_t seed = case_seed("ScatterSoftmaxBackward.MatchesReference", 0);
  Rng rng(seed);
  ValueOptions values;
  values.special_rate = 0;
  // small groups only, then hubs of several chunks beside them
  for (const int64_t hub_every : {int64_t{0}, int64_t{3}}) {
    for (DType dtype : float_dtypes()) {
      for (const Shape& features : std::vector<Shape>{{}, {16}, {70}, {3, 5}}) {
        for (int log = 0; log < 2; ++log) {
          const int64_t rows = hub_every == 0 ? 700 : 4000;
          Shape shape{rows};
          for (int64_t d = 0; d < features.size(); ++d) shape.push_back(features[d]);
          SCOPED_TRACE("seed " + std::to_string(seed) + " " + dtype_label(dtype) + " " + shape.str() +
                       (log ? " log" : "") + (hub_every ? " hubs" : ""));
          Tensor index = Tensor::empty({rows}, DType::Int64);
          fill_index(index, rng, 0, 299);
          auto* idx = static_cast<int64_t*>(index.data());
          for (int64_t p = 0; hub_every != 0 && p < rows; p += hub_every) idx[p] = p % 2 == 0 ? 5 : 6;
          const IndexPlan plan(index, 300);
          Tensor src = Tensor::empty(shape, dtype);
          fill_random(src, rng, values);
          const Tensor y = scatterx::scatter_softmax(src, plan, log != 0, 1e-12);
          Tensor g = Tensor::empty(shape, dtype);
          fill_random(g, rng, values);
          const Tensor got = scatterx::scatter_softmax_backward(y, g, plan, log != 0);
          EXPECT_EQ(got.sizes(), y.sizes());
          // |gradients| are up to |g| * (1 + group size * max y): relative to 1 below that
          expect_close(got, grad_reference(y, g, index, 300, log != 0), relative_tolerance(dtype) * 4, 4);
        }
      }
    }
  }
}

TEST(ScatterSoftmaxBackward, StridedGradAndThreadCounts) {
  Rng rng(case_seed("ScatterSoftmaxBackward.StridedGradAndThreadCounts", 0));
  ValueOptions values;
  values.special_rate = 0;
  Tensor src = Tensor::empty({6000, 33}, DType::Float32);
  fill_random(src, rng, values);
  Tensor index = Tensor::empty({6000}, DType::Int32);
  fill_index(index, rng, 0, 199);
  auto* idx = static_cast<int32_t*>(index.data());
  for (int64_t p = 0; p < 6000; p += 2) idx[p] = 7;  // a hub of 3000 rows: 6 chunks
  const IndexPlan plan(index, 200);
  const int threads = omp_get_max_threads();
  for (int log = 0; log < 2; ++log) {
    const Tensor y = scatterx::scatter_softmax(src, plan, log != 0);
    // grad read through a step-2 view of a wider buffer (copied once by the front end)
    Tensor storage = Tensor::empty({6000, 66}, DType::Float32);
    fill_random(storage, rng, values);
    const TensorView g = storage.slice(1, 0, 66, 2);
    ASSERT_FALSE(g.is_contiguous());
    omp_set_num_threads(1);
    const Tensor one = scatterx::scatter_softmax_backward(y, g, plan, log != 0);
    omp_set_num_threads(std::max(threads, 3));
    const Tensor many = scatterx::scatter_softmax_backward(y, g, plan, log != 0);
    omp_set_num_threads(threads);
    EXPECT_TRUE(same_values(one, many));
    expect_close(one, grad_reference(y, g, index, 200, log != 0), 4e-5, 4);
  }
}

TEST(ScatterSoftmaxBackward, LogSoftmaxOfPositiveValues) {
  // exp of the forward's values takes the vectorized exp for <= 0; a positive one (a log-softmax with eps < 0,
  // or any tensor a caller passes) is redone exactly.
  const Tensor y = make_tensor<float>({4, 2}, {0.5f, -1.0f, -0.25f, 3.0f, -2.0f, 0.0f, 1e-30f, -INFINITY});
  const Tensor g = make_tensor<float>({4, 2}, {1.0f, 2.0f, -1.0f, 0.5f, 0.25f, -3.0f, 2.0f, 1.0f});
  const Tensor index = make_tensor<int64_t>({4}, {0, 0, 1, 0});
  const IndexPlan plan(index, 2);
  expect_close(scatterx::scatter_softmax_backward(y, g, plan, true), grad_reference(y, g, index, 2, true), 1e-6);
}

TEST(ScatterSoftmaxBackward, EmptyAndErrors) {
  const Tensor none = Tensor::empty({0}, DType::Int64);
  const Tensor empty = scatterx::scatter_softmax_backward(
      Tensor::empty({0, 3}, DType::Float32), Tensor::empty({0, 3}, DType::Float32), IndexPlan(none, 2), false);
  EXPECT_EQ(empty.sizes(), (Shape{0, 3}));
  const Tensor index = make_tensor<int64_t>({3}, {0, 2, 1});
  const IndexPlan plan(index, 3);
  const Tensor y = Tensor::zeros({3, 2}, DType::Float32);
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::scatter_softmax_backward(y, Tensor::zeros({3, 2}, DType::Float64), plan, false);
      },
      {"scatter_softmax_backward: ", "grad of out's dtype (float32)", "got float64"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::scatter_softmax_backward(Tensor::zeros({3, 2}, DType::Int32), Tensor::zeros({3, 2}, DType::Int32),
                                           plan, true);
      },
      {"scatter_log_softmax_backward: ", "out of a floating dtype", "int32"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::scatter_softmax_backward(y, Tensor::zeros({3, 3}, DType::Float32), plan, false);
      },
      {"scatter_softmax_backward: ", "grad of out's shape [3, 2]", "got [3, 3]"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::scatter_softmax_backward(Tensor::zeros({4, 2}, DType::Float32), Tensor::zeros({4, 2}, DType::Float32),
                                           plan, false);
      },
      {"scatter_softmax_backward: ", "positions (3)", "got 4"});
  float dummy[6] = {};
  const TensorView on_gpu(dummy, DType::Float32, Shape{3, 2}, scatterx::Device::cuda(0));
  expect_error<scatterx::ArgumentError>([&] { scatterx::scatter_softmax_backward(on_gpu, on_gpu, plan, false); },
                                        {"scatter_softmax_backward: ", "plan on out's device (cuda:0)"});
}

}  // namespace
}  // namespace sxt

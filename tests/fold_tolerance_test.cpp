// The GPU suite's comparison of order-dependent folds (tests/fold_tolerance.h),
// checked here where it can run: a fold in a random order that rounds to the
// element type at every step (what a GPU atomic does to float16, bfloat16 and
// float32) is accepted, and a fold that drops one value is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "tests/fold_tolerance.h"
#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

struct Fold1d {
  Tensor self;
  Tensor index;
  Tensor src;
};

// `n` values of `dtype` onto `destinations` slots of a 1-d self.
Fold1d random_fold(DType dtype, Reduce reduce, int64_t destinations, int64_t n, Rng& rng) {
  const ValueOptions values = fold_values(dtype, reduce);
  Fold1d f{Tensor::empty({destinations}, dtype), Tensor::empty({n}, DType::Int64), Tensor::empty({n}, dtype)};
  fill_random(f.self, rng, values);
  fill_random(f.src, rng, values);
  fill_index(f.index, rng, 0, destinations - 1);
  return f;
}

// scatter_reduce_ as an atomic does it: each destination folds its values in
// a random order, rounding to T after every step; `skip` (a position) is
// left out. Mean divides the folded sum by the count at the end.
template <typename T>
Tensor atomic_fold(const Fold1d& f, Reduce reduce, bool include_self, Rng& rng, int64_t skip = -1) {
  Tensor out = Tensor::clone(f.self);
  const int64_t n = f.index.numel();
  const int64_t* index = f.index.data_as<int64_t>();
  const T* src = f.src.data_as<T>();
  T* o = out.data_as<T>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.uniform(0, i)]);
  for (int64_t d = 0; d < out.numel(); ++d) {
    const bool prod = reduce == Reduce::Prod;
    float acc = include_self ? static_cast<float>(o[d]) : (prod ? 1.0f : 0.0f);
    int64_t count = include_self ? 1 : 0;
    bool hit = false;
    for (const int64_t i : order) {
      if (index[i] != d) continue;
      hit = true;
      if (i == skip) continue;
      const float x = static_cast<float>(src[i]);
      acc = static_cast<float>(T(prod ? acc * x : acc + x));
      ++count;
    }
    if (!hit) continue;
    if (reduce == Reduce::Mean) acc = static_cast<float>(T(acc / static_cast<float>(count)));
    o[d] = T(acc);
  }
  return out;
}

FoldBounds bounds_of(const Fold1d& f, const Tensor& expected, Reduce reduce, bool include_self) {
  return fold_bounds(expected, reduce, f.self, f.src, [&](const TensorView& a, const TensorView& b, Reduce r, bool) {
    return ref::scatter_reduce(a, 0, f.index, b, r, include_self);
  });
}

template <typename T>
class FoldToleranceTest : public ::testing::Test {};
using FoldTypes = ::testing::Types<Half, BFloat16, float>;
struct FoldTypeNames {
  template <typename T>
  static std::string GetName(int) {
    return sxt::dtype_label(scatterx::dtype_of<T>());
  }
};
TYPED_TEST_SUITE(FoldToleranceTest, FoldTypes, FoldTypeNames);

TYPED_TEST(FoldToleranceTest, AcceptsAnyOrderWithRoundingAtEveryStep) {
  using T = TypeParam;
  const DType dtype = scatterx::dtype_of<T>();
  for (Reduce reduce : {Reduce::Sum, Reduce::Mean, Reduce::Prod}) {
    for (bool include_self : {true, false}) {
      run_cases(20, [&](Rng& rng, int case_number) {
        // hot destinations (hundreds of values each) and spread ones
        const int64_t destinations = case_number % 2 == 0 ? 2 : 40;
        const Fold1d f = random_fold(dtype, reduce, destinations, 1000, rng);
        const Tensor expected = ref::scatter_reduce(f.self, 0, f.index, f.src, reduce, include_self);
        const FoldBounds bounds = bounds_of(f, expected, reduce, include_self);
        const Tensor actual = atomic_fold<T>(f, reduce, include_self, rng);
        EXPECT_TRUE(fold_matches(actual, expected, reduce, false, &bounds))
            << reduce_name(reduce) << " include_self " << include_self;
      });
    }
  }
}

TYPED_TEST(FoldToleranceTest, RefusesADroppedValue) {
  using T = TypeParam;
  const DType dtype = scatterx::dtype_of<T>();
  Rng rng(case_seed(current_test_name(), 0));
  const Tensor self = make_tensor<T>({2}, {T(0.5f), T(1.0f)});
  const Tensor index = make_tensor<int64_t>({5}, {0, 0, 0, 0, 0});
  for (Reduce reduce : {Reduce::Sum, Reduce::Mean, Reduce::Prod}) {
    const bool prod = reduce == Reduce::Prod;
    const Tensor src = prod ? make_tensor<T>({5}, {T(1.09f), T(0.95f), T(1.05f), T(0.92f), T(1.08f)})
                            : make_tensor<T>({5}, {T(3.0f), T(-2.0f), T(1.5f), T(2.5f), T(-1.0f)});
    const Fold1d f{self, index, src};
    const Tensor expected = ref::scatter_reduce(self, 0, index, src, reduce, true);
    const FoldBounds bounds = bounds_of(f, expected, reduce, true);
    EXPECT_TRUE(fold_matches(atomic_fold<T>(f, reduce, true, rng), expected, reduce, false, &bounds))
        << dtype_label(dtype) << " " << reduce_name(reduce);
    EXPECT_FALSE(fold_matches(atomic_fold<T>(f, reduce, true, rng, /*skip=*/0), expected, reduce, false, &bounds))
        << dtype_label(dtype) << " " << reduce_name(reduce) << ": the first value dropped";
  }
}

// Inputs of an order-dependent fold hold no +-max-finite, and products no
// factor far from one; other folds keep them.
TEST(FoldValues, OrderDependentFoldsGetOrderIndependentInputs) {
  Rng rng(5);
  const ValueOptions sum = fold_values(DType::Float32, Reduce::Sum);
  const ValueOptions prod = fold_values(DType::BFloat16, Reduce::Prod);
  EXPECT_FALSE(sum.finite_extremes);
  EXPECT_FALSE(prod.finite_extremes);
  EXPECT_TRUE(fold_values(DType::Float32, Reduce::Amax).finite_extremes);
  EXPECT_TRUE(fold_values(DType::Int32, Reduce::Sum).finite_extremes);
  for (int i = 0; i < 100000; ++i) {
    const float s = random_value<float>(rng, sum);
    EXPECT_FALSE(std::isfinite(s) && std::abs(s) > 4.0f) << s;
    const float p = static_cast<float>(random_value<BFloat16>(rng, prod));
    EXPECT_FALSE(std::isfinite(p) && p != 0.0f && (std::abs(p) > 1.11f || std::abs(p) < 0.9f)) << p;
  }
}

}  // namespace
}  // namespace sxt

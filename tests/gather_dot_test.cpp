// gather_dot against a serial reference in long double: every floating dtype,
// both index dtypes, strided and non-contiguous operands, multi-dimensional
// rows, empty edge lists, then the error paths. The bound on the difference is
// the summation error of an n-term dot in the accumulation type (n * eps *
// sum |a * b|) plus the final rounding to the output dtype.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "scatterx.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

int64_t index_at(const TensorView& v, int64_t e) {
  const int64_t c[1] = {e};
  return v.dtype() == DType::Int32 ? int64_t{load<int32_t>(v, c)} : load<int64_t>(v, c);
}

// Unit roundoff of the accumulation type and of the output dtype.
double accumulation_eps(DType dtype) { return dtype == DType::Float64 ? 0x1p-53 : 0x1p-24; }
double output_eps(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return 0x1p-11;
    case DType::BFloat16:
      return 0x1p-8;
    default:
      return accumulation_eps(dtype);
  }
}

void expect_matches_reference(const TensorView& a, const TensorView& ai, const TensorView& b, const TensorView& bi) {
  const Tensor got = scatterx::gather_dot(a, ai, b, bi);
  ASSERT_EQ(got.dim(), 1);
  ASSERT_EQ(got.size(0), ai.size(0));
  ASSERT_EQ(got.dtype(), a.dtype());
  const Tensor ac = Tensor::clone(a);
  const Tensor bc = Tensor::clone(b);
  const int64_t features = a.size(0) == 0 ? 0 : ac.numel() / a.size(0);
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, scatterx::Half> ||
                  std::is_same_v<T, scatterx::BFloat16>) {
      const T* ad = static_cast<const T*>(ac.data());
      const T* bd = static_cast<const T*>(bc.data());
      for (int64_t e = 0; e < ai.size(0); ++e) {
        long double want = 0;
        long double magnitude = 0;
        for (int64_t f = 0; f < features; ++f) {
          const long double p = static_cast<long double>(static_cast<double>(ad[index_at(ai, e) * features + f])) *
                                static_cast<double>(bd[index_at(bi, e) * features + f]);
          want += p;
          magnitude += std::fabs(p);
        }
        const int64_t c[1] = {e};
        const double value = static_cast<double>(load<T>(got, c));
        const double bound = static_cast<double>(features) * accumulation_eps(a.dtype()) * magnitude +
                             output_eps(a.dtype()) * std::fabs(static_cast<double>(want)) * 1.01;
        EXPECT_LE(std::fabs(value - static_cast<double>(want)), bound) << "edge " << e;
      }
    }
  });
}

TEST(GatherDot, MatchesReference) {
  Rng rng(case_seed("GatherDot.MatchesReference", 0));
  ValueOptions values;
  values.special_rate = 0;
  const std::vector<DType> dtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
  for (DType dtype : dtypes) {
    for (DType a_index_dtype : {DType::Int32, DType::Int64}) {
      for (const Shape& row : {Shape{}, Shape{1}, Shape{7}, Shape{64}, Shape{131}, Shape{3, 5}}) {
        SCOPED_TRACE(dtype_label(dtype) + " " + dtype_label(a_index_dtype) + " row " + row.str());
        const int64_t edges = rng.uniform(0, 200);
        Shape as = {rng.uniform(1, 20)};
        Shape bs = {rng.uniform(1, 20)};
        for (int64_t s : row) as.push_back(s), bs.push_back(s);
        Tensor a = Tensor::empty(as, dtype);
        Tensor b_store = Tensor::empty(bs, dtype);
        fill_random(a, rng, values);
        fill_random(b_store, rng, values);
        // b is read through a reversed view of dim 0 (non-contiguous rows).
        const TensorView b = TensorView(b_store).flip(0);
        Tensor ai = Tensor::empty({edges}, a_index_dtype);
        Tensor bi = Tensor::empty({edges}, DType::Int64);
        fill_index(ai, rng, 0, as[0] - 1);
        fill_index(bi, rng, 0, bs[0] - 1);
        expect_matches_reference(a, ai, b, bi);
      }
    }
  }
}

// The same bits on one thread and on several (each dot is summed in a fixed
// order by one thread, however the edges are split).
TEST(GatherDot, IndependentOfThreadCount) {
  Rng rng(case_seed("GatherDot.IndependentOfThreadCount", 0));
  const Tensor rows = Tensor::empty({500, 67}, DType::Float32);
  const Tensor positions = Tensor::empty({100000}, DType::Int64);
  fill_random(rows, rng);
  fill_index(positions, rng, 0, 499);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Tensor serial = scatterx::gather_dot(rows, positions, rows, positions.flip(0));
  omp_set_num_threads(std::max(threads, 3));
  const Tensor parallel = scatterx::gather_dot(rows, positions, rows, positions.flip(0));
  omp_set_num_threads(threads);
  EXPECT_TRUE(same_values(serial, parallel));
}

TEST(GatherDot, ZeroFeaturesAndNoEdges) {
  const Tensor a = Tensor::zeros({3, 0}, DType::Float32);
  const Tensor ai = make_tensor<int64_t>({2}, {0, 2});
  EXPECT_TRUE(same_values(scatterx::gather_dot(a, ai, a, ai), Tensor::zeros({2}, DType::Float32)));
  const Tensor none = Tensor::empty({0}, DType::Int32);
  const Tensor x = make_tensor<double>({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(scatterx::gather_dot(x, none, x, none).size(0), 0);
  EXPECT_TRUE(same_values(scatterx::gather_dot(x, make_tensor<int64_t>({1}, {1}), x, make_tensor<int64_t>({1}, {0})),
                          make_tensor<double>({1}, {11})));
}

TEST(GatherDotErrors, Checked) {
  const Tensor a = Tensor::zeros({4, 3}, DType::Float32);
  const Tensor b = Tensor::zeros({5, 3}, DType::Float32);
  const Tensor two = make_tensor<int64_t>({2}, {0, 1});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::gather_dot(a, two, b, make_tensor<int64_t>({2}, {0, 5}));
      },
      {"gather_dot: b_index 5 is out of bounds", "(b_index position [1])"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::gather_dot(a, make_tensor<int32_t>({2}, {-1, 0}), b, two);
      },
      {"gather_dot: a_index -1 is out of bounds", "(a_index position [0])"});
  expect_error<scatterx::ArgumentError>([&] { scatterx::gather_dot(a, two, b, make_tensor<int64_t>({1}, {0})); },
                                        {"gather_dot: ", "b_index of length 2", "got 1"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::gather_dot(a, two, Tensor::zeros({5, 4}, DType::Float32), two);
      },
      {"gather_dot: ", "a and b to match after dim 0", "[4, 3]", "[5, 4]"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::gather_dot(a, two, Tensor::zeros({5, 3}, DType::Float64), two);
      },
      {"gather_dot: ", "b", "float64"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::gather_dot(Tensor::zeros({4, 3}, DType::Int64), two, Tensor::zeros({5, 3}, DType::Int64), two);
      },
      {"gather_dot: ", "floating dtype", "int64"});
  expect_error<scatterx::DTypeError>([&] { scatterx::gather_dot(a, Tensor::zeros({2}, DType::Float32), b, two); },
                                     {"gather_dot: ", "a_index"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::gather_dot(a, Tensor::zeros({2, 1}, DType::Int64), b, two);
      },
      {"gather_dot: ", "a_index to be 1-d", "[2, 1]"});
}

}  // namespace
}  // namespace sxt

// The element-wise fold the distributed layer reduces received data with
// (ops/runtime/combine.h), against the reference's scatter_reduce over an
// identity index: the same reduction with one source value per position.
#include <gtest/gtest.h>

#include <string>

#include "ops/runtime/combine.h"
#include "ops/scatter/scatter.h"
#include "tests/reference.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

using scatterx::DType;
using scatterx::Reduce;
using scatterx::Tensor;

constexpr Reduce kFoldReduces[] = {Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};

std::string fold_label(DType dtype, Reduce reduce, int64_t count) {
  return dtype_label(dtype) + " " + reduce_label(reduce) + " count " + std::to_string(count);
}

Tensor identity_index(int64_t n) {
  Tensor index = Tensor::empty({n}, DType::Int64);
  auto* p = static_cast<int64_t*>(index.data());
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  return index;
}

TEST(CombineTest, PlainFoldMatchesTheReference) {
  Rng rng(case_seed(current_test_name(), 0));
  const int64_t n = 4099;
  const Tensor index = identity_index(n);
  for (DType dtype : all_dtypes()) {
    for (Reduce reduce : kFoldReduces) {
      if (!scatterx::reduce_supported(reduce, dtype)) continue;
      // A mean of two values: the reference divides by 1 + 1 (self included).
      const int64_t count = reduce == Reduce::Mean ? 2 : 0;
      SCOPED_TRACE(fold_label(dtype, reduce, count));
      const Tensor a = Tensor::empty({n}, dtype);
      const Tensor b = Tensor::empty({n}, dtype);
      fill_random(a, rng);
      fill_random(b, rng);
      const Tensor expected = ref::scatter_reduce(a, 0, index, b, reduce, true);
      // out separate, and (as the contract allows) out aliasing a or b.
      const Tensor out = Tensor::empty({n}, dtype);
      scatterx::detail::combine_cpu(out.data(), a.data(), b.data(), n, dtype, reduce, count, "test");
      EXPECT_TRUE(same_values(out, expected));
      const Tensor a_in_place = Tensor::clone(a);
      scatterx::detail::combine_cpu(a_in_place.data(), a_in_place.data(), b.data(), n, dtype, reduce, count, "test");
      EXPECT_TRUE(same_values(a_in_place, expected));
      const Tensor b_in_place = Tensor::clone(b);
      scatterx::detail::combine_cpu(b_in_place.data(), a.data(), b_in_place.data(), n, dtype, reduce, count, "test");
      EXPECT_TRUE(same_values(b_in_place, expected));
    }
  }
}

// The bitwise folds (torch.distributed's BAND, BOR, BXOR), which no scatter
// reduce has: against the operators on the same integers, for every
// integer dtype and bool.
template <typename T>
void check_bitwise_folds(DType dtype, Rng& rng) {
  const int64_t n = 4099;
  const Tensor a = Tensor::empty({n}, dtype);
  const Tensor b = Tensor::empty({n}, dtype);
  fill_random(a, rng);
  fill_random(b, rng);
  const T* pa = static_cast<const T*>(a.data());
  const T* pb = static_cast<const T*>(b.data());
  for (Reduce reduce : {Reduce::BitAnd, Reduce::BitOr, Reduce::BitXor}) {
    SCOPED_TRACE(dtype_label(dtype) + " " + scatterx::reduce_name(reduce));
    ASSERT_TRUE(scatterx::reduce_supported(reduce, dtype));
    const Tensor out = Tensor::empty({n}, dtype);
    scatterx::detail::combine_cpu(out.data(), a.data(), b.data(), n, dtype, reduce, 0, "test");
    const T* po = static_cast<const T*>(out.data());
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T want = reduce == Reduce::BitAnd  ? static_cast<T>(pa[i] & pb[i])
                     : reduce == Reduce::BitOr ? static_cast<T>(pa[i] | pb[i])
                                               : static_cast<T>(pa[i] ^ pb[i]);
      wrong += po[i] != want;
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(CombineTest, BitwiseFoldsMatchTheOperators) {
  Rng rng(case_seed(current_test_name(), 0));
  check_bitwise_folds<int8_t>(DType::Int8, rng);
  check_bitwise_folds<uint8_t>(DType::UInt8, rng);
  check_bitwise_folds<int16_t>(DType::Int16, rng);
  check_bitwise_folds<int32_t>(DType::Int32, rng);
  check_bitwise_folds<int64_t>(DType::Int64, rng);
  check_bitwise_folds<bool>(DType::Bool, rng);
}

TEST(CombineTest, BitwiseFoldsRejectFloatsAndScatterOps) {
  for (DType dtype : all_dtypes()) {
    const bool integer = scatterx::is_integral(dtype, true);
    EXPECT_EQ(scatterx::reduce_supported(Reduce::BitXor, dtype), integer) << dtype_label(dtype);
  }
  const Tensor x = Tensor::zeros({4}, DType::Float32);
  EXPECT_THROW(scatterx::detail::combine_cpu(x.data(), x.data(), x.data(), 4, DType::Float32, Reduce::BitOr, 0, "test"),
               scatterx::DTypeError);
  // the scatter ops take scatter_reduce's reduces only
  const Tensor self = Tensor::zeros({4}, DType::Int32);
  const Tensor index = identity_index(4);
  expect_error<scatterx::ArgumentError>([&] { scatterx::scatter_reduce_(self, 0, index, self, Reduce::BitAnd, true); },
                                        {"scatter_reduce_", "reduce", "band"});
}

}  // namespace
}  // namespace sxt

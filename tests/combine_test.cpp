// The element-wise fold the distributed layer reduces received data with
// (ops/runtime/combine.h), against the reference's scatter_reduce over an
// identity index: the same reduction with one source value per position.
#include <gtest/gtest.h>

#include <string>

#include "ops/runtime/combine.h"
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

}  // namespace
}  // namespace sxt

// The slice-wise CPU scatter has two folds that must agree bit for bit: the
// grouped one (positions sorted by target) and the unsorted one (each thread
// owns a range of targets and scans the index in order), picked by whether
// the destination fits SCATTERX_SCATTER_UNSORTED_BYTES. Each case runs
// index_add_ / index_reduce_ with the threshold forcing one fold, then the
// other, against the serial reference: every dtype x reduce x include_self x
// index dtype, rows long and short, outer dims, skewed targets, untouched
// targets and non-contiguous views.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

constexpr const char* kVariable = "SCATTERX_SCATTER_UNSORTED_BYTES";
constexpr const char* kAlwaysSort = "0";
constexpr const char* kNeverSort = "4611686018427387904";

class UnsortedFoldSuite : public ::testing::TestWithParam<OpParam> {
 protected:
  void run(int cases) {
    const OpParam& p = GetParam();
    const ValueOptions values = value_options_for(p.reduce);
    run_cases(cases, [&](Rng& rng, int case_number) {
      const int rank = static_cast<int>(rng.uniform(1, 3));
      const int64_t dim = rng.uniform(0, rank - 1);
      Shape self_shape;
      for (int64_t d = 0; d < rank; ++d) self_shape.push_back(rng.uniform(1, rank == 1 ? 1 : 40 / rank));
      self_shape[dim] = rng.uniform(1, 120);
      Shape source_shape = self_shape;
      source_shape[dim] = case_number == 0 ? 0 : rng.uniform(1, 400);
      const Shape index_shape = {source_shape[dim]};
      // skewed: most rows land on a few targets, as power-law graphs do
      const bool skewed = rng.chance(0.3);
      const int64_t hi = skewed ? std::min<int64_t>(self_shape[dim], 3) - 1 : self_shape[dim] - 1;
      Buf index = index_buf(index_shape, p.index_dtype, random_layout(rng, false), rng, 0, hi);
      Buf source = random_buf(source_shape, p.dtype, random_layout(rng, true), rng, values);
      const unsigned self_layout = random_layout(rng, false);
      const bool add = p.reduce == Reduce::Sum;
      const uint64_t self_seed = rng.bits();
      const Scalar alpha = p.variant ? other_alpha(p.dtype, rng) : one_alpha(p.dtype);
      for (const char* threshold : {kAlwaysSort, kNeverSort}) {
        SCOPED_TRACE(std::string(kVariable) + "=" + threshold);
        ScopedEnv env(kVariable, threshold);
        Rng self_rng(self_seed);
        Buf self = random_buf(self_shape, p.dtype, self_layout, self_rng, values);
        if (add) {
          check_index_op(Reduce::Sum, true, alpha, false, dim, self, index, source);
        } else {
          check_index_op(p.reduce, p.include_self, Scalar(), false, dim, self, index, source);
        }
      }
    });
  }
};

using UnsortedIndexAddTest = UnsortedFoldSuite;
TEST_P(UnsortedIndexAddTest, BothFoldsMatchReference) { run(12); }
INSTANTIATE_TEST_SUITE_P(UnsortedIndexAdd, UnsortedIndexAddTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Sum};
                           spec.name_reduce = false;
                           spec.variant_names[0] = "AlphaOne";
                           spec.variant_names[1] = "AlphaOther";
                           return spec;
                         }())),
                         param_name);

using UnsortedIndexReduceTest = UnsortedFoldSuite;
TEST_P(UnsortedIndexReduceTest, BothFoldsMatchReference) { run(12); }
INSTANTIATE_TEST_SUITE_P(UnsortedIndexReduce, UnsortedIndexReduceTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};
                           spec.vary_include_self = true;
                           return spec;
                         }())),
                         param_name);

}  // namespace
}  // namespace sxt

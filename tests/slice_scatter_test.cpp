// Slice-wise scatters: the GNN aggregation pattern, where one index value
// selects a whole row. scatter_* along dim 0 with an index broadcast from
// [E, 1] to [E, F] (stride 0, as torch users pass it), and index_add_ /
// index_reduce_ of [E, F] rows, for row widths 1, 3, 16, 64 and 300 (the
// library folds rows of >= 16 elements by target group, in chunks of 256).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/op_checks.h"

namespace sxt {
namespace {

const int64_t kWidths[] = {1, 3, 16, 64, 300};

// A broadcast index of shape `shape` whose values vary only along `dim`,
// built in one of several ways (expanded from size 1, from a transposed or a
// flipped base).
Buf broadcast_index(const Shape& shape, int64_t dim, DType index_dtype, int64_t bound, bool heavy, Rng& rng) {
  const int64_t hi = heavy ? std::min<int64_t>(bound, 3) - 1 : bound - 1;
  Shape narrow = shape;
  for (int64_t d = 0; d < shape.size(); ++d) {
    if (d != dim) narrow[d] = 1;
  }
  Buf b;
  switch (rng.uniform(0, 2)) {
    case 0:  // [E, 1] contiguous, expanded
      b = make_buf(narrow, index_dtype, kContiguous, rng, [&](const TensorView& t) { fill_index(t, rng, 0, hi); });
      break;
    case 1:  // [1, E] transposed to [E, 1], expanded; or offset / step-2
      b = make_buf(narrow, index_dtype, kPermute | kStep2, rng,
                   [&](const TensorView& t) { fill_index(t, rng, 0, hi); });
      break;
    default:  // reversed along dim
      b = make_buf(narrow, index_dtype, kFlip | kOffset, rng, [&](const TensorView& t) { fill_index(t, rng, 0, hi); });
      break;
  }
  b.view = b.view.expand(shape);
  b.layout |= kExpand;
  return b;
}

class SliceScatterTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(SliceScatterTest, BroadcastIndexRows) {
  const OpParam& p = GetParam();
  const ValueOptions values = value_options_for(p.reduce);
  run_cases(4, [&](Rng& rng, int case_number) {
    for (int64_t width : kWidths) {
      SCOPED_TRACE("row width " + std::to_string(width));
      const bool heavy = case_number % 2 == 0;
      const int64_t nodes = heavy ? rng.uniform(1, 3) : rng.uniform(4, 40);
      const int64_t edges = rng.uniform(0, width >= 64 ? 60 : 150);
      const bool three_d = case_number == 3;
      // 2-d: self [N, F], index/src [E, F], dim 0 (or -2).
      // 3-d: self [2, N, F], index/src [2, E, F], dim 1 (or -2).
      const Shape self_shape = three_d ? Shape{2, nodes, width} : Shape{nodes, width};
      const Shape index_shape = three_d ? Shape{2, edges, width} : Shape{edges, width};
      const int64_t dim = three_d ? 1 : 0;
      const int64_t passed_dim = rng.chance(0.5) ? dim : -2;
      // self: contiguous rows most of the time, sometimes strided or reversed
      const unsigned self_layout = rng.chance(0.6) ? kContiguous : random_layout(rng, false);
      Shape src_shape = index_shape;
      if (rng.chance(0.3)) src_shape[dim] += rng.uniform(1, 3);  // src larger than index
      const unsigned src_layout = rng.chance(0.6) ? kContiguous : random_layout(rng, false);
      Buf self = random_buf(self_shape, p.dtype, self_layout, rng, values);
      Buf index = broadcast_index(index_shape, dim, p.index_dtype, nodes, heavy, rng);
      Buf src = random_buf(src_shape, p.dtype, src_layout, rng, values);
      switch (p.reduce) {
        case Reduce::None:
          check_scatter(ScatterForm::Src, Reduce::None, true, passed_dim, self, index, &src, Scalar());
          check_scatter(ScatterForm::Value, Reduce::None, true, passed_dim, self, index, nullptr,
                        random_scalar(p.dtype, rng));
          break;
        case Reduce::Sum:
          check_scatter(ScatterForm::Add, Reduce::Sum, true, passed_dim, self, index, &src, Scalar());
          check_scatter(ScatterForm::Reduce, Reduce::Sum, false, passed_dim, self, index, &src, Scalar());
          check_scatter(ScatterForm::Value, Reduce::Sum, true, passed_dim, self, index, nullptr,
                        random_scalar(p.dtype, rng));
          break;
        case Reduce::Prod:
          check_scatter(ScatterForm::Src, Reduce::Prod, true, passed_dim, self, index, &src, Scalar());
          check_scatter(ScatterForm::Reduce, Reduce::Prod, false, passed_dim, self, index, &src, Scalar());
          break;
        default:
          check_scatter(ScatterForm::Reduce, p.reduce, true, passed_dim, self, index, &src, Scalar());
          check_scatter(ScatterForm::Reduce, p.reduce, false, passed_dim, self, index, &src, Scalar());
          break;
      }
      if (::testing::Test::HasFailure()) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(SliceScatter, SliceScatterTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::None, Reduce::Sum,  Reduce::Prod,
                                           Reduce::Mean, Reduce::Amax, Reduce::Amin};
                           return spec;
                         }())),
                         param_name);

class SliceIndexOpTest : public ::testing::TestWithParam<OpParam> {};

// index_add_ (reduce Sum) / index_reduce_ of whole rows: self [N, F],
// index [E], source [E, F], dim 0; also along dim 1 of [F, N] (columns).
TEST_P(SliceIndexOpTest, Rows) {
  const OpParam& p = GetParam();
  const ValueOptions values = value_options_for(p.reduce);
  run_cases(4, [&](Rng& rng, int case_number) {
    for (int64_t width : kWidths) {
      SCOPED_TRACE("row width " + std::to_string(width));
      const bool heavy = case_number % 2 == 0;
      const int64_t nodes = heavy ? rng.uniform(1, 3) : rng.uniform(4, 40);
      const int64_t edges = rng.uniform(0, width >= 64 ? 60 : 150);
      const bool columns = case_number == 3;
      const Shape self_shape = columns ? Shape{width, nodes} : Shape{nodes, width};
      const Shape source_shape = columns ? Shape{width, edges} : Shape{edges, width};
      const int64_t dim = columns ? 1 : 0;
      const int64_t hi = heavy ? std::min<int64_t>(nodes, 3) - 1 : nodes - 1;
      Buf self =
          random_buf(self_shape, p.dtype, rng.chance(0.6) ? kContiguous : random_layout(rng, false), rng, values);
      Buf index =
          index_buf({edges}, p.index_dtype, rng.chance(0.6) ? kContiguous : random_layout(rng, false), rng, 0, hi);
      Buf source =
          random_buf(source_shape, p.dtype, rng.chance(0.6) ? kContiguous : random_layout(rng, true), rng, values);
      if (p.reduce == Reduce::Sum) {
        // the default alpha, except for bool (see IndexKnownAnswers.BoolWithDefaultAlpha)
        const bool default_alpha = p.dtype != DType::Bool;
        check_index_op(Reduce::Sum, true, one_alpha(p.dtype), default_alpha, dim, self, index, source);
        const Scalar alpha = other_alpha(p.dtype, rng);
        check_index_op(Reduce::Sum, true, alpha, false, dim, self, index, source);
      } else {
        check_index_op(p.reduce, true, Scalar(), false, dim, self, index, source);
        check_index_op(p.reduce, false, Scalar(), false, dim, self, index, source);
      }
      if (::testing::Test::HasFailure()) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(SliceIndexOp, SliceIndexOpTest, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};
                           return spec;
                         }())),
                         param_name);

}  // namespace
}  // namespace sxt

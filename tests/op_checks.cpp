#include "tests/op_checks.h"

#include "tests/reference.h"

namespace sxt {

std::vector<OpParam> make_params(const ParamSpec& spec) {
  std::vector<OpParam> params;
  const bool variants = spec.variant_names[0] != nullptr;
  for (DType dtype : all_dtypes()) {
    for (Reduce reduce : spec.reduces) {
      if (!scatterx::reduce_supported(reduce, dtype)) continue;
      for (DType index_dtype : {DType::Int32, DType::Int64}) {
        for (int s = 0; s < (spec.vary_include_self ? 2 : 1); ++s) {
          for (int v = 0; v < (variants ? 2 : 1); ++v) {
            OpParam p;
            p.dtype = dtype;
            p.reduce = reduce;
            p.index_dtype = index_dtype;
            p.include_self = s == 0;
            p.variant = v == 1;
            p.name = dtype_label(dtype);
            if (spec.name_reduce) p.name += "_" + reduce_label(reduce);
            p.name += "_Index" + dtype_label(index_dtype);
            if (spec.vary_include_self) p.name += p.include_self ? "_IncludeSelf" : "_ExcludeSelf";
            if (variants) p.name += std::string("_") + spec.variant_names[v];
            params.push_back(p);
          }
        }
      }
    }
  }
  return params;
}

std::string param_name(const ::testing::TestParamInfo<OpParam>& info) { return info.param.name; }

ValueOptions value_options_for(Reduce reduce) {
  ValueOptions o;
  switch (reduce) {
    case Reduce::Prod:
      o.near_one = true;
      o.true_rate = 0.85;
      break;
    case Reduce::Amax:
      o.special_rate = 0.12;
      o.true_rate = 0.2;
      break;
    case Reduce::Amin:
      o.special_rate = 0.12;
      o.true_rate = 0.8;
      break;
    case Reduce::Mean:
      o.special_rate = 0.005;
      break;
    default:
      break;
  }
  return o;
}

Scalar one_alpha(DType dtype) { return dtype == DType::Bool ? Scalar(true) : Scalar(int64_t{1}); }

Scalar other_alpha(DType dtype, Rng& rng) {
  if (dtype == DType::Bool) return Scalar(false);
  if (scatterx::is_integral(dtype, false)) return Scalar(rng.pick(std::vector<int64_t>{-3, 2, 3, 127, -1}));
  if (scatterx::is_complex(dtype) && rng.chance(0.6)) return Scalar(Complex<double>(0.5, -2.0));
  if (rng.chance(0.2)) return Scalar(int64_t{3});  // an integer alpha for a floating tensor
  return Scalar(rng.pick(std::vector<double>{-1.5, 2.5, 0.1}));
}

namespace {

::testing::AssertionResult same_view_of(const TensorView& returned, const TensorView& self) {
  if (returned.data() == self.data() && returned.sizes() == self.sizes() && returned.strides() == self.strides() &&
      returned.dtype() == self.dtype()) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "the in-place form returned " << returned.str() << " at " << returned.data()
                                       << " instead of self " << self.str() << " at " << self.data();
}

const char* form_name(ScatterForm form) {
  switch (form) {
    case ScatterForm::Src:
      return "scatter_(src)";
    case ScatterForm::Value:
      return "scatter_(value)";
    case ScatterForm::Add:
      return "scatter_add_";
    case ScatterForm::Reduce:
      return "scatter_reduce_";
  }
  return "?";
}

}  // namespace

void check_scatter(ScatterForm form, Reduce reduce, bool include_self, int64_t dim, Buf& self, Buf& index, Buf* src,
                   const Scalar& value) {
  SCOPED_TRACE(std::string(form_name(form)) + " reduce=" + scatterx::reduce_name(reduce) +
               " include_self=" + (include_self ? "true" : "false") + " dim=" + std::to_string(dim) + "\n  self  " +
               self.str() + "\n  index " + index.str() +
               (form == ScatterForm::Value ? "\n  value " + value.str() : "\n  src   " + src->str()));
  self.take_snapshot();
  index.take_snapshot();
  if (src != nullptr) src->take_snapshot();
  const TensorView s = self.view;
  const TensorView i = index.view;
  Tensor expected;
  switch (form) {
    case ScatterForm::Src:
      expected = ref::scatter(s, dim, i, src->view, reduce);
      break;
    case ScatterForm::Value:
      expected = ref::scatter_value(s, dim, i, value, reduce);
      break;
    case ScatterForm::Add:
      expected = ref::scatter_reduce(s, dim, i, src->view, Reduce::Sum, true);
      break;
    case ScatterForm::Reduce:
      expected = ref::scatter_reduce(s, dim, i, src->view, reduce, include_self);
      break;
  }

  Tensor result;
  switch (form) {
    case ScatterForm::Src:
      result = scatterx::scatter(s, dim, i, src->view, reduce);
      break;
    case ScatterForm::Value:
      result = scatterx::scatter(s, dim, i, value, reduce);
      break;
    case ScatterForm::Add:
      result = scatterx::scatter_add(s, dim, i, src->view);
      break;
    case ScatterForm::Reduce:
      result = scatterx::scatter_reduce(s, dim, i, src->view, reduce, include_self);
      break;
  }
  EXPECT_TRUE(same_values(result, expected)) << "out-of-place result";
  EXPECT_TRUE(self.unchanged()) << "the out-of-place form modified self";
  EXPECT_TRUE(index.unchanged());
  if (src != nullptr) {
    EXPECT_TRUE(src->unchanged());
  }

  TensorView returned;
  switch (form) {
    case ScatterForm::Src:
      returned = scatterx::scatter_(s, dim, i, src->view, reduce);
      break;
    case ScatterForm::Value:
      returned = scatterx::scatter_(s, dim, i, value, reduce);
      break;
    case ScatterForm::Add:
      returned = scatterx::scatter_add_(s, dim, i, src->view);
      break;
    case ScatterForm::Reduce:
      returned = scatterx::scatter_reduce_(s, dim, i, src->view, reduce, include_self);
      break;
  }
  EXPECT_TRUE(same_view_of(returned, s));
  EXPECT_TRUE(same_values(s, expected)) << "in-place result";
  EXPECT_TRUE(self.unchanged_outside_view());
  EXPECT_TRUE(index.unchanged());
  if (src != nullptr) {
    EXPECT_TRUE(src->unchanged());
  }
}

void check_index_op(Reduce reduce, bool include_self, const Scalar& alpha, bool default_alpha, int64_t dim, Buf& self,
                    Buf& index, Buf& source) {
  const bool add = reduce == Reduce::Sum;
  SCOPED_TRACE(std::string(add ? "index_add_ alpha=" + (default_alpha ? std::string("default") : alpha.str())
                               : std::string("index_reduce_ reduce=") + scatterx::reduce_name(reduce) +
                                     " include_self=" + (include_self ? "true" : "false")) +
               " dim=" + std::to_string(dim) + "\n  self   " + self.str() + "\n  index  " + index.str() +
               "\n  source " + source.str());
  self.take_snapshot();
  index.take_snapshot();
  source.take_snapshot();
  const TensorView s = self.view;
  const TensorView i = index.view;
  const TensorView src = source.view;
  const Tensor expected =
      add ? ref::index_add(s, dim, i, src, alpha) : ref::index_reduce(s, dim, i, src, reduce, include_self);

  Tensor result;
  if (add) {
    result = default_alpha ? scatterx::index_add(s, dim, i, src) : scatterx::index_add(s, dim, i, src, alpha);
  } else {
    result = scatterx::index_reduce(s, dim, i, src, reduce, include_self);
  }
  EXPECT_TRUE(same_values(result, expected)) << "out-of-place result";
  EXPECT_TRUE(self.unchanged()) << "the out-of-place form modified self";
  EXPECT_TRUE(index.unchanged());
  EXPECT_TRUE(source.unchanged());

  TensorView returned;
  if (add) {
    returned = default_alpha ? scatterx::index_add_(s, dim, i, src) : scatterx::index_add_(s, dim, i, src, alpha);
  } else {
    returned = scatterx::index_reduce_(s, dim, i, src, reduce, include_self);
  }
  EXPECT_TRUE(same_view_of(returned, s));
  EXPECT_TRUE(same_values(s, expected)) << "in-place result";
  EXPECT_TRUE(self.unchanged_outside_view());
  EXPECT_TRUE(index.unchanged());
  EXPECT_TRUE(source.unchanged());
}

// index_add_weighted (out of place, then in place) against the reference;
// nothing but self's view is written.
void check_index_add_weighted(int64_t dim, Buf& self, Buf& index, Buf& source, Buf& weights) {
  SCOPED_TRACE("index_add_weighted_ dim=" + std::to_string(dim) + "\n  self    " + self.str() + "\n  index   " +
               index.str() + "\n  source  " + source.str() + "\n  weights " + weights.str());
  for (Buf* b : {&self, &index, &source, &weights}) b->take_snapshot();
  const Tensor expected = ref::index_add_weighted(self.view, dim, index.view, source.view, weights.view);
  EXPECT_TRUE(
      same_values(scatterx::index_add_weighted(self.view, dim, index.view, source.view, weights.view), expected))
      << "out-of-place result";
  EXPECT_TRUE(self.unchanged()) << "the out-of-place form modified self";
  const TensorView returned = scatterx::index_add_weighted_(self.view, dim, index.view, source.view, weights.view);
  EXPECT_TRUE(same_view_of(returned, self.view));
  EXPECT_TRUE(same_values(self.view, expected)) << "in-place result";
  EXPECT_TRUE(self.unchanged_outside_view());
  for (Buf* b : {&index, &source, &weights}) EXPECT_TRUE(b->unchanged());
}

void check_gather(bool index_select, int64_t dim, Buf& input, Buf& index, Buf* out) {
  SCOPED_TRACE(std::string(index_select ? "index_select" : "gather") + " dim=" + std::to_string(dim) + "\n  input " +
               input.str() + "\n  index " + index.str() + (out ? "\n  out   " + out->str() : ""));
  input.take_snapshot();
  index.take_snapshot();
  const Tensor expected =
      index_select ? ref::index_select(input.view, dim, index.view) : ref::gather(input.view, dim, index.view);
  const Tensor result = index_select ? scatterx::index_select(input.view, dim, index.view)
                                     : scatterx::gather(input.view, dim, index.view);
  EXPECT_TRUE(same_values(result, expected)) << "result";
  EXPECT_TRUE(input.unchanged());
  EXPECT_TRUE(index.unchanged());
  if (out == nullptr) return;
  out->take_snapshot();
  const TensorView returned = index_select ? scatterx::index_select_out(out->view, input.view, dim, index.view)
                                           : scatterx::gather_out(out->view, input.view, dim, index.view);
  EXPECT_TRUE(same_view_of(returned, out->view));
  EXPECT_TRUE(same_values(out->view, expected)) << "_out result";
  EXPECT_TRUE(out->unchanged_outside_view());
  EXPECT_TRUE(input.unchanged());
  EXPECT_TRUE(index.unchanged());
}

}  // namespace sxt

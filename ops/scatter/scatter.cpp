// scatter / index_add / index_reduce front end: validate once, then dispatch.
#include "ops/scatter/scatter.h"

#include "ops/detail/checks.h"
#include "ops/detail/cuda/index_check.h"
#include "ops/dispatch.h"
#include "ops/runtime/cuda/runtime.h"
#include "ops/scatter/cuda/scatter_cuda.h"
#include "ops/scatter/scatter_args.h"

namespace scatterx {

namespace {

using detail::ScatterArgs;

// A validated scatter, ready to run on `self` or on a copy of it.
struct PreparedScatter {
  ScatterArgs args;
  Tensor value;  // holds the scalar of scatter_(..., value)
  bool noop = false;
};

void check_in_place(const char* op, const TensorView& self, const TensorView& index, const TensorView& src) {
  detail::check_no_internal_overlap(op, "self", self);
  detail::check_no_overlap(op, "self", self, "index", index);
  detail::check_no_overlap(op, "self", self, "src", src);
}

// scatter_, scatter_add_, scatter_reduce_. `src` is null for the scalar form.
PreparedScatter prepare_scatter(const char* op, const TensorView& self, int64_t dim, const TensorView& index,
                                const TensorView* src, const Scalar* value, Reduce reduce, bool include_self,
                                bool in_place) {
  PreparedScatter p;
  const TensorView& src_or_index = src != nullptr ? *src : index;
  detail::check_devices(op, {{"self", &self}, {"index", &index}, {"src", &src_or_index}});
  detail::check_index_dtype(op, "index", index);
  if (src != nullptr) detail::check_same_dtype(op, "src", *src, "self", self);
  detail::check_reduce_supported(op, reduce, self.dtype());
  ScatterArgs& a = p.args;
  a.op = op;
  a.self = detail::at_least_1d(self);
  a.index = detail::at_least_1d(index);
  a.dim = detail::wrap_dim(op, dim, self.dim());
  a.reduce = reduce;
  a.include_self = include_self;
  if (index.numel() == 0) {  // as torch: an empty index skips the shape checks
    p.noop = true;
    return p;
  }
  SCATTERX_CHECK(a.index.dim() == a.self.dim(), ArgumentError, op, "expected index to have as many dimensions as ",
                 "self (", a.self.dim(), "), got ", a.index.dim(), " (index shape ", index.sizes().str(), ")");
  if (src != nullptr) {
    a.src = detail::at_least_1d(*src);
    SCATTERX_CHECK(a.src.dim() == a.index.dim(), ArgumentError, op, "expected src to have as many dimensions as ",
                   "index (", a.index.dim(), "), got ", a.src.dim(), " (src shape ", src->sizes().str(), ")");
  }
  for (int64_t d = 0; d < a.index.dim(); ++d) {
    SCATTERX_CHECK(d == a.dim || a.index.size(d) <= a.self.size(d), ArgumentError, op, "expected index ",
                   index.sizes().str(), " to be no larger than self ", self.sizes().str(), " outside dimension ", a.dim,
                   ", got size ", a.index.size(d), " > ", a.self.size(d), " in dimension ", d);
    SCATTERX_CHECK(src == nullptr || a.index.size(d) <= a.src.size(d), ArgumentError, op, "expected index ",
                   index.sizes().str(), " to be no larger than src ", src->sizes().str(),
                   " in every dimension, got size ", a.index.size(d), " > ", a.src.size(d), " in dimension ", d);
  }
  if (src == nullptr) {
    // The value, converted once to self's dtype, seen through zero strides
    // (copied to self's device for a CUDA self).
    p.value = Tensor::empty(Shape{1}, self.dtype(), self.device());
    dispatch_dtype(self.dtype(), op, [&](auto tag) {
      using T = CppType<decltype(tag)::value>;
      const T converted = value->to<T>(op, "value");
      if (self.device().is_cuda()) {
        detail::cuda::fill_value(p.value.data(), &converted, sizeof(T), op);
      } else {
        *p.value.data_as<T>() = converted;
      }
    });
    Shape zeros = a.index.sizes();
    for (int64_t d = 0; d < zeros.size(); ++d) zeros[d] = 0;
    a.src = TensorView(p.value.data(), self.dtype(), a.index.sizes(), zeros, self.device());
  }
  if (in_place) check_in_place(op, a.self, a.index, a.src);
  a.hottest_index_share = detail::check_index_bounds(op, index, a.dim, a.self.size(a.dim), a.reduce != Reduce::None);
  return p;
}

// index_add_ and index_reduce_. index_checked: the caller has checked index
// against self.size(dim) already (detail::index_fold_rows_of_checked_index).
PreparedScatter prepare_index_op(const char* op, const TensorView& self, int64_t dim, const TensorView& index,
                                 const TensorView& source, Reduce reduce, bool include_self, const Scalar& alpha,
                                 bool in_place, const TensorView* weights = nullptr, bool index_checked = false) {
  PreparedScatter p;
  detail::check_devices(op, {{"self", &self}, {"index", &index}, {"source", &source}});
  if (weights != nullptr) {
    detail::check_devices(op, {{"self", &self}, {"weights", weights}});
    detail::check_same_dtype(op, "weights", *weights, "self", self);
    SCATTERX_CHECK(weights->dim() <= 1 && weights->numel() == index.numel(), ArgumentError, op,
                   "expected weights to be a vector with one weight per index entry (", index.numel(), "), got shape ",
                   weights->sizes().str());
  }
  detail::check_index_dtype(op, "index", index);
  detail::check_same_dtype(op, "source", source, "self", self);
  detail::check_reduce_supported(op, reduce, self.dtype());
  ScatterArgs& a = p.args;
  a.op = op;
  a.self = detail::at_least_1d(self);
  a.src = detail::at_least_1d(source);
  a.dim = detail::wrap_dim(op, dim, self.dim());
  a.reduce = reduce;
  a.include_self = include_self;
  SCATTERX_CHECK(index.dim() <= 1, ArgumentError, op, "expected index to be a vector (1-d or 0-d), got ", index.dim(),
                 " dimensions (shape ", index.sizes().str(), ")");
  SCATTERX_CHECK(a.src.dim() == a.self.dim(), ArgumentError, op, "expected source to have as many dimensions as ",
                 "self (", a.self.dim(), "), got ", a.src.dim(), " (source shape ", source.sizes().str(), ")");
  const TensorView index1 = detail::at_least_1d(index);
  SCATTERX_CHECK(a.src.size(a.dim) == index1.numel(), ArgumentError, op, "expected source.size(", a.dim,
                 ") to equal the number of indices (", index1.numel(), "), got ", a.src.size(a.dim));
  for (int64_t d = 0; d < a.self.dim(); ++d) {
    SCATTERX_CHECK(d == a.dim || a.src.size(d) == a.self.size(d), ArgumentError, op, "expected source ",
                   source.sizes().str(), " to match self ", self.sizes().str(), " outside dimension ", a.dim,
                   ", got size ", a.src.size(d), " != ", a.self.size(d), " in dimension ", d);
  }
  if (reduce == Reduce::Sum) {
    const DType dt = self.dtype();
    // torch's rules: integral (and bool) tensors take integral alphas, and
    // only bool tensors take a bool alpha.
    SCATTERX_CHECK(!(is_integral(dt, true) && !alpha.is_integral()), DTypeError, op, "expected an integral alpha for ",
                   dtype_name(dt), " tensors, got ", alpha.str());
    SCATTERX_CHECK(!(alpha.is_bool() && dt != DType::Bool), DTypeError, op, "expected a non-bool alpha for ",
                   dtype_name(dt), " tensors (a bool alpha is for bool tensors), got ", alpha.str());
    SCATTERX_CHECK(is_complex(dt) || !alpha.is_complex(), DTypeError, op, "expected a real alpha for ", dtype_name(dt),
                   " tensors, got ", alpha.str());
    dispatch_dtype(dt, op, [&](auto tag) {  // refuses an alpha out of self's range, as torch does
      (void)alpha.to<CppType<decltype(tag)::value>>(op, "alpha");
    });
    a.alpha = alpha;
    a.scaled = !(alpha.real() == 1.0 && alpha.imag() == 0.0);
  }
  // One index value selects a whole slice: the index seen through zero
  // strides in every other dim, with source's shape.
  Shape strides = a.src.sizes();
  for (int64_t d = 0; d < strides.size(); ++d) strides[d] = d == a.dim ? index1.stride(0) : 0;
  a.index = TensorView(index1.data(), index1.dtype(), a.src.sizes(), strides, index1.device());
  if (weights != nullptr) {
    a.weighted = true;
    a.weights = detail::at_least_1d(*weights);
  }
  if (in_place) {
    detail::check_no_internal_overlap(op, "self", a.self);
    detail::check_no_overlap(op, "self", a.self, "index", index1);
    detail::check_no_overlap(op, "self", a.self, "source", a.src);
    if (weights != nullptr) detail::check_no_overlap(op, "self", a.self, "weights", a.weights);
  }
  if (!index_checked) a.hottest_index_share = detail::check_index_bounds(op, index1, a.dim, a.self.size(a.dim), true);
  p.noop = index1.numel() == 0 || a.src.numel() == 0;
  return p;
}

void run(const ScatterArgs& args) {
  if (args.self.device().is_cuda()) {
    detail::cuda::scatter(args);
  } else {
    detail::scatter_cpu(args);
  }
}

TensorView run_in_place(const PreparedScatter& p, const TensorView& self) {
  if (!p.noop && p.args.self.numel() > 0) run(p.args);
  return self;
}

Tensor run_on_copy(PreparedScatter& p, const TensorView& self) {
  Tensor out = Tensor::clone(self);
  p.args.self = detail::at_least_1d(out);
  if (!p.noop && out.numel() > 0) run(p.args);
  return out;
}

void check_scatter_reduce_mode(const char* op, Reduce reduce) {
  SCATTERX_CHECK(reduce == Reduce::None || reduce == Reduce::Sum || reduce == Reduce::Prod, ArgumentError, op,
                 "expected reduce to be none, 'add' or 'multiply', got '", reduce_name(reduce),
                 "' (scatter_reduce_ has mean, amax and amin)");
}

void check_scatter_reduce_two_mode(const char* op, Reduce reduce) {
  SCATTERX_CHECK(reduce != Reduce::None, ArgumentError, op,
                 "expected reduce to be one of sum, prod, mean, amax, amin, got 'none'");
}

void check_index_reduce_mode(const char* op, Reduce reduce) {
  SCATTERX_CHECK(reduce == Reduce::Prod || reduce == Reduce::Mean || reduce == Reduce::Amax || reduce == Reduce::Amin,
                 ArgumentError, op, "expected reduce to be one of prod, mean, amax, amin, got '", reduce_name(reduce),
                 "'");
}

}  // namespace

TensorView scatter_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
                    Reduce reduce) {
  constexpr const char* op = "scatter_";
  check_scatter_reduce_mode(op, reduce);
  return run_in_place(prepare_scatter(op, self, dim, index, &src, nullptr, reduce, true, true), self);
}

TensorView scatter_(const TensorView& self, int64_t dim, const TensorView& index, const Scalar& value, Reduce reduce) {
  constexpr const char* op = "scatter_";
  check_scatter_reduce_mode(op, reduce);
  return run_in_place(prepare_scatter(op, self, dim, index, nullptr, &value, reduce, true, true), self);
}

Tensor scatter(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src, Reduce reduce) {
  constexpr const char* op = "scatter";
  check_scatter_reduce_mode(op, reduce);
  PreparedScatter p = prepare_scatter(op, self, dim, index, &src, nullptr, reduce, true, false);
  return run_on_copy(p, self);
}

Tensor scatter(const TensorView& self, int64_t dim, const TensorView& index, const Scalar& value, Reduce reduce) {
  constexpr const char* op = "scatter";
  check_scatter_reduce_mode(op, reduce);
  PreparedScatter p = prepare_scatter(op, self, dim, index, nullptr, &value, reduce, true, false);
  return run_on_copy(p, self);
}

TensorView scatter_add_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src) {
  return run_in_place(prepare_scatter("scatter_add_", self, dim, index, &src, nullptr, Reduce::Sum, true, true), self);
}

Tensor scatter_add(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src) {
  PreparedScatter p = prepare_scatter("scatter_add", self, dim, index, &src, nullptr, Reduce::Sum, true, false);
  return run_on_copy(p, self);
}

TensorView scatter_reduce_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
                           Reduce reduce, bool include_self) {
  constexpr const char* op = "scatter_reduce_";
  check_scatter_reduce_two_mode(op, reduce);
  return run_in_place(prepare_scatter(op, self, dim, index, &src, nullptr, reduce, include_self, true), self);
}

Tensor scatter_reduce(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
                      Reduce reduce, bool include_self) {
  constexpr const char* op = "scatter_reduce";
  check_scatter_reduce_two_mode(op, reduce);
  PreparedScatter p = prepare_scatter(op, self, dim, index, &src, nullptr, reduce, include_self, false);
  return run_on_copy(p, self);
}

TensorView index_add_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                      const Scalar& alpha) {
  return run_in_place(prepare_index_op("index_add_", self, dim, index, source, Reduce::Sum, true, alpha, true), self);
}

Tensor index_add(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                 const Scalar& alpha) {
  PreparedScatter p = prepare_index_op("index_add", self, dim, index, source, Reduce::Sum, true, alpha, false);
  return run_on_copy(p, self);
}

TensorView index_add_weighted_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                               const TensorView& weights) {
  return run_in_place(
      prepare_index_op("index_add_weighted_", self, dim, index, source, Reduce::Sum, true, Scalar(1), true, &weights),
      self);
}

Tensor index_add_weighted(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                          const TensorView& weights) {
  PreparedScatter p =
      prepare_index_op("index_add_weighted", self, dim, index, source, Reduce::Sum, true, Scalar(1), false, &weights);
  return run_on_copy(p, self);
}

TensorView index_reduce_(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                         Reduce reduce, bool include_self) {
  constexpr const char* op = "index_reduce_";
  check_index_reduce_mode(op, reduce);
  return run_in_place(prepare_index_op(op, self, dim, index, source, reduce, include_self, Scalar(1), true), self);
}

Tensor index_reduce(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                    Reduce reduce, bool include_self) {
  constexpr const char* op = "index_reduce";
  check_index_reduce_mode(op, reduce);
  PreparedScatter p = prepare_index_op(op, self, dim, index, source, reduce, include_self, Scalar(1), false);
  return run_on_copy(p, self);
}

namespace detail {

void index_fold_rows_of_checked_index(const char* op, const TensorView& self, const TensorView& index,
                                      const TensorView& source, Reduce reduce) {
  const bool include_self = reduce == Reduce::Sum;
  run_in_place(prepare_index_op(op, self, 0, index, source, reduce, include_self, Scalar(1), true, nullptr, true),
               self);
}

}  // namespace detail

}  // namespace scatterx

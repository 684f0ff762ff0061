// scatter_softmax front end: validate once, then run the CPU or CUDA kernel.
#include "ops/gather_scatter/scatter_softmax.h"

#include "ops/cuda.h"
#include "ops/detail/checks.h"
#include "ops/detail/segments.h"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"

namespace scatterx {

namespace {

// Checks that the rows of t (along dim 0) are the plan's positions.
void check_rows(const char* op, const char* name, const TensorView& t, const IndexPlan& plan) {
  SCATTERX_CHECK(t.dim() >= 1, ArgumentError, op, "expected ", name,
                 " with at least 1 dimension (rows along dim 0), got 0-d");
  SCATTERX_CHECK(t.size(0) == plan.positions(), ArgumentError, op, "expected ", name,
                 ".size(0) to equal the plan's positions (", plan.positions(), "), got ", t.size(0));
}

int64_t features_per_row(const TensorView& t) {
  int64_t features = 1;
  for (int64_t d = 1; d < t.dim(); ++d) features *= t.size(d);
  return features;
}

// t as contiguous [rows, features] for the kernels, which read whole rows; a
// strided t is copied once, into `copy`.
TensorView as_rows(const TensorView& t, Tensor& copy) {
  if (!t.is_contiguous()) copy = Tensor::clone(t);
  const void* data = t.is_contiguous() ? t.data() : copy.data();
  const int64_t features = features_per_row(t);
  return TensorView(const_cast<void*>(data), t.dtype(), Shape{t.size(0), features}, Shape{features, 1}, t.device());
}

}  // namespace

Tensor scatter_softmax(const TensorView& src, const IndexPlan& plan, bool log, double eps) {
  const char* op = log ? "scatter_log_softmax" : "scatter_softmax";
  detail::check_plan_device(op, "src", src, plan);
  SCATTERX_CHECK(is_floating_point(src.dtype()), DTypeError, op, "expected src of a floating dtype, got ",
                 dtype_name(src.dtype()));
  check_rows(op, "src", src, plan);
  // A CUDA plan built with index checks off may leave rows in no group (values out of range): zeros there.
  const bool unwritten_rows = src.device().is_cuda() && !plan.device_groups(op).every_position_grouped;
  Tensor out = unwritten_rows ? Tensor::zeros(src.sizes(), src.dtype(), src.device())
                              : Tensor::empty(src.sizes(), src.dtype(), src.device());
  if (src.size(0) == 0 || features_per_row(src) == 0) return out;
  Tensor src_copy;
  Tensor no_copy;  // out is new, so contiguous
  const TensorView flat = as_rows(src, src_copy);
  const TensorView flat_out = as_rows(out, no_copy);
  if (src.device().is_cuda()) {
    detail::cuda::scatter_softmax(op, flat, plan.device_groups(op), flat_out, log, eps);
  } else {
    detail::scatter_softmax_cpu(flat, plan.groups(op), flat_out, log, eps);
  }
  return out;
}

Tensor scatter_softmax_backward(const TensorView& out, const TensorView& grad, const IndexPlan& plan, bool log) {
  const char* op = log ? "scatter_log_softmax_backward" : "scatter_softmax_backward";
  detail::check_plan_device(op, "out", out, plan);
  SCATTERX_CHECK(!out.device().is_cuda(), ArgumentError, op,
                 "expected CPU tensors (the fused backward has no CUDA kernel yet), got out on ", out.device().str());
  SCATTERX_CHECK(grad.device() == out.device(), ArgumentError, op, "expected grad on out's device (",
                 out.device().str(), "), got ", grad.device().str());
  SCATTERX_CHECK(is_floating_point(out.dtype()), DTypeError, op, "expected out of a floating dtype, got ",
                 dtype_name(out.dtype()));
  SCATTERX_CHECK(grad.dtype() == out.dtype(), DTypeError, op, "expected grad of out's dtype (", dtype_name(out.dtype()),
                 "), got ", dtype_name(grad.dtype()));
  check_rows(op, "out", out, plan);
  SCATTERX_CHECK(grad.sizes() == out.sizes(), ArgumentError, op, "expected grad of out's shape ", out.sizes().str(),
                 ", got ", grad.sizes().str());
  Tensor grad_src = Tensor::empty(out.sizes(), out.dtype(), out.device());
  if (out.size(0) == 0 || features_per_row(out) == 0) return grad_src;
  Tensor out_copy;
  Tensor grad_copy;
  Tensor no_copy;  // grad_src is new, so contiguous
  detail::scatter_softmax_backward_cpu(as_rows(out, out_copy), as_rows(grad, grad_copy), plan.groups(op),
                                       as_rows(grad_src, no_copy), log);
  return grad_src;
}

}  // namespace scatterx

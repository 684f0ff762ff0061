// scatter_softmax front end: validate once, then run the CPU or CUDA kernel.
#include "ops/gather_scatter/scatter_softmax.h"

#include "ops/cuda.h"
#include "ops/detail/checks.h"
#include "ops/detail/segments.h"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"

namespace scatterx {

Tensor scatter_softmax(const TensorView& src, const IndexPlan& plan, bool log, double eps) {
  const char* op = log ? "scatter_log_softmax" : "scatter_softmax";
  detail::check_plan_device(op, "src", src, plan);
  SCATTERX_CHECK(is_floating_point(src.dtype()), DTypeError, op, "expected src of a floating dtype, got ",
                 dtype_name(src.dtype()));
  SCATTERX_CHECK(src.dim() >= 1, ArgumentError, op,
                 "expected src with at least 1 dimension (rows along dim 0), got 0-d");
  SCATTERX_CHECK(src.size(0) == plan.positions(), ArgumentError, op,
                 "expected src.size(0) to equal the plan's positions (", plan.positions(), "), got ", src.size(0));
  // Every element is written by the kernel, except on CUDA with index checks
  // off: a position whose value was out of range is in no group, and reads 0.
  // A CUDA plan built with index checks off may leave rows in no group (values out of range): zeros there.
  const bool unwritten_rows = src.device().is_cuda() && !plan.device_groups(op).every_position_grouped;
  Tensor out = unwritten_rows ? Tensor::zeros(src.sizes(), src.dtype(), src.device())
                              : Tensor::empty(src.sizes(), src.dtype(), src.device());
  const int64_t rows = src.size(0);
  int64_t features = 1;
  for (int64_t d = 1; d < src.dim(); ++d) features *= src.size(d);
  if (rows == 0 || features == 0) return out;
  // The kernel reads rows of a contiguous src; a strided src is copied once.
  const Tensor src_copy = src.is_contiguous() ? Tensor() : Tensor::clone(src);
  const TensorView sc = src.is_contiguous() ? src : TensorView(src_copy);
  const TensorView flat(sc.data(), sc.dtype(), Shape{rows, features}, Shape{features, 1}, sc.device());
  const TensorView flat_out(out.data(), out.dtype(), Shape{rows, features}, Shape{features, 1}, out.device());
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
  SCATTERX_CHECK(out.dim() >= 1, ArgumentError, op,
                 "expected out with at least 1 dimension (rows along dim 0), got 0-d");
  SCATTERX_CHECK(grad.sizes() == out.sizes(), ArgumentError, op, "expected grad of out's shape ", out.sizes().str(),
                 ", got ", grad.sizes().str());
  SCATTERX_CHECK(out.size(0) == plan.positions(), ArgumentError, op,
                 "expected out.size(0) to equal the plan's positions (", plan.positions(), "), got ", out.size(0));
  Tensor grad_src = Tensor::empty(out.sizes(), out.dtype(), out.device());
  const int64_t rows = out.size(0);
  const int64_t features = rows == 0 ? 0 : out.numel() / rows;
  if (rows == 0 || features == 0) return grad_src;
  // The kernel reads rows of contiguous tensors; a strided one is copied once.
  const Tensor out_copy = out.is_contiguous() ? Tensor() : Tensor::clone(out);
  const Tensor grad_copy = grad.is_contiguous() ? Tensor() : Tensor::clone(grad);
  const void* out_data = out.is_contiguous() ? out.data() : out_copy.data();
  const void* grad_data = grad.is_contiguous() ? grad.data() : grad_copy.data();
  const Shape flat_shape{rows, features};
  const Shape flat_strides{features, 1};
  auto flat = [&](const void* data) {
    return TensorView(const_cast<void*>(data), out.dtype(), flat_shape, flat_strides, out.device());
  };
  detail::scatter_softmax_backward_cpu(flat(out_data), flat(grad_data), plan.groups(op), flat(grad_src.data()), log);
  return grad_src;
}

}  // namespace scatterx

// scatter_softmax front end: validate once, then run the CPU kernel.
#include "ops/gather_scatter/scatter_softmax.h"

#include "ops/detail/checks.h"
#include "ops/detail/segments.h"

namespace scatterx {

Tensor scatter_softmax(const TensorView& src, const IndexPlan& plan, bool log, double eps) {
  const char* op = log ? "scatter_log_softmax" : "scatter_softmax";
  SCATTERX_CHECK(!src.device().is_cuda(), ArgumentError, op, "not yet on CUDA: ", op, " runs on cpu tensors only");
  SCATTERX_CHECK(is_floating_point(src.dtype()), DTypeError, op, "expected src of a floating dtype, got ",
                 dtype_name(src.dtype()));
  SCATTERX_CHECK(src.dim() >= 1, ArgumentError, op,
                 "expected src with at least 1 dimension (rows along dim 0), got 0-d");
  SCATTERX_CHECK(src.size(0) == plan.positions(), ArgumentError, op,
                 "expected src.size(0) to equal the plan's positions (", plan.positions(), "), got ", src.size(0));
  Tensor out = Tensor::empty(src.sizes(), src.dtype(), src.device());  // every element is written by the kernel
  const int64_t rows = src.size(0);
  int64_t features = 1;
  for (int64_t d = 1; d < src.dim(); ++d) features *= src.size(d);
  if (rows == 0 || features == 0) return out;
  // The kernel reads rows of a contiguous src; a strided src is copied once.
  const Tensor src_copy = src.is_contiguous() ? Tensor() : Tensor::clone(src);
  const TensorView sc = src.is_contiguous() ? src : TensorView(src_copy);
  const TensorView flat(sc.data(), sc.dtype(), Shape{rows, features}, Shape{features, 1}, sc.device());
  const TensorView flat_out(out.data(), out.dtype(), Shape{rows, features}, Shape{features, 1}, out.device());
  detail::scatter_softmax_cpu(flat, plan.groups(), flat_out, log, eps);
  return out;
}

}  // namespace scatterx

// gather / index_select front end: validate once, then dispatch.
#include "ops/gather/gather.h"

#include "ops/detail/checks.h"
#include "ops/detail/cuda/index_check.h"
#include "ops/gather/cuda/gather_cuda.h"
#include "ops/gather/gather_args.h"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx {

namespace {

using detail::GatherArgs;

void check_out(const char* op, const TensorView& out, const Shape& shape, const TensorView& input,
               const TensorView& index) {
  detail::check_same_dtype(op, "out", out, "input", input);
  SCATTERX_CHECK(out.sizes() == shape, ArgumentError, op, "expected out of shape ", shape.str(), ", got ",
                 out.sizes().str());
  detail::check_no_internal_overlap(op, "out", out);
  detail::check_no_overlap(op, "out", out, "input", input);
  detail::check_no_overlap(op, "out", out, "index", index);
}

// Validates gather's arguments; returns the args with `out` unset.
GatherArgs prepare_gather(const char* op, const TensorView& input, int64_t dim, const TensorView& index) {
  detail::check_devices(op, {{"input", &input}, {"index", &index}});
  detail::check_index_dtype(op, "index", index);
  GatherArgs args;
  args.op = op;
  args.input = detail::at_least_1d(input);
  args.index = detail::at_least_1d(index);
  args.dim = detail::wrap_dim(op, dim, input.dim());
  SCATTERX_CHECK(args.index.dim() == args.input.dim(), ArgumentError, op, "expected index to have as many dimensions ",
                 "as input (", args.input.dim(), "), got ", args.index.dim(), " (index shape ", index.sizes().str(),
                 ")");
  for (int64_t d = 0; d < args.index.dim(); ++d) {
    SCATTERX_CHECK(d == args.dim || args.index.size(d) <= args.input.size(d), ArgumentError, op, "expected index ",
                   index.sizes().str(), " to be no larger than input ", input.sizes().str(), " outside dimension ",
                   args.dim, ", got size ", args.index.size(d), " > ", args.input.size(d), " in dimension ", d);
  }
  detail::check_index_bounds(op, index, args.dim, args.input.size(args.dim));
  return args;
}

// Validates index_select's arguments; returns the args with `out` unset and
// the 1-d index expanded over the result's shape.
GatherArgs prepare_index_select(const char* op, const TensorView& input, int64_t dim, const TensorView& index,
                                Shape& result_shape) {
  detail::check_devices(op, {{"input", &input}, {"index", &index}});
  detail::check_index_dtype(op, "index", index);
  SCATTERX_CHECK(index.dim() <= 1, ArgumentError, op, "expected index to be a vector (1-d or 0-d), got ", index.dim(),
                 " dimensions (shape ", index.sizes().str(), ")");
  GatherArgs args;
  args.op = op;
  args.input = detail::at_least_1d(input);
  args.dim = detail::wrap_dim(op, dim, input.dim());
  const TensorView index1 = detail::at_least_1d(index);
  SCATTERX_CHECK(input.dim() > 0 || index.numel() == 1, ArgumentError, op,
                 "expected exactly one index for a 0-d input, got ", index.numel());
  detail::check_index_bounds(op, index1, args.dim, args.input.size(args.dim));
  Shape shape = args.input.sizes();
  shape[args.dim] = index1.numel();
  Shape strides = shape;
  for (int64_t d = 0; d < shape.size(); ++d) strides[d] = d == args.dim ? index1.stride(0) : 0;
  args.index = TensorView(index1.data(), index1.dtype(), shape, strides, index1.device());
  result_shape = input.dim() == 0 ? Shape{} : shape;
  return args;
}

void run(GatherArgs& args, const TensorView& out) {
  args.out = detail::at_least_1d(out);
  if (args.out.numel() == 0) return;
  if (args.out.device().is_cuda()) {
    detail::cuda::gather(args);
  } else {
    detail::gather_cpu(args);
  }
}

}  // namespace

Tensor gather(const TensorView& input, int64_t dim, const TensorView& index) {
  GatherArgs args = prepare_gather("gather", input, dim, index);
  Tensor out = Tensor::empty(index.sizes(), input.dtype(), input.device());
  run(args, out);
  return out;
}

TensorView gather_out(const TensorView& out, const TensorView& input, int64_t dim, const TensorView& index) {
  constexpr const char* op = "gather_out";
  detail::check_devices(op, {{"input", &input}, {"out", &out}});
  GatherArgs args = prepare_gather(op, input, dim, index);
  check_out(op, out, index.sizes(), input, index);
  run(args, out);
  return out;
}

Tensor index_select(const TensorView& input, int64_t dim, const TensorView& index) {
  Shape shape;
  GatherArgs args = prepare_index_select("index_select", input, dim, index, shape);
  Tensor out = Tensor::empty(shape, input.dtype(), input.device());
  run(args, out);
  return out;
}

TensorView index_select_out(const TensorView& out, const TensorView& input, int64_t dim, const TensorView& index) {
  constexpr const char* op = "index_select_out";
  detail::check_devices(op, {{"input", &input}, {"out", &out}});
  Shape shape;
  GatherArgs args = prepare_index_select(op, input, dim, index, shape);
  check_out(op, out, shape, input, index);
  run(args, out);
  return out;
}

}  // namespace scatterx

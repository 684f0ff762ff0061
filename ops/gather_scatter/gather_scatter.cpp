// gather_scatter front end: validate once, then dispatch.
#include "ops/gather_scatter/gather_scatter.h"

#include <algorithm>
#include <limits>

#include "ops/detail/checks.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/gather_scatter_args.h"

namespace scatterx {

namespace {

void check_edge_list(const char* op, const char* name, const TensorView& index, int64_t edges) {
  SCATTERX_CHECK(index.dim() == 1, ArgumentError, op, "expected ", name, " to be 1-d, got shape ", index.sizes().str());
  SCATTERX_CHECK(index.size(0) == edges, ArgumentError, op, "expected ", name, " of length ", edges,
                 " (src_index's), got ", index.size(0));
}

// Checks dst_index >= 0 and returns max(dst_index) (-1 when empty).
int64_t max_destination(const char* op, const TensorView& dst) {
  return dispatch_index_dtype(dst.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* data = static_cast<const I*>(dst.data());
    const int64_t stride = dst.strides()[0];
    int64_t max_value = -1;
    for (int64_t e = 0; e < dst.size(0); ++e) {
      const int64_t v = static_cast<int64_t>(data[e * stride]);
      SCATTERX_CHECK(v >= 0, IndexError, op, "expected dst_index values >= 0, got ", v, " at dst_index position [", e,
                     "]");
      max_value = std::max(max_value, v);
    }
    return max_value;
  });
}

}  // namespace

Tensor gather_scatter(const TensorView& x, const TensorView& src_index, const TensorView& dst_index, Reduce reduce,
                      const TensorView* edge_weight, int64_t dim_size) {
  constexpr const char* op = "gather_scatter";
  if (edge_weight != nullptr) {
    detail::check_devices(
        op, {{"x", &x}, {"src_index", &src_index}, {"dst_index", &dst_index}, {"edge_weight", edge_weight}});
  } else {
    detail::check_devices(op, {{"x", &x}, {"src_index", &src_index}, {"dst_index", &dst_index}});
  }
  SCATTERX_CHECK(!x.device().is_cuda(), ArgumentError, op, "not yet on CUDA: gather_scatter runs on cpu tensors only");
  detail::check_index_dtype(op, "src_index", src_index);
  detail::check_index_dtype(op, "dst_index", dst_index);
  SCATTERX_CHECK(is_floating_point(x.dtype()), DTypeError, op, "expected x of a floating dtype, got ",
                 dtype_name(x.dtype()));
  if (edge_weight != nullptr) detail::check_same_dtype(op, "edge_weight", *edge_weight, "x", x);
  SCATTERX_CHECK(reduce == Reduce::Sum || reduce == Reduce::Mean || reduce == Reduce::Amax || reduce == Reduce::Amin,
                 ArgumentError, op, "expected reduce to be one of sum, mean, amax, amin, got '", reduce_name(reduce),
                 "'");
  SCATTERX_CHECK(x.dim() >= 1, ArgumentError, op, "expected x with at least 1 dimension (rows along dim 0), got 0-d");
  SCATTERX_CHECK(src_index.dim() == 1, ArgumentError, op, "expected src_index to be 1-d, got shape ",
                 src_index.sizes().str());
  const int64_t edges = src_index.size(0);
  check_edge_list(op, "dst_index", dst_index, edges);
  if (edge_weight != nullptr) check_edge_list(op, "edge_weight", *edge_weight, edges);
  detail::check_index_bounds(op, src_index, 0, x.size(0));
  int64_t num_out = dim_size;
  if (dim_size >= 0) {
    detail::check_index_bounds(op, dst_index, 0, dim_size);
  } else {
    num_out = max_destination(op, dst_index) + 1;
  }

  Shape out_shape = x.sizes();
  out_shape[0] = num_out;
  int64_t features = 1;
  for (int64_t d = 1; d < x.dim(); ++d) features *= x.size(d);
  if (num_out == 0 || features == 0 || edges == 0) return Tensor::zeros(out_shape, x.dtype(), x.device());
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());  // every row is written (or zeroed) by the kernel
  // The kernel reads rows of a contiguous x; a strided x is copied once (N x F).
  const Tensor x_copy = x.is_contiguous() ? Tensor() : Tensor::clone(x);
  const TensorView xc = x.is_contiguous() ? x : TensorView(x_copy);
  detail::GatherScatterArgs a;
  a.op = op;
  a.reduce = reduce;
  a.x = TensorView(xc.data(), xc.dtype(), Shape{x.size(0), features}, Shape{features, 1}, xc.device());
  a.src_index = src_index;
  a.dst_index = dst_index;
  if (edge_weight != nullptr) a.weight = *edge_weight;
  a.out = out;
  a.edges = edges;
  a.features = features;
  a.num_out = num_out;
  detail::gather_scatter_cpu(a);
  return out;
}

}  // namespace scatterx

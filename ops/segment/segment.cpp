// segment_csr / segment_coo / gather_csr / gather_coo / scatter_arg_reduce
// front end: validate once, then dispatch.
#include "ops/segment/segment.h"

#include <algorithm>
#include <limits>

#include "ops/detail/checks.h"
#include "ops/detail/strided.h"
#include "ops/dispatch.h"
#include "ops/gather/cuda/gather_cuda.h"
#include "ops/gather/gather_args.h"
#include "ops/runtime/cuda/runtime.h"
#include "ops/segment/cuda/segment_cuda.h"
#include "ops/segment/segment_args.h"

namespace scatterx {

namespace {

using detail::SegmentArgs;
using detail::SegmentGeometry;
using detail::SegmentKind;

using Rule = detail::PositionRule;

std::string position_str(const Shape& shape, int64_t linear) {
  Shape position = shape;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    position[d] = linear % shape[d];
    linear /= shape[d];
  }
  return position.str();
}

// positions as host memory: the view itself on the cpu, a host copy of a CUDA one.
Tensor on_host(const TensorView& view, const char* op, TensorView& host) {
  if (view.device().is_cpu()) {
    host = view;
    return Tensor();
  }
  Tensor device_copy = Tensor::clone(view);
  Tensor copy = Tensor::empty(view.sizes(), view.dtype());
  detail::cuda::copy_to_host(copy.data(), device_copy.data(), copy.numel() * copy.element_size(), op);
  host = copy;
  return copy;
}

// Checks `rule` on every value (row-major, in the original positions tensor)
// and returns the largest value (-1 when empty).
int64_t scan_positions(const char* op, const char* name, const TensorView& positions, Rule rule, int64_t bound,
                       const char* bound_str) {
  if (positions.numel() == 0) return -1;
  if (positions.device().is_cuda()) {
    // Scanned on the GPU; only a tensor that breaks the rule is copied back, to name its first bad value.
    const detail::cuda::PositionScan scan = detail::cuda::scan_positions(op, positions, rule, bound);
    if (scan.first_bad < 0) return scan.max_value;
  }
  TensorView view;
  const Tensor keep = on_host(detail::at_least_1d(positions), op, view);
  int64_t max_value = -1;
  dispatch_index_dtype(view.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* data = static_cast<const I*>(view.data());
    const int64_t last = view.size(-1);
    const TensorView* views[1] = {&view};
    const detail::StridedLayout<1> layout = detail::layout_of<1>(view.sizes(), views);
    detail::StridedCursor<1> cursor(layout, 0);
    int64_t previous = 0;
    for (int64_t linear = 0; linear < view.numel(); ++linear, cursor.next()) {
      const int64_t v = static_cast<int64_t>(data[cursor.offset(0)]);
      const bool row_start = linear % last == 0;
      SCATTERX_CHECK(v >= 0 && (rule != Rule::Indptr || v <= bound), IndexError, op, "expected ", name,
                     " values in [0, ", rule == Rule::Indptr ? bound_str : "inf", rule == Rule::Indptr ? "]" : ")",
                     ", got ", v, " at ", name, " position ", position_str(view.sizes(), linear));
      SCATTERX_CHECK(rule == Rule::Any || row_start || v >= previous, ArgumentError, op, "expected ", name,
                     " to be sorted (non-decreasing) along its last dim, got ", v, " after ", previous, " at ", name,
                     " position ", position_str(view.sizes(), linear));
      previous = v;
      max_value = std::max(max_value, v);
    }
  });
  return max_value;
}

// The last value of indptr in row-major order (torch_scatter's length of gather_csr's result).
int64_t last_value(const char* op, const TensorView& indptr) {
  TensorView v = indptr;
  while (v.dim() > 0) v = v.select(0, v.size(0) - 1);
  TensorView host;
  const Tensor keep = on_host(detail::at_least_1d(v), op, host);
  return dispatch_index_dtype(host.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    return static_cast<int64_t>(*static_cast<const I*>(host.data()));
  });
}

// positions (indptr / index) over src: its leading dims match src's or are
// 1 (broadcast); returns it expanded to src's leading sizes, with its last
// dim kept as is.
TensorView expand_leading(const char* op, const char* name, const TensorView& positions, const TensorView& src) {
  SCATTERX_CHECK(positions.dim() >= 1 && positions.dim() <= src.dim(), ArgumentError, op, "expected ", name,
                 " with 1 to src.dim() (", src.dim(), ") dimensions, got ", positions.dim(), " (", name, " shape ",
                 positions.sizes().str(), ", src shape ", src.sizes().str(), ")");
  Shape sizes = positions.sizes();
  Shape strides = positions.strides();
  for (int64_t d = 0; d + 1 < positions.dim(); ++d) {
    SCATTERX_CHECK(sizes[d] == src.size(d) || sizes[d] == 1, ArgumentError, op, "expected ", name, " ",
                   positions.sizes().str(), " to match src ", src.sizes().str(), " (or be 1) in dimension ", d,
                   ", got size ", sizes[d], " != ", src.size(d));
    if (sizes[d] != src.size(d)) {
      sizes[d] = src.size(d);
      strides[d] = 0;
    }
  }
  return TensorView(positions.data(), positions.dtype(), sizes, strides, positions.device());
}

SegmentGeometry make_geometry(const TensorView& src, const TensorView& positions, int64_t dim, int64_t num_out,
                              bool full_index) {
  SegmentGeometry g;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (d == dim) continue;
    const int64_t pos_stride = d < dim || full_index ? positions.strides()[d] : 0;
    (d < dim ? g.outer : g.inner).push(src.size(d), {src.strides()[d], pos_stride});
  }
  g.outer_numel = g.outer.numel();
  g.inner = g.inner.collapsed();
  g.inner_numel = g.inner.numel();
  g.len = src.size(dim);
  g.src_stride = src.strides()[dim];
  g.pos_len = positions.size(dim);
  g.pos_stride = positions.strides()[dim];
  g.num_out = num_out;
  return g;
}

Shape with_size(Shape shape, int64_t dim, int64_t size) {
  shape[dim] = size;
  return shape;
}

void check_common(const char* op, const TensorView& src, const char* name, const TensorView& positions) {
  detail::check_devices(op, {{"src", &src}, {name, &positions}});
  detail::check_index_dtype(op, name, positions);
}

void check_reduce(const char* op, Reduce reduce, DType dtype, bool with_arg) {
  if (with_arg) {
    SCATTERX_CHECK(reduce == Reduce::Amax || reduce == Reduce::Amin, ArgumentError, op,
                   "expected reduce to be amax or amin (the reduces with an arg), got '", reduce_name(reduce), "'");
  } else {
    SCATTERX_CHECK(reduce != Reduce::None, ArgumentError, op,
                   "expected reduce to be one of sum, prod, mean, amax, amin, got 'none'");
  }
  detail::check_reduce_supported(op, reduce, dtype);
}

ValuesAndArgs run(SegmentArgs& a, const Shape& out_shape, bool with_arg) {
  ValuesAndArgs result;
  result.values = Tensor::empty(out_shape, a.src.dtype(), a.src.device());
  a.out = result.values;
  if (with_arg) {
    result.args = Tensor::empty(out_shape, DType::Int64, a.src.device());
    a.arg = result.args;
  }
  if (result.values.numel() == 0) return result;
  if (a.src.device().is_cuda()) {
    detail::cuda::segment(a);
  } else {
    detail::segment_cpu(a);
  }
  return result;
}

ValuesAndArgs segment_csr_impl(const char* op, const TensorView& src, const TensorView& indptr, Reduce reduce,
                               bool with_arg) {
  check_common(op, src, "indptr", indptr);
  check_reduce(op, reduce, src.dtype(), with_arg);
  SegmentArgs a;
  a.op = op;
  a.kind = SegmentKind::Csr;
  a.reduce = reduce;
  a.src = src;
  a.positions = expand_leading(op, "indptr", indptr, src);
  a.dim = indptr.dim() - 1;
  const std::string bound = detail::concat("src.size(", a.dim, ") = ", src.size(a.dim));
  scan_positions(op, "indptr", indptr, Rule::Indptr, src.size(a.dim), bound.c_str());
  const int64_t num_out = std::max<int64_t>(indptr.size(-1) - 1, 0);
  a.geometry = make_geometry(src, a.positions, a.dim, num_out, false);
  return run(a, with_size(src.sizes(), a.dim, num_out), with_arg);
}

ValuesAndArgs segment_coo_impl(const char* op, const TensorView& src, const TensorView& index, Reduce reduce,
                               int64_t dim_size, bool with_arg) {
  check_common(op, src, "index", index);
  check_reduce(op, reduce, src.dtype(), with_arg);
  SegmentArgs a;
  a.op = op;
  a.kind = SegmentKind::Coo;
  a.reduce = reduce;
  a.src = src;
  a.positions = expand_leading(op, "index", index, src);
  a.dim = index.dim() - 1;
  SCATTERX_CHECK(index.size(-1) == src.size(a.dim), ArgumentError, op, "expected index.size(", a.dim,
                 ") to equal src.size(", a.dim, ") (", src.size(a.dim), "), got ", index.size(-1));
  const int64_t max_value = scan_positions(op, "index", index, Rule::Sorted, 0, "");
  const int64_t num_out = dim_size >= 0 ? dim_size : max_value + 1;
  if (dim_size >= 0) detail::check_index_bounds(op, index, a.dim, dim_size);
  a.geometry = make_geometry(src, a.positions, a.dim, num_out, false);
  return run(a, with_size(src.sizes(), a.dim, num_out), with_arg);
}

}  // namespace

Tensor segment_csr(const TensorView& src, const TensorView& indptr, Reduce reduce) {
  return std::move(segment_csr_impl("segment_csr", src, indptr, reduce, false).values);
}

ValuesAndArgs segment_csr_arg(const TensorView& src, const TensorView& indptr, Reduce reduce) {
  return segment_csr_impl("segment_csr_arg", src, indptr, reduce, true);
}

Tensor segment_coo(const TensorView& src, const TensorView& index, Reduce reduce, int64_t dim_size) {
  return std::move(segment_coo_impl("segment_coo", src, index, reduce, dim_size, false).values);
}

ValuesAndArgs segment_coo_arg(const TensorView& src, const TensorView& index, Reduce reduce, int64_t dim_size) {
  return segment_coo_impl("segment_coo_arg", src, index, reduce, dim_size, true);
}

ValuesAndArgs scatter_arg_reduce(const TensorView& src, int64_t dim, const TensorView& index, Reduce reduce,
                                 int64_t dim_size) {
  constexpr const char* op = "scatter_arg_reduce";
  check_common(op, src, "index", index);
  check_reduce(op, reduce, src.dtype(), true);
  SegmentArgs a;
  a.op = op;
  a.kind = SegmentKind::Scatter;
  a.reduce = reduce;
  a.src = detail::at_least_1d(src);
  a.positions = detail::at_least_1d(index);
  a.dim = detail::wrap_dim(op, dim, src.dim());
  SCATTERX_CHECK(a.positions.sizes() == a.src.sizes(), ArgumentError, op, "expected index of src's shape ",
                 a.src.sizes().str(), " (broadcast it first), got ", index.sizes().str());
  const int64_t max_value = dim_size >= 0 ? -1 : scan_positions(op, "index", a.positions, Rule::Any, 0, "");
  const int64_t num_out = dim_size >= 0 ? dim_size : max_value + 1;
  if (dim_size >= 0) detail::check_index_bounds(op, a.positions, a.dim, dim_size);
  a.geometry = make_geometry(a.src, a.positions, a.dim, num_out, true);
  return run(a, with_size(a.src.sizes(), a.dim, num_out), true);
}

Tensor gather_csr(const TensorView& src, const TensorView& indptr) {
  constexpr const char* op = "gather_csr";
  check_common(op, src, "indptr", indptr);
  detail::SegmentGatherArgs a;
  a.op = op;
  a.src = src;
  a.indptr = expand_leading(op, "indptr", indptr, src);
  a.dim = indptr.dim() - 1;
  const int64_t segments = std::max<int64_t>(indptr.size(-1) - 1, 0);
  SCATTERX_CHECK(src.size(a.dim) == segments || src.numel() == 0, ArgumentError, op, "expected src.size(", a.dim,
                 ") to equal the number of segments (indptr.size(", a.dim, ") - 1 = ", segments, "), got ",
                 src.size(a.dim));
  // out's length along dim is indptr's last value; every row must fit in it.
  int64_t out_len = 0;
  if (src.numel() > 0) {
    out_len = last_value(op, indptr);
    const std::string bound = detail::concat("indptr's last value ", out_len);
    scan_positions(op, "indptr", indptr, Rule::Indptr, out_len, bound.c_str());
  }
  Tensor out = Tensor::zeros(with_size(src.sizes(), a.dim, out_len), src.dtype(), src.device());
  if (out.numel() == 0) return out;
  a.out = out;
  a.out_len = out_len;
  a.geometry = make_geometry(src, a.indptr, a.dim, segments, false);
  if (src.device().is_cuda()) {
    detail::cuda::segment_gather(a);
  } else {
    detail::segment_gather_cpu(a);
  }
  return out;
}

Tensor gather_coo(const TensorView& src, const TensorView& index) {
  constexpr const char* op = "gather_coo";
  check_common(op, src, "index", index);
  detail::GatherArgs a;
  a.op = op;
  a.input = src;
  a.dim = index.dim() - 1;
  const TensorView expanded = expand_leading(op, "index", index, src);
  detail::check_index_bounds(op, index, a.dim, src.size(a.dim));
  const Shape shape = with_size(src.sizes(), a.dim, index.size(-1));
  Tensor out = Tensor::empty(shape, src.dtype(), src.device());
  if (out.numel() == 0) return out;
  // The index seen through zero strides after dim (one value per slice).
  Shape strides = expanded.strides();
  for (int64_t d = expanded.dim(); d < src.dim(); ++d) strides.push_back(0);
  a.index = TensorView(index.data(), index.dtype(), shape, strides, index.device());
  a.out = out;
  if (src.device().is_cuda()) {
    detail::cuda::gather(a);
  } else {
    detail::gather_cpu(a);
  }
  return out;
}

}  // namespace scatterx

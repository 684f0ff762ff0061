// gather_dot: validate, then one pass over the edges. An edge's dot reads two
// rows that other edges share, so the work splits over edges with no writes
// in common.
#include "ops/gather_scatter/gather_dot.h"

#include <algorithm>

#include "ops/detail/checks.h"
#include "ops/detail/prefetch.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/gather_scatter/gather_scatter_dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/parallel.h"

namespace scatterx {

namespace {

constexpr int64_t kLanes = 8;     // partial sums per dot: enough independent adds to fill the vector units
constexpr int64_t kPrefetch = 8;  // edges ahead whose rows are prefetched

// One dot of two contiguous rows, summed in kLanes interleaved partial sums
// then folded pairwise: a fixed order whatever the thread count.
template <typename T>
acc_t<T> dot(const T* x, const T* y, int64_t n) {
  using A = acc_t<T>;
  A lane[kLanes] = {};
  int64_t f = 0;
  for (; f + kLanes <= n; f += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lane[j] += static_cast<A>(x[f + j]) * static_cast<A>(y[f + j]);
  }
  for (int64_t j = 0; f + j < n; ++j) lane[j] += static_cast<A>(x[f + j]) * static_cast<A>(y[f + j]);
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t j = 0; j < width; ++j) lane[j] += lane[j + width];
  }
  return lane[0];
}

template <typename T, typename IA, typename IB>
void dot_edges(const TensorView& a, const TensorView& a_index, const TensorView& b, const TensorView& b_index,
               int64_t features, T* out) {
  const T* a_rows = static_cast<const T*>(a.data());
  const T* b_rows = static_cast<const T*>(b.data());
  const IA* ai = static_cast<const IA*>(a_index.data());
  const IB* bi = static_cast<const IB*>(b_index.data());
  const int64_t as = a_index.strides()[0];
  const int64_t bs = b_index.strides()[0];
  const int64_t edges = a_index.size(0);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(features, 1));
  const int64_t row_bytes = features * int64_t{sizeof(T)};
  detail::parallel_for(edges, grain, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      if (e + kPrefetch < end) {
        detail::prefetch_row(a_rows + static_cast<int64_t>(ai[(e + kPrefetch) * as]) * features, row_bytes);
        detail::prefetch_row(b_rows + static_cast<int64_t>(bi[(e + kPrefetch) * bs]) * features, row_bytes);
      }
      const T* x = a_rows + static_cast<int64_t>(ai[e * as]) * features;
      const T* y = b_rows + static_cast<int64_t>(bi[e * bs]) * features;
      out[e] = static_cast<T>(dot(x, y, features));
    }
  });
}

void check_rows(const char* op, const char* name, const TensorView& t, const char* index_name, const TensorView& index,
                int64_t edges) {
  detail::check_index_dtype(op, index_name, index);
  SCATTERX_CHECK(index.dim() == 1, ArgumentError, op, "expected ", index_name, " to be 1-d, got shape ",
                 index.sizes().str());
  SCATTERX_CHECK(index.size(0) == edges, ArgumentError, op, "expected ", index_name, " of length ", edges,
                 " (a_index's), got ", index.size(0));
  SCATTERX_CHECK(t.dim() >= 1, ArgumentError, op, "expected ", name,
                 " with at least 1 dimension (rows along dim 0), got 0-d");
  detail::check_named_index_bounds(op, index_name, index, 0, t.size(0));
}

}  // namespace

Tensor gather_dot(const TensorView& a, const TensorView& a_index, const TensorView& b, const TensorView& b_index) {
  constexpr const char* op = "gather_dot";
  detail::check_devices(op, {{"a", &a}, {"a_index", &a_index}, {"b", &b}, {"b_index", &b_index}});
  SCATTERX_CHECK(is_floating_point(a.dtype()), DTypeError, op, "expected a of a floating dtype, got ",
                 dtype_name(a.dtype()));
  detail::check_same_dtype(op, "b", b, "a", a);
  SCATTERX_CHECK(a_index.dim() == 1, ArgumentError, op, "expected a_index to be 1-d, got shape ",
                 a_index.sizes().str());
  const int64_t edges = a_index.size(0);
  check_rows(op, "a", a, "a_index", a_index, edges);
  check_rows(op, "b", b, "b_index", b_index, edges);
  bool same_rows = a.dim() == b.dim();
  for (int64_t d = 1; same_rows && d < a.dim(); ++d) same_rows = a.size(d) == b.size(d);
  SCATTERX_CHECK(same_rows, ArgumentError, op, "expected a and b to match after dim 0, got shapes ", a.sizes().str(),
                 " and ", b.sizes().str());
  int64_t features = 1;
  for (int64_t d = 1; d < a.dim(); ++d) features *= a.size(d);

  Tensor out = Tensor::zeros(Shape{edges}, a.dtype(), a.device());
  if (edges == 0 || features == 0) return out;
  // The kernel reads contiguous rows; a strided operand is copied once.
  const Tensor a_copy = a.is_contiguous() ? Tensor() : Tensor::clone(a);
  const Tensor b_copy = b.is_contiguous() ? Tensor() : Tensor::clone(b);
  const TensorView ac = a.is_contiguous() ? a : TensorView(a_copy);
  const TensorView bc = b.is_contiguous() ? b : TensorView(b_copy);
  if (a.device().is_cuda()) {
    detail::cuda::gather_dot(op, ac, a_index, bc, b_index, features, out);
    return out;
  }
  detail::dispatch_gather_dot(a.dtype(), a_index.dtype(), b_index.dtype(), op, [&](auto t, auto ia, auto ib) {
    using T = CppType<decltype(t)::value>;
    dot_edges<T, typename decltype(ia)::type, typename decltype(ib)::type>(ac, a_index, bc, b_index, features,
                                                                           static_cast<T*>(out.data()));
  });
  return out;
}

}  // namespace scatterx

#include "dist/scratch_rows.h"

#include <memory>

#include "ops/gather_scatter/gather_scatter_args.h"
#include "ops/runtime/memory.h"

namespace scatterx::dist::scratch {

Tensor scratch_rows(int64_t rows, int64_t cols, DType dtype) {
  const auto bytes = static_cast<size_t>(rows * cols * element_size(dtype));
  const auto [block, capacity] = scatterx::detail::recycled_acquire(bytes);
  return Tensor::adopt(TensorView(block, dtype, {rows, cols}), std::shared_ptr<void>(block, [c = capacity](void* p) {
                         scatterx::detail::recycled_release(p, c);
                       }));
}

Tensor scratch_vector(int64_t n, DType dtype) {
  Tensor rows = scratch_rows(n, 1, dtype);
  return Tensor::adopt(rows.view({n}), std::make_shared<Tensor>(rows));
}

Tensor gather_scatter_to_scratch(const TensorView& x, const TensorView& src, const TensorView& dst,
                                 const TensorView* weight, int64_t num_out, const char* op) {
  const int64_t edges = dst.numel();
  const int64_t features = x.dim() == 2 ? x.size(1) : 0;
  if (!x.is_contiguous() || x.dim() != 2 || edges == 0 || features == 0) {
    if (src.data() != nullptr) return gather_scatter(x, src, dst, Reduce::Sum, weight, num_out);
    Tensor identity = Tensor::empty({edges}, DType::Int64);
    for (int64_t e = 0; e < edges; ++e) identity.data_as<int64_t>()[e] = e;
    return gather_scatter(x, identity, dst, Reduce::Sum, weight, num_out);
  }
  Tensor out = scratch_rows(num_out, features, x.dtype());
  scatterx::detail::GatherScatterArgs a;
  a.op = op;
  a.x = x;
  a.src_index = src;
  a.dst_index = dst;
  if (weight != nullptr) a.weight = *weight;
  a.out = out;
  a.edges = edges;
  a.features = features;
  a.num_out = num_out;
  scatterx::detail::gather_scatter_cpu(a);
  return out;
}

}  // namespace scatterx::dist::scratch

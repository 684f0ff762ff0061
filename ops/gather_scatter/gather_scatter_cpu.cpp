// CPU gather_scatter: the dispatch over x's dtype into the per-dtype
// kernels (gather_scatter_cpu_impl.h, one generated file per dtype).
#include <cstring>

#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/gather_scatter_args.h"

namespace scatterx::detail {

void gather_scatter_cpu(const GatherScatterArgs& a) {
  // Sparse groups list only the destinations hit: the others are 0.
  if (a.groups != nullptr && !a.groups->dense)
    std::memset(a.out.data(), 0, static_cast<size_t>(a.out.numel() * a.out.element_size()));
  dispatch_dtype(a.x.dtype(), a.op, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (is_floating_point(D)) gather_scatter_cpu_dtype<D>(a);  // the front end refused the others
  });
}

}  // namespace scatterx::detail

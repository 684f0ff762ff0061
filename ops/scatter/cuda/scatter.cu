// CUDA scatter entry: the geometry, then the per-dtype kernels.
#include "ops/detail/index_geometry.h"
#include "ops/dispatch.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"
#include "ops/scatter/cuda/scatter_cuda.h"

namespace scatterx::detail::cuda {

void scatter(const ScatterArgs& args) {
  DeviceGuard guard(args.self.device(), args.op);
  // self is the indexed tensor, src the positional one (see index_geometry.h)
  const IndexGeometry geometry = make_index_geometry(args.self, args.src, args.index, args.dim);
  dispatch_dtype(args.self.dtype(), args.op,
                 [&](auto tag) { scatter_cuda_dtype<decltype(tag)::value>(args, geometry); });
}

}  // namespace scatterx::detail::cuda

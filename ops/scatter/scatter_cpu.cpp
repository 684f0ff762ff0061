#include "ops/dispatch.h"
#include "ops/scatter/scatter_args.h"

namespace scatterx::detail {

void scatter_cpu(const ScatterArgs& args) {
  // self is the indexed tensor, src the positional one (see index_geometry.h)
  const IndexGeometry geometry = make_index_geometry(args.self, args.src, args.index, args.dim);
  dispatch_dtype(args.self.dtype(), args.op,
                 [&](auto tag) { scatter_cpu_dtype<decltype(tag)::value>(args, geometry); });
}

}  // namespace scatterx::detail

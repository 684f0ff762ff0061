// Device side of index_geometry.h: the position of rank u in a geometry's
// (outer, i, j) order, as element offsets into the three tensors.
#pragma once

#include <cstdint>

#include "ops/detail/index_geometry.h"

namespace scatterx::detail::cuda {

struct Position {
  int64_t indexed;     // into the indexed tensor, without the index's step along dim
  int64_t positional;  // into the positional tensor
  int64_t index;       // into index
  int64_t i;           // the position along dim
};

__device__ __forceinline__ Position decode_position(const IndexGeometry& g, int64_t u) {
  const int64_t j = u % g.row_len;
  const int64_t rest = u / g.row_len;
  const int64_t i = rest % g.k;
  int64_t off[3];
  g.outer.offsets(rest / g.k, off);
  return {off[0] + j * g.row_stride[0], off[1] + i * g.dim_stride[1] + j * g.row_stride[1],
          off[2] + i * g.dim_stride[2] + j * g.row_stride[2], i};
}

}  // namespace scatterx::detail::cuda

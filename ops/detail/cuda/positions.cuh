// Device side of index_geometry.h: the position of rank u in a geometry's
// (outer, i, j) order, as element offsets into the three tensors.
//
// A DeviceGeometry is an IndexGeometry with its divisors prepared for
// 32-bit fast division (fast_divider.h): when every rank is below 2^31,
// decode_position splits a rank into coordinates with a multiply-high per
// dimension instead of 64-bit divisions. Offsets stay 64-bit either way, so
// only the number of positions decides, never the tensors' extents.
#pragma once

#include <cstdint>

#include "ops/detail/fast_divider.h"
#include "ops/detail/index_geometry.h"

namespace scatterx::detail::cuda {

struct Position {
  int64_t indexed;     // into the indexed tensor, without the index's step along dim
  int64_t positional;  // into the positional tensor
  int64_t index;       // into index
  int64_t i;           // the position along dim
};

struct DeviceGeometry : IndexGeometry {
  bool narrow = false;  // every rank < 2^31: decode with the dividers below
  FastDivider by_row_len;
  FastDivider by_k;
  FastDivider by_outer[kMaxDims];

  DeviceGeometry() = default;
  explicit DeviceGeometry(const IndexGeometry& g) : IndexGeometry(g) {
    constexpr int64_t kNarrowRanks = int64_t{1} << 31;
    narrow = row_len > 0 && k > 0 && outer_numel > 0 && outer_numel <= kNarrowRanks / k &&
             outer_numel * k <= kNarrowRanks / row_len;
    if (!narrow) return;
    by_row_len = FastDivider(static_cast<uint32_t>(row_len));
    by_k = FastDivider(static_cast<uint32_t>(k));
    for (int d = 0; d < outer.ndim; ++d) by_outer[d] = FastDivider(static_cast<uint32_t>(outer.sizes[d]));
  }
};

__device__ __forceinline__ Position decode_position(const DeviceGeometry& g, int64_t u) {
  int64_t i, j;
  int64_t off[3] = {0, 0, 0};
  if (g.narrow) {
    const uint32_t n = static_cast<uint32_t>(u);
    const uint32_t rest = g.by_row_len.quotient(n);
    j = n - rest * g.by_row_len.divisor();
    uint32_t outer = g.by_k.quotient(rest);
    i = rest - outer * g.by_k.divisor();
    for (int d = g.outer.ndim - 1; d >= 0; --d) {
      const uint32_t next = g.by_outer[d].quotient(outer);
      const int64_t c = outer - next * g.by_outer[d].divisor();
      outer = next;
      for (int t = 0; t < 3; ++t) off[t] += c * g.outer.strides[t][d];
    }
  } else {
    j = u % g.row_len;
    const int64_t rest = u / g.row_len;
    i = rest % g.k;
    g.outer.offsets(rest / g.k, off);
  }
  return {off[0] + j * g.row_stride[0], off[1] + i * g.dim_stride[1] + j * g.row_stride[1],
          off[2] + i * g.dim_stride[2] + j * g.row_stride[2], i};
}

}  // namespace scatterx::detail::cuda

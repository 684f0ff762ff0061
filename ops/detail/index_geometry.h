// The iteration space every gather/scatter kernel walks: the positions of
// index's shape, split as  outer x dim x row, where
//   dim    is the indexed dimension (k = index.size(dim) positions),
//   row    is the innermost run of dims after dim (collapsed into one; length
//          1 when dim is innermost), the loop kernels vectorize,
//   outer  is every other dim (a StridedLayout).
// Three tensors are addressed: 0 = indexed (self for scatter, input for
// gather; along dim it moves by the index value), 1 = positional (src for
// scatter, out for gather; along dim it moves with the position), 2 = index.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "ops/detail/prefetch.h"
#include "ops/detail/strided.h"
#include "ops/macros.h"
#include "ops/tensor.h"

namespace scatterx::detail {

struct IndexGeometry {
  int64_t k = 0;
  int64_t dim_stride[3] = {};
  int64_t row_len = 1;
  int64_t row_stride[3] = {};
  StridedLayout<3> outer;
  int64_t outer_numel = 1;
  // The index is constant across every non-dim dim (stride 0): one index
  // value selects a whole slice, as in index_select, index_add and a
  // torch_scatter-style broadcast index. Such ops group positions by target.
  bool slice_index = false;
};

inline IndexGeometry make_index_geometry(const TensorView& indexed, const TensorView& positional,
                                         const TensorView& index, int64_t dim) {
  IndexGeometry g;
  const TensorView* views[3] = {&indexed, &positional, &index};
  g.k = index.size(dim);
  for (int t = 0; t < 3; ++t) g.dim_stride[t] = views[t]->strides()[dim];
  g.slice_index = true;
  StridedLayout<3> before;
  StridedLayout<3> after;
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    int64_t s[3];
    for (int t = 0; t < 3; ++t) s[t] = views[t]->strides()[d];
    if (index.sizes()[d] > 1 && s[2] != 0) g.slice_index = false;
    (d < dim ? before : after).push(index.sizes()[d], s);
  }
  after = after.collapsed();
  if (after.ndim > 0) {
    const int last = after.ndim - 1;
    g.row_len = after.sizes[last];
    for (int t = 0; t < 3; ++t) g.row_stride[t] = after.strides[t][last];
    after.ndim = last;
  }
  for (int d = 0; d < after.ndim; ++d) {
    int64_t s[3];
    for (int t = 0; t < 3; ++t) s[t] = after.strides[t][d];
    before.push(after.sizes[d], s);
  }
  g.outer = before.collapsed();
  g.outer_numel = g.outer.numel();
  return g;
}

// Work units for kernels that walk the index position by position: each unit
// is one outer position and one chunk of the row, and owns every destination
// its positions can reach, so units run in parallel without contention. The
// row is cut finer when there are few outer positions, so threads get work.
struct RowTiling {
  int64_t chunk = 1;
  int64_t chunks_per_row = 1;
  int64_t units = 0;
};

inline RowTiling tile_rows(const IndexGeometry& g, int64_t min_chunk, int64_t max_chunk) {
  const int64_t want_units = 4 * static_cast<int64_t>(omp_get_max_threads());
  RowTiling t;
  t.chunk = std::max<int64_t>(1, std::min(g.row_len, max_chunk));
  if (g.outer_numel < want_units && g.row_len > min_chunk) {
    const int64_t share = (g.row_len * g.outer_numel + want_units - 1) / want_units;
    t.chunk = std::min(t.chunk, std::max(min_chunk, share));
  }
  t.chunks_per_row = (g.row_len + t.chunk - 1) / t.chunk;
  t.units = g.outer_numel * t.chunks_per_row;
  return t;
}

// Unit u of a tiling: element offsets of the three tensors at its first row
// element, and how many row elements it covers.
struct RowTile {
  int64_t offset[3];
  int64_t len;
};

inline RowTile row_tile(const IndexGeometry& g, const RowTiling& t, int64_t u) {
  RowTile tile;
  g.outer.offsets(u / t.chunks_per_row, tile.offset);
  const int64_t j0 = (u % t.chunks_per_row) * t.chunk;
  for (int k = 0; k < 3; ++k) tile.offset[k] += j0 * g.row_stride[k];
  tile.len = std::min(t.chunk, g.row_len - j0);
  return tile;
}

}  // namespace scatterx::detail

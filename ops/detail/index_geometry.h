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

#include <cstdint>

#include "ops/detail/strided.h"
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

// Prefetches the first bytes of a row about to be read at a random address.
inline void prefetch_row(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  const int64_t lines = bytes < 512 ? (bytes + 63) / 64 : 8;
  for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(c + l * 64);
}

}  // namespace scatterx::detail

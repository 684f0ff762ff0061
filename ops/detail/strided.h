// Row-major iteration over a shape while tracking element offsets into N
// tensors with arbitrary (zero, negative) strides.
#pragma once

#include <cstdint>

#include "ops/macros.h"
#include "ops/tensor.h"

namespace scatterx::detail {

template <int N>
struct StridedLayout {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  SCATTERX_HOST_DEVICE int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }

  void push(int64_t size, const int64_t (&dim_strides)[N]) {
    sizes[ndim] = size;
    for (int t = 0; t < N; ++t) strides[t][ndim] = dim_strides[t];
    ++ndim;
  }

  // Drops size-1 dims and merges neighbours that every tensor walks as one
  // (stride[d] == stride[d+1] * size[d+1]), so inner loops run longer.
  StridedLayout collapsed() const {
    StridedLayout out;
    for (int d = 0; d < ndim; ++d) {
      if (sizes[d] == 1) continue;
      if (out.ndim > 0) {
        const int last = out.ndim - 1;
        bool mergeable = true;
        for (int t = 0; t < N; ++t) mergeable &= out.strides[t][last] == strides[t][d] * sizes[d];
        if (mergeable) {
          out.sizes[last] *= sizes[d];
          for (int t = 0; t < N; ++t) out.strides[t][last] = strides[t][d];
          continue;
        }
      }
      int64_t s[N];
      for (int t = 0; t < N; ++t) s[t] = strides[t][d];
      out.push(sizes[d], s);
    }
    return out;
  }

  // Element offsets of the position with row-major rank `linear` (also in
  // device code: the CUDA kernels take layouts by value).
  SCATTERX_HOST_DEVICE void offsets(int64_t linear, int64_t (&offset)[N]) const {
    for (int t = 0; t < N; ++t) offset[t] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t c = linear % sizes[d];
      linear /= sizes[d];
      for (int t = 0; t < N; ++t) offset[t] += c * strides[t][d];
    }
  }
};

// A position in a StridedLayout that steps forward in row-major order.
template <int N>
class StridedCursor {
 public:
  StridedCursor(const StridedLayout<N>& layout, int64_t linear) : layout_(layout) {
    for (int d = layout.ndim - 1; d >= 0; --d) {
      coord_[d] = linear % layout.sizes[d];
      linear /= layout.sizes[d];
    }
    layout.offsets(rank_of_coords(), offset_);
  }

  const int64_t* offset() const { return offset_; }
  int64_t offset(int t) const { return offset_[t]; }

  void next() {
    for (int d = layout_.ndim - 1; d >= 0; --d) {
      for (int t = 0; t < N; ++t) offset_[t] += layout_.strides[t][d];
      if (++coord_[d] < layout_.sizes[d]) return;
      for (int t = 0; t < N; ++t) offset_[t] -= layout_.sizes[d] * layout_.strides[t][d];
      coord_[d] = 0;
    }
  }

 private:
  int64_t rank_of_coords() const {
    int64_t r = 0;
    for (int d = 0; d < layout_.ndim; ++d) r = r * layout_.sizes[d] + coord_[d];
    return r;
  }

  const StridedLayout<N>& layout_;
  int64_t coord_[kMaxDims] = {};
  int64_t offset_[N] = {};
};

// The layout of views that share a shape, tensor by tensor.
template <int N>
StridedLayout<N> layout_of(const Shape& shape, const TensorView* const (&views)[N]) {
  StridedLayout<N> layout;
  for (int64_t d = 0; d < shape.size(); ++d) {
    int64_t s[N];
    for (int t = 0; t < N; ++t) s[t] = views[t]->strides()[d];
    layout.push(shape[d], s);
  }
  return layout;
}

}  // namespace scatterx::detail

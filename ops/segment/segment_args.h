// Internal: what the segment front end (segment.cpp) hands to a backend
// after validation, and the segment geometry both backends walk. Kernels
// trust these arguments completely. Plain C++17, host and device.
#pragma once

#include <cstdint>

#include "ops/detail/strided.h"
#include "ops/macros.h"
#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx::detail {

// How the positions of a segment are found.
enum class SegmentKind : uint8_t {
  Csr,      // out row n is positions [ptr[n], ptr[n + 1])
  Coo,      // out row n is the positions whose sorted index equals n
  Scatter,  // every src element names its out row (an unsorted index of src's shape)
};

// What a scan of a position tensor's values must establish.
enum class PositionRule : uint8_t {
  Indptr,  // values in [0, bound], non-decreasing along the last dim
  Sorted,  // values >= 0, non-decreasing along the last dim
  Any,     // values >= 0
};

// src is split as outer x len x inner around dim; out (contiguous) as
// outer x num_out x inner. Two tensors are addressed through the layouts:
// 0 = src, 1 = the position tensor (indptr / index; for Csr and Coo its
// inner strides are 0).
struct SegmentGeometry {
  StridedLayout<2> outer;
  StridedLayout<2> inner;
  int64_t outer_numel = 1;
  int64_t inner_numel = 1;
  int64_t len = 0;         // src.size(dim)
  int64_t src_stride = 0;  // src.stride(dim)
  int64_t pos_len = 0;     // the position tensor's size along dim (indptr: num_out + 1)
  int64_t pos_stride = 0;  // the position tensor's stride along dim
  int64_t num_out = 0;     // out.size(dim)
};

struct SegmentArgs {
  const char* op = "";
  SegmentKind kind = SegmentKind::Csr;
  Reduce reduce = Reduce::Sum;
  TensorView src;
  TensorView positions;  // indptr or index, expanded over src's leading dims (and, for Scatter, src's shape)
  int64_t dim = 0;
  TensorView out;  // contiguous
  TensorView arg;  // int64, out's shape; data null when no arg is wanted
  SegmentGeometry geometry;
};

// gather_csr: out (contiguous) has src's shape with size(dim) = out_len.
// The geometry is src's, with num_out = src.size(dim) (one source row per
// segment) and positions = indptr.
struct SegmentGatherArgs {
  const char* op = "";
  TensorView src;
  TensorView indptr;
  int64_t dim = 0;
  TensorView out;  // zero-filled: positions no segment covers stay 0
  int64_t out_len = 0;
  SegmentGeometry geometry;
};

// The first i in [0, len) with row[i * stride] >= value (len if none); row is sorted.
template <typename I>
SCATTERX_HOST_DEVICE inline int64_t lower_bound(const I* row, int64_t stride, int64_t len, int64_t value) {
  int64_t lo = 0;
  int64_t hi = len;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<int64_t>(row[mid * stride]) < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// [begin, end) along dim of out row n, for Csr (row = the outer row's indptr)
// or Coo (row = the outer row's sorted index).
template <typename I>
SCATTERX_HOST_DEVICE inline void segment_bounds(SegmentKind kind, const I* row, const SegmentGeometry& g, int64_t n,
                                                int64_t& begin, int64_t& end) {
  if (kind == SegmentKind::Csr) {
    begin = static_cast<int64_t>(row[n * g.pos_stride]);
    end = static_cast<int64_t>(row[(n + 1) * g.pos_stride]);
  } else {
    begin = lower_bound(row, g.pos_stride, g.pos_len, n);
    end = lower_bound(row, g.pos_stride, g.pos_len, n + 1);
  }
}

void segment_cpu(const SegmentArgs& args);
void segment_gather_cpu(const SegmentGatherArgs& args);

}  // namespace scatterx::detail

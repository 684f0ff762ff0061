// Internal: the segment ops on CUDA tensors, called by segment.cpp after
// validation (kernels in segment.cu).
#pragma once

#include "ops/segment/segment_args.h"

namespace scatterx::detail::cuda {

void segment(const SegmentArgs& args);

// The check of a CUDA position tensor (indptr / index) against `rule` (bound:
// Indptr's upper limit), in row-major order: the first position that breaks
// it (-1 when none) and the largest value (-1 when empty). Reads 16 bytes
// back (synchronizes the current stream).
struct PositionScan {
  int64_t first_bad = -1;
  int64_t max_value = -1;
};
PositionScan scan_positions(const char* op, const TensorView& positions, PositionRule rule, int64_t bound);
void segment_gather(const SegmentGatherArgs& args);

}  // namespace scatterx::detail::cuda

// Internal: the segment ops on CUDA tensors, called by segment.cpp after
// validation (kernels in segment.cu).
#pragma once

#include "ops/segment/segment_args.h"

namespace scatterx::detail::cuda {

void segment(const SegmentArgs& args);
void segment_gather(const SegmentGatherArgs& args);

}  // namespace scatterx::detail::cuda

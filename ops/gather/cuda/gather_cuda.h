// Internal: gather / index_select on CUDA tensors, called by gather.cpp
// after validation (kernels in gather.cu).
#pragma once

#include "ops/gather/gather_args.h"

namespace scatterx::detail::cuda {

void gather(const GatherArgs& args);

}  // namespace scatterx::detail::cuda

// Internal: what the gather front end (gather.cpp) hands to a backend after
// validation. Kernels trust these arguments completely.
#pragma once

#include <cstdint>

#include "ops/tensor.h"

namespace scatterx::detail {

struct GatherArgs {
  const char* op = "";
  TensorView out;    // index's shape; rank >= 1
  TensorView input;  // values read; rank == out's
  TensorView index;  // out's shape, values in [0, input.size(dim)); index_select passes it expanded
  int64_t dim = 0;
};

void gather_cpu(const GatherArgs& args);

}  // namespace scatterx::detail

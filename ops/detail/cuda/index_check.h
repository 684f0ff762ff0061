// Internal: the CUDA index check the gather and scatter front ends run
// before their kernels (ops/detail/cuda/index_check.cu).
#pragma once

#include <cstdint>

#include "ops/tensor.h"

namespace scatterx::detail::cuda {

// Raises IndexError (the CPU backend's message: first bad value row-major
// and its position) when a value of `index` is outside [0, bound).
// Synchronizes the current stream; does nothing when index checks are off.
// With measure_contention, the same pass estimates the share of the index's
// values taken by its most frequent value (see contention.h) and returns
// it; -1 when not measured (checks off, or not asked).
double check_index_bounds(const char* op, const TensorView& index, int64_t dim, int64_t bound, bool measure_contention);

}  // namespace scatterx::detail::cuda

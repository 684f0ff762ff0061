// Element-wise reduction of two equally long contiguous buffers,
//   out[i] = finalize(combine(a[i], b[i]), count)
// with the reduce functors of reduce_ops.h (the same arithmetic as the
// scatter kernels: 16-bit floats through float, integers wrapping, amax/amin
// propagating NaN). `count` only matters for Reduce::Mean (the divisor; 0
// leaves the plain sum). out may alias a or b. The distributed layer folds
// received data with it.
#pragma once

#include <cstdint>

#include "ops/dtype.h"
#include "ops/reduce.h"

namespace scatterx::detail {

void combine_cpu(void* out, const void* a, const void* b, int64_t n, DType dtype, Reduce reduce, int64_t count,
                 const char* op);

// out[i] = finalize(out[i], count): the division of a mean whose sum is done.
void finalize_mean_cpu(void* out, int64_t n, DType dtype, int64_t count, const char* op);

}  // namespace scatterx::detail

// Row buffers from the scratch cache for the workload layers (moe, embedding
// bags): fresh pages for each call's send, receive and fold buffers would be
// zero-filled by the kernel first, one more pass over the rows (and page
// faults that oversubscribed ranks pay while their peers wait).
#pragma once

#include <cstdint>

#include "ops/gather_scatter/gather_scatter.h"
#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx::dist::scratch {

// A [rows, cols] tensor over a block of the scratch cache (uninitialized),
// given back to the cache when the last copy of the tensor goes.
Tensor scratch_rows(int64_t rows, int64_t cols, DType dtype);
// The same for a 1-d [n] tensor.
Tensor scratch_vector(int64_t n, DType dtype);

// gather_scatter(x, src, dst, Sum, weight, num_out) into scratch rows: its
// kernel called directly, as its front end would after its checks (the
// indices are the caller's own plans, trusted; src with no data means the
// identity, edge e reads row e). Every row is written, 0 where no edge
// lands. Falls back to gather_scatter when x is not contiguous or there is
// nothing to fold. The result may be handed to users: its block returns to
// the cache when the last copy goes.
Tensor gather_scatter_to_scratch(const TensorView& x, const TensorView& src, const TensorView& dst,
                                 const TensorView* weight, int64_t num_out, const char* op);

}  // namespace scatterx::dist::scratch

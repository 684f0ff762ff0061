// The collectives' checks of their local arguments (each raises ArgumentError
// or DTypeError in the 'op: expected ..., got ...' form, before any message),
// and what a checked ReduceOp means to the local folds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dist/dist.h"
#include "ops/dtype.h"
#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx::dist {

// t is on the CPU or on a visible CUDA device this build supports.
void check_cpu(const char* op, const char* name, const TensorView& t);

// t has ref's dtype and device.
void check_dtype_match(const char* op, const char* name, const TensorView& t, const char* ref_name,
                       const TensorView& ref);

// As check_cpu, and no two elements of t share memory (t is written).
void check_output(const char* op, const char* name, const TensorView& t);

// A list holds one tensor per rank.
void check_list_size(const char* op, const char* name, size_t n, int ws);

// r is a ReduceOp the dtype supports.
void check_reduce_op(const char* op, ReduceOp r, DType dtype);

// The local reduce that folds a ReduceOp.
Reduce local_reduce(ReduceOp op);

// The divisor of an average, applied by the last fold (0: none).
inline int64_t mean_count(ReduceOp r, int ws) { return r == ReduceOp::Avg ? ws : 0; }

// `big` is ws blocks of `block`'s shape, stacked ([ws, ...]) or concatenated
// along dim 0 ([ws * n, ...]); a 0-d block makes [ws].
void check_ws_blocks(const char* op, const char* big_name, const TensorView& big, const char* block_name,
                     const TensorView& block, int ws);

// Split sizes of t's dim 0, one per rank (non-negative, summing to
// t.size(0)); empty means equal splits of dim 0.
std::vector<int64_t> resolve_splits(const char* op, const char* name, const std::vector<int64_t>& splits,
                                    const TensorView& t, const char* tensor_name, int ws);

// output's rows (its dims after 0) have input's shape.
void check_same_rows(const char* op, const TensorView& output, const TensorView& input);

}  // namespace scatterx::dist

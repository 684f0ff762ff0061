// Argument validation shared by every op. Each check throws the typed
// scatterx error with "<op>: <argument> <expected>, got <received>" and does
// nothing else; ops call them before any write.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx::detail {

// dim in [-n, n) wrapped to [0, n), where n = max(ndim, 1) as torch treats 0-d tensors.
int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim);

// A 0-d view as a 1-d view of one element; other views unchanged.
TensorView at_least_1d(const TensorView& view);

// `device` has a backend in this build (the cpu always; CUDA devices when
// the CUDA backend is built). `name` names what is on it.
void check_backend(const char* op, const char* name, Device device);

// All named tensors on one device, and that device has a backend here.
void check_devices(const char* op, std::initializer_list<std::pair<const char*, const TensorView*>> tensors);

void check_index_dtype(const char* op, const char* name, const TensorView& index);
void check_same_dtype(const char* op, const char* name, const TensorView& tensor, const char* ref_name,
                      const TensorView& ref);
void check_reduce_supported(const char* op, Reduce reduce, DType dtype);

// `name` (written in place) has no two positions sharing an element.
void check_no_internal_overlap(const char* op, const char* name, const TensorView& tensor);
// No byte `written` touches is touched by `read`. Conservative: a layout it
// cannot prove disjoint (byte ranges meet and strides do not interleave) is refused.
void check_no_overlap(const char* op, const char* written_name, const TensorView& written, const char* read_name,
                      const TensorView& read);

// Every value of `index` lies in [0, bound), bound being the size of
// dimension `dim` of the indexed tensor. Raises IndexError naming the first
// bad value (row-major) and its position in `index`.
//
// For a CUDA index with measure_contention, also returns the estimated
// share of the index's values taken by its most frequent value (the CUDA
// scatter's path choice, ops/detail/cuda/contention.h); otherwise -1.
double check_index_bounds(const char* op, const TensorView& index, int64_t dim, int64_t bound,
                          bool measure_contention = false);

// check_index_bounds for an op that takes several indices: the error names
// the one at fault ("<op>: src_index 7 is out of bounds for dimension 0
// with size 4 (src_index position [1])").
void check_named_index_bounds(const char* op, const char* name, const TensorView& index, int64_t dim, int64_t bound);

}  // namespace scatterx::detail

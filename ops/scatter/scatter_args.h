// Internal: what the scatter front end (scatter.cpp) hands to a backend
// after validation. Kernels trust these arguments completely.
#pragma once

#include <cstdint>

#include "ops/detail/index_geometry.h"
#include "ops/dtype.h"
#include "ops/reduce.h"
#include "ops/scalar.h"
#include "ops/tensor.h"

namespace scatterx::detail {

struct ScatterArgs {
  const char* op = "";
  TensorView self;   // written in place; rank >= 1
  TensorView index;  // self's rank, values in [0, self.size(dim)); slice-wise ops pass it expanded (stride 0 off dim)
  TensorView src;    // index's rank, no smaller than index; a scalar value is one element with zero strides
  int64_t dim = 0;
  Reduce reduce = Reduce::None;
  bool include_self = true;
  bool scaled = false;  // src is multiplied by alpha (index_add_ with alpha != 1; Reduce::Sum only)
  Scalar alpha;
  // index_add_weighted_ (Reduce::Sum, alpha 1): the value at position i
  // along dim is multiplied by weights[i]; a 1-d view of self's dtype.
  bool weighted = false;
  TensorView weights;
  // CUDA: the index check's estimate of the share of index values taken by
  // the most frequent one (ops/detail/cuda/contention.h); -1 when not measured.
  double hottest_index_share = -1;
};

void scatter_cpu(const ScatterArgs& args);

// The direct rows' caps (scatter_cpu_impl.h): a slice-wise scatter over
// contiguous rows into a destination slab (self.size(dim) rows) of at most
// kDirectSlabBytes, with at most kDirectMaxFolds element folds, is folded row
// by row on one thread, its read-modify-writes hitting in L2. Measured on 2
// cores (one thread, float32, index_add_): 16-float rows 1.7-2.4x faster than
// the grouped path on 1 or 2 threads up to 4M folds; 64-float rows into a full
// 256 KiB slab 1.05-1.1x at 1M folds and 0.7-0.85x at 4M. The cap is 256K
// folds so that machines with many more cores, where the grouped path
// spreads, lose nothing. scatter_rows sends its small sums, maxima and minima
// the same way.
constexpr int64_t kDirectSlabBytes = int64_t{256} << 10;
constexpr int64_t kDirectMaxFolds = int64_t{1} << 18;
inline bool direct_rows_fit(int64_t slab_bytes, int64_t folds) {
  return slab_bytes <= kDirectSlabBytes && folds <= kDirectMaxFolds;
}

// For an index the caller has already checked against self.size(0)
// (scatter_rows' small folds): index_add_(self, 0, index, source) for Sum,
// index_reduce_(self, 0, index, source, reduce, include_self=false) for the
// other reduces; the front end's other checks, without its second pass over
// the index; errors name op.
void index_fold_rows_of_checked_index(const char* op, const TensorView& self, const TensorView& index,
                                      const TensorView& source, Reduce reduce);

// Per-dtype entry points, one explicit instantiation per generated file.
template <DType D>
void scatter_cpu_dtype(const ScatterArgs& args, const IndexGeometry& geometry);

}  // namespace scatterx::detail

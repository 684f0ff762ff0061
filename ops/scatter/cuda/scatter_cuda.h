// Internal: the scatters on CUDA tensors, called by scatter.cpp after
// validation (scatter.cu picks the path; the kernels are in
// scatter_impl.cuh and scatter_sort.cu).
#pragma once

#include "ops/dtype.h"
#include "ops/scatter/scatter_args.h"

namespace scatterx::detail {
struct IndexGeometry;
}

namespace scatterx::detail::cuda {

void scatter(const ScatterArgs& args);

// Per-dtype scatter entry points, one explicit instantiation per generated
// file (scatter_cuda_<dtype>.cu).
template <DType D>
void scatter_cuda_dtype(const ScatterArgs& args, const IndexGeometry& geometry);

}  // namespace scatterx::detail::cuda

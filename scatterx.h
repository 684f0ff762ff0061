// scatterx: tensor-indexing kernels (gather, scatter, index and segment ops) with
// PyTorch's semantics. Include this one header for the whole local API.
#pragma once

#include "ops/cuda.h"
#include "ops/dtype.h"
#include "ops/error.h"
#include "ops/gather/gather.h"
#include "ops/gather_scatter/gather_dot.h"
#include "ops/gather_scatter/gather_scatter.h"
#include "ops/gather_scatter/index_plan.h"
#include "ops/gather_scatter/scatter_softmax.h"
#include "ops/reduce.h"
#include "ops/runtime/build_info.h"
#include "ops/scalar.h"
#include "ops/scatter/scatter.h"
#include "ops/segment/segment.h"
#include "ops/tensor.h"
#include "ops/version.h"

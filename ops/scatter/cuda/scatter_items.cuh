// How the CUDA scatter kernels read a value: the scale of the scaled
// sums (index_add_'s alpha, index_add_weighted_'s weights) and the items of
// the row kernel and the sorted path (single elements, or rows of row_len
// columns that one index value sends to one destination row).
#pragma once

#include <cstdint>

#include "ops/detail/cuda/positions.cuh"
#include "ops/reduce_ops.h"

namespace scatterx::detail::cuda {

// What a value is multiplied by on the scaled path: alpha (index_add_), or
// the weight of its position i along dim (index_add_weighted_).
template <typename T>
struct Scale {
  acc_t<T> alpha;
  const T* weights;  // nullptr: alpha
  int64_t weight_stride;
  __device__ __forceinline__ acc_t<T> at(int64_t i) const {
    return weights != nullptr ? static_cast<acc_t<T>>(weights[i * weight_stride]) : alpha;
  }
};

template <typename T, bool kScaled>
__device__ __forceinline__ acc_t<T> load_value(const T* src, const Position& p, int64_t column_offset,
                                               const Scale<T>& scale) {
  using A = acc_t<T>;
  const int64_t at = p.positional + column_offset;
  if constexpr (kScaled) {
    return arith::mul(static_cast<A>(src[at]), scale.at(p.i));
  } else {
    return static_cast<A>(src[at]);
  }
}

struct SortedItems {     // plain data: how the kernels read a sorted item
  DeviceGeometry items;  // decodes a sorted position (row_len 1: one item each)
  int64_t row_len = 1;   // columns per item
  int64_t self_col = 0;  // column strides in self and src
  int64_t src_col = 0;
  const int64_t* positions = nullptr;
};

}  // namespace scatterx::detail::cuda

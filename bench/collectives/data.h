// The benchmark's buffers: seeded inputs that every rank can reproduce,
// outputs poisoned with NaN for the result checks, and buffers touched once so
// that no timed call pays for first-touch page faults.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/tensor.h"

namespace scatterx_bench_collectives {

// Fills t (float32, float64 or bfloat16; other dtypes are left alone) with
// stream `seed` of a splitmix64 generator: values in [-1, 1) (float64 adds a
// second stream 2^-40 below it, so that its low bits are not all zero).
void fill(const scatterx::TensorView& t, uint64_t seed);

// All bytes 0xff: a NaN in float32, float64 and bfloat16, so an element a collective leaves
// unwritten shows.
void poison(const scatterx::TensorView& t);

size_t nbytes(const scatterx::TensorView& t);

// A new tensor with every byte written (zero).
scatterx::Tensor touched(const scatterx::Shape& shape, scatterx::DType dtype);

}  // namespace scatterx_bench_collectives

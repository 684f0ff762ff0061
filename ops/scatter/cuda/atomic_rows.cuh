// The CUDA scatter's row kernel (the atomic path of slice-index scatters:
// index_add_, index_add_weighted_, a broadcast index), included by
// scatter_impl.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ops/detail/cuda/positions.cuh"
#include "ops/reduce_ops.h"
#include "ops/scatter/cuda/atomics.cuh"
#include "ops/scatter/cuda/scatter_items.cuh"

namespace scatterx::detail::cuda {

// Whole rows on the atomic path (one index value selects a row of row_len
// columns: index_add_, a broadcast index): a group of `group` lanes takes a
// row, decodes its position and index value once, and walks the columns,
// so the position arithmetic is paid per row instead of per element.
// Extrema take kRowBatch<R> consecutive rows at a time and issue their index
// loads, and then their rows' and destinations' 16-byte loads, together: on
// an H200 the power-law amax went 2.5-2.6 ms -> 2.1-2.2 ms. Sums take one
// row at a time: batched, the unique scatter-add ran slower (0.99 -> 1.07-
// 1.09 ms) and the power-law sum and MoE unpermute no faster.
//
// The folds that take 16 bytes of a row per step (RowVector):
//  - float sums: sm_90's float4 atomicAdd;
//  - 16-bit float sums: sm_90's vector reduction of four packed half2 /
//    bfloat162 words (8 columns); rows aligned only to 4 bytes fold two
//    columns per atomic;
//  - float and double amax / amin: the destination's 16 bytes are read with
//    the row's, and only the columns the value would change make an atomic
//    (extremum_fold_seen).
// Rows not aligned to 16 bytes, and the columns past a row's last whole
// vector, fold column by column.
template <typename T, Reduce R, bool kCount>
constexpr bool kRowVectors =
    !kCount &&
    ((R == Reduce::Sum && (std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)) ||
     ((R == Reduce::Amax || R == Reduce::Amin) && (std::is_same_v<T, float> || std::is_same_v<T, double>)));

template <Reduce R>
constexpr int kRowBatch = R == Reduce::Amax || R == Reduce::Amin ? 4 : 1;

// A lane's vectors of one row loaded before any is folded. The folds are
// atomics (and the 16-bit ones inline PTX with a memory clobber), which the
// compiler will not move a later load above, so one vector at a time kept a
// single 16-byte load per lane in flight. Rows of 8 KiB (the MoE unpermute)
// on an H200: 0.968-0.980 ms one vector at a time, 0.961 ms four (79.2% of a
// copy's bandwidth); a gain of about 1%, unlike the gathers' (77 -> 90%).
template <Reduce R>
constexpr int kRowColumns = kRowBatch<R> == 1 ? 4 : 1;

// Two 16-bit floats of a packed word, times w, rounded back into a word.
template <typename T>
__device__ __forceinline__ unsigned int scaled_pair(unsigned int packed, float w) {
  if constexpr (std::is_same_v<T, Half>) {
    const float2 f = __half22float2(bits_as<__half2>(packed));
    return bits_as<unsigned int>(__floats2half2_rn(f.x * w, f.y * w));
  } else {
    const float2 f = __bfloat1622float2(bits_as<__nv_bfloat162>(packed));
    return bits_as<unsigned int>(__floats2bfloat162_rn(f.x * w, f.y * w));
  }
}

// dest[0, 2) += src[0, 2) * w for 16-bit floats by one packed atomic.
template <typename T>
__device__ __forceinline__ void pair_add(T* dest, unsigned int packed, float w) {
  const unsigned int sum = scaled_pair<T>(packed, w);
  if constexpr (std::is_same_v<T, Half>) {
    atomicAdd(reinterpret_cast<__half2*>(dest), bits_as<__half2>(sum));
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    atomicAdd(reinterpret_cast<__nv_bfloat162*>(dest), bits_as<__nv_bfloat162>(sum));
#else
    const float2 f = __bfloat1622float2(bits_as<__nv_bfloat162>(sum));
    atomic_fold<Reduce::Sum>(dest, f.x);
    atomic_fold<Reduce::Sum>(dest + 1, f.y);
#endif
  }
}

// 16 bytes of a row: loaded (with the destination's, for extrema), then
// folded into the destination.
template <typename T, Reduce R>
struct RowVector {
  static constexpr int kWidth = 16 / sizeof(T);
  static constexpr bool kReadsDest = R == Reduce::Amax || R == Reduce::Amin;
  uint4 values;
  uint4 seen;

  __device__ __forceinline__ void load(const T* dest, const T* from) {
    values = *reinterpret_cast<const uint4*>(from);
    if constexpr (kReadsDest) seen = __ldcg(reinterpret_cast<const uint4*>(dest));
  }

  __device__ __forceinline__ void fold(T* dest, acc_t<T> w) const {
    if constexpr (kReadsDest) {
      const T* v = reinterpret_cast<const T*>(&values);
      const T* c = reinterpret_cast<const T*>(&seen);
#pragma unroll
      for (int q = 0; q < kWidth; ++q) extremum_fold_seen<R>(dest + q, v[q], c[q]);
    } else if constexpr (std::is_same_v<T, float>) {
      float4 v = bits_as<float4>(values);
      v.x *= w;
      v.y *= w;
      v.z *= w;
      v.w *= w;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      atomicAdd(reinterpret_cast<float4*>(dest), v);
#else
      atomicAdd(dest, v.x);
      atomicAdd(dest + 1, v.y);
      atomicAdd(dest + 2, v.z);
      atomicAdd(dest + 3, v.w);
#endif
    } else {  // Half or BFloat16: four packed pairs
      const unsigned int p0 = scaled_pair<T>(values.x, w), p1 = scaled_pair<T>(values.y, w);
      const unsigned int p2 = scaled_pair<T>(values.z, w), p3 = scaled_pair<T>(values.w, w);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if constexpr (std::is_same_v<T, Half>) {
        asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};" ::"l"(dest), "r"(p0), "r"(p1), "r"(p2),
                     "r"(p3)
                     : "memory");
      } else {
        asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(dest), "r"(p0), "r"(p1), "r"(p2),
                     "r"(p3)
                     : "memory");
      }
#else
      pair_add(dest, p0, 1.0f);
      pair_add(dest + 2, p1, 1.0f);
      pair_add(dest + 4, p2, 1.0f);
      pair_add(dest + 6, p3, 1.0f);
#endif
    }
  }
};

// The whole 16-byte vectors of a batch's rows whose `vectors` flag is set,
// as lane `lane` of `group`: kRowColumns<R> vectors of each row loaded before
// any is folded. Returns the columns each such row folded.
template <typename T, Reduce R, int kBatch>
__device__ __forceinline__ int64_t fold_row_vectors(T* const (&dest)[kBatch], const T* const (&from)[kBatch],
                                                    const acc_t<T> (&w)[kBatch], const bool (&vectors)[kBatch],
                                                    int64_t row_len, int lane, int group) {
  using Vector = RowVector<T, R>;
  constexpr int kWidth = Vector::kWidth;
  constexpr int kColumns = kRowColumns<R>;
  const int64_t count = row_len / kWidth;
  for (int64_t first = lane; first < count; first += group * kColumns) {
    Vector x[kBatch][kColumns];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
#pragma unroll
      for (int u = 0; u < kColumns; ++u) {
        const int64_t q = first + u * group;
        if (vectors[b] && q < count) x[b][u].load(dest[b] + q * kWidth, from[b] + q * kWidth);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
#pragma unroll
      for (int u = 0; u < kColumns; ++u) {
        const int64_t q = first + u * group;
        if (vectors[b] && q < count) x[b][u].fold(dest[b] + q * kWidth, w[b]);
      }
    }
  }
  return count * kWidth;
}

template <typename T, Reduce R, typename I, bool kScaled, bool kCount>
__global__ void fold_atomic_rows(T* self, const T* src, const I* index, const SortedItems it, int64_t bound,
                                 int64_t rows, const Scale<T> scale, int* counts, int64_t self_lowest, int group) {
  using A = acc_t<T>;
  constexpr bool kVectors = kRowVectors<T, R, kCount>;
  constexpr bool kPairs = kVectors && sizeof(T) == 2;
  constexpr int kBatch = kRowBatch<R>;
  const int lane = threadIdx.x % group;
  const int64_t groups = static_cast<int64_t>(gridDim.x) * (blockDim.x / group);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * (blockDim.x / group) + threadIdx.x / group;
  const bool contiguous = it.self_col == 1 && it.src_col == 1;
  // Group g takes batches g, g + groups, ...: rows [kBatch b, kBatch (b + 1)).
  for (int64_t batch = first; batch * kBatch < rows; batch += groups) {
    T* dest[kBatch];
    const T* from[kBatch];
    A w[kBatch];
    bool live[kBatch];
    bool vectors[kBatch];  // folds in RowVectors
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int64_t r = batch * kBatch + b;
      live[b] = false;
      vectors[b] = false;
      if (r < rows) {
        const Position p = decode_position(it.items, r);
        const int64_t v = static_cast<int64_t>(index[p.index]);
        live[b] = v >= 0 && v < bound;
        dest[b] = self + p.indexed + v * it.items.dim_stride[0];
        from[b] = src + p.positional;
        w[b] = kScaled ? scale.at(p.i) : A(1);
        const auto address_bits = reinterpret_cast<uintptr_t>(dest[b]) | reinterpret_cast<uintptr_t>(from[b]);
        vectors[b] = kVectors && live[b] && contiguous && address_bits % 16 == 0;
      }
    }
    int64_t vectored = 0;  // the columns a RowVector row folded
    if constexpr (kVectors) vectored = fold_row_vectors<T, R, kBatch>(dest, from, w, vectors, it.row_len, lane, group);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (!live[b]) continue;
      int64_t j = vectors[b] ? vectored : 0;
      if constexpr (kPairs) {
        const auto address_bits = reinterpret_cast<uintptr_t>(dest[b]) | reinterpret_cast<uintptr_t>(from[b]);
        if (!vectors[b] && contiguous && address_bits % 4 == 0) {
          const int64_t pairs = it.row_len / 2;
          for (int64_t q = lane; q < pairs; q += group) {
            pair_add(dest[b] + 2 * q, *reinterpret_cast<const unsigned int*>(from[b] + 2 * q), w[b]);
          }
          j = pairs * 2;
        }
      }
      for (int64_t c = j + lane; c < it.row_len; c += group) {
        T* at = dest[b] + c * it.self_col;
        const A value = kScaled ? arith::mul(static_cast<A>(from[b][c * it.src_col]), w[b])
                                : static_cast<A>(from[b][c * it.src_col]);
        atomic_fold<R>(at, value);
        if constexpr (kCount) atomicAdd(counts + (at - self - self_lowest), 1);
      }
    }
  }
}

}  // namespace scatterx::detail::cuda

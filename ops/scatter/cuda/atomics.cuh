// Device-side atomic folds: *address = combine(*address, value) for every
// reduce of reduce_ops.h and every storage type, with the fastest primitive
// the hardware has: native atomicAdd / atomicMax / atomicMin where they
// implement the reduce exactly (integer sums wrap like arith::add; float and
// double extrema through the ordered bits of extremum_fold), packed 16-bit
// float adds, and otherwise a compare-and-swap loop over the 4- or 8-byte
// word holding the element (1- and 2-byte types swap their aligned 32-bit
// word). Extrema and the swap loop read the destination first and make no
// atomic when the value cannot change it. 16-byte elements only take the
// per-part float adds of a complex sum; kAtomicFold says which (reduce,
// type) pairs have an atomic fold at all, and the host routes the others to
// the sorted path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/reduce_ops.h"

namespace scatterx::detail::cuda {

template <Reduce R, typename T>
constexpr bool kAtomicFold = sizeof(T) <= 8 || R == Reduce::Sum || R == Reduce::Mean || R == Reduce::None;

// The (reduce, type) pairs whose atomic fold is a compare-and-swap loop that
// every value must win (no native atomic, and a value always changes the
// destination): they serialize on a hot destination (contention.h).
template <Reduce R, typename T>
constexpr bool kFoldsBySwaps = R == Reduce::Prod || ((R == Reduce::Sum || R == Reduce::Mean) && sizeof(T) < 4 &&
                                                     !std::is_same_v<T, Half> && !std::is_same_v<T, BFloat16>);

template <typename To, typename From>
__device__ __forceinline__ To bits_as(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit cast between types of one size");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// *address = next(*address), atomically, by compare-and-swap.
template <typename T, typename Next>
__device__ __forceinline__ void cas_update(T* address, Next next) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    using Word = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
    Word* word = reinterpret_cast<Word*>(address);
    Word seen = *reinterpret_cast<volatile Word*>(word);
    for (;;) {
      const Word wanted = bits_as<Word>(next(bits_as<T>(seen)));
      if (wanted == seen) return;  // nothing to change (also stops a NaN from spinning)
      const Word before = atomicCAS(word, seen, wanted);
      if (before == seen) return;
      seen = before;
    }
  } else {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2, "cas_update takes 1, 2, 4 or 8-byte elements");
    using Bits = std::conditional_t<sizeof(T) == 1, uint8_t, uint16_t>;
    const uintptr_t at = reinterpret_cast<uintptr_t>(address);
    unsigned int* word = reinterpret_cast<unsigned int*>(at & ~uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(at & 3u) * 8u;
    const unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int seen = *reinterpret_cast<volatile unsigned int*>(word);
    for (;;) {
      const T current = bits_as<T>(static_cast<Bits>((seen & mask) >> shift));
      const unsigned int bits = static_cast<unsigned int>(bits_as<Bits>(next(current)));
      const unsigned int wanted = (seen & ~mask) | (bits << shift);
      if (wanted == seen) return;
      const unsigned int before = atomicCAS(word, seen, wanted);
      if (before == seen) return;
      seen = before;
    }
  }
}

// amax / amin of float or double by native integer atomics. An IEEE float
// with its sign bit clear orders like its bits as a signed integer; with the
// sign bit set, reversed like its bits as an unsigned integer. So a value of
// either sign folds into a destination of either sign by one signed
// atomicMax (atomicMin for amin) when the value's sign is clear, one
// unsigned atomicMin (atomicMax) when it is set: across signs the two views
// disagree exactly as the floats' order needs. A NaN must win and stay:
// it is written as the NaN that orders above every float in the reduce's
// direction (0x7f..f for amax, all ones for amin), and a destination that
// already holds a NaN is left alone, which also covers a NaN of the other
// sign already in self. The destination is read first (from L2: stale is
// fine, an extremum only moves one way during the fold), and a value that
// cannot change it makes no atomic at all: on random data most do not.
// +0 and -0 compare equal, so the first to arrive stays, as in a CAS fold.
// `current` is a value of *address read earlier in this fold.
template <Reduce R, typename F>
__device__ __forceinline__ void extremum_fold_seen(F* address, F value, F current) {
  using Signed = std::conditional_t<sizeof(F) == 4, int, long long>;
  using Unsigned = std::conditional_t<sizeof(F) == 4, unsigned int, unsigned long long>;
  if (isnan(current)) return;
  Signed bits;
  if (isnan(value)) {
    bits = R == Reduce::Amax ? std::numeric_limits<Signed>::max() : Signed{-1};
  } else {
    if (R == Reduce::Amax ? !(value > current) : !(value < current)) return;
    bits = bits_as<Signed>(value);
  }
  const bool sign_clear = bits >= 0;
  if ((R == Reduce::Amax) == sign_clear) {
    if (sign_clear) {
      atomicMax(reinterpret_cast<Signed*>(address), bits);
    } else {
      atomicMax(reinterpret_cast<Unsigned*>(address), static_cast<Unsigned>(bits));
    }
  } else {
    if (sign_clear) {
      atomicMin(reinterpret_cast<Signed*>(address), bits);
    } else {
      atomicMin(reinterpret_cast<Unsigned*>(address), static_cast<Unsigned>(bits));
    }
  }
}

template <Reduce R, typename F>
__device__ __forceinline__ void extremum_fold(F* address, F value) {
  extremum_fold_seen<R>(address, value, __ldcg(address));
}

// Folds `value` (already in acc_t<T>) into *address.
template <Reduce R, typename T>
__device__ __forceinline__ void atomic_fold(T* address, acc_t<T> value) {
  using A = acc_t<T>;
  if constexpr (R == Reduce::None) {
    *address = static_cast<T>(value);
  } else if constexpr (R == Reduce::Sum || R == Reduce::Mean) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      atomicAdd(address, value);
    } else if constexpr (std::is_same_v<T, int32_t>) {
      atomicAdd(reinterpret_cast<int*>(address), static_cast<int>(value));
    } else if constexpr (std::is_same_v<T, int64_t>) {
      atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
    } else if constexpr (std::is_same_v<T, Half>) {
      atomicAdd(reinterpret_cast<__half*>(address), __float2half_rn(value));
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      atomicAdd(reinterpret_cast<__nv_bfloat16*>(address), __float2bfloat16_rn(value));
    } else if constexpr (is_complex_v<T>) {
      atomicAdd(&address->re, value.re);  // a complex sum is two independent real sums
      atomicAdd(&address->im, value.im);
    } else {
      cas_update(address, [value](T current) { return static_cast<T>(arith::add(static_cast<A>(current), value)); });
    }
  } else if constexpr ((R == Reduce::Amax || R == Reduce::Amin) &&
                       (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    extremum_fold<R>(address, static_cast<T>(value));
  } else if constexpr ((R == Reduce::Amax || R == Reduce::Amin) && std::is_same_v<T, int32_t>) {
    if constexpr (R == Reduce::Amax) {
      atomicMax(reinterpret_cast<int*>(address), static_cast<int>(value));
    } else {
      atomicMin(reinterpret_cast<int*>(address), static_cast<int>(value));
    }
  } else if constexpr ((R == Reduce::Amax || R == Reduce::Amin) && std::is_same_v<T, int64_t>) {
    if constexpr (R == Reduce::Amax) {
      atomicMax(reinterpret_cast<long long*>(address), static_cast<long long>(value));
    } else {
      atomicMin(reinterpret_cast<long long*>(address), static_cast<long long>(value));
    }
  } else {
    // prod, and amax / amin of 16-bit floats (NaN propagates through
    // combine) and of the small integers
    cas_update(address,
               [value](T current) { return static_cast<T>(ReduceOp<R, A>::combine(static_cast<A>(current), value)); });
  }
}

}  // namespace scatterx::detail::cuda

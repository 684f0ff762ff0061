// Portability macros shared by every scatterx header, host or device.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SCATTERX_HOST_DEVICE __host__ __device__
#define SCATTERX_INLINE __host__ __device__ __forceinline__
#else
#define SCATTERX_HOST_DEVICE
#define SCATTERX_INLINE inline __attribute__((always_inline))
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SCATTERX_LIKELY(x) __builtin_expect(!!(x), 1)
#define SCATTERX_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define SCATTERX_LIKELY(x) (x)
#define SCATTERX_UNLIKELY(x) (x)
#endif

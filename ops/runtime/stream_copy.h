// Row copies for outputs too large to stay in cache.
//
// A plain store first reads the destination line into the cache (read for
// ownership), so a gather whose output streams through memory moves its
// output bytes twice. Non-temporal stores write whole lines straight to
// memory: for an output that will be evicted anyway that is a third less
// traffic. For an output that fits in the last-level cache they are worse
// (the consumer then reads it from memory), so callers use them only above
// kStreamingStoreBytes of output.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/macros.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define SCATTERX_HAVE_STREAMING_STORES 1
#else
#define SCATTERX_HAVE_STREAMING_STORES 0
#endif

namespace scatterx::detail {

// Output size from which gathers write with non-temporal stores.
int64_t streaming_store_threshold();

// Copies `bytes` bytes from src to dst with non-temporal stores where dst is
// 16-byte aligned (the ragged ends with plain stores). A thread that used it
// calls streaming_store_fence() before its writes may be read by another.
SCATTERX_INLINE void copy_streaming(void* dst, const void* src, int64_t bytes) {
#if SCATTERX_HAVE_STREAMING_STORES
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const int64_t head = (16 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head >= bytes) {
    std::memcpy(d, s, static_cast<size_t>(bytes));
    return;
  }
  if (head != 0) {
    std::memcpy(d, s, static_cast<size_t>(head));
    d += head;
    s += head;
    bytes -= head;
  }
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  for (; bytes >= 16; bytes -= 16, d += 16, s += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  }
  if (bytes > 0) std::memcpy(d, s, static_cast<size_t>(bytes));
#else
  std::memcpy(dst, src, static_cast<size_t>(bytes));
#endif
}

// Orders this thread's non-temporal stores before its later stores (and
// before the barrier that ends a parallel region).
SCATTERX_INLINE void streaming_store_fence() {
#if SCATTERX_HAVE_STREAMING_STORES
  _mm_sfence();
#endif
}

}  // namespace scatterx::detail

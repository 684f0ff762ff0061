// Row copies for outputs too large to stay in cache.
//
// A plain store first reads the destination line into the cache (read for
// ownership), so a gather whose output streams through memory moves its
// output bytes twice. Non-temporal stores write whole lines straight to
// memory: for an output that will be evicted anyway that is a third less
// traffic. For an output that fits in the last-level cache they are worse
// (the consumer then reads it from memory), so callers use them only above
// kStreamingStoreBytes of output.
//
// Where the CPU has AVX2 the stores are 32 bytes wide. On the AMD EPYC guest
// of 2026-11-27, 16-byte non-temporal stores were slower than a plain copy at
// every row size (permuted rows into 128 MiB, one thread: 8 KiB rows 11.7 ms
// against memcpy's 9.1, 256-byte rows 22.7 against 13.1), while 32-byte ones
// matched or beat it (8.7 and 14.7 ms; with two threads 1 KiB-8 KiB rows
// 10-25% faster than memcpy). On Intel Xeon the 16-byte ones had already
// beaten plain stores (bench/RESULTS.md).
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/macros.h"
#include "ops/runtime/cpu_isa.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define SCATTERX_HAVE_STREAMING_STORES 1
#else
#define SCATTERX_HAVE_STREAMING_STORES 0
#endif
#if SCATTERX_HAVE_STREAMING_STORES && SCATTERX_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

namespace scatterx::detail {

// Output size from which gathers write with non-temporal stores.
int64_t streaming_store_threshold();

#if SCATTERX_HAVE_STREAMING_STORES
// copy_streaming's loop with 16-byte stores, from a 16-byte aligned dst.
SCATTERX_INLINE void copy_streaming_16(char* d, const char* s, int64_t bytes) {
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
}
#endif

#if SCATTERX_HAVE_STREAMING_STORES && SCATTERX_HAVE_AVX2_PATH
// The same with 32-byte stores, from a 32-byte aligned dst.
SCATTERX_TARGET_AVX2 inline void copy_streaming_32(char* d, const char* s, int64_t bytes) {
  for (; bytes >= 128; bytes -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  for (; bytes >= 32; bytes -= 32, d += 32, s += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  }
  if (bytes > 0) std::memcpy(d, s, static_cast<size_t>(bytes));
}
#endif

// Copies `bytes` bytes from src to dst with non-temporal stores where dst is
// aligned to the store's width (32 bytes with AVX2, else 16; the ragged ends
// with plain stores). A thread that used it calls streaming_store_fence()
// before its writes may be read by another.
SCATTERX_INLINE void copy_streaming(void* dst, const void* src, int64_t bytes) {
#if SCATTERX_HAVE_STREAMING_STORES
  const bool wide = SCATTERX_HAVE_AVX2_PATH && use_avx2();
  const uintptr_t width = wide ? 32 : 16;
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const auto head = static_cast<int64_t>((width - (reinterpret_cast<uintptr_t>(d) & (width - 1))) & (width - 1));
  if (head >= bytes) {
    std::memcpy(d, s, static_cast<size_t>(bytes));
    return;
  }
  std::memcpy(d, s, static_cast<size_t>(head));
#if SCATTERX_HAVE_AVX2_PATH
  if (wide) {
    copy_streaming_32(d + head, s + head, bytes - head);
    return;
  }
#endif
  copy_streaming_16(d + head, s + head, bytes - head);
#else
  std::memcpy(dst, src, static_cast<size_t>(bytes));
#endif
}

// Writes one 64-byte line from src to dst (both 64-byte aligned) with
// non-temporal stores. 16-byte stores, so it inlines into any caller: from a
// line staged in L1 they did as well as 32- and 64-byte ones (the block
// split of 1M positions, 2026-11-29), unlike copy_streaming's row copies.
SCATTERX_INLINE void store_line_streaming(void* dst, const void* src) {
#if SCATTERX_HAVE_STREAMING_STORES
  auto* d = static_cast<__m128i*>(dst);
  const auto* s = static_cast<const __m128i*>(src);
  _mm_stream_si128(d, _mm_load_si128(s));
  _mm_stream_si128(d + 1, _mm_load_si128(s + 1));
  _mm_stream_si128(d + 2, _mm_load_si128(s + 2));
  _mm_stream_si128(d + 3, _mm_load_si128(s + 3));
#else
  std::memcpy(dst, src, 64);
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

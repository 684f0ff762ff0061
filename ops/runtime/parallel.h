// OpenMP helpers for the CPU backend. Thread count comes from OpenMP
// (OMP_NUM_THREADS, omp_set_num_threads). No result in scatterx depends on
// how work is split, so these may split however is fastest.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/runtime/memory.h"

namespace scatterx::detail {

// Where piece p begins when n items are cut into `pieces` near-equal pieces
// (p = pieces gives n): piece p is [piece_start(p), piece_start(p + 1)).
inline int64_t piece_start(int64_t p, int64_t pieces, int64_t n) {
  return std::min(n, p * ((n + pieces - 1) / pieces));
}

// Threads worth using for n items when each thread should get >= grain.
inline int threads_for(int64_t n, int64_t grain) {
  if (omp_in_parallel()) return 1;
  const int64_t useful = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  return static_cast<int>(std::min<int64_t>(omp_get_max_threads(), useful));
}

// Calls f(p) for every piece p in [0, pieces), handed out round-robin to
// nthreads threads (schedule(static, 1)). One thread runs them inline: in
// libgomp even a one-thread region ends in a team barrier and a futex wake,
// about 1 us, which on an op over a few hundred elements is a fifth of its
// time (the index check alone entered one per call).
template <typename F>
void for_each_piece(int64_t pieces, int nthreads, const F& f) {
  if (nthreads <= 1 || pieces <= 1) {
    for (int64_t p = 0; p < pieces; ++p) f(p);
    return;
  }
#pragma omp parallel for num_threads(nthreads) schedule(static, 1)
  for (int64_t p = 0; p < pieces; ++p) f(p);
}

// Calls f(begin, end) on contiguous pieces of [0, n), one per thread.
template <typename F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  const int nthreads = threads_for(n, grain);
  if (nthreads <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(nthreads)
  {
    const int64_t nt = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t begin = std::min(n, t * chunk);
    const int64_t end = std::min(n, begin + chunk);
    if (begin < end) f(begin, end);
  }
}

// Calls f(begin, end) on pieces of `grain` items handed to whichever thread
// is free: for work whose cost per item is skewed (power-law segments).
template <typename F>
void parallel_for_dynamic(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t pieces = (n + grain - 1) / grain;
  const int nthreads = threads_for(pieces, 1);
  if (nthreads <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
  for (int64_t p = 0; p < pieces; ++p) f(p * grain, std::min(n, (p + 1) * grain));
}

// An uninitialized array of trivially copyable T in recycled scratch memory
// (no zero-fill, and usually no page faults).
template <typename T>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T>, "Buffer holds plain data");

 public:
  Buffer() = default;
  explicit Buffer(int64_t n) : size_(n) {
    if (n > 0) {
      auto [p, capacity] = recycled_acquire(static_cast<size_t>(n) * sizeof(T));
      data_ = static_cast<T*>(p);
      capacity_ = capacity;
    }
  }
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer(std::move(o)).swap(*this);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { recycled_release(data_, capacity_); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }
  int64_t size() const { return size_; }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

  T* data_ = nullptr;
  int64_t size_ = 0;
  size_t capacity_ = 0;
};

// The elements of T from one thread's run to the next in per-thread scratch
// (a Buffer holding a run of n for each thread): n rounded up to whole cache
// lines, so that no two threads write one line. With the threads on
// separate cores, the block split of 1M positions took 2.4 ms where its two
// threads' counters shared a line and 1.2 ms where they did not (2026-11-29).
template <typename T>
constexpr int64_t per_thread_stride(int64_t n) {
  static_assert(kCacheLineBytes % sizeof(T) == 0, "elements tile a cache line");
  constexpr int64_t kPerLine = int64_t{kCacheLineBytes / sizeof(T)};
  return (n + kPerLine - 1) / kPerLine * kPerLine;
}

// Per-thread scratch: `runs` runs of n elements of T (one per thread or
// piece), run(i) starting per_thread_stride<T>(n) elements after run(i - 1).
// Buffer's memory starts on a line, so every run does.
template <typename T>
class PerThreadRuns {
 public:
  PerThreadRuns(int64_t runs, int64_t n) : stride_(per_thread_stride<T>(n)), buffer_(runs * stride_) {}
  T* run(int64_t i) { return buffer_.data() + i * stride_; }

 private:
  int64_t stride_;
  Buffer<T> buffer_;
};

}  // namespace scatterx::detail

namespace scatterx::detail {

// Like parallel_for, but f(piece, begin, end) also gets its piece number in
// [0, pieces_for(n, grain)), so per-piece scratch can be allocated up front
// (nothing may throw inside an OpenMP region).
inline int64_t pieces_for(int64_t n, int64_t grain) { return threads_for(n, grain); }

template <typename F>
void parallel_pieces(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  const int64_t pieces = pieces_for(n, grain);
  const int64_t chunk = (n + pieces - 1) / pieces;
  for_each_piece(pieces, static_cast<int>(pieces), [&](int64_t p) {
    const int64_t begin = std::min(n, p * chunk);
    const int64_t end = std::min(n, begin + chunk);
    if (begin < end) f(p, begin, end);
  });
}

}  // namespace scatterx::detail

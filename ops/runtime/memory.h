// Host memory for tensors and kernel scratch.
//
// First touch of fresh pages is the dominant cost of many ops on machines
// with expensive page faults (a VM here faults at ~1.7 GB/s against ~18 GB/s
// for writing touched memory). So large allocations ask for transparent huge
// pages, and both kernel scratch and the memory of freed CPU tensors are
// recycled by one cache of already-faulted blocks, bounded by
// SCATTERX_HOST_CACHE_BYTES (0: every block goes back to the OS at once).
// A GNN layer's 25.6 MB output, fresh from the OS, costs ~6 ms of faults
// here; recycled, nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace scatterx::detail {

// The line size of the CPUs this is built for (x86-64 and Arm Neoverse). Host
// allocations start on one, and per-thread scratch gives each thread's run
// lines of its own (parallel.h: PerThreadRuns).
inline constexpr size_t kCacheLineBytes = 64;

// 64-byte aligned host memory. Allocations of 64 KiB to 8 MiB come from the
// shareable arena while it has room (shareable_memory.h: page aligned, in
// memory files that peer ranks can map); others of 2 MiB or more are 2 MiB
// aligned and advised as huge pages. Throws std::bad_alloc.
void* host_allocate(size_t bytes);
void host_free(void* p) noexcept;

// Uninitialized memory from the recycling cache, else fresh (at least
// `bytes`, 64-byte aligned). Thread-safe; a block may be released on another
// thread than the one that acquired it (a tensor freed by Python's collector).
// Give it back with recycled_release(p, capacity) where capacity is what
// recycled_acquire reported.
std::pair<void*, size_t> recycled_acquire(size_t bytes);
void recycled_release(void* p, size_t capacity) noexcept;

// Bytes the cache holds now, and freeing every block it holds (returns the
// bytes freed).
size_t recycled_cached_bytes();
size_t recycled_release_all() noexcept;

}  // namespace scatterx::detail

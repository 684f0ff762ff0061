// Host memory for tensors and kernel scratch.
//
// First touch of fresh pages is the dominant cost of many ops on machines
// with expensive page faults (a VM here faults at ~1.7 GB/s against ~18 GB/s
// for writing touched memory). So large allocations ask for transparent huge
// pages, and kernel scratch is recycled between calls by a small cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace scatterx::detail {

// 64-byte aligned host memory; allocations of 2 MiB or more are 2 MiB
// aligned and advised as huge pages. Throws std::bad_alloc.
void* host_allocate(size_t bytes);
void host_free(void* p) noexcept;

// Scratch from the recycling cache (at least `bytes`, 64-byte aligned).
// Give it back with scratch_release(p, capacity) where capacity is what
// scratch_acquire reported.
std::pair<void*, size_t> scratch_acquire(size_t bytes);
void scratch_release(void* p, size_t capacity) noexcept;

// Bytes the scratch cache holds now (for tests and diagnostics).
size_t scratch_cached_bytes();

}  // namespace scatterx::detail

// Host memory that the other processes of this user on the same host can
// map: the home of mid-sized CPU tensors, so that the distributed layer's
// single-copy transport (dist/single_copy.h) reads a peer's tensor with a
// user-space memcpy instead of process_vm_readv, which copies through the
// kernel, pinning every page, at about 60% of memcpy's speed (bench/RESULTS.md,
// "the single-copy limits"). A transport can map only memory that lives in a
// file; XPMEM and KNEM map any buffer but need kernel modules. So scatterx's
// own tensors of 64 KiB to 8 MiB are carved out of memfd files (larger ones
// keep transparent huge pages, which shared files do not get here, and copy at
// memory bandwidth either way); buffers scatterx did not allocate (numpy,
// torch) keep the kernel copy.
//
// The files are made in chunks of 32 MiB, kept for the life of the process
// (a peer's mapping stays valid), up to SCATTERX_SHAREABLE_HOST_BYTES in all
// (below one chunk, 0 included: none); past that, or where memfd_create fails, tensors come from the
// ordinary allocator. A slot is its request rounded up to a quarter of its
// power of two (at most 25% more).
//
// fork(): a child must get a private copy, as with ordinary memory, not the
// parent's live pages. The chunks are not inherited (MADV_DONTFORK); the child
// maps private memory in their place and reads their contents from the
// inherited file, then closes it: its copy is the parent's bytes at the moment
// of the copy (a parent thread writing a tensor while another forks races, as
// it does with copy-on-write), and not shareable any more.
//
// Under AddressSanitizer the arena is off, so that every tensor stays a heap
// block whose overflows it reports.
#pragma once

#include <cstddef>
#include <cstdint>

namespace scatterx::detail {

constexpr size_t kShareableMinBytes = size_t{64} << 10;
constexpr size_t kShareableMaxBytes = size_t{8} << 20;

// A slot of at least `bytes` (page aligned), or nullptr when the arena does
// not serve this request (outside [kShareableMinBytes, kShareableMaxBytes],
// the arena full or off, memfd_create refused). Thread-safe.
void* shareable_allocate(size_t bytes);
// Gives back p if it is an arena slot (true), else leaves it (false).
bool shareable_free(void* p) noexcept;

// Where bytes [p, p + bytes) lie in a shareable file: a peer maps
// /proc/<pid>/fd/<fd> (whose inode must be `inode`: the descriptor number
// alone could name another file by then) and reads at `offset`.
struct ShareableRegion {
  int fd = -1;
  uint64_t inode = 0;
  uint64_t offset = 0;
  uint64_t file_bytes = 0;
};
// False when the range does not lie wholly inside one shareable chunk.
bool shareable_region(const void* p, size_t bytes, ShareableRegion* region);

// Bytes of memfd chunks this process has made (for tests and reports).
size_t shareable_chunk_bytes();

}  // namespace scatterx::detail

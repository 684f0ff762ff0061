#include "ops/runtime/shareable_memory.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ops/runtime/knobs.h"

#if defined(__SANITIZE_ADDRESS__)
#define SCATTERX_SHAREABLE_ARENA 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SCATTERX_SHAREABLE_ARENA 0
#endif
#endif
#ifndef SCATTERX_SHAREABLE_ARENA
#define SCATTERX_SHAREABLE_ARENA 1
#endif

namespace scatterx::detail {

namespace {

constexpr size_t kChunkBytes = size_t{32} << 20;

struct Chunk {
  char* base;
  int fd;  // -1 in a forked child: private memory, not shareable
  uint64_t inode;
  size_t used;  // bump pointer: slots are carved from the front
};

struct Arena {
  std::mutex mutex;
  std::vector<Chunk> chunks;
  std::map<size_t, std::vector<char*>> free_slots;  // slot bytes -> free slots
  std::unordered_map<char*, size_t> live;           // slot -> its bytes
  bool failed = false;                              // memfd refused once: not asked again
};

// Four slot sizes per power of two: a request wastes at most a quarter.
size_t slot_bytes_for(size_t bytes) {
  const int top = 63 - __builtin_clzll(bytes);
  const size_t step = size_t{1} << (top - 2);
  return (bytes + step - 1) / step * step;
}

// An atomic, not a function-local static, for the reason memory.cpp's
// cache_limit gives: no initialization guard for a fork to copy half-taken.
std::atomic<int64_t> g_arena_limit{-1};
size_t arena_limit() {
  int64_t limit = g_arena_limit.load(std::memory_order_relaxed);
  if (limit < 0) {
    limit = knob_bytes(Knob::ShareableHostBytes);
    g_arena_limit.store(limit, std::memory_order_relaxed);
  }
  return static_cast<size_t>(limit);
}

// The child of a fork: each chunk (not inherited) becomes private memory at
// the same address holding the file's bytes, and the file is closed.
void privatize_in_child(Arena& a) {
  for (Chunk& c : a.chunks) {
    if (c.fd < 0) continue;
    void* at = mmap(c.base, kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (at == MAP_FAILED) _exit(121);  // nothing sane is left: the tensors' memory is gone
    size_t done = 0;
    while (done < c.used) {
      const ssize_t n = pread(c.fd, c.base + done, c.used - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(121);
      done += static_cast<size_t>(n);
    }
    close(c.fd);
    c.fd = -1;
  }
}

// Never destroyed, like the host cache (memory.cpp): slots may be freed by
// static destructors. The lock is held across fork so that the child sees a
// whole chunk list.
Arena& arena() {
  static Arena* const instance = [] {
    auto* a = new Arena;
    pthread_atfork([] { arena().mutex.lock(); }, [] { arena().mutex.unlock(); },
                   [] {
                     privatize_in_child(arena());
                     arena().mutex.unlock();
                   });
    return a;
  }();
  return *instance;
}

[[maybe_unused]] const bool kArenaMade = (arena(), true);  // at load: see memory.cpp's kCacheMade

// A new chunk, or false (and never again) when the system refuses one.
bool add_chunk(Arena& a) {
  const int fd = memfd_create("scatterx-host-tensors", MFD_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  void* base = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(kChunkBytes)) == 0 && fstat(fd, &st) == 0)
    base = mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED || madvise(base, kChunkBytes, MADV_DONTFORK) != 0) {
    if (base != MAP_FAILED) munmap(base, kChunkBytes);
    close(fd);
    return false;
  }
  a.chunks.push_back({static_cast<char*>(base), fd, static_cast<uint64_t>(st.st_ino), 0});
  return true;
}

}  // namespace

void* shareable_allocate(size_t bytes) {
  if (!SCATTERX_SHAREABLE_ARENA || bytes < kShareableMinBytes || bytes > kShareableMaxBytes) return nullptr;
  const size_t limit = arena_limit();
  if (limit < kChunkBytes) return nullptr;  // room for no chunk: off
  const size_t slot = slot_bytes_for(bytes);
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  char* p = nullptr;
  auto& free = a.free_slots[slot];
  if (!free.empty()) {
    p = free.back();
    free.pop_back();
  } else {
    // Only the newest chunk still has room to carve.
    if (a.chunks.empty() || a.chunks.back().fd < 0 || kChunkBytes - a.chunks.back().used < slot) {
      if (a.failed || (a.chunks.size() + 1) * kChunkBytes > limit) return nullptr;
      if (!add_chunk(a)) {
        a.failed = true;
        return nullptr;
      }
    }
    Chunk& c = a.chunks.back();
    p = c.base + c.used;
    c.used += slot;
  }
  a.live.emplace(p, slot);
  return p;
}

bool shareable_free(void* p) noexcept {
  if (!SCATTERX_SHAREABLE_ARENA || p == nullptr) return false;
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.live.find(static_cast<char*>(p));
  if (it == a.live.end()) return false;
  a.free_slots[it->second].push_back(it->first);
  a.live.erase(it);
  return true;
}

bool shareable_region(const void* p, size_t bytes, ShareableRegion* region) {
  if (!SCATTERX_SHAREABLE_ARENA) return false;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  for (const Chunk& c : a.chunks) {
    const auto base = reinterpret_cast<uintptr_t>(c.base);
    if (c.fd < 0 || begin < base || begin - base > kChunkBytes || bytes > kChunkBytes - (begin - base)) continue;
    *region = {c.fd, c.inode, static_cast<uint64_t>(begin - base), kChunkBytes};
    return true;
  }
  return false;
}

size_t shareable_chunk_bytes() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.chunks.size() * kChunkBytes;
}

}  // namespace scatterx::detail

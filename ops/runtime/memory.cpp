#include "ops/runtime/memory.h"

#include "ops/runtime/knobs.h"
#include "ops/runtime/shareable_memory.h"
#include "ops/runtime/stream_copy.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

namespace scatterx::detail {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Bytes of blocks kept for reuse at most (SCATTERX_HOST_CACHE_BYTES); beyond
// it the largest are freed. Read on first use, into an atomic rather than a
// function-local static: a fork while another thread ran that static's
// initialization would leave the child waiting on its guard forever. Two
// threads racing read the same value.
std::atomic<int64_t> g_cache_limit{-1};
size_t cache_limit() {
  int64_t limit = g_cache_limit.load(std::memory_order_relaxed);
  if (limit < 0) {
    limit = knob_bytes(Knob::HostCacheBytes);
    g_cache_limit.store(limit, std::memory_order_relaxed);
  }
  return static_cast<size_t>(limit);
}

struct RecycledCache {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;  // capacity -> block
  size_t cached = 0;
};

// Never destroyed: a Buffer may outlive every static destructor (an
// IndexPlan held in a static, or in a Python global freed at interpreter
// exit), and its release must still find the cache. (A destroyed cache's
// mutex hung such a release at exit.) The blocks stay reachable through this
// pointer, and the OS takes them back.
//
// fork() copies the lock as it is: a child forked while another thread held
// it (a DataLoader worker forked in the middle of an op) would wait forever
// on its first allocation. So the forking thread takes the lock around fork
// and both sides release it.
RecycledCache& cache() {
  static RecycledCache* const instance = [] {
    auto* c = new RecycledCache;
    pthread_atfork([] { cache().mutex.lock(); }, [] { cache().mutex.unlock(); }, [] { cache().mutex.unlock(); });
    return c;
  }();
  return *instance;
}

// Made when the library loads rather than on the first allocation: a fork
// while another thread ran that first call would copy its half-finished
// static initialization, and the child's first allocation would wait on it
// forever (the lock above cannot cover it: the handlers are not registered
// yet).
[[maybe_unused]] const bool kCacheMade = (cache(), true);

}  // namespace

void* host_allocate(size_t bytes) {
  if (void* shareable = shareable_allocate(bytes)) return shareable;
  const size_t align = bytes >= kHugePage ? kHugePage : kCacheLineBytes;
  const size_t rounded = (std::max(bytes, size_t{1}) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // advisory: failure is harmless
#endif
  return p;
}

void host_free(void* p) noexcept {
  if (!shareable_free(p)) std::free(p);
}

std::pair<void*, size_t> recycled_acquire(size_t bytes) {
  cache_limit();  // a bad SCATTERX_HOST_CACHE_BYTES raises here, not in the noexcept release
  bytes = std::max(bytes, kCacheLineBytes);
  {
    RecycledCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    // Reuse a block no more than twice the request, so a small request
    // does not pin a huge block; and none past the shareable sizes for a
    // request within them, so that such a tensor is shareable whatever the
    // cache holds (shareable_memory.h).
    size_t most = 2 * bytes;
    if (bytes <= kShareableMaxBytes) most = std::min(most, kShareableMaxBytes);
    auto it = c.free_blocks.lower_bound(bytes);
    if (it != c.free_blocks.end() && it->first <= most) {
      const std::pair<void*, size_t> block{it->second, it->first};
      c.cached -= it->first;
      c.free_blocks.erase(it);
      return block;
    }
  }
  return {host_allocate(bytes), bytes};
}

void recycled_release(void* p, size_t capacity) noexcept {
  if (p == nullptr) return;
  RecycledCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.free_blocks.emplace(capacity, p);
  c.cached += capacity;
  while (c.cached > cache_limit() && !c.free_blocks.empty()) {
    auto largest = std::prev(c.free_blocks.end());
    c.cached -= largest->first;
    host_free(largest->second);
    c.free_blocks.erase(largest);
  }
}

size_t recycled_release_all() noexcept {
  RecycledCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const size_t freed = c.cached;
  for (const auto& [capacity, block] : c.free_blocks) host_free(block);
  c.free_blocks.clear();
  c.cached = 0;
  return freed;
}

size_t recycled_cached_bytes() {
  RecycledCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.cached;
}

}  // namespace scatterx::detail

namespace scatterx::detail {

int64_t streaming_store_threshold() {
  static const int64_t threshold = knob_bytes(Knob::StreamingStoreBytes);
  return threshold;
}

}  // namespace scatterx::detail

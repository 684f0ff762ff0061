// The queues of device work behind device.h's DeviceQueue (a CUDA stream,
// and the tests' emulation over host memory) and the route a collective
// takes: which queue, which transport, which staging chunk.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dist/device.h"
#include "ops/runtime/combine.h"
#include "ops/runtime/cuda/runtime.h"
#include "ops/runtime/knobs.h"

namespace scatterx::dist {

namespace {

// ---- the CUDA stream ---------------------------------------------------------------

// Page-locked slabs outlive a collective: cudaMallocHost costs far more than
// a chunk's transfer, so a few freed slabs are kept for the next call.
class PinnedCache {
 public:
  static PinnedCache& instance() {
    static PinnedCache* cache = new PinnedCache();  // never destroyed: freed slabs may outlive exit hooks
    return *cache;
  }
  std::shared_ptr<char> acquire(int64_t bytes, const char* op) {
    std::shared_ptr<void> slab;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second >= bytes) {
          slab = std::move(it->first);
          bytes = it->second;
          free_.erase(it);
          break;
        }
      }
    }
    if (!slab) slab = detail::cuda::allocate_pinned(bytes, op);
    char* data = static_cast<char*>(slab.get());
    return std::shared_ptr<char>(data, [this, slab, bytes](char*) { release(slab, bytes); });
  }

 private:
  void release(std::shared_ptr<void> slab, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < kKeep) free_.emplace_back(std::move(slab), bytes);
  }
  static constexpr size_t kKeep = 4;
  std::mutex mutex_;
  std::vector<std::pair<std::shared_ptr<void>, int64_t>> free_;
};

class CudaQueue final : public DeviceQueue {
 public:
  // The device is current for the queue's lifetime: the collective may run
  // on the communicator's progress thread, whose current device is its own.
  CudaQueue(Device device, const char* op) : device_(device), op_(op), current_(detail::cuda::use_device(device, op)) {}

  std::shared_ptr<char> device_buffer(int64_t bytes) override {
    std::shared_ptr<void> memory = detail::cuda::allocate(std::max<int64_t>(bytes, 1), device_, op_);
    return std::shared_ptr<char>(memory, static_cast<char*>(memory.get()));
  }
  std::shared_ptr<char> staging_buffer(int64_t bytes) override { return PinnedCache::instance().acquire(bytes, op_); }
  void to_host(char* host, const char* device, int64_t bytes) override {
    detail::cuda::copy_to_host_async(host, device, bytes, op_);
  }
  void to_device(char* device, const char* host, int64_t bytes) override {
    detail::cuda::copy_from_host_async(device, host, bytes, op_);
  }
  void copy(char* dst, const char* src, int64_t bytes) override {
    detail::cuda::copy_device_async(dst, src, bytes, op_);
  }
  void copy_view(const TensorView& dst, const TensorView& src) override { detail::cuda::copy(dst, src, op_); }
  void combine(char* out, const char* a, const char* b, int64_t n, DType dtype, Reduce reduce, int64_t count) override {
    detail::cuda::combine(out, a, b, n, dtype, reduce, count, op_);
  }
  void finalize_mean(char* out, int64_t n, DType dtype, int64_t count) override {
    detail::cuda::finalize_mean(out, n, dtype, count, op_);
  }
  uint64_t mark() override {
    events_.emplace_back(++marked_, detail::cuda::record_event(op_));
    return marked_;
  }
  bool reached(uint64_t ticket) override {
    while (!events_.empty() && detail::cuda::event_reached(events_.front().second, op_)) {
      reached_ = events_.front().first;
      events_.pop_front();
    }
    return ticket <= reached_;
  }
  void synchronize() override {
    detail::cuda::event_wait(detail::cuda::record_event(op_), op_);
    events_.clear();
    reached_ = marked_;
  }

 private:
  Device device_;
  const char* op_;
  std::shared_ptr<void> current_;
  uint64_t marked_ = 0;
  uint64_t reached_ = 0;
  std::deque<std::pair<uint64_t, std::shared_ptr<void>>> events_;
};

// ---- the emulation ---------------------------------------------------------------

// Host memory standing in for a device. Work is queued and runs one step per
// reached() call (all of it at synchronize() and destruction), so whatever
// reads a buffer before the work that fills it was waited for sees stale
// bytes, as it would on a GPU.
class EmulatedQueue final : public DeviceQueue {
 public:
  explicit EmulatedQueue(const char* op) : op_(op) {}
  ~EmulatedQueue() override { run_all(); }

  std::shared_ptr<char> device_buffer(int64_t bytes) override {
    std::shared_ptr<char> memory(new char[static_cast<size_t>(std::max<int64_t>(bytes, 1))],
                                 std::default_delete<char[]>());
    keep_.push_back(memory);  // queued work may still use it after the caller dropped it
    return memory;
  }
  std::shared_ptr<char> staging_buffer(int64_t bytes) override {
    return std::shared_ptr<char>(new char[static_cast<size_t>(std::max<int64_t>(bytes, 1))],
                                 std::default_delete<char[]>());
  }
  void to_host(char* host, const char* device, int64_t bytes) override { copy(host, device, bytes); }
  void to_device(char* device, const char* host, int64_t bytes) override { copy(device, host, bytes); }
  void copy(char* dst, const char* src, int64_t bytes) override {
    enqueue([=] {
      if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(bytes));
    });
  }
  void copy_view(const TensorView& dst, const TensorView& src) override {
    enqueue([dst, src] { copy_(dst, src); });
  }
  void combine(char* out, const char* a, const char* b, int64_t n, DType dtype, Reduce reduce, int64_t count) override {
    const char* op = op_;
    enqueue([=] { detail::combine_cpu(out, a, b, n, dtype, reduce, count, op); });
  }
  void finalize_mean(char* out, int64_t n, DType dtype, int64_t count) override {
    const char* op = op_;
    enqueue([=] { detail::finalize_mean_cpu(out, n, dtype, count, op); });
  }
  uint64_t mark() override { return queued_; }
  bool reached(uint64_t ticket) override {
    if (!pending_.empty()) run_one();
    return ticket <= ran_;
  }
  void synchronize() override { run_all(); }

 private:
  void enqueue(std::function<void()> work) {
    pending_.push_back(std::move(work));
    ++queued_;
  }
  void run_one() {
    std::function<void()> work = std::move(pending_.front());
    pending_.pop_front();
    ++ran_;
    work();
  }
  void run_all() {
    while (!pending_.empty()) run_one();
  }

  const char* op_;
  std::deque<std::function<void()>> pending_;
  uint64_t queued_ = 0;
  uint64_t ran_ = 0;
  std::vector<std::shared_ptr<char>> keep_;
};

// ---- knobs -----------------------------------------------------------------------------

// Large enough that a chunk's copy runs near PCIe bandwidth, small enough
// that the first chunk's copy does not delay its message for long.
int64_t staging_chunk_bytes() {
  static const int64_t bytes = detail::knob_bytes(detail::Knob::DistStagingChunkBytes);
  return bytes;
}

// The emulation's transport, or -1 when off.
int emulated_transport() {
  static const int transport = [] {
    const std::string way = detail::knob_choice(detail::Knob::DistEmulateDevice);
    if (way == "staged") return static_cast<int>(DeviceTransport::Staged);
    if (way == "direct") return static_cast<int>(DeviceTransport::Direct);
    return -1;
  }();
  return transport;
}

bool cuda_aware_allowed() {
  static const bool allowed = detail::knob_flag(detail::Knob::DistCudaAware);
  return allowed;
}

}  // namespace

bool mpi_cuda_aware() {
  Communicator::ensure_mpi_initialized();
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  // Asked at run time: the library loaded may differ from the headers.
  static const bool aware = MPIX_Query_cuda_support() == 1;
  return aware;
#else
  return false;
#endif
}

DeviceRoute device_route(const TensorView& t, const char* op) {
  DeviceRoute route;
  if (t.device().is_cuda()) {
    route.queue = std::make_unique<CudaQueue>(t.device(), op);
    route.transport = mpi_cuda_aware() && cuda_aware_allowed() ? DeviceTransport::Direct : DeviceTransport::Staged;
  } else if (emulated_transport() >= 0) {
    route.queue = std::make_unique<EmulatedQueue>(op);
    route.transport = static_cast<DeviceTransport>(emulated_transport());
  } else {
    return route;
  }
  route.chunk_bytes = staging_chunk_bytes();
  return route;
}

}  // namespace scatterx::dist

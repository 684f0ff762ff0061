// Streams, switches, memory and copies of the CUDA backend.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "ops/cuda.h"
#include "ops/detail/cuda/contention.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx {

namespace {
thread_local cudaStream_t g_current_stream = nullptr;
std::atomic<bool> g_deterministic{false};
std::atomic<bool> g_index_checks{true};
std::atomic<cuda::ScatterPath> g_scatter_path{cuda::ScatterPath::Auto};
}  // namespace

namespace cuda {

bool is_built() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here
    return 0;
  }
  return n;
}

void* current_stream() { return g_current_stream; }
void set_current_stream(void* stream) { g_current_stream = static_cast<cudaStream_t>(stream); }

StreamGuard::StreamGuard(void* stream) : previous_(g_current_stream) {
  g_current_stream = static_cast<cudaStream_t>(stream);
}
StreamGuard::~StreamGuard() { g_current_stream = static_cast<cudaStream_t>(previous_); }

void synchronize() {
  detail::cuda::check(cudaStreamSynchronize(g_current_stream), "synchronize", "cudaStreamSynchronize");
}

void set_deterministic(bool on) { g_deterministic = on; }
bool deterministic() { return g_deterministic; }
void set_index_checks(bool on) { g_index_checks = on; }
bool index_checks() { return g_index_checks; }
void set_scatter_path(ScatterPath path) { g_scatter_path = path; }
ScatterPath scatter_path() { return g_scatter_path; }

}  // namespace cuda

namespace detail::cuda {

cudaStream_t stream() { return g_current_stream; }

namespace {
thread_local scatterx::cuda::ScatterPath g_last_scatter_path = scatterx::cuda::ScatterPath::Auto;
}
scatterx::cuda::ScatterPath last_scatter_path() { return g_last_scatter_path; }
void set_last_scatter_path(scatterx::cuda::ScatterPath path) { g_last_scatter_path = path; }

namespace {

// Every allocation is a whole number of these. The atomics on 1- and 2-byte
// elements compare-and-swap the aligned 4-byte word around the element, which
// for the last element can reach past its end: inside the allocation, so
// compute-sanitizer's memcheck sees no access out of bounds.
constexpr int64_t kAllocationGranule = 256;

// The stream-ordered pool returns freed memory to the driver at every
// synchronization unless its release threshold says to keep it; each op's
// scratch would then be a fresh driver allocation. Keep everything (the
// pool still gives memory back when an allocation would otherwise fail).
void keep_freed_memory_in_pool(int ordinal, const char* op) {
  static constexpr int kMaxDevices = 64;
  static std::atomic<bool> configured[kMaxDevices];
  if (ordinal < 0 || ordinal >= kMaxDevices || configured[ordinal].exchange(true)) return;
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, ordinal), op, "cudaDeviceGetDefaultMemPool");
  uint64_t threshold = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), op, "cudaMemPoolSetAttribute");
}

}  // namespace

std::shared_ptr<void> allocate(int64_t bytes, Device device, const char* op) {
  if (bytes == 0) return std::shared_ptr<void>(nullptr, [](void*) {});
  DeviceGuard guard(device, op);
  keep_freed_memory_in_pool(device.index, op);
  const int64_t rounded = (bytes + kAllocationGranule - 1) / kAllocationGranule * kAllocationGranule;
  void* p = nullptr;
  cudaStream_t s = stream();
  check(cudaMallocAsync(&p, static_cast<size_t>(rounded), s), op, "cudaMallocAsync");
  const int ordinal = device.index;
  return std::shared_ptr<void>(p, [s, ordinal](void* q) {
    int previous = 0;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(ordinal);
    // Ordered after the work already queued on the allocating stream; if
    // that stream is gone, free synchronously.
    if (cudaFreeAsync(q, s) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaFree(q);
    }
    (void)cudaSetDevice(previous);
  });
}

void copy_to_host_async(void* host, const void* device, int64_t bytes, const char* op) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host, device, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream()), op,
        "cudaMemcpyAsync");
}

void copy_from_host_async(void* device, const void* host, int64_t bytes, const char* op) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream()), op,
        "cudaMemcpyAsync");
}

void copy_to_host(void* host, const void* device, int64_t bytes, const char* op) {
  if (bytes == 0) return;
  copy_to_host_async(host, device, bytes, op);
  check(cudaStreamSynchronize(stream()), op, "cudaStreamSynchronize");
}

void copy_from_host(void* device, const void* host, int64_t bytes, const char* op) {
  if (bytes == 0) return;
  copy_from_host_async(device, host, bytes, op);
  // The host buffer may be a temporary of the caller's.
  check(cudaStreamSynchronize(stream()), op, "cudaStreamSynchronize");
}

void copy_device_async(void* dst, const void* src, int64_t bytes, const char* op) {
  if (bytes == 0 || dst == src) return;
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream()), op,
        "cudaMemcpyAsync");
}

std::shared_ptr<void> use_device(Device device, const char* op) { return std::make_shared<DeviceGuard>(device, op); }

std::shared_ptr<void> allocate_pinned(int64_t bytes, const char* op) {
  void* p = nullptr;
  check(cudaMallocHost(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))), op, "cudaMallocHost");
  return std::shared_ptr<void>(p, [](void* q) { (void)cudaFreeHost(q); });
}

std::shared_ptr<void> record_event(const char* op) {
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), op, "cudaEventCreateWithFlags");
  std::shared_ptr<void> owner(event, [](void* e) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  check(cudaEventRecord(event, stream()), op, "cudaEventRecord");
  return owner;
}

bool event_reached(const std::shared_ptr<void>& event, const char* op) {
  const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(event.get()));
  if (rc == cudaErrorNotReady) return false;
  check(rc, op, "cudaEventQuery");
  return true;
}

void event_wait(const std::shared_ptr<void>& event, const char* op) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event.get())), op, "cudaEventSynchronize");
}

namespace {
struct Value16 {
  unsigned char bytes[16];
};
__global__ void write_value(unsigned char* device, Value16 value, int bytes) {
  for (int i = 0; i < bytes; ++i) device[i] = value.bytes[i];
}
}  // namespace

void fill_value(void* device, const void* value, int64_t bytes, const char* op) {
  SCATTERX_CHECK(bytes > 0 && bytes <= 16, ArgumentError, op, "expected a value of 1 to 16 bytes, got ", bytes);
  Value16 v{};
  std::memcpy(v.bytes, value, static_cast<size_t>(bytes));
  write_value<<<1, 1, 0, stream()>>>(static_cast<unsigned char*>(device), v, static_cast<int>(bytes));
  check_launch(op, "write_value");
}

void fill_zero(void* device, int64_t bytes, const char* op) {
  if (bytes == 0) return;
  check(cudaMemsetAsync(device, 0, static_cast<size_t>(bytes), stream()), op, "cudaMemsetAsync");
}

}  // namespace detail::cuda
}  // namespace scatterx

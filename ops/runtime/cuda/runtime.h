// Internal: the CUDA runtime every op and the distributed layer share (device
// memory, copies, events, pinned memory, the element-wise combine). The ops'
// own kernels are declared beside them (ops/<op>/cuda/<op>_cuda.h). Plain
// C++ so that host code compiled without nvcc can call it. In a build
// without the backend (no_cuda.cpp) each raises ArgumentError naming `op`.
#pragma once

#include <cstdint>
#include <memory>

#include "ops/dtype.h"
#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx::detail::cuda {

// Device memory for `bytes` on `device`, stream-ordered on the current
// stream (cudaMallocAsync), freed on that stream when the last owner drops it.
// The size is rounded up to a multiple of 256 bytes (sub-word atomics touch
// the whole 4-byte word of the last element), and the device's pool keeps
// freed memory for the next allocation instead of returning it to the driver.
std::shared_ptr<void> allocate(int64_t bytes, Device device, const char* op);

// dst = src, element-wise, any strides, same shape and dtype, both on one
// CUDA device (enqueued on the current stream).
void copy(const TensorView& dst, const TensorView& src, const char* op);
// Bytes between host and device memory; waits for the current stream (the
// host buffer may be gone once the call returns).
void copy_to_host(void* host, const void* device, int64_t bytes, const char* op);
void copy_from_host(void* device, const void* host, int64_t bytes, const char* op);
void fill_zero(void* device, int64_t bytes, const char* op);
// Writes one value of up to 16 bytes (a scalar converted to a dtype) to
// device memory: enqueued as a kernel argument, no synchronization.
void fill_value(void* device, const void* value, int64_t bytes, const char* op);

// ---- for pipelines (the distributed layer's staging) -------------------------
// Enqueued on the current stream and not waited for: the caller keeps the
// buffers alive and learns of completion through an event. Host buffers
// should be pinned (allocate_pinned) for the copies to overlap other work.
void copy_to_host_async(void* host, const void* device, int64_t bytes, const char* op);
void copy_from_host_async(void* device, const void* host, int64_t bytes, const char* op);
void copy_device_async(void* dst, const void* src, int64_t bytes, const char* op);
// Makes `device` the calling thread's current device until the returned
// handle is dropped (then the previous one again).
std::shared_ptr<void> use_device(Device device, const char* op);
// Page-locked host memory, freed (cudaFreeHost) when the last owner drops it.
std::shared_ptr<void> allocate_pinned(int64_t bytes, const char* op);
// An event recorded on the current stream after the work enqueued so far,
// destroyed with its last owner; event_reached polls it without blocking
// (raises on a device error), event_wait blocks until it is reached.
std::shared_ptr<void> record_event(const char* op);
bool event_reached(const std::shared_ptr<void>& event, const char* op);
void event_wait(const std::shared_ptr<void>& event, const char* op);
// combine.h's contract on device memory, enqueued on the current stream:
// out[i] = finalize(combine(a[i], b[i]), count), the arithmetic of the CPU's
// combine_cpu (16-bit floats through float, integers wrapping, NaN
// propagating), so a fold gives the same bits on either device.
void combine(void* out, const void* a, const void* b, int64_t n, DType dtype, Reduce reduce, int64_t count,
             const char* op);
void finalize_mean(void* out, int64_t n, DType dtype, int64_t count, const char* op);

}  // namespace scatterx::detail::cuda

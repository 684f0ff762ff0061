// Internal helpers shared by the CUDA backend's translation units.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/error.h"
#include "ops/tensor.h"

namespace scatterx::detail::cuda {

// Raises scatterx::Error "<op>: CUDA error in <call>: <CUDA's message>".
inline void check(cudaError_t rc, const char* op, const char* call) {
  if (SCATTERX_UNLIKELY(rc != cudaSuccess)) {
    (void)cudaGetLastError();  // clear a non-sticky error so later calls work
    raise<Error>(op, "CUDA error in ", call, ": ", cudaGetErrorString(rc));
  }
}

// The launch that just happened (configuration errors surface here; faults
// inside the kernel surface at the next synchronization).
inline void check_launch(const char* op, const char* kernel) { check(cudaGetLastError(), op, kernel); }

cudaStream_t stream();  // the calling thread's current stream (runtime.cu)

// Makes `device` current for the scope of an op, and restores the caller's.
class DeviceGuard {
 public:
  DeviceGuard(Device device, const char* op) {
    check(cudaGetDevice(&previous_), op, "cudaGetDevice");
    if (previous_ != device.index)
      check(cudaSetDevice(device.index), op, "cudaSetDevice");
    else
      previous_ = -1;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

constexpr int kThreads = 256;

// for (int64_t u = first of this thread; u < total; u += threads in the grid)
#define SCATTERX_GRID_LOOP(u, total)                                            \
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, \
               u##_step = static_cast<int64_t>(gridDim.x) * blockDim.x;         \
       u < (total); u += u##_step)

// Blocks for a grid-stride loop over n items: enough to fill the GPU a few
// times over, never more than the items need.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t needed = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(needed, int64_t{1} << 16)));
}

}  // namespace scatterx::detail::cuda

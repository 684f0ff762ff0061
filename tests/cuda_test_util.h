// Device mirrors of the host test buffers (tests/test_util.h), shared by
// the CUDA test files: a host buffer's whole storage copied to the GPU with
// the same view over it, and device values copied back. Every call waits
// for the copy (the host side may go away right after).
#pragma once

#include <cstdint>

#include "ops/runtime/cuda/runtime.h"
#include "tests/test_util.h"

namespace sxt {

inline const scatterx::Device kGpu = scatterx::Device::cuda(0);

struct DeviceBuf {
  Tensor base;      // the storage, on the GPU
  TensorView view;  // the host view's sizes, strides and offset, over base
};

inline DeviceBuf to_device(const Tensor& base, const TensorView& view) {
  DeviceBuf d;
  d.base = Tensor::empty(base.sizes(), base.dtype(), kGpu);
  scatterx::detail::cuda::copy_from_host(d.base.data(), base.data(), base.numel() * base.element_size(), "test");
  const int64_t offset = static_cast<const char*>(view.data()) - static_cast<const char*>(base.data());
  d.view = TensorView(static_cast<char*>(d.base.data()) + offset, view.dtype(), view.sizes(), view.strides(), kGpu);
  return d;
}
inline DeviceBuf to_device(const Buf& host) { return to_device(host.base, host.view); }
inline DeviceBuf to_device(const Tensor& host) { return to_device(host, host); }

// The device storage copied back over the host Buf's storage.
inline void to_host(const DeviceBuf& d, Buf& host) {
  scatterx::detail::cuda::copy_to_host(host.base.data(), d.base.data(), host.base.numel() * host.base.element_size(),
                                       "test");
}

// A device tensor's values in a contiguous host tensor.
inline Tensor to_host(const TensorView& device) {
  const Tensor contiguous = Tensor::clone(device);
  Tensor out = Tensor::empty(device.sizes(), device.dtype());
  scatterx::detail::cuda::copy_to_host(out.data(), contiguous.data(), out.numel() * out.element_size(), "test");
  return out;
}

}  // namespace sxt

// CUDA strided copy (clone of a CUDA view, copy_ between CUDA views).
#include "ops/detail/bytes.h"
#include "ops/detail/strided.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx::detail::cuda {

namespace {

template <typename E>
__global__ void copy_elements(E* dst, const E* src, const StridedLayout<2> layout, int64_t total) {
  SCATTERX_GRID_LOOP(u, total) {
    int64_t off[2];
    layout.offsets(u, off);
    dst[off[0]] = src[off[1]];
  }
}

}  // namespace

void copy(const TensorView& dst, const TensorView& src, const char* op) {
  const int64_t total = dst.numel();
  if (total == 0) return;
  DeviceGuard guard(dst.device(), op);
  const TensorView* views[2] = {&dst, &src};
  const StridedLayout<2> layout = layout_of<2>(dst.sizes(), views).collapsed();
  if (layout.ndim <= 1 && (layout.ndim == 0 || (layout.strides[0][0] == 1 && layout.strides[1][0] == 1))) {
    check(cudaMemcpyAsync(dst.data(), src.data(), static_cast<size_t>(total * dst.element_size()),
                          cudaMemcpyDeviceToDevice, stream()),
          op, "cudaMemcpyAsync");
    return;
  }
  dispatch_element_size(dst.element_size(), op, [&](auto element) {
    using E = decltype(element);
    copy_elements<E><<<blocks_for(total), kThreads, 0, stream()>>>(static_cast<E*>(dst.data()),
                                                                   static_cast<const E*>(src.data()), layout, total);
    check_launch(op, "copy_elements");
  });
}

}  // namespace scatterx::detail::cuda

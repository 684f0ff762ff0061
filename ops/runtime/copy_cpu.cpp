// copy_: strided element-wise copy on the CPU.
#include <cstring>

#include "ops/detail/bytes.h"
#include "ops/detail/checks.h"
#include "ops/detail/strided.h"
#include "ops/runtime/cuda/runtime.h"
#include "ops/runtime/parallel.h"
#include "ops/tensor.h"

namespace scatterx {

namespace {

constexpr int64_t kCopyGrainBytes = 1 << 18;

template <typename E>
void copy_kernel(const TensorView& dst, const TensorView& src) {
  const TensorView* views[2] = {&dst, &src};
  const auto layout = detail::layout_of<2>(dst.sizes(), views).collapsed();
  E* out = static_cast<E*>(dst.data());
  const E* in = static_cast<const E*>(src.data());
  if (layout.ndim == 0) {
    *out = *in;
    return;
  }
  const int last = layout.ndim - 1;
  const int64_t inner = layout.sizes[last];
  const int64_t out_step = layout.strides[0][last];
  const int64_t in_step = layout.strides[1][last];
  detail::StridedLayout<2> rows = layout;
  rows.ndim = last;
  const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / static_cast<int64_t>(sizeof(E) * inner));
  if (layout.ndim == 1 && out_step == 1 && in_step == 1) {
    detail::parallel_for(inner, kCopyGrainBytes / sizeof(E), [&](int64_t begin, int64_t end) {
      std::memcpy(out + begin, in + begin, static_cast<size_t>(end - begin) * sizeof(E));
    });
    return;
  }
  detail::parallel_for(rows.numel(), grain, [&](int64_t begin, int64_t end) {
    detail::StridedCursor<2> cursor(rows, begin);
    for (int64_t r = begin; r < end; ++r, cursor.next()) {
      E* o = out + cursor.offset(0);
      const E* i = in + cursor.offset(1);
      if (out_step == 1 && in_step == 1) {
        std::memcpy(o, i, static_cast<size_t>(inner) * sizeof(E));
      } else {
        for (int64_t j = 0; j < inner; ++j) o[j * out_step] = i[j * in_step];
      }
    }
  });
}

}  // namespace

TensorView copy_(const TensorView& dst, const TensorView& src) {
  constexpr const char* op = "copy_";
  detail::check_devices(op, {{"dst", &dst}, {"src", &src}});
  detail::check_same_dtype(op, "src", src, "dst", dst);
  SCATTERX_CHECK(dst.sizes() == src.sizes(), ArgumentError, op, "expected src of dst's shape ", dst.sizes().str(),
                 ", got ", src.sizes().str());
  detail::check_no_internal_overlap(op, "dst", dst);
  detail::check_no_overlap(op, "dst", dst, "src", src);
  if (dst.numel() == 0) return dst;
  if (dst.device().is_cuda()) {
    detail::cuda::copy(dst, src, op);
    return dst;
  }
  detail::dispatch_element_size(dst.element_size(), op,
                                [&](auto element) { copy_kernel<decltype(element)>(dst, src); });
  return dst;
}

}  // namespace scatterx

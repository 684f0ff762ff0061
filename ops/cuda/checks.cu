// CUDA index bounds check: one pass over the index finds the first value
// (row-major) outside [0, bound); the host turns it into the CPU backend's
// IndexError before any kernel writes.
#include <limits>

#include "ops/cuda.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/common.cuh"
#include "ops/detail/strided.h"
#include "ops/dispatch.h"

namespace scatterx::detail::cuda {

namespace {

template <typename I>
__global__ void find_first_bad_index(const I* index, const StridedLayout<1> layout, int64_t total, int64_t bound,
                                     unsigned long long* first) {
  SCATTERX_GRID_LOOP(u, total) {
    int64_t off[1];
    layout.offsets(u, off);
    const int64_t v = static_cast<int64_t>(index[off[0]]);
    if (v < 0 || v >= bound) atomicMin(first, static_cast<unsigned long long>(u));
  }
}

}  // namespace

void check_index_bounds(const char* op, const TensorView& index, int64_t dim, int64_t bound) {
  const int64_t total = index.numel();
  if (total == 0 || !scatterx::cuda::index_checks()) return;
  DeviceGuard guard(index.device(), op);
  // Dims of stride 0 repeat values (an expanded index): only the others are
  // walked. The first bad position in that walk, with 0 in the skipped dims,
  // is also the first in row-major order over the whole shape.
  const Shape& shape = index.sizes();
  StridedLayout<1> layout;
  Shape walked_dims;
  for (int64_t d = 0; d < shape.size(); ++d) {
    if (index.strides()[d] == 0 && shape[d] > 1) continue;
    const int64_t stride[1] = {index.strides()[d]};
    layout.push(shape[d], stride);
    walked_dims.push_back(d);
  }
  const int64_t walked = layout.numel();
  std::shared_ptr<void> flag = allocate(sizeof(unsigned long long), index.device(), op);
  auto* first = static_cast<unsigned long long*>(flag.get());
  check(cudaMemsetAsync(first, 0xff, sizeof(unsigned long long), stream()), op, "cudaMemsetAsync");
  dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    find_first_bad_index<I><<<blocks_for(walked), kThreads, 0, stream()>>>(static_cast<const I*>(index.data()), layout,
                                                                           walked, bound, first);
    check_launch(op, "find_first_bad_index");
  });
  unsigned long long found = 0;
  copy_to_host(&found, first, sizeof found, op);
  if (found == std::numeric_limits<unsigned long long>::max()) return;
  // Read the bad value back and name its position, as the CPU check does.
  int64_t off[1];
  layout.offsets(static_cast<int64_t>(found), off);
  int64_t value = 0;
  dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    I v{};
    copy_to_host(&v, static_cast<const I*>(index.data()) + off[0], sizeof(I), op);
    value = static_cast<int64_t>(v);
  });
  Shape position = shape;
  for (int64_t d = 0; d < shape.size(); ++d) position[d] = 0;
  int64_t rest = static_cast<int64_t>(found);
  for (int64_t w = walked_dims.size() - 1; w >= 0; --w) {
    position[walked_dims[w]] = rest % layout.sizes[w];
    rest /= layout.sizes[w];
  }
  raise<IndexError>(op, "index ", value, " is out of bounds for dimension ", dim, " with size ", bound,
                    " (index position ", position.str(), ")");
}

}  // namespace scatterx::detail::cuda

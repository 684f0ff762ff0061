// CUDA gather / index_select. Gather only moves values: kernels are
// instantiated per element size (or vector width), not per dtype.
#include "ops/detail/bytes.h"
#include "ops/detail/cuda/positions.cuh"
#include "ops/detail/index_geometry.h"
#include "ops/dispatch.h"
#include "ops/gather/cuda/gather_cuda.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx::detail::cuda {

namespace {

// Any index: one thread per position (outer, i, j) of index's shape.
template <typename E, typename I>
__global__ void gather_elements(E* out, const E* in, const I* index, const DeviceGeometry g, int64_t bound,
                                int64_t total) {
  SCATTERX_GRID_LOOP(u, total) {
    const Position p = decode_position(g, u);
    const int64_t v = static_cast<int64_t>(index[p.index]);
    if (v < 0 || v >= bound) continue;  // only with index checks off: skipped, never read out of bounds
    out[p.positional] = in[p.indexed + v * g.dim_stride[0]];
  }
}

// One index value per row (index_select, an expanded index) and contiguous
// rows: a warp copies each row in V-sized vectors (16 bytes when the rows'
// sizes and addresses allow), so every load is a full, coalesced transaction.
// One row per warp at a time: taking four rows at once and issuing their
// loads together ran slower on an H200 for rows of 512 bytes (0.74-0.97
// against 0.66 ms for 2^21 rows) and gained 1-4% for 2-8 KiB rows.
template <typename V, typename I>
__global__ void gather_rows(char* out, const char* in, const I* index, const DeviceGeometry g, int64_t element_bytes,
                            int64_t bound, int64_t rows, int64_t vectors_per_row) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const Position p = decode_position(g, row * g.row_len);  // the row's first column
    const int64_t v = static_cast<int64_t>(index[p.index]);
    if (v < 0 || v >= bound) continue;  // only with index checks off: skipped, never read out of bounds
    const V* src = reinterpret_cast<const V*>(in + (p.indexed + v * g.dim_stride[0]) * element_bytes);
    V* dst = reinterpret_cast<V*>(out + p.positional * element_bytes);
    for (int64_t c = lane; c < vectors_per_row; c += 32) dst[c] = src[c];
  }
}

struct alignas(16) Vector16 {
  uint4 v;
};

// The widest of 16, 8, 4, 2, 1 bytes dividing every row's start in both
// tensors and the row's length.
int64_t row_vector_bytes(const GatherArgs& a, const IndexGeometry& g) {
  const int64_t es = a.out.element_size();
  uint64_t bits = reinterpret_cast<uintptr_t>(a.out.data()) | reinterpret_cast<uintptr_t>(a.input.data());
  bits |= static_cast<uint64_t>(g.row_len * es);
  bits |= static_cast<uint64_t>(g.dim_stride[0] * es) | static_cast<uint64_t>(g.dim_stride[1] * es);
  for (int d = 0; d < g.outer.ndim; ++d) {
    bits |= static_cast<uint64_t>(g.outer.strides[0][d] * es) | static_cast<uint64_t>(g.outer.strides[1][d] * es);
  }
  for (int64_t w = 16; w > 1; w /= 2) {
    if ((bits & static_cast<uint64_t>(w - 1)) == 0) return w;
  }
  return 1;
}

template <typename I>
void launch_rows(const GatherArgs& a, const DeviceGeometry& g, int64_t bound) {
  const int64_t es = a.out.element_size();
  const int64_t rows = g.outer_numel * g.k;
  const int64_t width = row_vector_bytes(a, g);
  const int64_t vectors = g.row_len * es / width;
  const unsigned blocks = blocks_for(rows * 32);
  auto* out = static_cast<char*>(a.out.data());
  const auto* in = static_cast<const char*>(a.input.data());
  const auto* index = static_cast<const I*>(a.index.data());
  auto launch = [&](auto vector_tag) {
    using V = decltype(vector_tag);
    gather_rows<V, I><<<blocks, kThreads, 0, stream()>>>(out, in, index, g, es, bound, rows, vectors);
  };
  switch (width) {
    case 16:
      launch(Vector16{});
      break;
    case 8:
      launch(uint64_t{});
      break;
    case 4:
      launch(uint32_t{});
      break;
    case 2:
      launch(uint16_t{});
      break;
    default:
      launch(uint8_t{});
      break;
  }
  check_launch(a.op, "gather_rows");
}

}  // namespace

void gather(const GatherArgs& a) {
  DeviceGuard guard(a.out.device(), a.op);
  // input is the indexed tensor, out the positional one (see index_geometry.h)
  const DeviceGeometry g(make_index_geometry(a.input, a.out, a.index, a.dim));
  const int64_t total = g.outer_numel * g.k * g.row_len;
  if (total == 0) return;
  const int64_t bound = a.input.size(a.dim);
  dispatch_index_dtype(a.index.dtype(), a.op, [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    if (g.slice_index && g.row_len > 1 && g.row_stride[0] == 1 && g.row_stride[1] == 1) {
      launch_rows<I>(a, g, bound);
      return;
    }
    dispatch_element_size(a.out.element_size(), a.op, [&](auto element) {
      using E = decltype(element);
      gather_elements<E, I><<<blocks_for(total), kThreads, 0, stream()>>>(
          static_cast<E*>(a.out.data()), static_cast<const E*>(a.input.data()), static_cast<const I*>(a.index.data()),
          g, bound, total);
      check_launch(a.op, "gather_elements");
    });
  });
}

}  // namespace scatterx::detail::cuda

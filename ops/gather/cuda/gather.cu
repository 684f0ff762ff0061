// CUDA gather / index_select. Gather only moves values: kernels are
// instantiated per element size (or vector width), not per dtype.
#include <algorithm>

#include "ops/detail/bytes.h"
#include "ops/detail/cuda/positions.cuh"
#include "ops/detail/fast_divider.h"
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
// rows, copied in V-sized vectors (16 bytes when the rows' sizes and
// addresses allow), so every load is a full, coalesced transaction.
//
// A warp takes `rows_per_step` consecutive rows at a time: each lane decodes
// one row and loads its index value, so the index's latency is paid once per
// step rather than once per row, and the rows' vectors are then spread over
// the lanes as one flat list (item t: row t / vectors, vector t % vectors,
// the row's addresses passed by a shuffle). Each lane issues kUnroll loads
// before its stores: the stores may alias the loads as far as the compiler
// knows, so without this a lane kept one 16-byte load in flight. On an H200
// (2^21 rows of 512 bytes) a row per warp with one load in flight ran at 77%
// of a copy's bandwidth, this kernel at 90%; 2 or 8 loads per lane ran slower
// than 4 (with 4 the kernel holds 64 registers: 4 blocks of 256 per SM).
constexpr int kUnroll = 4;

template <typename V, typename I>
__global__ void __launch_bounds__(kThreads)
    gather_rows(char* out, const char* in, const I* index, const DeviceGeometry g, int64_t element_bytes, int64_t bound,
                int64_t rows, FastDivider by_vectors, int rows_per_step) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const uint32_t vectors = by_vectors.divisor();
  for (int64_t first = warp * rows_per_step; first < rows; first += warps * rows_per_step) {
    const int n = static_cast<int>(rows - first < rows_per_step ? rows - first : rows_per_step);
    unsigned long long src = 0, dst = 0;  // this lane's row; 0 when skipped
    if (lane < n) {
      const Position p = decode_position(g, (first + lane) * g.row_len);  // the row's first column
      const int64_t v = static_cast<int64_t>(index[p.index]);
      if (v >= 0 && v < bound) {  // else only with index checks off: skipped, never read out of bounds
        src = reinterpret_cast<uintptr_t>(in + (p.indexed + v * g.dim_stride[0]) * element_bytes);
        dst = reinterpret_cast<uintptr_t>(out + p.positional * element_bytes);
      }
    }
    const uint32_t items = static_cast<uint32_t>(n) * vectors;
    for (uint32_t step = 0; step < items; step += 32 * kUnroll) {
      V values[kUnroll];
      V* to[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint32_t t = step + u * 32 + lane;
        const uint32_t r = by_vectors.quotient(t);
        const int from_lane = r < 31 ? static_cast<int>(r) : 31;  // every lane shuffles, in range or not
        const auto* s = reinterpret_cast<const V*>(__shfl_sync(0xffffffffu, src, from_lane));
        auto* d = reinterpret_cast<V*>(__shfl_sync(0xffffffffu, dst, from_lane));
        const uint32_t c = t - r * vectors;
        to[u] = t < items && s != nullptr ? d + c : nullptr;
        if (to[u] != nullptr) values[u] = s[c];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (to[u] != nullptr) *to[u] = values[u];
      }
    }
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

// Rows of more vectors than this take the element kernel: the row kernel
// numbers a step's vectors in 32 bits.
constexpr int64_t kMaxRowVectors = int64_t{1} << 30;

template <typename I>
bool launch_rows(const GatherArgs& a, const DeviceGeometry& g, int64_t bound) {
  const int64_t es = a.out.element_size();
  const int64_t rows = g.outer_numel * g.k;
  const int64_t width = row_vector_bytes(a, g);
  const int64_t vectors = g.row_len * es / width;
  if (vectors > kMaxRowVectors) return false;
  // Enough rows per step for two rounds of kUnroll vectors per lane: on an
  // H200, one round left 512-byte rows at 0.585 ms (2^21 rows), two 0.559 ms,
  // four 0.563 ms.
  const int rows_per_step = static_cast<int>(std::clamp<int64_t>(2 * 32 * kUnroll / vectors, 1, 32));
  const unsigned blocks = blocks_for((rows + rows_per_step - 1) / rows_per_step * 32);
  const FastDivider by_vectors(static_cast<uint32_t>(vectors));
  auto* out = static_cast<char*>(a.out.data());
  const auto* in = static_cast<const char*>(a.input.data());
  const auto* index = static_cast<const I*>(a.index.data());
  auto launch = [&](auto vector_tag) {
    using V = decltype(vector_tag);
    gather_rows<V, I><<<blocks, kThreads, 0, stream()>>>(out, in, index, g, es, bound, rows, by_vectors, rows_per_step);
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
  return true;
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
    if (g.slice_index && g.row_len > 1 && g.row_stride[0] == 1 && g.row_stride[1] == 1 && launch_rows<I>(a, g, bound)) {
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

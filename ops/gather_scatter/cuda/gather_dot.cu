// CUDA gather_dot: out[e] = sum over f of a[a_index[e], f] * b[b_index[e], f].
//
// A team of L lanes of one warp computes one edge's dot: lane j folds the
// features j, j + L, j + 2L, ... in order (consecutive lanes read consecutive
// features of a row: coalesced), then the team folds its L partial sums with
// a shuffle tree of fixed shape. L depends on F alone (32 for F > 16, else
// the power of two >= F, so a small F does not leave most of a warp idle),
// so the summation order, hence every bit of the result, is independent of
// the grid: deterministic. It differs from the CPU's order (8 interleaved
// partial sums), so the two backends agree within rounding, not bit for bit.
#include <cstdint>

#include "ops/dispatch.h"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/gather_scatter/gather_scatter_dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cuda/common.cuh"

namespace scatterx::detail::cuda {

namespace {

constexpr int kWarp = 32;

// The lanes that share one edge: enough for every feature to have its own
// lane up to a whole warp.
int lanes_per_edge(int64_t features) {
  int lanes = 1;
  while (lanes < kWarp && lanes < features) lanes *= 2;
  return lanes;
}

struct DotGeometry {
  int64_t edges = 0;
  int64_t features = 0;
  int64_t a_rows = 0;  // valid a_index values are [0, a_rows)
  int64_t b_rows = 0;
  int64_t a_index_stride = 0;
  int64_t b_index_stride = 0;
};

// kLanes lanes per edge, kWarp / kLanes edges per warp. The loop runs over
// whole warps (every lane of a warp iterates the same number of times) so
// that the full-mask shuffles always find all 32 lanes present; a team past
// the last edge computes a dummy 0 and writes nothing.
template <typename T, typename IA, typename IB, int kLanes>
__global__ void dot_edges(T* out, const T* a, const IA* a_index, const T* b, const IB* b_index, const DotGeometry g) {
  using A = acc_t<T>;
  constexpr int kEdgesPerWarp = kWarp / kLanes;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int team = static_cast<int>(threadIdx.x) % kWarp / kLanes;
  const int64_t warps = (g.edges + kEdgesPerWarp - 1) / kEdgesPerWarp;
  const int64_t first_warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int64_t warp_step = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t w = first_warp; w < warps; w += warp_step) {
    const int64_t e = w * kEdgesPerWarp + team;
    A partial = A(0);
    bool in_range = false;
    if (e < g.edges) {
      const int64_t ra = static_cast<int64_t>(a_index[e * g.a_index_stride]);
      const int64_t rb = static_cast<int64_t>(b_index[e * g.b_index_stride]);
      // Out of range only with index checks off: the edge's dot is 0.
      in_range = ra >= 0 && ra < g.a_rows && rb >= 0 && rb < g.b_rows;
      if (in_range) {
        const T* x = a + ra * g.features;
        const T* y = b + rb * g.features;
        for (int64_t f = lane; f < g.features; f += kLanes) {
          partial += static_cast<A>(x[f]) * static_cast<A>(y[f]);
        }
      }
    }
    // Fixed tree: lane j adds lane j + width for width = kLanes / 2, ..., 1.
    // The width argument keeps each team's shuffles inside the team.
    for (int width = kLanes / 2; width > 0; width /= 2) {
      partial += __shfl_down_sync(0xffffffffu, partial, width, kLanes);
    }
    if (e < g.edges && lane == 0) out[e] = in_range ? static_cast<T>(partial) : T(0);
  }
}

template <typename T, typename IA, typename IB, int kLanes>
void launch(T* out, const T* a, const IA* ai, const T* b, const IB* bi, const DotGeometry& g, const char* op) {
  constexpr int kEdgesPerWarp = kWarp / kLanes;
  const int64_t warps = (g.edges + kEdgesPerWarp - 1) / kEdgesPerWarp;
  dot_edges<T, IA, IB, kLanes><<<blocks_for(warps * kWarp), kThreads, 0, stream()>>>(out, a, ai, b, bi, g);
  check_launch(op, "dot_edges");
}

template <typename T, typename IA, typename IB>
void launch_for_features(T* out, const T* a, const IA* ai, const T* b, const IB* bi, const DotGeometry& g,
                         const char* op) {
  switch (lanes_per_edge(g.features)) {
    case 1:
      return launch<T, IA, IB, 1>(out, a, ai, b, bi, g, op);
    case 2:
      return launch<T, IA, IB, 2>(out, a, ai, b, bi, g, op);
    case 4:
      return launch<T, IA, IB, 4>(out, a, ai, b, bi, g, op);
    case 8:
      return launch<T, IA, IB, 8>(out, a, ai, b, bi, g, op);
    case 16:
      return launch<T, IA, IB, 16>(out, a, ai, b, bi, g, op);
    default:
      return launch<T, IA, IB, kWarp>(out, a, ai, b, bi, g, op);
  }
}

}  // namespace

void gather_dot(const char* op, const TensorView& a, const TensorView& a_index, const TensorView& b,
                const TensorView& b_index, int64_t features, const TensorView& out) {
  DeviceGuard guard(out.device(), op);
  DotGeometry g;
  g.edges = a_index.size(0);
  g.features = features;
  g.a_rows = a.size(0);
  g.b_rows = b.size(0);
  g.a_index_stride = a_index.strides()[0];
  g.b_index_stride = b_index.strides()[0];
  if (g.edges == 0) return;
  dispatch_gather_dot(a.dtype(), a_index.dtype(), b_index.dtype(), op, [&](auto t, auto ia, auto ib) {
    using T = CppType<decltype(t)::value>;
    using IA = typename decltype(ia)::type;
    using IB = typename decltype(ib)::type;
    launch_for_features<T, IA, IB>(static_cast<T*>(out.data()), static_cast<const T*>(a.data()),
                                   static_cast<const IA*>(a_index.data()), static_cast<const T*>(b.data()),
                                   static_cast<const IB*>(b_index.data()), g, op);
  });
}

}  // namespace scatterx::detail::cuda

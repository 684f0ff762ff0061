// CUDA segment kernels. One thread folds one output element in position
// order (segment_csr / segment_coo), or one column of a scatter arg reduce,
// so results are deterministic and equal the CPU backend's bit for bit.
#include <limits>

#include "ops/detail/bytes.h"
#include "ops/detail/strided.h"
#include "ops/dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"
#include "ops/segment/cuda/segment_cuda.h"

namespace scatterx::detail::cuda {

namespace {

// Csr and Coo: thread u computes out element u (row-major over outer x num_out x inner).
template <typename T, typename I, Reduce R, bool kArg>
__global__ void reduce_segments(T* out, int64_t* arg, const T* src, const I* pos, SegmentKind kind,
                                const SegmentGeometry g, int64_t total) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t k = u % g.inner_numel;
    const int64_t row = u / g.inner_numel;
    const int64_t n = row % g.num_out;
    int64_t off[2];
    int64_t inner[2];
    g.outer.offsets(row / g.num_out, off);
    g.inner.offsets(k, inner);
    int64_t begin = 0;
    int64_t end = 0;
    segment_bounds(kind, pos + off[1], g, n, begin, end);
    const T* s = src + off[0] + inner[0];
    if constexpr (kArg) {
      if (begin == end) {
        out[u] = T(0);
        arg[u] = g.len;
        continue;
      }
      A acc = static_cast<A>(s[begin * g.src_stride]);
      int64_t win = begin;
      for (int64_t e = begin + 1; e < end; ++e) {
        const A v = static_cast<A>(s[e * g.src_stride]);
        if (Op::replaces(acc, v)) {
          acc = v;
          win = e;
        }
      }
      out[u] = static_cast<T>(acc);
      arg[u] = win;
    } else {
      A acc = Op::identity();
      for (int64_t e = begin; e < end; ++e) acc = Op::combine(acc, static_cast<A>(s[e * g.src_stride]));
      const bool empty_is_zero = (R == Reduce::Amax || R == Reduce::Amin) && begin == end;
      out[u] = empty_is_zero ? T(0) : static_cast<T>(Op::finalize(acc, end - begin > 0 ? end - begin : 1));
    }
  }
}

// Scatter: thread u owns column (outer row, inner position) u and walks every position in order.
template <typename T, typename I, Reduce R>
__global__ void scatter_arg(T* out, int64_t* arg, const T* src, const I* index, const SegmentGeometry g,
                            int64_t columns) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  SCATTERX_GRID_LOOP(u, columns) {
    const int64_t k = u % g.inner_numel;
    const int64_t b = u / g.inner_numel;
    int64_t off[2];
    int64_t inner[2];
    g.outer.offsets(b, off);
    g.inner.offsets(k, inner);
    const int64_t base = b * g.num_out * g.inner_numel + k;
    for (int64_t n = 0; n < g.num_out; ++n) arg[base + n * g.inner_numel] = g.len;
    for (int64_t e = 0; e < g.len; ++e) {
      const int64_t target = static_cast<int64_t>(index[off[1] + inner[1] + e * g.pos_stride]);
      if (target < 0 || target >= g.num_out) continue;  // only with index checks off
      const int64_t slot = base + target * g.inner_numel;
      const A v = static_cast<A>(src[off[0] + inner[0] + e * g.src_stride]);
      if (arg[slot] == g.len || Op::replaces(static_cast<A>(out[slot]), v)) {
        out[slot] = static_cast<T>(v);
        arg[slot] = e;
      }
    }
    for (int64_t n = 0; n < g.num_out; ++n) {
      if (arg[base + n * g.inner_numel] == g.len) out[base + n * g.inner_numel] = T(0);
    }
  }
}

// gather_csr: thread u copies source element u (outer x segment x inner) over its segment.
template <typename E, typename I>
__global__ void gather_segments(E* out, const E* src, const I* indptr, const SegmentGeometry g, int64_t out_len,
                                int64_t total) {
  SCATTERX_GRID_LOOP(u, total) {
    const int64_t k = u % g.inner_numel;
    const int64_t row = u / g.inner_numel;
    const int64_t n = row % g.num_out;
    const int64_t b = row / g.num_out;
    int64_t off[2];
    int64_t inner[2];
    g.outer.offsets(b, off);
    g.inner.offsets(k, inner);
    int64_t begin = 0;
    int64_t end = 0;
    segment_bounds(SegmentKind::Csr, indptr + off[1], g, n, begin, end);
    const E value = src[off[0] + inner[0] + n * g.src_stride];
    for (int64_t e = begin; e < end; ++e) out[(b * out_len + e) * g.inner_numel + k] = value;
  }
}

// The position check: element u (row-major) breaks the rule when it is
// negative, above `bound` (Indptr) or below the element before it in its
// row (Indptr, Sorted). found[0] takes the first such u (atomicMin),
// found[1] the largest value (each warp sends one atomicMax).
template <typename I>
__global__ void scan_position_values(unsigned long long* first_bad, long long* max_value, const I* data,
                                     const StridedLayout<1> layout, int64_t total, int64_t row_length,
                                     PositionRule rule, int64_t bound) {
  long long largest = -1;
  SCATTERX_GRID_LOOP(u, total) {
    int64_t off[1];
    layout.offsets(u, off);
    const auto v = static_cast<long long>(data[off[0]]);
    bool bad = v < 0 || (rule == PositionRule::Indptr && v > bound);
    if (!bad && rule != PositionRule::Any && u % row_length != 0) {
      int64_t before[1];
      layout.offsets(u - 1, before);
      bad = v < static_cast<long long>(data[before[0]]);
    }
    if (bad) atomicMin(first_bad, static_cast<unsigned long long>(u));
    largest = v > largest ? v : largest;
  }
  for (int shift = 16; shift > 0; shift /= 2) {
    const long long other = __shfl_down_sync(0xffffffffu, largest, shift);
    largest = other > largest ? other : largest;
  }
  if (threadIdx.x % 32 == 0) atomicMax(max_value, largest);
}

__global__ void start_scan(unsigned long long* first_bad, long long* max_value) {
  *first_bad = std::numeric_limits<unsigned long long>::max();
  *max_value = -1;
}

}  // namespace

PositionScan scan_positions(const char* op, const TensorView& positions, PositionRule rule, int64_t bound) {
  PositionScan scan;
  const int64_t total = positions.numel();
  if (total == 0) return scan;
  DeviceGuard guard(positions.device(), op);
  StridedLayout<1> layout;
  for (int64_t d = 0; d < positions.dim(); ++d) {
    const int64_t stride[1] = {positions.strides()[d]};
    layout.push(positions.size(d), stride);
  }
  const int64_t row_length = positions.dim() == 0 ? 1 : positions.size(-1);
  const std::shared_ptr<void> scratch = allocate(2 * sizeof(long long), positions.device(), op);
  auto* first_bad = static_cast<unsigned long long*>(scratch.get());
  auto* max_value = reinterpret_cast<long long*>(first_bad + 1);
  start_scan<<<1, 1, 0, stream()>>>(first_bad, max_value);
  check_launch(op, "start_scan");
  dispatch_index_dtype(positions.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    scan_position_values<I><<<blocks_for(total), kThreads, 0, stream()>>>(
        first_bad, max_value, static_cast<const I*>(positions.data()), layout, total, row_length, rule, bound);
    check_launch(op, "scan_position_values");
  });
  unsigned long long found[2] = {0, 0};
  copy_to_host(found, scratch.get(), sizeof found, op);
  scan.first_bad = found[0] == std::numeric_limits<unsigned long long>::max() ? -1 : static_cast<int64_t>(found[0]);
  scan.max_value = static_cast<int64_t>(static_cast<long long>(found[1]));
  return scan;
}

void segment(const SegmentArgs& a) {
  DeviceGuard guard(a.out.device(), a.op);
  const SegmentGeometry& g = a.geometry;
  const bool with_arg = a.arg.data() != nullptr;
  dispatch_fold(a.src.dtype(), a.reduce, a.op, [&](auto dtype_tag, auto reduce_tag) {
    using T = CppType<decltype(dtype_tag)::value>;
    constexpr Reduce R = decltype(reduce_tag)::value;
    dispatch_index_dtype(a.positions.dtype(), a.op, [&](auto index_tag) {
      using I = typename decltype(index_tag)::type;
      auto* out = static_cast<T*>(a.out.data());
      auto* arg = static_cast<int64_t*>(a.arg.data());
      const auto* src = static_cast<const T*>(a.src.data());
      const auto* pos = static_cast<const I*>(a.positions.data());
      if constexpr (R == Reduce::Amax || R == Reduce::Amin) {
        if (a.kind == SegmentKind::Scatter) {
          const int64_t columns = g.outer_numel * g.inner_numel;
          if (columns == 0) return;
          scatter_arg<T, I, R><<<blocks_for(columns), kThreads, 0, stream()>>>(out, arg, src, pos, g, columns);
          check_launch(a.op, "scatter_arg");
          return;
        }
      }
      const int64_t total = a.out.numel();
      if (with_arg) {
        if constexpr (R == Reduce::Amax || R == Reduce::Amin) {
          reduce_segments<T, I, R, true>
              <<<blocks_for(total), kThreads, 0, stream()>>>(out, arg, src, pos, a.kind, g, total);
        }
      } else {
        reduce_segments<T, I, R, false>
            <<<blocks_for(total), kThreads, 0, stream()>>>(out, arg, src, pos, a.kind, g, total);
      }
      check_launch(a.op, "reduce_segments");
    });
  });
}

void segment_gather(const SegmentGatherArgs& a) {
  DeviceGuard guard(a.out.device(), a.op);
  const SegmentGeometry& g = a.geometry;
  const int64_t total = g.outer_numel * g.num_out * g.inner_numel;
  if (total == 0) return;
  dispatch_element_size(a.src.element_size(), a.op, [&](auto element) {
    using E = decltype(element);
    dispatch_index_dtype(a.indptr.dtype(), a.op, [&](auto index_tag) {
      using I = typename decltype(index_tag)::type;
      gather_segments<E, I><<<blocks_for(total), kThreads, 0, stream()>>>(
          static_cast<E*>(a.out.data()), static_cast<const E*>(a.src.data()), static_cast<const I*>(a.indptr.data()), g,
          a.out_len, total);
      check_launch(a.op, "gather_segments");
    });
  });
}

}  // namespace scatterx::detail::cuda

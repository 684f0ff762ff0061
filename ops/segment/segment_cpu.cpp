// CPU segment kernels. Work is split over output rows (outer row x segment
// x a tile of inner positions), each folded by one thread in position
// order, so results do not depend on the thread count.
#include <algorithm>
#include <cstring>

#include "ops/detail/bytes.h"
#include "ops/dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/parallel.h"
#include "ops/segment/segment_args.h"

namespace scatterx::detail {

namespace {

constexpr int64_t kTile = 64;            // inner positions one work unit folds together
constexpr int64_t kUnitElements = 4096;  // about this many source reads per dynamic piece

// Offsets (tensors 0 and 1) of inner positions [k0, k0 + count).
void inner_offsets(const SegmentGeometry& g, int64_t k0, int64_t count, int64_t (&src)[kTile], int64_t (&pos)[kTile]) {
  StridedCursor<2> cursor(g.inner, k0);
  for (int64_t j = 0; j < count; ++j, cursor.next()) {
    src[j] = cursor.offset(0);
    pos[j] = cursor.offset(1);
  }
}

// Whether src's inner positions are consecutive elements, so a tile reads
// count adjacent values and the fold vectorizes (selects instead of the
// branches that made amax/amin 3-4x slower than sum on short segments).
bool inner_is_contiguous(const SegmentGeometry& g) {
  return g.inner.ndim == 0 || (g.inner.ndim == 1 && g.inner.strides[0][0] == 1);
}

template <typename Op, typename A, typename T>
void fold_adjacent(A* __restrict acc, const T* __restrict s, int64_t count) {
  for (int64_t j = 0; j < count; ++j) acc[j] = Op::combine(acc[j], static_cast<A>(s[j]));
}

int64_t grain_for(const SegmentGeometry& g, int64_t units) {
  const int64_t reads = std::max<int64_t>(1, g.outer_numel * g.len * g.inner_numel);
  return std::max<int64_t>(1, kUnitElements * units / reads);
}

// Csr and Coo: each unit is (outer row, segment, tile) and writes its own outputs.
template <typename T, typename I, Reduce R, bool kArg>
void reduce_segments(const SegmentArgs& a) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  const SegmentGeometry& g = a.geometry;
  const T* src = static_cast<const T*>(a.src.data());
  const I* pos = static_cast<const I*>(a.positions.data());
  T* out = static_cast<T*>(a.out.data());
  int64_t* arg = static_cast<int64_t*>(a.arg.data());
  const int64_t tiles = (g.inner_numel + kTile - 1) / kTile;
  const int64_t units = g.outer_numel * g.num_out * tiles;
  const bool adjacent = inner_is_contiguous(g);
  parallel_for_dynamic(units, grain_for(g, units), [&](int64_t first, int64_t last) {
    A acc[kTile];
    int64_t win[kTile];
    int64_t src_off[kTile];
    int64_t unused[kTile];
    for (int64_t u = first; u < last; ++u) {
      const int64_t row = u / tiles;
      const int64_t k0 = (u % tiles) * kTile;
      const int64_t n = row % g.num_out;
      const int64_t count = std::min(kTile, g.inner_numel - k0);
      int64_t off[2];
      g.outer.offsets(row / g.num_out, off);
      int64_t begin = 0;
      int64_t end = 0;
      segment_bounds(a.kind, pos + off[1], g, n, begin, end);
      inner_offsets(g, k0, count, src_off, unused);
      T* o = out + row * g.inner_numel + k0;
      if constexpr (kArg) {
        int64_t* w = arg + row * g.inner_numel + k0;
        if (begin == end) {
          for (int64_t j = 0; j < count; ++j) {
            o[j] = T(0);
            w[j] = g.len;
          }
          continue;
        }
        const T* s = src + off[0] + begin * g.src_stride;
        for (int64_t j = 0; j < count; ++j) {
          acc[j] = static_cast<A>(s[src_off[j]]);
          win[j] = begin;
        }
        for (int64_t e = begin + 1; e < end; ++e) {
          s = src + off[0] + e * g.src_stride;
          for (int64_t j = 0; j < count; ++j) {
            const A v = static_cast<A>(s[src_off[j]]);
            if (Op::replaces(acc[j], v)) {
              acc[j] = v;
              win[j] = e;
            }
          }
        }
        for (int64_t j = 0; j < count; ++j) {
          o[j] = static_cast<T>(acc[j]);
          w[j] = win[j];
        }
      } else {
        for (int64_t j = 0; j < count; ++j) acc[j] = Op::identity();
        for (int64_t e = begin; e < end; ++e) {
          const T* s = src + off[0] + e * g.src_stride;
          if (adjacent) {
            fold_adjacent<Op>(acc, s + k0, count);
            continue;
          }
          for (int64_t j = 0; j < count; ++j) acc[j] = Op::combine(acc[j], static_cast<A>(s[src_off[j]]));
        }
        const bool empty_is_zero = (R == Reduce::Amax || R == Reduce::Amin) && begin == end;
        for (int64_t j = 0; j < count; ++j) {
          o[j] = empty_is_zero ? T(0) : static_cast<T>(Op::finalize(acc[j], std::max<int64_t>(end - begin, 1)));
        }
      }
    }
  });
}

// Scatter (arg forms only): each unit is (outer row, tile) and walks every
// position in order, so it alone writes the outputs of its columns.
template <typename T, typename I, Reduce R>
void scatter_arg(const SegmentArgs& a) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  const SegmentGeometry& g = a.geometry;
  const T* src = static_cast<const T*>(a.src.data());
  const I* index = static_cast<const I*>(a.positions.data());
  T* out = static_cast<T*>(a.out.data());
  int64_t* arg = static_cast<int64_t*>(a.arg.data());
  const int64_t tiles = (g.inner_numel + kTile - 1) / kTile;
  const int64_t units = g.outer_numel * tiles;
  parallel_for_dynamic(units, grain_for(g, units), [&](int64_t first, int64_t last) {
    int64_t src_off[kTile];
    int64_t index_off[kTile];
    for (int64_t u = first; u < last; ++u) {
      const int64_t b = u / tiles;
      const int64_t k0 = (u % tiles) * kTile;
      const int64_t count = std::min(kTile, g.inner_numel - k0);
      int64_t off[2];
      g.outer.offsets(b, off);
      inner_offsets(g, k0, count, src_off, index_off);
      const int64_t base = b * g.num_out * g.inner_numel + k0;
      for (int64_t n = 0; n < g.num_out; ++n) {
        for (int64_t j = 0; j < count; ++j) arg[base + n * g.inner_numel + j] = g.len;  // nothing yet
      }
      for (int64_t e = 0; e < g.len; ++e) {
        const T* s = src + off[0] + e * g.src_stride;
        const I* ix = index + off[1] + e * g.pos_stride;
        for (int64_t j = 0; j < count; ++j) {
          const int64_t slot = base + static_cast<int64_t>(ix[index_off[j]]) * g.inner_numel + j;
          const A v = static_cast<A>(s[src_off[j]]);
          if (arg[slot] == g.len || Op::replaces(static_cast<A>(out[slot]), v)) {
            out[slot] = static_cast<T>(v);
            arg[slot] = e;
          }
        }
      }
      for (int64_t n = 0; n < g.num_out; ++n) {
        for (int64_t j = 0; j < count; ++j) {
          const int64_t slot = base + n * g.inner_numel + j;
          if (arg[slot] == g.len) out[slot] = T(0);
        }
      }
    }
  });
}

// gather_csr: each unit is (outer row, segment) and copies its source row to
// every position of the segment; out was zero-filled.
template <typename E, typename I>
void gather_segments(const SegmentGatherArgs& a) {
  const SegmentGeometry& g = a.geometry;
  const int64_t out_len = a.out_len;
  const E* src = static_cast<const E*>(a.src.data());
  const I* pos = static_cast<const I*>(a.indptr.data());
  E* out = static_cast<E*>(a.out.data());
  const int64_t units = g.outer_numel * g.num_out;
  const bool contiguous_rows = g.inner.ndim == 0 || (g.inner.ndim == 1 && g.inner.strides[0][0] == 1);
  parallel_for_dynamic(units, std::max<int64_t>(1, units / 256), [&](int64_t first, int64_t last) {
    int64_t src_off[kTile];
    int64_t unused[kTile];
    for (int64_t u = first; u < last; ++u) {
      const int64_t b = u / g.num_out;
      const int64_t n = u % g.num_out;
      int64_t off[2];
      g.outer.offsets(b, off);
      int64_t begin = 0;
      int64_t end = 0;
      segment_bounds(SegmentKind::Csr, pos + off[1], g, n, begin, end);
      const E* s = src + off[0] + n * g.src_stride;
      for (int64_t e = begin; e < end; ++e) {
        E* o = out + (b * out_len + e) * g.inner_numel;
        if (contiguous_rows) {
          std::memcpy(o, s, static_cast<size_t>(g.inner_numel) * sizeof(E));
          continue;
        }
        for (int64_t k0 = 0; k0 < g.inner_numel; k0 += kTile) {
          const int64_t count = std::min(kTile, g.inner_numel - k0);
          inner_offsets(g, k0, count, src_off, unused);
          for (int64_t j = 0; j < count; ++j) o[k0 + j] = s[src_off[j]];
        }
      }
    }
  });
}

}  // namespace

void segment_cpu(const SegmentArgs& a) {
  const bool with_arg = a.arg.data() != nullptr;
  dispatch_fold(a.src.dtype(), a.reduce, a.op, [&](auto dtype_tag, auto reduce_tag) {
    using T = CppType<decltype(dtype_tag)::value>;
    constexpr Reduce R = decltype(reduce_tag)::value;
    dispatch_index_dtype(a.positions.dtype(), a.op, [&](auto index_tag) {
      using I = typename decltype(index_tag)::type;
      if constexpr (R == Reduce::Amax || R == Reduce::Amin) {
        if (a.kind == SegmentKind::Scatter) {
          scatter_arg<T, I, R>(a);
        } else if (with_arg) {
          reduce_segments<T, I, R, true>(a);
        } else {
          reduce_segments<T, I, R, false>(a);
        }
      } else {
        reduce_segments<T, I, R, false>(a);
      }
    });
  });
}

void segment_gather_cpu(const SegmentGatherArgs& a) {
  dispatch_element_size(a.src.element_size(), a.op, [&](auto element) {
    using E = decltype(element);
    dispatch_index_dtype(a.indptr.dtype(), a.op,
                         [&](auto index_tag) { gather_segments<E, typename decltype(index_tag)::type>(a); });
  });
}

}  // namespace scatterx::detail

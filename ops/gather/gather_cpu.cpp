// CPU gather kernels. Gather only moves values, so the kernels are
// instantiated per element size, not per dtype.
#include <algorithm>
#include <cstring>

#include "ops/detail/bytes.h"
#include "ops/detail/index_geometry.h"
#include "ops/dispatch.h"
#include "ops/gather/gather_args.h"
#include "ops/runtime/parallel.h"
#include "ops/runtime/stream_copy.h"

namespace scatterx::detail {

namespace {

constexpr int64_t kCopyBytesPerPiece = int64_t{1} << 16;

template <typename E, typename I>
class CpuGather {
 public:
  CpuGather(const GatherArgs& args, const IndexGeometry& geometry)
      : g_(geometry),
        out_(static_cast<E*>(args.out.data())),
        in_(static_cast<const E*>(args.input.data())),
        index_(static_cast<const I*>(args.index.data())) {}

  void run() const {
    if (!g_.slice_index) {
      run_general();
    } else if (g_.row_len == 1) {
      run_elements();
    } else {
      run_rows();
    }
  }

 private:
  // index_select-like with rows: each position copies one row. The positions
  // are walked slice by slice of the outer dims (no division per row), and a
  // contiguous row of 4 to 256 bytes is copied by a fixed-size memcpy the
  // compiler turns into a few vector moves: a call to memcpy per 64-byte row
  // cost as much as the copy, and index_select of [8192, 16] float32 rows took
  // 1.9x torch's time before (bench/RESULTS.md, "call cost").
  void run_rows() const {
    const int64_t row_bytes = g_.row_len * int64_t{sizeof(E)};
    const bool contiguous = g_.row_stride[0] == 1 && g_.row_stride[1] == 1;
    const int64_t grain = std::max<int64_t>(1, kCopyBytesPerPiece / row_bytes);
    const int64_t positions = g_.outer_numel * g_.k;
    const bool streaming = contiguous && row_bytes >= 64 && positions * row_bytes >= streaming_store_threshold();
    parallel_for(positions, grain, [&](int64_t begin, int64_t end) {
      int64_t off[3] = {};
      for (int64_t u = begin; u < end;) {
        const int64_t o = u / g_.k;
        g_.outer.offsets(o, off);
        const int64_t first = u - o * g_.k;
        const int64_t last = std::min(g_.k, first + (end - u));
        E* out = out_ + off[1];
        const E* in = in_ + off[0];
        if (streaming) {
          copy_rows(out, in, first, last, [&](E* dst, const E* src) { copy_streaming(dst, src, row_bytes); });
        } else if (contiguous) {
          copy_contiguous_rows(out, in, first, last, row_bytes);
        } else {
          copy_rows(out, in, first, last, [&](E* dst, const E* src) {
            for (int64_t j = 0; j < g_.row_len; ++j) dst[j * g_.row_stride[1]] = src[j * g_.row_stride[0]];
          });
        }
        u += last - first;
      }
      if (streaming) streaming_store_fence();
    });
  }

  // Rows first..last-1 of one outer slice, copy(dst, src) each; source rows
  // are at random addresses, so the first lines of a row a few ahead are
  // fetched early (only pays when they are not in cache, and costs little when
  // they are).
  template <typename Copy>
  SCATTERX_INLINE void copy_rows(E* out, const E* in, int64_t first, int64_t last, const Copy& copy) const {
    constexpr int64_t kAhead = 4;
    const int64_t row_bytes = g_.row_len * int64_t{sizeof(E)};
    const SourceRows source = source_rows();
    const int64_t out_stride = g_.dim_stride[1];
    const int64_t prefetched = std::max(first, last - kAhead);
    for (int64_t i = first; i < prefetched; ++i) {
      prefetch_row(in + source(i + kAhead), row_bytes);
      copy(out + i * out_stride, in + source(i));
    }
    for (int64_t i = prefetched; i < last; ++i) copy(out + i * out_stride, in + source(i));
  }

  void copy_contiguous_rows(E* out, const E* in, int64_t first, int64_t last, int64_t row_bytes) const {
    if (!copy_fixed<4, 8, 16, 32, 64, 128, 256>(out, in, first, last, row_bytes)) {
      copy_rows(out, in, first, last,
                [&](E* dst, const E* src) { std::memcpy(dst, src, static_cast<size_t>(row_bytes)); });
    }
  }

  // Copies the rows with the memcpy of the listed size that row_bytes equals,
  // if one does; false if none.
  template <int64_t... kBytes>
  bool copy_fixed(E* out, const E* in, int64_t first, int64_t last, int64_t row_bytes) const {
    return ((row_bytes == kBytes &&
             (copy_rows(out, in, first, last, [](E* dst, const E* src) { std::memcpy(dst, src, kBytes); }), true)) ||
            ...);
  }

  // Position i's source row, as an offset into its slice of the input. The
  // strides are copied out of g_ once: a row's copy stores through a pointer
  // the compiler must assume may alias g_, and reloading them after every row
  // cost index_select of 64-byte rows a third of its time.
  struct SourceRows {
    const I* index;
    int64_t index_stride;
    int64_t in_stride;
    SCATTERX_INLINE int64_t operator()(int64_t i) const {
      return static_cast<int64_t>(index[i * index_stride]) * in_stride;
    }
  };
  SourceRows source_rows() const { return {index_, g_.dim_stride[2], g_.dim_stride[0]}; }

  // index_select along the innermost dim, or a 1-d gather: element by element.
  void run_elements() const {
    const SourceRows source = source_rows();
    const int64_t out_stride = g_.dim_stride[1];
    parallel_for(g_.outer_numel * g_.k, kCopyBytesPerPiece / int64_t{sizeof(E)}, [&](int64_t begin, int64_t end) {
      int64_t off[3];
      for (int64_t u = begin; u < end;) {
        const int64_t o = u / g_.k;
        g_.outer.offsets(o, off);
        const int64_t stop = std::min(end, (o + 1) * g_.k);
        E* dst = out_ + off[1];
        const E* src = in_ + off[0];
        for (int64_t i = u - o * g_.k; u < stop; ++u, ++i) dst[i * out_stride] = src[source(i)];
      }
    });
  }

  // A general index: every position reads its own index value.
  void run_general() const {
    const RowTiling tiling = tile_rows(g_, 64, g_.row_len);
    const int64_t grain = std::max<int64_t>(1, kCopyBytesPerPiece / std::max<int64_t>(1, g_.k * tiling.chunk));
    parallel_for(tiling.units, grain, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const RowTile tile = row_tile(g_, tiling, u);
        const int64_t len = tile.len;
        E* dst = out_ + tile.offset[1];
        const E* src = in_ + tile.offset[0];
        const I* idx = index_ + tile.offset[2];
        for (int64_t i = 0; i < g_.k; ++i) {
          const I* ix = idx + i * g_.dim_stride[2];
          E* d = dst + i * g_.dim_stride[1];
          for (int64_t j = 0; j < len; ++j) {
            d[j * g_.row_stride[1]] =
                src[static_cast<int64_t>(ix[j * g_.row_stride[2]]) * g_.dim_stride[0] + j * g_.row_stride[0]];
          }
        }
      }
    });
  }

  const IndexGeometry& g_;
  E* out_;
  const E* in_;
  const I* index_;
};

}  // namespace

void gather_cpu(const GatherArgs& args) {
  // input is the indexed tensor, out the positional one (see index_geometry.h)
  const IndexGeometry geometry = make_index_geometry(args.input, args.out, args.index, args.dim);
  dispatch_element_size(args.out.element_size(), args.op, [&](auto element) {
    using E = decltype(element);
    dispatch_index_dtype(args.index.dtype(), args.op, [&](auto index_tag) {
      CpuGather<E, typename std::decay_t<decltype(index_tag)>::type>(args, geometry).run();
    });
  });
}

}  // namespace scatterx::detail

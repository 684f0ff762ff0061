#include "ops/detail/checks.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "ops/cuda.h"
#include "ops/detail/cuda/index_check.h"
#include "ops/detail/strided.h"
#include "ops/dispatch.h"
#include "ops/macros.h"
#include "ops/runtime/cpu_isa.h"
#include "ops/runtime/cuda/runtime.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  SCATTERX_CHECK(dim >= -n && dim < n, ArgumentError, op, "dim ", dim, " is out of range for a tensor of ", ndim,
                 " dimensions (expected a value in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

TensorView at_least_1d(const TensorView& view) {
  if (view.dim() > 0) return view;
  return TensorView(view.data(), view.dtype(), Shape{1}, Shape{1}, view.device());
}

void check_devices(const char* op, std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  const auto& [first_name, first] = *tensors.begin();
  for (const auto& [name, tensor] : tensors) {
    SCATTERX_CHECK(tensor->device() == first->device(), ArgumentError, op, "expected ", name, " on ", first_name,
                   "'s device ", first->device().str(), ", got ", tensor->device().str());
  }
  check_backend(op, first_name, first->device());
}

void check_backend(const char* op, const char* name, Device device) {
  SCATTERX_CHECK(device.is_cpu() || scatterx::cuda::is_built(), ArgumentError, op,
                 "expected cpu tensors (this build of scatterx has no CUDA backend), got ", name, " on ", device.str());
}

void check_index_dtype(const char* op, const char* name, const TensorView& index) {
  SCATTERX_CHECK(is_index_dtype(index.dtype()), DTypeError, op, "expected ", name, " of dtype int32 or int64, got ",
                 dtype_name(index.dtype()));
}

void check_same_dtype(const char* op, const char* name, const TensorView& tensor, const char* ref_name,
                      const TensorView& ref) {
  SCATTERX_CHECK(tensor.dtype() == ref.dtype(), DTypeError, op, "expected ", name, " to have the dtype of ", ref_name,
                 " (", dtype_name(ref.dtype()), "), got ", dtype_name(tensor.dtype()));
}

void check_reduce_supported(const char* op, Reduce reduce, DType dtype) {
  SCATTERX_CHECK(!is_bitwise_fold(reduce), ArgumentError, op,
                 "reduce expected one of sum, prod, mean, amax, amin, got '", reduce_name(reduce),
                 "' (a fold of the distributed layer only)");
  SCATTERX_CHECK(reduce_supported(reduce, dtype), DTypeError, op, "reduce '", reduce_name(reduce),
                 "' is not supported for ", dtype_name(dtype), " tensors",
                 is_complex(dtype) ? " (complex numbers have no order; use sum, prod or mean)"
                                   : " (the mean of booleans is undefined)");
}

void check_no_internal_overlap(const char* op, const char* name, const TensorView& tensor) {
  if (tensor.numel() <= 1) return;
  // Sorting dims by |stride|, each must step past everything the smaller
  // ones span; a layout that fails this shares elements or is too exotic to
  // prove otherwise, and torch refuses both too.
  int64_t order[kMaxDims];
  int64_t n = 0;
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.size(d) > 1) order[n++] = d;
  }
  auto abs_stride = [&](int64_t d) { return tensor.strides()[d] < 0 ? -tensor.strides()[d] : tensor.strides()[d]; };
  std::sort(order, order + n, [&](int64_t a, int64_t b) { return abs_stride(a) < abs_stride(b); });
  int64_t span = 1;  // elements covered by the dims sorted so far
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = order[i];
    SCATTERX_CHECK(abs_stride(d) >= span, ArgumentError, op, "expected ", name,
                   " to have no internal overlap (written in place, each element must be reachable from one ",
                   "position only), got ", tensor.str());
    span = abs_stride(d) * (tensor.size(d) - 1) + span;
  }
}

namespace {

int64_t gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

// Proves two views with intersecting byte ranges still share no byte: every
// element of a starts at a0 + g*i and every element of b at b0 + g*j, where
// g is the gcd of all byte strides; so if b0 - a0 (mod g) leaves room for an
// element of a before it and one of b after it, no two elements meet. This
// covers interleaved views such as the even and odd columns of one buffer.
bool provably_disjoint(const TensorView& a, const TensorView& b) {
  int64_t g = 0;
  for (const TensorView* v : {&a, &b}) {
    for (int64_t d = 0; d < v->dim(); ++d) {
      if (v->size(d) > 1) g = gcd(g, std::abs(v->strides()[d]) * v->element_size());
    }
  }
  if (g == 0) return false;
  const int64_t delta = static_cast<int64_t>(static_cast<const char*>(b.data()) - static_cast<const char*>(a.data()));
  const int64_t r = ((delta % g) + g) % g;
  return r >= a.element_size() && r + b.element_size() <= g;
}

}  // namespace

void check_no_overlap(const char* op, const char* written_name, const TensorView& written, const char* read_name,
                      const TensorView& read) {
  if (written.numel() == 0 || read.numel() == 0) return;
  const auto [w_lo, w_hi] = written.byte_range();
  const auto [r_lo, r_hi] = read.byte_range();
  const bool ranges_disjoint = w_hi <= r_lo || r_hi <= w_lo;
  SCATTERX_CHECK(ranges_disjoint || provably_disjoint(written, read), ArgumentError, op, "expected ", written_name,
                 " (written in place) not to overlap ", read_name, " in memory, got overlapping ", written.str(),
                 " and ", read.str(), " (clone one of them first)");
}

namespace {

// A value v of an index lies in [0, bound) exactly when the top bit of
// in_range_bits(v, in_range_limit(bound)) is set: v >= 0 sets the top bit of
// ~v, and v < bound makes v - bound (taken modulo 2^w) wrap to a number with
// the top bit set. Bounds past I's largest value are clamped to 2^(w-1),
// which every v >= 0 lies below. Only unsigned subtraction, and-not and and:
// a fold of it over a run vectorizes with the baseline ISA, where a signed
// 64-bit min / max does not (SSE2 has no 64-bit compare), and it took 0.7 ns
// an index (bench/RESULTS.md, "What one call costs").
template <typename I>
std::make_unsigned_t<I> in_range_limit(int64_t bound) {
  using U = std::make_unsigned_t<I>;
  constexpr U kTop = U{1} << (8 * sizeof(U) - 1);
  return static_cast<uint64_t>(bound) >= kTop ? kTop : static_cast<U>(bound);
}

template <typename I>
SCATTERX_INLINE std::make_unsigned_t<I> in_range_bits(I v, std::make_unsigned_t<I> limit) {
  using U = std::make_unsigned_t<I>;
  const U u = static_cast<U>(v);
  return static_cast<U>(~u & static_cast<U>(u - limit));
}

// in_range_bits of every value of the contiguous run [run, run + n), anded.
// 64 bytes of indices a step, into as many accumulators: with one, the loop
// is a chain of dependent ands, 16 bytes (SSE2) or 32 (AVX2) at a time.
template <typename I>
SCATTERX_INLINE std::make_unsigned_t<I> in_range_run(const I* run, int64_t n, std::make_unsigned_t<I> limit) {
  using U = std::make_unsigned_t<I>;
  constexpr int kLanes = 64 / sizeof(I);
  U acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = ~U{0};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] &= in_range_bits<I>(run[j + k], limit);
  }
  for (; j < n; ++j) acc[0] &= in_range_bits<I>(run[j], limit);
  U all = ~U{0};
  for (int k = 0; k < kLanes; ++k) all &= acc[k];
  return all;
}

// The same compiled for AVX2 (cpu_isa.h): twice the indices an instruction.
template <typename I>
SCATTERX_TARGET_AVX2 std::make_unsigned_t<I> in_range_run_avx2(const I* run, int64_t n, std::make_unsigned_t<I> limit) {
  return in_range_run<I>(run, n, limit);
}

template <typename I>
[[noreturn]] void raise_first_bad_index(const char* op, const TensorView& index, int64_t dim, int64_t bound) {
  const I* data = static_cast<const I*>(index.data());
  const Shape& shape = index.sizes();
  const int64_t n = index.numel();
  const TensorView* views[1] = {&index};
  const StridedLayout<1> layout = layout_of<1>(shape, views);
  StridedCursor<1> cursor(layout, 0);
  for (int64_t linear = 0; linear < n; ++linear, cursor.next()) {
    const I v = data[cursor.offset(0)];
    if (v < 0 || static_cast<int64_t>(v) >= bound) {
      Shape position = shape;
      int64_t rest = linear;
      for (int64_t d = shape.size() - 1; d >= 0; --d) {
        position[d] = rest % shape[d];
        rest /= shape[d];
      }
      raise<IndexError>(op, "index ", static_cast<int64_t>(v), " is out of bounds for dimension ", dim, " with size ",
                        bound, " (index position ", position.str(), ")");
    }
  }
  raise<IndexError>(op, "index out of bounds for dimension ", dim, " with size ", bound);
}

}  // namespace

double check_index_bounds(const char* op, const TensorView& index, int64_t dim, int64_t bound,
                          bool measure_contention) {
  if (index.numel() == 0) return -1;
  if (index.device().is_cuda()) return cuda::check_index_bounds(op, index, dim, bound, measure_contention);
  dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* data = static_cast<const I*>(index.data());
    // Dims of stride 0 repeat the same values (an expanded index): skip them.
    StridedLayout<1> distinct;
    for (int64_t d = 0; d < index.dim(); ++d) {
      if (index.strides()[d] != 0) distinct.push(index.sizes()[d], {index.strides()[d]});
    }
    const StridedLayout<1> layout = distinct.collapsed();
    // One contiguous run per row of the collapsed layout, folded by
    // in_range_bits (which vectorizes). Only if a value is out of range is
    // the slow search run.
    const int64_t inner = layout.ndim > 0 ? layout.sizes[layout.ndim - 1] : 1;
    const int64_t inner_stride = layout.ndim > 0 ? layout.strides[0][layout.ndim - 1] : 0;
    StridedLayout<1> rows = layout;
    rows.ndim = std::max(layout.ndim - 1, 0);
    const int64_t nrows = rows.numel();
    constexpr int64_t kPiece = 4096;  // rows are cut into pieces so a single long row still spreads over threads
    const int64_t pieces_per_row = (inner + kPiece - 1) / kPiece;
    const int64_t pieces = nrows * pieces_per_row;
    using U = std::make_unsigned_t<I>;
    const U limit = in_range_limit<I>(bound);
    U all = ~U{0};
    const int nthreads = threads_for(nrows * inner, 1 << 16);
    const bool avx2 = use_avx2();
    auto scan = [&](int64_t p, U& acc) {
      int64_t off[1];
      rows.offsets(p / pieces_per_row, off);
      const int64_t begin = (p % pieces_per_row) * kPiece;
      const int64_t end = std::min(inner, begin + kPiece);
      const I* row = data + off[0];
      U piece = ~U{0};
      if (inner_stride == 1) {
        piece = avx2 ? in_range_run_avx2<I>(row + begin, end - begin, limit)
                     : in_range_run<I>(row + begin, end - begin, limit);
      } else {
        for (int64_t j = begin; j < end; ++j) piece &= in_range_bits<I>(row[j * inner_stride], limit);
      }
      acc &= piece;
    };
    if (nthreads <= 1) {  // inline: see for_each_piece
      for (int64_t p = 0; p < pieces; ++p) scan(p, all);
    } else {
#pragma omp parallel for num_threads(nthreads) schedule(static) reduction(& : all)
      for (int64_t p = 0; p < pieces; ++p) scan(p, all);
    }
    if (!(all >> (8 * sizeof(U) - 1))) raise_first_bad_index<I>(op, index, dim, bound);
  });
  return -1;
}

void check_named_index_bounds(const char* op, const char* name, const TensorView& index, int64_t dim, int64_t bound) {
  try {
    check_index_bounds(op, index, dim, bound);
  } catch (const IndexError& e) {
    // "<op>: index ... (index position [p])" with the index's name in place of "index".
    std::string message = e.what();
    const std::string prefix = std::string(op) + ": index";
    if (message.rfind(prefix, 0) != 0) throw;
    message = message.substr(prefix.size());
    const std::string position = "(index position";
    const size_t at = message.find(position);
    if (at != std::string::npos) message.replace(at, position.size(), std::string("(") + name + " position");
    raise<IndexError>(op, name, message);
  }
}

}  // namespace scatterx::detail

// libFuzzer target over the op front ends (scripts/fuzz.sh builds and runs it).
//
// Each input decodes into one call: an op (scatter_, scatter, scatter_reduce_,
// scatter_reduce, gather, index_select, index_add_, index_add, index_reduce_,
// index_reduce, segment_csr, segment_coo, scatter_ / scatter with a value,
// scatter_arg_reduce, gather_coo, gather_csr), a value dtype, an index dtype, up
// to 4 dims of size <= 8, a dim, a reduce, include_self, index values in and
// slightly out of range, and for every tensor a layout: contiguous,
// transposed, step 2, reversed (negative strides), broadcast (stride 0) or
// overlapping (all strides 1). Every buffer is allocated at exactly the bytes
// its view spans, so AddressSanitizer catches a read or write past it.
//
// What is checked, from the contract in the ops' headers:
//  - the call raises scatterx::ArgumentError, DTypeError or IndexError exactly
//    when the arguments break the documented rules (a model below decides,
//    from the concrete shapes, strides and index values); any other exception,
//    crash or sanitizer report is a finding;
//  - on success the result equals the serial reference of tests/reference.cpp
//    bit for bit (NaN equals NaN), as the GoogleTest suite checks the CPU
//    backend;
//  - inputs are never written; an in-place op writes only the elements of its
//    self view (gaps between strided elements keep their bytes), and on an
//    error self is unchanged.
// A finding prints what was called and aborts, so libFuzzer saves the input.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scatterx.h"
#include "tests/reference.h"
#include "tests/test_util.h"

namespace {

using scatterx::DType;
using scatterx::Reduce;
using scatterx::Scalar;
using scatterx::Shape;
using scatterx::Tensor;
using scatterx::TensorView;

// ------------------------------------------------------------------ input bytes

// Reads the fuzzer's bytes front to back; past the end every read is 0, so a
// short input still decodes (to small, valid arguments).
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Uniform-ish in [0, n).
  int64_t pick(int64_t n) { return n <= 1 ? 0 : byte() % n; }
  bool flag() { return (byte() & 1) != 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "\n==== scatterx ops_fuzzer finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// ------------------------------------------------------------------ buffers and layouts

enum Layout : int {
  kContiguous,
  kTransposed,  // storage dims reversed
  kStep2,       // one dim sliced with step 2
  kReversed,    // one dim flipped (negative stride; data points at its end)
  kBroadcast,   // one dim of size > 1 with stride 0
  kOverlap,     // every stride 1: a sliding window, elements shared
  kNumLayouts,
  kInSelf = kNumLayouts,  // src / source: contiguous over self's buffer (aliasing)
};
const char* const kLayoutNames[] = {"contiguous", "transposed", "step2",           "reversed",
                                    "broadcast",  "overlap",    "in self's buffer"};

// A view over an exact-size heap buffer, with a snapshot of its bytes.
struct Buffer {
  std::unique_ptr<unsigned char[]> storage;
  size_t bytes = 0;
  TensorView view;
  int layout = kContiguous;
  std::vector<unsigned char> snapshot;

  void take_snapshot() { snapshot.assign(storage.get(), storage.get() + bytes); }
  bool unchanged() const { return bytes == 0 || std::memcmp(storage.get(), snapshot.data(), bytes) == 0; }
  std::string str() const { return view.str() + " (" + kLayoutNames[layout] + ")"; }
};

template <typename T>
T value_from(uint8_t b) {
  static const double kFloats[16] = {0.0,
                                     -0.0,
                                     1.0,
                                     -1.0,
                                     2.0,
                                     -2.0,
                                     0.5,
                                     3.0,
                                     -3.0,
                                     7.0,
                                     1e4,
                                     -1e-3,
                                     65504.0,
                                     std::numeric_limits<double>::quiet_NaN(),
                                     std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity()};
  static const int64_t kInts[16] = {0,
                                    1,
                                    -1,
                                    2,
                                    -2,
                                    3,
                                    5,
                                    -7,
                                    100,
                                    -100,
                                    127,
                                    -128,
                                    255,
                                    32767,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
  if constexpr (std::is_same_v<T, bool>) {
    return (b & 1) != 0;
  } else if constexpr (sxt::is_complex_type_v<T>) {
    using Part = decltype(T{}.re);
    return T(static_cast<Part>(kFloats[b & 15]), static_cast<Part>(kFloats[(b >> 4) & 15]));
  } else if constexpr (sxt::is_float_type_v<T>) {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(kFloats[b & 15]);
    } else {
      return T(static_cast<float>(kFloats[b & 15]));
    }
  } else {
    const int64_t v = kInts[b & 15];
    // Values beyond T's range wrap as two's complement (no UB in the fill).
    return static_cast<T>(static_cast<uint64_t>(v));
  }
}

// Strides for `shape` in the given layout, and the element offset of the
// view's first element inside a buffer of `span` elements.
struct Geometry {
  Shape strides;
  int64_t offset = 0;
  int64_t span = 0;
};

Geometry geometry(const Shape& shape, int layout, int64_t which) {
  const int64_t n = shape.size();
  Geometry g;
  g.strides = shape;
  // The dim the layout acts on: the first of size > 1 from `which` on.
  int64_t target = -1;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t d = (which + k) % n;
    if (shape[d] > 1) {
      target = d;
      break;
    }
  }
  int64_t acc = 1;
  for (int64_t k = n - 1; k >= 0; --k) {
    const int64_t d = layout == kTransposed ? n - 1 - k : k;
    const int64_t step = layout == kStep2 && d == target ? 2 : 1;
    g.strides[d] = acc * step;
    acc *= std::max<int64_t>(shape[d], 1) * step;
  }
  if (layout == kBroadcast && target >= 0) g.strides[target] = 0;
  if (layout == kOverlap) {
    for (int64_t d = 0; d < n; ++d) g.strides[d] = 1;
  }
  if (layout == kReversed && target >= 0) g.strides[target] = -g.strides[target];
  if (scatterx::shape_numel(shape) == 0) return g;  // span 0: an empty buffer
  int64_t lo = 0;
  int64_t hi = 0;
  for (int64_t d = 0; d < n; ++d) {
    const int64_t reach = g.strides[d] * (shape[d] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  g.offset = -lo;
  g.span = hi - lo + 1;
  return g;
}

// A view of `shape` over an exact-size buffer whose every element (gaps
// included) holds value(i) for its storage position i.
template <typename Fill>
Buffer make_buffer(const Shape& shape, DType dtype, int layout, int64_t which, Fill&& fill) {
  Buffer b;
  b.layout = layout;
  const Geometry g = geometry(shape, layout, which);
  const int64_t esize = scatterx::element_size(dtype);
  b.bytes = static_cast<size_t>(g.span * esize);
  b.storage.reset(new unsigned char[b.bytes]);  // new[0] too: ASan flags any access
  for (int64_t i = 0; i < g.span; ++i) fill(b.storage.get() + i * esize, i);
  b.view = TensorView(b.storage.get() + g.offset * esize, dtype, shape, g.strides);
  b.take_snapshot();
  return b;
}

Buffer value_buffer(Bytes& in, const Shape& shape, DType dtype, int layout) {
  const int64_t which = in.pick(4);
  const uint8_t seed = in.byte();
  const uint8_t mult = in.byte() | 1;
  return make_buffer(shape, dtype, layout, which, [&](unsigned char* p, int64_t i) {
    const uint8_t b = static_cast<uint8_t>(seed + mult * i + (i >> 3) * 37);
    sxt::visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T v = value_from<T>(b);
      std::memcpy(p, &v, sizeof(T));
    });
  });
}

// Index values: index_value(i) per storage position.
template <typename F>
Buffer index_buffer(Bytes& in, const Shape& shape, DType index_dtype, int layout, F&& index_value) {
  const int64_t which = in.pick(4);
  return make_buffer(shape, index_dtype, layout, which, [&](unsigned char* p, int64_t i) {
    const int64_t v = index_value(i);
    if (index_dtype == DType::Int32) {
      const int32_t v32 = static_cast<int32_t>(v);
      std::memcpy(p, &v32, 4);
    } else if (index_dtype == DType::Int64) {
      std::memcpy(p, &v, 8);
    } else {  // a wrong index dtype: any bytes of the right size
      std::memset(p, 0, static_cast<size_t>(scatterx::element_size(index_dtype)));
    }
  });
}

// Index values mostly in [0, bound), now and then -1 or bound.
Buffer random_index(Bytes& in, const Shape& shape, DType index_dtype, int layout, int64_t bound) {
  const uint8_t seed = in.byte();
  const bool wild = in.pick(8) == 0;
  const uint8_t wild_at = in.byte();
  return index_buffer(in, shape, index_dtype, layout, [&](int64_t i) -> int64_t {
    if (wild && i == wild_at % 16) return (seed & 1) ? bound : -1;
    return bound <= 0 ? 0 : static_cast<int64_t>(static_cast<uint8_t>(seed + 7 * i + (i * i) % 5)) % bound;
  });
}

// Sorted rows (non-decreasing along the last dim) with values in [0, top],
// now and then one step down or one past top.
Buffer sorted_index(Bytes& in, const Shape& shape, DType index_dtype, int layout, int64_t top) {
  const uint8_t seed = in.byte();
  const int fault = in.pick(10);  // 0: a step down, 1: past top
  const int64_t last = std::max<int64_t>(shape.size() > 0 ? shape[shape.size() - 1] : 1, 1);
  // Values are written in storage order; for layouts that keep the last dim
  // innermost and ascending (contiguous, step 2, broadcast) rows stay sorted;
  // others may not, which the model decides from the view itself.
  return index_buffer(in, shape, index_dtype, layout, [&](int64_t i) -> int64_t {
    const int64_t pos = i % last;
    int64_t v = top <= 0 ? 0 : (pos * (top + 1)) / last + ((seed >> (pos % 8)) & 1);
    v = std::min(v, std::max<int64_t>(top, 0));
    if (fault == 0 && pos == 1) v = (seed & 2) ? 0 : -1;
    if (fault == 1 && pos == last - 1) v = top + 1;
    return v;
  });
}

// ------------------------------------------------------------------ the model's facts

template <typename F>
void for_each_offset(const TensorView& v, F&& f) {
  sxt::for_each_coord(v.sizes(), [&](const int64_t* c) { f(sxt::element_offset(v, c)); });
}

// Two positions of the view reach the same element.
bool has_internal_overlap(const TensorView& v) {
  std::set<int64_t> seen;
  bool overlap = false;
  for_each_offset(v, [&](int64_t off) { overlap = overlap || !seen.insert(off).second; });
  return overlap;
}

int64_t index_at(const TensorView& index, int64_t offset) {
  if (index.dtype() == DType::Int32) return static_cast<const int32_t*>(index.data())[offset];
  return static_cast<const int64_t*>(index.data())[offset];
}

// Every value of the view lies in [lo, hi).
bool all_in(const TensorView& index, int64_t lo, int64_t hi) {
  bool ok = true;
  for_each_offset(index, [&](int64_t off) {
    const int64_t v = index_at(index, off);
    ok = ok && v >= lo && v < hi;
  });
  return ok;
}

// Non-decreasing along the last dim (row-major).
bool rows_sorted(const TensorView& index) {
  if (index.numel() == 0 || index.dim() == 0) return true;
  const int64_t last = index.size(-1);
  bool ok = true;
  int64_t previous = 0;
  int64_t linear = 0;
  for_each_offset(index, [&](int64_t off) {
    const int64_t v = index_at(index, off);
    if (linear++ % last != 0 && v < previous) ok = false;
    previous = v;
  });
  return ok;
}

TensorView at_least_1d(const TensorView& v) {
  if (v.dim() > 0) return v;
  return TensorView(v.data(), v.dtype(), Shape{1}, Shape{1});
}

// ------------------------------------------------------------------ decoding

constexpr DType kDTypes[] = {DType::Float16,   DType::BFloat16,   DType::Float32, DType::Float64,
                             DType::Complex64, DType::Complex128, DType::Int8,    DType::UInt8,
                             DType::Int16,     DType::Int32,      DType::Int64,   DType::Bool};
constexpr Reduce kReduces[] = {Reduce::None, Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};

enum Op : int {
  kScatterInPlace,
  kScatter,
  kScatterReduceInPlace,
  kScatterReduce,
  kGather,
  kIndexSelect,
  kIndexAddInPlace,
  kIndexAdd,
  kIndexReduceInPlace,
  kIndexReduce,
  kSegmentCsr,
  kSegmentCoo,
  kScatterValue,  // scatter_ / scatter with a Scalar
  kScatterArg,    // scatter_arg_reduce (torch_scatter's scatter_max / scatter_min)
  kGatherCoo,
  kGatherCsr,
  kNumOps
};
const char* const kOpNames[] = {"scatter_",     "scatter",     "scatter_reduce_", "scatter_reduce",     "gather",
                                "index_select", "index_add_",  "index_add",       "index_reduce_",      "index_reduce",
                                "segment_csr",  "segment_coo", "scatter(value)",  "scatter_arg_reduce", "gather_coo",
                                "gather_csr"};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == kNumOps, "one name per op");

Shape random_shape(Bytes& in, int64_t ndim) {
  Shape s;
  for (int64_t d = 0; d < ndim; ++d) s.push_back(in.pick(ndim > 2 ? 5 : 9));
  return s;
}

int random_layout(Bytes& in) {
  const int64_t b = in.pick(16);  // contiguous half the time
  return b < 8 ? kContiguous : static_cast<int>(b - 8) % kNumLayouts;
}

// One decoded call: what it was given, what the model expects, and the
// reference result (computed before the call, from untouched inputs).
struct Case {
  Op op = kScatter;
  std::string description;
  bool valid = true;             // the model's verdict
  bool may_raise = false;        // a refusal is allowed too (aliasing the checks cannot prove harmless)
  bool src_shares_self = false;  // src / source shares an element with an in-place self
  bool src_in_self = false;      // src / source lies in self's buffer
  std::vector<Buffer*> inputs;   // never written
  Buffer* self = nullptr;        // written in place (in-place ops only)
  std::function<Tensor()> run;   // the call (in-place ops return a copy of self's view)
  std::function<Tensor()> reference;
  // scatter_arg_reduce's second result: run and reference fill these.
  std::shared_ptr<Tensor> args = std::make_shared<Tensor>();
  std::shared_ptr<Tensor> want_args = std::make_shared<Tensor>();
};

void expect(Case& c, bool rule) { c.valid = c.valid && rule; }

// The rules every write shares: an in-place self has no element reachable
// from two positions, and every index value lies in [0, bound).
// An in-place self must not share an element with src / source; one in the
// same buffer without sharing may be refused (the checks prove disjointness
// only for interleaved layouts).
void expect_writable_in_range(Case& c, bool in_place, const Buffer& self, const Buffer& index, int64_t bound) {
  if (in_place) expect(c, !has_internal_overlap(at_least_1d(self.view)) && !c.src_shares_self);
  c.may_raise = in_place && c.src_in_self;
  expect(c, all_in(index.view, 0, bound));
}

// Now and then src becomes a contiguous view over self's buffer (at its start
// or its end), when it fits and has self's dtype; the model then learns
// whether the two share an element. src's own buffer stays allocated, unused.
void alias_into_self(Bytes& in, Case& c, const Buffer& self, Buffer& src) {
  const uint8_t b = in.byte();
  const int64_t esize = self.view.element_size();
  const int64_t span = static_cast<int64_t>(self.bytes) / esize;
  const int64_t n = src.view.numel();
  if (b % 8 != 0 || src.view.dtype() != self.view.dtype() || n == 0 || n > span) return;
  const int64_t start = (b & 8) ? span - n : 0;
  src.view = TensorView(self.storage.get() + start * esize, src.view.dtype(), src.view.sizes(),
                        scatterx::contiguous_strides(src.view.sizes()));
  src.layout = kInSelf;
  c.src_in_self = true;
  std::set<int64_t> self_elements;
  const int64_t self_start = (static_cast<const unsigned char*>(self.view.data()) - self.storage.get()) / esize;
  for_each_offset(self.view, [&](int64_t off) { self_elements.insert(self_start + off); });
  for (int64_t i = start; i < start + n; ++i) c.src_shares_self = c.src_shares_self || self_elements.count(i) > 0;
}

// self, index and src (source) of a write, the first written in place or
// read only as `in_place` says, and self's values before the call.
struct WriteArgs {
  Buffer* self;
  Buffer* index;
  Buffer* src;
  Tensor self_before;
};

WriteArgs write_args(Bytes& in, Case& c, std::vector<std::unique_ptr<Buffer>>& owned, bool in_place,
                     const Shape& self_shape, DType dtype, const Shape& index_shape, DType index_dtype, int64_t bound,
                     const Shape& src_shape, DType src_dtype) {
  WriteArgs w;
  owned.push_back(std::make_unique<Buffer>(value_buffer(in, self_shape, dtype, random_layout(in))));
  w.self = owned.back().get();
  owned.push_back(std::make_unique<Buffer>(random_index(in, index_shape, index_dtype, random_layout(in), bound)));
  w.index = owned.back().get();
  owned.push_back(std::make_unique<Buffer>(value_buffer(in, src_shape, src_dtype, random_layout(in))));
  w.src = owned.back().get();
  alias_into_self(in, c, *w.self, *w.src);
  c.inputs = {w.index, w.src};
  if (in_place) {
    c.self = w.self;
  } else {
    c.inputs.push_back(w.self);
  }
  w.self_before = sxt::ref::materialize(w.self->view);
  return w;
}

// The calls of the in-place forms (their result: a copy of self afterwards)
// or of the out-of-place forms.
Tensor call_scatter(bool plain, bool in_place, const TensorView& self, int64_t dim, const TensorView& index,
                    const TensorView& src, Reduce reduce, bool include_self) {
  if (plain) {
    return in_place ? Tensor::clone(scatterx::scatter_(self, dim, index, src, reduce))
                    : scatterx::scatter(self, dim, index, src, reduce);
  }
  return in_place ? Tensor::clone(scatterx::scatter_reduce_(self, dim, index, src, reduce, include_self))
                  : scatterx::scatter_reduce(self, dim, index, src, reduce, include_self);
}

Tensor call_index_add(bool in_place, const TensorView& self, int64_t dim, const TensorView& index,
                      const TensorView& source, const Scalar& alpha) {
  return in_place ? Tensor::clone(scatterx::index_add_(self, dim, index, source, alpha))
                  : scatterx::index_add(self, dim, index, source, alpha);
}

Tensor call_index_reduce(bool in_place, const TensorView& self, int64_t dim, const TensorView& index,
                         const TensorView& source, Reduce reduce, bool include_self) {
  return in_place ? Tensor::clone(scatterx::index_reduce_(self, dim, index, source, reduce, include_self))
                  : scatterx::index_reduce(self, dim, index, source, reduce, include_self);
}

// The shape of an indptr / index over src (the segment ops): 1 to src.dim()
// dims (0, or one more than src has, with fault bit 0), leading dims src's
// or 1 (broadcast), the last last_size(len) where len is src's size in that
// dim (returned too); fault bit 1 grows one dim by 1.
template <typename LastSize>
Shape positions_shape(Bytes& in, const Shape& src_shape, uint8_t faults, int64_t& len, LastSize&& last_size) {
  const int64_t ndim = src_shape.size();
  const int64_t pos_ndim = (faults & 1) ? (ndim < 4 ? ndim + 1 : 0) : 1 + in.pick(std::max<int64_t>(ndim, 1));
  Shape pos_shape;
  for (int64_t d = 0; d + 1 < pos_ndim; ++d) pos_shape.push_back(d < ndim && in.flag() ? src_shape[d] : 1);
  const int64_t pos_dim = pos_ndim - 1;
  len = pos_dim >= 0 && pos_dim < ndim ? src_shape[pos_dim] : 0;
  if (pos_ndim > 0) pos_shape.push_back(last_size(len));
  if ((faults & 2) && pos_ndim > 0) pos_shape[in.pick(pos_ndim)] += 1;
  return pos_shape;
}

bool is_in_place(Op op) {
  return op == kScatterInPlace || op == kScatterReduceInPlace || op == kIndexAddInPlace || op == kIndexReduceInPlace;
}

// Per op: calls that returned and calls that raised, printed at exit when
// SCATTERX_FUZZ_STATS is set (to see that both sides are reached).
struct Tally {
  int64_t ran[kNumOps] = {};
  int64_t raised[kNumOps] = {};
  ~Tally() {
    if (std::getenv("SCATTERX_FUZZ_STATS") == nullptr) return;
    for (int op = 0; op < kNumOps; ++op) {
      std::fprintf(stderr, "%-16s ran %8lld  raised %8lld\n", kOpNames[op], static_cast<long long>(ran[op]),
                   static_cast<long long>(raised[op]));
    }
  }
};
Tally tally;

// Checks every documented contract of one call; aborts with a report on a breach.
void check(Case& c) {
  std::optional<Tensor> result;
  std::string error;
  try {
    result = c.run();
  } catch (const scatterx::ArgumentError& e) {
    error = std::string("ArgumentError: ") + e.what();
  } catch (const scatterx::DTypeError& e) {
    error = std::string("DTypeError: ") + e.what();
  } catch (const scatterx::IndexError& e) {
    error = std::string("IndexError: ") + e.what();
  }  // anything else escapes to libFuzzer as an uncaught exception: a finding
  for (const Buffer* b : c.inputs) {
    if (!b->unchanged()) finding(c.description + ": an input was written: " + b->str());
  }
  (result ? tally.ran : tally.raised)[c.op] += 1;
  if (!result) {
    if (c.valid && !c.may_raise) finding(c.description + ": valid arguments refused with " + error);
    if (c.self != nullptr && !c.self->unchanged()) finding(c.description + ": self changed although the call raised");
    return;
  }
  if (!c.valid) finding(c.description + ": invalid arguments accepted (no error raised)");
  if (c.self != nullptr) {
    // Gaps of self's buffer keep their bytes.
    const TensorView& v = c.self->view;
    const int64_t esize = v.element_size();
    const auto* base = static_cast<const unsigned char*>(v.data());
    std::vector<bool> in_view(c.self->bytes, false);
    for_each_offset(v, [&](int64_t off) {
      const size_t at = static_cast<size_t>(base + off * esize - c.self->storage.get());
      for (int64_t k = 0; k < esize; ++k) in_view[at + static_cast<size_t>(k)] = true;
    });
    for (size_t i = 0; i < c.self->bytes; ++i) {
      if (!in_view[i] && c.self->storage[i] != c.self->snapshot[i]) {
        finding(c.description + ": wrote outside self's view at byte " + std::to_string(i));
      }
    }
  }
  const Tensor want = c.reference();
  const ::testing::AssertionResult same = sxt::same_values(*result, want);
  if (!same) finding(c.description + ": result differs from the serial reference: " + same.message());
  if (c.op == kScatterArg) {
    const ::testing::AssertionResult same_args = sxt::same_values(*c.args, *c.want_args);
    if (!same_args) finding(c.description + ": args differ from the serial reference: " + same_args.message());
  }
}

std::string describe(Op op, DType dtype, DType index_dtype, int64_t dim, Reduce reduce, bool include_self,
                     const std::vector<const Buffer*>& buffers) {
  std::string s = std::string(kOpNames[op]) + "(" + scatterx::dtype_name(dtype) + ", index " +
                  scatterx::dtype_name(index_dtype) + ", dim " + std::to_string(dim) + ", reduce " +
                  scatterx::reduce_name(reduce) + ", include_self " + (include_self ? "true" : "false");
  for (const Buffer* b : buffers) s += ", " + b->str();
  return s + ")";
}

// A Scalar alpha that index_add accepts for dtype.
Scalar alpha_for(DType dtype, uint8_t b) {
  if (dtype == DType::Bool) return Scalar(true);
  if (scatterx::is_integral(dtype, false)) return Scalar(static_cast<int64_t>(b % 5) - 2);
  static const double kAlphas[4] = {1.0, -2.0, 0.5, 3.0};
  return Scalar(kAlphas[b % 4]);
}

void fuzz_one(Bytes& in) {
  const Op op = static_cast<Op>(in.pick(kNumOps));
  const DType dtype = kDTypes[in.pick(12)];
  const uint8_t index_kind = in.byte();
  // A wrong index dtype now and then (DTypeError).
  const DType index_dtype = index_kind % 16 == 15 ? DType::Float32 : (index_kind & 1 ? DType::Int64 : DType::Int32);
  const int64_t ndim = in.pick(5);
  const int64_t n1 = std::max<int64_t>(ndim, 1);
  const int64_t raw_dim = in.pick(2 * n1 + 1) - n1;  // [-n1, n1]: n1 is out of range
  Reduce reduce = kReduces[in.pick(6)];
  const bool include_self = in.flag();
  const uint8_t faults = in.byte();  // bit k: break rule k
  const bool dim_ok = raw_dim >= -n1 && raw_dim < n1;
  const int64_t dim = dim_ok ? (raw_dim < 0 ? raw_dim + n1 : raw_dim) : 0;
  const bool index_dtype_ok = scatterx::is_index_dtype(index_dtype);
  const DType other_dtype = (faults & 0x80) && (faults & 0x40) ? kDTypes[(static_cast<int>(dtype) + 1) % 12] : dtype;

  Case c;
  c.op = op;
  std::vector<std::unique_ptr<Buffer>> owned;
  auto keep = [&](Buffer b) {
    owned.push_back(std::make_unique<Buffer>(std::move(b)));
    return owned.back().get();
  };
  const bool in_place = is_in_place(op);

  switch (op) {
    case kScatterInPlace:
    case kScatter:
    case kScatterReduceInPlace:
    case kScatterReduce: {
      const bool plain = op == kScatterInPlace || op == kScatter;
      if (plain) reduce = kReduces[in.pick(4) % 3];  // none, sum, prod mostly
      if (plain && (faults & 0x20)) reduce = Reduce::Mean;
      const Shape self_shape = random_shape(in, ndim);
      const Shape s1 = ndim == 0 ? Shape{1} : self_shape;
      // index: self's rank (one more with fault bit 0), sizes <= self's outside dim.
      const int64_t index_ndim = (faults & 1) && ndim < 4 ? ndim + 1 : ndim;
      Shape index_shape;
      for (int64_t d = 0; d < index_ndim; ++d) {
        const int64_t cap = d < s1.size() && d != dim ? s1[d] : 4;
        index_shape.push_back(in.pick(cap + 1));
      }
      if ((faults & 2) && index_ndim > 0) index_shape[in.pick(index_ndim)] += 1;  // may pass self's size
      Shape src_shape = index_shape;
      for (int64_t d = 0; d < src_shape.size(); ++d) src_shape[d] += in.pick(2);
      if ((faults & 4) && src_shape.size() > 0) {
        const int64_t d = in.pick(src_shape.size());
        if (src_shape[d] > 0) src_shape[d] -= 1;
      }
      const WriteArgs w = write_args(in, c, owned, in_place, self_shape, dtype, index_shape, index_dtype, s1[dim],
                                     src_shape, other_dtype);
      Buffer* self = w.self;
      Buffer* index = w.index;
      Buffer* src = w.src;
      // The model: the rules of ops/scatter/scatter.h.
      expect(c, plain ? (reduce == Reduce::None || reduce == Reduce::Sum || reduce == Reduce::Prod)
                      : reduce != Reduce::None);
      expect(c, index_dtype_ok && other_dtype == dtype && scatterx::reduce_supported(reduce, dtype) && dim_ok);
      const TensorView iv = at_least_1d(index->view);
      const TensorView sv = at_least_1d(src->view);
      if (iv.numel() > 0 && c.valid) {  // an empty index skips the rest
        expect(c, iv.dim() == s1.size() && sv.dim() == iv.dim());
        for (int64_t d = 0; c.valid && d < iv.dim(); ++d) {
          expect(c, (d == dim || iv.size(d) <= s1[d]) && iv.size(d) <= sv.size(d));
        }
        expect_writable_in_range(c, in_place, *self, *index, s1[dim]);
      }
      const TensorView index_v = index->view;
      const TensorView src_v = src->view;
      c.run = [=, self_v = self->view] {
        return call_scatter(plain, in_place, self_v, raw_dim, index_v, src_v, reduce, include_self);
      };
      c.reference = [=]() -> Tensor {
        if (index_v.numel() == 0) return w.self_before;
        if (plain) return sxt::ref::scatter(w.self_before, raw_dim, index_v, src_v, reduce);
        return sxt::ref::scatter_reduce(w.self_before, raw_dim, index_v, src_v, reduce, include_self);
      };
      break;
    }
    case kGather:
    case kIndexSelect: {
      const Shape input_shape = random_shape(in, ndim);
      const Shape s1 = ndim == 0 ? Shape{1} : input_shape;
      Shape index_shape;
      if (op == kGather) {
        const int64_t index_ndim = (faults & 1) && ndim < 4 ? ndim + 1 : ndim;
        for (int64_t d = 0; d < index_ndim; ++d) {
          const int64_t cap = d < s1.size() && d != dim ? s1[d] : 4;
          index_shape.push_back(in.pick(cap + 1));
        }
        if ((faults & 2) && index_ndim > 0) index_shape[in.pick(index_ndim)] += 1;
      } else {
        const int64_t index_ndim = (faults & 1) ? 2 : in.pick(2);
        for (int64_t d = 0; d < index_ndim; ++d) index_shape.push_back(in.pick(6));
      }
      Buffer* input = keep(value_buffer(in, input_shape, dtype, random_layout(in)));
      Buffer* index = keep(random_index(in, index_shape, index_dtype, random_layout(in), s1[dim]));
      c.inputs = {input, index};
      expect(c, index_dtype_ok && dim_ok);
      const TensorView iv = at_least_1d(index->view);
      if (op == kGather) {
        expect(c, iv.dim() == s1.size());
        for (int64_t d = 0; c.valid && d < iv.dim(); ++d) expect(c, d == dim || iv.size(d) <= s1[d]);
      } else {
        expect(c, index->view.dim() <= 1 && (ndim > 0 || index->view.numel() == 1));
      }
      if (c.valid) expect(c, all_in(index->view, 0, s1[dim]));
      const TensorView input_v = input->view;
      const TensorView index_v = index->view;
      c.run = [=]() -> Tensor {
        return op == kGather ? scatterx::gather(input_v, raw_dim, index_v)
                             : scatterx::index_select(input_v, raw_dim, index_v);
      };
      c.reference = [=]() -> Tensor {
        return op == kGather ? sxt::ref::gather(input_v, raw_dim, index_v)
                             : sxt::ref::index_select(input_v, raw_dim, index_v);
      };
      break;
    }
    case kIndexAddInPlace:
    case kIndexAdd:
    case kIndexReduceInPlace:
    case kIndexReduce: {
      const bool add = op == kIndexAddInPlace || op == kIndexAdd;
      if (add) reduce = Reduce::Sum;
      if (!add && !(faults & 0x20) && (reduce == Reduce::None || reduce == Reduce::Sum)) reduce = Reduce::Amax;
      const Scalar alpha = alpha_for(dtype, in.byte());
      const Shape self_shape = random_shape(in, ndim);
      const Shape s1 = ndim == 0 ? Shape{1} : self_shape;
      const int64_t length = in.pick(6);
      const Shape index_shape = (faults & 1) ? Shape{length, 1} : (in.flag() || length != 1 ? Shape{length} : Shape{});
      Shape source_shape = ndim == 0 && length == 1 && in.flag() ? Shape{} : s1;
      if (source_shape.size() > 0) source_shape[dim] = length;
      if ((faults & 2) && source_shape.size() > 0) source_shape[in.pick(source_shape.size())] += 1;
      const WriteArgs w = write_args(in, c, owned, in_place, self_shape, dtype, index_shape, index_dtype, s1[dim],
                                     source_shape, other_dtype);
      Buffer* self = w.self;
      Buffer* index = w.index;
      const TensorView source_v = w.src->view;
      // The model: the rules of ops/scatter/scatter.h for index_add_ / index_reduce_.
      expect(c, add || reduce == Reduce::Prod || reduce == Reduce::Mean || reduce == Reduce::Amax ||
                    reduce == Reduce::Amin);
      expect(c, index_dtype_ok && other_dtype == dtype && scatterx::reduce_supported(reduce, dtype) && dim_ok);
      const TensorView sv = at_least_1d(source_v);
      if (c.valid) {
        expect(c, index->view.dim() <= 1 && sv.dim() == s1.size());
        expect(c, c.valid && sv.size(dim) == index->view.numel());
        for (int64_t d = 0; c.valid && d < s1.size(); ++d) expect(c, d == dim || sv.size(d) == s1[d]);
        expect_writable_in_range(c, in_place, *self, *index, s1[dim]);
      }
      const TensorView index_v = index->view;
      c.run = [=, self_v = self->view] {
        return add ? call_index_add(in_place, self_v, raw_dim, index_v, source_v, alpha)
                   : call_index_reduce(in_place, self_v, raw_dim, index_v, source_v, reduce, include_self);
      };
      c.reference = [=]() -> Tensor {
        if (add) return sxt::ref::index_add(w.self_before, raw_dim, index_v, source_v, alpha);
        return sxt::ref::index_reduce(w.self_before, raw_dim, index_v, source_v, reduce, include_self);
      };
      break;
    }
    case kSegmentCsr:
    case kSegmentCoo: {
      if (reduce == Reduce::None && !(faults & 0x20)) reduce = Reduce::Sum;
      const Shape src_shape = random_shape(in, ndim);
      int64_t len = 0;
      const Shape pos_shape =
          positions_shape(in, src_shape, faults, len, [&](int64_t n) { return op == kSegmentCsr ? in.pick(6) : n; });
      const int64_t dim_size = op == kSegmentCoo && in.flag() ? in.pick(6) : -1;
      Buffer* src = keep(value_buffer(in, src_shape, dtype, random_layout(in)));
      Buffer* pos = keep(sorted_index(in, pos_shape, index_dtype, random_layout(in),
                                      op == kSegmentCsr ? len : (dim_size > 0 ? dim_size - 1 : 3)));
      c.inputs = {src, pos};
      // The model: the rules of ops/segment/segment.h.
      expect(c, reduce != Reduce::None && index_dtype_ok && scatterx::reduce_supported(reduce, dtype));
      const TensorView& pv = pos->view;
      expect(c, pv.dim() >= 1 && pv.dim() <= src_shape.size());
      for (int64_t d = 0; c.valid && d + 1 < pv.dim(); ++d) expect(c, pv.size(d) == src_shape[d] || pv.size(d) == 1);
      if (c.valid && op == kSegmentCoo) expect(c, pv.size(-1) == src_shape[pv.dim() - 1]);
      if (c.valid && op == kSegmentCsr) expect(c, all_in(pv, 0, src_shape[pv.dim() - 1] + 1) && rows_sorted(pv));
      if (c.valid && op == kSegmentCoo) {
        expect(c, all_in(pv, 0, std::numeric_limits<int64_t>::max()) && rows_sorted(pv));
        if (dim_size >= 0) expect(c, all_in(pv, 0, dim_size));
      }
      const TensorView src_v = src->view;
      c.run = [=]() -> Tensor {
        return op == kSegmentCsr ? scatterx::segment_csr(src_v, pv, reduce)
                                 : scatterx::segment_coo(src_v, pv, reduce, dim_size);
      };
      c.reference = [=]() -> Tensor {
        if (op == kSegmentCsr) return sxt::ref::segment_csr(src_v, pv, reduce);
        return sxt::ref::segment_coo(src_v, pv, reduce, dim_size);
      };
      break;
    }
    case kScatterValue: {
      // scatter_(self, dim, index, value, reduce) / scatter(...): none, sum or prod.
      reduce = kReduces[in.pick(3)];
      const Shape self_shape = random_shape(in, ndim);
      const Shape s1 = ndim == 0 ? Shape{1} : self_shape;
      Shape index_shape;
      for (int64_t d = 0; d < ndim; ++d) index_shape.push_back(in.pick((d != dim ? s1[d] : 4) + 1));
      if ((faults & 2) && ndim > 0) index_shape[in.pick(ndim)] += 1;
      const bool value_in_place = in.flag();
      const uint8_t vb = in.byte();
      Scalar value = Scalar(static_cast<int64_t>(vb % 7) - 3);
      if (dtype == DType::Bool) value = Scalar((vb & 1) != 0);
      if (scatterx::is_floating_point(dtype) || scatterx::is_complex(dtype)) value = Scalar(0.5 * (vb % 9) - 2.0);
      Buffer* self = keep(value_buffer(in, self_shape, dtype, random_layout(in)));
      Buffer* index = keep(random_index(in, index_shape, index_dtype, random_layout(in), s1[dim]));
      c.inputs = {index};
      if (value_in_place) {
        c.self = self;
      } else {
        c.inputs.push_back(self);
      }
      const Tensor self_before = sxt::ref::materialize(self->view);
      expect(c, index_dtype_ok && dim_ok);
      const TensorView iv = at_least_1d(index->view);
      if (c.valid && iv.numel() > 0) {
        for (int64_t d = 0; c.valid && d < iv.dim(); ++d) expect(c, d == dim || iv.size(d) <= s1[d]);
        expect_writable_in_range(c, value_in_place, *self, *index, s1[dim]);
      }
      const TensorView self_v = self->view;
      const TensorView index_v = index->view;
      c.run = [=]() -> Tensor {
        return value_in_place ? Tensor::clone(scatterx::scatter_(self_v, raw_dim, index_v, value, reduce))
                              : scatterx::scatter(self_v, raw_dim, index_v, value, reduce);
      };
      c.reference = [=]() -> Tensor {
        if (index_v.numel() == 0) return self_before;
        return sxt::ref::scatter_value(self_before, raw_dim, index_v, value, reduce);
      };
      break;
    }
    case kScatterArg: {
      // scatter_arg_reduce(src, dim, index of src's shape, amax / amin, dim_size).
      if (!(faults & 0x20)) reduce = in.flag() ? Reduce::Amax : Reduce::Amin;
      const Shape src_shape = random_shape(in, ndim);
      Shape index_shape = src_shape;
      if ((faults & 2) && ndim > 0) index_shape[in.pick(ndim)] += 1;
      const int64_t dim_size = in.flag() ? in.pick(6) : -1;
      Buffer* src = keep(value_buffer(in, src_shape, dtype, random_layout(in)));
      Buffer* index = keep(random_index(in, index_shape, index_dtype, random_layout(in), dim_size >= 0 ? dim_size : 5));
      c.inputs = {src, index};
      expect(c, (reduce == Reduce::Amax || reduce == Reduce::Amin) && scatterx::reduce_supported(reduce, dtype));
      expect(c, index_dtype_ok && dim_ok && at_least_1d(index->view).sizes() == at_least_1d(src->view).sizes());
      if (c.valid) expect(c, all_in(index->view, 0, dim_size >= 0 ? dim_size : std::numeric_limits<int64_t>::max()));
      const TensorView src_v = src->view;
      const TensorView index_v = index->view;
      const std::shared_ptr<Tensor> args = c.args;
      const std::shared_ptr<Tensor> want_args = c.want_args;
      c.run = [=]() -> Tensor {
        scatterx::ValuesAndArgs r = scatterx::scatter_arg_reduce(src_v, raw_dim, index_v, reduce, dim_size);
        *args = std::move(r.args);
        return std::move(r.values);
      };
      c.reference = [=]() -> Tensor {
        sxt::ref::ValuesArgs r = sxt::ref::scatter_arg_reduce(src_v, raw_dim, index_v, reduce, dim_size);
        *want_args = std::move(r.second);
        return std::move(r.first);
      };
      break;
    }
    case kGatherCoo:
    case kGatherCsr: {
      // gather_coo(src, index) / gather_csr(src, indptr) along dim positions.dim() - 1.
      const Shape src_shape = random_shape(in, ndim);
      int64_t len = 0;
      const Shape pos_shape =
          positions_shape(in, src_shape, faults, len, [&](int64_t n) { return op == kGatherCsr ? n + 1 : in.pick(6); });
      Buffer* src = keep(value_buffer(in, src_shape, dtype, random_layout(in)));
      Buffer* pos = keep(op == kGatherCsr ? sorted_index(in, pos_shape, index_dtype, random_layout(in), in.pick(9))
                                          : random_index(in, pos_shape, index_dtype, random_layout(in), len));
      c.inputs = {src, pos};
      const TensorView& pv = pos->view;
      expect(c, index_dtype_ok && pv.dim() >= 1 && pv.dim() <= src_shape.size());
      for (int64_t d = 0; c.valid && d + 1 < pv.dim(); ++d) expect(c, pv.size(d) == src_shape[d] || pv.size(d) == 1);
      if (c.valid && op == kGatherCoo) expect(c, all_in(pv, 0, src_shape[pv.dim() - 1]));
      if (c.valid && op == kGatherCsr) {
        const int64_t segments = std::max<int64_t>(pv.size(-1) - 1, 0);
        const int64_t numel = scatterx::shape_numel(src_shape);
        expect(c, src_shape[pv.dim() - 1] == segments || numel == 0);
        if (c.valid && numel > 0) {
          int64_t last = 0;  // the last value in row-major order
          for_each_offset(pv, [&](int64_t off) { last = index_at(pv, off); });
          expect(c, all_in(pv, 0, last + 1) && rows_sorted(pv));
        }
      }
      const TensorView src_v = src->view;
      c.run = [=]() -> Tensor {
        return op == kGatherCoo ? scatterx::gather_coo(src_v, pv) : scatterx::gather_csr(src_v, pv);
      };
      c.reference = [=]() -> Tensor {
        return op == kGatherCoo ? sxt::ref::gather_coo(src_v, pv) : sxt::ref::gather_csr(src_v, pv);
      };
      break;
    }
    default:
      return;
  }
  std::vector<const Buffer*> all;
  for (const auto& b : owned) all.push_back(b.get());
  c.description = describe(op, dtype, index_dtype, raw_dim, reduce, include_self, all);
  if (std::getenv("SCATTERX_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", c.description.c_str());
  check(c);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  fuzz_one(in);
  return 0;
}

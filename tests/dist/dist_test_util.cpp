#include "tests/dist/dist_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace sxd {

namespace {

const Communicator* g_world = nullptr;

// f(i, pointer to element i) for every element, i counting in row-major
// order: one walk of the coordinates, not a division per dimension and
// element (the helpers below fill and check tensors of millions of elements,
// which dominated the multi-MiB tests in the sanitizer build).
template <typename F>
void for_each_element(const TensorView& view, F&& f) {
  char* const base = static_cast<char*>(view.data());
  const int64_t esize = view.element_size();
  int64_t i = 0;
  sxt::for_each_coord(view.sizes(), [&](const int64_t* c) { f(i++, base + sxt::element_offset(view, c) * esize); });
}

char* element_ptr(const TensorView& view, int64_t linear) {
  int64_t offset = 0;
  for (int64_t d = view.dim() - 1; d >= 0; --d) {
    const int64_t size = view.size(d);
    offset += (linear % size) * view.stride(d);
    linear /= size;
  }
  return static_cast<char*>(view.data()) + offset * view.element_size();
}

template <typename T>
T from_v(V v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.re != 0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v.re));
  } else if constexpr (sxt::is_complex_type_v<T>) {
    using P = decltype(T{}.re);
    return T(static_cast<P>(v.re), static_cast<P>(v.im));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v.re);
  } else {
    return static_cast<T>(static_cast<int64_t>(v.re));
  }
}

template <typename T>
V to_v(T t) {
  if constexpr (std::is_same_v<T, bool>) {
    return {t ? 1.0 : 0.0, 0};
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return {static_cast<double>(static_cast<float>(t)), 0};
  } else if constexpr (sxt::is_complex_type_v<T>) {
    return {static_cast<double>(t.re), static_cast<double>(t.im)};
  } else {
    return {static_cast<double>(t), 0};
  }
}

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

}  // namespace

// ---------------------------------------------------------------- harness

const Communicator& world() {
  if (g_world == nullptr) throw std::logic_error("world communicator not set (main did not run?)");
  return *g_world;
}

void set_world(const Communicator* comm) { g_world = comm; }

void DistTest::TearDown() {
  const std::vector<int> failed = harness_ranks_with(HasFailure());
  std::vector<int> others;
  for (int r : failed) {
    if (r != rank()) others.push_back(r);
  }
  if (!others.empty()) {
    std::ostringstream out;
    for (size_t i = 0; i < others.size(); ++i) out << (i ? ", " : "") << others[i];
    ADD_FAILURE() << "this test failed on rank(s) " << out.str() << " (their output is prefixed with [rank N])";
  }
}

// ---------------------------------------------------------------- values

Kind kind_of(DType dtype) {
  if (dtype == DType::Bool) return Kind::Bool;
  if (scatterx::is_complex(dtype)) return Kind::Complex;
  if (scatterx::is_floating_point(dtype)) return Kind::Float;
  if (dtype == DType::UInt8) return Kind::Unsigned;
  return Kind::Signed;
}

void put(const TensorView& view, int64_t linear, V value) {
  char* p = element_ptr(view, linear);
  sxt::visit_dtype(view.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T t = from_v<T>(value);
    std::memcpy(p, &t, sizeof(T));
  });
}

V get(const TensorView& view, int64_t linear) {
  const char* p = element_ptr(view, linear);
  return sxt::visit_dtype(view.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T t;
    std::memcpy(&t, p, sizeof(T));
    return to_v<T>(t);
  });
}

void fill(const TensorView& view, const std::function<V(int64_t)>& f) {
  sxt::visit_dtype(view.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_element(view, [&](int64_t i, char* p) {
      const T t = from_v<T>(f(i));
      std::memcpy(p, &t, sizeof(T));
    });
  });
}

Tensor make(const Shape& shape, DType dtype, const std::function<V(int64_t)>& f) {
  Tensor t = Tensor::empty(shape, dtype);
  fill(t, f);
  return t;
}

V plain_value(DType dtype, int rank, int64_t i) {
  switch (kind_of(dtype)) {
    case Kind::Bool:
      return {static_cast<double>((i * 7 + rank * 3) % 5 < 2), 0};
    case Kind::Unsigned:
      return {static_cast<double>((rank + 1) * 17 + i % 23), 0};  // <= 255 for ws <= 8
    case Kind::Signed:
      return {static_cast<double>((rank + 1) * 13 + i % 29 - 60), 0};  // within int8 for ws <= 8
    case Kind::Float:
      if (dtype == DType::Float16 || dtype == DType::BFloat16) {
        // small integers (exact in bfloat16's 8 significant bits), distinct per rank
        return {static_cast<double>((rank + 1) * 16 + i % 13 - 64), 0};
      }
      // halves below 2^23: exact in float32, distinct per (rank, i % 2^19)
      return {static_cast<double>((rank + 1) * (int64_t{1} << 19) + i % (int64_t{1} << 19)) - 2097152.0 + 0.5, 0};
    case Kind::Complex:
      return {static_cast<double>(rank * (int64_t{1} << 19) + i % (int64_t{1} << 19)) + 0.5,
              -static_cast<double>(i % 1013) - rank * 0.25};
  }
  return {};
}

V reduce_input(ReduceOp op, DType dtype, int rank, int64_t i) {
  const Kind kind = kind_of(dtype);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: {
      if (kind == Kind::Bool) return {static_cast<double>((i + rank) % 3 == 0), 0};
      const double base = static_cast<double>((rank + 1) * 3 + i % 7);  // 3 .. 6 + 3 * ws
      if (kind == Kind::Unsigned) return {base, 0};
      if (kind == Kind::Complex) return {base - 10, static_cast<double>(i % 5 - rank)};
      return {base - 10, 0};
    }
    case ReduceOp::Prod: {
      if (kind == Kind::Bool) return {static_cast<double>((i + rank) % 4 != 0), 0};
      if (kind == Kind::Complex) {
        // no zero parts, so every zero a product makes is an exact +0
        static const double table[6][2] = {{1, 1}, {1, -1}, {-1, 1}, {2, 1}, {1, 2}, {-1, -1}};
        const auto& z = table[(i + 2 * rank) % 6];
        return {z[0], z[1]};
      }
      const double mag = 1 + ((i + 2 * rank) % 3 == 0);
      if (kind == Kind::Unsigned) return {mag, 0};
      const double sign = (i + rank) % 5 == 0 ? -1 : 1;
      return {sign * mag, 0};
    }
    case ReduceOp::Min:
    case ReduceOp::Max: {
      if (kind == Kind::Bool) return {static_cast<double>((i + rank) % 3 == 0), 0};
      const double base = static_cast<double>((rank * 5 + i * 3) % 11);
      if (kind == Kind::Unsigned) return {base, 0};
      if (kind == Kind::Float && i % 13 == 4 && rank == world().size() - 1) {
        return {std::numeric_limits<double>::quiet_NaN(), 0};  // NaN propagates
      }
      return {base - 5, kind == Kind::Complex ? 1.0 : 0.0};
    }
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor: {
      if (kind == Kind::Bool) return {static_cast<double>((i + 2 * rank) % 3 != 0), 0};
      // every bit pattern of a byte, sign bit included, differing per rank
      const int64_t byte = (rank * 37 + i * 11 + (i >> 8)) % 256;
      return {static_cast<double>(kind == Kind::Signed ? byte - 128 : byte), 0};
    }
  }
  return {};
}

bool reduce_supported(ReduceOp op, DType dtype) {
  if (op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor) {
    return kind_of(dtype) == Kind::Signed || kind_of(dtype) == Kind::Unsigned || kind_of(dtype) == Kind::Bool;
  }
  if (scatterx::is_complex(dtype)) return op != ReduceOp::Min && op != ReduceOp::Max;
  if (dtype == DType::Bool) return op != ReduceOp::Avg;
  return true;
}

V reduce_expected(ReduceOp op, DType dtype, const std::vector<int>& ranks, int64_t i) {
  const Kind kind = kind_of(dtype);
  V acc = reduce_input(op, dtype, ranks.at(0), i);
  for (size_t k = 1; k < ranks.size(); ++k) {
    const V v = reduce_input(op, dtype, ranks[k], i);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc = {acc.re + v.re, acc.im + v.im};
        break;
      case ReduceOp::Prod:
        acc = {acc.re * v.re - acc.im * v.im, acc.re * v.im + acc.im * v.re};
        break;
      case ReduceOp::Min:
        acc.re = (std::isnan(acc.re) || std::isnan(v.re)) ? std::nan("") : std::min(acc.re, v.re);
        break;
      case ReduceOp::Max:
        acc.re = (std::isnan(acc.re) || std::isnan(v.re)) ? std::nan("") : std::max(acc.re, v.re);
        break;
      // on the sign-extended bits, which truncate to the narrow type's
      case ReduceOp::BAnd:
        acc.re = static_cast<double>(static_cast<int64_t>(acc.re) & static_cast<int64_t>(v.re));
        break;
      case ReduceOp::BOr:
        acc.re = static_cast<double>(static_cast<int64_t>(acc.re) | static_cast<int64_t>(v.re));
        break;
      case ReduceOp::BXor:
        acc.re = static_cast<double>(static_cast<int64_t>(acc.re) ^ static_cast<int64_t>(v.re));
        break;
    }
  }
  if (op != ReduceOp::Avg) return acc;
  const int64_t n = static_cast<int64_t>(ranks.size());
  switch (kind) {
    case Kind::Signed:
    case Kind::Unsigned:
      return {static_cast<double>(floor_div(static_cast<int64_t>(acc.re), n)), 0};
    case Kind::Float:
    case Kind::Complex:
      if (dtype == DType::Float64 || dtype == DType::Complex128) return {acc.re / n, acc.im / n};
      // float32 / complex64, and 16-bit floats that accumulate in float
      return {static_cast<double>(static_cast<float>(acc.re) / static_cast<float>(n)),
              static_cast<double>(static_cast<float>(acc.im) / static_cast<float>(n))};
    case Kind::Bool:
      break;
  }
  return acc;
}

const std::vector<int>& iota_ranks(int n) {
  // built once: the tests call this per element, inside their expected-value
  // lambdas, where a fresh vector each time was most of a large test's time
  constexpr int kMaxRanks = 256;
  static const std::vector<std::vector<int>> lists = [] {
    std::vector<std::vector<int>> all(kMaxRanks + 1);
    for (int k = 0; k <= kMaxRanks; ++k) {
      for (int i = 0; i < k; ++i) all[static_cast<size_t>(k)].push_back(i);
    }
    return all;
  }();
  if (n < 0 || n > kMaxRanks)
    throw std::out_of_range("iota_ranks: n=" + std::to_string(n) + " is outside [0, " + std::to_string(kMaxRanks) +
                            "]");
  return lists[static_cast<size_t>(n)];
}

const std::vector<ReduceOp>& all_reduce_ops() {
  static const std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                            ReduceOp::Avg, ReduceOp::BAnd, ReduceOp::BOr, ReduceOp::BXor};
  return ops;
}

std::string op_label(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "Sum";
    case ReduceOp::Prod:
      return "Prod";
    case ReduceOp::Min:
      return "Min";
    case ReduceOp::Max:
      return "Max";
    case ReduceOp::Avg:
      return "Avg";
    case ReduceOp::BAnd:
      return "BAnd";
    case ReduceOp::BOr:
      return "BOr";
    case ReduceOp::BXor:
      return "BXor";
  }
  return "Unknown";
}

const std::vector<DType>& test_dtypes() { return sxt::all_dtypes(); }

// ---------------------------------------------------------------- layouts

std::string layout_label(Layout layout) {
  switch (layout) {
    case Layout::Contiguous:
      return "Contiguous";
    case Layout::Transposed:
      return "Transposed";
    case Layout::Strided:
      return "Strided";
    case Layout::Flipped:
      return "Flipped";
  }
  return "Unknown";
}

Buf make_buf(const Shape& shape, DType dtype, Layout layout) {
  Buf b;
  const int64_t nd = shape.size();
  if (nd == 0) layout = Layout::Contiguous;
  if (layout == Layout::Transposed && nd < 2) layout = Layout::Strided;
  switch (layout) {
    case Layout::Contiguous:
      b.base = Tensor::empty(shape, dtype);
      b.view = b.base;
      break;
    case Layout::Transposed: {
      Shape storage = shape;
      std::swap(storage[nd - 2], storage[nd - 1]);
      b.base = Tensor::empty(storage, dtype);
      b.view = b.base.transpose(nd - 2, nd - 1);
      break;
    }
    case Layout::Strided: {
      Shape storage = shape;
      storage[0] = 2 * shape[0] + 1;
      b.base = Tensor::empty(storage, dtype);
      b.view = b.base.slice(0, 1, storage[0], 2);
      break;
    }
    case Layout::Flipped:
      b.base = Tensor::empty(shape, dtype);
      b.view = b.base.flip(0);
      break;
  }
  // sentinel: a byte pattern (bool storage must hold 0 or 1)
  auto* bytes = static_cast<unsigned char*>(b.base.data());
  const int64_t nbytes = b.base.numel() * b.base.element_size();
  for (int64_t k = 0; k < nbytes; ++k) {
    bytes[k] = dtype == DType::Bool ? 1 : static_cast<unsigned char>(0x5b + 37 * (k % 7));
  }
  b.take_snapshot();
  return b;
}

void Buf::take_snapshot() {
  const auto* bytes = static_cast<const unsigned char*>(base.data());
  snapshot.assign(bytes, bytes + base.numel() * base.element_size());
}

::testing::AssertionResult Buf::unchanged_outside_view() const {
  const int64_t esize = base.element_size();
  std::vector<unsigned char> covered(snapshot.size(), 0);
  const char* start = static_cast<const char*>(base.data());
  for_each_element(view, [&](int64_t, char* p) {
    std::memset(&covered[static_cast<size_t>(p - start)], 1, static_cast<size_t>(esize));
  });
  const auto* bytes = static_cast<const unsigned char*>(base.data());
  for (size_t k = 0; k < snapshot.size(); ++k) {
    if (!covered[k] && bytes[k] != snapshot[k]) {
      return ::testing::AssertionFailure() << "byte " << k << " outside the view " << view.str() << " was written";
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- checks

::testing::AssertionResult holds(const TensorView& actual, const std::function<V(int64_t)>& expected) {
  const Tensor want = make(actual.sizes(), actual.dtype(), expected);
  return sxt::same_values(actual, want);
}

::testing::AssertionResult mentions(const std::string& msg, std::initializer_list<std::string> pieces) {
  for (const std::string& piece : pieces) {
    // "a|b": either spelling
    bool found = false;
    size_t start = 0;
    while (!found) {
      const size_t bar = piece.find('|', start);
      const std::string alt = piece.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
      found = msg.find(alt) != std::string::npos;
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    if (!found) {
      return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << piece << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

void expect_all_reduce_works(const Communicator& c, int64_t n) {
  Tensor t =
      make({n}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, c.rank(), i); });
  scatterx::dist::all_reduce(t, ReduceOp::Sum, c);
  EXPECT_TRUE(
      holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(c.size()), i); }))
      << "all_reduce of " << n << " elements";
}

::testing::AssertionResult names_rank(const std::string& msg, int r) {
  const std::regex re("[Rr]anks?\\b[^.;:]*?\\b" + std::to_string(r) + "\\b");
  if (std::regex_search(msg, re)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message \"" << msg << "\" does not name rank " << r;
}

int64_t thread_count() {
  const auto tasks = std::filesystem::directory_iterator("/proc/self/task");
  return std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace sxd

#include "tests/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <sstream>

namespace sxt {

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> dtypes = {
#define SXT_DTYPE_ITEM(name, type, str) DType::name,
      SCATTERX_FORALL_DTYPES(SXT_DTYPE_ITEM)
#undef SXT_DTYPE_ITEM
  };
  return dtypes;
}

std::string dtype_label(DType dtype) {
  switch (dtype) {
#define SXT_DTYPE_LABEL(name, type, str) \
  case DType::name:                      \
    return #name;
    SCATTERX_FORALL_DTYPES(SXT_DTYPE_LABEL)
#undef SXT_DTYPE_LABEL
  }
  return "Unknown";
}

std::string reduce_label(Reduce reduce) {
  switch (reduce) {
#define SXT_REDUCE_LABEL(name, str) \
  case Reduce::name:                \
    return #name;
    SCATTERX_FORALL_REDUCES(SXT_REDUCE_LABEL)
    SCATTERX_FORALL_BITWISE_FOLDS(SXT_REDUCE_LABEL)
#undef SXT_REDUCE_LABEL
  }
  return "Unknown";
}

// ---------------------------------------------------------------- random

uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("SCATTERX_TEST_SEED");
    return env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 0) : uint64_t{20240611};
  }();
  return seed;
}

uint64_t case_seed(const std::string& test_name, int case_number) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, stable across platforms
  for (unsigned char ch : test_name) h = (h ^ ch) * 1099511628211ull;
  h ^= base_seed() * 0x9e3779b97f4a7c15ull;
  h ^= static_cast<uint64_t>(case_number) * 0xbf58476d1ce4e5b9ull;
  return h;
}

std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info == nullptr ? std::string("none") : std::string(info->test_suite_name()) + "." + info->name();
}

namespace {

template <typename F>
F random_float(Rng& rng, const ValueOptions& options, double max_finite) {
  if (rng.chance(options.special_rate)) {
    switch (rng.uniform(0, 7)) {
      case 0:
        return static_cast<F>(std::numeric_limits<double>::quiet_NaN());
      case 1:
        return static_cast<F>(-std::numeric_limits<double>::quiet_NaN());
      case 2:
        return static_cast<F>(options.infinities ? std::numeric_limits<double>::infinity() : 0.0);
      case 3:
        return static_cast<F>(options.infinities ? -std::numeric_limits<double>::infinity() : -0.0);
      case 4:
        return static_cast<F>(-0.0);
      case 5:
        return static_cast<F>(0.0);
      case 6:
        return static_cast<F>(options.finite_extremes ? max_finite : 0.0);
      default:
        return static_cast<F>(options.finite_extremes ? -max_finite : -0.0);
    }
  }
  if (rng.chance(0.1) && options.small_integers) return static_cast<F>(rng.uniform(-3, 3));
  if (rng.chance(0.02)) return static_cast<F>(-0.0);
  if (options.near_one) {
    const double magnitude = rng.real(1.0 / options.near_one_max, options.near_one_max);
    return static_cast<F>(rng.chance(0.5) ? -magnitude : magnitude);
  }
  return static_cast<F>(rng.real(-4.0, 4.0));
}

template <typename I>
I random_int(Rng& rng, const ValueOptions& options) {
  using L = std::numeric_limits<I>;
  if (rng.chance(options.wrap_rate)) {
    switch (rng.uniform(0, 4)) {
      case 0:
        return L::min();
      case 1:
        return static_cast<I>(L::min() + 1);
      case 2:
        return L::max();
      case 3:
        return static_cast<I>(L::max() - 1);
      default:
        return static_cast<I>(rng.bits());
    }
  }
  if constexpr (std::is_signed_v<I>) {
    return static_cast<I>(rng.uniform(-6, 6));
  } else {
    return static_cast<I>(rng.uniform(0, 12));
  }
}

}  // namespace

template <typename T>
T random_value(Rng& rng, const ValueOptions& options) {
  if constexpr (std::is_same_v<T, bool>) {
    return rng.chance(options.true_rate);
  } else if constexpr (std::is_same_v<T, Half>) {
    return Half(random_float<float>(rng, options, 65504.0));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16(random_float<float>(rng, options, 3.3895313892515355e38));
  } else if constexpr (std::is_same_v<T, float>) {
    return random_float<float>(rng, options, std::numeric_limits<float>::max());
  } else if constexpr (std::is_same_v<T, double>) {
    return random_float<double>(rng, options, std::numeric_limits<double>::max());
  } else if constexpr (is_complex_type_v<T>) {
    using P = decltype(T{}.re);
    P re = random_value<P>(rng, options);
    P im = random_value<P>(rng, options);
    if (options.near_one) {
      // Near one in modulus, not per part: parts near one make |z| near
      // sqrt(2), and a few hundred such factors overflow float.
      re = static_cast<P>(static_cast<double>(re) * 0.7071067811865476);
      im = static_cast<P>(static_cast<double>(im) * 0.7071067811865476);
    }
    return T(re, im);
  } else {
    return random_int<T>(rng, options);
  }
}

#define SXT_INSTANTIATE_RANDOM(name, type, str) template type random_value<type>(Rng&, const ValueOptions&);
SCATTERX_FORALL_DTYPES(SXT_INSTANTIATE_RANDOM)
#undef SXT_INSTANTIATE_RANDOM

void fill_random(const TensorView& view, Rng& rng, const ValueOptions& options) {
  visit_dtype(view.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_coord(view.sizes(), [&](const int64_t* c) { store<T>(view, c, random_value<T>(rng, options)); });
  });
}

void fill_index(const TensorView& view, Rng& rng, int64_t lo, int64_t hi) {
  visit_index_dtype(view.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    for_each_coord(view.sizes(), [&](const int64_t* c) { store<I>(view, c, static_cast<I>(rng.uniform(lo, hi))); });
  });
}

void set_index(const TensorView& view, int64_t at, int64_t value) {
  visit_index_dtype(view.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    std::vector<int64_t> c(static_cast<size_t>(view.dim()));
    for (int64_t d = view.dim() - 1, rest = at; d >= 0; --d) {
      c[static_cast<size_t>(d)] = rest % view.size(d);
      rest /= view.size(d);
    }
    store<I>(view, c.data(), static_cast<I>(value));
  });
}

Scalar random_scalar(DType dtype, Rng& rng) {
  if (dtype == DType::Bool) return Scalar(rng.chance(0.5));
  if (scatterx::is_integral(dtype, false)) return Scalar(rng.uniform(-5, 5));
  // Values every floating type holds exactly, plus one that it rounds.
  static const std::vector<double> reals = {-2.5, -1.0, -0.0, 0.5, 3.0, 0.1, 1e-3};
  if (scatterx::is_complex(dtype)) return Scalar(Complex<double>(rng.pick(reals), rng.pick(reals)));
  return Scalar(rng.pick(reals));
}

// ---------------------------------------------------------------- layouts

std::string layout_str(unsigned layout) {
  if (layout == kContiguous) return "contiguous";
  std::string s;
  auto add = [&](unsigned flag, const char* name) {
    if ((layout & flag) != 0) s += (s.empty() ? "" : "+") + std::string(name);
  };
  add(kPermute, "permuted");
  add(kStep2, "step2");
  add(kFlip, "flipped");
  add(kExpand, "expanded");
  add(kOffset, "offset");
  return s;
}

unsigned random_layout(Rng& rng, bool allow_expand) {
  if (rng.chance(0.25)) return kContiguous;
  unsigned layout = 0;
  if (rng.chance(0.5)) layout |= kPermute;
  if (rng.chance(0.4)) layout |= kStep2;
  if (rng.chance(0.4)) layout |= kFlip;
  if (rng.chance(0.3)) layout |= kOffset;
  if (allow_expand && rng.chance(0.35)) layout |= kExpand;
  return layout;
}

void Buf::take_snapshot() {
  const auto* p = static_cast<const unsigned char*>(base.data());
  snapshot.assign(p, p + base.numel() * base.element_size());
}

::testing::AssertionResult Buf::unchanged() const {
  const auto* p = static_cast<const unsigned char*>(base.data());
  const size_t bytes = static_cast<size_t>(base.numel() * base.element_size());
  if (bytes != snapshot.size()) return ::testing::AssertionFailure() << "snapshot size differs";
  if (bytes == 0 || std::memcmp(p, snapshot.data(), bytes) == 0) return ::testing::AssertionSuccess();
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != snapshot[i]) {
      return ::testing::AssertionFailure()
             << "storage of " << str() << " was modified (first changed byte " << i << " of " << bytes << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Buf::unchanged_outside_view() const {
  const int64_t n = base.numel();
  const int64_t esize = base.element_size();
  std::vector<char> covered(static_cast<size_t>(n), 0);
  const int64_t start = (static_cast<const char*>(view.data()) - static_cast<const char*>(base.data())) / esize;
  for_each_coord(view.sizes(), [&](const int64_t* c) {
    const int64_t e = start + element_offset(view, c);
    if (e >= 0 && e < n) covered[static_cast<size_t>(e)] = 1;
  });
  const auto* p = static_cast<const unsigned char*>(base.data());
  for (int64_t e = 0; e < n; ++e) {
    if (covered[static_cast<size_t>(e)] == 0 &&
        std::memcmp(p + e * esize, snapshot.data() + e * esize, static_cast<size_t>(esize)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << e << " of the storage of " << str() << ", outside the view, was modified";
    }
  }
  return ::testing::AssertionSuccess();
}

std::string Buf::str() const { return layout_str(layout) + " " + view.str(); }

Buf make_buf(const Shape& shape, DType dtype, unsigned layout, Rng& rng,
             const std::function<void(const TensorView&)>& fill) {
  const int64_t r = shape.size();
  Buf buf;
  buf.layout = layout;
  Shape pre = shape;  // shape before expanding
  bool any_expanded = false;
  if ((layout & kExpand) != 0) {
    for (int64_t d = 0; d < r; ++d) {
      if (shape[d] >= 2 && rng.chance(0.6)) {
        pre[d] = 1;
        any_expanded = true;
      }
    }
    if (!any_expanded) {
      for (int64_t d = 0; d < r; ++d) {
        if (shape[d] >= 2) {
          pre[d] = 1;
          any_expanded = true;
          break;
        }
      }
    }
  }
  std::vector<int64_t> perm(static_cast<size_t>(r));
  std::iota(perm.begin(), perm.end(), 0);
  if ((layout & kPermute) != 0 && r >= 2) {
    for (int64_t i = r - 1; i > 0; --i) std::swap(perm[i], perm[rng.uniform(0, i)]);
    if (std::is_sorted(perm.begin(), perm.end())) std::swap(perm[0], perm[1]);
  }
  std::vector<int64_t> step(static_cast<size_t>(r), 1);
  std::vector<int64_t> start(static_cast<size_t>(r), 0);
  if (r > 0) {
    if ((layout & kStep2) != 0) {
      for (int64_t d = 0; d < r; ++d) step[d] = rng.chance(0.6) ? 2 : 1;
      step[rng.uniform(0, r - 1)] = 2;
    }
    if ((layout & kOffset) != 0) {
      for (int64_t d = 0; d < r; ++d) start[d] = rng.chance(0.5) ? rng.uniform(1, 2) : 0;
      start[rng.uniform(0, r - 1)] = 1;
    }
  }
  Shape base_shape;
  for (int64_t k = 0; k < r; ++k) {
    const int64_t d = perm[k];
    base_shape.push_back(start[d] + pre[d] * step[d]);
  }
  buf.base = Tensor::empty(base_shape, dtype);
  fill(buf.base);
  TensorView v = buf.base;
  for (int64_t k = 0; k < r; ++k) {
    const int64_t d = perm[k];
    if (step[d] != 1 || start[d] != 0) v = v.slice(k, start[d], start[d] + pre[d] * step[d], step[d]);
  }
  if ((layout & kPermute) != 0 && r >= 2) {
    scatterx::IntArray inverse = shape;
    for (int64_t k = 0; k < r; ++k) inverse[perm[k]] = k;
    v = v.permute(inverse);
  }
  if ((layout & kFlip) != 0 && r > 0) {
    bool flipped = false;
    for (int64_t d = 0; d < r; ++d) {
      if (rng.chance(0.5)) {
        v = v.flip(d);
        flipped = true;
      }
    }
    if (!flipped) v = v.flip(rng.uniform(0, r - 1));
  }
  if (any_expanded) v = v.expand(shape);
  if (v.sizes() != shape) {
    throw std::logic_error("make_buf: built " + v.sizes().str() + " instead of " + shape.str());
  }
  buf.view = v;
  return buf;
}

Buf random_buf(const Shape& shape, DType dtype, unsigned layout, Rng& rng, const ValueOptions& options) {
  return make_buf(shape, dtype, layout, rng, [&](const TensorView& base) { fill_random(base, rng, options); });
}

Buf index_buf(const Shape& shape, DType index_dtype, unsigned layout, Rng& rng, int64_t lo, int64_t hi) {
  hi = std::max(hi, lo);  // nothing valid to index: the view is empty, gaps may hold anything
  return make_buf(shape, index_dtype, layout, rng, [&](const TensorView& base) { fill_index(base, rng, lo, hi); });
}

// ---------------------------------------------------------------- comparison

namespace {

bool half_is_nan(uint16_t b) { return (b & 0x7c00u) == 0x7c00u && (b & 0x03ffu) != 0; }
bool bfloat16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

template <typename F>
bool same_float_bits(const void* a, const void* b) {
  F x;
  F y;
  std::memcpy(&x, a, sizeof(F));
  std::memcpy(&y, b, sizeof(F));
  if (std::isnan(x) && std::isnan(y)) return true;
  return std::memcmp(a, b, sizeof(F)) == 0;
}

template <typename F>
std::string float_str(F v) {
  std::ostringstream out;
  out.precision(std::numeric_limits<F>::max_digits10);
  out << v;
  return out.str();
}

}  // namespace

bool same_bits(DType dtype, const void* a, const void* b) {
  switch (dtype) {
    case DType::Float16:
    case DType::BFloat16: {
      uint16_t x;
      uint16_t y;
      std::memcpy(&x, a, 2);
      std::memcpy(&y, b, 2);
      const bool nx = dtype == DType::Float16 ? half_is_nan(x) : bfloat16_is_nan(x);
      const bool ny = dtype == DType::Float16 ? half_is_nan(y) : bfloat16_is_nan(y);
      return (nx && ny) || x == y;
    }
    case DType::Float32:
      return same_float_bits<float>(a, b);
    case DType::Float64:
      return same_float_bits<double>(a, b);
    case DType::Complex64:
      return same_float_bits<float>(a, b) &&
             same_float_bits<float>(static_cast<const char*>(a) + 4, static_cast<const char*>(b) + 4);
    case DType::Complex128:
      return same_float_bits<double>(a, b) &&
             same_float_bits<double>(static_cast<const char*>(a) + 8, static_cast<const char*>(b) + 8);
    default:
      return std::memcmp(a, b, static_cast<size_t>(scatterx::element_size(dtype))) == 0;
  }
}

std::string value_str(DType dtype, const void* p) {
  return visit_dtype(dtype, [&](auto tag) -> std::string {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, p, sizeof(T));
    std::ostringstream out;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      out << float_str(static_cast<float>(v)) << " (0x" << std::hex << v.bits << ")";
    } else if constexpr (std::is_floating_point_v<T>) {
      out << float_str(v);
    } else if constexpr (is_complex_type_v<T>) {
      out << "(" << float_str(v.re) << ", " << float_str(v.im) << ")";
    } else if constexpr (std::is_same_v<T, bool>) {
      out << (v ? "true" : "false");
    } else {
      out << static_cast<int64_t>(v);
    }
    return out.str();
  });
}

::testing::AssertionResult same_values(const TensorView& actual, const TensorView& expected) {
  if (actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << scatterx::dtype_name(actual.dtype()) << ", expected "
                                         << scatterx::dtype_name(expected.dtype());
  }
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual.sizes().str() << ", expected " << expected.sizes().str();
  }
  const DType dtype = actual.dtype();
  const int64_t esize = scatterx::element_size(dtype);
  int64_t mismatches = 0;
  std::ostringstream report;
  for_each_coord(actual.sizes(), [&](const int64_t* c) {
    const char* a = static_cast<const char*>(actual.data()) + element_offset(actual, c) * esize;
    const char* e = static_cast<const char*>(expected.data()) + element_offset(expected, c) * esize;
    if (same_bits(dtype, a, e)) return;
    if (++mismatches <= 8) {
      report << "\n  at " << Shape(c, actual.dim()).str() << ": got " << value_str(dtype, a) << ", expected "
             << value_str(dtype, e);
    }
  });
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << actual.numel() << " values differ ("
                                       << scatterx::dtype_name(dtype) << actual.sizes().str() << ")" << report.str();
}

}  // namespace sxt

// Test helpers: element access through strides, seeded random values and
// layouts, bitwise comparison and dtype / reduce parameter lists.
//
// Nothing here uses the library's kernels: element reads and writes are plain
// pointer arithmetic over a view's sizes and strides. The library's view
// functions (slice, permute, flip, expand) build the non-contiguous layouts,
// as a user would; tensor_test.cpp checks those functions on their own.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "scatterx.h"

namespace sxt {

using scatterx::BFloat16;
using scatterx::Complex;
using scatterx::DType;
using scatterx::Half;
using scatterx::Reduce;
using scatterx::Scalar;
using scatterx::Shape;
using scatterx::Tensor;
using scatterx::TensorView;

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with T the storage type of `dtype`.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
#define SXT_VISIT_CASE(name, type, str) \
  case DType::name:                     \
    return f(Tag<type>{});
    SCATTERX_FORALL_DTYPES(SXT_VISIT_CASE)
#undef SXT_VISIT_CASE
  }
  throw std::logic_error("visit_dtype: unknown dtype");
}

// Calls f(Tag<int32_t>{}) or f(Tag<int64_t>{}).
template <typename F>
decltype(auto) visit_index_dtype(DType dtype, F&& f) {
  if (dtype == DType::Int32) return f(Tag<int32_t>{});
  if (dtype == DType::Int64) return f(Tag<int64_t>{});
  throw std::logic_error("visit_index_dtype: not an index dtype");
}

const std::vector<DType>& all_dtypes();
// "Float16", "Int64": the enum's spelling, usable in test names.
std::string dtype_label(DType dtype);
// "Sum", "None": usable in test names.
std::string reduce_label(Reduce reduce);

template <typename T>
constexpr bool is_complex_type_v = std::is_same_v<T, Complex<float>> || std::is_same_v<T, Complex<double>>;
template <typename T>
constexpr bool is_float_type_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// ---------------------------------------------------------------- element access

// Element offset (in elements, relative to view.data()) of coordinates c.
inline int64_t element_offset(const TensorView& view, const int64_t* c) {
  int64_t offset = 0;
  for (int64_t d = 0; d < view.dim(); ++d) offset += c[d] * view.strides()[d];
  return offset;
}

template <typename T>
T load(const TensorView& view, const int64_t* c) {
  T value;
  std::memcpy(&value, static_cast<const char*>(view.data()) + element_offset(view, c) * int64_t{sizeof(T)}, sizeof(T));
  return value;
}

template <typename T>
void store(const TensorView& view, const int64_t* c, T value) {
  std::memcpy(static_cast<char*>(view.data()) + element_offset(view, c) * int64_t{sizeof(T)}, &value, sizeof(T));
}

// Calls f(coords) for every position of `shape` in row-major order (once with
// no coordinates for a 0-d shape, never for an empty one).
template <typename F>
void for_each_coord(const Shape& shape, F&& f) {
  for (int64_t s : shape) {
    if (s == 0) return;
  }
  int64_t c[scatterx::kMaxDims] = {};
  const int64_t n = shape.size();
  while (true) {
    f(static_cast<const int64_t*>(c));
    int64_t d = n - 1;
    for (; d >= 0; --d) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
    if (d < 0) return;
  }
}

// ---------------------------------------------------------------- random

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  // Uniform integer in [lo, hi].
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  bool chance(double p) { return real(0.0, 1.0) < p; }
  uint64_t bits() { return gen_(); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }

 private:
  std::mt19937_64 gen_;
};

// The suite's base seed: SCATTERX_TEST_SEED from the environment, or a fixed
// default so runs reproduce.
uint64_t base_seed();
// A seed for one test case: base seed, test name and case number mixed.
uint64_t case_seed(const std::string& test_name, int case_number);
// The full name of the running test ("Suite.Name/Param").
std::string current_test_name();

struct ValueOptions {
  double special_rate = 0.01;  // NaN, +-inf, +-0 for floating types
  double wrap_rate = 0.05;     // values near the integer type's limits
  bool near_one = false;       // floats in +-[1/near_one_max, near_one_max] so long products stay finite
  double near_one_max = 2.0;
  bool finite_extremes = true;  // +-max-finite among the special values (else +-0 in their place)
  bool infinities = true;       // +-inf among the special values (else +-0 in their place)
  bool small_integers = true;   // exact values in [-3, 3] now and then: ties, +-0 sums
  double true_rate = 0.5;       // bool
};

template <typename T>
T random_value(Rng& rng, const ValueOptions& options);

// Fills every element of a (non-overlapping) view with random values.
void fill_random(const TensorView& view, Rng& rng, const ValueOptions& options = {});
// Fills an int32/int64 view with values in [lo, hi].
void fill_index(const TensorView& view, Rng& rng, int64_t lo, int64_t hi);
// Sets the element at row-major position `at` of an int32/int64 view (any
// strides) to value.
void set_index(const TensorView& view, int64_t at, int64_t value);
// A Scalar of a kind that suits dtype (bool for bool, int for integers, float
// for floats, complex for complex), with a random value.
Scalar random_scalar(DType dtype, Rng& rng);

// ---------------------------------------------------------------- layouts

enum LayoutFlags : unsigned {
  kContiguous = 0,
  kPermute = 1,  // storage dims in a random order (transposes)
  kStep2 = 2,    // some dims sliced with step 2 out of a larger buffer
  kFlip = 4,     // some dims reversed (negative strides)
  kExpand = 8,   // some dims of size > 1 expanded from size 1 (stride 0)
  kOffset = 16,  // the view starts inside the buffer, not at its start
};
std::string layout_str(unsigned layout);
// A random layout; kExpand only when allow_expand.
unsigned random_layout(Rng& rng, bool allow_expand);

// A view over storage this struct owns, with a snapshot of the storage to
// check what an op wrote.
struct Buf {
  Tensor base;
  TensorView view;
  unsigned layout = 0;
  std::vector<unsigned char> snapshot;

  void take_snapshot();
  // The whole storage is byte-identical to the snapshot.
  ::testing::AssertionResult unchanged() const;
  // Storage the view does not reach is byte-identical to the snapshot.
  ::testing::AssertionResult unchanged_outside_view() const;
  std::string str() const;
};

// A view of `shape` with the given layout over fresh storage; `fill` is
// called on the whole (contiguous) storage before the view is taken, so gaps
// hold values too and expanded dims repeat them.
Buf make_buf(const Shape& shape, DType dtype, unsigned layout, Rng& rng,
             const std::function<void(const TensorView&)>& fill);
// make_buf filled with random values / with index values in [lo, hi].
Buf random_buf(const Shape& shape, DType dtype, unsigned layout, Rng& rng, const ValueOptions& options = {});
Buf index_buf(const Shape& shape, DType index_dtype, unsigned layout, Rng& rng, int64_t lo, int64_t hi);

// A contiguous tensor from values, e.g. make_tensor<int64_t>({2, 2}, {0, 1, 1, 0}).
template <typename T>
Tensor make_tensor(const Shape& shape, const std::vector<T>& values) {
  Tensor t = Tensor::empty(shape, scatterx::dtype_of<T>());
  if (static_cast<int64_t>(values.size()) != t.numel()) throw std::logic_error("make_tensor: wrong value count");
  if (!values.empty()) {
    T* p = static_cast<T*>(t.data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  }
  return t;
}

// ---------------------------------------------------------------- comparison

// Bit pattern equality, except that any NaN equals any NaN (+0 and -0 differ).
bool same_bits(DType dtype, const void* a, const void* b);
// "1.5 (0x3e00)", "(1, -2)", "true", "-7"
std::string value_str(DType dtype, const void* p);
// Same dtype, shape and bitwise values (see same_bits).
::testing::AssertionResult same_values(const TensorView& actual, const TensorView& expected);

// ---------------------------------------------------------------- errors

// The message of the E that f throws; records a failure (and returns "") when
// f throws nothing or something else.
template <typename E, typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type, with message: " << e.what();
    return "";
  }
  ADD_FAILURE() << "threw nothing";
  return "";
}

// f throws E whose message contains every piece.
template <typename E, typename F>
void expect_error(F&& f, std::initializer_list<std::string> pieces) {
  const std::string what = error_message<E>(std::forward<F>(f));
  for (const std::string& piece : pieces) {
    EXPECT_NE(what.find(piece), std::string::npos) << "message \"" << what << "\" lacks \"" << piece << "\"";
  }
}

// Sets (or, with nullptr, unsets) a variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    value == nullptr ? unsetenv(name) : setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace sxt

#include "tests/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/test_util.h"

namespace sxt::ref {

namespace {

using scatterx::kMaxDims;

// The type a destination is folded in: float for the 16-bit floats, the
// element type itself otherwise.
template <typename T>
struct AccOf {
  using type = T;
};
template <>
struct AccOf<Half> {
  using type = float;
};
template <>
struct AccOf<BFloat16> {
  using type = float;
};
template <typename T>
using AccT = typename AccOf<T>::type;

template <typename A>
bool is_nan(A a) {
  if constexpr (std::is_floating_point_v<A>) {
    return std::isnan(a);
  } else {
    return false;
  }
}

// Integers wrap (computed in uint64, then truncated); bool sum is "or" and
// bool product is "and"; complex numbers use the textbook formulas.
template <typename A>
A add(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a || b;
  } else if constexpr (is_complex_type_v<A>) {
    return A(a.re + b.re, a.im + b.im);
  } else if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

template <typename A>
A mul(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a && b;
  } else if constexpr (is_complex_type_v<A>) {
    return A(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
  } else if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

template <typename A>
A identity(Reduce reduce) {
  switch (reduce) {
    case Reduce::None:
    case Reduce::Sum:
    case Reduce::Mean:
      return A(0);
    case Reduce::Prod:
      return A(1);
    case Reduce::Amax:
    case Reduce::Amin:
      if constexpr (is_complex_type_v<A>) {
        throw std::logic_error("reference: complex amax/amin");
      } else if constexpr (std::is_same_v<A, bool>) {
        return reduce == Reduce::Amin;
      } else if constexpr (std::is_floating_point_v<A>) {
        const A inf = std::numeric_limits<A>::infinity();
        return reduce == Reduce::Amax ? -inf : inf;
      } else {
        return reduce == Reduce::Amax ? std::numeric_limits<A>::min() : std::numeric_limits<A>::max();
      }
    case Reduce::BitAnd:
    case Reduce::BitOr:
    case Reduce::BitXor:
      break;  // not scatter reduces: tests/combine_test.cpp checks them against the operators
  }
  throw std::logic_error("reference: unknown reduce");
}

template <typename A>
A combine(Reduce reduce, A acc, A value) {
  switch (reduce) {
    case Reduce::None:
      return value;
    case Reduce::Sum:
    case Reduce::Mean:
      return add(acc, value);
    case Reduce::Prod:
      return mul(acc, value);
    case Reduce::Amax:
    case Reduce::Amin:
      if constexpr (is_complex_type_v<A>) {
        throw std::logic_error("reference: complex amax/amin");
      } else {
        // NaN propagates: an incoming NaN wins, a NaN accumulator stays; on
        // ties (including -0 vs +0) the accumulator stays.
        if (is_nan(value)) return value;
        if (is_nan(acc)) return acc;
        if (reduce == Reduce::Amax) return value > acc ? value : acc;
        return value < acc ? value : acc;
      }
    case Reduce::BitAnd:
    case Reduce::BitOr:
    case Reduce::BitXor:
      break;  // not scatter reduces (see identity above)
  }
  throw std::logic_error("reference: unknown reduce");
}

template <typename A>
A finalize(Reduce reduce, A acc, int64_t count) {
  if (reduce != Reduce::Mean) return acc;
  if constexpr (std::is_same_v<A, bool>) {
    throw std::logic_error("reference: bool mean");
  } else if constexpr (is_complex_type_v<A>) {
    using P = decltype(A{}.re);
    return A(acc.re / static_cast<P>(count), acc.im / static_cast<P>(count));
  } else if constexpr (std::is_floating_point_v<A>) {
    return acc / static_cast<A>(count);
  } else if constexpr (std::is_signed_v<A>) {
    const int64_t s = static_cast<int64_t>(acc);
    int64_t q = s / count;
    if (s % count != 0 && s < 0) --q;  // floor, count > 0
    return static_cast<A>(q);
  } else {
    return static_cast<A>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(count));
  }
}

// A Scalar converted to T as torch converts Python numbers: floating to
// integer truncates toward zero, integers wrap, anything nonzero is true.
template <typename T>
T scalar_to(const Scalar& s) {
  if constexpr (is_complex_type_v<T>) {
    using P = decltype(T{}.re);
    return T(static_cast<P>(s.real()), static_cast<P>(s.imag()));
  } else {
    if (s.imag() != 0.0) throw std::logic_error("reference: complex scalar for a real tensor");
    if constexpr (std::is_same_v<T, bool>) {
      return s.is_integral() ? s.as_int() != 0 : s.real() != 0.0;
    } else if constexpr (std::is_integral_v<T>) {
      const int64_t v = s.is_integral() ? s.as_int() : static_cast<int64_t>(s.real());
      return static_cast<T>(static_cast<uint64_t>(v));
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return T(static_cast<float>(s.real()));
    } else {
      return static_cast<T>(s.real());
    }
  }
}

TensorView as_1d(const TensorView& v) {
  if (v.dim() > 0) return v;
  return TensorView(v.data(), v.dtype(), Shape{1}, Shape{0}, v.device());
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  const int64_t n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n) throw std::logic_error("reference: dim out of range");
  return dim < 0 ? dim + n : dim;
}

int64_t checked(int64_t i, int64_t bound) {
  if (i < 0 || i >= bound) {
    throw std::logic_error("reference: index " + std::to_string(i) + " outside [0, " + std::to_string(bound) + ")");
  }
  return i;
}

// Folds values into a contiguous copy of self, destination by destination,
// in the order they are given.
template <typename T>
class Accumulator {
 public:
  using A = AccT<T>;

  Accumulator(const TensorView& self, Reduce reduce, bool include_self)
      : out_(materialize(self)),
        out1_(as_1d(out_)),
        reduce_(reduce),
        include_self_(include_self),
        acc_(new A[static_cast<size_t>(out_.numel())]),
        count_(static_cast<size_t>(out_.numel()), 0) {}

  const TensorView& out() const { return out1_; }

  // Folds value into the element at coordinates c of the output.
  void fold(const int64_t* c, A value) {
    const int64_t e = element_offset(out1_, c);
    T* p = static_cast<T*>(out_.data());
    if (count_[e] == 0) acc_[e] = include_self_ ? static_cast<A>(p[e]) : identity<A>(reduce_);
    acc_[e] = combine(reduce_, acc_[e], value);
    ++count_[e];
  }

  // Reduce::None: a plain write.
  void write(const int64_t* c, T value) { static_cast<T*>(out_.data())[element_offset(out1_, c)] = value; }

  Tensor finish() {
    T* p = static_cast<T*>(out_.data());
    for (int64_t e = 0; e < out_.numel(); ++e) {
      if (count_[e] > 0) p[e] = T(finalize(reduce_, acc_[e], count_[e] + (include_self_ ? 1 : 0)));
    }
    return out_;
  }

 private:
  Tensor out_;
  TensorView out1_;
  Reduce reduce_;
  bool include_self_;
  std::unique_ptr<A[]> acc_;
  std::vector<int64_t> count_;
};

// scatter_ / scatter_add_ / scatter_reduce_: index position p (row-major)
// sends src[p] to self at p with coordinate `dim` replaced by index[p].
template <typename T, typename I>
Tensor scatter_impl(const TensorView& self, int64_t dim, const TensorView& index, const TensorView* src, const T* value,
                    Reduce reduce, bool include_self) {
  using A = AccT<T>;
  dim = wrap_dim(dim, self.dim());
  Accumulator<T> acc(self, reduce, include_self);
  const TensorView idx = as_1d(index);
  const TensorView source = src != nullptr ? as_1d(*src) : TensorView();
  const int64_t bound = acc.out().sizes()[dim];
  for_each_coord(idx.sizes(), [&](const int64_t* c) {
    int64_t target[kMaxDims];
    std::memcpy(target, c, sizeof(int64_t) * static_cast<size_t>(idx.dim()));
    target[dim] = checked(static_cast<int64_t>(load<I>(idx, c)), bound);
    const T v = src != nullptr ? load<T>(source, c) : *value;
    if (reduce == Reduce::None) {
      acc.write(target, v);
    } else {
      acc.fold(target, static_cast<A>(v));
    }
  });
  return acc.finish();
}

// index_add_ / index_reduce_: source position c sends source[c] (times
// alpha) to self at c with coordinate `dim` replaced by index[c[dim]].
template <typename T, typename I>
Tensor index_impl(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source, Reduce reduce,
                  bool include_self, const Scalar* alpha, const TensorView* weights = nullptr) {
  using A = AccT<T>;
  dim = wrap_dim(dim, self.dim());
  Accumulator<T> acc(self, reduce, include_self);
  const TensorView idx = as_1d(index);
  const TensorView src = as_1d(source);
  const int64_t bound = acc.out().sizes()[dim];
  // alpha == 1 adds source as it is (torch multiplies only when alpha != 1;
  // for complex values (1+0j) * z is not always z: 0 * inf is NaN).
  const bool scaled = alpha != nullptr && !(alpha->real() == 1.0 && alpha->imag() == 0.0);
  const A alpha_acc = scaled ? scalar_to<A>(*alpha) : A(1);
  const TensorView w = weights != nullptr ? as_1d(*weights) : TensorView();
  for_each_coord(src.sizes(), [&](const int64_t* c) {
    int64_t target[kMaxDims];
    std::memcpy(target, c, sizeof(int64_t) * static_cast<size_t>(src.dim()));
    const int64_t i[1] = {c[dim]};
    target[dim] = checked(static_cast<int64_t>(load<I>(idx, i)), bound);
    A v = static_cast<A>(load<T>(src, c));
    if (scaled) v = mul(alpha_acc, v);
    if (weights != nullptr) v = mul(v, static_cast<A>(load<T>(w, i)));
    acc.fold(target, v);
  });
  return acc.finish();
}

template <typename F>
Tensor with_types(DType dtype, DType index_dtype, F&& f) {
  return visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return visit_index_dtype(index_dtype, [&](auto itag) {
      using I = typename decltype(itag)::type;
      return f(Tag<T>{}, Tag<I>{});
    });
  });
}

}  // namespace

Tensor materialize(const TensorView& view) {
  Tensor out = Tensor::empty(view.sizes(), view.dtype());
  const int64_t esize = view.element_size();
  char* dst = static_cast<char*>(out.data());
  int64_t e = 0;
  for_each_coord(view.sizes(), [&](const int64_t* c) {
    std::memcpy(dst + esize * e++, static_cast<const char*>(view.data()) + element_offset(view, c) * esize,
                static_cast<size_t>(esize));
  });
  return out;
}

Tensor gather(const TensorView& input, int64_t dim, const TensorView& index) {
  return with_types(input.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    const int64_t d = wrap_dim(dim, input.dim());
    Tensor out = Tensor::empty(index.sizes(), input.dtype());
    const TensorView in1 = as_1d(input);
    const TensorView idx = as_1d(index);
    const TensorView out1 = as_1d(out);
    for_each_coord(idx.sizes(), [&](const int64_t* c) {
      int64_t source[kMaxDims];
      std::memcpy(source, c, sizeof(int64_t) * static_cast<size_t>(idx.dim()));
      source[d] = checked(static_cast<int64_t>(load<I>(idx, c)), in1.sizes()[d]);
      store<T>(out1, c, load<T>(in1, source));
    });
    return out;
  });
}

Tensor index_select(const TensorView& input, int64_t dim, const TensorView& index) {
  return with_types(input.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    const int64_t d = wrap_dim(dim, input.dim());
    if (index.dim() > 1) throw std::logic_error("reference: index_select index must be 0-d or 1-d");
    Shape out_shape = input.sizes();
    if (input.dim() > 0) {
      out_shape[d] = index.numel();
    } else if (index.numel() != 1) {
      throw std::logic_error("reference: index_select of a 0-d input needs one index");
    }
    Tensor out = Tensor::empty(out_shape, input.dtype());
    const TensorView in1 = as_1d(input);
    const TensorView idx = as_1d(index);
    const TensorView out1 = as_1d(out);
    for_each_coord(out1.sizes(), [&](const int64_t* c) {
      int64_t source[kMaxDims];
      std::memcpy(source, c, sizeof(int64_t) * static_cast<size_t>(out1.dim()));
      const int64_t i[1] = {c[d]};
      source[d] = checked(static_cast<int64_t>(load<I>(idx, i)), in1.sizes()[d]);
      store<T>(out1, c, load<T>(in1, source));
    });
    return out;
  });
}

Tensor scatter(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src, Reduce reduce) {
  if (reduce != Reduce::None && reduce != Reduce::Sum && reduce != Reduce::Prod) {
    throw std::logic_error("reference: scatter takes none, sum or prod");
  }
  return with_types(self.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    return scatter_impl<T, I>(self, dim, index, &src, nullptr, reduce, true);
  });
}

Tensor scatter_value(const TensorView& self, int64_t dim, const TensorView& index, const Scalar& value, Reduce reduce) {
  if (reduce != Reduce::None && reduce != Reduce::Sum && reduce != Reduce::Prod) {
    throw std::logic_error("reference: scatter takes none, sum or prod");
  }
  return with_types(self.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    const T v = scalar_to<T>(value);
    return scatter_impl<T, I>(self, dim, index, nullptr, &v, reduce, true);
  });
}

Tensor scatter_reduce(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& src,
                      Reduce reduce, bool include_self) {
  if (reduce == Reduce::None) throw std::logic_error("reference: scatter_reduce takes no 'none'");
  return with_types(self.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    return scatter_impl<T, I>(self, dim, index, &src, nullptr, reduce, include_self);
  });
}

Tensor index_add(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                 const Scalar& alpha) {
  return with_types(self.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    return index_impl<T, I>(self, dim, index, source, Reduce::Sum, true, &alpha);
  });
}

Tensor index_add_weighted(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                          const TensorView& weights) {
  return with_types(self.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    return index_impl<T, I>(self, dim, index, source, Reduce::Sum, true, nullptr, &weights);
  });
}

Tensor index_reduce(const TensorView& self, int64_t dim, const TensorView& index, const TensorView& source,
                    Reduce reduce, bool include_self) {
  if (reduce == Reduce::None || reduce == Reduce::Sum) {
    throw std::logic_error("reference: index_reduce takes prod, mean, amax or amin");
  }
  return with_types(self.dtype(), index.dtype(), [&](auto tag, auto itag) {
    using T = typename decltype(tag)::type;
    using I = typename decltype(itag)::type;
    return index_impl<T, I>(self, dim, index, source, reduce, include_self, nullptr);
  });
}

namespace {

// The value of an int32/int64 view at coordinates c (trailing coordinates
// beyond its rank ignored; a size-1 dim broadcasts).
int64_t load_position(const TensorView& v, const int64_t* c) {
  int64_t cc[kMaxDims];
  for (int64_t d = 0; d < v.dim(); ++d) cc[d] = v.sizes()[d] == 1 ? 0 : c[d];
  return visit_index_dtype(v.dtype(), [&](auto t) {
    using I = typename decltype(t)::type;
    return static_cast<int64_t>(load<I>(v, cc));
  });
}

// The segment of indptr holding position e of the row at c (-1 if none).
int64_t csr_row(const TensorView& indptr, const int64_t* c, int64_t e) {
  const int64_t last = indptr.dim() - 1;
  int64_t cc[kMaxDims];
  std::memcpy(cc, c, sizeof(int64_t) * static_cast<size_t>(indptr.dim()));
  for (int64_t n = 0; n + 1 < indptr.sizes()[last]; ++n) {
    cc[last] = n;
    const int64_t lo = load_position(indptr, cc);
    cc[last] = n + 1;
    const int64_t hi = load_position(indptr, cc);
    if (lo <= e && e < hi) return n;
  }
  return -1;
}

// Every src element goes to out row row_of(c) (or nowhere when -1) of a
// result shaped like src with size(dim) = num_out.
template <typename T, typename RowOf>
ValuesArgs fold_rows(const TensorView& src, int64_t dim, int64_t num_out, Reduce reduce, RowOf&& row_of) {
  using A = AccT<T>;
  Shape shape = src.sizes();
  shape[dim] = num_out;
  Tensor values = Tensor::empty(shape, src.dtype());
  Tensor args = Tensor::empty(shape, DType::Int64);
  const int64_t n = values.numel();
  std::vector<A> acc(static_cast<size_t>(n),
                     identity<A>(reduce == Reduce::Amax || reduce == Reduce::Amin ? Reduce::Sum : reduce));
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  std::vector<int64_t> first(static_cast<size_t>(n), src.sizes()[dim]);
  // The output element of every src element (row-major), or -1.
  std::vector<int64_t> target;
  for_each_coord(src.sizes(), [&](const int64_t* c) {
    const int64_t row = row_of(c);
    int64_t oc[kMaxDims];
    std::memcpy(oc, c, sizeof(int64_t) * static_cast<size_t>(src.dim()));
    oc[dim] = row;
    target.push_back(row < 0 ? -1 : element_offset(values, oc));
  });
  size_t p = 0;
  for_each_coord(src.sizes(), [&](const int64_t* c) {
    const int64_t o = target[p++];
    if (o < 0) return;
    const A v = static_cast<A>(load<T>(src, c));
    acc[o] = count[o] == 0 && (reduce == Reduce::Amax || reduce == Reduce::Amin) ? v : combine<A>(reduce, acc[o], v);
    ++count[o];
  });
  // The arg: the first element equal to the result (any NaN equals a NaN result).
  p = 0;
  for_each_coord(src.sizes(), [&](const int64_t* c) {
    const int64_t o = target[p++];
    if (o < 0) return;
    if constexpr (!is_complex_type_v<A>) {
      const A v = static_cast<A>(load<T>(src, c));
      const bool equal = is_nan(acc[o]) ? is_nan(v) : v == acc[o];
      if (equal && first[o] == src.sizes()[dim]) first[o] = c[dim];
    }
  });
  T* pv = static_cast<T*>(values.data());
  int64_t* pa = static_cast<int64_t*>(args.data());
  for (int64_t o = 0; o < n; ++o) {
    const bool empty_zero = count[o] == 0 && (reduce == Reduce::Amax || reduce == Reduce::Amin);
    pv[o] = empty_zero ? T(0) : T(finalize<A>(reduce, acc[o], count[o] > 0 ? count[o] : 1));
    pa[o] = first[o];
  }
  return {values, args};
}

int64_t max_plus_one(const TensorView& index) {
  int64_t m = -1;
  for_each_coord(index.sizes(), [&](const int64_t* c) { m = std::max(m, load_position(index, c)); });
  return m + 1;
}

template <typename F>
ValuesArgs with_dtype(DType dtype, F&& f) {
  return visit_dtype(dtype, [&](auto tag) { return f(tag); });
}

}  // namespace

ValuesArgs segment_csr_arg(const TensorView& src, const TensorView& indptr, Reduce reduce) {
  const int64_t dim = indptr.dim() - 1;
  const int64_t num_out = std::max<int64_t>(indptr.sizes()[dim] - 1, 0);
  return with_dtype(src.dtype(), [&](auto tag) {
    return fold_rows<typename decltype(tag)::type>(src, dim, num_out, reduce,
                                                   [&](const int64_t* c) { return csr_row(indptr, c, c[dim]); });
  });
}

Tensor segment_csr(const TensorView& src, const TensorView& indptr, Reduce reduce) {
  return sxt::ref::segment_csr_arg(src, indptr, reduce).first;
}

ValuesArgs segment_coo_arg(const TensorView& src, const TensorView& index, Reduce reduce, int64_t dim_size) {
  const int64_t dim = index.dim() - 1;
  const int64_t num_out = dim_size >= 0 ? dim_size : max_plus_one(index);
  return with_dtype(src.dtype(), [&](auto tag) {
    return fold_rows<typename decltype(tag)::type>(src, dim, num_out, reduce,
                                                   [&](const int64_t* c) { return load_position(index, c); });
  });
}

Tensor segment_coo(const TensorView& src, const TensorView& index, Reduce reduce, int64_t dim_size) {
  return sxt::ref::segment_coo_arg(src, index, reduce, dim_size).first;
}

ValuesArgs scatter_arg_reduce(const TensorView& src, int64_t dim, const TensorView& index, Reduce reduce,
                              int64_t dim_size) {
  const TensorView s = as_1d(src);
  const TensorView i = as_1d(index);
  dim = wrap_dim(dim, src.dim());
  const int64_t num_out = dim_size >= 0 ? dim_size : max_plus_one(i);
  return with_dtype(src.dtype(), [&](auto tag) {
    return fold_rows<typename decltype(tag)::type>(s, dim, num_out, reduce,
                                                   [&](const int64_t* c) { return load_position(i, c); });
  });
}

Tensor gather_csr(const TensorView& src, const TensorView& indptr) {
  const int64_t dim = indptr.dim() - 1;
  int64_t out_len = 0;
  if (src.numel() > 0) {
    int64_t c[kMaxDims];
    for (int64_t d = 0; d < indptr.dim(); ++d) c[d] = indptr.sizes()[d] - 1;
    out_len = load_position(indptr, c);
  }
  Shape shape = src.sizes();
  shape[dim] = out_len;
  Tensor out = Tensor::zeros(shape, src.dtype());
  const int64_t es = src.element_size();
  for_each_coord(shape, [&](const int64_t* c) {
    const int64_t n = csr_row(indptr, c, c[dim]);
    if (n < 0) return;
    int64_t sc[kMaxDims];
    std::memcpy(sc, c, sizeof(int64_t) * static_cast<size_t>(shape.size()));
    sc[dim] = n;
    std::memcpy(static_cast<char*>(out.data()) + element_offset(out, c) * es,
                static_cast<const char*>(src.data()) + element_offset(src, sc) * es, static_cast<size_t>(es));
  });
  return out;
}

Tensor gather_coo(const TensorView& src, const TensorView& index) {
  const int64_t dim = index.dim() - 1;
  Shape shape = src.sizes();
  shape[dim] = index.sizes()[dim];
  Tensor out = Tensor::zeros(shape, src.dtype());
  const int64_t es = src.element_size();
  for_each_coord(shape, [&](const int64_t* c) {
    int64_t sc[kMaxDims];
    std::memcpy(sc, c, sizeof(int64_t) * static_cast<size_t>(shape.size()));
    sc[dim] = checked(load_position(index, c), src.sizes()[dim]);
    std::memcpy(static_cast<char*>(out.data()) + element_offset(out, c) * es,
                static_cast<const char*>(src.data()) + element_offset(src, sc) * es, static_cast<size_t>(es));
  });
  return out;
}

}  // namespace sxt::ref

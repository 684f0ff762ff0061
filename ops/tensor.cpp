#include "ops/tensor.h"

#include "ops/detail/checks.h"
#include "ops/runtime/cuda/runtime.h"
#include "ops/runtime/memory.h"
#include "ops/runtime/shareable_memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>

namespace scatterx {

namespace {

int64_t wrap(const char* op, int64_t d, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  SCATTERX_CHECK(d >= -n && d < n, ArgumentError, op, "dim ", d, " is out of range for a tensor of ", ndim,
                 " dimensions (expected a value in [", -n, ", ", n - 1, "])");
  return d < 0 ? d + n : d;
}

}  // namespace

std::string Device::str() const { return is_cpu() ? "cpu" : detail::concat("cuda:", index); }

IntArray::IntArray(std::initializer_list<int64_t> values)
    : IntArray(values.begin(), static_cast<int64_t>(values.size())) {}

IntArray::IntArray(const std::vector<int64_t>& values) : IntArray(values.data(), static_cast<int64_t>(values.size())) {}

IntArray::IntArray(const int64_t* values, int64_t count) {
  SCATTERX_CHECK(count <= kMaxDims, ArgumentError, "IntArray", "at most ", kMaxDims, " dimensions are supported, got ",
                 count);
  std::copy(values, values + count, values_);
  size_ = count;
}

void IntArray::push_back(int64_t v) {
  SCATTERX_CHECK(size_ < kMaxDims, ArgumentError, "IntArray", "at most ", kMaxDims, " dimensions are supported, got ",
                 size_ + 1);
  values_[size_++] = v;
}

void IntArray::erase(int64_t i) {
  std::copy(values_ + i + 1, values_ + size_, values_ + i);
  --size_;
}

void IntArray::insert(int64_t i, int64_t v) {
  push_back(0);
  std::copy_backward(values_ + i, values_ + size_ - 1, values_ + size_);
  values_[i] = v;
}

bool IntArray::operator==(const IntArray& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

std::string IntArray::str() const {
  std::string s = "[";
  for (int64_t i = 0; i < size_; ++i) {
    if (i) s += ", ";
    s += std::to_string(values_[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides = shape;
  int64_t running = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    strides[d] = running;
    running *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

TensorView::TensorView(void* data, DType dtype, const Shape& shape, Device device)
    : TensorView(data, dtype, shape, contiguous_strides(shape), device) {}

TensorView::TensorView(void* data, DType dtype, const Shape& shape, const Shape& strides, Device device)
    : data_(data), dtype_(dtype), device_(device), shape_(shape), strides_(strides) {
  SCATTERX_CHECK(strides.size() == shape.size(), ArgumentError, "TensorView", "expected one stride per dimension (",
                 shape.size(), "), got ", strides.size());
  for (int64_t s : shape) {
    SCATTERX_CHECK(s >= 0, ArgumentError, "TensorView", "expected non-negative sizes, got ", shape.str());
  }
  SCATTERX_CHECK(data != nullptr || numel() == 0, ArgumentError, "TensorView",
                 "expected a data pointer for a non-empty tensor, got nullptr for shape ", shape.str());
}

int64_t TensorView::size(int64_t d) const { return shape_[wrap("TensorView::size", d, dim())]; }

int64_t TensorView::stride(int64_t d) const { return strides_[wrap("TensorView::stride", d, dim())]; }

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] == 0) return true;
    if (shape_[d] != 1 && strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

TensorView TensorView::transpose(int64_t dim0, int64_t dim1) const {
  TensorView out = *this;
  if (dim() == 0) return out;
  dim0 = wrap("TensorView::transpose", dim0, dim());
  dim1 = wrap("TensorView::transpose", dim1, dim());
  std::swap(out.shape_[dim0], out.shape_[dim1]);
  std::swap(out.strides_[dim0], out.strides_[dim1]);
  return out;
}

TensorView TensorView::permute(const IntArray& dims) const {
  SCATTERX_CHECK(dims.size() == dim(), ArgumentError, "TensorView::permute", "expected ", dim(),
                 " dims in the permutation, got ", dims.str());
  TensorView out = *this;
  bool seen[kMaxDims] = {};
  for (int64_t i = 0; i < dim(); ++i) {
    const int64_t d = wrap("TensorView::permute", dims[i], dim());
    SCATTERX_CHECK(!seen[d], ArgumentError, "TensorView::permute", "expected a permutation, got ", dims.str());
    seen[d] = true;
    out.shape_[i] = shape_[d];
    out.strides_[i] = strides_[d];
  }
  return out;
}

TensorView TensorView::slice(int64_t d, int64_t start, int64_t stop, int64_t step) const {
  d = wrap("TensorView::slice", d, dim());
  SCATTERX_CHECK(step > 0, ArgumentError, "TensorView::slice", "expected a positive step, got ", step);
  const int64_t n = shape_[d];
  auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  start = clamp(start);
  stop = std::max(clamp(stop), start);
  TensorView out = *this;
  out.shape_[d] = (stop - start + step - 1) / step;
  out.strides_[d] = strides_[d] * step;
  if (out.numel() > 0) out.data_ = static_cast<char*>(data_) + start * strides_[d] * element_size();
  return out;
}

TensorView TensorView::select(int64_t d, int64_t i) const {
  d = wrap("TensorView::select", d, dim());
  const int64_t n = shape_[d];
  SCATTERX_CHECK(i >= -n && i < n, IndexError, "TensorView::select", "index ", i, " is out of bounds for dimension ", d,
                 " with size ", n);
  if (i < 0) i += n;
  TensorView out = *this;
  out.data_ = static_cast<char*>(data_) + i * strides_[d] * element_size();
  out.shape_.erase(d);
  out.strides_.erase(d);
  return out;
}

TensorView TensorView::unsqueeze(int64_t d) const {
  const int64_t n = dim() + 1;
  SCATTERX_CHECK(d >= -n && d < n, ArgumentError, "TensorView::unsqueeze", "dim ", d, " is out of range for ", n,
                 " dimensions (expected a value in [", -n, ", ", n - 1, "])");
  if (d < 0) d += n;
  TensorView out = *this;
  const int64_t stride = d < dim() ? shape_[d] * strides_[d] : 1;
  out.shape_.insert(d, 1);
  out.strides_.insert(d, stride);
  return out;
}

TensorView TensorView::expand(const Shape& shape) const {
  SCATTERX_CHECK(shape.size() >= dim(), ArgumentError, "TensorView::expand", "expected at least ", dim(),
                 " dimensions to expand ", shape_.str(), " into, got ", shape.str());
  TensorView out = *this;
  const int64_t lead = shape.size() - dim();
  out.shape_ = shape;
  out.strides_ = shape;
  for (int64_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      SCATTERX_CHECK(shape[i] >= 0, ArgumentError, "TensorView::expand", "expected a non-negative size for a new ",
                     "leading dimension, got ", shape.str());
      out.strides_[i] = 0;
      continue;
    }
    const int64_t own = shape_[i - lead];
    const int64_t want = shape[i] == -1 ? own : shape[i];
    SCATTERX_CHECK(own == want || own == 1, ArgumentError, "TensorView::expand", "cannot expand ", shape_.str(), " to ",
                   shape.str(), ": dimension ", i, " has size ", own, " (only size-1 dims expand)");
    out.shape_[i] = want;
    out.strides_[i] = own == want ? strides_[i - lead] : 0;
  }
  return out;
}

TensorView TensorView::view(const Shape& shape) const {
  SCATTERX_CHECK(is_contiguous(), ArgumentError, "TensorView::view", "expected a contiguous tensor, got ", str());
  Shape resolved = shape;
  int64_t infer = -1;
  int64_t known = 1;
  for (int64_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      SCATTERX_CHECK(infer < 0, ArgumentError, "TensorView::view", "expected at most one -1 in ", shape.str());
      infer = i;
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) resolved[infer] = known == 0 ? 0 : numel() / known;
  SCATTERX_CHECK(shape_numel(resolved) == numel(), ArgumentError, "TensorView::view", "shape ", shape.str(),
                 " is invalid for a tensor of ", numel(), " elements");
  return TensorView(data_, dtype_, resolved, contiguous_strides(resolved), device_);
}

TensorView TensorView::flip(int64_t d) const {
  d = wrap("TensorView::flip", d, dim());
  TensorView out = *this;
  if (shape_[d] > 0) out.data_ = static_cast<char*>(data_) + (shape_[d] - 1) * strides_[d] * element_size();
  out.strides_[d] = -strides_[d];
  return out;
}

std::pair<const char*, const char*> TensorView::byte_range() const {
  const char* base = static_cast<const char*>(data_);
  if (numel() == 0) return {base, base};
  int64_t lo = 0;
  int64_t hi = 0;
  for (int64_t d = 0; d < dim(); ++d) {
    const int64_t extent = (shape_[d] - 1) * strides_[d];
    (extent < 0 ? lo : hi) += extent;
  }
  return {base + lo * element_size(), base + (hi + 1) * element_size()};
}

std::string TensorView::str() const {
  return detail::concat(dtype_name(dtype_), shape_.str(), " strides ", strides_.str(), " on ", device_.str());
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  detail::check_backend("Tensor::empty", "a tensor", device);
  for (int64_t s : shape) {
    SCATTERX_CHECK(s >= 0, ArgumentError, "Tensor::empty", "expected non-negative sizes, got ", shape.str());
  }
  const int64_t numel = shape_numel(shape);
  const int64_t esize = scatterx::element_size(dtype);
  SCATTERX_CHECK(numel <= (std::numeric_limits<int64_t>::max() - 64) / esize, ArgumentError, "Tensor::empty",
                 "size of ", shape.str(), " x ", esize, " bytes overflows int64");
  Tensor out;
  if (device.is_cuda()) {
    out.storage_ = detail::cuda::allocate(numel * esize, device, "Tensor::empty");
  } else {
    const auto [memory, capacity] = detail::recycled_acquire(static_cast<size_t>(numel * esize));
    out.storage_ =
        std::shared_ptr<void>(memory, [capacity = capacity](void* p) { detail::recycled_release(p, capacity); });
  }
  static_cast<TensorView&>(out) = TensorView(out.storage_.get(), dtype, shape, device);
  return out;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor out = empty(shape, dtype, device);
  const int64_t bytes = out.numel() * out.element_size();
  if (device.is_cuda()) {
    detail::cuda::fill_zero(out.data(), bytes, "Tensor::zeros");
  } else {
    std::memset(out.data(), 0, static_cast<size_t>(bytes));
  }
  return out;
}

Tensor Tensor::clone(const TensorView& source) {
  detail::check_backend("Tensor::clone", "source", source.device());
  Tensor out = empty(source.sizes(), source.dtype(), source.device());
  copy_(out, source);
  return out;
}

Tensor Tensor::adopt(const TensorView& view, std::shared_ptr<void> owner) {
  Tensor out;
  static_cast<TensorView&>(out) = view;
  out.storage_ = std::move(owner);
  return out;
}

size_t host_cache_bytes() { return detail::recycled_cached_bytes(); }

size_t empty_host_cache() { return detail::recycled_release_all(); }

bool host_shareable(const TensorView& view) {
  if (!view.device().is_cpu() || view.numel() == 0) return false;
  const auto [lo, hi] = view.byte_range();
  detail::ShareableRegion region;
  return detail::shareable_region(lo, static_cast<size_t>(hi - lo), &region);
}

}  // namespace scatterx

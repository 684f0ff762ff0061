// Tensors: a non-owning strided view and an owning CPU tensor.
//
// TensorView is what every op takes: a data pointer, a dtype, a device and
// up to kMaxDims sizes and strides. Strides count elements (not bytes) and
// may be zero (an expanded dimension) or negative (a reversed one, as numpy
// makes). Sizes, strides and offsets are 64-bit, so tensors beyond 2^31
// elements work. A view never owns memory: the caller keeps the buffer alive.
//
// Tensor is a TensorView that also owns its allocation (64-byte aligned on
// the CPU; stream-ordered device memory on a CUDA device, see ops/cuda.h), so
// it can be passed wherever a view is expected. Views derived from a Tensor
// (transpose, slice, ...) are plain TensorViews and do not keep it alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "ops/dtype.h"
#include "ops/error.h"

namespace scatterx {

constexpr int kMaxDims = 16;

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int ordinal = 0) { return {DeviceType::CUDA, ordinal}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu", "cuda:1"
};

// A fixed-capacity list of int64 (sizes, strides, dim lists).
class IntArray {
 public:
  IntArray() = default;
  IntArray(std::initializer_list<int64_t> values);
  explicit IntArray(const std::vector<int64_t>& values);
  IntArray(const int64_t* values, int64_t count);

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t& operator[](int64_t i) { return values_[i]; }
  int64_t operator[](int64_t i) const { return values_[i]; }
  const int64_t* data() const { return values_; }
  const int64_t* begin() const { return values_; }
  const int64_t* end() const { return values_ + size_; }
  void push_back(int64_t v);
  void erase(int64_t i);
  void insert(int64_t i, int64_t v);
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  bool operator==(const IntArray& o) const;
  bool operator!=(const IntArray& o) const { return !(*this == o); }
  std::string str() const;  // "[2, 3]"

 private:
  int64_t values_[kMaxDims] = {};
  int64_t size_ = 0;
};

using Shape = IntArray;

// Row-major strides for `shape`.
Shape contiguous_strides(const Shape& shape);
// Product of sizes (1 for a 0-d shape).
int64_t shape_numel(const Shape& shape);

class TensorView {
 public:
  TensorView() = default;
  // Contiguous (row-major) view.
  TensorView(void* data, DType dtype, const Shape& shape, Device device = Device::cpu());
  TensorView(void* data, DType dtype, const Shape& shape, const Shape& strides, Device device = Device::cpu());

  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t dim() const { return shape_.size(); }
  const Shape& sizes() const { return shape_; }
  const Shape& strides() const { return strides_; }
  // Size / stride of dimension d; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(shape_); }
  int64_t element_size() const { return scatterx::element_size(dtype_); }
  bool is_contiguous() const;

  // Typed pointer; throws DTypeError when T is not this view's dtype.
  template <typename T>
  T* data_as() const {
    SCATTERX_CHECK(dtype_of<std::remove_const_t<T>>() == dtype_, DTypeError, "TensorView::data_as", "expected a ",
                   dtype_name(dtype_of<std::remove_const_t<T>>()), " tensor, got ", dtype_name(dtype_));
    return static_cast<T*>(data_);
  }

  // Views over the same memory, as torch's methods of the same names.
  TensorView transpose(int64_t dim0, int64_t dim1) const;
  TensorView permute(const IntArray& dims) const;
  TensorView slice(int64_t dim, int64_t start, int64_t stop, int64_t step = 1) const;
  TensorView select(int64_t dim, int64_t i) const;
  TensorView unsqueeze(int64_t dim) const;
  TensorView expand(const Shape& shape) const;  // size-1 dims become stride 0
  TensorView view(const Shape& shape) const;    // contiguous views only; one size may be -1
  TensorView flip(int64_t dim) const;           // negative stride

  // Lowest and one-past-highest byte this view touches ({p, p} when empty).
  std::pair<const char*, const char*> byte_range() const;
  // "float32[2, 3] strides [3, 1] on cpu"
  std::string str() const;

 protected:
  void* data_ = nullptr;
  DType dtype_ = DType::Float32;
  Device device_{};
  Shape shape_{};
  Shape strides_{};
};

class Tensor : public TensorView {
 public:
  Tensor() = default;
  // Uninitialized / zero-filled contiguous tensors. On the CPU the memory of
  // freed tensors is recycled (see host_cache_bytes below).
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  // A contiguous copy of any view, on the view's device.
  static Tensor clone(const TensorView& source);
  // Wraps memory someone else owns; `owner` is kept alive with the tensor.
  static Tensor adopt(const TensorView& view, std::shared_ptr<void> owner);

  const TensorView& view() const { return *this; }
  using TensorView::view;  // view(shape)
  bool owns_memory() const { return storage_ != nullptr; }

 private:
  std::shared_ptr<void> storage_;
};

// Element-wise copy dst[...] = src[...] between views of the same shape and
// dtype (any strides). dst must not overlap src. Returns dst.
TensorView copy_(const TensorView& dst, const TensorView& src);

// The memory of freed CPU tensors (and kernel scratch) is kept for reuse, up
// to SCATTERX_HOST_CACHE_BYTES (default 1 GiB), so that a new tensor's pages
// are already faulted in: on a VM the first touch of fresh pages can cost
// more than the op that writes them. host_cache_bytes() is what is kept now;
// empty_host_cache() gives it all back to the allocator (as
// torch.cuda.empty_cache() does for torch's CUDA allocator) and returns the
// bytes given back. Both thread-safe.
size_t host_cache_bytes();
size_t empty_host_cache();

// Whether every byte `view` spans lies in memory the other processes of this
// user on this host can map (ops/runtime/shareable_memory.h): scatterx's own
// CPU tensors of 64 KiB to 8 MiB while SCATTERX_SHAREABLE_HOST_BYTES allows,
// and views into them. The distributed layer reads a peer's shareable tensor
// with a memcpy and any other buffer through the kernel (process_vm_readv);
// the all-reduce of 64 KiB to 8 MiB folds straight out of the peers' tensors
// only when each rank's is shareable. False for CUDA tensors. Thread-safe.
bool host_shareable(const TensorView& view);

}  // namespace scatterx

// Shared by the extension's translation units (module.cpp, dist_module.cpp):
// DLPack arrays <-> scatterx TensorView / Tensor, without copies.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "scatterx.h"

namespace scatterx::python {

namespace nb = nanobind;

using scatterx::DType;
using scatterx::Shape;
using scatterx::Tensor;
using scatterx::TensorView;

// An array the op reads (read-only arrays are fine) or writes.
using InArray = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;

// Which framework a result is handed back as: the one of the main input.
enum class Framework : int { NumPy = 0, Torch = 1, CuPy = 2 };

inline DType dtype_of(const nb::dlpack::dtype& dt, const char* op, const char* name) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(dt.code);
  if (dt.lanes == 1) {
    switch (code) {
      case Code::Float:
        if (dt.bits == 16) return DType::Float16;
        if (dt.bits == 32) return DType::Float32;
        if (dt.bits == 64) return DType::Float64;
        break;
      case Code::Bfloat:
        if (dt.bits == 16) return DType::BFloat16;
        break;
      case Code::Complex:
        if (dt.bits == 64) return DType::Complex64;
        if (dt.bits == 128) return DType::Complex128;
        break;
      case Code::Int:
        if (dt.bits == 8) return DType::Int8;
        if (dt.bits == 16) return DType::Int16;
        if (dt.bits == 32) return DType::Int32;
        if (dt.bits == 64) return DType::Int64;
        break;
      case Code::UInt:
        if (dt.bits == 8) return DType::UInt8;
        break;
      case Code::Bool:
        if (dt.bits == 8) return DType::Bool;
        break;
      default:
        break;
    }
  }
  scatterx::detail::raise<scatterx::DTypeError>(op, "expected ", name, " of a dtype scatterx supports (float16, ",
                                                "bfloat16, float32, float64, complex64, complex128, int8, uint8, ",
                                                "int16, int32, int64, bool), got DLPack code ", int(dt.code), " with ",
                                                int(dt.bits), " bits x ", dt.lanes, " lanes");
}

inline nb::dlpack::dtype dlpack_dtype(DType d) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code c, int bits) { return nb::dlpack::dtype{uint8_t(c), uint8_t(bits), 1}; };
  switch (d) {
    case DType::Float16:
      return make(Code::Float, 16);
    case DType::BFloat16:
      return make(Code::Bfloat, 16);
    case DType::Float32:
      return make(Code::Float, 32);
    case DType::Float64:
      return make(Code::Float, 64);
    case DType::Complex64:
      return make(Code::Complex, 64);
    case DType::Complex128:
      return make(Code::Complex, 128);
    case DType::Int8:
      return make(Code::Int, 8);
    case DType::UInt8:
      return make(Code::UInt, 8);
    case DType::Int16:
      return make(Code::Int, 16);
    case DType::Int32:
      return make(Code::Int, 32);
    case DType::Int64:
      return make(Code::Int, 64);
    case DType::Bool:
      return make(Code::Bool, 8);
  }
  return make(Code::Float, 32);
}

inline scatterx::Device device_of(int device_type, int device_id, const char* op, const char* name) {
  if (device_type == nb::device::cpu::value) return scatterx::Device::cpu();
  if (device_type == nb::device::cuda::value || device_type == nb::device::cuda_managed::value) {
    return scatterx::Device::cuda(device_id);
  }
  scatterx::detail::raise<scatterx::ArgumentError>(op, "expected ", name, " on the cpu or a CUDA device, got DLPack ",
                                                   "device type ", device_type);
}

// A view of a DLPack array: same memory, sizes and element strides.
template <typename Array>
inline TensorView view_of(const Array& a, const char* op, const char* name) {
  const DType dtype = dtype_of(a.dtype(), op, name);
  SCATTERX_CHECK(a.ndim() <= static_cast<size_t>(scatterx::kMaxDims), ArgumentError, op, "expected ", name,
                 " with at most ", scatterx::kMaxDims, " dimensions, got ", a.ndim());
  Shape sizes;
  Shape strides;
  for (size_t d = 0; d < a.ndim(); ++d) sizes.push_back(static_cast<int64_t>(a.shape(d)));
  if (a.stride_ptr() != nullptr) {
    for (size_t d = 0; d < a.ndim(); ++d) strides.push_back(a.stride(d));
  } else {
    strides = scatterx::contiguous_strides(sizes);
  }
  return TensorView(const_cast<void*>(static_cast<const void*>(a.data())), dtype, sizes, strides,
                    device_of(a.device_type(), a.device_id(), op, name));
}

// Hands a result to Python without copying: the capsule owns the Tensor
// (host or device memory; a CUDA result goes back as a torch CUDA tensor or a
// CuPy array).
inline nb::object to_python(Tensor&& result, Framework framework) {
  auto* owned = new Tensor(std::move(result));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::size_t shape[scatterx::kMaxDims];
  for (int64_t d = 0; d < owned->dim(); ++d) shape[d] = static_cast<size_t>(owned->size(d));
  const nb::dlpack::dtype dt = dlpack_dtype(owned->dtype());
  const size_t ndim = static_cast<size_t>(owned->dim());
  const bool cuda = owned->device().is_cuda();
  const int32_t device_type = cuda ? nb::device::cuda::value : nb::device::cpu::value;
  const int32_t device_id = cuda ? owned->device().index : 0;
  const int64_t* strides = owned->strides().data();
  if (framework == Framework::Torch) {
    return nb::cast(nb::ndarray<nb::pytorch>(owned->data(), ndim, shape, owner, strides, dt, device_type, device_id));
  }
  if (framework == Framework::CuPy) {
    return nb::cast(nb::ndarray<nb::cupy>(owned->data(), ndim, shape, owner, strides, dt, device_type, device_id));
  }
  return nb::cast(nb::ndarray<nb::numpy>(owned->data(), ndim, shape, owner, strides, dt));
}

// Runs f with the GIL released: kernels never touch Python objects.
template <typename F>
decltype(auto) without_gil(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

}  // namespace scatterx::python

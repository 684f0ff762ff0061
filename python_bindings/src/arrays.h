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

// DLPack's type code of each dtype, keyed by the names of
// SCATTERX_FORALL_DTYPES (ops/dtype.h); bits are 8 x the element size and
// lanes 1. A dtype added to that list without a line here does not compile.
template <DType D>
struct DLPackCode;
#define SCATTERX_PY_DLPACK_CODE(name, code)                     \
  template <>                                                   \
  struct DLPackCode<DType::name> {                              \
    static constexpr auto value = nb::dlpack::dtype_code::code; \
  };
SCATTERX_PY_DLPACK_CODE(Float16, Float)
SCATTERX_PY_DLPACK_CODE(BFloat16, Bfloat)
SCATTERX_PY_DLPACK_CODE(Float32, Float)
SCATTERX_PY_DLPACK_CODE(Float64, Float)
SCATTERX_PY_DLPACK_CODE(Complex64, Complex)
SCATTERX_PY_DLPACK_CODE(Complex128, Complex)
SCATTERX_PY_DLPACK_CODE(Int8, Int)
SCATTERX_PY_DLPACK_CODE(UInt8, UInt)
SCATTERX_PY_DLPACK_CODE(Int16, Int)
SCATTERX_PY_DLPACK_CODE(Int32, Int)
SCATTERX_PY_DLPACK_CODE(Int64, Int)
SCATTERX_PY_DLPACK_CODE(Bool, Bool)
#undef SCATTERX_PY_DLPACK_CODE

constexpr nb::dlpack::dtype dlpack_dtype(DType d) {
  switch (d) {
#define SCATTERX_PY_DLPACK_DTYPE(name, type, str)                                  \
  case DType::name:                                                                \
    return nb::dlpack::dtype{static_cast<uint8_t>(DLPackCode<DType::name>::value), \
                             static_cast<uint8_t>(8 * scatterx::element_size(DType::name)), 1};
    SCATTERX_FORALL_DTYPES(SCATTERX_PY_DLPACK_DTYPE)
#undef SCATTERX_PY_DLPACK_DTYPE
  }
  return nb::dlpack::dtype{};
}

inline DType dtype_of(const nb::dlpack::dtype& dt, const char* op, const char* name) {
#define SCATTERX_PY_DTYPE_OF(dtype, type, str) \
  if (dt == dlpack_dtype(DType::dtype)) return DType::dtype;
  SCATTERX_FORALL_DTYPES(SCATTERX_PY_DTYPE_OF)
#undef SCATTERX_PY_DTYPE_OF
  // "float16, bfloat16, ...": the names in the list's order.
#define SCATTERX_PY_DTYPE_NAME(dtype, type, str) ", " str
  constexpr const char* kNames = SCATTERX_FORALL_DTYPES(SCATTERX_PY_DTYPE_NAME) + 2;
#undef SCATTERX_PY_DTYPE_NAME
  scatterx::detail::raise<scatterx::DTypeError>(op, "expected ", name, " of a dtype scatterx supports (", kNames,
                                                "), got DLPack code ", int(dt.code), " with ", int(dt.bits), " bits x ",
                                                dt.lanes, " lanes");
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

// torch's converter of a DLPack capsule into a tensor, looked up once (the
// caller has imported torch: its tensor is the main input). nanobind's own
// torch export hands torch an object with __dlpack__, which
// torch.utils.dlpack.from_dlpack takes through a Python-level negotiation
// (device, stream, version keywords retried): 1.1 us a result, where the
// capsule's converter takes 0.4 (bench/RESULTS.md, "What one call costs").
// torch._C._from_dlpack is what the public function calls for a capsule;
// without it, the public function.
//
// Cached in a plain pointer, not a guarded static: the lookup runs Python
// (an import), which may let another thread take the GIL, and that thread
// would then wait on the static's guard while holding the GIL the first one
// needs. Two threads may both look it up; one reference then stays unused.
inline nb::handle torch_from_capsule() {
  static PyObject* fn = nullptr;
  if (fn == nullptr) {
    nb::object c = nb::module_::import_("torch").attr("_C");
    nb::object f = nb::hasattr(c, "_from_dlpack") ? c.attr("_from_dlpack")
                                                  : nb::module_::import_("torch.utils.dlpack").attr("from_dlpack");
    fn = f.release().ptr();  // kept for the interpreter's life, as torch's module is
  }
  return fn;
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
    // A framework-less ndarray leaves as a bare DLPack capsule. torch reads
    // no stream from it, as it read none from nanobind's object for a host
    // tensor; a CUDA result was made on torch's current stream.
    nb::object capsule =
        nb::cast(nb::ndarray<>(owned->data(), ndim, shape, owner, strides, dt, device_type, device_id));
    return torch_from_capsule()(capsule);
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

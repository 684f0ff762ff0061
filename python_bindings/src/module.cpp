// scatterx._C: the local ops on DLPack arrays (numpy, torch, anything with
// __dlpack__), without copies. The torch-style signatures live in Python
// (scatterx/_ops.py); this module only converts arrays, releases the GIL
// around the kernels and turns scatterx errors into Python exceptions.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arrays.h"
#include "scatterx.h"

namespace nb = nanobind;

void register_segment_ops(nb::module_& m);         // segment_module.cpp
void register_gather_scatter_ops(nb::module_& m);  // gather_scatter_module.cpp
void register_info(nb::module_& m);                // info_module.cpp: the environment report's rows

#if SCATTERX_PY_WITH_DIST
void register_dist(nb::module_& m);       // dist_module.cpp: the submodule _C.dist
void register_moe(nb::module_& m);        // moe_module.cpp: _C.dist's MoE functions
void register_embedding(nb::module_& m);  // embedding_module.cpp: _C.dist's sharded embedding bags
#endif

namespace {

using scatterx::Reduce;
using scatterx::Tensor;
using scatterx::TensorView;

using scatterx::python::Framework;
using scatterx::python::InArray;
using scatterx::python::OutArray;
using scatterx::python::to_python;
using scatterx::python::view_of;
using scatterx::python::without_gil;

scatterx::Scalar scalar_of(const nb::handle& value, const char* op, const char* name) {
  if (nb::isinstance<nb::bool_>(value)) return scatterx::Scalar(nb::cast<bool>(value));
  if (nb::isinstance<nb::int_>(value)) return scatterx::Scalar(nb::cast<int64_t>(value));
  if (nb::isinstance<nb::float_>(value)) return scatterx::Scalar(nb::cast<double>(value));
  if (PyComplex_Check(value.ptr())) {
    return scatterx::Scalar(
        scatterx::Complex<double>(PyComplex_RealAsDouble(value.ptr()), PyComplex_ImagAsDouble(value.ptr())));
  }
  const std::string got = nb::type_name(value.type()).c_str();
  throw nb::type_error(
      scatterx::detail::concat(op, ": expected ", name, " to be a Python bool, int, float or complex scalar, got ", got)
          .c_str());
}

Reduce reduce_of(const std::string& name, const char* op) { return scatterx::reduce_from_name(name, op); }

// scatterx's errors as Python's: IndexError, TypeError (dtypes), ValueError (arguments), RuntimeError.
void register_errors(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const scatterx::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const scatterx::DTypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const scatterx::ArgumentError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const scatterx::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

// The CUDA backend's controls (ops/cuda.h); scatterx/cuda.py wraps them.
void register_cuda_controls(nb::module_& m) {
  m.def("cuda_is_built", &scatterx::cuda::is_built, "Whether this build has the CUDA backend.");
  m.def("cuda_device_count", &scatterx::cuda::device_count, "CUDA devices visible (0 without the backend).");
  m.def(
      "cuda_set_current_stream",
      [](uintptr_t stream) { scatterx::cuda::set_current_stream(reinterpret_cast<void*>(stream)); }, nb::arg("stream"),
      "Makes a cudaStream_t (as an int) this thread's current stream for the next ops.");
  m.def("cuda_set_deterministic", &scatterx::cuda::set_deterministic, nb::arg("on"));
  m.def("cuda_deterministic", &scatterx::cuda::deterministic);
  m.def("cuda_set_index_checks", &scatterx::cuda::set_index_checks, nb::arg("on"));
  m.def("cuda_index_checks", &scatterx::cuda::index_checks);
  m.def(
      "cuda_set_scatter_path",
      [](int path) { scatterx::cuda::set_scatter_path(static_cast<scatterx::cuda::ScatterPath>(path)); },
      nb::arg("path"), "0 auto, 1 atomic, 2 sorted (scatterx.cuda.set_scatter_path checks the name).");
  m.def("cuda_scatter_path", [] { return static_cast<int>(scatterx::cuda::scatter_path()); });
}

// The host memory cache (ops/tensor.h).
void register_host_cache(nb::module_& m) {
  m.def("host_cache_bytes", &scatterx::host_cache_bytes,
        "Bytes of freed CPU tensors' memory kept for reuse (SCATTERX_HOST_CACHE_BYTES bounds it).");
  m.def("empty_host_cache", &scatterx::empty_host_cache,
        "Gives the kept memory back to the allocator; returns the bytes given back.");
  m.def(
      "empty",
      [](const std::vector<int64_t>& sizes, const std::string& dtype, Framework fw) {
        scatterx::Shape shape;
        for (int64_t d : sizes) shape.push_back(d);
        return to_python(scatterx::Tensor::empty(shape, scatterx::dtype_from_name(dtype, "empty")), fw);
      },
      nb::arg("size"), nb::arg("dtype"), nb::arg("framework"),
      "A contiguous uninitialized CPU array of scatterx's memory (scatterx.empty checks the arguments).");
  m.def(
      "host_shareable",
      [](const InArray& array) { return scatterx::host_shareable(view_of(array, "is_shareable", "array")); },
      nb::arg("array"), "Whether the array's bytes lie in memory the other ranks on this host can map.");
}

// gather and index_select, returning a new array or writing `out`.
void register_gather_ops(nb::module_& m) {
  m.def(
      "gather",
      [](const InArray& input, int64_t dim, const InArray& index, Framework fw) {
        const TensorView in = view_of(input, "gather", "input");
        const TensorView idx = view_of(index, "gather", "index");
        return to_python(without_gil([&] { return scatterx::gather(in, dim, idx); }), fw);
      },
      nb::arg("input"), nb::arg("dim"), nb::arg("index"), nb::arg("framework"),
      "torch.gather: out[i][j] = input[index[i][j]][j] (dim 0). Returns a new array.");

  m.def(
      "gather_out",
      [](const OutArray& out, const InArray& input, int64_t dim, const InArray& index) {
        const TensorView o = view_of(out, "gather", "out");
        const TensorView in = view_of(input, "gather", "input");
        const TensorView idx = view_of(index, "gather", "index");
        without_gil([&] { scatterx::gather_out(o, in, dim, idx); });
      },
      nb::arg("out"), nb::arg("input"), nb::arg("dim"), nb::arg("index"), "gather into `out`.");

  m.def(
      "index_select",
      [](const InArray& input, int64_t dim, const InArray& index, Framework fw) {
        const TensorView in = view_of(input, "index_select", "input");
        const TensorView idx = view_of(index, "index_select", "index");
        return to_python(without_gil([&] { return scatterx::index_select(in, dim, idx); }), fw);
      },
      nb::arg("input"), nb::arg("dim"), nb::arg("index"), nb::arg("framework"),
      "torch.index_select. Returns a new array.");

  m.def(
      "index_select_out",
      [](const OutArray& out, const InArray& input, int64_t dim, const InArray& index) {
        const TensorView o = view_of(out, "index_select", "out");
        const TensorView in = view_of(input, "index_select", "input");
        const TensorView idx = view_of(index, "index_select", "index");
        without_gil([&] { scatterx::index_select_out(o, in, dim, idx); });
      },
      nb::arg("out"), nb::arg("input"), nb::arg("dim"), nb::arg("index"), "index_select into `out`.");
}

// scatter_, scatter_add_, scatter_reduce_ and scatter_ of a value, in place or not.
void register_scatter_ops(nb::module_& m) {
  // scatter_, scatter_add_, scatter_reduce_ (kind "scatter", "scatter_add",
  // "scatter_reduce"): in place when `in_place`, else a new array is returned.
  m.def(
      "scatter",
      [](const std::string& kind, const InArray& self, int64_t dim, const InArray& index, const InArray& src,
         const std::string& reduce, bool include_self, bool in_place, Framework fw) -> nb::object {
        if (kind != "scatter" && kind != "scatter_add" && kind != "scatter_reduce") {
          throw nb::value_error(
              ("scatterx._C.scatter: expected kind 'scatter', 'scatter_add' or 'scatter_reduce', got '" + kind + "'")
                  .c_str());
        }
        const std::string op = kind + (in_place ? "_" : "");
        const TensorView s = view_of(self, op.c_str(), "self");
        const TensorView idx = view_of(index, op.c_str(), "index");
        const TensorView sr = view_of(src, op.c_str(), "src");
        const Reduce r = reduce_of(reduce, op.c_str());
        auto run = [&]() -> std::optional<Tensor> {
          if (kind == "scatter") {
            if (!in_place) return scatterx::scatter(s, dim, idx, sr, r);
            scatterx::scatter_(s, dim, idx, sr, r);
          } else if (kind == "scatter_add") {
            if (!in_place) return scatterx::scatter_add(s, dim, idx, sr);
            scatterx::scatter_add_(s, dim, idx, sr);
          } else {
            if (!in_place) return scatterx::scatter_reduce(s, dim, idx, sr, r, include_self);
            scatterx::scatter_reduce_(s, dim, idx, sr, r, include_self);
          }
          return std::nullopt;
        };
        std::optional<Tensor> result = without_gil(run);
        if (!result) return nb::none();
        return to_python(std::move(*result), fw);
      },
      nb::arg("kind"), nb::arg("self"), nb::arg("dim"), nb::arg("index"), nb::arg("src"), nb::arg("reduce"),
      nb::arg("include_self"), nb::arg("in_place"), nb::arg("framework"),
      "scatter_ / scatter_add_ / scatter_reduce_ on `self`, or their out-of-place forms.");

  m.def(
      "scatter_value",
      [](const InArray& self, int64_t dim, const InArray& index, const nb::handle& value, const std::string& reduce,
         bool in_place, Framework fw) -> nb::object {
        const char* op = in_place ? "scatter_" : "scatter";
        const TensorView s = view_of(self, op, "self");
        const TensorView idx = view_of(index, op, "index");
        const scatterx::Scalar v = scalar_of(value, op, "value");
        const Reduce r = reduce_of(reduce, op);
        if (in_place) {
          without_gil([&] { scatterx::scatter_(s, dim, idx, v, r); });
          return nb::none();
        }
        return to_python(without_gil([&] { return scatterx::scatter(s, dim, idx, v, r); }), fw);
      },
      nb::arg("self"), nb::arg("dim"), nb::arg("index"), nb::arg("value"), nb::arg("reduce"), nb::arg("in_place"),
      nb::arg("framework"), "scatter_(dim, index, value, reduce=...) or its out-of-place form.");
}

// index_add_, index_add_weighted_ and index_reduce_, in place or not.
void register_index_ops(nb::module_& m) {
  m.def(
      "index_add",
      [](const InArray& self, int64_t dim, const InArray& index, const InArray& source, const nb::handle& alpha,
         bool in_place, Framework fw) -> nb::object {
        const char* op = in_place ? "index_add_" : "index_add";
        const TensorView s = view_of(self, op, "self");
        const TensorView idx = view_of(index, op, "index");
        const TensorView src = view_of(source, op, "source");
        const scatterx::Scalar a = scalar_of(alpha, op, "alpha");
        if (in_place) {
          without_gil([&] { scatterx::index_add_(s, dim, idx, src, a); });
          return nb::none();
        }
        return to_python(without_gil([&] { return scatterx::index_add(s, dim, idx, src, a); }), fw);
      },
      nb::arg("self"), nb::arg("dim"), nb::arg("index"), nb::arg("source"), nb::arg("alpha"), nb::arg("in_place"),
      nb::arg("framework"), "index_add_ or index_add.");

  m.def(
      "index_add_weighted",
      [](const InArray& self, int64_t dim, const InArray& index, const InArray& source, const InArray& weights,
         bool in_place, Framework fw) -> nb::object {
        const char* op = in_place ? "index_add_weighted_" : "index_add_weighted";
        const TensorView s = view_of(self, op, "self");
        const TensorView idx = view_of(index, op, "index");
        const TensorView src = view_of(source, op, "source");
        const TensorView w = view_of(weights, op, "weights");
        if (in_place) {
          without_gil([&] { scatterx::index_add_weighted_(s, dim, idx, src, w); });
          return nb::none();
        }
        return to_python(without_gil([&] { return scatterx::index_add_weighted(s, dim, idx, src, w); }), fw);
      },
      nb::arg("self"), nb::arg("dim"), nb::arg("index"), nb::arg("source"), nb::arg("weights"), nb::arg("in_place"),
      nb::arg("framework"), "index_add_weighted_ or index_add_weighted.");

  m.def(
      "index_reduce",
      [](const InArray& self, int64_t dim, const InArray& index, const InArray& source, const std::string& reduce,
         bool include_self, bool in_place, Framework fw) -> nb::object {
        const char* op = in_place ? "index_reduce_" : "index_reduce";
        const TensorView s = view_of(self, op, "self");
        const TensorView idx = view_of(index, op, "index");
        const TensorView src = view_of(source, op, "source");
        const Reduce r = reduce_of(reduce, op);
        if (in_place) {
          without_gil([&] { scatterx::index_reduce_(s, dim, idx, src, r, include_self); });
          return nb::none();
        }
        return to_python(without_gil([&] { return scatterx::index_reduce(s, dim, idx, src, r, include_self); }), fw);
      },
      nb::arg("self"), nb::arg("dim"), nb::arg("index"), nb::arg("source"), nb::arg("reduce"), nb::arg("include_self"),
      nb::arg("in_place"), nb::arg("framework"), "index_reduce_ or index_reduce.");
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "scatterx's compiled core: local ops on DLPack arrays (see the scatterx package for the API)";
  m.attr("__version__") = SCATTERX_VERSION;
  register_errors(m);
  nb::enum_<Framework>(m, "Framework")
      .value("NumPy", Framework::NumPy)
      .value("Torch", Framework::Torch)
      .value("CuPy", Framework::CuPy);

  register_cuda_controls(m);
  register_host_cache(m);
  register_gather_ops(m);
  register_scatter_ops(m);
  register_index_ops(m);
  register_segment_ops(m);
  register_gather_scatter_ops(m);

#if SCATTERX_PY_WITH_DIST
  register_dist(m);  // after register_errors' translator, so that the dist errors' own translator is tried first
  register_moe(m);
  register_embedding(m);
#endif
  register_info(m);  // after register_dist: adds _C.dist.mpi_info_rows where the distributed layer is built
}

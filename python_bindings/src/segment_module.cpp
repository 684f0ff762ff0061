// The segment ops (ops/segment/segment.h) on DLPack arrays; the torch_scatter
// signatures live in Python (scatterx/torch_scatter). Registered by module.cpp.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <string>
#include <utility>

#include "arrays.h"
#include "scatterx.h"

namespace nb = nanobind;

namespace {

using scatterx::Reduce;
using scatterx::TensorView;
using scatterx::ValuesAndArgs;
using scatterx::python::Framework;
using scatterx::python::InArray;
using scatterx::python::to_python;
using scatterx::python::view_of;
using scatterx::python::without_gil;

nb::object pair_to_python(ValuesAndArgs&& r, Framework fw) {
  nb::object values = to_python(std::move(r.values), fw);
  nb::object args = to_python(std::move(r.args), fw);
  return nb::make_tuple(values, args);
}

}  // namespace

// segment_csr, segment_coo and scatter_arg_reduce (their arg forms when
// with_arg: a (values, args) tuple), gather_csr and gather_coo.
void register_segment_ops(nb::module_& m) {
  m.def(
      "segment_csr",
      [](const InArray& src, const InArray& indptr, const std::string& reduce, bool with_arg,
         Framework fw) -> nb::object {
        const char* op = with_arg ? "segment_csr_arg" : "segment_csr";
        const TensorView s = view_of(src, op, "src");
        const TensorView p = view_of(indptr, op, "indptr");
        const Reduce r = scatterx::reduce_from_name(reduce, op);
        if (with_arg) return pair_to_python(without_gil([&] { return scatterx::segment_csr_arg(s, p, r); }), fw);
        return to_python(without_gil([&] { return scatterx::segment_csr(s, p, r); }), fw);
      },
      nb::arg("src"), nb::arg("indptr"), nb::arg("reduce"), nb::arg("with_arg"), nb::arg("framework"),
      "Reduces src over indptr's CSR segments along dim indptr.ndim - 1.");

  m.def(
      "segment_coo",
      [](const InArray& src, const InArray& index, const std::string& reduce, int64_t dim_size, bool with_arg,
         Framework fw) -> nb::object {
        const char* op = with_arg ? "segment_coo_arg" : "segment_coo";
        const TensorView s = view_of(src, op, "src");
        const TensorView i = view_of(index, op, "index");
        const Reduce r = scatterx::reduce_from_name(reduce, op);
        if (with_arg) {
          return pair_to_python(without_gil([&] { return scatterx::segment_coo_arg(s, i, r, dim_size); }), fw);
        }
        return to_python(without_gil([&] { return scatterx::segment_coo(s, i, r, dim_size); }), fw);
      },
      nb::arg("src"), nb::arg("index"), nb::arg("reduce"), nb::arg("dim_size"), nb::arg("with_arg"),
      nb::arg("framework"),
      "Reduces src over runs of a sorted index along dim index.ndim - 1 (dim_size < 0: max + 1).");

  m.def(
      "scatter_arg_reduce",
      [](const InArray& src, int64_t dim, const InArray& index, const std::string& reduce, int64_t dim_size,
         Framework fw) {
        constexpr const char* op = "scatter_arg_reduce";
        const TensorView s = view_of(src, op, "src");
        const TensorView i = view_of(index, op, "index");
        const Reduce r = scatterx::reduce_from_name(reduce, op);
        return pair_to_python(without_gil([&] { return scatterx::scatter_arg_reduce(s, dim, i, r, dim_size); }), fw);
      },
      nb::arg("src"), nb::arg("dim"), nb::arg("index"), nb::arg("reduce"), nb::arg("dim_size"), nb::arg("framework"),
      "scatter amax / amin with the position of each winner: (values, args).");

  m.def(
      "gather_csr",
      [](const InArray& src, const InArray& indptr, Framework fw) {
        const TensorView s = view_of(src, "gather_csr", "src");
        const TensorView p = view_of(indptr, "gather_csr", "indptr");
        return to_python(without_gil([&] { return scatterx::gather_csr(s, p); }), fw);
      },
      nb::arg("src"), nb::arg("indptr"), nb::arg("framework"), "Repeats src's rows over indptr's segments.");

  m.def(
      "gather_coo",
      [](const InArray& src, const InArray& index, Framework fw) {
        const TensorView s = view_of(src, "gather_coo", "src");
        const TensorView i = view_of(index, "gather_coo", "index");
        return to_python(without_gil([&] { return scatterx::gather_coo(s, i); }), fw);
      },
      nb::arg("src"), nb::arg("index"), nb::arg("framework"), "out[..., e, ...] = src[..., index[..., e], ...].");
}

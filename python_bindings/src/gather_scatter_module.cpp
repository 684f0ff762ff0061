// The fused gather-scatter (ops/gather_scatter/gather_scatter.h) and the
// per-edge dot (gather_dot.h) on DLPack arrays; scatterx.gather_scatter and
// scatterx.gather_dot (scatterx/_ops.py) wrap them. Registered by module.cpp.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "arrays.h"
#include "scatterx.h"

namespace nb = nanobind;

namespace {

// scatterx.IndexPlan (scatterx/_plan.py) wraps this; gather_scatter and
// torch_scatter.scatter take it in place of a destination index.
void register_index_plan(nb::module_& m) {
  using scatterx::python::Framework;
  using scatterx::python::InArray;
  nb::class_<scatterx::IndexPlan>(m, "IndexPlan")
      .def(
          "__init__",
          [](scatterx::IndexPlan* self, const InArray& index, int64_t dim_size) {
            const scatterx::TensorView v = scatterx::python::view_of(index, "IndexPlan", "index");
            new (self)
                scatterx::IndexPlan(scatterx::python::without_gil([&] { return scatterx::IndexPlan(v, dim_size); }));
          },
          nb::arg("index"), nb::arg("dim_size"))
      .def_prop_ro("dim_size", &scatterx::IndexPlan::dim_size)
      .def_prop_ro("positions", &scatterx::IndexPlan::positions)
      .def(
          "counts",
          [](const scatterx::IndexPlan& plan, Framework fw) { return scatterx::python::to_python(plan.counts(), fw); },
          nb::arg("framework"));
  m.def(
      "gather_scatter_planned",
      [](const InArray& x, const InArray& src_index, const scatterx::IndexPlan& dst, const std::string& reduce,
         const std::optional<InArray>& edge_weight, Framework fw) -> nb::object {
        constexpr const char* op = "gather_scatter";
        const scatterx::TensorView xv = scatterx::python::view_of(x, op, "x");
        const scatterx::TensorView s = scatterx::python::view_of(src_index, op, "src_index");
        std::optional<scatterx::TensorView> w;
        if (edge_weight) w = scatterx::python::view_of(*edge_weight, op, "edge_weight");
        const scatterx::Reduce r = scatterx::reduce_from_name(reduce, op);
        return scatterx::python::to_python(
            scatterx::python::without_gil([&] { return scatterx::gather_scatter(xv, s, dst, r, w ? &*w : nullptr); }),
            fw);
      },
      nb::arg("x"), nb::arg("src_index"), nb::arg("dst"), nb::arg("reduce"), nb::arg("edge_weight").none(),
      nb::arg("framework"), "gather_scatter with the destinations grouped by an IndexPlan.");
  m.def(
      "scatter_by_plan",
      [](const InArray& src, const scatterx::IndexPlan& plan, const std::string& reduce, Framework fw) -> nb::object {
        constexpr const char* op = "scatter_by_plan";
        const scatterx::TensorView sv = scatterx::python::view_of(src, op, "src");
        const scatterx::Reduce r = scatterx::reduce_from_name(reduce, op);
        return scatterx::python::to_python(
            scatterx::python::without_gil([&] { return scatterx::scatter_by_plan(sv, plan, r); }), fw);
      },
      nb::arg("src"), nb::arg("plan"), nb::arg("reduce"), nb::arg("framework"),
      "out[n] = reduce of the rows src[p] with index[p] == n, the index grouped by the plan.");
  m.def(
      "scatter_rows",
      [](const InArray& src, const InArray& index, const std::string& reduce, int64_t dim_size,
         Framework fw) -> nb::object {
        constexpr const char* op = "scatter_rows";
        const scatterx::TensorView sv = scatterx::python::view_of(src, op, "src");
        const scatterx::TensorView iv = scatterx::python::view_of(index, op, "index");
        const scatterx::Reduce r = scatterx::reduce_from_name(reduce, op);
        return scatterx::python::to_python(
            scatterx::python::without_gil([&] { return scatterx::scatter_rows(sv, iv, r, dim_size); }), fw);
      },
      nb::arg("src"), nb::arg("index"), nb::arg("reduce"), nb::arg("dim_size"), nb::arg("framework"),
      "out[n] = reduce of the rows src[p] with index[p] == n (dim_size < 0: max + 1), grouped for this call.");
}

// torch_scatter.scatter_softmax / scatter_log_softmax's fused kernels (and
// the CPU backward their autograd Function calls).
void register_softmax(nb::module_& m) {
  using scatterx::python::Framework;
  using scatterx::python::InArray;
  m.def(
      "scatter_softmax",
      [](const InArray& src, const scatterx::IndexPlan& plan, bool log, double eps, Framework fw) -> nb::object {
        const char* op = log ? "scatter_log_softmax" : "scatter_softmax";
        const scatterx::TensorView sv = scatterx::python::view_of(src, op, "src");
        return scatterx::python::to_python(
            scatterx::python::without_gil([&] { return scatterx::scatter_softmax(sv, plan, log, eps); }), fw);
      },
      nb::arg("src"), nb::arg("plan"), nb::arg("log"), nb::arg("eps"), nb::arg("framework"),
      "The (log-)softmax over the rows src[p] that share a destination of the plan; a new tensor of src's shape.");
  m.def(
      "scatter_softmax_backward",
      [](const InArray& out, const InArray& grad, const scatterx::IndexPlan& plan, bool log,
         Framework fw) -> nb::object {
        const char* op = log ? "scatter_log_softmax_backward" : "scatter_softmax_backward";
        const scatterx::TensorView ov = scatterx::python::view_of(out, op, "out");
        const scatterx::TensorView gv = scatterx::python::view_of(grad, op, "grad");
        return scatterx::python::to_python(
            scatterx::python::without_gil([&] { return scatterx::scatter_softmax_backward(ov, gv, plan, log); }), fw);
      },
      nb::arg("out"), nb::arg("grad"), nb::arg("plan"), nb::arg("log"), nb::arg("framework"),
      "The gradient of the (log-)softmax with respect to src, from its output and the output's gradient (CPU).");
}

}  // namespace

void register_gather_scatter_ops(nb::module_& m) {
  using scatterx::python::Framework;
  using scatterx::python::InArray;
  m.def(
      "gather_scatter",
      [](const InArray& x, const InArray& src_index, const InArray& dst_index, const std::string& reduce,
         const std::optional<InArray>& edge_weight, int64_t dim_size, Framework fw) -> nb::object {
        constexpr const char* op = "gather_scatter";
        const scatterx::TensorView xv = scatterx::python::view_of(x, op, "x");
        const scatterx::TensorView s = scatterx::python::view_of(src_index, op, "src_index");
        const scatterx::TensorView d = scatterx::python::view_of(dst_index, op, "dst_index");
        std::optional<scatterx::TensorView> w;
        if (edge_weight) w = scatterx::python::view_of(*edge_weight, op, "edge_weight");
        const scatterx::Reduce r = scatterx::reduce_from_name(reduce, op);
        return scatterx::python::to_python(scatterx::python::without_gil([&] {
                                             return scatterx::gather_scatter(xv, s, d, r, w ? &*w : nullptr, dim_size);
                                           }),
                                           fw);
      },
      nb::arg("x"), nb::arg("src_index"), nb::arg("dst_index"), nb::arg("reduce"), nb::arg("edge_weight").none(),
      nb::arg("dim_size"), nb::arg("framework"),
      "out[n] = reduce of x[src_index[e]] * edge_weight[e] over the edges e with dst_index[e] == n.");
  m.def(
      "gather_dot",
      [](const InArray& a, const InArray& a_index, const InArray& b, const InArray& b_index,
         Framework fw) -> nb::object {
        constexpr const char* op = "gather_dot";
        const scatterx::TensorView av = scatterx::python::view_of(a, op, "a");
        const scatterx::TensorView ai = scatterx::python::view_of(a_index, op, "a_index");
        const scatterx::TensorView bv = scatterx::python::view_of(b, op, "b");
        const scatterx::TensorView bi = scatterx::python::view_of(b_index, op, "b_index");
        return scatterx::python::to_python(
            scatterx::python::without_gil([&] { return scatterx::gather_dot(av, ai, bv, bi); }), fw);
      },
      nb::arg("a"), nb::arg("a_index"), nb::arg("b"), nb::arg("b_index"), nb::arg("framework"),
      "out[e] = dot(a[a_index[e]], b[b_index[e]]) over the features (rows along dim 0).");
  register_index_plan(m);
  register_softmax(m);
}

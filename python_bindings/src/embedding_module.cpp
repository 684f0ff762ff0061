// scatterx._C.dist's sharded embedding bag functions (dist/embedding_bag.h),
// for scatterx.distributed.embedding: the forward returns an opaque handle
// that the backward takes; arrays in and out through DLPack, the GIL released
// around each call.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "arrays.h"
#include "dist/embedding_bag.h"
#include "dist/embedding_routing.h"

namespace nb = nanobind;
namespace dist = scatterx::dist;
namespace py = scatterx::python;  // the DLPack conversions of arrays.h

namespace {

using py::view_of;
using scatterx::TensorView;

constexpr const char* kOp = "ShardedEmbeddingBag";

struct PyEmbeddingBagHandle {
  std::shared_ptr<const dist::EmbeddingBagHandle> handle;
};

nb::object forward(const py::InArray& shard, const py::InArray& input, const py::InArray& offsets,
                   const std::optional<py::InArray>& per_sample_weights, const std::vector<int64_t>& row_starts,
                   int mode, const dist::Communicator& comm, py::Framework framework) {
  const TensorView sv = view_of(shard, kOp, "weight");
  const TensorView iv = view_of(input, kOp, "input");
  const TensorView ov = view_of(offsets, kOp, "offsets");
  TensorView wv;
  if (per_sample_weights) wv = view_of(*per_sample_weights, kOp, "per_sample_weights");
  const TensorView* w = per_sample_weights ? &wv : nullptr;
  dist::EmbeddingBagForward r = py::without_gil(
      [&] { return dist::embedding_bag_forward(sv, iv, ov, w, row_starts, static_cast<dist::BagMode>(mode), comm); });
  return nb::make_tuple(py::to_python(std::move(r.out), framework), PyEmbeddingBagHandle{std::move(r.handle)});
}

nb::object backward(const py::InArray& grad_out, const py::InArray& shard, const PyEmbeddingBagHandle& h,
                    bool weights_grad, py::Framework framework) {
  const char* op = "ShardedEmbeddingBag.backward";
  const TensorView g = view_of(grad_out, op, "grad_output");
  const TensorView s = view_of(shard, op, "weight");
  dist::EmbeddingBagGrads r =
      py::without_gil([&] { return dist::embedding_bag_backward(g, s, *h.handle, weights_grad); });
  nb::object gw = nb::none();
  if (weights_grad && h.handle->weighted) gw = py::to_python(std::move(r.grad_per_sample_weights), framework);
  return nb::make_tuple(py::to_python(std::move(r.row_ids), framework), py::to_python(std::move(r.rows), framework),
                        gw);
}

}  // namespace

void register_embedding(nb::module_& m) {
  nb::module_ d = nb::borrow<nb::module_>(m.attr("dist"));
  nb::class_<PyEmbeddingBagHandle>(d, "EmbeddingBagHandle", "What embedding_bag_backward needs from the forward.")
      .def_prop_ro("id_send_splits", [](const PyEmbeddingBagHandle& h) { return h.handle->id_send_splits; })
      .def_prop_ro("id_recv_splits", [](const PyEmbeddingBagHandle& h) { return h.handle->id_recv_splits; })
      .def_prop_ro("part_send_splits", [](const PyEmbeddingBagHandle& h) { return h.handle->part_send_splits; })
      .def_prop_ro("part_recv_splits", [](const PyEmbeddingBagHandle& h) { return h.handle->part_recv_splits; });
  d.def("embedding_row_wise_starts", &dist::row_wise_starts, nb::arg("num_embeddings"), nb::arg("world"));
  d.def("embedding_table_wise_starts", &dist::table_wise_starts, nb::arg("num_embeddings"), nb::arg("world"),
        nb::arg("owner"));
  d.def("embedding_bag_forward", &forward, nb::arg("weight"), nb::arg("input"), nb::arg("offsets"),
        nb::arg("per_sample_weights").none(), nb::arg("row_starts"), nb::arg("mode"), nb::arg("comm"),
        nb::arg("framework"), "Returns (out, handle); mode 0 sum, 1 mean, 2 max; see dist/embedding_bag.h.");
  d.def("embedding_bag_backward", &backward, nb::arg("grad_output"), nb::arg("weight"), nb::arg("handle"),
        nb::arg("per_sample_weights_grad"), nb::arg("framework"),
        "Returns (row_ids, rows, grad_per_sample_weights or None).");
  d.def(
      "embedding_failed_checks",
      [](const dist::Communicator& comm) { py::without_gil([&] { dist::embedding_detail::agree_as_failed(comm); }); },
      nb::arg("comm"), "Takes part in the forward's agreement as a rank whose own checks failed.");
  d.def(
      "embedding_dense_grad",
      [](const py::InArray& row_ids, const py::InArray& rows, int64_t shard_rows, py::Framework framework) {
        const TensorView i = view_of(row_ids, kOp, "row_ids");
        const TensorView r = view_of(rows, kOp, "rows");
        return py::to_python(py::without_gil([&] { return dist::embedding_dense_grad(i, r, shard_rows); }), framework);
      },
      nb::arg("row_ids"), nb::arg("rows"), nb::arg("shard_rows"), nb::arg("framework"));
  d.def(
      "embedding_sgd_update",
      [](const py::OutArray& weight, const py::InArray& row_ids, const py::InArray& rows, double lr) {
        const char* op = "ShardedEmbeddingBag.sgd_update";
        const TensorView w = view_of(weight, op, "weight");
        const TensorView i = view_of(row_ids, op, "row_ids");
        const TensorView r = view_of(rows, op, "rows");
        py::without_gil([&] { dist::embedding_sgd_update(w, i, r, lr); });
      },
      nb::arg("weight"), nb::arg("row_ids"), nb::arg("rows"), nb::arg("lr"));
  d.def(
      "embedding_adagrad_update",
      [](const py::OutArray& weight, const py::OutArray& state_sum, const py::InArray& row_ids, const py::InArray& rows,
         double lr, double eps) {
        const char* op = "ShardedEmbeddingBag.adagrad_update";
        const TensorView w = view_of(weight, op, "weight");
        const TensorView s = view_of(state_sum, op, "state_sum");
        const TensorView i = view_of(row_ids, op, "row_ids");
        const TensorView r = view_of(rows, op, "rows");
        py::without_gil([&] { dist::embedding_adagrad_update(w, s, i, r, lr, eps); });
      },
      nb::arg("weight"), nb::arg("state_sum"), nb::arg("row_ids"), nb::arg("rows"), nb::arg("lr"), nb::arg("eps"));
}

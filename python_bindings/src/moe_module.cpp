// scatterx._C.dist's MoE functions (dist/moe.h), for scatterx.distributed.moe:
// dispatch returns an opaque handle that combine and the backward functions
// take; arrays in and out through DLPack, the GIL released around each call.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <utility>

#include "arrays.h"
#include "dist/moe.h"
#include "dist/moe_routing.h"

namespace nb = nanobind;
namespace dist = scatterx::dist;

namespace {

using scatterx::Tensor;
using scatterx::TensorView;
using scatterx::python::Framework;
using scatterx::python::InArray;
using scatterx::python::to_python;
using scatterx::python::view_of;
using scatterx::python::without_gil;

struct PyMoeHandle {
  std::shared_ptr<const dist::MoeHandle> handle;
};

}  // namespace

void register_moe(nb::module_& m) {
  nb::module_ d = nb::borrow<nb::module_>(m.attr("dist"));
  nb::class_<PyMoeHandle>(d, "MoeHandle", "What moe_combine and the backward functions need from moe_dispatch.")
      .def_prop_ro("send_splits", [](const PyMoeHandle& h) { return h.handle->send_splits; })
      .def_prop_ro("recv_splits", [](const PyMoeHandle& h) { return h.handle->recv_splits; })
      .def_prop_ro("rows", [](const PyMoeHandle& h) { return h.handle->rows; })
      .def_prop_ro("tokens", [](const PyMoeHandle& h) { return h.handle->tokens; })
      .def_prop_ro("hidden", [](const PyMoeHandle& h) { return h.handle->hidden; });

  d.def(
      "moe_dispatch",
      [](const InArray& x, const InArray& topk_idx, const InArray& topk_weights, int64_t num_experts,
         const dist::Communicator& comm, std::optional<double> capacity_factor, int64_t pad_to_multiple,
         Framework framework) {
        const char* op = "moe.dispatch";
        const TensorView xv = view_of(x, op, "x");
        const TensorView iv = view_of(topk_idx, op, "topk_idx");
        const TensorView wv = view_of(topk_weights, op, "topk_weights");
        dist::MoeOptions options{capacity_factor, pad_to_multiple};
        dist::MoeDispatch r = without_gil([&] { return dist::moe_dispatch(xv, iv, wv, num_experts, comm, options); });
        return nb::make_tuple(to_python(std::move(r.recv_x), framework),
                              to_python(std::move(r.tokens_per_expert), framework), PyMoeHandle{std::move(r.handle)});
      },
      nb::arg("x"), nb::arg("topk_idx"), nb::arg("topk_weights"), nb::arg("num_experts"), nb::arg("comm"),
      nb::arg("capacity_factor").none(), nb::arg("pad_to_multiple"), nb::arg("framework"),
      "Returns (recv_x, tokens_per_expert, handle); see dist/moe.h.");
  d.def(
      "moe_failed_checks",
      [](const dist::Communicator& comm) { without_gil([&] { dist::moe_detail::agree_as_failed(comm); }); },
      nb::arg("comm"), "Takes part in moe_dispatch's agreement as a rank whose own checks failed.");
  d.def(
      "moe_combine",
      [](const InArray& expert_out, const PyMoeHandle& h, Framework framework) {
        const TensorView eo = view_of(expert_out, "moe.combine", "expert_out");
        return to_python(without_gil([&] { return dist::moe_combine(eo, *h.handle); }), framework);
      },
      nb::arg("expert_out"), nb::arg("handle"), nb::arg("framework"));
  d.def(
      "moe_dispatch_backward",
      [](const InArray& grad_recv_x, const PyMoeHandle& h, Framework framework) {
        const TensorView g = view_of(grad_recv_x, "moe.dispatch_backward", "grad_recv_x");
        return to_python(without_gil([&] { return dist::moe_dispatch_backward(g, *h.handle); }), framework);
      },
      nb::arg("grad_recv_x"), nb::arg("handle"), nb::arg("framework"));
  d.def(
      "moe_combine_backward",
      [](const InArray& grad_y, const InArray& expert_out, const PyMoeHandle& h, Framework framework) {
        const char* op = "moe.combine_backward";
        const TensorView g = view_of(grad_y, op, "grad_y");
        const TensorView eo = view_of(expert_out, op, "expert_out");
        dist::MoeCombineGrads r = without_gil([&] { return dist::moe_combine_backward(g, eo, *h.handle); });
        return nb::make_tuple(to_python(std::move(r.grad_expert_out), framework),
                              to_python(std::move(r.grad_topk_weights), framework));
      },
      nb::arg("grad_y"), nb::arg("expert_out"), nb::arg("handle"), nb::arg("framework"),
      "Returns (grad_expert_out, grad_topk_weights).");
}

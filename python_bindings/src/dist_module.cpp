// scatterx._C.dist: the distributed layer (dist/dist.h) on DLPack arrays.
// The torch.distributed-style API lives in Python (scatterx/distributed.py);
// this submodule converts arrays (zero copy: outputs are written in place),
// releases the GIL around every collective and maps the dist errors:
//   MismatchError -> scatterx._C.dist.MismatchError (a DistError, RuntimeError)
//   TimeoutError  -> scatterx._C.dist.DistTimeoutError (a DistError and a
//                    builtin TimeoutError)
// ArgumentError, DTypeError and the rest go through module.cpp's translator
// (ValueError, TypeError, ...).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arrays.h"
#include "dist/dist.h"

namespace nb = nanobind;

namespace {

namespace dist = scatterx::dist;
using scatterx::TensorView;
using scatterx::python::Framework;
using scatterx::python::InArray;
using scatterx::python::OutArray;
using scatterx::python::to_python;
using scatterx::python::view_of;
using scatterx::python::without_gil;

// The Python exception classes (created once, owned by the submodule).
PyObject* g_dist_error = nullptr;
PyObject* g_mismatch_error = nullptr;
PyObject* g_timeout_error = nullptr;

template <typename Array>
std::vector<TensorView> views_of(const std::vector<Array>& arrays, const char* op, const char* name) {
  std::vector<TensorView> views;
  views.reserve(arrays.size());
  for (const Array& a : arrays) views.push_back(view_of(a, op, name));
  return views;
}

// A Work that keeps the arrays of its collective alive until it completed:
// the progress thread reads and writes them after the call returned. Python
// owns it, so it is destroyed with the GIL held (the arrays' owners are
// Python objects).
class PyWork {
 public:
  PyWork(dist::Work work, std::vector<OutArray> outs, std::vector<InArray> ins)
      : work_(std::move(work)), outs_(std::move(outs)), ins_(std::move(ins)) {}
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;

  ~PyWork() {
    // Dropped before wait(): let the collective finish before its memory may go.
    if (!outs_.empty() || !ins_.empty()) {
      try {
        nb::gil_scoped_release release;
        work_.wait();
      } catch (...) {  // the error was the caller's to collect through wait()
      }
    }
  }

  bool wait() {
    try {
      without_gil([&] { work_.wait(); });
    } catch (...) {
      release_arrays();
      throw;
    }
    release_arrays();
    return true;
  }

  bool is_completed() const { return work_.is_completed(); }

 private:
  void release_arrays() {
    outs_.clear();
    ins_.clear();
  }

  dist::Work work_;
  std::vector<OutArray> outs_;
  std::vector<InArray> ins_;
};

double seconds_of(std::chrono::duration<double> d) { return d.count(); }

}  // namespace

void register_dist(nb::module_& m) {
  nb::module_ d = m.def_submodule(
      "dist", "scatterx's distributed layer over MPI (see scatterx.distributed for the torch.distributed-style API)");

  // DistError(RuntimeError), as torch.distributed.DistError; MismatchError and
  // DistTimeoutError (also a builtin TimeoutError) derive from it.
  g_dist_error = PyErr_NewExceptionWithDoc("scatterx._C.dist.DistError",
                                           "A collective failed across ranks (as torch.distributed.DistError).",
                                           PyExc_RuntimeError, nullptr);
  g_mismatch_error = PyErr_NewExceptionWithDoc(
      "scatterx._C.dist.MismatchError",
      "Ranks disagree about a collective's arguments (split sizes, dtypes, shapes); raised on every rank.",
      g_dist_error, nullptr);
  nb::object timeout_bases = nb::make_tuple(nb::handle(g_dist_error), nb::handle(PyExc_TimeoutError));
  g_timeout_error = PyErr_NewExceptionWithDoc(
      "scatterx._C.dist.DistTimeoutError",
      "A collective did not finish within the communicator's timeout; the communicator is unusable afterwards.",
      timeout_bases.ptr(), nullptr);
  if (g_dist_error == nullptr || g_mismatch_error == nullptr || g_timeout_error == nullptr) throw nb::python_error();
  d.attr("DistError") = nb::handle(g_dist_error);
  d.attr("MismatchError") = nb::handle(g_mismatch_error);
  d.attr("DistTimeoutError") = nb::handle(g_timeout_error);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const dist::MismatchError& e) {
      PyErr_SetString(g_mismatch_error, e.what());
    } catch (const dist::TimeoutError& e) {
      PyErr_SetString(g_timeout_error, e.what());
    }
  });

  nb::enum_<dist::ReduceOp>(d, "ReduceOp", "Reductions of the collectives (torch.distributed.ReduceOp).")
      .value("Sum", dist::ReduceOp::Sum)
      .value("Prod", dist::ReduceOp::Prod)
      .value("Min", dist::ReduceOp::Min)
      .value("Max", dist::ReduceOp::Max)
      .value("Avg", dist::ReduceOp::Avg);

  nb::class_<dist::Communicator>(
      d, "Communicator",
      "An MPI communicator scatterx owns (a duplicate, freed with the last reference). Copies share it.")
      .def_static(
          "world", [] { return without_gil([] { return dist::Communicator::world(); }); },
          "A duplicate of MPI_COMM_WORLD (initializes MPI if the application has not). Collective.")
      .def_static(
          "from_fortran_handle",
          [](int64_t handle) { return without_gil([&] { return dist::Communicator::from_fortran_handle(handle); }); },
          nb::arg("handle"),
          "A duplicate of an application's communicator given as its Fortran handle (mpi4py: comm.py2f()). "
          "Collective over that communicator.")
      .def(
          "split",
          [](const dist::Communicator& self, int color, int key) {
            return without_gil([&] { return self.split(color, key); });
          },
          nb::arg("color"), nb::arg("key"),
          "Collective: ranks with the same color form a new communicator, ordered by key (ties by rank). "
          "A negative color opts out and gives an invalid communicator.")
      .def("valid", &dist::Communicator::valid, "False for the result of split() with a negative color.")
      .def("rank", &dist::Communicator::rank)
      .def("size", &dist::Communicator::size)
      .def(
          "set_timeout",
          [](dist::Communicator& self, double seconds) { self.set_timeout(std::chrono::duration<double>(seconds)); },
          nb::arg("seconds"),
          "Seconds a collective may wait for its peers before raising DistTimeoutError "
          "(default: SCATTERX_DIST_TIMEOUT, else 600).")
      .def(
          "timeout", [](const dist::Communicator& self) { return seconds_of(self.timeout()); },
          "The timeout in seconds.")
      .def("set_checks", &dist::Communicator::set_checks, nb::arg("enabled"),
           "Cross-rank argument checks for the dense collectives (default: SCATTERX_DIST_CHECKS=1).")
      .def("checks", &dist::Communicator::checks);

  nb::class_<PyWork>(d, "Work", "Completion handle of an async collective; keeps its arrays alive until it is done.")
      .def("wait", &PyWork::wait,
           "Blocks (GIL released) until the collective finished; raises its error, if any. Returns True.")
      .def("is_completed", &PyWork::is_completed, "True once the collective finished; never blocks.");

  // ---- collectives: the synchronous form, and *_async returning a Work ----

  d.def(
      "all_gather",
      [](const std::vector<OutArray>& outputs, const InArray& input, const dist::Communicator& comm) {
        const auto outs = views_of(outputs, "all_gather", "outputs");
        const TensorView in = view_of(input, "all_gather", "input");
        without_gil([&] { dist::all_gather(outs, in, comm); });
      },
      nb::arg("outputs"), nb::arg("input"), nb::arg("comm"), "outputs[i] = rank i's input.");
  d.def(
      "all_gather_async",
      [](std::vector<OutArray> outputs, const InArray& input, const dist::Communicator& comm) {
        const auto outs = views_of(outputs, "all_gather", "outputs");
        const TensorView in = view_of(input, "all_gather", "input");
        dist::Work w = without_gil([&] { return dist::all_gather_async(outs, in, comm); });
        return new PyWork(std::move(w), std::move(outputs), {input});
      },
      nb::arg("outputs"), nb::arg("input"), nb::arg("comm"), nb::rv_policy::take_ownership);

  d.def(
      "all_gather_into_tensor",
      [](const OutArray& output, const InArray& input, const dist::Communicator& comm) {
        const TensorView out = view_of(output, "all_gather_into_tensor", "output");
        const TensorView in = view_of(input, "all_gather_into_tensor", "input");
        without_gil([&] { dist::all_gather_into_tensor(out, in, comm); });
      },
      nb::arg("output"), nb::arg("input"), nb::arg("comm"),
      "output = the ranks' inputs concatenated along dim 0 (or stacked).");
  d.def(
      "all_gather_into_tensor_async",
      [](const OutArray& output, const InArray& input, const dist::Communicator& comm) {
        const TensorView out = view_of(output, "all_gather_into_tensor", "output");
        const TensorView in = view_of(input, "all_gather_into_tensor", "input");
        dist::Work w = without_gil([&] { return dist::all_gather_into_tensor_async(out, in, comm); });
        return new PyWork(std::move(w), {output}, {input});
      },
      nb::arg("output"), nb::arg("input"), nb::arg("comm"), nb::rv_policy::take_ownership);

  d.def(
      "reduce_scatter",
      [](const OutArray& output, const std::vector<InArray>& inputs, dist::ReduceOp op,
         const dist::Communicator& comm) {
        const TensorView out = view_of(output, "reduce_scatter", "output");
        const auto ins = views_of(inputs, "reduce_scatter", "inputs");
        without_gil([&] { dist::reduce_scatter(out, ins, op, comm); });
      },
      nb::arg("output"), nb::arg("inputs"), nb::arg("op"), nb::arg("comm"),
      "output = op over ranks r of rank r's inputs[rank].");
  d.def(
      "reduce_scatter_async",
      [](const OutArray& output, std::vector<InArray> inputs, dist::ReduceOp op, const dist::Communicator& comm) {
        const TensorView out = view_of(output, "reduce_scatter", "output");
        const auto ins = views_of(inputs, "reduce_scatter", "inputs");
        dist::Work w = without_gil([&] { return dist::reduce_scatter_async(out, ins, op, comm); });
        return new PyWork(std::move(w), {output}, std::move(inputs));
      },
      nb::arg("output"), nb::arg("inputs"), nb::arg("op"), nb::arg("comm"), nb::rv_policy::take_ownership);

  d.def(
      "reduce_scatter_tensor",
      [](const OutArray& output, const InArray& input, dist::ReduceOp op, const dist::Communicator& comm) {
        const TensorView out = view_of(output, "reduce_scatter_tensor", "output");
        const TensorView in = view_of(input, "reduce_scatter_tensor", "input");
        without_gil([&] { dist::reduce_scatter_tensor(out, in, op, comm); });
      },
      nb::arg("output"), nb::arg("input"), nb::arg("op"), nb::arg("comm"),
      "output = op over ranks of their block `rank` of input (dim 0).");
  d.def(
      "reduce_scatter_tensor_async",
      [](const OutArray& output, const InArray& input, dist::ReduceOp op, const dist::Communicator& comm) {
        const TensorView out = view_of(output, "reduce_scatter_tensor", "output");
        const TensorView in = view_of(input, "reduce_scatter_tensor", "input");
        dist::Work w = without_gil([&] { return dist::reduce_scatter_tensor_async(out, in, op, comm); });
        return new PyWork(std::move(w), {output}, {input});
      },
      nb::arg("output"), nb::arg("input"), nb::arg("op"), nb::arg("comm"), nb::rv_policy::take_ownership);

  d.def(
      "all_reduce",
      [](const OutArray& tensor, dist::ReduceOp op, const dist::Communicator& comm) {
        const TensorView t = view_of(tensor, "all_reduce", "tensor");
        without_gil([&] { dist::all_reduce(t, op, comm); });
      },
      nb::arg("tensor"), nb::arg("op"), nb::arg("comm"), "tensor = op over ranks of tensor.");
  d.def(
      "all_reduce_async",
      [](const OutArray& tensor, dist::ReduceOp op, const dist::Communicator& comm) {
        const TensorView t = view_of(tensor, "all_reduce", "tensor");
        dist::Work w = without_gil([&] { return dist::all_reduce_async(t, op, comm); });
        return new PyWork(std::move(w), {tensor}, {});
      },
      nb::arg("tensor"), nb::arg("op"), nb::arg("comm"), nb::rv_policy::take_ownership);

  d.def(
      "broadcast",
      [](const OutArray& tensor, int root, const dist::Communicator& comm) {
        const TensorView t = view_of(tensor, "broadcast", "tensor");
        without_gil([&] { dist::broadcast(t, root, comm); });
      },
      nb::arg("tensor"), nb::arg("root"), nb::arg("comm"), "tensor = root's tensor (root: a rank of comm).");
  d.def(
      "broadcast_async",
      [](const OutArray& tensor, int root, const dist::Communicator& comm) {
        const TensorView t = view_of(tensor, "broadcast", "tensor");
        dist::Work w = without_gil([&] { return dist::broadcast_async(t, root, comm); });
        return new PyWork(std::move(w), {tensor}, {});
      },
      nb::arg("tensor"), nb::arg("root"), nb::arg("comm"), nb::rv_policy::take_ownership);

  d.def(
      "all_to_all",
      [](const std::vector<OutArray>& outputs, const std::vector<InArray>& inputs, const dist::Communicator& comm) {
        const auto outs = views_of(outputs, "all_to_all", "outputs");
        const auto ins = views_of(inputs, "all_to_all", "inputs");
        without_gil([&] { dist::all_to_all(outs, ins, comm); });
      },
      nb::arg("outputs"), nb::arg("inputs"), nb::arg("comm"), "outputs[i] = rank i's inputs[rank].");
  d.def(
      "all_to_all_async",
      [](std::vector<OutArray> outputs, std::vector<InArray> inputs, const dist::Communicator& comm) {
        const auto outs = views_of(outputs, "all_to_all", "outputs");
        const auto ins = views_of(inputs, "all_to_all", "inputs");
        dist::Work w = without_gil([&] { return dist::all_to_all_async(outs, ins, comm); });
        return new PyWork(std::move(w), std::move(outputs), std::move(inputs));
      },
      nb::arg("outputs"), nb::arg("inputs"), nb::arg("comm"), nb::rv_policy::take_ownership);

  d.def(
      "all_to_all_single",
      [](const OutArray& output, const InArray& input, const std::vector<int64_t>& output_split_sizes,
         const std::vector<int64_t>& input_split_sizes, const dist::Communicator& comm) {
        const TensorView out = view_of(output, "all_to_all_single", "output");
        const TensorView in = view_of(input, "all_to_all_single", "input");
        without_gil([&] { dist::all_to_all_single(out, in, output_split_sizes, input_split_sizes, comm); });
      },
      nb::arg("output"), nb::arg("input"), nb::arg("output_split_sizes"), nb::arg("input_split_sizes"), nb::arg("comm"),
      "Rows of input go to the ranks by input_split_sizes; empty split lists mean equal splits.");
  d.def(
      "all_to_all_single_async",
      [](const OutArray& output, const InArray& input, const std::vector<int64_t>& output_split_sizes,
         const std::vector<int64_t>& input_split_sizes, const dist::Communicator& comm) {
        const TensorView out = view_of(output, "all_to_all_single", "output");
        const TensorView in = view_of(input, "all_to_all_single", "input");
        dist::Work w = without_gil(
            [&] { return dist::all_to_all_single_async(out, in, output_split_sizes, input_split_sizes, comm); });
        return new PyWork(std::move(w), {output}, {input});
      },
      nb::arg("output"), nb::arg("input"), nb::arg("output_split_sizes"), nb::arg("input_split_sizes"), nb::arg("comm"),
      nb::rv_policy::take_ownership);

  d.def(
      "all_to_all_v",
      [](const InArray& input, const std::vector<int64_t>& send_splits, const dist::Communicator& comm,
         Framework framework) {
        const TensorView in = view_of(input, "all_to_all_v", "input");
        dist::AllToAllVResult r = without_gil([&] { return dist::all_to_all_v(in, send_splits, comm); });
        nb::object out = to_python(std::move(r.output), framework);
        nb::list splits;
        for (int64_t s : r.recv_splits) splits.append(s);
        return nb::make_tuple(out, splits);
      },
      nb::arg("input"), nb::arg("send_splits"), nb::arg("comm"), nb::arg("framework"),
      "send_splits[i] rows of input go to rank i; returns (the received rows in rank order, the rows per rank).");
}

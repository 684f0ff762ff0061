// scatterx._C.dist: the distributed layer (dist/dist.h) on DLPack arrays.
// The torch.distributed-style API lives in Python (scatterx/distributed/);
// this submodule converts arrays (zero copy: outputs are written in place),
// releases the GIL around every collective and maps the dist errors:
//   MismatchError -> scatterx._C.dist.MismatchError (a DistError, RuntimeError)
//   TimeoutError  -> scatterx._C.dist.DistTimeoutError (a DistError and a
//                    builtin TimeoutError)
// ArgumentError, DTypeError and the rest go through module.cpp's translator
// (ValueError, TypeError, ...).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
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

// A Work that keeps the arrays of its collective alive until it completed:
// the progress thread reads and writes them after the call returned. Python
// owns it, so it is destroyed with the GIL held (the arrays' owners are
// Python objects).
//
// A point-to-point Work (`message`) dropped before it completed is not waited
// for (a receive whose sender never comes would block until the timeout and
// break the communicator): dist cancels a receive and abandons a send, and
// its arrays are kept alive for good, as MPI may still use them.
class PyWork {
 public:
  PyWork(dist::Work work, std::vector<OutArray> outs, std::vector<InArray> ins, bool message = false)
      : work_(std::move(work)), outs_(std::move(outs)), ins_(std::move(ins)), message_(message) {}
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;

  ~PyWork() {
    if (outs_.empty() && ins_.empty()) return;
    if (message_) {
      if (!work_.is_completed()) {
        new std::vector<OutArray>(std::move(outs_));  // never freed: see above
        new std::vector<InArray>(std::move(ins_));
      }
      return;
    }
    // Dropped before wait(): let the collective finish before its memory may go.
    try {
      nb::gil_scoped_release release;
      work_.wait();
    } catch (...) {  // the error was the caller's to collect through wait()
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

  // A receive's sender (a rank of its communicator), once it completed.
  int source_rank() {
    wait();
    return without_gil([&] { return work_.source_rank(); });
  }

 private:
  void release_arrays() {
    outs_.clear();
    ins_.clear();
  }

  dist::Work work_;
  std::vector<OutArray> outs_;
  std::vector<InArray> ins_;
  bool message_;
};

double seconds_of(std::chrono::duration<double> d) { return d.count(); }

// CommunicatorOptions from the keyword arguments (None: the environment's,
// or a split's parent's).
dist::CommunicatorOptions options_of(std::optional<double> timeout, std::optional<bool> checks,
                                     std::optional<int64_t> chunk_bytes, std::optional<bool> shared_memory) {
  dist::CommunicatorOptions o;
  if (timeout) o.timeout = std::chrono::duration<double>(*timeout);
  o.checks = checks;
  o.chunk_bytes = chunk_bytes;
  o.shared_memory = shared_memory;
  return o;
}

#define SCATTERX_PY_OPTION_ARGS                                                                                        \
  nb::kw_only(), nb::arg("timeout") = nb::none(), nb::arg("checks") = nb::none(), nb::arg("chunk_bytes") = nb::none(), \
                 nb::arg("shared_memory") = nb::none()
#define SCATTERX_PY_OPTIONS_DOC                                                                             \
  " Options (None: the SCATTERX_DIST_* environment variable's value): timeout (seconds), checks "           \
  "(cross-rank argument checks), chunk_bytes (the rings' pipelining chunk), shared_memory (reduce-scatter " \
  "through shared memory on one host); all but timeout must agree across ranks."

// The arrays of one collective call, kept for the Work of its asynchronous
// form (the progress thread uses them after the call returned). Applied to a
// Python argument, it gives what dist takes: a view of an array (a vector of
// views of a list), anything else (op, root, split sizes, comm) as it is.
struct Kept {
  std::vector<OutArray> outs;
  std::vector<InArray> ins;

  TensorView operator()(const OutArray& a, const char* op, const char* name) {
    outs.push_back(a);
    return view_of(a, op, name);
  }
  TensorView operator()(const InArray& a, const char* op, const char* name) {
    ins.push_back(a);
    return view_of(a, op, name);
  }
  std::vector<TensorView> operator()(const std::vector<OutArray>& a, const char* op, const char* name) {
    return views(a, op, name);
  }
  std::vector<TensorView> operator()(const std::vector<InArray>& a, const char* op, const char* name) {
    return views(a, op, name);
  }
  template <typename T>
  const T& operator()(const T& value, const char*, const char*) {
    return value;
  }

 private:
  template <typename Array>
  std::vector<TensorView> views(const std::vector<Array>& arrays, const char* op, const char* name) {
    std::vector<TensorView> v;
    v.reserve(arrays.size());
    for (const Array& a : arrays) v.push_back((*this)(a, op, name));
    return v;
  }
};

// Binds collective `op` as `op` (runs it, GIL released) and `op_async`
// (queues it and returns a Work holding its arrays) from dist's pair of
// functions. Py are the Python argument types (OutArray for what is written,
// InArray for what is read), one per name in `names`.
template <typename... Py, typename... Params, size_t... I>
void def_collective_pair(nb::module_& d, const char* op, void (*sync)(Params...), dist::Work (*async)(Params...),
                         const std::array<const char*, sizeof...(Py)>& names, const char* doc,
                         std::index_sequence<I...>) {
  static_assert(sizeof...(Py) == sizeof...(Params), "one Python argument per parameter of the collective");
  // A braced list converts left to right: the first bad argument is the one reported.
  auto views = [op, names](Kept& keep, const Py&... args) {
    return std::tuple<decltype(keep(args, op, names[I]))...>{keep(args, op, names[I])...};
  };
  d.def(
      op,
      [views, sync](const Py&... args) {
        Kept keep;
        const auto call = views(keep, args...);
        without_gil([&] { std::apply(sync, call); });
      },
      nb::arg(names[I])..., doc);
  if (async == nullptr) return;
  d.def((std::string(op) + "_async").c_str(),
        [views, async](const Py&... args) {
          Kept keep;
          const auto call = views(keep, args...);
          dist::Work w = without_gil([&] { return std::apply(async, call); });
          return new PyWork(std::move(w), std::move(keep.outs), std::move(keep.ins));
        },
        nb::arg(names[I])..., nb::rv_policy::take_ownership);
}

template <typename... Py, typename... Params>
void def_collective(nb::module_& d, const char* op, void (*sync)(Params...), dist::Work (*async)(Params...),
                    const std::array<const char*, sizeof...(Py)>& names, const char* doc) {
  def_collective_pair<Py...>(d, op, sync, async, names, doc, std::index_sequence_for<Py...>{});
}

// A collective that dist has only in blocking form (the rooted ones).
template <typename... Py, typename... Params>
void def_blocking_collective(nb::module_& d, const char* op, void (*sync)(Params...),
                             const std::array<const char*, sizeof...(Py)>& names, const char* doc) {
  def_collective_pair<Py...>(d, op, sync, static_cast<dist::Work (*)(Params...)>(nullptr), names, doc,
                             std::index_sequence_for<Py...>{});
}

// DistError(RuntimeError), as torch.distributed.DistError; MismatchError and
// DistTimeoutError (also a builtin TimeoutError) derive from it.
void register_dist_errors(nb::module_& d) {
  g_dist_error = PyErr_NewExceptionWithDoc("scatterx._C.dist.DistError",
                                           "A collective failed across ranks (as torch.distributed.DistError).",
                                           PyExc_RuntimeError, nullptr);
  g_mismatch_error = PyErr_NewExceptionWithDoc(
      "scatterx._C.dist.MismatchError",
      "Ranks disagree about a collective's arguments (split sizes, dtypes, shapes); raised on every rank, "
      "naming the ranks and both values (torch.distributed checks this only with "
      "TORCH_DISTRIBUTED_DEBUG=DETAIL).",
      g_dist_error, nullptr);
  nb::object timeout_bases = nb::make_tuple(nb::handle(g_dist_error), nb::handle(PyExc_TimeoutError));
  g_timeout_error = PyErr_NewExceptionWithDoc(
      "scatterx._C.dist.DistTimeoutError",
      "A collective did not finish within the communicator's timeout; the communicator is unusable afterwards. "
      "Also a builtin TimeoutError (torch.distributed raises a DistBackendError or RuntimeError there).",
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
}

// ReduceOp, Communicator (with its options) and Work.
void register_communicator(nb::module_& d) {
  // From dist's list; _C.dist.reduce_op_name gives torch's spelling ("sum", "product", ...).
  nb::enum_<dist::ReduceOp> reduce_op(d, "ReduceOp", "Reductions of the collectives (torch.distributed.ReduceOp).");
#define SCATTERX_PY_REDUCE_OP(name, str) reduce_op.value(#name, dist::ReduceOp::name);
  SCATTERX_FORALL_DIST_REDUCE_OPS(SCATTERX_PY_REDUCE_OP)
#undef SCATTERX_PY_REDUCE_OP
  d.def("reduce_op_name", &dist::reduce_op_name, nb::arg("op"), "torch.distributed's name of op: \"sum\", ...");

  nb::class_<dist::Communicator>(
      d, "Communicator",
      "An MPI communicator scatterx owns (a duplicate, freed with the last reference). Copies share it.")
      .def_static(
          "world",
          [](std::optional<double> timeout, std::optional<bool> checks, std::optional<int64_t> chunk_bytes,
             std::optional<bool> shared_memory) {
            const auto options = options_of(timeout, checks, chunk_bytes, shared_memory);
            return without_gil([&] { return dist::Communicator::world(options); });
          },
          SCATTERX_PY_OPTION_ARGS,
          "A duplicate of MPI_COMM_WORLD (initializes MPI if the application has not). "
          "Collective." SCATTERX_PY_OPTIONS_DOC)
      .def_static(
          "from_fortran_handle",
          [](int64_t handle, std::optional<double> timeout, std::optional<bool> checks,
             std::optional<int64_t> chunk_bytes, std::optional<bool> shared_memory) {
            const auto options = options_of(timeout, checks, chunk_bytes, shared_memory);
            return without_gil([&] { return dist::Communicator::from_fortran_handle(handle, options); });
          },
          nb::arg("handle"), SCATTERX_PY_OPTION_ARGS,
          "A duplicate of an application's communicator given as its Fortran handle (mpi4py: comm.py2f()). "
          "Collective over that communicator." SCATTERX_PY_OPTIONS_DOC)
      .def(
          "split",
          [](const dist::Communicator& self, int color, int key, std::optional<double> timeout,
             std::optional<bool> checks, std::optional<int64_t> chunk_bytes, std::optional<bool> shared_memory) {
            const auto options = options_of(timeout, checks, chunk_bytes, shared_memory);
            return without_gil([&] { return self.split(color, key, options); });
          },
          nb::arg("color"), nb::arg("key"), SCATTERX_PY_OPTION_ARGS,
          "Collective: ranks with the same color form a new communicator, ordered by key (ties by rank). "
          "A negative color opts out and gives an invalid communicator. Unset options are this one's.")
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
      .def("checks", &dist::Communicator::checks)
      .def(
          "options",
          [](const dist::Communicator& self) {
            const dist::CommunicatorOptions o = self.options();
            nb::dict d;
            d["timeout"] = seconds_of(*o.timeout);
            d["checks"] = *o.checks;
            d["chunk_bytes"] = *o.chunk_bytes;
            d["shared_memory"] = *o.shared_memory;
            return d;
          },
          "The settings in force: a dict of timeout (seconds), checks, chunk_bytes, shared_memory.");

  nb::class_<PyWork>(d, "Work", "Completion handle of an async collective; keeps its arrays alive until it is done.")
      .def("wait", &PyWork::wait,
           "Blocks (GIL released) until the collective finished; raises its error, if any. Returns True.")
      .def("is_completed", &PyWork::is_completed, "True once the collective finished; never blocks.")
      .def("source_rank", &PyWork::source_rank,
           "The Work of a receive: waits, then returns the sender's rank in the communicator.");
}

// The Work of a message, holding its array (read by a send, written by a receive).
PyWork* message_work(dist::Work w, const InArray& a) { return new PyWork(std::move(w), {}, {a}, true); }
PyWork* message_work(dist::Work w, const OutArray& a) { return new PyWork(std::move(w), {a}, {}, true); }

// Binds dist's f(tensor, peer, comm, tag) as `name`: Array is InArray for
// what is sent, OutArray for what is received; a Work comes back as a PyWork
// holding the array.
template <typename Array, typename R>
void def_message(nb::module_& d, const char* name, R (*f)(const TensorView&, int, const dist::Communicator&, int),
                 const char* peer, const char* doc) {
  d.def(
      name,
      [name, f](const Array& tensor, int rank, const dist::Communicator& comm, int tag) {
        const TensorView t = view_of(tensor, name, "tensor");
        if constexpr (std::is_same_v<R, dist::Work>) {
          return message_work(without_gil([&] { return f(t, rank, comm, tag); }), tensor);
        } else {
          return without_gil([&] { return f(t, rank, comm, tag); });
        }
      },
      nb::arg("tensor"), nb::arg(peer), nb::arg("comm"), nb::arg("tag") = 0, nb::rv_policy::take_ownership, doc);
}

// send, recv, isend, irecv, batch_isend_irecv and monitored_barrier
// (dist.h's point-to-point sections); ranks are the communicator's.
void register_point_to_point(nb::module_& d) {
  using dist::Communicator;
  d.attr("ANY_SOURCE") = dist::kAnySource;
  def_message<InArray>(d, "send", dist::send, "dst", "Sends tensor to rank dst (not this rank); returns once it left.");
  def_message<OutArray>(d, "recv", dist::recv, "src",
                        "Receives into tensor from rank src (ANY_SOURCE: any rank); returns the sender.");
  def_message<InArray>(d, "isend", dist::isend, "dst", "Posts the send of tensor to rank dst; returns its Work.");
  def_message<OutArray>(d, "irecv", dist::irecv, "src",
                        "Posts the receive into tensor from rank src (ANY_SOURCE: any rank); returns its Work.");
  d.def(
      "batch_isend_irecv",
      [](const std::vector<std::tuple<bool, nb::object, int, int>>& ops, const Communicator& comm) {
        std::vector<dist::P2POp> batch;
        std::vector<std::pair<std::vector<OutArray>, std::vector<InArray>>> kept;
        for (const auto& [is_send, array, peer, tag] : ops) {
          const char* name = is_send ? "isend" : "irecv";
          dist::P2POp p{is_send ? dist::P2POp::Kind::Send : dist::P2POp::Kind::Recv, {}, peer, tag};
          if (is_send) {
            kept.push_back({{}, {nb::cast<InArray>(array)}});
            p.tensor = view_of(kept.back().second[0], name, "tensor");
          } else {
            kept.push_back({{nb::cast<OutArray>(array)}, {}});
            p.tensor = view_of(kept.back().first[0], name, "tensor");
          }
          batch.push_back(p);
        }
        std::vector<dist::Work> works = without_gil([&] { return dist::batch_isend_irecv(batch, comm); });
        nb::list out;
        for (size_t i = 0; i < works.size(); ++i) {
          out.append(
              nb::cast(new PyWork(std::move(works[i]), std::move(kept[i].first), std::move(kept[i].second), true),
                       nb::rv_policy::take_ownership));
        }
        return out;
      },
      nb::arg("ops"), nb::arg("comm"),
      "Posts every (is_send, tensor, peer, tag) op in order, after checking them all; returns their Works.");
  d.def(
      "monitored_barrier",
      [](const Communicator& comm, double timeout, bool wait_all_ranks) {
        without_gil([&] { dist::monitored_barrier(comm, std::chrono::duration<double>(timeout), wait_all_ranks); });
      },
      nb::arg("comm"), nb::arg("timeout"), nb::arg("wait_all_ranks") = false,
      "Rank 0 waits up to timeout seconds for every rank; on a miss every rank raises DistTimeoutError naming "
      "the missing ranks, and the communicator is unusable afterwards.");
}

// The collectives: the synchronous form, and *_async returning a Work.
void register_collectives(nb::module_& d) {
  using dist::Communicator;
  using Outs = std::vector<OutArray>;
  using Ins = std::vector<InArray>;
  using Splits = std::vector<int64_t>;
  def_collective<Outs, InArray, Communicator>(d, "all_gather", dist::all_gather, dist::all_gather_async,
                                              {"outputs", "input", "comm"}, "outputs[i] = rank i's input.");
  def_collective<OutArray, InArray, Communicator>(d, "all_gather_into_tensor", dist::all_gather_into_tensor,
                                                  dist::all_gather_into_tensor_async, {"output", "input", "comm"},
                                                  "output = the ranks' inputs concatenated along dim 0 (or stacked).");
  def_collective<OutArray, Ins, dist::ReduceOp, Communicator>(
      d, "reduce_scatter", dist::reduce_scatter, dist::reduce_scatter_async, {"output", "inputs", "op", "comm"},
      "output = op over ranks r of rank r's inputs[rank].");
  def_collective<OutArray, InArray, dist::ReduceOp, Communicator>(
      d, "reduce_scatter_tensor", dist::reduce_scatter_tensor, dist::reduce_scatter_tensor_async,
      {"output", "input", "op", "comm"}, "output = op over ranks of their block `rank` of input (dim 0).");
  def_collective<OutArray, dist::ReduceOp, Communicator>(d, "all_reduce", dist::all_reduce, dist::all_reduce_async,
                                                         {"tensor", "op", "comm"}, "tensor = op over ranks of tensor.");
  def_collective<OutArray, int, Communicator>(d, "broadcast", dist::broadcast, dist::broadcast_async,
                                              {"tensor", "root", "comm"},
                                              "tensor = root's tensor (root: a rank of comm).");
  def_blocking_collective<OutArray, int, dist::ReduceOp, Communicator>(
      d, "reduce", dist::reduce, {"tensor", "root", "op", "comm"},
      "On root: tensor = op over ranks of tensor; the other ranks' tensors are left as they were.");
  def_blocking_collective<Outs, InArray, int, Communicator>(
      d, "gather", dist::gather, {"gather_list", "tensor", "root", "comm"},
      "On root: gather_list[i] = rank i's tensor; the other ranks pass an empty list.");
  def_blocking_collective<OutArray, Ins, int, Communicator>(
      d, "scatter", dist::scatter, {"tensor", "scatter_list", "root", "comm"},
      "tensor = root's scatter_list[rank]; the other ranks pass an empty list.");
  def_collective<Outs, Ins, Communicator>(d, "all_to_all", dist::all_to_all, dist::all_to_all_async,
                                          {"outputs", "inputs", "comm"}, "outputs[i] = rank i's inputs[rank].");
  def_collective<OutArray, InArray, Splits, Splits, Communicator>(
      d, "all_to_all_single", dist::all_to_all_single, dist::all_to_all_single_async,
      {"output", "input", "output_split_sizes", "input_split_sizes", "comm"},
      "Rows of input go to the ranks by input_split_sizes; empty split lists mean equal splits.");

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

}  // namespace

void register_dist(nb::module_& m) {
  nb::module_ d = m.def_submodule(
      "dist", "scatterx's distributed layer over MPI (see scatterx.distributed for the torch.distributed-style API)");
  register_dist_errors(d);
  register_communicator(d);
  register_collectives(d);
  register_point_to_point(d);
}

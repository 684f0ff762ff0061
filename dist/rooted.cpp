// The rooted collectives (dist.h): reduce, gather and scatter, composed from
// all_reduce and all_to_all_single. gather and scatter are one variable-split
// all-to-all of flattened rows in which only the root receives (sends), so
// each rank's tensor crosses once; reduce is an all_reduce, into a copy off
// the root.
#include <string>
#include <vector>

#include "dist/arg_checks.h"
#include "dist/dist.h"
#include "ops/error.h"

namespace scatterx::dist {
namespace {

void check_root(const char* op, const char* name, int root, const Communicator& comm) {
  SCATTERX_CHECK(root >= 0 && root < comm.size(), ArgumentError, op, name, " expected a rank in [0, ", comm.size(),
                 "), got ", root);
}

// [rows, n] elements of like's dtype on its device, contiguous.
Tensor rows_like(const TensorView& like, int64_t rows) {
  return Tensor::empty({rows, like.numel()}, like.dtype(), like.device());
}

// t's elements as one contiguous row [1, n] (a copy only when t is strided).
TensorView one_row(const TensorView& t, Tensor& storage) {
  if (!t.is_contiguous()) storage = Tensor::clone(t);
  const TensorView c = t.is_contiguous() ? t : TensorView(storage);
  return TensorView(c.data(), c.dtype(), {1, c.numel()}, c.device());
}

// The all_to_all_single of gather and scatter. A rank whose own arguments are
// wrong (`problem` says how) still takes part, with an output one row longer
// than its splits, which the layer's cross-rank check rejects on every rank
// before any data moves: the others raise MismatchError, and this rank its
// own ArgumentError.
void exchange_rows(const char* op, const TensorView& out, const TensorView& send, const std::vector<int64_t>& recv,
                   const std::vector<int64_t>& sent, const std::string& problem, const Communicator& comm) {
  if (problem.empty()) {
    all_to_all_single(out, send, recv, sent, comm);
    return;
  }
  const Tensor longer = Tensor::empty({out.size(0) + 1, out.size(1)}, out.dtype(), out.device());
  try {
    all_to_all_single(longer, send, recv, sent, comm);
  } catch (const Error&) {  // the rejection this call was made for
  }
  detail::raise<ArgumentError>(op, problem);
}

std::string list_problem(const char* name, const std::vector<TensorView>& list, const TensorView& tensor, bool root,
                         int ws) {
  if (!root) {
    return list.empty() ? std::string()
                        : detail::concat("expected ", name, " to be empty on a rank other than the root, got ",
                                         list.size(), " tensors");
  }
  if (static_cast<int>(list.size()) != ws)
    return detail::concat("expected ", name, " to hold one tensor per rank (", ws, "), got ", list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].numel() != tensor.numel() || list[i].dtype() != tensor.dtype())
      return detail::concat("expected ", name, "[", i, "] of ", tensor.numel(), " ", dtype_name(tensor.dtype()),
                            " elements (tensor's), got ", list[i].numel(), " ", dtype_name(list[i].dtype()));
  }
  return {};
}

}  // namespace

void reduce(const TensorView& tensor, int root, ReduceOp op, const Communicator& comm) {
  check_root("reduce", "dst", root, comm);
  if (comm.rank() == root) {
    all_reduce(tensor, op, comm);
    return;
  }
  const Tensor scratch = Tensor::clone(tensor);  // the other ranks keep their tensor
  all_reduce(scratch, op, comm);
}

void gather(const std::vector<TensorView>& outputs, const TensorView& input, int root, const Communicator& comm) {
  constexpr const char* op = "gather";
  check_root(op, "dst", root, comm);
  const int ws = comm.size();
  const bool me = comm.rank() == root;
  for (const TensorView& t : outputs) check_output(op, "gather_list", t);
  const std::string problem = list_problem("gather_list", outputs, input, me, ws);
  Tensor packed;
  const TensorView send = one_row(input, packed);
  const Tensor received = rows_like(input, me && problem.empty() ? ws : 0);
  std::vector<int64_t> sent(ws, 0), recv(ws, me ? 1 : 0);
  sent[root] = 1;
  exchange_rows(op, received, send, recv, sent, problem, comm);
  if (!me) return;
  for (int r = 0; r < ws; ++r) {
    const TensorView row = TensorView(received).slice(0, r, r + 1);
    copy_(outputs[r], TensorView(row.data(), row.dtype(), outputs[r].sizes(), row.device()));
  }
}

void scatter(const TensorView& output, const std::vector<TensorView>& inputs, int root, const Communicator& comm) {
  constexpr const char* op = "scatter";
  check_root(op, "src", root, comm);
  check_output(op, "output", output);
  const int ws = comm.size();
  const bool me = comm.rank() == root;
  const std::string problem = list_problem("scatter_list", inputs, output, me, ws);
  const bool sends = me && problem.empty();
  const Tensor send = rows_like(output, sends ? ws : 0);
  for (int r = 0; sends && r < ws; ++r) {
    const TensorView row = TensorView(send).slice(0, r, r + 1);
    copy_(TensorView(row.data(), row.dtype(), inputs[r].sizes(), row.device()), inputs[r]);
  }
  const Tensor received = rows_like(output, 1);
  std::vector<int64_t> sent(ws, sends ? 1 : 0), recv(ws, 0);
  recv[root] = 1;
  exchange_rows(op, received, send, recv, sent, problem, comm);
  copy_(output, TensorView(received.data(), received.dtype(), output.sizes(), received.device()));
}

}  // namespace scatterx::dist

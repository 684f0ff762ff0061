// The all-to-alls (dist.h): all_to_all (lists), all_to_all_single (rows by
// split sizes; sync and async) and all_to_all_v (receive splits worked out
// by the metadata exchange), over the pairwise exchange on the host
// (pairwise.h) or the device (device.h).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/arg_checks.h"
#include "dist/device.h"
#include "dist/launch.h"
#include "dist/pairwise.h"
#include "dist/staging.h"
#include "ops/detail/checks.h"

namespace scatterx::dist {

namespace {

using detail::concat;
using detail::raise;

// The pairwise exchange of pairwise.h on the route's side.
void exchange(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route,
              const std::vector<const char*>& send, const std::vector<int64_t>& send_bytes,
              const std::vector<char*>& recv, const std::vector<int64_t>& recv_bytes, const char* op) {
  if (route)
    device_exchange(s, w, tag, route, send, send_bytes, recv, recv_bytes, op);
  else
    exchange_pairwise(s, w, tag, send, send_bytes, recv, recv_bytes, op);
}

// Every pair agrees: what rank i sends to rank j (values[j] on rank i, its
// send_list[j]) is what j expects from i (values[ws + i] on rank j, its
// recv_list[i]), counted in `unit`.
void agree_on_counts(const std::vector<Meta>& metas, const char* op, const char* unit, const char* send_list,
                     const char* recv_list, bool name_source) {
  const size_t ws = metas.size();
  for (size_t i = 0; i < ws; ++i) {
    for (size_t j = 0; j < ws; ++j) {
      const int64_t sent = metas[i].values[j];
      const int64_t expected = metas[j].values[ws + i];
      if (sent != expected) {
        const std::string source = name_source ? concat(" ", unit, " from rank ", i) : "";
        raise<MismatchError>(op, "rank ", i, " sends ", sent, " ", unit, " to rank ", j, " (", send_list, "[", j,
                             "]), but rank ", j, " expects ", expected, source, " (", recv_list, "[", i, "])");
      }
    }
  }
}

// Every rank's input has the same dtype and the same shape beyond dim 0.
void agree_on_rows(const std::vector<Meta>& metas, const char* op) {
  agree_on_tensor(metas, op, "input", false);
  for (size_t r = 1; r < metas.size(); ++r) {
    bool same_rows = metas[r].ndim == metas[0].ndim;
    for (int64_t d = 1; same_rows && d < metas[0].ndim; ++d) same_rows = metas[r].shape[d] == metas[0].shape[d];
    if (!same_rows)
      raise<MismatchError>(op, "ranks disagree on the shape of a row (input's dims after 0): rank 0 has input ",
                           metas[0].shape_str(), ", rank ", r, " has ", metas[r].shape_str());
  }
}

int64_t row_bytes(const TensorView& t) {
  int64_t n = t.element_size();
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

// Rows by split sizes: rows [sum of earlier splits, + split[p]) of `in` go to
// rank p, and rank p's rows land at the same place in `out`; both on the
// route's side.
void exchange_rows(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, const char* in, char* out,
                   const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits, int64_t rb,
                   const char* op) {
  const size_t ws = static_cast<size_t>(s.size);
  std::vector<const char*> send(ws);
  std::vector<char*> recv(ws);
  std::vector<int64_t> send_bytes(ws), recv_bytes(ws);
  int64_t at_in = 0, at_out = 0;
  for (size_t i = 0; i < ws; ++i) {
    send[i] = in + at_in * rb;
    recv[i] = out + at_out * rb;
    send_bytes[i] = send_splits[i] * rb;
    recv_bytes[i] = recv_splits[i] * rb;
    at_in += send_splits[i];
    at_out += recv_splits[i];
  }
  exchange(s, w, tag, route, send, send_bytes, recv, recv_bytes, op);
}

}  // namespace

// ---- all_to_all ------------------------------------------------------------------------------

static Work all_to_all_impl(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                            const Communicator& comm, bool async) {
  const char* op = "all_to_all";
  const int ws = comm.size();
  auto check = [&] {
    check_list_size(op, "output_tensor_list", outputs.size(), ws);
    check_list_size(op, "input_tensor_list", inputs.size(), ws);
    std::vector<int64_t> values;
    for (int i = 0; i < ws; ++i) {
      const std::string in_name = concat("input_tensor_list[", i, "]");
      const std::string out_name = concat("output_tensor_list[", i, "]");
      check_cpu(op, in_name.c_str(), inputs[static_cast<size_t>(i)]);
      check_output(op, out_name.c_str(), outputs[static_cast<size_t>(i)]);
      check_dtype_match(op, in_name.c_str(), inputs[static_cast<size_t>(i)], "input_tensor_list[0]", inputs[0]);
      check_dtype_match(op, out_name.c_str(), outputs[static_cast<size_t>(i)], "input_tensor_list[0]", inputs[0]);
      for (int j = 0; j < ws; ++j) {
        detail::check_no_overlap(op, out_name.c_str(), outputs[static_cast<size_t>(i)],
                                 concat("input_tensor_list[", j, "]").c_str(), inputs[static_cast<size_t>(j)]);
      }
      values.push_back(inputs[static_cast<size_t>(i)].numel());
    }
    for (int i = 0; i < ws; ++i) values.push_back(outputs[static_cast<size_t>(i)].numel());
    const size_t me = static_cast<size_t>(comm.rank());
    SCATTERX_CHECK(inputs[me].sizes() == outputs[me].sizes(), ArgumentError, op, "output_tensor_list[", me,
                   "] expected the shape of input_tensor_list[", me, "] ", inputs[me].sizes().str(),
                   " (this rank's share to itself), got ", outputs[me].sizes().str());
    Meta m;
    m.describe(inputs[0]);
    m.values = std::move(values);
    return m;
  };
  Body body = [outputs, inputs, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "input_tensor_list[0]", false);
      agree_on_counts(*metas, op, "elements", "input_tensor_list", "output_tensor_list", false);
    }
    const size_t uws = static_cast<size_t>(s.size);
    const DeviceRoute route = device_route(inputs[0], op);
    std::vector<StagedInput> packed;
    packed.reserve(uws);
    std::vector<StagedOutput> staged;
    staged.reserve(uws);
    std::vector<const char*> send(uws);
    std::vector<char*> recv(uws);
    std::vector<int64_t> send_bytes(uws), recv_bytes(uws);
    for (size_t i = 0; i < uws; ++i) {
      packed.emplace_back(route, inputs[i]);
      staged.emplace_back(route, outputs[i], false);
      send[i] = packed.back().data();
      recv[i] = staged.back().data();
      send_bytes[i] = inputs[i].numel() * inputs[i].element_size();
      recv_bytes[i] = outputs[i].numel() * outputs[i].element_size();
    }
    exchange(s, w, tag, route, send, send_bytes, recv, recv_bytes, op);
    for (auto& o : staged) o.commit();
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work all_to_all_async(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                      const Communicator& comm) {
  return all_to_all_impl(outputs, inputs, comm, true);
}

void all_to_all(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                const Communicator& comm) {
  all_to_all_impl(outputs, inputs, comm, false).wait();
}

// ---- all_to_all_single -----------------------------------------------------------------------

static Work all_to_all_single_impl(const TensorView& output, const TensorView& input,
                                   const std::vector<int64_t>& output_split_sizes,
                                   const std::vector<int64_t>& input_split_sizes, const Communicator& comm,
                                   bool async) {
  const char* op = "all_to_all_single";
  const int ws = comm.size();
  const bool variable = !output_split_sizes.empty() || !input_split_sizes.empty();
  std::vector<int64_t> send_splits, recv_splits;
  auto check = [&] {
    check_cpu(op, "input", input);
    check_output(op, "output", output);
    check_dtype_match(op, "output", output, "input", input);
    send_splits = resolve_splits(op, "input_split_sizes", input_split_sizes, input, "input", ws);
    recv_splits = resolve_splits(op, "output_split_sizes", output_split_sizes, output, "output", ws);
    check_same_rows(op, output, input);
    detail::check_no_overlap(op, "output", output, "input", input);
    Meta m;
    m.describe(input);
    m.values = send_splits;
    m.values.insert(m.values.end(), recv_splits.begin(), recv_splits.end());
    return m;
  };
  // `check` runs inside launch before the body is queued; the body reads
  // the splits it resolved through this shared pair.
  auto splits = std::make_shared<std::pair<std::vector<int64_t>, std::vector<int64_t>>>();
  auto checked = [&, splits] {
    Meta m = check();
    *splits = {send_splits, recv_splits};
    return m;
  };
  Body body = [output, input, splits, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) {
      // values on each rank: [send_splits (ws), recv_splits (ws)].
      agree_on_rows(*metas, op);
      agree_on_counts(*metas, op, "rows", "input_split_sizes", "output_split_sizes", true);
    }
    const DeviceRoute route = device_route(input, op);
    const StagedInput in(route, input);
    StagedOutput out(route, output, false);
    exchange_rows(s, w, tag, route, in.data(), out.data(), splits->first, splits->second, row_bytes(input), op);
    out.commit();
  };
  return launch(comm, op, async, variable, checked, std::move(body));
}

Work all_to_all_single_async(const TensorView& output, const TensorView& input,
                             const std::vector<int64_t>& output_split_sizes,
                             const std::vector<int64_t>& input_split_sizes, const Communicator& comm) {
  return all_to_all_single_impl(output, input, output_split_sizes, input_split_sizes, comm, true);
}

void all_to_all_single(const TensorView& output, const TensorView& input,
                       const std::vector<int64_t>& output_split_sizes, const std::vector<int64_t>& input_split_sizes,
                       const Communicator& comm) {
  all_to_all_single_impl(output, input, output_split_sizes, input_split_sizes, comm, false).wait();
}

// ---- all_to_all_v ----------------------------------------------------------------------------

AllToAllVResult all_to_all_v(const TensorView& input, const std::vector<int64_t>& send_splits,
                             const Communicator& comm) {
  const char* op = "all_to_all_v";
  const int ws = comm.size();
  std::vector<int64_t> sends;
  auto check = [&] {
    check_cpu(op, "input", input);
    sends = resolve_splits(op, "send_splits", send_splits, input, "input", ws);
    Meta m;
    m.describe(input);
    m.values = padded(sends, ws);
    return m;
  };
  AllToAllVResult result;
  Body body = [&](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    const size_t uws = static_cast<size_t>(s.size);
    agree_on_rows(*metas, op);
    result.recv_splits.assign(uws, 0);
    int64_t rows = 0;
    for (size_t i = 0; i < uws; ++i) {
      result.recv_splits[i] = (*metas)[i].values[static_cast<size_t>(s.rank)];
      rows += result.recv_splits[i];
    }
    std::vector<int64_t> shape = input.sizes().vec();
    shape[0] = rows;
    // The output is new and contiguous (on the host, recycled memory whose
    // pages are already faulted in): the exchange writes it directly.
    result.output = Tensor::empty(Shape(shape), input.dtype(), input.device());
    const DeviceRoute route = device_route(input, op);
    const StagedInput in(route, input);
    exchange_rows(s, w, tag, route, in.data(), static_cast<char*>(result.output.data()), sends, result.recv_splits,
                  row_bytes(input), op);
  };
  launch(comm, op, false, true, check, body).wait();
  return result;
}

}  // namespace scatterx::dist

// broadcast (dist.h), sync and async: the root's tensor on every rank, from
// the root to every rank on the device (device.h); on the host, when all are
// on one host (and no more ranks than cores), through the root's slot of the
// shared segment when it is small
// (shm_small_broadcast) and straight out of the root's memory when it is
// large (single_copy.h; from 512 KiB the root writes a share into its peers
// too), else down the binomial tree (binomial_broadcast.h).
// Sync calls of small tensors skip launch()'s queueing (run_now).
#include <vector>

#include "dist/arg_checks.h"
#include "dist/binomial_broadcast.h"
#include "dist/device.h"
#include "dist/launch.h"
#include "dist/pairwise.h"
#include "dist/shm_transport.h"
#include "dist/single_copy.h"
#include "dist/staging.h"

namespace scatterx::dist {

namespace {

// The root offers its buffer to every rank and every rank reads it at once
// (the pairwise exchange with the root's shares only).
void broadcast_by_single_copy(Communicator::State& s, Waiter& w, int tag, char* buf, int64_t bytes, int root,
                              const char* op) {
  const size_t ws = static_cast<size_t>(s.size);
  const std::vector<const char*> send(ws, buf);
  const std::vector<char*> recv(ws, buf);
  std::vector<int64_t> send_bytes(ws, 0), recv_bytes(ws, 0);
  if (s.rank == root) {
    for (size_t p = 0; p < ws; ++p) send_bytes[p] = static_cast<int>(p) == root ? 0 : bytes;
  } else {
    recv_bytes[static_cast<size_t>(root)] = bytes;
  }
  exchange_pairwise(s, w, tag, send, send_bytes, recv, recv_bytes, op, "the broadcast (src and its readers)");
}

// Whether a broadcast of `bytes` goes through the root's slot. Through the
// slots, every rank waits for every other (the root must know its slot was
// read before it writes it again), so only where that rendezvous is cheap;
// elsewhere the binomial tree, whose root returns once its messages are sent.
bool by_small_slot(Communicator::State& s, Waiter& w, int64_t bytes, const char* op) {
  return s.latency_sized(bytes) && slot_rendezvous(s, w, op);
}

// Whether the root copies a share of a single-copy broadcast
// (single_copy_broadcast; by default where there are no more ranks than
// cores, see single_copy_ready).
bool by_root_share(const Communicator::State& s, int64_t bytes) {
  return bytes >= kBroadcastPushMinBytes && s.broadcast_root_share;
}

}  // namespace

static Work broadcast_impl(const TensorView& tensor, int root, const Communicator& comm, bool async) {
  const char* op = "broadcast";
  const int ws = comm.size();
  auto validate = [&] {
    check_output(op, "tensor", tensor);
    SCATTERX_CHECK(root >= 0 && root < ws, ArgumentError, op, "src expected a rank in [0, ", ws, "), got ", root);
  };
  auto check = [&] {
    validate();
    return dense_meta(tensor, ws, root);
  };
  Body body = [tensor, root, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "tensor", true);
      for (size_t r = 1; r < metas->size(); ++r) {
        if ((*metas)[r].extra != (*metas)[0].extra)
          detail::raise<MismatchError>(op, "ranks disagree on src: rank 0 has ", (*metas)[0].extra, ", rank ", r,
                                       " has ", (*metas)[r].extra);
      }
    }
    const int64_t bytes = tensor.numel() * tensor.element_size();
    const DeviceRoute route = device_route(tensor, op);
    StagedOutput buf(route, tensor, s.rank == root);
    if (route)
      device_broadcast(s, w, tag, route, buf.data(), bytes, root, op);
    else if (by_small_slot(s, w, bytes, op))
      shm_small_broadcast(s, w, buf.data(), bytes, root, op);
    else if (!single_copy_for(s, w, bytes, op))
      binomial_broadcast(s, w, tag, buf.data(), bytes, root, op);
    else if (by_root_share(s, bytes))
      single_copy_broadcast(s, w, tag, buf.data(), bytes, root, op);
    else
      broadcast_by_single_copy(s, w, tag, buf.data(), bytes, root, op);
    if (s.rank != root) buf.commit();
  };
  auto small = [&] {
    return !device_route(tensor, op) && comm.state().latency_sized(tensor.numel() * tensor.element_size());
  };
  if (run_small_now(comm, op, async, tensor.device().is_cpu(), validate, small,
                    [&](Communicator::State& s, Waiter& w, int tag) { body(s, w, tag, nullptr); }))
    return Work();
  return launch(comm, op, async, false, check, std::move(body));
}

Work broadcast_async(const TensorView& tensor, int root, const Communicator& comm) {
  return broadcast_impl(tensor, root, comm, true);
}

void broadcast(const TensorView& tensor, int root, const Communicator& comm) {
  broadcast_impl(tensor, root, comm, false).wait();
}

}  // namespace scatterx::dist

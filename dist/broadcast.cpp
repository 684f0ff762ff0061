// broadcast (dist.h), sync and async: the root's tensor on every rank, by
// the binomial tree on the host (binomial_broadcast.h) or from the root to
// every rank on the device (device.h).
#include <vector>

#include "dist/arg_checks.h"
#include "dist/binomial_broadcast.h"
#include "dist/device.h"
#include "dist/launch.h"
#include "dist/staging.h"

namespace scatterx::dist {

static Work broadcast_impl(const TensorView& tensor, int root, const Communicator& comm, bool async) {
  const char* op = "broadcast";
  const int ws = comm.size();
  auto check = [&] {
    check_output(op, "tensor", tensor);
    SCATTERX_CHECK(root >= 0 && root < ws, ArgumentError, op, "src expected a rank in [0, ", ws, "), got ", root);
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
    else
      binomial_broadcast(s, w, tag, buf.data(), bytes, root, op);
    if (s.rank != root) buf.commit();
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work broadcast_async(const TensorView& tensor, int root, const Communicator& comm) {
  return broadcast_impl(tensor, root, comm, true);
}

void broadcast(const TensorView& tensor, int root, const Communicator& comm) {
  broadcast_impl(tensor, root, comm, false).wait();
}

}  // namespace scatterx::dist

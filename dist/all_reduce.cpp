// all_reduce (dist.h), sync and async: a reduce-scatter in place, then an
// all-gather of the reduced blocks, on the host (ring.h) or the device
// (device.h); small host tensors take the latency path instead
// (latency_all_reduce.h), and mid-sized ones on one host the single-copy
// all-reduce (single_copy.h).
#include <algorithm>
#include <vector>

#include "dist/arg_checks.h"
#include "dist/device.h"
#include "dist/latency_all_reduce.h"
#include "dist/launch.h"
#include "dist/p2p.h"
#include "dist/ring.h"
#include "dist/shm_transport.h"
#include "dist/single_copy.h"
#include "dist/staging.h"

namespace scatterx::dist {

namespace {

bool latency_path(const Communicator::State& s, const TensorView& tensor, const DeviceRoute& route) {
  return !route && s.latency_sized(tensor.numel() * tensor.element_size());
}

// The latency path over the contiguous `data` of `tensor`'s shape: through
// the segment on one host (shm_ready's verdict is collective), else by
// recursive doubling.
void latency_all_reduce(Communicator::State& s, Waiter& w, int tag, char* data, const TensorView& tensor,
                        ReduceOp reduce_op, const char* op) {
  const Reduce reduce = local_reduce(reduce_op);
  const int64_t count = mean_count(reduce_op, s.size);
  if (shm_ready(s, w, op))
    shm_all_reduce(s, w, data, tensor.numel(), tensor.dtype(), reduce, count, op);
  else
    recursive_doubling_all_reduce(s, w, tag, data, tensor.numel(), tensor.dtype(), reduce, count, op);
}

}  // namespace

// `op` names the call in errors (barrier() is an all_reduce too).
static Work all_reduce_impl(const TensorView& tensor, ReduceOp reduce_op, const Communicator& comm, bool async,
                            const char* op = "all_reduce") {
  const int ws = comm.size();
  auto validate = [&] {
    check_output(op, "tensor", tensor);
    check_reduce_op(op, reduce_op, tensor.dtype());
  };
  // Sync latency-path calls skip launch()'s queueing.
  DeviceRoute route;  // none for a CPU tensor, unless a device is emulated
  auto small = [&] {
    route = device_route(tensor, op);
    return latency_path(comm.state(), tensor, route);
  };
  if (run_small_now(comm, op, async, tensor.device().is_cpu(), validate, small,
                    [&](Communicator::State& s, Waiter& w, int tag) {
                      StagedOutput buf(route, tensor, true);
                      latency_all_reduce(s, w, tag, buf.data(), tensor, reduce_op, op);
                      buf.commit();
                    }))
    return Work();
  auto check = [&] {
    validate();
    return dense_meta(tensor, ws, static_cast<int64_t>(reduce_op));
  };
  Body body = [tensor, reduce_op, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "tensor", true);
      agree_on_reduce_op(*metas, op);
    }
    const DeviceRoute route = device_route(tensor, op);
    StagedOutput buf(route, tensor, true);
    if (latency_path(s, tensor, route)) {
      latency_all_reduce(s, w, tag, buf.data(), tensor, reduce_op, op);
      buf.commit();
      return;
    }
    const Blocks blocks = Blocks::even(tensor.numel(), s.size);
    const int64_t es = tensor.element_size();
    const Reduce reduce = local_reduce(reduce_op);
    const int64_t count = mean_count(reduce_op, s.size);
    // Every rank on one host: folded straight out of the peers' tensors,
    // each folded piece written into theirs, no staging (single_copy.h).
    // Otherwise (several hosts, single copy off or not allowed, a device
    // tensor) the pipelined reduce-scatter and all-gather below.
    if (!route && single_copy_for(s, w, tensor.numel() * es, op)) {
      single_copy_all_reduce(s, w, tag, buf.data(), blocks, tensor.dtype(), reduce, count, op);
      buf.commit();
      return;
    }
    // Reduce-scatter in place: block `rank` of the tensor receives the
    // result, and the other blocks are only read until the all-gather
    // overwrites them. The all-gather's messages have their own tag.
    char* mine = buf.data() + blocks.offset[static_cast<size_t>(s.rank)] * es;
    const int gather_tag = tag + kAllGatherTagOffset;
    if (route) {
      // Each phase pipelines its own chunks.
      device_ring_reduce_scatter(s, w, tag, route, buf.data(), mine, blocks, tensor.dtype(), reduce, count, op);
      device_all_gather(s, w, gather_tag, route, buf.data(), blocks, es, op);
    } else {
      // Each reduced chunk of this rank's block leaves as soon as the
      // reduce-scatter finished it, so the two phases overlap.
      const int64_t chunk = std::max<int64_t>(1, s.chunk_bytes / es);
      RingAllGather ag(s, w, gather_tag, buf.data(), blocks, es, chunk, op);
      host_reduce_scatter(s, w, tag, buf.data(), mine, blocks, tensor.dtype(), reduce, count, op,
                          [&](int64_t begin, int64_t len) { ag.send_own(mine, begin, len); });
      ag.finish();
    }
    buf.commit();
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work all_reduce_async(const TensorView& tensor, ReduceOp reduce_op, const Communicator& comm) {
  return all_reduce_impl(tensor, reduce_op, comm, true);
}

void all_reduce(const TensorView& tensor, ReduceOp op, const Communicator& comm) {
  all_reduce_impl(tensor, op, comm, false).wait();
}

void barrier(const Communicator& comm) {
  int64_t nothing = 0;
  all_reduce_impl(TensorView(&nothing, DType::Int64, {}), ReduceOp::Sum, comm, false, "barrier").wait();
}

}  // namespace scatterx::dist

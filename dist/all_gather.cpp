// all_gather and all_gather_into_tensor (dist.h), sync and async: every
// rank's block gathered on every rank, by the device all-gather (device.h),
// or on the host, when every rank is on one host, through the shared
// segment's slots for small blocks (shm_small_all_gather) and by single copy
// out of the peers' inputs for large ones (single_copy.h), else by the ring
// (ring.h). Sync calls of small blocks skip launch()'s queueing (run_now).
#include <string>
#include <vector>

#include "dist/arg_checks.h"
#include "dist/device.h"
#include "dist/launch.h"
#include "dist/pairwise.h"
#include "dist/ring.h"
#include "dist/shm_transport.h"
#include "dist/single_copy.h"
#include "dist/staging.h"
#include "ops/detail/checks.h"

namespace scatterx::dist {

namespace {

// Rank p's `bytes` at `own` (on rank p) land at dst[p] on every rank: each
// rank offers its block to every peer and reads every peer's at once.
void gather_by_single_copy(Communicator::State& s, Waiter& w, int tag, const std::vector<char*>& dst, const char* own,
                           int64_t bytes, const char* op) {
  const size_t ws = static_cast<size_t>(s.size);
  const std::vector<const char*> send(ws, own);
  const std::vector<int64_t> sizes(ws, bytes);
  exchange_pairwise(s, w, tag, send, sizes, dst, sizes, op, "their blocks");
}

// The latency path's segment, on one host (shm_ready's verdict is collective).
bool by_small_slots(Communicator::State& s, Waiter& w, int64_t bytes, const char* op) {
  return s.latency_sized(bytes) && shm_ready(s, w, op);
}

}  // namespace

static Work all_gather_into_tensor_impl(const TensorView& output, const TensorView& input, const Communicator& comm,
                                        bool async) {
  const char* op = "all_gather_into_tensor";
  const int ws = comm.size();
  auto validate = [&] {
    check_cpu(op, "input", input);
    check_output(op, "output", output);
    check_dtype_match(op, "output", output, "input", input);
    check_ws_blocks(op, "output", output, "input", input, ws);
    const bool in_place =
        output.is_contiguous() && input.is_contiguous() &&
        static_cast<const char*>(input.data()) ==
            static_cast<const char*>(output.data()) + comm.rank() * input.numel() * input.element_size();
    if (!in_place) detail::check_no_overlap(op, "output", output, "input", input);
  };
  auto check = [&] {
    validate();
    return dense_meta(input, ws);
  };
  Body body = [output, input, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) agree_on_tensor(*metas, op, "input", true);
    const int64_t es = input.element_size();
    const int64_t n = input.numel();
    const Blocks blocks = Blocks::equal(n, s.size);
    const DeviceRoute route = device_route(input, op);
    StagedOutput out(route, output, false);
    if (route) {
      char* own = out.data() + s.rank * n * es;
      if (!(input.is_contiguous() && input.data() == own))
        copy_view(route, TensorView(own, input.dtype(), input.sizes(), input.device()), input);
      device_all_gather(s, w, tag, route, out.data(), blocks, es, op);
    } else if (by_small_slots(s, w, n * es, op)) {
      const StagedInput in(route, input);
      shm_small_all_gather(s, w, in.data(), out.data(), n * es, op);
    } else if (single_copy_for(s, w, n * es, op)) {
      const StagedInput in(route, input);
      std::vector<char*> dst(static_cast<size_t>(s.size));
      for (int r = 0; r < s.size; ++r) dst[static_cast<size_t>(r)] = out.data() + r * n * es;
      gather_by_single_copy(s, w, tag, dst, in.data(), n * es, op);
    } else {
      // The ring sends this rank's block straight from the (packed) input
      // and copies it into place while the messages are on the wire.
      const StagedInput in(route, input);
      ring_all_gather(s, w, tag, out.data(), blocks, es, op, in.data());
    }
    out.commit();
  };
  auto small = [&] {
    return !device_route(input, op) && comm.state().latency_sized(input.numel() * input.element_size());
  };
  if (run_small_now(comm, op, async, input.device().is_cpu() && output.device().is_cpu(), validate, small,
                    [&](Communicator::State& s, Waiter& w, int tag) { body(s, w, tag, nullptr); }))
    return Work();
  return launch(comm, op, async, false, check, std::move(body));
}

Work all_gather_into_tensor_async(const TensorView& output, const TensorView& input, const Communicator& comm) {
  return all_gather_into_tensor_impl(output, input, comm, true);
}

void all_gather_into_tensor(const TensorView& output, const TensorView& input, const Communicator& comm) {
  all_gather_into_tensor_impl(output, input, comm, false).wait();
}

static Work all_gather_impl(const std::vector<TensorView>& outputs, const TensorView& input, const Communicator& comm,
                            bool async) {
  const char* op = "all_gather";
  const int ws = comm.size();
  auto check = [&] {
    check_cpu(op, "input", input);
    check_list_size(op, "tensor_list", outputs.size(), ws);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string name = detail::concat("tensor_list[", i, "]");
      check_output(op, name.c_str(), outputs[i]);
      check_dtype_match(op, name.c_str(), outputs[i], "input", input);
      SCATTERX_CHECK(outputs[i].sizes() == input.sizes(), ArgumentError, op, name, " expected input's shape ",
                     input.sizes().str(), ", got ", outputs[i].sizes().str());
    }
    return dense_meta(input, ws);
  };
  Body body = [outputs, input, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) agree_on_tensor(*metas, op, "input", true);
    const int64_t es = input.element_size();
    const int64_t n = input.numel();
    const Blocks blocks = Blocks::equal(n, s.size);
    auto block = [&](char* base, int r) {
      return TensorView(base + r * n * es, input.dtype(), input.sizes(), input.device());
    };
    const DeviceRoute route = device_route(input, op);
    if (!route && single_copy_for(s, w, n * es, op)) {
      // Straight into the list's tensors (stand-ins for the strided ones).
      const StagedInput in(route, input);
      std::vector<StagedOutput> staged;
      staged.reserve(static_cast<size_t>(s.size));
      std::vector<char*> dst;
      for (const TensorView& o : outputs) {
        staged.emplace_back(route, o, false);
        dst.push_back(staged.back().data());
      }
      gather_by_single_copy(s, w, tag, dst, in.data(), n * es, op);
      for (StagedOutput& o : staged) o.commit();
      return;
    }
    // One contiguous gather buffer, then unpack into the list.
    const StagingBuffer buf(route, n * es * s.size, s);
    copy_view(route, block(buf.data(), s.rank), input);
    if (route)
      device_all_gather(s, w, tag, route, buf.data(), blocks, es, op);
    else if (by_small_slots(s, w, n * es, op))
      shm_small_all_gather(s, w, buf.data() + s.rank * n * es, buf.data(), n * es, op);
    else
      ring_all_gather(s, w, tag, buf.data(), blocks, es, op);
    for (int r = 0; r < s.size; ++r) copy_view(route, outputs[static_cast<size_t>(r)], block(buf.data(), r));
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work all_gather_async(const std::vector<TensorView>& outputs, const TensorView& input, const Communicator& comm) {
  return all_gather_impl(outputs, input, comm, true);
}

void all_gather(const std::vector<TensorView>& outputs, const TensorView& input, const Communicator& comm) {
  all_gather_impl(outputs, input, comm, false).wait();
}

}  // namespace scatterx::dist

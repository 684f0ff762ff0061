// all_gather and all_gather_into_tensor (dist.h), sync and async: every
// rank's block gathered on every rank, by the host ring (ring.h) or the
// device all-gather (device.h).
#include <string>
#include <vector>

#include "dist/arg_checks.h"
#include "dist/device.h"
#include "dist/launch.h"
#include "dist/ring.h"
#include "dist/staging.h"
#include "ops/detail/checks.h"

namespace scatterx::dist {

static Work all_gather_into_tensor_impl(const TensorView& output, const TensorView& input, const Communicator& comm,
                                        bool async) {
  const char* op = "all_gather_into_tensor";
  const int ws = comm.size();
  auto check = [&] {
    check_cpu(op, "input", input);
    check_output(op, "output", output);
    check_dtype_match(op, "output", output, "input", input);
    check_ws_blocks(op, "output", output, "input", input, ws);
    const bool in_place =
        output.is_contiguous() && input.is_contiguous() &&
        static_cast<const char*>(input.data()) ==
            static_cast<const char*>(output.data()) + comm.rank() * input.numel() * input.element_size();
    if (!in_place) detail::check_no_overlap(op, "output", output, "input", input);
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
    } else {
      // The ring sends this rank's block straight from the (packed) input
      // and copies it into place while the messages are on the wire.
      const StagedInput in(route, input);
      ring_all_gather(s, w, tag, out.data(), blocks, es, op, in.data());
    }
    out.commit();
  };
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
    // One contiguous gather buffer, then unpack into the list.
    const DeviceRoute route = device_route(input, op);
    const StagingBuffer buf(route, n * es * s.size, s);
    copy_view(route, block(buf.data(), s.rank), input);
    if (route)
      device_all_gather(s, w, tag, route, buf.data(), blocks, es, op);
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

// reduce_scatter and reduce_scatter_tensor (dist.h), sync and async: block
// `rank` of every rank's contribution, reduced, by the single-copy fold on
// one host (single_copy.h), the host reduce-scatter (ring.h) or the device
// ring (device.h).
#include <string>
#include <vector>

#include "dist/arg_checks.h"
#include "dist/device.h"
#include "dist/launch.h"
#include "dist/ring.h"
#include "dist/single_copy.h"
#include "dist/staging.h"
#include "ops/detail/checks.h"

namespace scatterx::dist {

namespace {

// Reduce-scatters the blocks of `src` (on the route's side) into out.
void reduce_scatter_blocks(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, const char* src,
                           char* out, const Blocks& blocks, DType dtype, ReduceOp reduce_op, const char* op) {
  const Reduce reduce = local_reduce(reduce_op);
  const int64_t count = mean_count(reduce_op, s.size);
  // Every rank on one host: each folds its block straight out of its peers'
  // inputs (single_copy.h). Otherwise (several hosts, single copy off or not
  // allowed, small blocks, blocks below 1 MiB in memory a peer cannot map)
  // through the segment or the ring (ring.h).
  if (route) {
    device_ring_reduce_scatter(s, w, tag, route, src, out, blocks, dtype, reduce, count, op);
    return;
  }
  if (single_copy_for(s, w, blocks.length[0] * element_size(dtype), op) &&
      single_copy_reduce_scatter(s, w, tag, src, out, blocks, dtype, reduce, count, op))
    return;
  host_reduce_scatter(s, w, tag, src, out, blocks, dtype, reduce, count, op);
}

}  // namespace

static Work reduce_scatter_tensor_impl(const TensorView& output, const TensorView& input, ReduceOp reduce_op,
                                       const Communicator& comm, bool async) {
  const char* op = "reduce_scatter_tensor";
  const int ws = comm.size();
  auto check = [&] {
    check_cpu(op, "input", input);
    check_output(op, "output", output);
    check_dtype_match(op, "output", output, "input", input);
    check_reduce_op(op, reduce_op, input.dtype());
    check_ws_blocks(op, "input", input, "output", output, ws);
    detail::check_no_overlap(op, "output", output, "input", input);
    return dense_meta(input, ws, static_cast<int64_t>(reduce_op));
  };
  Body body = [output, input, reduce_op, op](Communicator::State& s, Waiter& w, int tag,
                                             const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "input", true);
      agree_on_reduce_op(*metas, op);
    }
    const Blocks blocks = Blocks::equal(output.numel(), s.size);
    const DeviceRoute route = device_route(input, op);
    const StagedInput in(route, input);
    StagedOutput out(route, output, false);
    reduce_scatter_blocks(s, w, tag, route, in.data(), out.data(), blocks, input.dtype(), reduce_op, op);
    out.commit();
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work reduce_scatter_tensor_async(const TensorView& output, const TensorView& input, ReduceOp reduce_op,
                                 const Communicator& comm) {
  return reduce_scatter_tensor_impl(output, input, reduce_op, comm, true);
}

void reduce_scatter_tensor(const TensorView& output, const TensorView& input, ReduceOp op, const Communicator& comm) {
  reduce_scatter_tensor_impl(output, input, op, comm, false).wait();
}

static Work reduce_scatter_impl(const TensorView& output, const std::vector<TensorView>& inputs, ReduceOp reduce_op,
                                const Communicator& comm, bool async) {
  const char* op = "reduce_scatter";
  const int ws = comm.size();
  auto check = [&] {
    check_output(op, "output", output);
    check_reduce_op(op, reduce_op, output.dtype());
    check_list_size(op, "input_list", inputs.size(), ws);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string name = detail::concat("input_list[", i, "]");
      check_cpu(op, name.c_str(), inputs[i]);
      check_dtype_match(op, name.c_str(), inputs[i], "output", output);
      SCATTERX_CHECK(inputs[i].sizes() == output.sizes(), ArgumentError, op, name, " expected output's shape ",
                     output.sizes().str(), ", got ", inputs[i].sizes().str());
      detail::check_no_overlap(op, "output", output, name.c_str(), inputs[i]);
    }
    return dense_meta(output, ws, static_cast<int64_t>(reduce_op));
  };
  Body body = [output, inputs, reduce_op, op](Communicator::State& s, Waiter& w, int tag,
                                              const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "output", true);
      agree_on_reduce_op(*metas, op);
    }
    // Pack the list into one buffer of ws blocks (the local copy kernels).
    const int64_t es = output.element_size();
    const int64_t n = output.numel();
    const DeviceRoute route = device_route(output, op);
    const StagingBuffer packed(route, n * es * s.size, s);
    for (int r = 0; r < s.size; ++r) {
      copy_view(route, TensorView(packed.data() + r * n * es, output.dtype(), output.sizes(), output.device()),
                inputs[static_cast<size_t>(r)]);
    }
    StagedOutput out(route, output, false);
    reduce_scatter_blocks(s, w, tag, route, packed.data(), out.data(), Blocks::equal(n, s.size), output.dtype(),
                          reduce_op, op);
    out.commit();
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work reduce_scatter_async(const TensorView& output, const std::vector<TensorView>& inputs, ReduceOp reduce_op,
                          const Communicator& comm) {
  return reduce_scatter_impl(output, inputs, reduce_op, comm, true);
}

void reduce_scatter(const TensorView& output, const std::vector<TensorView>& inputs, ReduceOp op,
                    const Communicator& comm) {
  reduce_scatter_impl(output, inputs, op, comm, false).wait();
}

}  // namespace scatterx::dist

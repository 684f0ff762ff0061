// A destination index grouped once, for the GNN layers that scatter by the
// same index in every layer and every epoch.
//
// IndexPlan(index, dim_size) checks a 1-d int32/int64 index (values in
// [0, dim_size); dim_size < 0 means max + 1) and groups its positions by
// value (stable: a group lists its positions in index order). The ops below
// take the plan in place of the index and skip both the check and the
// grouping; their results are bit-identical to the same op given the index.
//
// Contract:
//  - The plan copies what it needs: the index may change or be freed after.
//  - Memory: O(positions + dim_size) int64, held until the last copy of the
//    plan goes (copies share it). Immutable, so usable from many threads.
//  - Device: the plan lives on its index's device (CPU or CUDA) and takes
//    tensors of that device only. A CUDA plan groups on the GPU (a stable
//    radix sort, enqueued on the current stream); building it synchronizes
//    only where the host needs a value: dim_size < 0 (max + 1) and the index
//    check (both read one small result back). Its memory is stream-ordered
//    on the stream current when it was built: a caller that uses the plan on
//    another stream orders that stream after the building one first (as with
//    any CUDA memory made on one stream and read on another).
#pragma once

#include <cstdint>
#include <memory>

#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx {

namespace detail {
struct TargetGroups;
namespace cuda {
struct DeviceGroups;
}

// Checks a 1-d int32/int64 index (cpu or CUDA) against dim_size (>= 0), or that its
// values are >= 0 when dim_size < 0; returns dim_size, or max(index) + 1 (0
// for an empty index). The checks of IndexPlan and of gather_scatter's
// dst_index; op and name label the errors.
int64_t checked_dim_size(const char* op, const char* name, const TensorView& index, int64_t dim_size);
}  // namespace detail

class IndexPlan {
 public:
  // op and name only label the errors (gather_scatter builds one from its
  // dst_index).
  explicit IndexPlan(const TensorView& index, int64_t dim_size = -1, const char* op = "IndexPlan",
                     const char* name = "index");

  int64_t dim_size() const { return dim_size_; }
  int64_t positions() const { return positions_; }
  Device device() const { return device_; }
  // How many positions hold each value: [dim_size] int64 on the plan's device.
  Tensor counts() const;

  // The grouping: groups() of a cpu plan, device_groups() of a CUDA one
  // (the other raises ArgumentError naming `op`).
  const detail::TargetGroups& groups(const char* op = "IndexPlan") const;
  const detail::cuda::DeviceGroups& device_groups(const char* op = "IndexPlan") const;

 private:
  std::shared_ptr<const detail::TargetGroups> groups_;               // cpu plans
  std::shared_ptr<const detail::cuda::DeviceGroups> device_groups_;  // CUDA plans
  Device device_ = Device::cpu();
  int64_t dim_size_ = 0;
  int64_t positions_ = 0;
};

namespace detail {
// Raises ArgumentError unless the plan lives on `tensor`'s device:
// "<op>: expected the plan on <name>'s device (<device>), got a plan on <device>".
void check_plan_device(const char* op, const char* name, const TensorView& tensor, const IndexPlan& plan);
}  // namespace detail

// gather_scatter (gather_scatter.h) with the destinations grouped by `dst`.
Tensor gather_scatter(const TensorView& x, const TensorView& src_index, const IndexPlan& dst, Reduce reduce,
                      const TensorView* edge_weight = nullptr);

// out[n] = reduce of the rows src[p] (along dim 0) with index[p] == n: the
// torch_scatter scatter(src, index, dim=0, dim_size, reduce) of a 1-d index,
// for reduce Sum, Mean, Amax, Amin (an empty row is 0). src is [positions,
// F...] of a floating dtype; out is a new [dim_size, F...].
Tensor scatter_by_plan(const TensorView& src, const IndexPlan& plan, Reduce reduce);

}  // namespace scatterx

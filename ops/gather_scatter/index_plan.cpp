// IndexPlan: check a destination index once and group its positions.
#include "ops/gather_scatter/index_plan.h"

#include <algorithm>

#include "ops/detail/checks.h"
#include "ops/detail/segments.h"
#include "ops/dispatch.h"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx {

namespace detail {

int64_t checked_dim_size(const char* op, const char* name, const TensorView& index, int64_t dim_size) {
  detail::check_index_dtype(op, name, index);
  SCATTERX_CHECK(index.dim() == 1, ArgumentError, op, "expected ", name, " to be 1-d, got shape ", index.sizes().str());
  if (dim_size >= 0) {
    detail::check_named_index_bounds(op, name, index, 0, dim_size);
    return dim_size;
  }
  if (index.device().is_cuda()) {
    if (index.size(0) == 0) return 0;
    const cuda::IndexRange range = cuda::index_range(op, index);
    if (range.min >= 0) return range.max + 1;
    // A negative value: the cold path names the first one as the CPU check does.
    const Tensor host = Tensor::empty(index.sizes(), index.dtype(), Device::cpu());
    const Tensor dense = Tensor::clone(index);
    cuda::copy_to_host(host.data(), dense.data(), dense.numel() * dense.element_size(), op);
    return checked_dim_size(op, name, host, dim_size);
  }
  // max + 1, checking index >= 0 on the way
  return dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* data = static_cast<const I*>(index.data());
    const int64_t stride = index.strides()[0];
    int64_t max_seen = -1;
    for (int64_t p = 0; p < index.size(0); ++p) {
      const int64_t v = static_cast<int64_t>(data[p * stride]);
      SCATTERX_CHECK(v >= 0, IndexError, op, "expected ", name, " values >= 0, got ", v, " at ", name, " position [", p,
                     "]");
      max_seen = std::max(max_seen, v);
    }
    return max_seen + 1;
  });
}

void check_plan_device(const char* op, const char* name, const TensorView& tensor, const IndexPlan& plan) {
  SCATTERX_CHECK(plan.device() == tensor.device(), ArgumentError, op, "expected the plan on ", name, "'s device (",
                 tensor.device().str(), "), got a plan on ", plan.device().str());
}

}  // namespace detail

IndexPlan::IndexPlan(const TensorView& index, int64_t dim_size, const char* op, const char* name) {
  dim_size_ = detail::checked_dim_size(op, name, index, dim_size);
  positions_ = index.size(0);
  device_ = index.device();
  if (device_.is_cuda()) {
    device_groups_ =
        std::make_shared<const detail::cuda::DeviceGroups>(detail::cuda::group_by_value(op, index, dim_size_));
    return;
  }
  groups_ = dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    return std::make_shared<const detail::TargetGroups>(
        detail::group_by_target(static_cast<const I*>(index.data()), index.strides()[0], positions_, dim_size_));
  });
}

const detail::TargetGroups& IndexPlan::groups(const char* op) const {
  SCATTERX_CHECK(groups_ != nullptr, ArgumentError, op, "expected a plan on the cpu, got a plan on ", device_.str());
  return *groups_;
}

const detail::cuda::DeviceGroups& IndexPlan::device_groups(const char* op) const {
  SCATTERX_CHECK(device_groups_ != nullptr, ArgumentError, op, "expected a plan on cuda, got a plan on ",
                 device_.str());
  return *device_groups_;
}

Tensor IndexPlan::counts() const {
  if (device_groups_ != nullptr) {
    Tensor out = Tensor::empty(Shape{dim_size_}, DType::Int64, device_);
    detail::cuda::group_counts("IndexPlan.counts", *device_groups_, out);
    return out;
  }
  Tensor out = Tensor::zeros(Shape{dim_size_}, DType::Int64, Device::cpu());
  auto* c = static_cast<int64_t*>(out.data());
  const detail::TargetGroups& g = *groups_;
  for (int64_t k = 0; k < g.num_groups; ++k) c[g.target_of(k)] = g.offsets[k + 1] - g.offsets[k];
  return out;
}

}  // namespace scatterx

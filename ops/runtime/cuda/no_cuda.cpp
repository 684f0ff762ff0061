// The CUDA backend's entry points in a build without it: the controls
// report no devices, and anything that would touch a CUDA tensor raises.
#include "ops/cuda.h"
#include "ops/detail/cuda/index_check.h"
#include "ops/gather/cuda/gather_cuda.h"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/runtime/cuda/runtime.h"
#include "ops/scatter/cuda/scatter_cuda.h"
#include "ops/segment/cuda/segment_cuda.h"

namespace scatterx {

namespace cuda {

bool is_built() { return false; }
int device_count() { return 0; }
void* current_stream() { return nullptr; }
void set_current_stream(void*) {}
StreamGuard::StreamGuard(void* stream) : previous_(current_stream()) { set_current_stream(stream); }
StreamGuard::~StreamGuard() { set_current_stream(previous_); }
void synchronize() {}
void set_deterministic(bool) {}
bool deterministic() { return false; }
void set_index_checks(bool) {}
bool index_checks() { return true; }
void set_scatter_path(ScatterPath) {}
ScatterPath scatter_path() { return ScatterPath::Auto; }

}  // namespace cuda

namespace detail::cuda {

namespace {
[[noreturn]] void unavailable(const char* op) {
  raise<ArgumentError>(op, "expected cpu tensors (this build of scatterx has no CUDA backend), got cuda tensors");
}
}  // namespace

std::shared_ptr<void> allocate(int64_t, Device, const char* op) { unavailable(op); }
void copy(const TensorView&, const TensorView&, const char* op) { unavailable(op); }
void copy_to_host(void*, const void*, int64_t, const char* op) { unavailable(op); }
void copy_from_host(void*, const void*, int64_t, const char* op) { unavailable(op); }
void fill_zero(void*, int64_t, const char* op) { unavailable(op); }
void fill_value(void*, const void*, int64_t, const char* op) { unavailable(op); }
void copy_to_host_async(void*, const void*, int64_t, const char* op) { unavailable(op); }
void copy_from_host_async(void*, const void*, int64_t, const char* op) { unavailable(op); }
void copy_device_async(void*, const void*, int64_t, const char* op) { unavailable(op); }
std::shared_ptr<void> use_device(Device, const char* op) { unavailable(op); }
std::shared_ptr<void> allocate_pinned(int64_t, const char* op) { unavailable(op); }
std::shared_ptr<void> record_event(const char* op) { unavailable(op); }
bool event_reached(const std::shared_ptr<void>&, const char* op) { unavailable(op); }
void event_wait(const std::shared_ptr<void>&, const char* op) { unavailable(op); }
void combine(void*, const void*, const void*, int64_t, DType, Reduce, int64_t, const char* op) { unavailable(op); }
void finalize_mean(void*, int64_t, DType, int64_t, const char* op) { unavailable(op); }
double check_index_bounds(const char* op, const TensorView&, int64_t, int64_t, bool) { unavailable(op); }
void gather(const GatherArgs& args) { unavailable(args.op); }
void scatter(const ScatterArgs& args) { unavailable(args.op); }
void segment(const SegmentArgs& args) { unavailable(args.op); }
PositionScan scan_positions(const char* op, const TensorView&, PositionRule, int64_t) { unavailable(op); }
void segment_gather(const SegmentGatherArgs& args) { unavailable(args.op); }
DeviceGroups group_by_value(const char* op, const TensorView&, int64_t) { unavailable(op); }
void group_counts(const char* op, const DeviceGroups&, const TensorView&) { unavailable(op); }
IndexRange index_range(const char* op, const TensorView&) { unavailable(op); }
void gather_scatter(const GatherScatterArgs& args, const DeviceGroups&) { unavailable(args.op); }
void gather_dot(const char* op, const TensorView&, const TensorView&, const TensorView&, const TensorView&, int64_t,
                const TensorView&) {
  unavailable(op);
}
void scatter_softmax(const char* op, const TensorView&, const DeviceGroups&, const TensorView&, bool, double) {
  unavailable(op);
}

}  // namespace detail::cuda
}  // namespace scatterx

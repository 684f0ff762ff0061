// The collectives' buffers (staging.h): packed inputs, staged outputs and
// scratch, on the device or the host as the route says.
#include "dist/staging.h"

#include <algorithm>

namespace scatterx::dist {

namespace {

// Contiguous memory on the queue's side (the host when null) for a copy of v.
std::shared_ptr<char> memory_for(DeviceQueue* queue, const TensorView& v) {
  if (queue != nullptr) return queue->device_buffer(v.numel() * v.element_size());
  auto host = std::make_shared<Tensor>(Tensor::empty(v.sizes(), v.dtype()));
  return std::shared_ptr<char>(host, static_cast<char*>(host->data()));
}

void copy_on(DeviceQueue* queue, const TensorView& dst, const TensorView& src) {
  if (queue != nullptr)
    queue->copy_view(dst, src);
  else
    copy_(dst, src);
}

TensorView contiguous_like(char* data, const TensorView& v) {
  return TensorView(data, v.dtype(), v.sizes(), v.device());
}

}  // namespace

void copy_view(const DeviceRoute& route, const TensorView& dst, const TensorView& src) {
  copy_on(route.queue.get(), dst, src);
}

StagedInput::StagedInput(const DeviceRoute& route, const TensorView& v) {
  if (v.is_contiguous()) {
    data_ = static_cast<const char*>(v.data());
    return;
  }
  copy_ = memory_for(route.queue.get(), v);
  copy_on(route.queue.get(), contiguous_like(copy_.get(), v), v);
  data_ = copy_.get();
}

StagedOutput::StagedOutput(const DeviceRoute& route, const TensorView& v, bool keep_values)
    : queue_(route.queue.get()), view_(v) {
  if (v.is_contiguous()) {
    data_ = static_cast<char*>(v.data());
    return;
  }
  stand_in_ = memory_for(queue_, v);
  data_ = stand_in_.get();
  if (keep_values) copy_on(queue_, stand_in(), v);
}

TensorView StagedOutput::stand_in() const { return contiguous_like(stand_in_.get(), view_); }

void StagedOutput::commit() {
  if (stand_in_) copy_on(queue_, view_, stand_in());
}

StagingBuffer::StagingBuffer(const DeviceRoute& route, int64_t bytes, const Communicator::State& owner) {
  if (route) {
    device_ = route.queue->device_buffer(bytes);
    data_ = device_.get();
  } else {
    data_ = host_.emplace(bytes, owner).data();
  }
}

}  // namespace scatterx::dist

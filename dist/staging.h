// Where a collective's bytes live while it runs. Its route (device.h) picks
// the side: device memory on the route's queue, or host memory when the
// route is empty. The classes here pack the caller's views into contiguous
// buffers on that side and unpack the results, so that a collective sets up
// and commits its buffers once, whichever side it runs on.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>

#include "dist/device.h"
#include "dist/internal.h"
#include "ops/runtime/memory.h"
#include "ops/tensor.h"

namespace scatterx::dist {

// Kernel scratch from the recycling cache. After a timeout a cancelled
// message may still land in it, so a broken communicator's scratch is never
// handed out again.
class Scratch {
 public:
  Scratch(int64_t bytes, const Communicator::State& owner) : owner_(owner) {
    if (bytes > 0) std::tie(data_, capacity_) = detail::recycled_acquire(static_cast<size_t>(bytes));
  }
  ~Scratch() {
    if (!owner_.broken) detail::recycled_release(data_, capacity_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* data() const { return static_cast<char*>(data_); }

 private:
  const Communicator::State& owner_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// dst = src between views of one shape and dtype, any strides, on the
// route's side: queued on the device, else copied now.
void copy_view(const DeviceRoute& route, const TensorView& dst, const TensorView& src);

// A view's bytes, contiguous on the route's side: the view itself, or a
// packed copy.
class StagedInput {
 public:
  StagedInput(const DeviceRoute& route, const TensorView& v);
  const char* data() const { return data_; }

 private:
  std::shared_ptr<char> copy_;
  const char* data_ = nullptr;
};

// Where a collective writes a view: the view itself when contiguous, else a
// contiguous stand-in on the route's side (holding the view's values when
// `keep_values`) that commit() unpacks into the view.
class StagedOutput {
 public:
  StagedOutput(const DeviceRoute& route, const TensorView& v, bool keep_values);
  char* data() const { return data_; }
  void commit();

 private:
  TensorView stand_in() const;
  DeviceQueue* queue_;  // null: host memory
  TensorView view_;
  std::shared_ptr<char> stand_in_;
  char* data_ = nullptr;
};

// `bytes` of contiguous scratch on the route's side: device memory from the
// queue, else host memory from the recycling cache (Scratch).
class StagingBuffer {
 public:
  StagingBuffer(const DeviceRoute& route, int64_t bytes, const Communicator::State& owner);
  char* data() const { return data_; }

 private:
  std::optional<Scratch> host_;
  std::shared_ptr<char> device_;
  char* data_ = nullptr;
};

}  // namespace scatterx::dist

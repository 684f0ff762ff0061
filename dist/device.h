// Collectives on device memory (CUDA tensors): the data stays on the device
// and is folded there by element-wise kernels.
//
// Two transports move the chunks between ranks:
//   Direct  MPI sends and receives the device pointers themselves (CUDA-aware
//           MPI: Open MPI's MPIX_Query_cuda_support() says so at run time).
//   Staged  every chunk goes through page-locked host slots: a device to
//           host copy before its send, a host to device copy after its
//           receive, queued on the caller's stream so that the copies of one
//           chunk overlap the messages of the others.
// The reduce-scatter is ring.cpp's pipelined ring (same pieces, same
// fold order, so the same bits as the CPU ring); the all-gather sends each
// chunk of this rank's block straight to every peer (a ring would forward
// chunks out of receive slots, and slots held for forwarding can deadlock a
// ring of bounded buffers; direct sends also cross PCIe once per chunk).
// Folds use combine_cpu's arithmetic (ops/runtime/cuda/runtime.h: combine).
//
// The collective returns once its messages completed and the staging slots
// are free; the last folds (and unpacking into strided outputs) may still be
// queued on the stream, so the results are ready in stream order, like any
// other op on that stream. Nothing synchronizes the device beyond that.
//
// Tests: SCATTERX_DIST_EMULATE_DEVICE=staged|direct routes CPU tensors
// through these paths with an emulated device (DeviceQueue over host memory
// whose work runs late, one step each time it is polled), so the CPU suite
// checks their ordering: a missing wait reads stale bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dist/internal.h"
#include "ops/dtype.h"
#include "ops/reduce.h"
#include "ops/tensor.h"

namespace scatterx::dist {

// An in-order queue of device work: a CUDA stream, or the emulation.
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // Device scratch; may be dropped while work that uses it is still queued.
  virtual std::shared_ptr<char> device_buffer(int64_t bytes) = 0;
  // Host memory for the staging slots (page-locked); dropped only after the
  // copies that use it completed.
  virtual std::shared_ptr<char> staging_buffer(int64_t bytes) = 0;
  virtual void to_host(char* host, const char* device, int64_t bytes) = 0;
  virtual void to_device(char* device, const char* host, int64_t bytes) = 0;
  virtual void copy(char* dst, const char* src, int64_t bytes) = 0;
  // dst = src between views of one shape and dtype on the device, any strides.
  virtual void copy_view(const TensorView& dst, const TensorView& src) = 0;
  // combine.h's contract: out = finalize(combine(a, b), count).
  virtual void combine(char* out, const char* a, const char* b, int64_t n, DType dtype, Reduce reduce,
                       int64_t count) = 0;
  virtual void finalize_mean(char* out, int64_t n, DType dtype, int64_t count) = 0;
  // A ticket for the work queued so far; reached() polls it without
  // blocking (ticket 0 is always reached).
  virtual uint64_t mark() = 0;
  virtual bool reached(uint64_t ticket) = 0;
  // Blocks until all queued work ran.
  virtual void synchronize() = 0;
};

enum class DeviceTransport { Staged, Direct };

// How a collective moves a tensor's data. `queue` is null for host memory
// (the CPU rings); otherwise the device paths of this header apply.
struct DeviceRoute {
  std::unique_ptr<DeviceQueue> queue;
  DeviceTransport transport = DeviceTransport::Staged;
  int64_t chunk_bytes = 0;  // pipelining granule (and staging slot size)
  explicit operator bool() const { return queue != nullptr; }
};

// The route for a collective whose tensors are all on t's device: CUDA
// tensors take the device paths (Direct when MPI is CUDA-aware and
// SCATTERX_DIST_CUDA_AWARE is not 0), CPU tensors the host rings (unless
// the emulation is on).
DeviceRoute device_route(const TensorView& t, const char* op);

// Reduce-scatter over device memory: `src` holds this rank's contribution
// (every block), block `rank` of the result goes to `out` (which may be
// that block of src). `mean_count` > 0 divides at the end (avg).
void device_ring_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, const char* src,
                                char* out, const Blocks& blocks, DType dtype, Reduce reduce, int64_t mean_count,
                                const char* op);

// All-gather over device memory (direct to every peer): block `rank` of
// buf is this rank's; on return (in stream order) every block holds its
// owner's values.
void device_all_gather(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, char* buf,
                       const Blocks& blocks, int64_t element_size, const char* op);

// Pairwise exchange over device memory (the all-to-alls): send_bytes[p]
// from send[p] to rank p, recv_bytes[p] into recv[p] from rank p; this
// rank's own share is a device copy. Empty shares send nothing.
void device_exchange(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route,
                     const std::vector<const char*>& send, const std::vector<int64_t>& send_bytes,
                     const std::vector<char*>& recv, const std::vector<int64_t>& recv_bytes, const char* op);

// Broadcast of `bytes` at buf from `root`, which sends each chunk to every
// other rank (one copy off the device per chunk when staged).
void device_broadcast(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, char* buf, int64_t bytes,
                      int root, const char* op);

}  // namespace scatterx::dist

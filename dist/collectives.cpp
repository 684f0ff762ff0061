// The collectives of dist.h over MPI point-to-point messages.
//
// Data moves as bytes; reductions run on the received bytes through the
// local reduce functors (ops/runtime/combine.h), and non-contiguous views are
// packed and unpacked by the local copy kernels. Every collective:
//   1. checks its local arguments (raising before any message);
//   2. when the metadata exchange is on, all-gathers a small record per rank
//      (dtype, shape, split sizes, whether its local checks failed) so that
//      every rank detects the same disagreement and raises the same error;
//   3. moves the data with non-blocking calls polled against the deadline.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "dist/device.h"
#include "dist/internal.h"
#include "ops/cuda.h"
#include "ops/detail/checks.h"
#include "ops/runtime/combine.h"
#include "ops/runtime/knobs.h"
#include "ops/runtime/memory.h"
#include "ops/runtime/stream_copy.h"
#include "ops/reduce.h"

namespace scatterx::dist {

namespace {

using detail::concat;
using detail::raise;

// Pipelining granule of the rings: small enough that the reduction of one
// chunk overlaps the transfer of the next, large enough to keep the
// per-message cost small. SCATTERX_DIST_CHUNK_BYTES overrides it.
// (512 KiB by default: the best of 128 KiB .. 2 MiB for 16 and 64 MiB with 2
// ranks on the development machine.)
int64_t chunk_bytes() {
  static const int64_t bytes = detail::knob_bytes(detail::Knob::DistChunkBytes);
  return bytes;
}

// MPI counts are ints: longer messages go as several pieces of this size.
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;

// ---- scratch -----------------------------------------------------------------

// Kernel scratch from the recycling cache. After a timeout a cancelled
// message may still land in it, so a broken communicator's scratch is never
// handed out again.
class Scratch {
 public:
  Scratch(int64_t bytes, const Communicator::State& owner) : owner_(owner) {
    if (bytes > 0) std::tie(data_, capacity_) = detail::scratch_acquire(static_cast<size_t>(bytes));
  }
  ~Scratch() {
    if (!owner_.broken) detail::scratch_release(data_, capacity_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* data() const { return static_cast<char*>(data_); }

 private:
  const Communicator::State& owner_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// ---- host memory: packing and unpacking -------------------------------------------
// (CUDA tensors never get here: device_route sends them to the device paths.)

// A view's bytes, contiguous: the view itself, or a packed copy.
class PackedInput {
 public:
  explicit PackedInput(const TensorView& v) {
    if (v.is_contiguous()) {
      data_ = static_cast<const char*>(v.data());
    } else {
      copy_ = Tensor::clone(v);
      data_ = static_cast<const char*>(copy_.data());
    }
  }
  const char* data() const { return data_; }

 private:
  Tensor copy_;
  const char* data_ = nullptr;
};

// Where a collective writes a view: the view itself when contiguous, else a
// contiguous stand-in that commit() unpacks into the view.
class StagedOutput {
 public:
  StagedOutput(const TensorView& v, bool keep_values) : view_(v) {
    if (v.is_contiguous()) {
      data_ = static_cast<char*>(v.data());
    } else {
      stand_in_ = keep_values ? Tensor::clone(v) : Tensor::empty(v.sizes(), v.dtype());
      data_ = static_cast<char*>(stand_in_.data());
    }
  }
  char* data() const { return data_; }
  void commit() {
    if (stand_in_.owns_memory()) copy_(view_, stand_in_);
  }

 private:
  TensorView view_;
  Tensor stand_in_;
  char* data_ = nullptr;
};

// A tensor whose memory comes from the scratch cache and goes back to it
// when the caller drops the tensor: an all-to-all-v called in a loop then
// reuses its output memory instead of faulting in fresh pages every call
// (which on a VM costs more than the exchange itself).
Tensor recycled_empty(const Shape& shape, DType dtype) {
  const int64_t bytes = shape_numel(shape) * element_size(dtype);
  auto [data, capacity] = detail::scratch_acquire(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  std::shared_ptr<void> owner(data, [capacity = capacity](void* p) { detail::scratch_release(p, capacity); });
  return Tensor::adopt(TensorView(data, dtype, shape), std::move(owner));
}

// ---- device memory: the device paths (device.h) ---------------------------------

// A view's bytes, contiguous in device memory: the view itself, or a copy
// packed on the route's queue (kept alive by `keep`).
const char* device_input(const DeviceRoute& route, const TensorView& v, std::shared_ptr<char>& keep) {
  if (v.is_contiguous()) return static_cast<const char*>(v.data());
  keep = route.queue->device_buffer(v.numel() * v.element_size());
  route.queue->copy_view(TensorView(keep.get(), v.dtype(), v.sizes(), v.device()), v);
  return keep.get();
}

// Where a device collective writes a view: the view itself when
// contiguous, else a device stand-in that commit() unpacks into it.
class DeviceOutput {
 public:
  DeviceOutput(const DeviceRoute& route, const TensorView& v, bool keep_values) : queue_(*route.queue), view_(v) {
    if (v.is_contiguous()) {
      data_ = static_cast<char*>(v.data());
      return;
    }
    stand_in_ = queue_.device_buffer(v.numel() * v.element_size());
    data_ = stand_in_.get();
    if (keep_values) queue_.copy_view(stand_in(), v);
  }
  char* data() const { return data_; }
  void commit() {
    if (stand_in_) queue_.copy_view(view_, stand_in());
  }

 private:
  TensorView stand_in() const { return TensorView(stand_in_.get(), view_.dtype(), view_.sizes(), view_.device()); }
  DeviceQueue& queue_;
  TensorView view_;
  std::shared_ptr<char> stand_in_;
  char* data_ = nullptr;
};

// ---- point-to-point helpers ----------------------------------------------------

void post_send(const char* data, int64_t bytes, int peer, int tag, MPI_Comm comm, std::vector<MPI_Request>& out,
               const char* op) {
  do {
    const int64_t piece = std::min(bytes, kMaxMessageBytes);
    MPI_Request r;
    check_mpi(MPI_Isend(data, static_cast<int>(piece), MPI_BYTE, peer, tag, comm, &r), op, "MPI_Isend");
    out.push_back(r);
    data += piece;
    bytes -= piece;
  } while (bytes > 0);
}

void post_recv(char* data, int64_t bytes, int peer, int tag, MPI_Comm comm, std::vector<MPI_Request>& out,
               const char* op) {
  do {
    const int64_t piece = std::min(bytes, kMaxMessageBytes);
    MPI_Request r;
    check_mpi(MPI_Irecv(data, static_cast<int>(piece), MPI_BYTE, peer, tag, comm, &r), op, "MPI_Irecv");
    out.push_back(r);
    data += piece;
    bytes -= piece;
  } while (bytes > 0);
}

std::string rank_name(int r) { return concat("rank ", r); }

// ---- metadata exchange -----------------------------------------------------------

// What one rank says about its call. `values` holds op-specific numbers of
// the same length on every rank (split sizes, per-peer sizes).
struct Meta {
  int64_t local_error = 0;  // this rank's local checks failed
  int64_t dtype = 0;
  int64_t ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t extra = 0;  // op-specific scalar (e.g. broadcast's root, the reduce op)
  std::vector<int64_t> values;

  void describe(const TensorView& v) {
    dtype = static_cast<int64_t>(v.dtype());
    ndim = v.dim();
    for (int64_t d = 0; d < v.dim(); ++d) shape[d] = v.sizes()[d];
  }
  std::string shape_str() const {
    std::ostringstream s;
    s << "[";
    for (int64_t d = 0; d < ndim; ++d) s << (d ? ", " : "") << shape[d];
    s << "]";
    return s.str();
  }
  bool same_shape(const Meta& o) const { return ndim == o.ndim && std::equal(shape, shape + ndim, o.shape); }
};

constexpr int64_t kMetaHeader = 4 + kMaxDims;
// Tag layout, all below 32767 (the least MPI_TAG_UB the standard allows):
// data messages [0, kTagCycle) (State::next_tag); the metadata exchange;
// all_reduce's all-gather phase and the shared-memory path's "slot free"
// notes, each offset from the collective's data tag.
constexpr int kMetaTag = kTagCycle;
constexpr int kAllGatherTagOffset = kTagCycle + 1;
constexpr int kShmFreeTagOffset = 2 * kTagCycle + 1;
static_assert(kShmFreeTagOffset + kTagCycle <= 32767, "tags must stay below the least MPI_TAG_UB");

std::vector<Meta> exchange_meta(Communicator::State& s, Waiter& w, const Meta& mine, const char* op) {
  const int64_t n_values = static_cast<int64_t>(mine.values.size());
  const int64_t record = kMetaHeader + n_values;
  std::vector<int64_t> send(static_cast<size_t>(record));
  send[0] = mine.local_error;
  send[1] = mine.dtype;
  send[2] = mine.ndim;
  std::copy(mine.shape, mine.shape + kMaxDims, send.begin() + 3);
  send[3 + kMaxDims] = mine.extra;
  std::copy(mine.values.begin(), mine.values.end(), send.begin() + kMetaHeader);
  std::vector<int64_t> all(static_cast<size_t>(record * s.size));
  std::copy(send.begin(), send.end(), all.begin() + s.rank * record);
  // Point-to-point rather than MPI_Iallgather: a receive can be cancelled
  // when a peer never comes, a non-blocking collective cannot.
  std::vector<MPI_Request> reqs;
  const int bytes = static_cast<int>(record * static_cast<int64_t>(sizeof(int64_t)));
  for (int i = 1; i < s.size; ++i) {
    const int from = (s.rank - i + s.size) % s.size;
    post_recv(reinterpret_cast<char*>(all.data() + from * record), bytes, from, kMetaTag, s.comm, reqs, op);
  }
  for (int i = 1; i < s.size; ++i) {
    post_send(reinterpret_cast<const char*>(send.data()), bytes, (s.rank + i) % s.size, kMetaTag, s.comm, reqs, op);
  }
  w.wait_all(static_cast<int>(reqs.size()), reqs.data(),
             "every rank's metadata (does every rank call this collective?)");
  std::vector<Meta> metas(static_cast<size_t>(s.size));
  for (int r = 0; r < s.size; ++r) {
    const int64_t* p = all.data() + r * record;
    Meta& m = metas[static_cast<size_t>(r)];
    m.local_error = p[0];
    m.dtype = p[1];
    m.ndim = p[2];
    std::copy(p + 3, p + 3 + kMaxDims, m.shape);
    m.extra = p[3 + kMaxDims];
    m.values.assign(p + kMetaHeader, p + record);
  }
  for (int r = 0; r < s.size; ++r) {
    if (metas[static_cast<size_t>(r)].local_error != 0) {
      raise<MismatchError>(op, "rank ", r, " of ", s.size,
                           " rejected its arguments (see the error raised there); no data was exchanged");
    }
  }
  return metas;
}

std::string dtype_str(int64_t code) { return dtype_name(static_cast<DType>(code)); }

// Every rank passed the same dtype (and, when `shapes`, the same shape).
void agree_on_tensor(const std::vector<Meta>& metas, const char* op, const char* arg, bool shapes) {
  for (size_t r = 1; r < metas.size(); ++r) {
    if (metas[r].dtype != metas[0].dtype) {
      raise<MismatchError>(op, "ranks disagree on ", arg, "'s dtype: rank 0 has ", dtype_str(metas[0].dtype), ", rank ",
                           r, " has ", dtype_str(metas[r].dtype));
    }
    if (shapes && !metas[r].same_shape(metas[0])) {
      raise<MismatchError>(op, "ranks disagree on ", arg, "'s shape: rank 0 has ", metas[0].shape_str(), ", rank ", r,
                           " has ", metas[r].shape_str());
    }
  }
}

// Every rank passed the same reduce op (carried in Meta::extra).
void agree_on_reduce_op(const std::vector<Meta>& metas, const char* op) {
  for (size_t r = 1; r < metas.size(); ++r) {
    if (metas[r].extra != metas[0].extra)
      raise<MismatchError>(op, "ranks disagree on op: rank 0 has ",
                           reduce_op_name(static_cast<ReduceOp>(metas[0].extra)), ", rank ", r, " has ",
                           reduce_op_name(static_cast<ReduceOp>(metas[r].extra)));
  }
}

// ---- launching --------------------------------------------------------------------

// The body of a collective, run in order on the communicator: gets the
// state, a waiter and (when the exchange ran) every rank's metadata.
using Body = std::function<void(Communicator::State&, Waiter&, int tag, const std::vector<Meta>*)>;

// Runs the local checks here and now; then queues (async) or runs (sync)
// the exchange and the body. `exchange_always` forces the metadata exchange.
Work launch(const Communicator& comm, const char* op, bool async, bool exchange_always,
            const std::function<Meta()>& check, Body body) {
  Communicator::State& s = comm.state();
  s.check_usable(op);
  const bool exchange = exchange_always || s.checks.load();
  Meta mine;
  try {
    mine = check();
  } catch (const Error&) {
    if (!exchange) throw;
    // Tell the peers before raising, so they raise too instead of waiting.
    // The record length must match the peers' (see padded()).
    Meta failed;
    failed.local_error = 1;
    failed.values.assign(static_cast<size_t>(s.size) * 2, 0);
    const std::exception_ptr error = std::current_exception();
    try {
      s.submit(
           [&s, &failed, op] {
             Waiter w(s, op);
             s.next_tag();
             exchange_meta(s, w, failed, op);
           },
           false)
          .wait();
    } catch (const MismatchError&) {
      // expected: we told them ourselves
    }
    std::rethrow_exception(error);
  }
  // Copies of the communicator keep its state alive until the task ran. CUDA
  // tensors are staged on the stream current at the call, wherever the task
  // runs.
  void* stream = scatterx::cuda::current_stream();
  auto task = [comm, op, exchange, stream, mine = std::move(mine), body = std::move(body)] {
    const scatterx::cuda::StreamGuard on_callers_stream(stream);
    Communicator::State& st = comm.state();
    st.check_usable(op);
    Waiter w(st, op);
    const int tag = st.next_tag();
    if (exchange) {
      const std::vector<Meta> metas = exchange_meta(st, w, mine, op);
      body(st, w, tag, &metas);
    } else {
      body(st, w, tag, nullptr);
    }
  };
  return s.submit(std::move(task), async);
}

// Every exchanged record carries 2 * world size values (zeros where the op
// has none), so a rank that failed its local checks can send a record of the
// same length without knowing what the op would have sent.
std::vector<int64_t> padded(std::vector<int64_t> values, int ws) {
  values.resize(static_cast<size_t>(ws) * 2, 0);
  return values;
}

// ---- argument checks ----------------------------------------------------------------

void check_cpu(const char* op, const char* name, const TensorView& t) {
  if (t.device().is_cpu()) return;
  detail::check_backend(op, name, t.device());
  SCATTERX_CHECK(t.device().index < scatterx::cuda::device_count(), ArgumentError, op, name,
                 " expected a tensor on a visible device, got a tensor on ", t.device().str(), " with ",
                 scatterx::cuda::device_count(), " CUDA device(s) visible");
}

void check_dtype_match(const char* op, const char* name, const TensorView& t, const char* ref_name,
                       const TensorView& ref) {
  SCATTERX_CHECK(t.dtype() == ref.dtype(), DTypeError, op, name, " expected dtype ", dtype_name(ref.dtype()), " (as ",
                 ref_name, "), got ", dtype_name(t.dtype()));
  SCATTERX_CHECK(t.device() == ref.device(), ArgumentError, op, name, " expected ", ref_name, "'s device ",
                 ref.device().str(), ", got ", t.device().str());
}

void check_output(const char* op, const char* name, const TensorView& t) {
  check_cpu(op, name, t);
  detail::check_no_internal_overlap(op, name, t);
}

void check_list_size(const char* op, const char* name, size_t n, int ws) {
  SCATTERX_CHECK(static_cast<int64_t>(n) == ws, ArgumentError, op, name, " expected one tensor per rank (", ws,
                 " tensors), got ", n);
}

Reduce local_reduce(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return Reduce::Sum;
    case ReduceOp::Prod:
      return Reduce::Prod;
    case ReduceOp::Min:
      return Reduce::Amin;
    case ReduceOp::Max:
      return Reduce::Amax;
    case ReduceOp::Avg:
      return Reduce::Mean;
  }
  return Reduce::Sum;
}

// The divisor of an average, applied by the last fold (0: none).
int64_t mean_count(ReduceOp r, int ws) { return r == ReduceOp::Avg ? ws : 0; }

void check_reduce_op(const char* op, ReduceOp r, DType dtype) {
  const bool valid = static_cast<int>(r) <= static_cast<int>(ReduceOp::Avg);
  SCATTERX_CHECK(valid, ArgumentError, op, "op expected one of sum, product, min, max, avg, got code ",
                 static_cast<int>(r));
  SCATTERX_CHECK(reduce_supported(local_reduce(r), dtype), DTypeError, op, "op ", reduce_op_name(r),
                 " is not supported for dtype ", dtype_name(dtype),
                 is_complex(dtype) ? " (complex numbers have no order: use sum, product or avg)" : "");
}

// The shape of ws blocks of `block` stacked or concatenated.
bool is_ws_blocks_of(const TensorView& big, const TensorView& block, int ws) {
  if (big.numel() != block.numel() * ws) return false;
  if (block.dim() == 0) return big.dim() == 1 && big.size(0) == ws;
  if (big.dim() == block.dim()) {  // concatenated along dim 0
    if (big.size(0) != block.size(0) * ws) return false;
    for (int64_t d = 1; d < big.dim(); ++d)
      if (big.size(d) != block.size(d)) return false;
    return true;
  }
  if (big.dim() == block.dim() + 1) {  // stacked
    if (big.size(0) != ws) return false;
    for (int64_t d = 0; d < block.dim(); ++d)
      if (big.size(d + 1) != block.size(d)) return false;
    return true;
  }
  return false;
}

std::string blocks_expectation(const TensorView& block, int ws) {
  if (block.dim() == 0) return concat("[", ws, "]");
  std::vector<int64_t> cat = block.sizes().vec();
  cat[0] *= ws;
  std::vector<int64_t> stack = block.sizes().vec();
  stack.insert(stack.begin(), ws);
  return concat(Shape(cat).str(), " (concatenated) or ", Shape(stack).str(), " (stacked)");
}

// Split sizes: empty means equal splits of dim 0.
std::vector<int64_t> resolve_splits(const char* op, const char* name, const std::vector<int64_t>& splits,
                                    const TensorView& t, const char* tensor_name, int ws) {
  SCATTERX_CHECK(t.dim() >= 1, ArgumentError, op, tensor_name, " expected at least 1 dimension, got a 0-d tensor");
  const int64_t rows = t.size(0);
  if (splits.empty()) {
    SCATTERX_CHECK(rows % ws == 0, ArgumentError, op, tensor_name, ".size(0) expected a multiple of the world size ",
                   ws, " (no ", name, " given), got ", rows);
    return std::vector<int64_t>(static_cast<size_t>(ws), rows / ws);
  }
  check_list_size(op, name, splits.size(), ws);
  int64_t sum = 0;
  for (size_t i = 0; i < splits.size(); ++i) {
    SCATTERX_CHECK(splits[i] >= 0, ArgumentError, op, name, "[", i, "] expected >= 0, got ", splits[i]);
    sum += splits[i];
  }
  SCATTERX_CHECK(sum == rows, ArgumentError, op, name, " expected to sum to ", tensor_name, ".size(0) = ", rows,
                 ", got a sum of ", sum);
  return splits;
}

int64_t row_bytes(const TensorView& t) {
  int64_t n = t.element_size();
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

void check_same_rows(const char* op, const TensorView& output, const TensorView& input) {
  bool same = output.dim() == input.dim();
  for (int64_t d = 1; same && d < output.dim(); ++d) same = output.size(d) == input.size(d);
  SCATTERX_CHECK(same, ArgumentError, op, "output expected the shape of input beyond dim 0 (input is ",
                 input.sizes().str(), "), got ", output.sizes().str());
}

// ---- the rings ----------------------------------------------------------------------------

// Pipelined ring reduce-scatter. `src` is this rank's contribution (every
// block); on return out holds block `rank` reduced over all ranks. Step s
// (1 <= s < ws) receives from the left the partial of block rank - s - 1
// (s contributions), folds in this rank's own values and passes it right;
// the last step folds block `rank` into out. Chunks are folded as they
// arrive, while the later ones are still on the wire.
// ---- one host: reduce-scatter through shared memory ----------------------------------

// Staging slots per (sender, receiver) pair, and the largest world size the
// shared-memory path serves (the segment holds ws * kShmSlots slots per rank).
constexpr int kShmSlots = 4;
constexpr int kShmMaxRanks = 8;
// Below this block size the point-to-point ring is as fast.
constexpr int64_t kShmMinBlockBytes = int64_t{64} << 10;

bool shm_wanted() {
  static const bool wanted = detail::knob_flag(detail::Knob::DistShm);
  return wanted;
}

// Maps the staging segment on first use: collective over the communicator,
// and only called from a collective every rank is in (after a point-to-point
// handshake, so that a missing rank times out instead of hanging in the
// blocking calls below). Every rank ends with the same verdict.
//
// A POSIX shared-memory segment rather than an MPI window: freeing a window
// is collective (Open MPI's holds a barrier), and communicators die at
// different times on different ranks, so windows left to MPI_Finalize get
// freed in different orders and deadlock. A segment is unlinked as soon as
// every rank has mapped it and each rank unmaps its view alone.
bool shm_ready(Communicator::State& s, Waiter& w, const char* op) {
  if (s.shm_state != 0) return s.shm_state > 0;
  {
    std::vector<MPI_Request> reqs;
    std::vector<char> sink(static_cast<size_t>(s.size));
    for (int p = 0; p < s.size; ++p) {
      if (p == s.rank) continue;
      post_recv(&sink[static_cast<size_t>(p)], 0, p, kMetaTag, s.comm, reqs, op);
      post_send(&sink[static_cast<size_t>(s.rank)], 0, p, kMetaTag, s.comm, reqs, op);
    }
    w.wait_all(static_cast<int>(reqs.size()), reqs.data(), "every rank (shared-memory setup)");
  }
  auto agree = [&](int mine) {
    int all = 0;
    check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, s.comm), op, "MPI_Allreduce");
    return all != 0;
  };
  int ok = shm_wanted() && s.size > 1 && s.size <= kShmMaxRanks ? 1 : 0;
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(s.comm, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) ok = 0;
  int node_size = 0;
  if (node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
  }
  if (node_size != s.size) ok = 0;
  if (!agree(ok)) {
    s.shm_state = -1;
    return false;
  }
  s.slot_bytes = std::max<int64_t>(64, (chunk_bytes() + 63) / 64 * 64);
  const int64_t segment = static_cast<int64_t>(s.size) * kShmSlots * s.slot_bytes;
  s.shm_bytes = static_cast<size_t>(segment * s.size);

  // Rank 0 creates the segment and sends its name along.
  char name[64] = {};
  int created = 0;
  if (s.rank == 0) {
    static std::atomic<unsigned> serial{0};
    std::snprintf(name, sizeof name, "/scatterx-%ld-%u", static_cast<long>(getpid()), serial++);
    const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      // posix_fallocate rather than ftruncate: a full /dev/shm must show
      // here, not as a SIGBUS when a page is first touched.
      created = posix_fallocate(fd, 0, static_cast<off_t>(s.shm_bytes)) == 0 ? 1 : 0;
      close(fd);
      if (!created) shm_unlink(name);
    }
  }
  check_mpi(MPI_Bcast(&created, 1, MPI_INT, 0, s.comm), op, "MPI_Bcast");
  if (!created) {
    s.shm_state = -1;
    return false;
  }
  check_mpi(MPI_Bcast(name, sizeof name, MPI_CHAR, 0, s.comm), op, "MPI_Bcast");
  ok = 0;
  const int fd = shm_open(name, O_RDWR, 0600);
  if (fd >= 0) {
    void* base = mmap(nullptr, s.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base != MAP_FAILED) {
      s.shm_base = static_cast<char*>(base);
      ok = 1;
    }
  }
  const bool all_mapped = agree(ok);
  if (s.rank == 0) shm_unlink(name);  // every rank holds its mapping (or gave up)
  if (!all_mapped) {
    s.unmap_shm();
    s.shm_state = -1;
    return false;
  }
  s.staging.resize(static_cast<size_t>(s.size));
  for (int q = 0; q < s.size; ++q) s.staging[static_cast<size_t>(q)] = s.shm_base + segment * q;
  s.slot_writers.assign(static_cast<size_t>(s.size), {});
  s.shm_state = 1;
  return true;
}

// ---- writing a slot ------------------------------------------------------------------
//
// A slot is written by one core and read by another right after. While the
// two cores share a cache its lines go from cache to cache, and a plain copy
// is the fast way to write it. When they sit on different dies or sockets,
// where a VM's vCPUs can land and move between while a job runs, each line
// crosses the machine twice (the writer takes it from the reader's cache to
// write it, the reader takes it back): on this project's 2-vCPU machine the
// 16 MiB reduce-scatter took 1.5 ms one minute and 3.4 to 3.8 ms the next.
// A copy with non-temporal stores sends the lines to memory instead: much
// cheaper then (1.5 ms), but when the cores are close it makes the reader
// fetch from memory what a neighbouring cache would have served (2.0 ms).
//
// A probe of the cores' distance (a cache line bounced between the ranks)
// could not tell the two cases apart in the middle of heavy traffic, but the
// plain copy's own time can: with the cores far apart it costs 4 to 6 times
// a non-temporal copy, with them close about the same (the writer does not
// see the reader's extra cost). So a rank times its copies into each peer's
// slots, streams only while plain copies cost kFarCopyRatio times as much,
// and keeps both costs current by copying the other way now and then.

// Slots smaller than this are copied plainly and untimed (too short to time).
constexpr int64_t kTimedSlotBytes = int64_t{64} << 10;
constexpr double kFarCopyRatio = 3;
// One copy in this many goes the other way, since the vCPUs can move within
// seconds: often while copying plainly (a non-temporal trial costs little),
// rarely while streaming (a plain trial with the cores apart costs 5 times a
// copy, for the writer and again for the reader).
constexpr uint64_t kStreamingTrialEvery = 32;
constexpr uint64_t kPlainTrialEvery = 128;

// SCATTERX_DIST_SHM_STREAM: unset, choose by the timings; 0, always plain
// copies; 1, always non-temporal.
int forced_slot_streaming() {
  static const int forced = [] {
    const std::string way = detail::knob_choice(detail::Knob::DistShmStream);
    return way == "auto" ? -1 : way == "1" ? 1 : 0;
  }();
  return forced;
}

void write_slot(Communicator::State::SlotWriter& writer, char* slot, const char* from, int64_t bytes) {
  auto copy = [&](bool streaming) {
    if (streaming) {
      detail::copy_streaming(slot, from, bytes);
      detail::streaming_store_fence();  // before the peer is told
    } else {
      std::memcpy(slot, from, static_cast<size_t>(bytes));
    }
  };
  const int forced = forced_slot_streaming();
  if (forced >= 0 || bytes < kTimedSlotBytes) {
    copy(forced == 1);
    return;
  }
  double* cost = writer.ns_per_byte;  // [plain, streaming]
  bool streaming;
  if (cost[0] == 0 || cost[1] == 0) {
    streaming = cost[0] != 0;  // measure each way once, plain first
  } else {
    streaming = cost[0] > kFarCopyRatio * cost[1];
    if (++writer.copies % (streaming ? kPlainTrialEvery : kStreamingTrialEvery) == 0) streaming = !streaming;
  }
  const auto start = std::chrono::steady_clock::now();
  copy(streaming);
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  const double sample = std::max(ns, 1.0) / static_cast<double>(bytes);
  double& mean = cost[streaming ? 1 : 0];
  mean = mean == 0 ? sample : (mean + sample) / 2;
}

// Direct reduce-scatter on one host. Rank q copies chunk c of its block p
// into its staging slot (p, c % kShmSlots) and tells p; p folds every rank's
// chunk c of block p (its own from src, the others straight out of their
// slots, in rank order) into out and tells each sender the slot is free.
// One copy of the outgoing data instead of MPI's copy on each receive.
void shm_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out, const Blocks& blocks,
                        DType dtype, ReduceOp reduce_op, const char* op, int64_t chunk,
                        const std::function<void(int64_t, int64_t)>& on_done) {
  const int ws = s.size;
  const int r = s.rank;
  const int64_t es = element_size(dtype);
  const Reduce reduce = local_reduce(reduce_op);
  const int64_t divisor = mean_count(reduce_op, ws);
  const int free_tag = tag + kShmFreeTagOffset;
  auto n_chunks = [&](int b) {
    const int64_t len = blocks.length[static_cast<size_t>(b)];
    return len == 0 ? int64_t{1} : (len + chunk - 1) / chunk;
  };
  auto slot = [&](int sender, int receiver, int64_t c) {
    return s.staging[static_cast<size_t>(sender)] +
           (static_cast<int64_t>(receiver) * kShmSlots + c % kShmSlots) * s.slot_bytes;
  };
  int64_t rounds = 0;
  for (int b = 0; b < ws; ++b) rounds = std::max(rounds, n_chunks(b));
  std::vector<MPI_Request> signals;  // "ready" and "free" notes in flight
  char note = 0;
  for (int64_t c = 0; c < rounds; ++c) {
    // Produce: chunk c of every peer's block, once that slot was freed.
    for (int i = 1; i < ws; ++i) {
      const int p = mod(r + i, ws);
      if (c >= n_chunks(p)) continue;
      if (c >= kShmSlots) {
        MPI_Request req;
        check_mpi(MPI_Irecv(&note, 0, MPI_BYTE, p, free_tag, s.comm, &req), op, "MPI_Irecv");
        w.wait(req, rank_name(p));
      }
      const int64_t begin = c * chunk;
      const int64_t len = std::min(chunk, blocks.length[static_cast<size_t>(p)] - begin);
      if (len > 0)
        write_slot(s.slot_writers[static_cast<size_t>(p)], slot(r, p, c),
                   src + (blocks.offset[static_cast<size_t>(p)] + begin) * es, len * es);
      std::atomic_thread_fence(std::memory_order_release);
      post_send(&note, 0, p, tag, s.comm, signals, op);
    }
    // Consume: chunk c of this rank's block from everyone.
    if (c < n_chunks(r)) {
      const int64_t begin = c * chunk;
      const int64_t len = std::min(chunk, blocks.length[static_cast<size_t>(r)] - begin);
      const char* own = src + (blocks.offset[static_cast<size_t>(r)] + begin) * es;
      char* dst = out + begin * es;
      for (int q = 0; q < ws; ++q) {
        if (q != r) {
          MPI_Request req;
          check_mpi(MPI_Irecv(&note, 0, MPI_BYTE, q, tag, s.comm, &req), op, "MPI_Irecv");
          w.wait(req, rank_name(q));
          std::atomic_thread_fence(std::memory_order_acquire);
        }
      }
      // Own values first (out may be own's memory, as in all_reduce), then
      // the other ranks' in rank order.
      bool first = true;
      for (int q = 0; q < ws; ++q) {
        if (q == r) continue;
        const bool last = q == ws - 1 || (q == ws - 2 && r == ws - 1);
        detail::combine_cpu(dst, first ? own : dst, slot(q, r, c), len, dtype, reduce, last ? divisor : 0, op);
        first = false;
      }
      for (int q = 0; q < ws; ++q) {
        if (q != r) post_send(&note, 0, q, free_tag, s.comm, signals, op);
      }
      if (on_done) on_done(begin, len);
    }
    // Completed notes need no further attention; keep the list short.
    if (signals.size() > 64) {
      w.wait_all(static_cast<int>(signals.size()), signals.data(), "the other ranks");
      signals.clear();
    }
  }
  // The last kShmSlots "free" notes of each peer are still to be received,
  // so that the next collective starts with every slot free.
  for (int i = 1; i < ws; ++i) {
    const int p = mod(r + i, ws);
    const int64_t owed = std::min<int64_t>(n_chunks(p), kShmSlots);
    for (int64_t k = 0; k < owed; ++k) {
      MPI_Request req;
      check_mpi(MPI_Irecv(&note, 0, MPI_BYTE, p, free_tag, s.comm, &req), op, "MPI_Irecv");
      w.wait(req, rank_name(p));
    }
  }
  w.wait_all(static_cast<int>(signals.size()), signals.data(), "the other ranks");
}

// `on_done(begin, len)`, when given, is called for each finished chunk of
// out (element offsets), in order, as soon as it is final.
using ChunkDone = std::function<void(int64_t begin, int64_t len)>;

void ring_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out, const Blocks& blocks,
                         DType dtype, ReduceOp reduce_op, const char* op, const ChunkDone& on_done = nullptr) {
  const int ws = s.size;
  const int r = s.rank;
  const int64_t es = element_size(dtype);
  const Reduce reduce = local_reduce(reduce_op);
  const int64_t divisor = mean_count(reduce_op, ws);
  if (ws == 1) {
    const int64_t n = blocks.length[0];
    if (out != src) std::memmove(out, src, static_cast<size_t>(n * es));
    if (divisor > 0) detail::finalize_mean_cpu(out, n, dtype, 1, op);
    if (on_done) on_done(0, n);
    return;
  }
  const int right = mod(r + 1, ws);
  const int left = mod(r - 1, ws);
  // One request per chunk: chunks stay below MPI's int count.
  const int64_t chunk = std::max<int64_t>(1, std::min(chunk_bytes(), kMaxMessageBytes) / es);
  // Every rank takes the same branch: the block sizes agree (the arguments
  // do) and shm_ready's verdict is collective.
  if (blocks.length[0] * es >= kShmMinBlockBytes && shm_ready(s, w, op)) {
    shm_reduce_scatter(s, w, tag, src, out, blocks, dtype, reduce_op, op, chunk, on_done);
    return;
  }
  auto block_at = [&](int step) { return mod(r - step - 1, ws); };

  const std::vector<RingPiece> pieces = ring_pieces(blocks, r, ws, chunk);
  const size_t n_pieces = pieces.size();
  size_t n_middle = 0;  // pieces of steps 1 .. ws-2, which are forwarded
  while (n_middle < n_pieces && pieces[n_middle].step < ws - 1) ++n_middle;

  // The forwarded partials (steps 1 .. ws-2) need their own memory until
  // their send completes: one buffer for all of them. The last step's
  // chunks are folded into out at once, so they cycle through a few slots
  // that stay in cache (the received bytes are never written back to memory).
  int64_t middle_elems = 0;
  std::vector<int64_t> middle_offset(n_middle);
  for (size_t i = 0; i < n_middle; ++i) {
    middle_offset[i] = middle_elems;
    middle_elems += pieces[i].len;
  }
  constexpr size_t kSlots = 8;
  Scratch middle(middle_elems * es, s);
  Scratch slots(static_cast<int64_t>(kSlots) * chunk * es, s);
  auto buffer_of = [&](size_t i) {
    return i < n_middle ? middle.data() + middle_offset[i] * es : slots.data() + ((i - n_middle) % kSlots) * chunk * es;
  };

  // Receives: every forwarded piece at once, then the last step's pieces as
  // slots free up (posting order is the order of arrival either way).
  std::vector<MPI_Request> recv_req(n_pieces, MPI_REQUEST_NULL);
  auto post_piece = [&](size_t i) {
    std::vector<MPI_Request> one;
    post_recv(buffer_of(i), pieces[i].len * es, left, tag, s.comm, one, op);
    recv_req[i] = one[0];
  };
  size_t posted = 0;
  for (; posted < std::min(n_pieces, n_middle + kSlots); ++posted) post_piece(posted);

  // Step 0: this rank's own values of block rank - 1, straight from src.
  std::vector<MPI_Request> send_req;
  {
    const size_t b = static_cast<size_t>(block_at(0));
    for_each_chunk(blocks.length[b], chunk, [&](int64_t begin, int64_t len) {
      post_send(src + (blocks.offset[b] + begin) * es, len * es, right, tag, s.comm, send_req, op);
    });
  }
  for (size_t i = 0; i < n_pieces; ++i) {
    const RingPiece& p = pieces[i];
    w.wait(recv_req[i], rank_name(left));
    const size_t b = static_cast<size_t>(block_at(p.step));
    char* partial = buffer_of(i);
    const char* own = src + (blocks.offset[b] + p.begin) * es;
    if (i < n_middle) {
      detail::combine_cpu(partial, own, partial, p.len, dtype, reduce, 0, op);
      post_send(partial, p.len * es, right, tag, s.comm, send_req, op);
    } else {
      detail::combine_cpu(out + p.begin * es, own, partial, p.len, dtype, reduce, divisor, op);
      if (posted < n_pieces) post_piece(posted++);  // reuses the slot just consumed
      if (on_done) on_done(p.begin, p.len);
    }
  }
  w.wait_all(static_cast<int>(send_req.size()), send_req.data(), rank_name(right));
}

// Ring all-gather over `buf`: step s passes block rank - s right and
// receives block rank - s - 1 from the left, chunk by chunk, forwarding each
// chunk as soon as it arrived. In three parts, so that all_reduce can send
// its own block chunk by chunk while the reduce-scatter still finishes it:
//   RingAllGather ag(...);        posts every receive
//   ag.send_own(begin, len);      this rank's block, in `chunk` pieces, in order
//   ag.finish();                  forwards and waits
class RingAllGather {
 public:
  RingAllGather(Communicator::State& s, Waiter& w, int tag, char* buf, const Blocks& blocks, int64_t es, int64_t chunk,
                const char* op)
      : s_(s), w_(w), tag_(tag), es_(es), chunk_(chunk), op_(op) {
    const int ws = s.size;
    if (ws == 1) return;
    right_ = mod(s.rank + 1, ws);
    left_ = mod(s.rank - 1, ws);
    for (int step = 0; step < ws - 1; ++step) {
      const size_t b = static_cast<size_t>(mod(s.rank - step - 1, ws));
      for_each_chunk(blocks.length[b], chunk, [&](int64_t begin, int64_t len) {
        char* dst = buf + (blocks.offset[b] + begin) * es;
        const size_t first = recv_req_.size();
        post_recv(dst, len * es, left_, tag, s.comm, recv_req_, op);
        pieces_.push_back({step, dst, len * es, first, recv_req_.size() - first});
      });
    }
  }

  // Sends elements [begin, begin + len) of this rank's block from `from`
  // (a contiguous copy of the block, or the block in buf itself). len is
  // `chunk` except for the block's last piece.
  void send_own(const char* from, int64_t begin, int64_t len) {
    if (s_.size == 1) return;
    for_each_chunk(len, chunk_, [&](int64_t c, int64_t n) {
      post_send(from + (begin + c) * es_, n * es_, right_, tag_, s_.comm, send_req_, op_);
    });
  }

  void finish() {
    const int ws = s_.size;
    if (ws == 1) return;
    for (const Piece& p : pieces_) {
      if (p.step == ws - 2) break;  // the last step's blocks are not forwarded
      w_.wait_all(static_cast<int>(p.n_req), recv_req_.data() + p.first_req, rank_name(left_));
      post_send(p.data, p.bytes, right_, tag_, s_.comm, send_req_, op_);
    }
    w_.wait_all(static_cast<int>(recv_req_.size()), recv_req_.data(), rank_name(left_));
    w_.wait_all(static_cast<int>(send_req_.size()), send_req_.data(), rank_name(right_));
  }

 private:
  struct Piece {
    int step;
    char* data;
    int64_t bytes;
    size_t first_req;
    size_t n_req;
  };
  Communicator::State& s_;
  Waiter& w_;
  int tag_;
  int64_t es_;
  int64_t chunk_;
  const char* op_;
  int right_ = 0;
  int left_ = 0;
  std::vector<Piece> pieces_;
  std::vector<MPI_Request> recv_req_;
  std::vector<MPI_Request> send_req_;
};

// The whole all-gather; `own`, when given, holds this rank's block
// (contiguous): it is sent from there and copied into buf while the
// messages are on the wire.
void ring_all_gather(Communicator::State& s, Waiter& w, int tag, char* buf, const Blocks& blocks, int64_t es,
                     const char* op, const char* own = nullptr) {
  const size_t me = static_cast<size_t>(s.rank);
  char* slot = buf + blocks.offset[me] * es;
  // Chunks only serve forwarding; with two ranks nothing is forwarded, so
  // each block goes as one message (fewer messages to match).
  const int64_t chunk = s.size <= 2 ? std::numeric_limits<int64_t>::max() : std::max<int64_t>(1, chunk_bytes() / es);
  RingAllGather ag(s, w, tag, buf, blocks, es, chunk, op);
  ag.send_own(own != nullptr ? own : slot, 0, blocks.length[me]);
  if (own != nullptr && own != slot) std::memcpy(slot, own, static_cast<size_t>(blocks.length[me] * es));
  ag.finish();
}

// Pairwise exchange: send_bytes[p] from send + send_offset[p] to rank p,
// recv_bytes[p] into recv + recv_offset[p] from rank p (this rank's own
// share is copied). Peers are visited starting from the right neighbour so
// that not every rank hits rank 0 first.
void exchange_pairwise(Communicator::State& s, Waiter& w, int tag, const std::vector<const char*>& send,
                       const std::vector<int64_t>& send_bytes, const std::vector<char*>& recv,
                       const std::vector<int64_t>& recv_bytes, const char* op) {
  const int ws = s.size;
  const int r = s.rank;
  std::vector<MPI_Request> reqs;
  for (int i = 1; i < ws; ++i) {
    const int from = mod(r - i, ws);
    if (recv_bytes[static_cast<size_t>(from)] > 0)
      post_recv(recv[static_cast<size_t>(from)], recv_bytes[static_cast<size_t>(from)], from, tag, s.comm, reqs, op);
  }
  for (int i = 1; i < ws; ++i) {
    const int to = mod(r + i, ws);
    if (send_bytes[static_cast<size_t>(to)] > 0)
      post_send(send[static_cast<size_t>(to)], send_bytes[static_cast<size_t>(to)], to, tag, s.comm, reqs, op);
  }
  const size_t me = static_cast<size_t>(r);
  if (send_bytes[me] > 0 && recv[me] != send[me]) std::memmove(recv[me], send[me], static_cast<size_t>(send_bytes[me]));
  w.wait_all(static_cast<int>(reqs.size()), reqs.data(), "the other ranks' all-to-all messages");
}

}  // namespace

// ---- all_gather ---------------------------------------------------------------------------

static Work all_gather_into_tensor_impl(const TensorView& output, const TensorView& input, const Communicator& comm,
                                        bool async) {
  const char* op = "all_gather_into_tensor";
  const int ws = comm.size();
  auto check = [&] {
    check_cpu(op, "input", input);
    check_output(op, "output", output);
    check_dtype_match(op, "output", output, "input", input);
    SCATTERX_CHECK(is_ws_blocks_of(output, input, ws), ArgumentError, op, "output expected shape ",
                   blocks_expectation(input, ws), " for input ", input.sizes().str(), " and ", ws, " ranks, got ",
                   output.sizes().str());
    const bool in_place =
        output.is_contiguous() && input.is_contiguous() &&
        static_cast<const char*>(input.data()) ==
            static_cast<const char*>(output.data()) + comm.rank() * input.numel() * input.element_size();
    if (!in_place) detail::check_no_overlap(op, "output", output, "input", input);
    Meta m;
    m.describe(input);
    m.values = padded({}, ws);
    return m;
  };
  Body body = [output, input, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) agree_on_tensor(*metas, op, "input", true);
    const int64_t es = input.element_size();
    const int64_t n = input.numel();
    if (const DeviceRoute route = device_route(input, op)) {
      DeviceOutput out(route, output, false);
      char* own = out.data() + s.rank * n * es;
      if (!(input.is_contiguous() && input.data() == own))
        route.queue->copy_view(TensorView(own, input.dtype(), input.sizes(), input.device()), input);
      device_all_gather(s, w, tag, route, out.data(), Blocks::equal(n, s.size), es, op);
      out.commit();
      return;
    }
    StagedOutput out(output, false);
    PackedInput in(input);
    ring_all_gather(s, w, tag, out.data(), Blocks::equal(n, s.size), es, op, in.data());
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
      const std::string name = concat("tensor_list[", i, "]");
      check_output(op, name.c_str(), outputs[i]);
      check_dtype_match(op, name.c_str(), outputs[i], "input", input);
      SCATTERX_CHECK(outputs[i].sizes() == input.sizes(), ArgumentError, op, name, " expected input's shape ",
                     input.sizes().str(), ", got ", outputs[i].sizes().str());
    }
    Meta m;
    m.describe(input);
    m.values = padded({}, ws);
    return m;
  };
  Body body = [outputs, input, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) agree_on_tensor(*metas, op, "input", true);
    // One contiguous gather buffer, then unpack into the list.
    const int64_t es = input.element_size();
    const int64_t n = input.numel();
    auto block = [&](char* base, int r) {
      return TensorView(base + r * n * es, input.dtype(), input.sizes(), input.device());
    };
    if (const DeviceRoute route = device_route(input, op)) {
      const std::shared_ptr<char> buf = route.queue->device_buffer(n * es * s.size);
      route.queue->copy_view(block(buf.get(), s.rank), input);
      device_all_gather(s, w, tag, route, buf.get(), Blocks::equal(n, s.size), es, op);
      for (int r = 0; r < s.size; ++r) route.queue->copy_view(outputs[static_cast<size_t>(r)], block(buf.get(), r));
      return;
    }
    Scratch buf(n * es * s.size, s);
    TensorView own(buf.data() + s.rank * n * es, input.dtype(), input.sizes());
    copy_(own, input);
    ring_all_gather(s, w, tag, buf.data(), Blocks::equal(n, s.size), es, op);
    for (int r = 0; r < s.size; ++r) {
      copy_(outputs[static_cast<size_t>(r)], TensorView(buf.data() + r * n * es, input.dtype(), input.sizes()));
    }
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work all_gather_async(const std::vector<TensorView>& outputs, const TensorView& input, const Communicator& comm) {
  return all_gather_impl(outputs, input, comm, true);
}

void all_gather(const std::vector<TensorView>& outputs, const TensorView& input, const Communicator& comm) {
  all_gather_impl(outputs, input, comm, false).wait();
}

// ---- reduce_scatter ------------------------------------------------------------------------

static Work reduce_scatter_tensor_impl(const TensorView& output, const TensorView& input, ReduceOp reduce_op,
                                       const Communicator& comm, bool async) {
  const char* op = "reduce_scatter_tensor";
  const int ws = comm.size();
  auto check = [&] {
    check_cpu(op, "input", input);
    check_output(op, "output", output);
    check_dtype_match(op, "output", output, "input", input);
    check_reduce_op(op, reduce_op, input.dtype());
    SCATTERX_CHECK(is_ws_blocks_of(input, output, ws), ArgumentError, op, "input expected shape ",
                   blocks_expectation(output, ws), " for output ", output.sizes().str(), " and ", ws, " ranks, got ",
                   input.sizes().str());
    detail::check_no_overlap(op, "output", output, "input", input);
    Meta m;
    m.describe(input);
    m.extra = static_cast<int64_t>(reduce_op);
    m.values = padded({}, ws);
    return m;
  };
  Body body = [output, input, reduce_op, op](Communicator::State& s, Waiter& w, int tag,
                                             const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "input", true);
      agree_on_reduce_op(*metas, op);
    }
    const Blocks blocks = Blocks::equal(output.numel(), s.size);
    if (const DeviceRoute route = device_route(input, op)) {
      std::shared_ptr<char> packed;
      const char* src = device_input(route, input, packed);
      DeviceOutput out(route, output, false);
      device_ring_reduce_scatter(s, w, tag, route, src, out.data(), blocks, input.dtype(), local_reduce(reduce_op),
                                 mean_count(reduce_op, s.size), op);
      out.commit();
      return;
    }
    PackedInput in(input);
    StagedOutput out(output, false);
    ring_reduce_scatter(s, w, tag, in.data(), out.data(), blocks, input.dtype(), reduce_op, op);
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
      const std::string name = concat("input_list[", i, "]");
      check_cpu(op, name.c_str(), inputs[i]);
      check_dtype_match(op, name.c_str(), inputs[i], "output", output);
      SCATTERX_CHECK(inputs[i].sizes() == output.sizes(), ArgumentError, op, name, " expected output's shape ",
                     output.sizes().str(), ", got ", inputs[i].sizes().str());
      detail::check_no_overlap(op, "output", output, name.c_str(), inputs[i]);
    }
    Meta m;
    m.describe(output);
    m.extra = static_cast<int64_t>(reduce_op);
    m.values = padded({}, ws);
    return m;
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
    if (const DeviceRoute route = device_route(output, op)) {
      const std::shared_ptr<char> packed = route.queue->device_buffer(n * es * s.size);
      for (int r = 0; r < s.size; ++r) {
        route.queue->copy_view(TensorView(packed.get() + r * n * es, output.dtype(), output.sizes(), output.device()),
                               inputs[static_cast<size_t>(r)]);
      }
      DeviceOutput out(route, output, false);
      device_ring_reduce_scatter(s, w, tag, route, packed.get(), out.data(), Blocks::equal(n, s.size), output.dtype(),
                                 local_reduce(reduce_op), mean_count(reduce_op, s.size), op);
      out.commit();
      return;
    }
    Scratch packed(n * es * s.size, s);
    for (int r = 0; r < s.size; ++r) {
      copy_(TensorView(packed.data() + r * n * es, output.dtype(), output.sizes()), inputs[static_cast<size_t>(r)]);
    }
    StagedOutput out(output, false);
    ring_reduce_scatter(s, w, tag, packed.data(), out.data(), Blocks::equal(n, s.size), output.dtype(), reduce_op, op);
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

// ---- all_reduce ----------------------------------------------------------------------------

static Work all_reduce_impl(const TensorView& tensor, ReduceOp reduce_op, const Communicator& comm, bool async) {
  const char* op = "all_reduce";
  const int ws = comm.size();
  auto check = [&] {
    check_output(op, "tensor", tensor);
    check_reduce_op(op, reduce_op, tensor.dtype());
    Meta m;
    m.describe(tensor);
    m.extra = static_cast<int64_t>(reduce_op);
    m.values = padded({}, ws);
    return m;
  };
  Body body = [tensor, reduce_op, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "tensor", true);
      agree_on_reduce_op(*metas, op);
    }
    const Blocks blocks = Blocks::even(tensor.numel(), s.size);
    const int64_t es = tensor.element_size();
    if (const DeviceRoute route = device_route(tensor, op)) {
      // Reduce-scatter in place (block `rank` receives the result), then
      // all-gather; each phase pipelines its own chunks.
      DeviceOutput buf(route, tensor, true);
      char* mine = buf.data() + blocks.offset[static_cast<size_t>(s.rank)] * es;
      device_ring_reduce_scatter(s, w, tag, route, buf.data(), mine, blocks, tensor.dtype(), local_reduce(reduce_op),
                                 mean_count(reduce_op, s.size), op);
      device_all_gather(s, w, tag + kAllGatherTagOffset, route, buf.data(), blocks, es, op);
      buf.commit();
      return;
    }
    StagedOutput buf(tensor, true);
    // Reduce-scatter in place: block `rank` of the tensor receives the
    // result, and the other blocks are only read until the all-gather
    // overwrites them.
    char* mine = buf.data() + blocks.offset[static_cast<size_t>(s.rank)] * es;
    // The all-gather's messages have their own tag, and each reduced chunk
    // of this rank's block leaves as soon as the reduce-scatter finished
    // it, so the two phases overlap.
    const int64_t chunk = std::max<int64_t>(1, chunk_bytes() / es);
    RingAllGather ag(s, w, tag + kAllGatherTagOffset, buf.data(), blocks, es, chunk, op);
    ring_reduce_scatter(s, w, tag, buf.data(), mine, blocks, tensor.dtype(), reduce_op, op,
                        [&](int64_t begin, int64_t len) { ag.send_own(mine, begin, len); });
    ag.finish();
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

// ---- broadcast -------------------------------------------------------------------------------

static Work broadcast_impl(const TensorView& tensor, int root, const Communicator& comm, bool async) {
  const char* op = "broadcast";
  const int ws = comm.size();
  auto check = [&] {
    check_output(op, "tensor", tensor);
    SCATTERX_CHECK(root >= 0 && root < ws, ArgumentError, op, "src expected a rank in [0, ", ws, "), got ", root);
    Meta m;
    m.describe(tensor);
    m.extra = root;
    m.values = padded({}, ws);
    return m;
  };
  Body body = [tensor, root, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) {
      agree_on_tensor(*metas, op, "tensor", true);
      for (size_t r = 1; r < metas->size(); ++r) {
        if ((*metas)[r].extra != (*metas)[0].extra)
          raise<MismatchError>(op, "ranks disagree on src: rank 0 has ", (*metas)[0].extra, ", rank ", r, " has ",
                               (*metas)[r].extra);
      }
    }
    const int64_t bytes = tensor.numel() * tensor.element_size();
    if (const DeviceRoute route = device_route(tensor, op)) {
      DeviceOutput buf(route, tensor, s.rank == root);
      device_broadcast(s, w, tag, route, buf.data(), bytes, root, op);
      if (s.rank != root) buf.commit();
      return;
    }
    StagedOutput buf(tensor, s.rank == root);
    // Binomial tree over ranks relative to the root, point-to-point (so a
    // wait can be cancelled at the timeout).
    const int ws = s.size;
    const int vr = mod(s.rank - root, ws);
    int mask = 1;
    for (; mask < ws; mask <<= 1) {
      if (vr & mask) {
        const int parent = mod(vr - mask + root, ws);
        std::vector<MPI_Request> reqs;
        post_recv(buf.data(), bytes, parent, tag, s.comm, reqs, op);
        w.wait_all(static_cast<int>(reqs.size()), reqs.data(), concat(rank_name(parent), " (from src ", root, ")"));
        break;
      }
    }
    std::vector<MPI_Request> reqs;
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (vr + mask < ws) post_send(buf.data(), bytes, mod(vr + mask + root, ws), tag, s.comm, reqs, op);
    }
    w.wait_all(static_cast<int>(reqs.size()), reqs.data(), "the ranks below this one in the broadcast tree");
    if (s.rank != root) buf.commit();
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work broadcast_async(const TensorView& tensor, int root, const Communicator& comm) {
  return broadcast_impl(tensor, root, comm, true);
}

void broadcast(const TensorView& tensor, int root, const Communicator& comm) {
  broadcast_impl(tensor, root, comm, false).wait();
}

// ---- all_to_all --------------------------------------------------------------------------------

static Work all_to_all_impl(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                            const Communicator& comm, bool async) {
  const char* op = "all_to_all";
  const int ws = comm.size();
  auto check = [&] {
    check_list_size(op, "output_tensor_list", outputs.size(), ws);
    check_list_size(op, "input_tensor_list", inputs.size(), ws);
    std::vector<int64_t> values;
    for (int i = 0; i < ws; ++i) {
      const std::string in_name = concat("input_tensor_list[", i, "]");
      const std::string out_name = concat("output_tensor_list[", i, "]");
      check_cpu(op, in_name.c_str(), inputs[static_cast<size_t>(i)]);
      check_output(op, out_name.c_str(), outputs[static_cast<size_t>(i)]);
      check_dtype_match(op, in_name.c_str(), inputs[static_cast<size_t>(i)], "input_tensor_list[0]", inputs[0]);
      check_dtype_match(op, out_name.c_str(), outputs[static_cast<size_t>(i)], "input_tensor_list[0]", inputs[0]);
      for (int j = 0; j < ws; ++j) {
        detail::check_no_overlap(op, out_name.c_str(), outputs[static_cast<size_t>(i)],
                                 concat("input_tensor_list[", j, "]").c_str(), inputs[static_cast<size_t>(j)]);
      }
      values.push_back(inputs[static_cast<size_t>(i)].numel());
    }
    for (int i = 0; i < ws; ++i) values.push_back(outputs[static_cast<size_t>(i)].numel());
    const size_t me = static_cast<size_t>(comm.rank());
    SCATTERX_CHECK(inputs[me].sizes() == outputs[me].sizes(), ArgumentError, op, "output_tensor_list[", me,
                   "] expected the shape of input_tensor_list[", me, "] ", inputs[me].sizes().str(),
                   " (this rank's share to itself), got ", outputs[me].sizes().str());
    Meta m;
    m.describe(inputs[0]);
    m.values = std::move(values);
    return m;
  };
  Body body = [outputs, inputs, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    const int ws = s.size;
    const size_t uws = static_cast<size_t>(ws);
    if (metas) {
      agree_on_tensor(*metas, op, "input_tensor_list[0]", false);
      for (int i = 0; i < ws; ++i) {
        for (int j = 0; j < ws; ++j) {
          const int64_t sent = (*metas)[static_cast<size_t>(i)].values[static_cast<size_t>(j)];
          const int64_t expected = (*metas)[static_cast<size_t>(j)].values[uws + static_cast<size_t>(i)];
          if (sent != expected)
            raise<MismatchError>(op, "rank ", i, " sends ", sent, " elements to rank ", j, " (input_tensor_list[", j,
                                 "]), but rank ", j, " expects ", expected, " (output_tensor_list[", i, "])");
        }
      }
    }
    std::vector<int64_t> send_bytes(uws), recv_bytes(uws);
    for (size_t i = 0; i < uws; ++i) {
      send_bytes[i] = inputs[i].numel() * inputs[i].element_size();
      recv_bytes[i] = outputs[i].numel() * outputs[i].element_size();
    }
    if (const DeviceRoute route = device_route(inputs[0], op)) {
      std::vector<std::shared_ptr<char>> keep(uws);
      std::vector<DeviceOutput> staged;
      staged.reserve(uws);
      std::vector<const char*> send(uws);
      std::vector<char*> recv(uws);
      for (size_t i = 0; i < uws; ++i) {
        send[i] = device_input(route, inputs[i], keep[i]);
        staged.emplace_back(route, outputs[i], false);
        recv[i] = staged.back().data();
      }
      device_exchange(s, w, tag, route, send, send_bytes, recv, recv_bytes, op);
      for (auto& o : staged) o.commit();
      return;
    }
    std::vector<PackedInput> packed;
    packed.reserve(uws);
    std::vector<StagedOutput> staged;
    staged.reserve(uws);
    std::vector<const char*> send(uws);
    std::vector<char*> recv(uws);
    for (size_t i = 0; i < uws; ++i) {
      packed.emplace_back(inputs[i]);
      staged.emplace_back(outputs[i], false);
      send[i] = packed.back().data();
      recv[i] = staged.back().data();
    }
    exchange_pairwise(s, w, tag, send, send_bytes, recv, recv_bytes, op);
    for (auto& o : staged) o.commit();
  };
  return launch(comm, op, async, false, check, std::move(body));
}

Work all_to_all_async(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                      const Communicator& comm) {
  return all_to_all_impl(outputs, inputs, comm, true);
}

void all_to_all(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                const Communicator& comm) {
  all_to_all_impl(outputs, inputs, comm, false).wait();
}

namespace {

// Every pair agrees: what rank i sends to rank j is what j expects from i.
// values on each rank: [send_splits (ws), recv_splits (ws)].
void agree_on_splits(const std::vector<Meta>& metas, const char* op) {
  const size_t ws = metas.size();
  agree_on_tensor(metas, op, "input", false);
  for (size_t r = 1; r < ws; ++r) {
    bool same_rows = metas[r].ndim == metas[0].ndim;
    for (int64_t d = 1; same_rows && d < metas[0].ndim; ++d) same_rows = metas[r].shape[d] == metas[0].shape[d];
    if (!same_rows)
      raise<MismatchError>(op, "ranks disagree on the shape of a row (input's dims after 0): rank 0 has input ",
                           metas[0].shape_str(), ", rank ", r, " has ", metas[r].shape_str());
  }
  for (size_t i = 0; i < ws; ++i) {
    for (size_t j = 0; j < ws; ++j) {
      const int64_t sent = metas[i].values[j];
      const int64_t expected = metas[j].values[ws + i];
      if (sent != expected)
        raise<MismatchError>(op, "rank ", i, " sends ", sent, " rows to rank ", j, " (input_split_sizes[", j,
                             "]), but rank ", j, " expects ", expected, " rows from rank ", i, " (output_split_sizes[",
                             i, "])");
    }
  }
}

// Rows by split sizes: rows [sum of earlier splits, + split[p]) of `in` go to
// rank p, and rank p's rows land at the same place in `out`. On the device
// when a route is given.
void exchange_rows(Communicator::State& s, Waiter& w, int tag, const char* in, char* out,
                   const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits, int64_t rb,
                   const char* op, const DeviceRoute* route = nullptr) {
  const size_t ws = static_cast<size_t>(s.size);
  std::vector<const char*> send(ws);
  std::vector<char*> recv(ws);
  std::vector<int64_t> send_bytes(ws), recv_bytes(ws);
  int64_t at_in = 0, at_out = 0;
  for (size_t i = 0; i < ws; ++i) {
    send[i] = in + at_in * rb;
    recv[i] = out + at_out * rb;
    send_bytes[i] = send_splits[i] * rb;
    recv_bytes[i] = recv_splits[i] * rb;
    at_in += send_splits[i];
    at_out += recv_splits[i];
  }
  if (route != nullptr)
    device_exchange(s, w, tag, *route, send, send_bytes, recv, recv_bytes, op);
  else
    exchange_pairwise(s, w, tag, send, send_bytes, recv, recv_bytes, op);
}

}  // namespace

static Work all_to_all_single_impl(const TensorView& output, const TensorView& input,
                                   const std::vector<int64_t>& output_split_sizes,
                                   const std::vector<int64_t>& input_split_sizes, const Communicator& comm,
                                   bool async) {
  const char* op = "all_to_all_single";
  const int ws = comm.size();
  const bool variable = !output_split_sizes.empty() || !input_split_sizes.empty();
  std::vector<int64_t> send_splits, recv_splits;
  auto check = [&] {
    check_cpu(op, "input", input);
    check_output(op, "output", output);
    check_dtype_match(op, "output", output, "input", input);
    send_splits = resolve_splits(op, "input_split_sizes", input_split_sizes, input, "input", ws);
    recv_splits = resolve_splits(op, "output_split_sizes", output_split_sizes, output, "output", ws);
    check_same_rows(op, output, input);
    detail::check_no_overlap(op, "output", output, "input", input);
    Meta m;
    m.describe(input);
    m.values = send_splits;
    m.values.insert(m.values.end(), recv_splits.begin(), recv_splits.end());
    return m;
  };
  // `check` runs inside launch before the body is queued; the body reads
  // the splits it resolved through this shared pair.
  auto splits = std::make_shared<std::pair<std::vector<int64_t>, std::vector<int64_t>>>();
  auto checked = [&, splits] {
    Meta m = check();
    *splits = {send_splits, recv_splits};
    return m;
  };
  Body body = [output, input, splits, op](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    if (metas) agree_on_splits(*metas, op);
    if (const DeviceRoute route = device_route(input, op)) {
      std::shared_ptr<char> keep;
      const char* in = device_input(route, input, keep);
      DeviceOutput out(route, output, false);
      exchange_rows(s, w, tag, in, out.data(), splits->first, splits->second, row_bytes(input), op, &route);
      out.commit();
      return;
    }
    PackedInput in(input);
    StagedOutput out(output, false);
    exchange_rows(s, w, tag, in.data(), out.data(), splits->first, splits->second, row_bytes(input), op);
    out.commit();
  };
  return launch(comm, op, async, variable, checked, std::move(body));
}

Work all_to_all_single_async(const TensorView& output, const TensorView& input,
                             const std::vector<int64_t>& output_split_sizes,
                             const std::vector<int64_t>& input_split_sizes, const Communicator& comm) {
  return all_to_all_single_impl(output, input, output_split_sizes, input_split_sizes, comm, true);
}

void all_to_all_single(const TensorView& output, const TensorView& input,
                       const std::vector<int64_t>& output_split_sizes, const std::vector<int64_t>& input_split_sizes,
                       const Communicator& comm) {
  all_to_all_single_impl(output, input, output_split_sizes, input_split_sizes, comm, false).wait();
}

AllToAllVResult all_to_all_v(const TensorView& input, const std::vector<int64_t>& send_splits,
                             const Communicator& comm) {
  const char* op = "all_to_all_v";
  const int ws = comm.size();
  std::vector<int64_t> sends;
  auto check = [&] {
    check_cpu(op, "input", input);
    sends = resolve_splits(op, "send_splits", send_splits, input, "input", ws);
    Meta m;
    m.describe(input);
    m.values = padded(sends, ws);
    return m;
  };
  AllToAllVResult result;
  Body body = [&](Communicator::State& s, Waiter& w, int tag, const std::vector<Meta>* metas) {
    const size_t uws = static_cast<size_t>(s.size);
    agree_on_tensor(*metas, op, "input", false);
    for (size_t r = 1; r < uws; ++r) {
      bool same_rows = (*metas)[r].ndim == (*metas)[0].ndim;
      for (int64_t d = 1; same_rows && d < (*metas)[0].ndim; ++d)
        same_rows = (*metas)[r].shape[d] == (*metas)[0].shape[d];
      if (!same_rows)
        raise<MismatchError>(op, "ranks disagree on the shape of a row (input's dims after 0): rank 0 has input ",
                             (*metas)[0].shape_str(), ", rank ", r, " has ", (*metas)[r].shape_str());
    }
    result.recv_splits.assign(uws, 0);
    int64_t rows = 0;
    for (size_t i = 0; i < uws; ++i) {
      result.recv_splits[i] = (*metas)[i].values[static_cast<size_t>(s.rank)];
      rows += result.recv_splits[i];
    }
    std::vector<int64_t> shape = input.sizes().vec();
    shape[0] = rows;
    const bool on_device = input.device().is_cuda();
    result.output = on_device ? Tensor::empty(Shape(shape), input.dtype(), input.device())
                              : recycled_empty(Shape(shape), input.dtype());
    if (const DeviceRoute route = device_route(input, op)) {
      std::shared_ptr<char> keep;
      const char* in = device_input(route, input, keep);
      exchange_rows(s, w, tag, in, static_cast<char*>(result.output.data()), sends, result.recv_splits,
                    row_bytes(input), op, &route);
      return;
    }
    PackedInput in(input);
    StagedOutput out(result.output, false);
    exchange_rows(s, w, tag, in.data(), out.data(), sends, result.recv_splits, row_bytes(input), op);
    out.commit();
  };
  launch(comm, op, false, true, check, body).wait();
  return result;
}

}  // namespace scatterx::dist

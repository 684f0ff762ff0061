// send, recv, isend, irecv and batch_isend_irecv (dist.h): each op is one
// MPI message on the communicator's point-to-point duplicate, posted at the
// call and completed by the thread that waits for (or tests) its Work.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dist/arg_checks.h"
#include "dist/device.h"
#include "dist/internal.h"
#include "dist/p2p.h"
#include "dist/staging.h"

namespace scatterx::dist {

namespace {

using detail::concat;

int64_t bytes_of(const TensorView& t) { return t.numel() * t.element_size(); }

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

// Memory MPI may still write (a receive whose cancel came too late) or read
// (an abandoned send) once its op gave up: kept until exit.
void quarantine(std::shared_ptr<void> buffer) {
  if (!buffer) return;
  static std::mutex mutex;
  static std::vector<std::shared_ptr<void>>* kept = new std::vector<std::shared_ptr<void>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(buffer));
}

// Where MPI reads a send's bytes or writes a receive's: the tensor's own
// memory when MPI can use it as it is, else a buffer held here (packed host
// memory, a page-locked slab of a staged device route, device scratch of a
// direct one).
struct Wire {
  char* data = nullptr;
  std::shared_ptr<void> buffer;  // null: data is the tensor's memory
};

Wire send_wire(const TensorView& t, const char* op) {
  const DeviceRoute route = device_route(t, op);
  auto packed = std::make_shared<StagedInput>(route, t);  // contiguous, on t's side
  Wire wire;
  if (route && route.transport == DeviceTransport::Staged) {
    std::shared_ptr<char> host = route.queue->staging_buffer(std::max<int64_t>(bytes_of(t), 1));
    route.queue->to_host(host.get(), packed->data(), bytes_of(t));
    wire = {host.get(), host};
  } else {
    wire.data = const_cast<char*>(packed->data());
    if (!t.is_contiguous()) wire.buffer = packed;
  }
  // MPI reads the bytes outside stream order: the work queued before the
  // call (and the copies above) must have run.
  if (route) route.queue->synchronize();
  return wire;
}

Wire recv_wire(const TensorView& t, const char* op) {
  const DeviceRoute route = device_route(t, op);
  const int64_t bytes = std::max<int64_t>(bytes_of(t), 1);
  Wire wire;
  if (route && route.transport == DeviceTransport::Staged) {
    std::shared_ptr<char> host = route.queue->staging_buffer(bytes);
    wire = {host.get(), host};
  } else if (t.is_contiguous()) {
    wire.data = static_cast<char*>(t.data());
  } else if (route) {
    std::shared_ptr<char> device = route.queue->device_buffer(bytes);
    wire = {device.get(), device};
  } else {
    auto host = std::make_shared<Tensor>(Tensor::empty(t.sizes(), t.dtype()));
    wire = {static_cast<char*>(host->data()), host};
  }
  // MPI writes outside stream order: work queued earlier that still uses the
  // tensor must be done first.
  if (route) route.queue->synchronize();
  return wire;
}

// Moves a completed receive's bytes from its wire into t (a no-op when MPI
// wrote t itself); on the device, the copies are synchronized.
void unpack(const Wire& wire, const TensorView& t, const char* op) {
  if (!wire.buffer) return;
  const DeviceRoute route = device_route(t, op);
  const TensorView landed(wire.data, t.dtype(), t.sizes(), t.device());
  if (!route) {
    copy_(t, landed);
    return;
  }
  if (route.transport == DeviceTransport::Staged) {
    StagedOutput out(route, t, false);
    route.queue->to_device(out.data(), wire.data, bytes_of(t));
    out.commit();
  } else {
    copy_view(route, t, landed);
  }
  route.queue->synchronize();
}

// One posted send or receive, as its Work completes it.
class Message final : public PendingMessage {
 public:
  Message(Communicator comm, const char* op, const P2POp& p, Wire wire)
      : comm_(std::move(comm)), op_(op), p_(p), wire_(std::move(wire)) {}

  ~Message() override {
    if (request_ == MPI_REQUEST_NULL || mpi_finalized()) return;
    int done = 0;
    MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    if (done == 0) abandon();
  }

  void post() {
    Communicator::State& s = comm_.state();
    const OneMessage message(bytes_of(p_.tensor), op_);
    if (receiving()) {
      const int src = p_.peer == kAnySource ? MPI_ANY_SOURCE : p_.peer;
      check_mpi(MPI_Irecv(wire_.data, message.count(), message.type(), src, p_.tag, s.p2p_comm, &request_), op_,
                "MPI_Irecv");
    } else {
      check_mpi(MPI_Isend(wire_.data, message.count(), message.type(), p_.peer, p_.tag, s.p2p_comm, &request_), op_,
                "MPI_Isend");
    }
  }

  bool test() override {
    // (A Work dropped at exit, after MPI_Finalize.)
    SCATTERX_CHECK(!mpi_finalized(), Error, op_, "MPI was finalized before the message completed");
    int done = 0;
    MPI_Status status;
    status.MPI_SOURCE = p_.peer;
    status.MPI_ERROR = MPI_SUCCESS;
    const int rc = MPI_Test(&request_, &done, &status);
    if (rc != MPI_SUCCESS) {
      request_ = MPI_REQUEST_NULL;  // completed, in error
      fail(rc, status);
    }
    if (done == 0) return false;
    // (Some transports report a truncation in the status only.)
    if (status.MPI_ERROR != MPI_SUCCESS) fail(status.MPI_ERROR, status);
    if (receiving()) finish_receive(status);
    return true;
  }

  void wait() override {
    Waiter waiter(comm_.state(), op_);
    waiter.poll([&] { return test(); }, peer_description(), [&] { abandon(); });
  }

  int source() const override { return source_; }

 private:
  bool receiving() const { return p_.kind == P2POp::Kind::Recv; }

  std::string peer_description() const {
    const std::string tag = concat(" (tag ", p_.tag, ")");
    if (!receiving()) return concat("rank ", p_.peer, " to receive", tag);
    if (p_.peer == kAnySource) return concat("a message from any rank", tag);
    return concat("a message from rank ", p_.peer, tag);
  }

  void finish_receive(const MPI_Status& status) {
    source_ = status.MPI_SOURCE;
    MPI_Count got = 0;
    check_mpi(MPI_Get_elements_x(&status, MPI_BYTE, &got), op_, "MPI_Get_elements_x");
    const int64_t expected = bytes_of(p_.tensor);
    if (got != expected) {
      detail::raise<MismatchError>(op_, "tensor expected a message of its size, ", expected, " bytes, got ",
                                   static_cast<int64_t>(got), " bytes from rank ", source_, " (tag ", p_.tag, ")");
    }
    unpack(wire_, p_.tensor, op_);
  }

  [[noreturn]] void fail(int rc, const MPI_Status& status) {
    int error_class = 0;
    MPI_Error_class(rc, &error_class);
    if (error_class == MPI_ERR_TRUNCATE) {
      detail::raise<MismatchError>(op_, "tensor expected a message of its size, ", bytes_of(p_.tensor),
                                   " bytes, got a longer one from rank ", status.MPI_SOURCE, " (tag ", p_.tag, ")");
    }
    check_mpi(rc, op_, "MPI_Test");
    throw Error(concat(op_, ": MPI_Test failed"));  // not reached: rc is an error
  }

  // Gives up on the message: a receive is cancelled, a send left to MPI;
  // whatever buffer MPI may still use is never freed.
  void abandon() {
    if (receiving()) MPI_Cancel(&request_);
    MPI_Request_free(&request_);
    quarantine(std::move(wire_.buffer));
  }

  Communicator comm_;  // keeps the MPI communicator alive while the message is posted
  const char* op_;
  P2POp p_;
  Wire wire_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int source_ = -1;
};

// The local checks of one op (`what` names it in messages: "isend",
// "batch_isend_irecv: ops[2] (irecv)").
void check_op(const Communicator::State& s, const P2POp& p, const std::string& what) {
  const char* op = what.c_str();
  const bool receive = p.kind == P2POp::Kind::Recv;
  if (receive)
    check_output(op, "tensor", p.tensor);
  else
    check_cpu(op, "tensor", p.tensor);
  const bool any = receive && p.peer == kAnySource;
  SCATTERX_CHECK(any || (p.peer >= 0 && p.peer < s.size), ArgumentError, op, receive ? "src" : "dst",
                 " expected a rank in [0, ", s.size, ")", receive ? " or kAnySource" : "", ", got ", p.peer);
  SCATTERX_CHECK(p.tag >= 0 && p.tag <= s.p2p_tag_ub, ArgumentError, op, "tag expected a value in [0, ", s.p2p_tag_ub,
                 "] (MPI_TAG_UB), got ", p.tag);
}

// Posts a checked op and returns its Work.
Work post(const Communicator& comm, const P2POp& p, const char* op) {
  const bool receive = p.kind == P2POp::Kind::Recv;
  Wire wire = receive ? recv_wire(p.tensor, op) : send_wire(p.tensor, op);
  auto message = std::make_unique<Message>(comm, op, p, std::move(wire));
  message->post();
  auto state = std::make_shared<Work::State>();
  state->is_receive = receive;
  state->message = std::move(message);
  return Work(state);
}

Work post_one(const Communicator& comm, const P2POp& p, const char* op) {
  Communicator::State& s = comm.state();
  s.check_usable(op);
  check_op(s, p, op);
  return post(comm, p, op);
}

}  // namespace

Work isend(const TensorView& tensor, int dst, const Communicator& comm, int tag) {
  return post_one(comm, {P2POp::Kind::Send, tensor, dst, tag}, "isend");
}

Work irecv(const TensorView& tensor, int src, const Communicator& comm, int tag) {
  return post_one(comm, {P2POp::Kind::Recv, tensor, src, tag}, "irecv");
}

void send(const TensorView& tensor, int dst, const Communicator& comm, int tag) {
  // As torch: a blocking send to this rank could only complete if a receive
  // were already posted, which a blocking caller cannot have done.
  SCATTERX_CHECK(dst != comm.rank(), ArgumentError, "send", "dst expected a rank other than this one (", comm.rank(),
                 "), got ", dst);
  post_one(comm, {P2POp::Kind::Send, tensor, dst, tag}, "send").wait();
}

int recv(const TensorView& tensor, int src, const Communicator& comm, int tag) {
  const Work work = post_one(comm, {P2POp::Kind::Recv, tensor, src, tag}, "recv");
  return work.source_rank();
}

std::vector<Work> batch_isend_irecv(const std::vector<P2POp>& ops, const Communicator& comm) {
  const char* op = "batch_isend_irecv";
  Communicator::State& s = comm.state();
  s.check_usable(op);
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool receive = ops[i].kind == P2POp::Kind::Recv;
    check_op(s, ops[i], concat(op, ": ops[", i, "] (", receive ? "irecv" : "isend", ")"));
  }
  std::vector<Work> works;
  works.reserve(ops.size());
  for (const P2POp& p : ops) works.push_back(post(comm, p, p.kind == P2POp::Kind::Recv ? "irecv" : "isend"));
  return works;
}

}  // namespace scatterx::dist

// scatterx distributed layer: torch.distributed's collectives over MPI,
// composed with the local kernels of ops/.
//
// Contract
// - Every collective is called by every rank of the communicator, in the
//   same order (as with MPI and torch.distributed).
// - Tensors are TensorViews of any dtype, any layout (non-contiguous views
//   are packed into scratch and unpacked afterwards), 0-d included, all on
//   the CPU or all on one CUDA device. Outputs are written in place.
// - CUDA tensors (see dist/device.h): every collective runs on the device,
//   on the stream current at the call, and returns without synchronizing
//   it: the results are ready in that stream's order. Chunks move through
//   pinned host slots, or as device buffers when MPI is CUDA-aware
//   (mpi_cuda_aware()); folds run on the GPU.
// - Reductions (ReduceOp) are done by scatterx's reduce functors on the
//   received bytes, not by an MPI_Op: sum, prod, min, max, avg. min/max
//   propagate NaN (as torch's amax/amin); avg is sum / world size (integer
//   dtypes round as scatter_reduce's mean does); complex dtypes support sum,
//   prod and avg only; bool supports sum (logical or), prod (and), min, max.
//   band, bor and bxor (bitwise and, or, xor) take integers and bool only.
//   torch's PREMUL_SUM is the Python layer's (scatterx.distributed): a
//   C++ caller scales its input and sums.
// - Errors:
//     ArgumentError / DTypeError   a local argument is wrong; raised before
//                                  any data moves;
//     MismatchError                ranks disagree (split sizes, dtypes,
//                                  shapes); raised on every rank, naming the
//                                  ranks and both values;
//     TimeoutError                 the collective did not finish within the
//                                  communicator's timeout; the communicator
//                                  is unusable afterwards.
//   Cross-rank agreement is checked by a small metadata exchange (one
//   all-gather of a few hundred bytes per rank, about one network latency).
//   It always runs for variable-split all-to-alls; for the other
//   collectives it runs when the communicator's checks option is on
//   (CommunicatorOptions::checks, SCATTERX_DIST_CHECKS=1, or
//   Communicator::set_checks(true)). While it runs, a rank whose local checks
//   failed still takes part, so its peers raise too instead of waiting.
// - Async: the *_async forms queue the collective on the communicator's
//   progress thread and return a Work; the tensors must stay alive and
//   untouched until wait() returns. Collectives on one communicator run in
//   the order they were called. An argument error found at the call raises
//   there; an error that arises while the collective runs (mismatch,
//   timeout, MPI error) surfaces from wait() on the rank where it arose,
//   and the collectives queued before and after it are unaffected.
// - Faults (tests/dist/faults_test.cpp, fault_scenarios.cpp):
//     a straggler (a rank that never joins): every rank waiting for it
//       raises TimeoutError after the timeout (plus the time to notice, a
//       fraction of a second), naming the collective, this rank and what it
//       was waiting for: its peer in rings, trees and the shared-memory
//       path ("waiting for rank 3", which may be a rank itself stuck behind
//       the straggler), the ranks whose messages had not come in the
//       all-to-alls ("waiting for ranks 1, 3 (their all-to-all
//       messages)"), "the other ranks" in the setup steps that wait on
//       everyone; the straggler itself is not told. Every
//       wait of a collective is bounded, shared-memory setup included; only
//       making a communicator (world, split: MPI_Comm_dup/split) blocks in
//       MPI without a bound;
//     recoverable: after ArgumentError, DTypeError or MismatchError (sync or
//       async, on every rank or on one rank with checks on) nothing has
//       moved and the communicator runs correct collectives;
//     not recoverable: after a TimeoutError (or a failed monitored_barrier)
//       the communicator is unusable on the ranks that raised: every later
//       call on it (collective, async, split, point-to-point) raises Error
//       at once, naming the first failure. The ranks that did not raise are
//       not told; every rank should drop the communicator and make a new one
//       from a healthy parent (messages of the failed collective may still
//       be in flight on the old one). Destroying a communicator first
//       receives and drops the messages that came on it and were never
//       received (the waiting ranks' messages, on the ranks that never
//       joined), then holds it for its timeout (the 64 newest at most)
//       before freeing it, dropping what arrived meanwhile, so that MPI
//       cannot deliver them to a later communicator that reuses its
//       context id;
//     a rank that dies (SIGKILL): under mpirun (Open MPI 4.1) the job is
//       aborted within about a second, mpirun naming the rank and the
//       signal and exiting nonzero, and no process is left running. Where
//       the launcher lets the survivors run on (mpirun --enable-recovery),
//       they raise TimeoutError as from a straggler;
//     a communicator destroyed with work in flight: its queued collectives
//       still run (they hold the communicator) and complete on every rank,
//       then its progress thread ends; a process that exits without
//       destroying its communicators first waits for their queued work
//       (bounded by the timeout), then finalizes MPI (when scatterx
//       initialized it) and exits normally.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/error.h"
#include "ops/tensor.h"

namespace scatterx::dist {

// Ranks disagree about a collective's arguments.
class MismatchError : public Error {
 public:
  using Error::Error;
};

// A collective did not complete within the communicator's timeout.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// _(Name, torch.distributed's spelling)
#define SCATTERX_FORALL_DIST_REDUCE_OPS(_) \
  _(Sum, "sum")                            \
  _(Prod, "product")                       \
  _(Min, "min")                            \
  _(Max, "max")                            \
  _(Avg, "avg")                            \
  _(BAnd, "band")                          \
  _(BOr, "bor")                            \
  _(BXor, "bxor")

enum class ReduceOp : uint8_t {
#define SCATTERX_DIST_REDUCE_ENUM(name, str) name,
  SCATTERX_FORALL_DIST_REDUCE_OPS(SCATTERX_DIST_REDUCE_ENUM)
#undef SCATTERX_DIST_REDUCE_ENUM
};

const char* reduce_op_name(ReduceOp op);

// Completion handle of an async collective.
class Work {
 public:
  struct State;
  Work() = default;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Blocks until the collective finished; rethrows its error, if any.
  void wait() const;
  // True once the collective finished (successfully or not); never blocks.
  bool is_completed() const;
  // The Work of a receive (irecv, or a receive of batch_isend_irecv): waits
  // for it, then returns the sender's rank in the communicator (the point of
  // an any-source receive). ArgumentError for any other Work.
  int source_rank() const;

 private:
  std::shared_ptr<State> state_;
};

// Settings of one communicator, as gloo's process-group options. A field
// left unset takes its environment variable's value (README "Environment"),
// read when the communicator is made; split() inherits the parent's
// settings for the fields it leaves unset. Making a communicator is
// collective, and chunk_bytes, shared_memory and checks must be the same on
// every rank (they decide the messages each rank expects): a disagreement
// raises MismatchError on every rank. The timeout may differ between ranks.
struct CommunicatorOptions {
  // Seconds a collective may wait for its peers before raising TimeoutError
  // (SCATTERX_DIST_TIMEOUT, default 600).
  std::optional<std::chrono::duration<double>> timeout;
  // Cross-rank metadata checks of the dense collectives' arguments
  // (SCATTERX_DIST_CHECKS, default off).
  std::optional<bool> checks;
  // The host rings' pipelining chunk, in bytes, from 1 to 2^40
  // (SCATTERX_DIST_CHUNK_BYTES, default 512 KiB).
  std::optional<int64_t> chunk_bytes;
  // Reduce-scatters through a shared-memory segment when every rank is on
  // one host (SCATTERX_DIST_SHM, default on).
  std::optional<bool> shared_memory;
  // All-gathers, all-to-alls and broadcasts copy large messages straight out
  // of the peers' memory (process_vm_readv), and reduce-scatters and
  // all-reduces fold their blocks out of it, when every rank is on one host
  // and the system allows it (SCATTERX_DIST_SINGLE_COPY, default on).
  std::optional<bool> single_copy;
};

// An MPI communicator that scatterx owns: a duplicate of the one it was made
// from, freed when the last copy of this object goes away. Copies share it.
class Communicator {
 public:
  struct State;

  // Initializes MPI when the application has not (MPI_THREAD_MULTIPLE, which
  // the progress thread of the async forms needs; with a lower level, as
  // provided by an application that initialized MPI itself, async forms run
  // at the call and return completed Work). MPI is finalized at exit when
  // scatterx initialized it.
  static void ensure_mpi_initialized();

  // A duplicate of MPI_COMM_WORLD.
  static Communicator world(const CommunicatorOptions& options = {});
  // A duplicate of an application's communicator, given as its Fortran
  // handle (MPI_Comm_c2f; mpi4py's comm.py2f()), so this header needs no mpi.h.
  static Communicator from_fortran_handle(int64_t handle, const CommunicatorOptions& options = {});
  // As above, from an MPI_Comm's bits (the value of a C MPI_Comm, which is
  // a pointer in Open MPI and an int in MPICH).
  static Communicator from_c_handle(const void* comm_handle_bits, size_t size, const CommunicatorOptions& options = {});

  // Collective over this communicator: ranks with the same color form a new
  // one, ordered by key (ties by rank). A negative color opts out: the result
  // is then a null communicator (valid() is false). Unset options are this
  // communicator's.
  Communicator split(int color, int key, const CommunicatorOptions& options = {}) const;

  bool valid() const { return state_ != nullptr; }
  int rank() const;
  int size() const;

  // The settings in force, every field set.
  CommunicatorOptions options() const;

  // The timeout, changed on this rank only (see CommunicatorOptions).
  void set_timeout(std::chrono::duration<double> timeout);
  std::chrono::duration<double> timeout() const;

  // Cross-rank metadata checks for the dense collectives (see above); every
  // rank must make the same call before its next collective.
  void set_checks(bool enabled);
  bool checks() const;

  // Which path this communicator's reduce-scatters take where single copy
  // does not serve them (and so all_reduce's first half): true through the
  // shared-memory segment, false through the point-to-point ring (MPI
  // messages: the path between hosts). Decided, alike on every rank, by the
  // first reduce-scatter with blocks of 64 KiB or more
  // or the first all_reduce on the latency path (see all_reduce);
  // true only if shared_memory is on, there are at most 8 ranks and MPI puts
  // them all on one host (MPI_COMM_TYPE_SHARED), so a communicator spanning
  // hosts takes the ring for the whole collective, even between ranks that
  // share a host. nullopt before that collective (and with one rank). Call it
  // between collectives: it reads what the last one decided.
  std::optional<bool> shared_memory_path() const;

  // Which path this communicator's host all-gathers, all-to-alls,
  // broadcasts, all-reduces and reduce-scatters take for messages of 64 KiB
  // or more (reduce-scatters of blocks below 1 MiB in memory a peer cannot
  // map take the segment all the same): true when every rank
  // reads its peers' memory directly (single_copy on, every rank on one host
  // by host name, and process_vm_readv allowed between them), false through
  // MPI messages. Decided, alike on every rank, by the first all-to-all, or
  // all-gather or broadcast of 64 KiB or more per rank; nullopt before it
  // (and with one rank).
  std::optional<bool> single_copy_path() const;

  // For the implementation: the shared state (MPI_Comm, progress thread).
  State& state() const;

 private:
  explicit Communicator(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// ---- collectives (torch.distributed's names and semantics) -----------------

// outputs[i] = rank i's input; one output per rank, each of input's shape.
void all_gather(const std::vector<TensorView>& outputs, const TensorView& input, const Communicator& comm);
Work all_gather_async(const std::vector<TensorView>& outputs, const TensorView& input, const Communicator& comm);

// output = the ranks' inputs, concatenated along dim 0 ([ws * n, ...]) or
// stacked ([ws, n, ...]); a 0-d input gathers into [ws].
void all_gather_into_tensor(const TensorView& output, const TensorView& input, const Communicator& comm);
Work all_gather_into_tensor_async(const TensorView& output, const TensorView& input, const Communicator& comm);

// output = op over ranks r of rank r's inputs[rank]; inputs holds one
// tensor per rank, each of output's shape.
void reduce_scatter(const TensorView& output, const std::vector<TensorView>& inputs, ReduceOp op,
                    const Communicator& comm);
Work reduce_scatter_async(const TensorView& output, const std::vector<TensorView>& inputs, ReduceOp op,
                          const Communicator& comm);

// input is [ws * n, ...] (or [ws, n, ...]); output = op over ranks of their
// block `rank` of input. On one host each rank folds its block out of its
// peers' inputs (single copy) or out of the shared segment; between hosts a
// pipelined ring, where the reduction of one chunk overlaps the transfer of
// the next. output must not overlap input.
void reduce_scatter_tensor(const TensorView& output, const TensorView& input, ReduceOp op, const Communicator& comm);
Work reduce_scatter_tensor_async(const TensorView& output, const TensorView& input, ReduceOp op,
                                 const Communicator& comm);

// tensor = op over ranks of tensor, in place; every rank gets the same bits.
// Tensors below SCATTERX_DIST_ALLREDUCE_SMALL_BYTES (64 KiB) take the
// latency path: on one host each rank folds every rank's copy out of the
// shared segment, in rank order (no MPI message); between hosts recursive
// doubling. Larger ones on one host: each rank folds its block out of the
// peers' tensors and writes it into theirs (single copy on); otherwise a
// reduce-scatter ring, then an all-gather ring.
void all_reduce(const TensorView& tensor, ReduceOp op, const Communicator& comm);
Work all_reduce_async(const TensorView& tensor, ReduceOp op, const Communicator& comm);

// Returns once every rank of comm has entered it: a one-element all_reduce,
// so it runs in order with the collectives queued before it.
void barrier(const Communicator& comm);

// tensor = root's tensor.
void broadcast(const TensorView& tensor, int root, const Communicator& comm);
Work broadcast_async(const TensorView& tensor, int root, const Communicator& comm);

// ---- rooted collectives (torch.distributed's reduce, gather, scatter) -------
//
// Composed from the collectives here (dist/rooted.cpp); blocking. A bad list
// on the root raises ArgumentError there and MismatchError on the other
// ranks before any data moves (nobody waits); a root outside [0, size)
// raises ArgumentError on the ranks that pass it. Errors name the lists as
// torch.distributed does (gather_list, scatter_list); the Python layer's
// gather, scatter and reduce are these functions.

// On root: tensor = op over the ranks of tensor; the other ranks' tensors are
// left as they were (an all_reduce into a copy off the root: twice a tree's
// bytes, folded by the layer's reduce functors).
void reduce(const TensorView& tensor, int root, ReduceOp op, const Communicator& comm);

// On root: outputs[i] = rank i's input (one tensor per rank, each of input's
// element count and dtype, any shape and strides); the other ranks pass an
// empty list. Each rank's input crosses once (one variable-split all-to-all).
void gather(const std::vector<TensorView>& outputs, const TensorView& input, int root, const Communicator& comm);

// output = root's inputs[rank] (on root one tensor per rank, each of output's
// element count and dtype); the other ranks pass an empty list.
void scatter(const TensorView& output, const std::vector<TensorView>& inputs, int root, const Communicator& comm);

// outputs[i] = rank i's inputs[rank]; one tensor per rank in each list;
// inputs[i] on this rank and outputs[rank] on rank i have the same shape.
void all_to_all(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                const Communicator& comm);
Work all_to_all_async(const std::vector<TensorView>& outputs, const std::vector<TensorView>& inputs,
                      const Communicator& comm);

// Rows (dim 0) of input go to the ranks in order, input_split_sizes[i] rows
// to rank i; output receives output_split_sizes[i] rows from rank i, in rank
// order. An empty split list means equal splits (dim 0 divisible by ws).
void all_to_all_single(const TensorView& output, const TensorView& input,
                       const std::vector<int64_t>& output_split_sizes, const std::vector<int64_t>& input_split_sizes,
                       const Communicator& comm);
Work all_to_all_single_async(const TensorView& output, const TensorView& input,
                             const std::vector<int64_t>& output_split_sizes,
                             const std::vector<int64_t>& input_split_sizes, const Communicator& comm);

// all_to_all_single that works out the receive splits itself: send_splits[i]
// rows of input go to rank i; returns the received rows (contiguous, in rank
// order) and how many came from each rank.
struct AllToAllVResult {
  Tensor output;
  std::vector<int64_t> recv_splits;
};
AllToAllVResult all_to_all_v(const TensorView& input, const std::vector<int64_t>& send_splits,
                             const Communicator& comm);

// ---- point-to-point (torch.distributed's send, recv, isend, irecv) ----------
//
// Contract
// - Messages travel in a space of their own (a second duplicate of the
//   communicator's MPI communicator): no user message can match a
//   collective's, whatever its tag, and collectives queued on the progress
//   thread neither delay nor reorder point-to-point messages.
// - Matching is MPI's: a receive takes the oldest message from its source
//   (any source with kAnySource) carrying its tag; between one pair of ranks,
//   messages of one tag arrive in the order they were posted. isend and
//   irecv post at the call, so call order is matching order (as torch's MPI
//   backend); a message of any length is one MPI message.
// - The receiving tensor must have as many bytes as the message: a shorter
//   or longer message raises MismatchError from the receive (longer: where
//   MPI reports the truncation; Open MPI does between processes, not on a
//   rank's messages to itself). dtypes need not agree (bytes are bytes, as
//   in torch).
// - Tensors of any dtype and layout: a non-contiguous send is packed at the
//   call into scratch its Work keeps; a non-contiguous receive lands in
//   scratch that wait() unpacks. CUDA tensors: the call waits for the work
//   queued on the current stream (so a send reads its final values), the
//   bytes move through a page-locked host buffer (or the device memory
//   itself when MPI is CUDA-aware), and wait() returns with a receive's
//   values on the device (its copies synchronized).
// - Until wait() returned, a send's tensor must not be written and a
//   receive's not read or written; a tensor may not be received into twice
//   at once (aliasing is not checked across calls).
// - wait() polls against the communicator's timeout, counted from the call
//   of wait(): past it, the messages still posted are cancelled,
//   TimeoutError names the op and the peer, and the communicator is unusable
//   afterwards (as after a collective's timeout). Dropping a Work before it
//   completed cancels a receive and abandons a send; their scratch is then
//   never freed, as MPI may still use it.
// - Errors raised before anything is posted (the communicator stays usable):
//   ArgumentError for a rank outside [0, size) (or kAnySource for a
//   send), a blocking send to this rank (as torch; isend and irecv allow
//   it), a tag outside [0, MPI_TAG_UB]; DTypeError never (every dtype moves).

// The src of a receive that takes a message from any rank.
constexpr int kAnySource = -1;

// Sends tensor to rank dst; returns once the message left (its buffer may be
// reused), which for a long message means dst posted its receive.
void send(const TensorView& tensor, int dst, const Communicator& comm, int tag = 0);
// Receives into tensor from rank src (or kAnySource); returns the sender.
int recv(const TensorView& tensor, int src, const Communicator& comm, int tag = 0);
Work isend(const TensorView& tensor, int dst, const Communicator& comm, int tag = 0);
Work irecv(const TensorView& tensor, int src, const Communicator& comm, int tag = 0);

// One operation of batch_isend_irecv (torch.distributed.P2POp).
struct P2POp {
  enum class Kind : uint8_t { Send, Recv };
  Kind kind = Kind::Send;
  TensorView tensor;
  int peer = 0;  // dst of a send, src of a receive (kAnySource allowed)
  int tag = 0;
};

// Posts every op, in list order, and returns their Works (same order). Every
// op is checked before the first is posted, so a bad op posts nothing.
std::vector<Work> batch_isend_irecv(const std::vector<P2POp>& ops, const Communicator& comm);

// ---- monitored_barrier (torch.distributed.monitored_barrier, gloo's) ---------
//
// Rank 0 waits up to `timeout` for every other rank to arrive, then tells
// each rank the outcome. When a rank did not arrive, every rank that hears
// the outcome raises TimeoutError: rank 0 with torch's text, "Rank 2 failed
// to pass monitoredBarrier in 2000 ms" (the first missing rank), or with
// wait_all_ranks "Ranks 1, 2 failed to pass monitoredBarrier in 2000 ms"
// (all of them); the others with the same text seen from rank 0 (a late
// rank learns it at once when it arrives). A rank other than 0 waits up to
// twice its timeout for the outcome (rank 0 may arrive up to `timeout`
// later and then waits `timeout`); without it, it raises naming rank 0.
// After a failure the communicator is unusable on every rank that raised
// (messages of the failed barrier may still be in flight). Its messages
// cannot match collectives' or user point-to-point messages. Runs in order
// with the collectives queued on the communicator. timeout must be > 0.
void monitored_barrier(const Communicator& comm, std::chrono::duration<double> timeout, bool wait_all_ranks = false);

// Whether the MPI library this process loaded moves CUDA device memory
// itself (Open MPI's MPIX_Query_cuda_support(); false for other MPIs). MPI
// must be initialized.
bool mpi_cuda_aware();

// For code that includes mpi.h itself: a duplicate of `comm`.
#ifdef MPI_VERSION
inline Communicator from_mpi(MPI_Comm comm) { return Communicator::from_c_handle(&comm, sizeof(comm)); }
#endif

}  // namespace scatterx::dist

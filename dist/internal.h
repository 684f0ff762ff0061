// Implementation side of dist.h: the communicator's shared state, its
// progress thread, and non-blocking MPI waits that honour the timeout.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.h"

namespace scatterx::dist {

// A message that completes where its Work is waited for rather than on the
// progress thread: point-to-point sends and receives (dist/send_recv.cpp).
class PendingMessage {
 public:
  virtual ~PendingMessage() = default;
  // Whether the message completed, without blocking (throws on failure).
  virtual bool test() = 0;
  // Blocks until it completed, or raises TimeoutError.
  virtual void wait() = 0;
  // A receive's sender (once complete); -1 for a send.
  virtual int source() const = 0;
};

struct Work::State {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;

  // Point-to-point Work: completed by whichever thread waits (or tests)
  // first, under `completing`; `source` is a receive's sender (-1: none).
  std::unique_ptr<PendingMessage> message;
  std::mutex completing;
  bool is_receive = false;
  int source = -1;

  void finish(std::exception_ptr e);
};

// Collectives take data tags from a cycle of this many; consecutive
// collectives never share a tag.
constexpr int kTagCycle = 8000;
// Tag layout, all below 32767 (the least MPI_TAG_UB the standard allows):
// data messages [0, kTagCycle) (State::next_tag); the metadata exchange;
// all_reduce's all-gather phase and the shared-memory path's "slot free"
// notes (also the single-copy path's "done, your buffer is free" notes),
// each offset from the collective's data tag.
constexpr int kMetaTag = kTagCycle;
constexpr int kAllGatherTagOffset = kTagCycle + 1;
constexpr int kShmFreeTagOffset = 2 * kTagCycle + 1;
// monitored_barrier's arrivals (to rank 0) and outcomes (from rank 0): tags
// no collective uses, on the collectives' communicator.
constexpr int kBarrierArrivalTag = kShmFreeTagOffset + kTagCycle;
constexpr int kBarrierOutcomeTag = kBarrierArrivalTag + 1;
static_assert(kBarrierOutcomeTag <= 32767, "tags must stay below the least MPI_TAG_UB");

struct ShmTransport;  // dist/shm_transport.h

struct Communicator::State {
  MPI_Comm comm = MPI_COMM_NULL;
  // The point-to-point messages' own duplicate of `comm` (dist.h), and the
  // largest tag it allows (its MPI_TAG_UB).
  MPI_Comm p2p_comm = MPI_COMM_NULL;
  int p2p_tag_ub = 32767;
  int rank = 0;
  int size = 1;
  // The settings (CommunicatorOptions, resolved): the timeout and the checks
  // may change later (set_timeout, set_checks), the others are fixed.
  std::atomic<double> timeout_s{600.0};
  std::atomic<bool> checks{false};
  // The rings' pipelining granule: small enough that the reduction of one
  // chunk overlaps the transfer of the next, large enough to keep the
  // per-message cost small (512 KiB by default: the best of 128 KiB .. 2 MiB
  // for 16 and 64 MiB with 2 ranks on the development machine).
  int64_t chunk_bytes = 0;
  // Whether reduce-scatters try the shared-memory segment (shm_transport.h).
  bool shared_memory = false;
  // all_reduce of fewer bytes than this takes the latency path
  // (latency_all_reduce.h), and so do all-gathers of blocks and broadcasts of
  // fewer (shm_small_*, shm_transport.h)
  // (SCATTERX_DIST_ALLREDUCE_SMALL_BYTES, read when the
  // communicator is made and agreed on by every rank). Below, not up to: the
  // default, 64 KiB, is where the single copy starts (kSingleCopyMinBytes),
  // which moves a message of that size once where the slots copy it twice
  // (2 ranks, 64 KiB: all_reduce 14.9 -> 7.5 us, broadcast 12.0 -> 2.4 us;
  // bench/RESULTS.md, "the latency path hands over to the single copy").
  int64_t allreduce_small_bytes = 0;
  // Whether a call moving `bytes` per rank (an all_reduce's tensor, an
  // all-gather's block, a broadcast's tensor) takes the latency path: alike on
  // every rank, since the sizes agree (the arguments do) and so does the
  // threshold.
  bool latency_sized(int64_t bytes) const { return size > 1 && bytes < allreduce_small_bytes; }
  // Whether the all-gathers, all-to-alls and broadcast try the single-copy
  // transport (single_copy.h), and its verdict: 0 not asked yet, 1 in use,
  // -1 not usable (single_copy_ready).
  bool single_copy = false;
  int single_copy_state = 0;
  // Whether single-copy broadcasts have the root write a share into every
  // peer (single_copy_broadcast): SCATTERX_DIST_BROADCAST_ROOT_SHARE (0
  // never, 1 always, 2 where the host has no more ranks than cores; read
  // and agreed when the communicator is made), decided when
  // single_copy_ready first says yes.
  int broadcast_root_share_setting = 2;
  bool broadcast_root_share = false;
  // Every rank calls collectives in the same order, so this counter agrees
  // across ranks; each collective's messages carry a tag made from it.
  uint32_t sequence = 0;

  // Set when a collective timed out: its messages may still be in flight,
  // so the communicator cannot be trusted again.
  std::atomic<bool> broken{false};
  std::string broken_reason;  // written once, before `broken` is set

  // Collectives run one at a time, in call order: at the call when nothing
  // is queued, else on the progress thread.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool busy = false;
  bool stopping = false;
  std::thread worker;
  bool threaded = true;  // MPI_THREAD_MULTIPLE: async forms use the thread

  // All ranks on one host: reduce-scatters fold their peers' chunks straight
  // out of a shared staging segment instead of receiving copies
  // (dist/shm_transport.h). Mapped on first use; each rank unmaps its view
  // alone, in the destructor.
  std::unique_ptr<ShmTransport> shm;

  // `settings` has every field set. Collective over `owned` (it duplicates
  // it for the point-to-point messages).
  State(MPI_Comm owned, bool threaded_mpi, const CommunicatorOptions& settings);
  ~State();
  void stop_worker();
  void worker_loop();

  // Runs `task` in order with the other collectives. Sync: on this thread,
  // after the queued ones. Async: queued; the returned Work completes with it.
  Work submit(std::function<void()> task, bool async);
  // submit()'s sync case without its allocations (see run_now, launch.h):
  // when nothing is queued or running, marks the communicator busy and
  // returns true; leave_inline() ends it. False: submit() instead.
  bool enter_inline();
  void leave_inline();

  int next_tag() { return static_cast<int>(sequence++ % static_cast<unsigned>(kTagCycle)); }
  void check_usable(const char* op) const;
  [[noreturn]] void fail_timeout(const char* op, const std::string& waiting_for);
  // Marks the communicator unusable (the first reason is kept) and raises
  // TimeoutError with `reason`.
  [[noreturn]] void fail_broken(const std::string& reason);
};

// Waits for MPI requests by polling, so that a deadline can end the wait.
class Waiter {
 public:
  Waiter(Communicator::State& state, const char* op);
  // With a deadline `timeout` from now instead of the communicator's.
  Waiter(Communicator::State& state, const char* op, std::chrono::duration<double> timeout);
  // Completes every request or raises TimeoutError (`what` says whom we
  // waited for). Completed requests are left as MPI_REQUEST_NULL.
  void wait_all(int n, MPI_Request* requests, const std::string& what);
  void wait(MPI_Request& request, const std::string& what) { wait_all(1, &request, what); }
  // As wait_all, request i exchanged with rank peers[i]: a timeout names the
  // ranks whose messages had not come (or gone), then `what`.
  void wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers, const char* what);
  // Calls `done` until it returns true, or past the deadline calls
  // `give_up` (which cancels what the caller had posted) and raises
  // TimeoutError.
  void poll(const std::function<bool()>& done, const std::string& what, const std::function<void()>& give_up = {});
  // Calls `done` until it returns true (then true) or the deadline passed
  // (then false); raises nothing of its own.
  bool poll_until_deadline(const std::function<bool()>& done);

 private:
  Communicator::State& state_;
  const char* op_;
  std::chrono::steady_clock::time_point deadline_;
};

void check_mpi(int rc, const char* op, const char* call);

// How many messages this process's communicators received and dropped when
// they were destroyed (messages no one would receive; see ~State). For tests.
int64_t messages_dropped_at_destruction();

// Blocks of a ring's buffer, in elements: block b is [offset[b], offset[b] + length[b]).
struct Blocks {
  std::vector<int64_t> offset;
  std::vector<int64_t> length;

  // n elements in ws nearly equal blocks (all_reduce's split of a tensor).
  static Blocks even(int64_t n, int ws) {
    Blocks b;
    int64_t at = 0;
    for (int r = 0; r < ws; ++r) {
      const int64_t len = n / ws + (r < n % ws ? 1 : 0);
      b.offset.push_back(at);
      b.length.push_back(len);
      at += len;
    }
    return b;
  }
  // ws blocks of n elements each.
  static Blocks equal(int64_t n, int ws) {
    Blocks b;
    for (int r = 0; r < ws; ++r) {
      b.offset.push_back(r * n);
      b.length.push_back(n);
    }
    return b;
  }
};

inline int mod(int a, int m) { return ((a % m) + m) % m; }

// Calls f(begin, length) for the chunks of at most `chunk` elements that
// make up `len`, in order; an empty block still makes one (empty) chunk, so
// that both ends of a ring agree on the number of messages.
template <typename F>
void for_each_chunk(int64_t len, int64_t chunk, F&& f) {
  for (int64_t c = 0; c < len || (c == 0 && len == 0); c += chunk) {
    f(c, std::min(chunk, len - c));
    if (len == 0) break;
  }
}

// Called for each finished chunk of a reduce-scatter's output (element
// offsets), in order, as soon as it is final.
using ChunkDone = std::function<void(int64_t begin, int64_t len)>;

// What a reduce-scatter ring receives from its left neighbour, in order:
// step s (1 <= s < ws) carries the partial of block rank - s - 1 (s
// contributions), chunk by chunk; begin is an element offset in the block.
struct RingPiece {
  int step;
  int64_t begin;
  int64_t len;
};
inline std::vector<RingPiece> ring_pieces(const Blocks& blocks, int rank, int ws, int64_t chunk) {
  std::vector<RingPiece> pieces;
  for (int step = 1; step < ws; ++step) {
    for_each_chunk(blocks.length[static_cast<size_t>(mod(rank - step - 1, ws))], chunk,
                   [&](int64_t begin, int64_t len) {
                     pieces.push_back({step, begin, len});
                   });
  }
  return pieces;
}

}  // namespace scatterx::dist

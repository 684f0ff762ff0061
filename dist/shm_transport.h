// The shared-memory transport of the host reduce-scatter. When every rank of
// a communicator is on one host, each rank copies its outgoing chunks into
// its own slots of one shared segment and the receiving rank folds them
// straight out of there: one copy of the outgoing data instead of MPI's copy
// on each receive. Empty "ready" and "free" messages order the slots. The
// segment also holds all_reduce's latency-path slots and call numbers
// (latency_all_reduce.h), ordered by atomics instead of messages.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dist/internal.h"
#include "ops/dtype.h"
#include "ops/reduce.h"

namespace scatterx::dist {

// Below this block size the point-to-point ring is as fast.
constexpr int64_t kShmMinBlockBytes = int64_t{64} << 10;

// The largest world size the shared segment serves.
constexpr int kShmMaxRanks = 8;

// Polls of a peer (a call number, an MPI request) before each further poll
// yields the core: a peer that is running answers within microseconds, while
// with more ranks than cores the late peer may be waiting for this very core.
constexpr uint64_t kSpinsBeforeYield = 2048;
constexpr uint64_t kSpinsBeforeYieldOversubscribed = 16;

// What a latency-path call is (shm_small_arrive), published beside its call
// number. Every rank compares every peer's with its own, so that ranks in
// different calls (another collective, size, dtype or root) raise
// MismatchError on every rank instead of reading each other's slots as
// something else. Checked whether or not SCATTERX_DIST_CHECKS is on.
struct SlotCall {
  enum Kind : uint32_t {
    kAllReduce = 1,  // detail: dtype * 256 + reduce, + 65536 for a mean
    kAllGather,      // detail: 0
    kBroadcast,      // detail: the root
    kFoldRecords,    // single_copy_reduce.cpp; detail: 1 all-reduce, 2 reduce-scatter
    kFoldNotes,      // likewise
    kFoldDone,       // likewise
    kPairs,          // pairwise_slots.cpp; detail: 0
    kPairsDone,      // likewise
  };
  uint32_t kind = 0;
  uint32_t detail = 0;
  int64_t bytes = 0;
  bool operator==(const SlotCall& o) const { return kind == o.kind && detail == o.detail && bytes == o.bytes; }
};

// A communicator's staging segment, as this rank sees it
// (Communicator::State::shm).
struct ShmTransport {
  int state = 0;     // 0 not tried, 1 usable, -1 not usable
  int one_host = 0;  // ranks_on_one_host's verdict: 0 not asked, 1 yes, -1 no
  char* base = nullptr;
  size_t bytes = 0;
  std::vector<char*> staging;  // by rank: that rank's staging area in the segment
  int64_t slot_bytes = 0;
  // By peer: the cost of this rank's copies into the peer's slots, plain
  // and non-temporal (write_slot in shm_transport.cpp).
  struct SlotWriter {
    double ns_per_byte[2] = {0, 0};  // running means of recent copies; 0: none yet
    uint64_t copies = 0;             // since both were measured
  };
  std::vector<SlotWriter> slot_writers;
  // The latency paths (shm_small_arrive below; shm_small.cpp), by
  // rank: the number of the last call whose slot that rank filled, what
  // that call was (two entries beside the number, alternating between calls
  // as the slots do), and its two slots of small_slot_bytes.
  std::vector<std::atomic<uint64_t>*> arrived;
  std::vector<SlotCall*> slot_calls;
  std::vector<char*> small_slots;
  int64_t small_slot_bytes = 0;
  uint64_t small_calls = 0;  // this rank's calls of the latency path so far
  // Every rank on this host, more ranks than it has CPUs online (set with
  // one_host): a waiting rank yields soon, since the peer it waits for may
  // need its core (kSpinsBeforeYieldOversubscribed).
  bool oversubscribed = false;
  char* small_slot(int rank, uint64_t call) const {
    return small_slots[static_cast<size_t>(rank)] + static_cast<int64_t>(call % 2) * small_slot_bytes;
  }

  ShmTransport() = default;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;
  ~ShmTransport() { unmap(); }
  void unmap();
};

// Whether every rank of s runs on this host (by host name, as Open MPI's
// MPI_COMM_TYPE_SHARED decides): collective the first time (only called from
// a collective every rank is in); every rank ends with the same verdict,
// kept in s.shm->one_host. The single-copy transport asks it too.
bool ranks_on_one_host(Communicator::State& s, Waiter& w, const char* op);

// `mine` combined over every rank (true only when true everywhere), by a
// nonblocking collective waited for against the timeout. Collective.
bool all_ranks_agree(Communicator::State& s, Waiter& w, bool mine, const char* op);

// Waits for a nonblocking collective's request against the timeout, so that
// a rank that never comes makes the others raise TimeoutError instead of
// hanging. A request that times out is left pending: its buffers must stay
// allocated.
void wait_setup(Waiter& w, MPI_Request& req, const char* op);

// SCATTERX_DIST_SHM_STREAM, read once for both writers of slots: -1 "auto"
// (each writer decides: the reduce-scatter by timing its copies, the
// latency all-reduce by size), 0 always plain copies, 1 always non-temporal.
int forced_slot_streaming();

// Whether s.shm is usable, mapping the segment on first use: collective over
// the communicator, so only called from a collective every rank is in; every
// rank ends with the same verdict.
bool shm_ready(Communicator::State& s, Waiter& w, const char* op);

// The smallest latency-path slot, whatever SCATTERX_DIST_ALLREDUCE_SMALL_BYTES
// says: room for the control messages of the single-copy folds (a record,
// or a note for each peer) and of the pairwise exchange (an entry for each
// of up to kShmMaxRanks ranks, pairwise_slots.cpp).
constexpr int64_t kMinSmallSlotBytes = 1024;

// Whether a rendezvous of every rank in the latency-path slots is cheap: the
// segment exists (shm_ready, collective the first time) and the ranks do not
// outnumber the cores. With more, every arrival waits for a round of context
// switches, where a message waits only for its peer (4 ranks on 2 cores: a
// 4 B broadcast 6 us through the slots against 1.3 us down the binomial tree;
// a 64 KiB single-copy broadcast 17 us with its control in the slots against
// 9 us in messages; bench/RESULTS.md). Every rank answers alike.
bool slot_rendezvous(Communicator::State& s, Waiter& w, const char* op);

// The latency paths' slots (shm_ready must have said yes; small_slot_bytes
// each, ShmTransport::small_slot): copies `call.bytes` at `data` into this
// rank's slot (nothing when data is null), publishes the call's number and
// what it is, and waits until every rank has published it (TimeoutError
// names those that did not); a rank whose `call` differs from any peer's
// makes every rank raise MismatchError. Returns the call's number: every
// slot of that call may then be read, until this rank's next latency-path
// call returns, so what a caller needs from a slot later it copies out
// first. Every rank must make the same sequence of latency-path calls.
uint64_t shm_small_arrive(Communicator::State& s, Waiter& w, const SlotCall& call, const char* data, const char* op);

// Copies `bytes` at `data` into a latency-path slot as shm_small_arrive does:
// with non-temporal stores from 1 KiB (shm_small.cpp says why), and then it
// returns true: the caller fences (detail::streaming_store_fence) before it
// arrives. For callers that fill their slot themselves and arrive with it.
bool write_small_slot(char* slot, const char* data, int64_t bytes);

// all_gather of blocks of `bytes` (at most small_slot_bytes) through the
// slots: every rank's block at `own` lands at out + rank * bytes on every
// rank (own may be its own place in out). No MPI message.
void shm_small_all_gather(Communicator::State& s, Waiter& w, const char* own, char* out, int64_t bytes, const char* op);

// broadcast of `bytes` (at most small_slot_bytes) at `data` from `root`
// through its slot. No MPI message.
void shm_small_broadcast(Communicator::State& s, Waiter& w, char* data, int64_t bytes, int root, const char* op);

// Reduce-scatter through the segment (shm_ready must have said yes). `src`
// is this rank's contribution (every block); out receives block `rank`
// reduced over all ranks (out may be that block of src), in chunks of
// `chunk` elements; `mean_count` > 0 divides at the end (avg).
void shm_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out, const Blocks& blocks,
                        DType dtype, Reduce reduce, int64_t mean_count, const char* op, int64_t chunk,
                        const ChunkDone& on_done);

}  // namespace scatterx::dist

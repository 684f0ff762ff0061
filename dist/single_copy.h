// The single-copy transport of the host all-gathers, all-to-alls, broadcast,
// all-reduce and reduce-scatter when every rank of a communicator is on one
// host. A rank tells each peer where (process id, address) the bytes meant
// for it lie; the peer copies them straight out of this rank's memory into
// its output with process_vm_readv (Linux cross-memory attach, CMA) and then
// says "done", so that no rank returns (and lets its caller reuse the input)
// while a peer may still read it. One copy per message, every rank reading
// its peers at once, no ring steps. The records and "done" go through the
// shared segment's latency-path slots where a rendezvous there is cheap
// (slot_rendezvous, shm_transport.h: two arrivals of every rank, no MPI
// message), else as two small messages per pair, which is still less than
// MPI's rendezvous handshake per message.
//
// A message in scatterx's own tensor memory (tensors of 64 KiB to 8 MiB, see
// ops/runtime/shareable_memory.h) is read through a mapping of the peer's
// memory file with memcpy instead, at user-space speed. The mappings are kept
// (a peer's files live as long as it does), at most kMaxPeerMappings of them;
// where a file cannot be mapped, the read falls back to process_vm_readv.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dist/internal.h"
#include "ops/dtype.h"
#include "ops/reduce.h"

namespace scatterx::dist {

// All-gathers, broadcasts and reduces of messages below this go another way
// (MPI messages, eager: two copies through Open MPI's shared-memory FIFO, or
// the segment's slots), which is as fast there as the record / read / done
// round trip (bench/RESULTS.md, "single-copy collectives").
constexpr int64_t kSingleCopyMinBytes = int64_t{64} << 10;

// An all-to-all's message of this size, up to kSingleCopyMinBytes, goes by
// single copy when it lies in shareable memory (its reader maps it and
// copies with memcpy), and as an MPI message otherwise: the receiver takes
// whichever comes (SingleCopyExchange::expect_either). With 4 ranks on 2
// cores, 256 KiB in all, scatterx's own tensors took 44 us against 58 us as
// MPI messages; numpy's and torch's, read by process_vm_readv, were up to 40%
// slower than MPI's messages (bench/RESULTS.md, "all-to-all pairs of 16-64
// KiB by single copy from shareable memory").
constexpr int64_t kPairSingleCopyMinBytes = int64_t{16} << 10;

// Whether this communicator's ranks read each other's memory: the option is
// on (CommunicatorOptions::single_copy), every rank is on one host (by host
// name, shm_transport.h) and every rank could read a probe word out of every
// peer (a container that forbids ptrace answers EPERM). Collective the first
// time, so only called where every rank calls it; the verdict is agreed,
// alike on every rank, and kept, and so is broadcast_root_share.
bool single_copy_ready(Communicator::State& s, Waiter& w, const char* op);

// Whether a collective whose messages are all `bytes` long (an all-gather's
// blocks, a broadcast) goes by single copy. Only a collective of large
// messages asks single_copy_ready, whose setup sends to every peer: a small
// broadcast that a root skips leaves no message behind on the other ranks.
inline bool single_copy_for(Communicator::State& s, Waiter& w, int64_t bytes, const char* op) {
  return s.size > 1 && bytes >= kSingleCopyMinBytes && single_copy_ready(s, w, op);
}

// Whether a pair's message of `bytes` goes by single copy. Both ends of a
// pair decide alike: they agree on the message's size and on the verdict.
inline bool by_single_copy(const Communicator::State& s, int64_t bytes) {
  return s.single_copy_state > 0 && bytes >= kSingleCopyMinBytes;
}

// Whether a pair's message of `bytes` goes by single copy if it lies in
// shareable memory and as an MPI message if not (the sender's choice; the
// receiver takes either).
inline bool by_single_copy_if_shareable(const Communicator::State& s, int64_t bytes) {
  return s.single_copy_state > 0 && bytes >= kPairSingleCopyMinBytes && bytes < kSingleCopyMinBytes;
}

// The sender's choice for a pair's `bytes` at `data`: by single copy (its
// reader copies them out) or not. Where the bytes lie decides, not whether
// a reader could map them: the reader falls back to process_vm_readv.
bool sends_by_single_copy(const Communicator::State& s, const char* data, int64_t bytes);

// Where a message's bytes lie: at `address` in process `pid`, and, when they
// lie in shareable tensor memory (ops/runtime/shareable_memory.h, fd >= 0),
// at `offset` in that process's memory file `fd`, which a reader maps and
// copies out of with memcpy instead of process_vm_readv.
struct SingleCopyRecord {
  int64_t pid = 0;
  uint64_t address = 0;
  int64_t bytes = 0;
  int64_t fd = -1;
  uint64_t inode = 0;
  uint64_t offset = 0;
  uint64_t file_bytes = 0;
};

// The record of `bytes` at `data` in this process.
SingleCopyRecord single_copy_record(const char* data, int64_t bytes);
// Bytes [at, at + bytes) of a record's message where this process can read
// them directly (its peer's memory file, mapped), else nullptr.
const char* single_copy_view(const SingleCopyRecord& r, int64_t at, int64_t bytes);
// Copies those bytes into `into`, by that view or else process_vm_readv: ""
// on success, else why not.
std::string single_copy_read(const SingleCopyRecord& r, int64_t at, char* into, int64_t bytes);

// Copies `bytes` from `from` into the record's message at `at`, with
// process_vm_writev (a peer's memory file is mapped read-only): "" on
// success, else why not. The range must lie inside the record's bytes.
std::string single_copy_write(const SingleCopyRecord& r, int64_t at, const char* from, int64_t bytes);

// Tests each request of `pending` (by peer; MPI_REQUEST_NULL where none)
// and calls arrived(p) once for each that completes, until all have or the
// deadline passed; those still pending then move to `reqs` with their peers
// in `peers`, so that the caller's wait_all names the ranks that had not come.
// With `arrived_bytes`, the size of each receive that completed is stored
// there, by peer, before arrived(p) is called.
void on_each_arrival(Waiter& w, std::vector<MPI_Request>& pending, const std::function<void(int)>& arrived,
                     std::vector<MPI_Request>& reqs, std::vector<int>& peers, const char* op,
                     std::vector<int64_t>* arrived_bytes = nullptr);

// Broadcasts from this size on, when there are no more ranks than cores
// (SCATTERX_DIST_BROADCAST_ROOT_SHARE), go by single_copy_broadcast: the
// root's core copies a share too.
constexpr int64_t kBroadcastPushMinBytes = int64_t{512} << 10;

// broadcast of `bytes` at `buf` from `root`, every rank on one host and
// single_copy_ready. A single-copy broadcast whose root only waits leaves a
// core idle: here the root writes the last 1/ws of every peer's buffer
// (process_vm_writev) while each peer reads the rest out of the root's
// (unless the root's buffer is shareable: then the peers read it all). Four
// small messages per pair: the root's record, the peer's, the root's "pushed"
// (how many bytes it wrote: a peer whose write failed reads them itself),
// the peer's "done". A peer whose size differs gets nothing written and
// every rank involved raises MismatchError.
void single_copy_broadcast(Communicator::State& s, Waiter& w, int tag, char* buf, int64_t bytes, int root,
                           const char* op);

// all_reduce of the contiguous `data` split into `blocks` (elements), every
// rank on one host and single_copy_ready. The ranks swap their tensors'
// records (a size that differs raises MismatchError on every rank). Each
// rank folds its own block in place a piece at a time, reading its peers'
// pieces where they lie (the mapping of a shareable tensor, else
// process_vm_readv), and writes each folded piece into every peer's tensor
// with process_vm_writev while the piece is still in its cache: each byte is
// read once from another rank and written once into it, with no staging
// copy. The control messages: records, the block's note (written, read it
// yourself, or could not fold: then every rank raises), "done". Through the
// segment's latency-path slots where slot_rendezvous says yes (one arrival
// of every rank each, and no "done" when no note asks for a read), else
// three small MPI messages per pair.
void single_copy_all_reduce(Communicator::State& s, Waiter& w, int tag, char* data, const Blocks& blocks, DType dtype,
                            Reduce reduce, int64_t mean_count, const char* op);

// reduce_scatter of the contiguous `src` (block r of every rank's input is
// rank r's) into `out`, every rank on one host and single_copy_ready. As the
// all-reduce above, each rank folds its own block a piece at a time straight
// out of its peers' inputs (own values first, then the peers' in rank
// order), here into `out`, and writes nothing into its peers: each byte of
// every other block is read once by the rank that owns it, with no copy into
// a staging segment first. The control messages, as the all-reduce's:
// records (a size that differs raises MismatchError on every rank), the
// fold's note (could not fold: every rank raises), and, by MPI messages
// only, "done". `out` must not overlap `src`.
// Blocks below 1 MiB fold so only when every rank's input lies in shareable
// memory; otherwise, having swapped only the records, every rank returns
// false and the caller reduce-scatters another way.
bool single_copy_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out,
                                const Blocks& blocks, DType dtype, Reduce reduce, int64_t mean_count, const char* op);

// The single-copy pairs of one exchange (single_copy_ready said yes) by MPI
// messages, where the segment's slots do not carry them (pairwise.h). Every
// request it posts is appended to `reqs` with its peer in `peers`, for the
// caller's one wait (whose timeout names the ranks that had not come).
class SingleCopyExchange {
 public:
  SingleCopyExchange(Communicator::State& s, int tag, const char* op, std::vector<MPI_Request>& reqs,
                     std::vector<int>& peers);
  SingleCopyExchange(const SingleCopyExchange&) = delete;
  SingleCopyExchange& operator=(const SingleCopyExchange&) = delete;

  // To peer p: where `bytes` at `data` lie; p's "done" is awaited.
  void offer(int p, const char* data, int64_t bytes);
  // From peer p (once per exchange): `bytes` into `into`, read by read_all.
  void expect(int p, char* into, int64_t bytes);
  // From peer p, whose choice is sends_by_single_copy's: `bytes` (at least a
  // record's) into `into`, as a message of them or as a record that
  // read_all reads.
  void expect_either(int p, char* into, int64_t bytes);
  // Reads each expected peer's bytes as its record arrives and tells it
  // "done". Past the deadline it returns with the records still missing
  // left in the caller's requests (whose wait then names those ranks).
  void read_all(Waiter& w);
  // Raises the first failed read (after the caller's wait: every peer was
  // told "done" all the same, so none is left waiting).
  void raise_if_failed() const;

 private:
  struct Incoming {
    char* into = nullptr;
    int64_t bytes = 0;
    bool either = false;  // expect_either: the record, if one came, lies at `into`
    SingleCopyRecord record;
  };
  Communicator::State& s_;
  int tag_;
  const char* op_;
  std::vector<MPI_Request>& reqs_;
  std::vector<int>& peers_;
  std::vector<SingleCopyRecord> offered_;  // reserved for every peer: stable addresses
  std::vector<Incoming> incoming_;         // by peer, sized once: likewise
  std::vector<MPI_Request> records_;       // by peer: the receive of its record, if expected
  std::vector<int64_t> arrived_bytes_;     // by peer: the size of what that receive got
  char note_ = 0;
  std::string error_;
  bool mismatch_ = false;
};

}  // namespace scatterx::dist

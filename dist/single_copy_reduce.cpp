// The single-copy all-reduce and reduce-scatter (single_copy.h): every rank
// folds its own block straight out of its peers' tensors; the all-reduce
// also writes each folded piece into their tensors while it is still in its
// cache. No staging segment, no ring steps.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dist/p2p.h"
#include "dist/shm_transport.h"
#include "dist/single_copy.h"
#include "dist/staging.h"
#include "ops/runtime/combine.h"

namespace scatterx::dist {

namespace {

// The fold's piece: small enough that a peer's piece read into scratch, and
// the folded piece written out to every peer, are still in this core's cache
// (L2 is 512 KiB to 4 MiB on the x86 servers measured); large enough that
// the system calls per piece cost little. bench/RESULTS.md, "the all-reduce
// pushes its folded pieces": with process_vm_readv reads, 64 KiB, 1 MiB and
// 4 MiB were slower.
constexpr int64_t kFoldPieceBytes = int64_t{256} << 10;

// A reduce-scatter's blocks below this fold by single copy only when every
// rank's input lies in shareable memory: read by process_vm_readv, blocks of
// 128-512 KiB folded 15-30% slower than through the segment, 1 MiB broke
// even and 2 MiB was 20% faster (2 ranks; bench/RESULTS.md, "the
// reduce-scatter folds straight out of its peers' inputs").
constexpr int64_t kForeignFoldMinBlockBytes = int64_t{1} << 20;

// What a rank tells each peer about its block once folded.
enum BlockNote : char {
  kReadIt = 0,   // the peer reads the block out of this rank's tensor (a write into it failed)
  kWritten = 1,  // nothing for the peer to read: its tensor holds the block (or, in a reduce-scatter, needs none)
  kFailed = 2,   // this rank could not fold it: the peer raises too
};

// MPI may still write these after a timeout: heap-held and then left
// allocated (see shm_transport.cpp, SetupMessages).
struct FoldMessages {
  SingleCopyRecord mine;
  std::vector<SingleCopyRecord> theirs;
  std::vector<char> sent;      // BlockNote to each peer
  std::vector<char> received;  // BlockNote from each peer
  char note = 0;
};

// A size that differs anywhere raises MismatchError on every rank (every
// rank sees every record).
void check_record_sizes(const Communicator::State& s, const FoldMessages& m, int64_t bytes, const char* op) {
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    const SingleCopyRecord& r = m.theirs[static_cast<size_t>(p)];
    if (r.bytes != bytes)
      throw MismatchError(
          detail::concat(op, ": rank ", p, "'s tensor has ", r.bytes, " bytes and rank ", s.rank, "'s ", bytes));
  }
}

// Every rank's record of its tensor, by MPI messages.
void swap_records(Communicator::State& s, Waiter& w, int tag, FoldMessages& m, const char* data, int64_t bytes,
                  const char* op) {
  m.mine = single_copy_record(data, bytes);
  m.theirs.assign(static_cast<size_t>(s.size), {});
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    post_send(reinterpret_cast<const char*>(&m.mine), sizeof(SingleCopyRecord), p, tag, s.comm, reqs, op);
    post_recv(reinterpret_cast<char*>(&m.theirs[static_cast<size_t>(p)]), sizeof(SingleCopyRecord), p, tag, s.comm,
              reqs, op);
    peers.resize(reqs.size(), p);
  }
  w.wait_all(reqs, peers, "the tensors' addresses");
  check_record_sizes(s, m, bytes, op);
}

// The same through the segment's latency-path slots (shm_small_arrive): one
// arrival of every rank instead of a message to and from each peer.
void swap_records_by_slots(Communicator::State& s, Waiter& w, FoldMessages& m, const char* data, int64_t bytes,
                           uint32_t fold, const char* op) {
  m.mine = single_copy_record(data, bytes);
  m.theirs.assign(static_cast<size_t>(s.size), {});
  const SlotCall what{SlotCall::kFoldRecords, fold, static_cast<int64_t>(sizeof(SingleCopyRecord))};
  const uint64_t call = shm_small_arrive(s, w, what, reinterpret_cast<const char*>(&m.mine), op);
  for (int p = 0; p < s.size; ++p) {
    if (p != s.rank)
      std::memcpy(&m.theirs[static_cast<size_t>(p)], s.shm->small_slot(p, call), sizeof(SingleCopyRecord));
  }
  check_record_sizes(s, m, bytes, op);
}

// Where this rank's block of a fold comes from and goes. `own` is this
// rank's contribution, `out` the folded block (the same place for the
// all-reduce, which folds in place; the input's block and the output for the
// reduce-scatter), `at` the block's byte offset in every rank's tensor, and
// `push` whether each folded piece is written into every peer's tensor (the
// all-reduce) or stays here (the reduce-scatter).
struct OwnBlock {
  const char* own = nullptr;
  char* out = nullptr;
  int64_t at = 0;
  int64_t length = 0;  // elements
  bool push = false;
};

// This rank's block folded a piece at a time: its own values first, then
// each peer's in rank order (one rank computes each block, so with the
// push every rank ends with the same bits). A peer's piece is read where it
// lies, through the mapping of its memory file, else copied out with
// process_vm_readv. With the push, each folded piece is then written into
// every peer's tensor with process_vm_writev. Only this rank reads or writes
// this block of any tensor, so a piece may be overwritten as soon as this
// rank has read it. A peer whose write fails gets no more writes and reads
// the block itself afterwards, as do all peers of a crowded rank whose
// tensor they can map. Sets m.sent; returns the first read failure ("" when
// none).
std::string fold_own_block(Communicator::State& s, FoldMessages& m, const OwnBlock& b, DType dtype, Reduce reduce,
                           int64_t mean_count, const char* op) {
  const int64_t es = element_size(dtype);
  const int last = s.rank == s.size - 1 ? s.size - 2 : s.size - 1;
  const int64_t piece = std::max<int64_t>(1, kFoldPieceBytes / es);
  // With more ranks than cores, a block in shareable memory is left for the
  // peers to copy out of their mapping of it with memcpy, with no system call
  // (4 ranks on 2 cores, 128-512 KiB: 62-72 us against 70-112 us pushed).
  const bool crowded = s.shm != nullptr && s.shm->oversubscribed;
  m.sent.assign(static_cast<size_t>(s.size), b.push && crowded && m.mine.fd >= 0 ? kReadIt : kWritten);
  std::unique_ptr<Scratch> copied;
  std::string error;
  for (int64_t begin = 0; begin < b.length; begin += piece) {
    const int64_t n = std::min(piece, b.length - begin);
    const int64_t where = b.at + begin * es;
    char* folded = b.out + begin * es;
    const char* first = b.own + begin * es;
    for (int p = 0; p < s.size; ++p) {
      if (p == s.rank) continue;
      const SingleCopyRecord& r = m.theirs[static_cast<size_t>(p)];
      const char* theirs = single_copy_view(r, where, n * es);
      if (theirs == nullptr) {
        if (!copied) copied = std::make_unique<Scratch>(std::min(b.length, piece) * es, s);
        const std::string why = single_copy_read(r, where, copied->data(), n * es);
        if (!why.empty()) {
          if (error.empty()) error = detail::concat(op, ": reading rank ", p, "'s block failed: ", why);
          continue;
        }
        theirs = copied->data();
      }
      detail::combine_cpu(folded, first, theirs, n, dtype, reduce, p == last ? mean_count : 0, op);
      first = folded;
    }
    if (!error.empty()) break;  // every peer is told kFailed
    if (!b.push) continue;
    for (int p = 0; p < s.size; ++p) {
      char& note = m.sent[static_cast<size_t>(p)];
      if (p == s.rank || note != kWritten) continue;
      if (!single_copy_write(m.theirs[static_cast<size_t>(p)], where, folded, n * es).empty()) note = kReadIt;
    }
  }
  if (!error.empty()) std::fill(m.sent.begin(), m.sent.end(), kFailed);
  return error;
}

// What this rank does on peer p's note about p's block: reads the block
// when p could not write it here. "" when all is well, else what went wrong.
std::string take_note(const FoldMessages& m, int p, char* data, const Blocks& blocks, int64_t es) {
  const size_t b = static_cast<size_t>(p);
  if (m.received[b] == kFailed) return "it could not fold it (its own error says why)";
  if (m.received[b] == kReadIt && data == nullptr)
    return "it asks for a read, which a reduce-scatter never needs (the ranks called different collectives?)";
  if (m.received[b] == kReadIt)
    return single_copy_read(m.theirs[b], blocks.offset[b] * es, data + blocks.offset[b] * es, blocks.length[b] * es);
  return "";
}

// Sends each peer its BlockNote; reads each peer's block that was not
// written here, once the peer's note says so (a peer that could not fold
// makes this rank raise too); then "done" to it, so that it may return.
// Waits for every peer's "done": until then a peer may still read or write
// this rank's tensor.
void finish_blocks(Communicator::State& s, Waiter& w, int tag, FoldMessages& m, char* data, const Blocks& blocks,
                   int64_t es, std::string& error, const char* op) {
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  std::vector<MPI_Request> folded(static_cast<size_t>(s.size), MPI_REQUEST_NULL);
  m.received.assign(static_cast<size_t>(s.size), kWritten);
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    const size_t b = static_cast<size_t>(p);
    post_send(&m.sent[b], 1, p, tag + kAllGatherTagOffset, s.comm, reqs, op);
    peers.resize(reqs.size(), p);
    check_mpi(MPI_Irecv(&m.received[b], 1, MPI_BYTE, p, tag + kAllGatherTagOffset, s.comm, &folded[b]), op,
              "MPI_Irecv");
    post_recv(&m.note, 0, p, tag + kShmFreeTagOffset, s.comm, reqs, op);
    peers.resize(reqs.size(), p);
  }
  on_each_arrival(
      w, folded,
      [&](int p) {
        const std::string why = take_note(m, p, data, blocks, es);
        if (!why.empty() && error.empty()) error = detail::concat(op, ": rank ", p, "'s reduced block: ", why);
        post_send(&m.note, 0, p, tag + kShmFreeTagOffset, s.comm, reqs, op);
        peers.resize(reqs.size(), p);
      },
      reqs, peers, op);
  w.wait_all(reqs, peers, "the reduced blocks");
}

// The same through the slots: every rank publishes its notes to all peers
// at once and reads the notes meant for it. Every rank sees every note, so
// when none asks for a read (every block was written into its peers, or a
// reduce-scatter's, which pushes nothing), every rank knows that no peer
// touches its tensor any more and all return without a "done" round.
void finish_blocks_by_slots(Communicator::State& s, Waiter& w, FoldMessages& m, char* data, const Blocks& blocks,
                            int64_t es, uint32_t fold, std::string& error, const char* op) {
  const int ws = s.size;
  const uint64_t call = shm_small_arrive(s, w, {SlotCall::kFoldNotes, fold, ws}, m.sent.data(), op);
  m.received.assign(static_cast<size_t>(ws), kWritten);
  bool any_read = false;
  for (int q = 0; q < ws; ++q) {
    const char* notes = s.shm->small_slot(q, call);
    if (q != s.rank) m.received[static_cast<size_t>(q)] = notes[s.rank];
    for (int p = 0; p < ws; ++p) any_read |= p != q && notes[p] == kReadIt;
  }
  for (int p = 0; p < ws; ++p) {
    if (p == s.rank) continue;
    const std::string why = take_note(m, p, data, blocks, es);
    if (!why.empty() && error.empty()) error = detail::concat(op, ": rank ", p, "'s reduced block: ", why);
  }
  if (any_read) shm_small_arrive(s, w, {SlotCall::kFoldDone, fold, 0}, nullptr, op);
}

// Whether a fold is worth its system calls: every rank's tensor lies in
// shareable memory (each peer's piece is read through a mapping), or this
// rank's block is large enough that process_vm_readv's reads pay for
// themselves. Every rank sees every record and the blocks' sizes agree, so
// every rank answers alike.
bool worth_folding(const FoldMessages& m, int rank, int64_t block_bytes, int64_t foreign_min_block_bytes) {
  if (block_bytes >= foreign_min_block_bytes) return true;
  if (m.mine.fd < 0) return false;
  for (size_t p = 0; p < m.theirs.size(); ++p)
    if (static_cast<int>(p) != rank && m.theirs[p].fd < 0) return false;
  return true;
}

// The whole exchange around one fold: the records of every rank's `tensor`
// (the one its peers read, and with the push write), the fold of this
// rank's block, the notes and "done". `read_into` is where a block that a
// peer could not push is read into (the all-reduce's tensor; nullptr for the
// reduce-scatter, which pushes nothing). Returns false, having exchanged
// only the records, when the fold is not worth_folding: then every rank
// returns false and the caller takes another path.
bool fold_exchange(Communicator::State& s, Waiter& w, int tag, const char* tensor, char* read_into,
                   const Blocks& blocks, const OwnBlock& own, DType dtype, Reduce reduce, int64_t mean_count,
                   int64_t foreign_min_block_bytes, const char* op) {
  const int64_t es = element_size(dtype);
  const int64_t bytes = (blocks.offset.back() + blocks.length.back()) * es;
  // The control messages go through the segment's slots where a rendezvous
  // there is cheap.
  const bool by_slots = slot_rendezvous(s, w, op);
  const uint32_t fold = own.push ? 1 : 2;  // SlotCall::detail
  auto m = std::make_unique<FoldMessages>();
  try {
    if (by_slots)
      swap_records_by_slots(s, w, *m, tensor, bytes, fold, op);
    else
      swap_records(s, w, tag, *m, tensor, bytes, op);
    if (!worth_folding(*m, s.rank, own.length * es, foreign_min_block_bytes)) return false;  // every message completed
    std::string error = fold_own_block(s, *m, own, dtype, reduce, mean_count, op);
    if (by_slots)
      finish_blocks_by_slots(s, w, *m, read_into, blocks, es, fold, error, op);
    else
      finish_blocks(s, w, tag, *m, read_into, blocks, es, error, op);
    if (!error.empty()) throw Error(error);
    return true;
  } catch (...) {
    (void)m.release();
    throw;
  }
}

}  // namespace

void single_copy_all_reduce(Communicator::State& s, Waiter& w, int tag, char* data, const Blocks& blocks, DType dtype,
                            Reduce reduce, int64_t mean_count, const char* op) {
  const size_t me = static_cast<size_t>(s.rank);
  const int64_t at = blocks.offset[me] * element_size(dtype);
  fold_exchange(s, w, tag, data, data, blocks, {data + at, data + at, at, blocks.length[me], true}, dtype, reduce,
                mean_count, 0, op);
}

bool single_copy_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out,
                                const Blocks& blocks, DType dtype, Reduce reduce, int64_t mean_count, const char* op) {
  const size_t me = static_cast<size_t>(s.rank);
  const int64_t at = blocks.offset[me] * element_size(dtype);
  return fold_exchange(s, w, tag, src, nullptr, blocks, {src + at, out, at, blocks.length[me], false}, dtype, reduce,
                       mean_count, kForeignFoldMinBlockBytes, op);
}

}  // namespace scatterx::dist

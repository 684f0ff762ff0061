// The single-copy all-reduce (single_copy.h): every rank reduces its own
// block straight out of its peers' tensors, then copies the peers' reduced
// blocks out of theirs, through mappings of their memory files. No staging
// segment, no ring steps.
#include <memory>
#include <string>
#include <vector>

#include "dist/p2p.h"
#include "dist/single_copy.h"
#include "dist/staging.h"
#include "ops/runtime/combine.h"

namespace scatterx::dist {

namespace {

// MPI may still write these after a timeout: heap-held and then left
// allocated (see shm_transport.cpp, SetupMessages).
struct AllReduceMessages {
  SingleCopyRecord mine;
  std::vector<SingleCopyRecord> theirs;
  char note = 0;
};

// Every rank's record of its tensor; false unless every one lies in
// shareable memory (every rank sees the same records and decides alike).
bool swap_records(Communicator::State& s, Waiter& w, int tag, AllReduceMessages& m, const char* data, int64_t bytes,
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
  bool all_shareable = m.mine.fd >= 0;
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    const SingleCopyRecord& r = m.theirs[static_cast<size_t>(p)];
    if (r.bytes != bytes)
      throw MismatchError(
          detail::concat(op, ": rank ", p, "'s tensor has ", r.bytes, " bytes and rank ", s.rank, "'s ", bytes));
    all_shareable = all_shareable && r.fd >= 0;
  }
  return all_shareable;
}

// This rank's block folded in place: its own values first, then each peer's
// in rank order (one rank computes each block, so every rank ends with the
// same bits). A peer's block is read where it lies, through the mapping of
// its memory file, else copied out with process_vm_readv. Returns the first
// failure ("" when none).
std::string fold_own_block(Communicator::State& s, const AllReduceMessages& m, char* data, const Blocks& blocks,
                           DType dtype, Reduce reduce, int64_t mean_count, const char* op) {
  const int64_t es = element_size(dtype);
  const size_t me = static_cast<size_t>(s.rank);
  const int64_t at = blocks.offset[me] * es;
  const int64_t len = blocks.length[me];
  const int last = s.rank == s.size - 1 ? s.size - 2 : s.size - 1;
  std::unique_ptr<Scratch> copied;
  std::string error;
  for (int p = 0; p < s.size && len > 0; ++p) {
    if (p == s.rank) continue;
    const SingleCopyRecord& r = m.theirs[static_cast<size_t>(p)];
    const char* theirs = single_copy_view(r, at, len * es);
    if (theirs == nullptr) {
      if (!copied) copied = std::make_unique<Scratch>(len * es, s);
      const std::string why = single_copy_read(r, at, copied->data(), len * es);
      if (!why.empty()) {
        if (error.empty()) error = detail::concat(op, ": reading rank ", p, "'s block failed: ", why);
        continue;
      }
      theirs = copied->data();
    }
    detail::combine_cpu(data + at, data + at, theirs, len, dtype, reduce, p == last ? mean_count : 0, op);
  }
  return error;
}

// Each peer's reduced block, once it says it is done (its note also says it
// no longer reads this rank's copy of that block, which is overwritten now);
// then "done" to it, so that it may return. Waits for every peer's "done".
void copy_reduced_blocks(Communicator::State& s, Waiter& w, int tag, AllReduceMessages& m, char* data,
                         const Blocks& blocks, int64_t es, std::string& error, const char* op) {
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  std::vector<MPI_Request> reduced(static_cast<size_t>(s.size), MPI_REQUEST_NULL);
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    post_send(&m.note, 0, p, tag + kAllGatherTagOffset, s.comm, reqs, op);
    peers.resize(reqs.size(), p);
    check_mpi(MPI_Irecv(&m.note, 0, MPI_BYTE, p, tag + kAllGatherTagOffset, s.comm, &reduced[static_cast<size_t>(p)]),
              op, "MPI_Irecv");
    post_recv(&m.note, 0, p, tag + kShmFreeTagOffset, s.comm, reqs, op);
    peers.resize(reqs.size(), p);
  }
  on_each_arrival(
      w, reduced,
      [&](int p) {
        const size_t b = static_cast<size_t>(p);
        const std::string why =
            single_copy_read(m.theirs[b], blocks.offset[b] * es, data + blocks.offset[b] * es, blocks.length[b] * es);
        if (!why.empty() && error.empty()) error = detail::concat(op, ": reading rank ", p, "'s block failed: ", why);
        post_send(&m.note, 0, p, tag + kShmFreeTagOffset, s.comm, reqs, op);
        peers.resize(reqs.size(), p);
      },
      reqs, peers, op);
  w.wait_all(reqs, peers, "the reduced blocks");
}

}  // namespace

bool single_copy_all_reduce(Communicator::State& s, Waiter& w, int tag, char* data, const Blocks& blocks, DType dtype,
                            Reduce reduce, int64_t mean_count, const char* op) {
  const int64_t es = element_size(dtype);
  const int64_t bytes = (blocks.offset.back() + blocks.length.back()) * es;
  auto m = std::make_unique<AllReduceMessages>();
  try {
    if (!swap_records(s, w, tag, *m, data, bytes, op)) return false;
    std::string error = fold_own_block(s, *m, data, blocks, dtype, reduce, mean_count, op);
    copy_reduced_blocks(s, w, tag, *m, data, blocks, es, error, op);
    if (!error.empty()) throw Error(error);
    return true;
  } catch (...) {
    (void)m.release();
    throw;
  }
}

}  // namespace scatterx::dist

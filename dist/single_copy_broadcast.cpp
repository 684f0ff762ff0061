// The single-copy broadcast with the root's share (single_copy.h): the root
// writes the tail of every peer's buffer while the peers read the rest.
#include <memory>
#include <string>
#include <vector>

#include "dist/p2p.h"
#include "dist/single_copy.h"

namespace scatterx::dist {

namespace {

// MPI may still write these after a timeout: heap-held and then left
// allocated (see shm_transport.cpp, SetupMessages).
struct BroadcastMessages {
  SingleCopyRecord mine;                // this rank's buffer
  SingleCopyRecord root;                // a peer: the root's buffer
  std::vector<SingleCopyRecord> peers;  // the root: each peer's buffer
  std::vector<int64_t> pushed;          // the root: bytes written into each peer (-1: its size differs)
  int64_t pushed_here = 0;              // a peer: what the root says it wrote here
  char note = 0;
};

// The bytes at the end of each peer's buffer that the root writes: a 1/ws
// share (a multiple of 4 KiB), so that the root and every peer copy about as
// much.
// None when the root's buffer lies in shareable memory: the peers' memcpy
// out of its mapping outruns the kernel's copy (2 ranks, 4 MiB: 114 us
// reading it all against 167 us sharing it with the root's writes).
int64_t root_share(const SingleCopyRecord& root, int64_t bytes, int ws) {
  return root.fd >= 0 ? 0 : bytes / ws / 4096 * 4096;
}

// The root writes its share into each peer as the peer's record arrives,
// tells it how much it wrote, and waits for every peer's "done".
void push_from_root(Communicator::State& s, Waiter& w, int tag, BroadcastMessages& m, const char* buf, int64_t bytes,
                    const char* op) {
  const int64_t share = root_share(m.mine, bytes, s.size);
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  std::vector<MPI_Request> records(static_cast<size_t>(s.size), MPI_REQUEST_NULL);
  m.peers.assign(static_cast<size_t>(s.size), {});
  m.pushed.assign(static_cast<size_t>(s.size), 0);
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    post_send(reinterpret_cast<const char*>(&m.mine), sizeof(SingleCopyRecord), p, tag, s.comm, reqs, op);
    peers.resize(reqs.size(), p);
    check_mpi(MPI_Irecv(&m.peers[static_cast<size_t>(p)], sizeof(SingleCopyRecord), MPI_BYTE, p, tag, s.comm,
                        &records[static_cast<size_t>(p)]),
              op, "MPI_Irecv");
    post_recv(&m.note, 0, p, tag + kShmFreeTagOffset, s.comm, reqs, op);
    peers.resize(reqs.size(), p);
  }
  int mismatched = -1;
  on_each_arrival(
      w, records,
      [&](int p) {
        const SingleCopyRecord& theirs = m.peers[static_cast<size_t>(p)];
        int64_t& pushed = m.pushed[static_cast<size_t>(p)];
        if (theirs.bytes != bytes) {
          pushed = -1;
          if (mismatched < 0) mismatched = p;
        } else {
          // A failed write is not an error: the peer reads those bytes itself.
          const bool written =
              share > 0 && single_copy_write(theirs, bytes - share, buf + bytes - share, share).empty();
          pushed = written ? share : 0;
        }
        post_send(reinterpret_cast<const char*>(&pushed), sizeof(int64_t), p, tag + kAllGatherTagOffset, s.comm, reqs,
                  op);
        peers.resize(reqs.size(), p);
      },
      reqs, peers, op);
  w.wait_all(reqs, peers, "the broadcast (src and its readers)");
  if (mismatched >= 0)
    throw MismatchError(detail::concat(op, ": rank ", mismatched, "'s tensor has ",
                                       m.peers[static_cast<size_t>(mismatched)].bytes, " bytes and src's (rank ",
                                       s.rank, ") ", bytes));
}

// A peer reads the head of the root's buffer, then, told what the root
// wrote, whatever of the tail it did not; then "done".
void read_from_root(Communicator::State& s, Waiter& w, int tag, BroadcastMessages& m, char* buf, int64_t bytes,
                    int root, const char* op) {
  const char* what = "the broadcast (src and its readers)";
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  auto wait_for_root = [&] {
    peers.assign(reqs.size(), root);
    w.wait_all(reqs, peers, what);
    reqs.clear();
  };
  post_send(reinterpret_cast<const char*>(&m.mine), sizeof(SingleCopyRecord), root, tag, s.comm, reqs, op);
  post_recv(reinterpret_cast<char*>(&m.root), sizeof(SingleCopyRecord), root, tag, s.comm, reqs, op);
  wait_for_root();
  std::string error;
  const bool mismatch = m.root.bytes != bytes;
  const int64_t share = root_share(m.root, bytes, s.size);
  if (mismatch)
    error = detail::concat(op, ": src (rank ", root, ") sends ", m.root.bytes, " bytes to rank ", s.rank,
                           ", which expects ", bytes);
  else
    error = single_copy_read(m.root, 0, buf, bytes - share);
  post_recv(reinterpret_cast<char*>(&m.pushed_here), sizeof(int64_t), root, tag + kAllGatherTagOffset, s.comm, reqs,
            op);
  wait_for_root();
  if (!mismatch && error.empty() && m.pushed_here != share)
    error = single_copy_read(m.root, bytes - share, buf + (bytes - share), share);
  if (!mismatch && !error.empty())
    error = detail::concat(op, ": reading ", bytes, " bytes out of src (rank ", root, ") failed: ", error);
  post_send(&m.note, 0, root, tag + kShmFreeTagOffset, s.comm, reqs, op);
  wait_for_root();
  if (mismatch) throw MismatchError(error);
  if (!error.empty()) throw Error(error);
}

}  // namespace

void single_copy_broadcast(Communicator::State& s, Waiter& w, int tag, char* buf, int64_t bytes, int root,
                           const char* op) {
  auto m = std::make_unique<BroadcastMessages>();
  try {
    m->mine = single_copy_record(buf, bytes);
    if (s.rank == root)
      push_from_root(s, w, tag, *m, buf, bytes, op);
    else
      read_from_root(s, w, tag, *m, buf, bytes, root, op);
  } catch (...) {
    (void)m.release();
    throw;
  }
}

}  // namespace scatterx::dist

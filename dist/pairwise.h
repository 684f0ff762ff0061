// The pairwise exchange on host memory: every rank sends each peer its
// share and receives the peer's, all messages posted at once (the
// all-to-alls' transport, and on one host the all-gathers' and broadcast's
// for large messages).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/internal.h"

namespace scatterx::dist {

// send_bytes[p] from send[p] to rank p, recv_bytes[p] into recv[p] from rank
// p (this rank's own share is copied). Empty shares send nothing. Shares of
// kSingleCopyMinBytes or more go by single copy when every rank is on one
// host (single_copy.h), and from kPairSingleCopyMinBytes those that lie in
// shareable memory do too; the first call is collective for that verdict, so
// every rank must call it (with its shares, empty or not). `what` names the
// messages in a timeout's error.
//
// Where a rendezvous in the segment's latency-path slots is cheap
// (slot_rendezvous, shm_transport.h), the control goes
// through them (pairwise_slots.cpp): every rank publishes, for each peer, the
// bytes it sends and expects and where its share lies, and the shares that
// fit the slot's spare room (64 KiB by default) inline. Every rank then sees
// every pair, so a pair whose ends disagree on its size raises MismatchError
// on every rank before any byte moves (with the argument checks off too).
// Elsewhere: single-copy records, "done" notes and shares as MPI messages.
void exchange_pairwise(Communicator::State& s, Waiter& w, int tag, const std::vector<const char*>& send,
                       const std::vector<int64_t>& send_bytes, const std::vector<char*>& recv,
                       const std::vector<int64_t>& recv_bytes, const char* op,
                       const char* what = "their all-to-all messages");

// The slots' form of the above (every rank takes it or none:
// slot_rendezvous agrees across ranks).
void exchange_pairwise_by_slots(Communicator::State& s, Waiter& w, int tag, const std::vector<const char*>& send,
                                const std::vector<int64_t>& send_bytes, const std::vector<char*>& recv,
                                const std::vector<int64_t>& recv_bytes, const char* op, const char* what);

}  // namespace scatterx::dist

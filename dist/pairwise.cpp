// The pairwise exchange (pairwise.h).
#include "dist/pairwise.h"

#include <cstring>

#include "dist/p2p.h"
#include "dist/shm_transport.h"
#include "dist/single_copy.h"

namespace scatterx::dist {

// Peers are visited starting from the right neighbour so that not every
// rank hits rank 0 first. A pair whose message is large enough goes by
// single copy on one host (single_copy.h), the others as MPI messages;
// both ends of a pair pick the same way, except for mid-sized messages,
// where the sender picks by where its bytes lie and the receiver takes
// either.
void exchange_pairwise(Communicator::State& s, Waiter& w, int tag, const std::vector<const char*>& send,
                       const std::vector<int64_t>& send_bytes, const std::vector<char*>& recv,
                       const std::vector<int64_t>& recv_bytes, const char* op, const char* what) {
  const int ws = s.size;
  const int r = s.rank;
  if (ws > 1) single_copy_ready(s, w, op);  // collective the first time only
  if (ws > 1 && slot_rendezvous(s, w, op)) {
    exchange_pairwise_by_slots(s, w, tag, send, send_bytes, recv, recv_bytes, op, what);
    return;
  }
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;  // of each request, for a timeout's message
  SingleCopyExchange single(s, tag, op, reqs, peers);
  for (int i = 1; i < ws; ++i) {
    const size_t from = static_cast<size_t>(mod(r - i, ws));
    if (by_single_copy(s, recv_bytes[from]))
      single.expect(static_cast<int>(from), recv[from], recv_bytes[from]);
    else if (by_single_copy_if_shareable(s, recv_bytes[from]))
      single.expect_either(static_cast<int>(from), recv[from], recv_bytes[from]);
    else if (recv_bytes[from] > 0)
      post_recv(recv[from], recv_bytes[from], static_cast<int>(from), tag, s.comm, reqs, op);
    peers.resize(reqs.size(), static_cast<int>(from));
  }
  for (int i = 1; i < ws; ++i) {
    const size_t to = static_cast<size_t>(mod(r + i, ws));
    if (sends_by_single_copy(s, send[to], send_bytes[to]))
      single.offer(static_cast<int>(to), send[to], send_bytes[to]);
    else if (send_bytes[to] > 0)
      post_send(send[to], send_bytes[to], static_cast<int>(to), tag, s.comm, reqs, op);
    peers.resize(reqs.size(), static_cast<int>(to));
  }
  const size_t me = static_cast<size_t>(r);
  if (send_bytes[me] > 0 && recv[me] != send[me]) std::memmove(recv[me], send[me], static_cast<size_t>(send_bytes[me]));
  single.read_all(w);
  w.wait_all(reqs, peers, what);
  single.raise_if_failed();
}

}  // namespace scatterx::dist

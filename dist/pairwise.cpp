// The pairwise exchange (pairwise.h).
#include "dist/pairwise.h"

#include <cstring>

#include "dist/p2p.h"

namespace scatterx::dist {

// Peers are visited starting from the right neighbour so that not every
// rank hits rank 0 first.
void exchange_pairwise(Communicator::State& s, Waiter& w, int tag, const std::vector<const char*>& send,
                       const std::vector<int64_t>& send_bytes, const std::vector<char*>& recv,
                       const std::vector<int64_t>& recv_bytes, const char* op) {
  const int ws = s.size;
  const int r = s.rank;
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;  // of each request, for a timeout's message
  for (int i = 1; i < ws; ++i) {
    const int from = mod(r - i, ws);
    if (recv_bytes[static_cast<size_t>(from)] > 0)
      post_recv(recv[static_cast<size_t>(from)], recv_bytes[static_cast<size_t>(from)], from, tag, s.comm, reqs, op);
    peers.resize(reqs.size(), from);
  }
  for (int i = 1; i < ws; ++i) {
    const int to = mod(r + i, ws);
    if (send_bytes[static_cast<size_t>(to)] > 0)
      post_send(send[static_cast<size_t>(to)], send_bytes[static_cast<size_t>(to)], to, tag, s.comm, reqs, op);
    peers.resize(reqs.size(), to);
  }
  const size_t me = static_cast<size_t>(r);
  if (send_bytes[me] > 0 && recv[me] != send[me]) std::memmove(recv[me], send[me], static_cast<size_t>(send_bytes[me]));
  w.wait_all(reqs, peers, "their all-to-all messages");
}

}  // namespace scatterx::dist

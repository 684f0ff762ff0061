// The binomial-tree broadcast (binomial_broadcast.h).
#include "dist/binomial_broadcast.h"

#include <vector>

#include "dist/p2p.h"

namespace scatterx::dist {

void binomial_broadcast(Communicator::State& s, Waiter& w, int tag, char* buf, int64_t bytes, int root,
                        const char* op) {
  const int ws = s.size;
  const int vr = mod(s.rank - root, ws);
  int mask = 1;
  for (; mask < ws; mask <<= 1) {
    if (vr & mask) {
      const int parent = mod(vr - mask + root, ws);
      std::vector<MPI_Request> reqs;
      post_recv(buf, bytes, parent, tag, s.comm, reqs, op);
      w.wait_all(static_cast<int>(reqs.size()), reqs.data(),
                 detail::concat(rank_name(parent), " (from src ", root, ")"));
      break;
    }
  }
  std::vector<MPI_Request> reqs;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < ws) post_send(buf, bytes, mod(vr + mask + root, ws), tag, s.comm, reqs, op);
  }
  w.wait_all(static_cast<int>(reqs.size()), reqs.data(), "the ranks below this one in the broadcast tree");
}

}  // namespace scatterx::dist

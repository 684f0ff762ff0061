// all_reduce's latency path between hosts (latency_all_reduce.h): recursive
// doubling over point-to-point messages.
#include <vector>

#include "dist/latency_all_reduce.h"
#include "dist/p2p.h"
#include "dist/staging.h"
#include "ops/runtime/combine.h"

namespace scatterx::dist {

void recursive_doubling_all_reduce(Communicator::State& s, Waiter& w, int tag, char* data, int64_t n, DType dtype,
                                   Reduce reduce, int64_t mean_count, const char* op) {
  const int ws = s.size;
  const int r = s.rank;
  const int64_t bytes = n * element_size(dtype);
  int pow2 = 1;
  while (pow2 * 2 <= ws) pow2 *= 2;
  const int extra = ws - pow2;  // ranks pow2 .. ws-1 pair with rank - pow2
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  auto exchange = [&](const char* send, int to, char* recv, int from) {
    reqs.clear();
    peers.clear();
    if (recv != nullptr) {
      post_recv(recv, bytes, from, tag, s.comm, reqs, op);
      peers.resize(reqs.size(), from);
    }
    if (send != nullptr) {
      post_send(send, bytes, to, tag, s.comm, reqs, op);
      peers.resize(reqs.size(), to);
    }
    w.wait_all(reqs, peers, "the recursive-doubling all-reduce");
  };
  if (r >= pow2) {
    // Hand this rank's values to its partner, then take the result.
    exchange(data, r - pow2, nullptr, -1);
    exchange(nullptr, -1, data, r - pow2);
    return;
  }
  const Scratch incoming(bytes, s);
  if (r < extra) {
    exchange(nullptr, -1, incoming.data(), r + pow2);
    detail::combine_cpu(data, data, incoming.data(), n, dtype, reduce, 0, op);
  }
  for (int mask = 1; mask < pow2; mask <<= 1) {
    const int partner = r ^ mask;
    exchange(data, partner, incoming.data(), partner);
    const bool lower = r < partner;
    detail::combine_cpu(data, lower ? data : incoming.data(), lower ? incoming.data() : data, n, dtype, reduce,
                        mask * 2 == pow2 ? mean_count : 0, op);
  }
  if (r < extra) exchange(data, r + pow2, nullptr, -1);
}

}  // namespace scatterx::dist

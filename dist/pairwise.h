// The pairwise exchange on host memory: every rank sends each peer its
// share and receives the peer's, all messages posted at once (the
// all-to-alls' transport).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/internal.h"

namespace scatterx::dist {

// send_bytes[p] from send[p] to rank p, recv_bytes[p] into recv[p] from rank
// p (this rank's own share is copied). Empty shares send nothing.
void exchange_pairwise(Communicator::State& s, Waiter& w, int tag, const std::vector<const char*>& send,
                       const std::vector<int64_t>& send_bytes, const std::vector<char*>& recv,
                       const std::vector<int64_t>& recv_bytes, const char* op);

}  // namespace scatterx::dist

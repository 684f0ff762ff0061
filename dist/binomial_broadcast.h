// The broadcast on host memory: a binomial tree over the ranks relative to
// the root, point-to-point (so that a wait can be cancelled at the timeout).
#pragma once

#include <cstdint>

#include "dist/internal.h"

namespace scatterx::dist {

// `bytes` at buf on `root` reach buf on every rank; each rank receives once
// from its parent, then sends to its children.
void binomial_broadcast(Communicator::State& s, Waiter& w, int tag, char* buf, int64_t bytes, int root, const char* op);

}  // namespace scatterx::dist

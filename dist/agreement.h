// The cross-rank agreement of the workload layers (moe, embedding bags):
// each rank all-gathers a small record of int64 fields (field 0: 0 when its
// own argument checks passed), then every rank reads the same records and
// raises the same MismatchError, so a bad argument on one rank raises on all
// of them instead of leaving its peers waiting.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dist/dist.h"

namespace scatterx::dist::agreement {

// Every rank's record, [world][fields] flattened (the same length everywhere).
std::vector<int64_t> gather_records(const std::vector<int64_t>& mine, const Communicator& comm);

// MismatchError naming the ranks whose field 0 is not 0; then, for the first
// field i >= 1 whose values differ, "expected every rank to use the same
// <name(i)>, got rank 0: .., rank 1: ..".
void raise_mismatches(const char* op, const std::vector<int64_t>& every, int world,
                      const std::function<std::string(int64_t)>& name);

}  // namespace scatterx::dist::agreement

// The limit cases: no scatterx call, but the copies and folds a collective is
// made of, timed the same way, so that a collective's time can be read against
// what moving its bytes costs on this machine in the same run. Both columns
// of copy and all_reduce_copies run the same code; peer_copy's two columns are
// the two single copies one process can make of another's bytes.
#pragma once

#include <cstdint>

#include "cases.h"

namespace scatterx_bench_collectives {

// Every rank memcpy's `size` bytes (the all-gather's output) at once.
Case make_copy(Env& env, int64_t size);

// Every rank gathers the all-gather's blocks out of its peers' memory: by
// process_vm_readv from their private buffers / by memcpy from an MPI
// shared-memory window.
Case make_peer_copy(Env& env, int64_t size);

// Every rank makes the copies and the fold of a single-copy all-reduce of
// private buffers within its own memory, then all ranks meet in a barrier.
Case make_all_reduce_copies(Env& env, int64_t size);

}  // namespace scatterx_bench_collectives

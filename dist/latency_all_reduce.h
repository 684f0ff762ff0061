// all_reduce's latency path: small tensors reduced in one step instead of a
// reduce-scatter and an all-gather of tiny blocks. all_reduce takes it for
// tensors below Communicator::State::allreduce_small_bytes
// (SCATTERX_DIST_ALLREDUCE_SMALL_BYTES): through the shared-memory segment
// when every rank is on one host, else by recursive doubling over
// point-to-point messages. Both give every rank bit-identical results.
#pragma once

#include <cstdint>

#include "dist/internal.h"
#include "ops/dtype.h"
#include "ops/reduce.h"

namespace scatterx::dist {

// On one host (shm_ready must have said yes): each rank copies its `n`
// elements at `data` into its own slot of the segment and publishes the
// call's number; once every peer's number has come, each rank folds every
// slot, in rank order, into data. No MPI message: the peers are waited for
// by spinning (yielding the core when there are more ranks than cores), a
// rank that does not come raises TimeoutError naming it. `mean_count` > 0
// divides at the end (avg). n * element size must fit a slot
// (ShmTransport::small_slot_bytes).
void shm_all_reduce(Communicator::State& s, Waiter& w, char* data, int64_t n, DType dtype, Reduce reduce,
                    int64_t mean_count, const char* op);

// Between hosts: log2(ws) exchanges of the whole vector with rank ^ 2^k
// (with ranks beyond the largest power of two first folded into, and at
// the end sent the result by, rank - that power). Each pair folds the lower
// rank's partial first, so both hold the same bits.
void recursive_doubling_all_reduce(Communicator::State& s, Waiter& w, int tag, char* data, int64_t n, DType dtype,
                                   Reduce reduce, int64_t mean_count, const char* op);

}  // namespace scatterx::dist

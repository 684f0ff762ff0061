// Point-to-point messages, which every host algorithm is built on:
// non-blocking sends and receives of any length, and the pipelining granule
// that the rings and the shared-memory slots cut their data into.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace scatterx::dist {

// MPI counts are ints: longer messages go as several pieces of this size.
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;

// Posts the sends (receives) of `bytes` at data to (from) `peer`, one
// request per piece appended to `out`; an empty message still posts one.
void post_send(const char* data, int64_t bytes, int peer, int tag, MPI_Comm comm, std::vector<MPI_Request>& out,
               const char* op);
void post_recv(char* data, int64_t bytes, int peer, int tag, MPI_Comm comm, std::vector<MPI_Request>& out,
               const char* op);

// "rank r", for what a wait is waiting for.
std::string rank_name(int r);

}  // namespace scatterx::dist

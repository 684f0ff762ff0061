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

// The datatype and count that carry `bytes` as one MPI message of any length
// (past kMaxMessageBytes, a derived type of whole pieces and a tail), so that
// it matches exactly one receive, as an any-source receive needs. The type
// may be dropped as soon as the message is posted.
class OneMessage {
 public:
  OneMessage(int64_t bytes, const char* op);
  ~OneMessage();
  OneMessage(const OneMessage&) = delete;
  OneMessage& operator=(const OneMessage&) = delete;
  MPI_Datatype type() const { return type_; }
  int count() const { return count_; }

 private:
  MPI_Datatype type_ = MPI_BYTE;
  int count_ = 0;
};

// "rank r", for what a wait is waiting for.
std::string rank_name(int r);

}  // namespace scatterx::dist

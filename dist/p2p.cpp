// Point-to-point messages (p2p.h): long messages in pieces below MPI's int
// count, and the pipelining granule read once from the environment.
#include "dist/p2p.h"

#include <algorithm>

#include "dist/internal.h"

namespace scatterx::dist {

namespace {

// Calls post(piece, count, &request) for the pieces of at most
// kMaxMessageBytes that make up `bytes` at data (one, empty, when bytes is 0).
template <typename Byte, typename Post>
void post_pieces(Byte* data, int64_t bytes, std::vector<MPI_Request>& out, Post&& post) {
  do {
    const int64_t piece = std::min(bytes, kMaxMessageBytes);
    MPI_Request r;
    post(data, static_cast<int>(piece), &r);
    out.push_back(r);
    data += piece;
    bytes -= piece;
  } while (bytes > 0);
}

}  // namespace

void post_send(const char* data, int64_t bytes, int peer, int tag, MPI_Comm comm, std::vector<MPI_Request>& out,
               const char* op) {
  post_pieces(data, bytes, out, [&](const char* piece, int count, MPI_Request* r) {
    check_mpi(MPI_Isend(piece, count, MPI_BYTE, peer, tag, comm, r), op, "MPI_Isend");
  });
}

void post_recv(char* data, int64_t bytes, int peer, int tag, MPI_Comm comm, std::vector<MPI_Request>& out,
               const char* op) {
  post_pieces(data, bytes, out, [&](char* piece, int count, MPI_Request* r) {
    check_mpi(MPI_Irecv(piece, count, MPI_BYTE, peer, tag, comm, r), op, "MPI_Irecv");
  });
}

OneMessage::OneMessage(int64_t bytes, const char* op) {
  if (bytes <= kMaxMessageBytes) {
    count_ = static_cast<int>(bytes);
    return;
  }
  MPI_Datatype piece = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_contiguous(static_cast<int>(kMaxMessageBytes), MPI_BYTE, &piece), op, "MPI_Type_contiguous");
  int lengths[2] = {static_cast<int>(bytes / kMaxMessageBytes), static_cast<int>(bytes % kMaxMessageBytes)};
  MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(bytes - bytes % kMaxMessageBytes)};
  MPI_Datatype types[2] = {piece, MPI_BYTE};
  const int rc = MPI_Type_create_struct(2, lengths, displacements, types, &type_);
  MPI_Type_free(&piece);
  check_mpi(rc, op, "MPI_Type_create_struct");
  check_mpi(MPI_Type_commit(&type_), op, "MPI_Type_commit");
  count_ = 1;
}

OneMessage::~OneMessage() {
  if (type_ != MPI_BYTE) MPI_Type_free(&type_);
}

std::string rank_name(int r) { return detail::concat("rank ", r); }

}  // namespace scatterx::dist

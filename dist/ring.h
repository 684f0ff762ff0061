// The host rings over point-to-point messages: the pipelined reduce-scatter
// (which on one host folds out of shared memory instead, shm_transport.h)
// and the all-gather, whose parts all_reduce interleaves with the
// reduce-scatter.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/internal.h"
#include "ops/dtype.h"
#include "ops/reduce.h"

namespace scatterx::dist {

// Reduce-scatter on host memory. `src` is this rank's contribution (every
// block); on return out holds block `rank` reduced over all ranks (out may
// be that block of src). `mean_count` > 0 divides at the end (avg).
// `on_done(begin, len)`, when given, is called for each finished chunk of
// out (element offsets), in order, as soon as it is final. On one host with
// blocks of at least kShmMinBlockBytes it runs through the shared-memory
// segment, else as the pipelined ring.
void host_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out, const Blocks& blocks,
                         DType dtype, Reduce reduce, int64_t mean_count, const char* op,
                         const ChunkDone& on_done = nullptr);

// Ring all-gather over `buf`: step s passes block rank - s right and
// receives block rank - s - 1 from the left, chunk by chunk, forwarding each
// chunk as soon as it arrived. In three parts, so that all_reduce can send
// its own block chunk by chunk while the reduce-scatter still finishes it:
//   RingAllGather ag(...);        posts every receive
//   ag.send_own(begin, len);      this rank's block, in `chunk` pieces, in order
//   ag.finish();                  forwards and waits
class RingAllGather {
 public:
  RingAllGather(Communicator::State& s, Waiter& w, int tag, char* buf, const Blocks& blocks, int64_t es, int64_t chunk,
                const char* op);

  // Sends elements [begin, begin + len) of this rank's block from `from`
  // (a contiguous copy of the block, or the block in buf itself). len is
  // `chunk` except for the block's last piece.
  void send_own(const char* from, int64_t begin, int64_t len);

  void finish();

 private:
  struct Piece {
    int step;
    char* data;
    int64_t bytes;
    size_t first_req;
    size_t n_req;
  };
  Communicator::State& s_;
  Waiter& w_;
  int tag_;
  int64_t es_;
  int64_t chunk_;
  const char* op_;
  int right_ = 0;
  int left_ = 0;
  std::vector<Piece> pieces_;
  std::vector<MPI_Request> recv_req_;
  std::vector<MPI_Request> send_req_;
};

// The whole all-gather; `own`, when given, holds this rank's block
// (contiguous): it is sent from there and copied into buf while the
// messages are on the wire.
void ring_all_gather(Communicator::State& s, Waiter& w, int tag, char* buf, const Blocks& blocks, int64_t es,
                     const char* op, const char* own = nullptr);

}  // namespace scatterx::dist

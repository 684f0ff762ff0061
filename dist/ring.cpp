// The host rings (ring.h): the reduce-scatter ring, chunks folded as they
// arrive, and the all-gather ring, chunks forwarded as they arrive.
#include "dist/ring.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "dist/p2p.h"
#include "dist/shm_transport.h"
#include "dist/staging.h"
#include "ops/runtime/combine.h"

namespace scatterx::dist {

namespace {

// Pipelined ring reduce-scatter (ws > 1). Step s (1 <= s < ws) receives
// from the left the partial of block rank - s - 1 (s contributions), folds
// in this rank's own values and passes it right; the last step folds block
// `rank` into out. Chunks (of `chunk` elements) are folded as they arrive,
// while the later ones are still on the wire.
void ring_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out, const Blocks& blocks,
                         DType dtype, Reduce reduce, int64_t mean_count, const char* op, int64_t chunk,
                         const ChunkDone& on_done) {
  const int ws = s.size;
  const int r = s.rank;
  const int64_t es = element_size(dtype);
  const int right = mod(r + 1, ws);
  const int left = mod(r - 1, ws);
  auto block_at = [&](int step) { return mod(r - step - 1, ws); };

  const std::vector<RingPiece> pieces = ring_pieces(blocks, r, ws, chunk);
  const size_t n_pieces = pieces.size();
  size_t n_middle = 0;  // pieces of steps 1 .. ws-2, which are forwarded
  while (n_middle < n_pieces && pieces[n_middle].step < ws - 1) ++n_middle;

  // The forwarded partials (steps 1 .. ws-2) need their own memory until
  // their send completes: one buffer for all of them. The last step's
  // chunks are folded into out at once, so they cycle through a few slots
  // that stay in cache (the received bytes are never written back to memory).
  int64_t middle_elems = 0;
  std::vector<int64_t> middle_offset(n_middle);
  for (size_t i = 0; i < n_middle; ++i) {
    middle_offset[i] = middle_elems;
    middle_elems += pieces[i].len;
  }
  constexpr size_t kSlots = 8;
  Scratch middle(middle_elems * es, s);
  Scratch slots(static_cast<int64_t>(kSlots) * chunk * es, s);
  auto buffer_of = [&](size_t i) {
    return i < n_middle ? middle.data() + middle_offset[i] * es : slots.data() + ((i - n_middle) % kSlots) * chunk * es;
  };

  // Receives: every forwarded piece at once, then the last step's pieces as
  // slots free up (posting order is the order of arrival either way).
  std::vector<MPI_Request> recv_req(n_pieces, MPI_REQUEST_NULL);
  auto post_piece = [&](size_t i) {
    std::vector<MPI_Request> one;
    post_recv(buffer_of(i), pieces[i].len * es, left, tag, s.comm, one, op);
    recv_req[i] = one[0];
  };
  size_t posted = 0;
  for (; posted < std::min(n_pieces, n_middle + kSlots); ++posted) post_piece(posted);

  // Step 0: this rank's own values of block rank - 1, straight from src.
  std::vector<MPI_Request> send_req;
  {
    const size_t b = static_cast<size_t>(block_at(0));
    for_each_chunk(blocks.length[b], chunk, [&](int64_t begin, int64_t len) {
      post_send(src + (blocks.offset[b] + begin) * es, len * es, right, tag, s.comm, send_req, op);
    });
  }
  for (size_t i = 0; i < n_pieces; ++i) {
    const RingPiece& p = pieces[i];
    w.wait(recv_req[i], rank_name(left));
    const size_t b = static_cast<size_t>(block_at(p.step));
    char* partial = buffer_of(i);
    const char* own = src + (blocks.offset[b] + p.begin) * es;
    if (i < n_middle) {
      detail::combine_cpu(partial, own, partial, p.len, dtype, reduce, 0, op);
      post_send(partial, p.len * es, right, tag, s.comm, send_req, op);
    } else {
      detail::combine_cpu(out + p.begin * es, own, partial, p.len, dtype, reduce, mean_count, op);
      if (posted < n_pieces) post_piece(posted++);  // reuses the slot just consumed
      if (on_done) on_done(p.begin, p.len);
    }
  }
  w.wait_all(static_cast<int>(send_req.size()), send_req.data(), rank_name(right));
}

}  // namespace

void host_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out, const Blocks& blocks,
                         DType dtype, Reduce reduce, int64_t mean_count, const char* op, const ChunkDone& on_done) {
  const int64_t es = element_size(dtype);
  if (s.size == 1) {
    const int64_t n = blocks.length[0];
    if (out != src) std::memmove(out, src, static_cast<size_t>(n * es));
    if (mean_count > 0) detail::finalize_mean_cpu(out, n, dtype, 1, op);
    if (on_done) on_done(0, n);
    return;
  }
  // One request per chunk: chunks stay below MPI's int count.
  const int64_t chunk = std::max<int64_t>(1, std::min(s.chunk_bytes, kMaxMessageBytes) / es);
  // Every rank takes the same branch: the block sizes agree (the arguments
  // do) and shm_ready's verdict is collective.
  if (blocks.length[0] * es >= kShmMinBlockBytes && shm_ready(s, w, op)) {
    shm_reduce_scatter(s, w, tag, src, out, blocks, dtype, reduce, mean_count, op, chunk, on_done);
    return;
  }
  ring_reduce_scatter(s, w, tag, src, out, blocks, dtype, reduce, mean_count, op, chunk, on_done);
}

RingAllGather::RingAllGather(Communicator::State& s, Waiter& w, int tag, char* buf, const Blocks& blocks, int64_t es,
                             int64_t chunk, const char* op)
    : s_(s), w_(w), tag_(tag), es_(es), chunk_(chunk), op_(op) {
  const int ws = s.size;
  if (ws == 1) return;
  right_ = mod(s.rank + 1, ws);
  left_ = mod(s.rank - 1, ws);
  for (int step = 0; step < ws - 1; ++step) {
    const size_t b = static_cast<size_t>(mod(s.rank - step - 1, ws));
    for_each_chunk(blocks.length[b], chunk, [&](int64_t begin, int64_t len) {
      char* dst = buf + (blocks.offset[b] + begin) * es;
      const size_t first = recv_req_.size();
      post_recv(dst, len * es, left_, tag, s.comm, recv_req_, op);
      pieces_.push_back({step, dst, len * es, first, recv_req_.size() - first});
    });
  }
}

void RingAllGather::send_own(const char* from, int64_t begin, int64_t len) {
  if (s_.size == 1) return;
  for_each_chunk(len, chunk_, [&](int64_t c, int64_t n) {
    post_send(from + (begin + c) * es_, n * es_, right_, tag_, s_.comm, send_req_, op_);
  });
}

void RingAllGather::finish() {
  const int ws = s_.size;
  if (ws == 1) return;
  for (const Piece& p : pieces_) {
    if (p.step == ws - 2) break;  // the last step's blocks are not forwarded
    w_.wait_all(static_cast<int>(p.n_req), recv_req_.data() + p.first_req, rank_name(left_));
    post_send(p.data, p.bytes, right_, tag_, s_.comm, send_req_, op_);
  }
  w_.wait_all(static_cast<int>(recv_req_.size()), recv_req_.data(), rank_name(left_));
  w_.wait_all(static_cast<int>(send_req_.size()), send_req_.data(), rank_name(right_));
}

void ring_all_gather(Communicator::State& s, Waiter& w, int tag, char* buf, const Blocks& blocks, int64_t es,
                     const char* op, const char* own) {
  const size_t me = static_cast<size_t>(s.rank);
  char* slot = buf + blocks.offset[me] * es;
  // Chunks only serve forwarding; with two ranks nothing is forwarded, so
  // each block goes as one message (fewer messages to match).
  const int64_t chunk = s.size <= 2 ? std::numeric_limits<int64_t>::max() : std::max<int64_t>(1, s.chunk_bytes / es);
  RingAllGather ag(s, w, tag, buf, blocks, es, chunk, op);
  ag.send_own(own != nullptr ? own : slot, 0, blocks.length[me]);
  if (own != nullptr && own != slot) std::memcpy(slot, own, static_cast<size_t>(blocks.length[me] * es));
  ag.finish();
}

}  // namespace scatterx::dist

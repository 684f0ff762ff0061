// The device paths of device.h: an endpoint that moves chunks between
// device memory and peers, through staging slots or directly, and the
// collectives' algorithms built on it. (The queues and the route choice:
// device_queue.cpp.)
#include "dist/device.h"

#include <mpi.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ops/error.h"

namespace scatterx::dist {

namespace {

using detail::concat;

// ---- an endpoint on device memory -------------------------------------------------

constexpr int kStagingSlots = 4;  // send slots; receive slots: at least this many

bool test(MPI_Request& request, const char* op) {
  if (request == MPI_REQUEST_NULL) return true;
  int done = 0;
  check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op, "MPI_Test");
  return done != 0;
}

bool test_all(std::vector<MPI_Request>& requests, const char* op) {
  for (MPI_Request& r : requests)
    if (!test(r, op)) return false;
  requests.clear();
  return true;
}

// Chunks between device memory and peers. send() never blocks: messages
// leave in call order, each after the device work queued before the call
// (staged: its copy into a free send slot is queued once one frees up).
// Incoming chunks are received in the order of `incoming` and land at their
// device address. Every wait polls everything, and a slot is only ever held
// for device copies or for peers posting receives, never for this rank's
// own progress, so bounded slots cannot deadlock: a receive slot frees once
// its chunk was copied out (nothing is forwarded from it), a send slot once
// its peers posted their receives, which they do as their copies land.
class DeviceEndpoint {
 public:
  struct Incoming {
    char* device;
    int64_t bytes;
    int source;
  };

  DeviceEndpoint(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, std::vector<Incoming> incoming,
                 int sources, const char* op)
      : s_(s),
        w_(w),
        q_(*route.queue),
        staged_(route.transport == DeviceTransport::Staged),
        tag_(tag),
        incoming_(std::move(incoming)),
        op_(op) {
    if (staged_) {
      // Two receive slots per source keep every source's next chunk posted.
      const int receive_slots = std::max(kStagingSlots, 2 * sources);
      const int64_t slot_bytes = route.chunk_bytes;
      staging_ = q_.staging_buffer((kStagingSlots + receive_slots) * slot_bytes);
      send_slots_.resize(kStagingSlots);
      recv_slots_.resize(static_cast<size_t>(receive_slots));
      char* at = staging_.get();
      for (SendSlot& slot : send_slots_) slot.host = std::exchange(at, at + slot_bytes);
      for (RecvSlot& slot : recv_slots_) slot.host = std::exchange(at, at + slot_bytes);
      slot_of_.assign(incoming_.size(), -1);
      post_receives();
    } else {
      // MPI writes the landing memory outside stream order: work queued
      // earlier that still reads it (or a stream-ordered allocation's
      // previous user) must be done first.
      const uint64_t before = q_.mark();
      wait_for([&] { return q_.reached(before); }, "the device");
      direct_recv_.assign(incoming_.size(), MPI_REQUEST_NULL);
      for (size_t i = 0; i < incoming_.size(); ++i) {
        check_mpi(MPI_Irecv(incoming_[i].device, static_cast<int>(incoming_[i].bytes), MPI_BYTE, incoming_[i].source,
                            tag_, s_.comm, &direct_recv_[i]),
                  op_, "MPI_Irecv");
      }
    }
  }

  DeviceEndpoint(const DeviceEndpoint&) = delete;
  DeviceEndpoint& operator=(const DeviceEndpoint&) = delete;

  // Unwinding (a timeout, a device error): nothing may still write into the
  // slots or the landing buffers once they are gone.
  ~DeviceEndpoint() {
    if (finished_) return;
    auto cancel = [](MPI_Request& r) {
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    };
    for (SendSlot& slot : send_slots_)
      for (MPI_Request& r : slot.requests) cancel(r);
    for (RecvSlot& slot : recv_slots_) cancel(slot.request);
    for (MPI_Request& r : direct_recv_) cancel(r);
    for (MPI_Request& r : direct_send_) cancel(r);
    try {
      q_.synchronize();
    } catch (const Error&) {
      // already failing; the first error is the one reported
    }
    // A cancelled message may still land after a timeout: a broken
    // communicator's slots are never handed out again.
    if (s_.broken && staging_) {
      static std::mutex mutex;
      static std::vector<std::shared_ptr<char>> quarantine;
      std::lock_guard<std::mutex> lock(mutex);
      quarantine.push_back(staging_);
    }
  }

  // Sends `bytes` at `device` to each of `peers` once the device work queued
  // so far ran.
  void send(const char* device, int64_t bytes, std::vector<int> peers) {
    outgoing_.push_back({device, bytes, std::move(peers), staged_ ? 0 : q_.mark(), -1, 0});
    progress();
  }

  // The next incoming chunk: waits for it and (staged) queues its copy to
  // the device; returns its device address, which work queued from now on
  // sees filled.
  char* receive() {
    const size_t i = next_receive_++;
    const Incoming& in = incoming_[i];
    const std::string from = concat("rank ", in.source);
    if (!staged_) {
      wait_for([&] { return test(direct_recv_[i], op_); }, from);
      return in.device;
    }
    wait_for([&] { return slot_of_[i] >= 0 && test(recv_slots_[static_cast<size_t>(slot_of_[i])].request, op_); },
             from);
    RecvSlot& slot = recv_slots_[static_cast<size_t>(slot_of_[i])];
    q_.to_device(in.device, slot.host, in.bytes);
    slot.copied = q_.mark();
    slot.consumed = true;
    progress();
    return in.device;
  }

  // Waits until every message completed and no copy still reads a slot.
  void finish() {
    wait_for(
        [&] {
          if (!outgoing_.empty()) return false;
          for (SendSlot& slot : send_slots_)
            if (!test_all(slot.requests, op_)) return false;
          for (RecvSlot& slot : recv_slots_)
            if (!q_.reached(slot.copied)) return false;
          for (MPI_Request& r : direct_send_)
            if (!test(r, op_)) return false;
          return true;
        },
        "the peers' receives");
    finished_ = true;
  }

 private:
  struct SendSlot {
    char* host = nullptr;
    bool assigned = false;              // holds (or is being filled with) a message not yet posted
    std::vector<MPI_Request> requests;  // its message's sends, one per peer
  };
  struct RecvSlot {
    char* host = nullptr;
    MPI_Request request = MPI_REQUEST_NULL;
    bool consumed = true;  // receive() took its chunk
    uint64_t copied = 0;   // ticket of the chunk's copy to the device
  };
  struct Outgoing {
    const char* device;
    int64_t bytes;
    std::vector<int> peers;
    uint64_t ready;   // direct: the device work before send()
    int slot;         // staged: its send slot, once it has one
    uint64_t copied;  // staged: ticket of its copy into the slot
  };

  void wait_for(const std::function<bool()>& ready, const std::string& what) {
    w_.poll(
        [&] {
          progress();
          return ready();
        },
        what);
  }

  int free_send_slot() {
    for (size_t k = 0; k < send_slots_.size(); ++k) {
      SendSlot& slot = send_slots_[k];
      if (!slot.assigned && test_all(slot.requests, op_)) return static_cast<int>(k);
    }
    return -1;
  }

  void post(const char* data, const Outgoing& o, std::vector<MPI_Request>& requests) {
    for (int peer : o.peers) {
      requests.emplace_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Isend(data, static_cast<int>(o.bytes), MPI_BYTE, peer, tag_, s_.comm, &requests.back()), op_,
                "MPI_Isend");
    }
  }

  // Stages waiting messages into free slots, posts (in order) those whose
  // bytes are ready, and reposts the receive slots whose chunk was copied out.
  void progress() {
    if (staged_) {
      for (Outgoing& o : outgoing_) {
        if (o.slot >= 0) continue;
        const int k = free_send_slot();
        if (k < 0) break;
        SendSlot& slot = send_slots_[static_cast<size_t>(k)];
        q_.to_host(slot.host, o.device, o.bytes);
        o.copied = q_.mark();
        o.slot = k;
        slot.assigned = true;
      }
    }
    while (!outgoing_.empty()) {
      const Outgoing& o = outgoing_.front();
      if (staged_) {
        if (o.slot < 0 || !q_.reached(o.copied)) break;
        SendSlot& slot = send_slots_[static_cast<size_t>(o.slot)];
        post(slot.host, o, slot.requests);
        slot.assigned = false;
      } else {
        if (!q_.reached(o.ready)) break;
        std::vector<MPI_Request> requests;
        post(o.device, o, requests);
        direct_send_.insert(direct_send_.end(), requests.begin(), requests.end());
      }
      outgoing_.pop_front();
    }
    if (staged_) post_receives();
  }

  void post_receives() {
    while (next_post_ < incoming_.size()) {
      RecvSlot& slot = recv_slots_[next_slot_];
      if (!slot.consumed || !q_.reached(slot.copied)) return;
      const Incoming& in = incoming_[next_post_];
      check_mpi(MPI_Irecv(slot.host, static_cast<int>(in.bytes), MPI_BYTE, in.source, tag_, s_.comm, &slot.request),
                op_, "MPI_Irecv");
      slot.consumed = false;
      slot_of_[next_post_++] = static_cast<int>(next_slot_);
      next_slot_ = (next_slot_ + 1) % recv_slots_.size();
    }
  }

  Communicator::State& s_;
  Waiter& w_;
  DeviceQueue& q_;
  const bool staged_;
  const int tag_;
  std::vector<Incoming> incoming_;
  const char* op_;

  std::shared_ptr<char> staging_;
  std::vector<SendSlot> send_slots_;
  std::vector<RecvSlot> recv_slots_;
  std::vector<int> slot_of_;  // incoming chunk -> its receive slot (-1: not posted yet)
  size_t next_post_ = 0;
  size_t next_slot_ = 0;  // slots are reused in turn, so chunks are posted in order
  size_t next_receive_ = 0;
  std::deque<Outgoing> outgoing_;
  std::vector<MPI_Request> direct_recv_;
  std::vector<MPI_Request> direct_send_;
  bool finished_ = false;
};

// The items of every list, interleaved: item 0 of each list in turn, then
// item 1, ... (lists of different lengths drop out as they end).
template <typename T>
std::vector<T> round_robin(const std::vector<std::vector<T>>& lists) {
  std::vector<T> out;
  for (size_t c = 0;; ++c) {
    const size_t before = out.size();
    for (const auto& list : lists)
      if (c < list.size()) out.push_back(list[c]);
    if (out.size() == before) return out;
  }
}

}  // namespace

void device_ring_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, const char* src,
                                char* out, const Blocks& blocks, DType dtype, Reduce reduce, int64_t mean_count,
                                const char* op) {
  DeviceQueue& q = *route.queue;
  const int ws = s.size;
  const int r = s.rank;
  const int64_t es = element_size(dtype);
  if (ws == 1) {
    const int64_t n = blocks.length[0];
    q.copy(out, src, n * es);
    if (mean_count > 0) q.finalize_mean(out, n, dtype, 1);
    return;
  }
  const int64_t chunk = std::max<int64_t>(1, route.chunk_bytes / es);
  auto block_at = [&](int step) { return static_cast<size_t>(mod(r - step - 1, ws)); };

  // The host ring's pieces, each landing in its own stretch of device scratch.
  const std::vector<RingPiece> pieces = ring_pieces(blocks, r, ws, chunk);
  int64_t landing_bytes = 0;
  for (const RingPiece& p : pieces) landing_bytes += p.len * es;
  const std::shared_ptr<char> landing = q.device_buffer(landing_bytes);
  const int left = mod(r - 1, ws);
  const std::vector<int> right{mod(r + 1, ws)};
  std::vector<DeviceEndpoint::Incoming> incoming;
  int64_t at = 0;
  for (const RingPiece& p : pieces) {
    incoming.push_back({landing.get() + at, p.len * es, left});
    at += p.len * es;
  }

  DeviceEndpoint ring(s, w, tag, route, std::move(incoming), 1, op);
  {
    const size_t b = block_at(0);
    for_each_chunk(blocks.length[b], chunk, [&](int64_t begin, int64_t len) {
      ring.send(src + (blocks.offset[b] + begin) * es, len * es, right);
    });
  }
  for (const RingPiece& p : pieces) {
    char* partial = ring.receive();
    const size_t b = block_at(p.step);
    const char* own = src + (blocks.offset[b] + p.begin) * es;
    if (p.step < ws - 1) {
      q.combine(partial, own, partial, p.len, dtype, reduce, 0);
      ring.send(partial, p.len * es, right);
    } else {
      q.combine(out + p.begin * es, own, partial, p.len, dtype, reduce, mean_count);
    }
  }
  ring.finish();
}

void device_all_gather(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, char* buf,
                       const Blocks& blocks, int64_t element_size, const char* op) {
  const int ws = s.size;
  if (ws == 1) return;
  const int64_t es = element_size;
  const int64_t chunk = std::max<int64_t>(1, route.chunk_bytes / es);
  // Chunk c of every peer's block, for c = 0, 1, ..., peers taken from the
  // left neighbour on (the order in which they tend to send), each landing
  // in its place in buf.
  std::vector<std::vector<DeviceEndpoint::Incoming>> by_peer;
  std::vector<int> peers;
  for (int i = 1; i < ws; ++i) {
    const int p = mod(s.rank - i, ws);
    const size_t b = static_cast<size_t>(p);
    std::vector<DeviceEndpoint::Incoming> chunks;
    for_each_chunk(blocks.length[b], chunk, [&](int64_t begin, int64_t len) {
      chunks.push_back({buf + (blocks.offset[b] + begin) * es, len * es, p});
    });
    by_peer.push_back(std::move(chunks));
    peers.push_back(mod(s.rank + i, ws));
  }
  std::vector<DeviceEndpoint::Incoming> incoming = round_robin(by_peer);
  const size_t n = incoming.size();
  DeviceEndpoint endpoint(s, w, tag, route, std::move(incoming), ws - 1, op);
  const size_t me = static_cast<size_t>(s.rank);
  for_each_chunk(blocks.length[me], chunk, [&](int64_t begin, int64_t len) {
    endpoint.send(buf + (blocks.offset[me] + begin) * es, len * es, peers);
  });
  for (size_t i = 0; i < n; ++i) endpoint.receive();
  endpoint.finish();
}

void device_exchange(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route,
                     const std::vector<const char*>& send, const std::vector<int64_t>& send_bytes,
                     const std::vector<char*>& recv, const std::vector<int64_t>& recv_bytes, const char* op) {
  const int ws = s.size;
  const size_t me = static_cast<size_t>(s.rank);
  // Receives: chunk c of every peer's share, peers from the left on; sends:
  // chunk c to every peer, from the right on (so that not every rank
  // starts with rank 0). Empty shares send nothing, as on the host.
  auto chunks_of = [&](int64_t bytes, auto&& f) {
    for (int64_t c = 0; c < bytes; c += route.chunk_bytes) f(c, std::min(route.chunk_bytes, bytes - c));
  };
  std::vector<std::vector<DeviceEndpoint::Incoming>> by_peer;
  struct Outgoing {
    const char* device;
    int64_t bytes;
    int peer;
  };
  std::vector<std::vector<Outgoing>> out_by_peer;
  for (int i = 1; i < ws; ++i) {
    const int from = mod(s.rank - i, ws);
    std::vector<DeviceEndpoint::Incoming> chunks;
    chunks_of(recv_bytes[static_cast<size_t>(from)], [&](int64_t begin, int64_t len) {
      chunks.push_back({recv[static_cast<size_t>(from)] + begin, len, from});
    });
    by_peer.push_back(std::move(chunks));
    const int dest = mod(s.rank + i, ws);
    std::vector<Outgoing> outs;
    chunks_of(send_bytes[static_cast<size_t>(dest)], [&](int64_t begin, int64_t len) {
      outs.push_back({send[static_cast<size_t>(dest)] + begin, len, dest});
    });
    out_by_peer.push_back(std::move(outs));
  }
  std::vector<DeviceEndpoint::Incoming> incoming = round_robin(by_peer);
  const size_t n = incoming.size();
  DeviceEndpoint endpoint(s, w, tag, route, std::move(incoming), ws - 1, op);
  if (send_bytes[me] > 0) route.queue->copy(recv[me], send[me], send_bytes[me]);
  for (const Outgoing& o : round_robin(out_by_peer)) endpoint.send(o.device, o.bytes, {o.peer});
  for (size_t i = 0; i < n; ++i) endpoint.receive();
  endpoint.finish();
}

void device_broadcast(Communicator::State& s, Waiter& w, int tag, const DeviceRoute& route, char* buf, int64_t bytes,
                      int root, const char* op) {
  const int ws = s.size;
  if (ws == 1 || bytes == 0) return;
  std::vector<DeviceEndpoint::Incoming> incoming;
  std::vector<int> others;
  for (int64_t c = 0; c < bytes; c += route.chunk_bytes) {
    if (s.rank != root) incoming.push_back({buf + c, std::min(route.chunk_bytes, bytes - c), root});
  }
  for (int i = 1; i < ws; ++i) others.push_back(mod(root + i, ws));
  const size_t n = incoming.size();
  DeviceEndpoint endpoint(s, w, tag, route, std::move(incoming), 1, op);
  if (s.rank == root) {
    for (int64_t c = 0; c < bytes; c += route.chunk_bytes)
      endpoint.send(buf + c, std::min(route.chunk_bytes, bytes - c), others);
  }
  for (size_t i = 0; i < n; ++i) endpoint.receive();
  endpoint.finish();
}

}  // namespace scatterx::dist

// The pairwise exchange with its control in the segment's latency-path slots
// (pairwise.h): one arrival of every rank in place of the records' and the
// small shares' MPI messages, and a second in place of the "done" notes.
#include <cstring>
#include <string>
#include <vector>

#include "dist/p2p.h"
#include "dist/pairwise.h"
#include "dist/shm_transport.h"
#include "dist/single_copy.h"
#include "ops/runtime/stream_copy.h"

namespace scatterx::dist {

namespace {

// What a rank publishes at the start of its slot about its pair with each
// peer p (the entries, by peer, then the inline shares).
struct PairEntry {
  int64_t sends = 0;       // bytes to p
  int64_t expects = 0;     // bytes from p
  int64_t inline_at = -1;  // where in this slot the bytes for p lie, or -1
  SingleCopyRecord offer;  // where p reads them out of this rank (offer.pid != 0), or nothing
};

// Every rank sees every entry, so a pair whose two ends disagree on its size
// makes every rank raise the same MismatchError, before any byte moves.
void check_pairs(const std::vector<const PairEntry*>& entries, int ws, const char* op) {
  for (int q = 0; q < ws; ++q) {
    for (int p = 0; p < ws; ++p) {
      if (p == q) continue;
      const int64_t sent = entries[static_cast<size_t>(q)][p].sends;
      const int64_t expected = entries[static_cast<size_t>(p)][q].expects;
      if (sent != expected)
        throw MismatchError(
            detail::concat(op, ": rank ", q, " sends ", sent, " bytes to rank ", p, ", which expects ", expected));
    }
  }
}

// Fills this rank's `slot`: an entry for each peer (what it sends, what it
// expects, where its share lies), then the shares that fit the slot's
// room, inline. Returns whether any went by non-temporal stores (then the
// caller fences before it arrives).
bool publish_entries(const Communicator::State& s, char* slot, const std::vector<const char*>& send,
                     const std::vector<int64_t>& send_bytes, const std::vector<int64_t>& recv_bytes) {
  const int ws = s.size;
  auto* mine = reinterpret_cast<PairEntry*>(slot);
  int64_t used = (static_cast<int64_t>(sizeof(PairEntry)) * ws + 63) / 64 * 64;
  bool streamed = false;
  for (int i = 1; i < ws; ++i) {
    const size_t to = static_cast<size_t>(mod(s.rank + i, ws));
    PairEntry e;
    e.sends = send_bytes[to];
    e.expects = recv_bytes[to];
    const int64_t b = e.sends;
    if (sends_by_single_copy(s, send[to], b)) {
      e.offer = single_copy_record(send[to], b);
    } else if (b > 0 && b <= s.shm->small_slot_bytes - used) {
      e.inline_at = used;
      streamed |= write_small_slot(slot + used, send[to], b);
      used += (b + 63) / 64 * 64;
    }
    mine[to] = e;
  }
  PairEntry own;
  own.sends = send_bytes[static_cast<size_t>(s.rank)];
  own.expects = recv_bytes[static_cast<size_t>(s.rank)];
  mine[s.rank] = own;
  return streamed;
}

static_assert(kShmMaxRanks * sizeof(PairEntry) <= kMinSmallSlotBytes, "every rank's entries fit the smallest slot");

}  // namespace

void exchange_pairwise_by_slots(Communicator::State& s, Waiter& w, int tag, const std::vector<const char*>& send,
                                const std::vector<int64_t>& send_bytes, const std::vector<char*>& recv,
                                const std::vector<int64_t>& recv_bytes, const char* op, const char* what) {
  const ShmTransport& t = *s.shm;
  const int ws = s.size;
  const int r = s.rank;
  const size_t me = static_cast<size_t>(r);
  // This rank's slot of its next latency-path call, free to write now (see
  // shm_small_arrive).
  char* slot = t.small_slot(r, t.small_calls + 1);
  const auto* mine = reinterpret_cast<const PairEntry*>(slot);
  if (publish_entries(s, slot, send, send_bytes, recv_bytes)) detail::streaming_store_fence();
  const SlotCall records{SlotCall::kPairs, 0, static_cast<int64_t>(sizeof(PairEntry)) * ws};
  const uint64_t call = shm_small_arrive(s, w, records, slot, op);

  std::vector<const PairEntry*> entries(static_cast<size_t>(ws));
  bool any_offer = false;
  for (int q = 0; q < ws; ++q) {
    entries[static_cast<size_t>(q)] = reinterpret_cast<const PairEntry*>(t.small_slot(q, call));
    for (int p = 0; p < ws; ++p) any_offer |= p != q && entries[static_cast<size_t>(q)][p].offer.pid != 0;
  }
  check_pairs(entries, ws, op);

  // The shares that go as MPI messages, posted first so that they move
  // while this rank copies the others.
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  for (int i = 1; i < ws; ++i) {
    const size_t from = static_cast<size_t>(mod(r - i, ws));
    const PairEntry& e = entries[from][me];
    if (e.offer.pid == 0 && e.inline_at < 0 && e.sends > 0)
      post_recv(recv[from], e.sends, static_cast<int>(from), tag, s.comm, reqs, op);
    peers.resize(reqs.size(), static_cast<int>(from));
  }
  for (int i = 1; i < ws; ++i) {
    const size_t to = static_cast<size_t>(mod(r + i, ws));
    const PairEntry& e = mine[to];
    if (e.offer.pid == 0 && e.inline_at < 0 && e.sends > 0)
      post_send(send[to], e.sends, static_cast<int>(to), tag, s.comm, reqs, op);
    peers.resize(reqs.size(), static_cast<int>(to));
  }
  if (send_bytes[me] > 0 && recv[me] != send[me]) std::memmove(recv[me], send[me], static_cast<size_t>(send_bytes[me]));
  std::string error;
  for (int i = 1; i < ws; ++i) {
    const size_t from = static_cast<size_t>(mod(r - i, ws));
    const PairEntry& e = entries[from][me];
    if (e.inline_at >= 0) {
      // The entry came from a peer: copy nothing from outside its slot.
      if (e.inline_at > t.small_slot_bytes || e.sends > t.small_slot_bytes - e.inline_at) {
        if (error.empty()) error = detail::concat(op, ": rank ", from, "'s inline share lies outside its slot");
        continue;
      }
      std::memcpy(recv[from], t.small_slot(static_cast<int>(from), call) + e.inline_at, static_cast<size_t>(e.sends));
    } else if (e.offer.pid != 0) {
      const std::string why = single_copy_read(e.offer, 0, recv[from], e.sends);
      if (!why.empty() && error.empty())
        error =
            detail::concat(op, ": reading ", e.sends, " bytes out of rank ", from, " (process_vm_readv) failed: ", why);
    }
  }
  // Every rank saw every offer: when there was one, no rank returns (and
  // lets its caller reuse the input) before every reader is done.
  if (any_offer) shm_small_arrive(s, w, {SlotCall::kPairsDone, 0, 0}, nullptr, op);
  w.wait_all(reqs, peers, what);
  if (!error.empty()) throw Error(error);
}

}  // namespace scatterx::dist

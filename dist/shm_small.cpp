// The latency paths on one host: all_reduce's (latency_all_reduce.h) and the
// small all-gathers and broadcasts (shm_transport.h), through slots and call
// numbers in the shared segment, no MPI message.
#include <sched.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "dist/latency_all_reduce.h"
#include "dist/shm_transport.h"
#include "ops/runtime/combine.h"
#include "ops/runtime/stream_copy.h"

namespace scatterx::dist {

namespace {

// Slots from this size on are written with non-temporal stores, unless
// SCATTERX_DIST_SHM_STREAM says otherwise. The peers read a slot right after
// it was written; on the project's 2-vCPU VM (cores that share no cache)
// a plain copy leaves its lines in the writer's cache, where each peer
// fetches them one by one, while streamed lines come from memory: 2 ranks,
// 4 KiB 3.7 -> 2.0 us, 64 KiB 46.8 -> 13.6 us, 256 KiB 141 -> 50 us
// (bench/RESULTS.md). Below 1 KiB the fence costs more than it saves.
constexpr int64_t kStreamingSlotBytes = 1024;

bool slot_streaming(int64_t bytes) {
  const int forced = forced_slot_streaming();
  return forced >= 0 ? forced == 1 : bytes >= kStreamingSlotBytes;
}

std::string late_ranks(const ShmTransport& t, int ws, uint64_t call) {
  std::vector<int> late;
  for (int q = 0; q < ws; ++q) {
    if (t.arrived[static_cast<size_t>(q)]->load(std::memory_order_acquire) < call) late.push_back(q);
  }
  std::string names = late.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < late.size(); ++i) names += (i ? ", " : "") + std::to_string(late[i]);
  return names;
}

// How a SlotCall reads in a MismatchError.
std::string describe(const SlotCall& c) {
  switch (c.kind) {
    case SlotCall::kAllReduce:
      return detail::concat("all_reduce (", dtype_name(static_cast<DType>(c.detail >> 8)), ", ",
                            reduce_name(static_cast<Reduce>(c.detail & 0xff)), (c.detail >> 16) ? ", mean" : "",
                            ") of ", c.bytes, " bytes");
    case SlotCall::kAllGather:
      return detail::concat("all_gather of ", c.bytes, " bytes per rank");
    case SlotCall::kBroadcast:
      return detail::concat("broadcast of ", c.bytes, " bytes from rank ", c.detail);
    case SlotCall::kFoldRecords:
    case SlotCall::kFoldNotes:
    case SlotCall::kFoldDone:
      return detail::concat(c.detail == 1 ? "single-copy all_reduce" : "single-copy reduce_scatter",
                            c.kind == SlotCall::kFoldRecords ? " (records)"
                            : c.kind == SlotCall::kFoldNotes ? " (notes)"
                                                             : " (done)");
    case SlotCall::kPairs:
    case SlotCall::kPairsDone:
      return detail::concat("pairwise exchange (all-to-all, or all-gather or broadcast of large messages)",
                            c.kind == SlotCall::kPairs ? "" : " (done)");
    default:
      return detail::concat("an unknown call (", c.kind, ")");
  }
}

// Every rank sees every rank's SlotCall, so every rank raises, with the
// same words.
void check_same_call(const ShmTransport& t, int ws, uint64_t call, const SlotCall& mine, const char* op) {
  const size_t parity = static_cast<size_t>(call % 2);
  bool same = true;
  for (int q = 0; q < ws && same; ++q) same = t.slot_calls[static_cast<size_t>(q)][parity] == mine;
  if (same) return;
  std::string calls;
  for (int q = 0; q < ws; ++q)
    calls += detail::concat(q ? "; " : "", "rank ", q, ": ", describe(t.slot_calls[static_cast<size_t>(q)][parity]));
  throw MismatchError(detail::concat(op,
                                     ": the ranks are in different collectives (or sizes, dtypes, roots) on "
                                     "the shared-memory latency path: ",
                                     calls));
}

}  // namespace

bool write_small_slot(char* slot, const char* data, int64_t bytes) {
  if (slot_streaming(bytes)) {
    detail::copy_streaming(slot, data, bytes);
    return true;
  }
  std::memcpy(slot, data, static_cast<size_t>(bytes));
  return false;
}

// Slot reuse: call k writes slot k % 2, last read by the peers in call
// k - 2. This rank waited in call k - 1 until every peer had arrived at
// k - 1, that is, had finished reading k - 2: no second round is needed.
// Every latency-path call of every kind counts, alike on every rank.
uint64_t shm_small_arrive(Communicator::State& s, Waiter& w, const SlotCall& what, const char* data, const char* op) {
  ShmTransport& t = *s.shm;
  const int ws = s.size;
  const int64_t bytes = what.bytes;
  const uint64_t call = ++t.small_calls;
  char* mine = t.small_slot(s.rank, call);
  t.slot_calls[static_cast<size_t>(s.rank)][call % 2] = what;
  // Nothing to stage when this rank shares nothing, the tensor is empty
  // (whose data may be null) or the caller wrote the slot itself.
  const bool stage = data != nullptr && bytes > 0 && data != mine;
  if (stage && write_small_slot(mine, data, bytes)) detail::streaming_store_fence();  // before the number is published
  t.arrived[static_cast<size_t>(s.rank)]->store(call, std::memory_order_release);

  const uint64_t patience = t.oversubscribed ? kSpinsBeforeYieldOversubscribed : kSpinsBeforeYield;
  uint64_t spins = 0;
  int waiting_for = 0;  // peers before this one have arrived
  const bool arrived = w.poll_until_deadline([&] {
    for (; waiting_for < ws; ++waiting_for) {
      if (t.arrived[static_cast<size_t>(waiting_for)]->load(std::memory_order_acquire) < call) {
        if (++spins > patience) sched_yield();
        return false;
      }
    }
    return true;
  });
  if (!arrived) s.fail_timeout(op, late_ranks(t, ws, call) + " (the shared-memory latency path's call numbers)");
  check_same_call(t, ws, call, what, op);
  return call;
}

void shm_all_reduce(Communicator::State& s, Waiter& w, char* data, int64_t n, DType dtype, Reduce reduce,
                    int64_t mean_count, const char* op) {
  const ShmTransport& t = *s.shm;
  const int ws = s.size;
  const uint32_t how =
      static_cast<uint32_t>(dtype) << 8 | static_cast<uint32_t>(reduce) | (mean_count > 0 ? uint32_t{1} << 16 : 0);
  const uint64_t call = shm_small_arrive(s, w, {SlotCall::kAllReduce, how, n * element_size(dtype)}, data, op);
  auto slot = [&](int q) { return t.small_slot(q, call); };
  // Every rank folds the same slots in the same order: the same bits.
  detail::combine_cpu(data, slot(0), slot(1), n, dtype, reduce, ws == 2 ? mean_count : 0, op);
  for (int q = 2; q < ws; ++q) {
    detail::combine_cpu(data, data, slot(q), n, dtype, reduce, q == ws - 1 ? mean_count : 0, op);
  }
}

void shm_small_all_gather(Communicator::State& s, Waiter& w, const char* own, char* out, int64_t bytes,
                          const char* op) {
  const ShmTransport& t = *s.shm;
  const uint64_t call = shm_small_arrive(s, w, {SlotCall::kAllGather, 0, bytes}, own, op);
  for (int q = 0; q < s.size; ++q) {
    char* to = out + static_cast<int64_t>(q) * bytes;
    const char* from = q == s.rank ? own : t.small_slot(q, call);
    if (bytes > 0 && to != from) std::memcpy(to, from, static_cast<size_t>(bytes));
  }
}

void shm_small_broadcast(Communicator::State& s, Waiter& w, char* data, int64_t bytes, int root, const char* op) {
  const bool is_root = s.rank == root;
  const uint64_t call =
      shm_small_arrive(s, w, {SlotCall::kBroadcast, static_cast<uint32_t>(root), bytes}, is_root ? data : nullptr, op);
  if (!is_root && bytes > 0) std::memcpy(data, s.shm->small_slot(root, call), static_cast<size_t>(bytes));
}

}  // namespace scatterx::dist

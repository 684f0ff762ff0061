// The shared-memory transport (shm_transport.h): mapping the segment, writing
// a slot (plainly or with non-temporal stores, chosen by timing the copies),
// and the reduce-scatter through the slots.
#include "dist/shm_transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dist/p2p.h"
#include "ops/runtime/combine.h"
#include "ops/runtime/knobs.h"
#include "ops/runtime/stream_copy.h"

namespace scatterx::dist {

namespace {

// Staging slots per (sender, receiver) pair (the segment holds ws *
// kShmSlots slots per rank).
constexpr int kShmSlots = 4;
// Room for a rank's latency-path call number and, on the same cache line
// (which its peers fetch anyway to see the number), the two SlotCalls: two
// cache lines, so that the adjacent-line prefetcher does not couple them with
// the slot after them.
constexpr int64_t kCallNumberBytes = 128;
constexpr int64_t kSlotCallsAt = 16;
static_assert(std::atomic<uint64_t>::is_always_lock_free, "call numbers are shared between processes");
static_assert(kSlotCallsAt + 2 * sizeof(SlotCall) <= 64, "the slot calls share the call number's line");

// ---- mapping the segment ----------------------------------------------------------

// An empty message to and from every peer, so that a missing rank times out
// here, named, instead of hanging in the blocking collective calls of the
// setup (or timing out there, where it is only "every rank").
void handshake(Communicator::State& s, Waiter& w, const char* op) {
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  std::vector<char> sink(static_cast<size_t>(s.size));
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    post_recv(&sink[static_cast<size_t>(p)], 0, p, kMetaTag, s.comm, reqs, op);
    post_send(&sink[static_cast<size_t>(s.rank)], 0, p, kMetaTag, s.comm, reqs, op);
    peers.resize(reqs.size(), p);
  }
  w.wait_all(reqs, peers, "shared-memory and single-copy setup");
}

// Rank 0's part: creates a segment of `bytes` under a fresh name (written to
// `name`); false when it could not.
bool create_segment(char (&name)[64], size_t bytes) {
  static std::atomic<unsigned> serial{0};
  std::snprintf(name, sizeof name, "/scatterx-%ld-%u", static_cast<long>(getpid()), serial++);
  const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return false;
  // posix_fallocate rather than ftruncate: a full /dev/shm must show
  // here, not as a SIGBUS when a page is first touched.
  const bool created = posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
  close(fd);
  if (!created) shm_unlink(name);
  return created;
}

}  // namespace

void ShmTransport::unmap() {
  if (base != nullptr) munmap(base, bytes);
  base = nullptr;
  staging.clear();
  arrived.clear();
  slot_calls.clear();
  small_slots.clear();
}

namespace {

// The buffers of shm_ready's nonblocking collectives. When a wait times out
// they are left allocated: MPI may still write them, since a collective's
// request may be neither cancelled nor freed (the communicator is unusable
// by then anyway).
struct SetupMessages {
  int mine = 0;
  int all = 0;
  char name[64] = {};
  std::vector<char> hosts;
};

constexpr int kHostBytes = 64;

// Every rank's flag, combined (min): the verdict every rank ends with.
bool agree(Communicator::State& s, Waiter& w, SetupMessages& m, int mine, const char* op) {
  m.mine = mine;
  MPI_Request req;
  check_mpi(MPI_Iallreduce(&m.mine, &m.all, 1, MPI_INT, MPI_MIN, s.comm, &req), op, "MPI_Iallreduce");
  wait_setup(w, req, op);
  return m.all != 0;
}

// Whether every rank runs on this host, on this rank's view (by host name;
// MPI_Comm_split_type itself blocks).
bool one_host(Communicator::State& s, Waiter& w, SetupMessages& m, const char* op) {
  char host[kHostBytes] = {};
  if (gethostname(host, sizeof host - 1) != 0) return false;
  m.hosts.assign(static_cast<size_t>(kHostBytes) * s.size, 0);
  MPI_Request req;
  check_mpi(MPI_Iallgather(host, kHostBytes, MPI_CHAR, m.hosts.data(), kHostBytes, MPI_CHAR, s.comm, &req), op,
            "MPI_Iallgather");
  wait_setup(w, req, op);
  for (int p = 0; p < s.size; ++p) {
    if (std::memcmp(&m.hosts[static_cast<size_t>(kHostBytes) * p], host, kHostBytes) != 0) return false;
  }
  return true;
}

// shm_ready's work: every collective in it is nonblocking and waited for
// against the timeout.
bool map_segment(Communicator::State& s, Waiter& w, SetupMessages& m, const char* op) {
  ShmTransport& t = *s.shm;
  // Both conditions agree across ranks (the options do, the host verdict is
  // collective), so every rank returns here or none does.
  const bool wanted = s.shared_memory && s.size > 1 && s.size <= kShmMaxRanks;
  if (!wanted || !ranks_on_one_host(s, w, op)) return false;
  t.slot_bytes = std::max<int64_t>(64, (s.chunk_bytes + 63) / 64 * 64);
  const int64_t segment = static_cast<int64_t>(s.size) * kShmSlots * t.slot_bytes;
  // After the staging areas, by rank: a call number on a line of its own,
  // then the two latency-path slots.
  t.small_slot_bytes = std::max<int64_t>(kMinSmallSlotBytes, (s.allreduce_small_bytes + 63) / 64 * 64);
  const int64_t small_area = kCallNumberBytes + 2 * t.small_slot_bytes;
  t.bytes = static_cast<size_t>((segment + small_area) * s.size);

  // Rank 0 creates the segment and sends its name along ("" when it could not).
  if (s.rank == 0 && !create_segment(m.name, t.bytes)) m.name[0] = 0;
  MPI_Request req;
  check_mpi(MPI_Ibcast(m.name, sizeof m.name, MPI_CHAR, 0, s.comm, &req), op, "MPI_Ibcast");
  wait_setup(w, req, op);
  if (m.name[0] == 0) return false;
  int ok = 0;
  const int fd = shm_open(m.name, O_RDWR, 0600);
  if (fd >= 0) {
    void* base = mmap(nullptr, t.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base != MAP_FAILED) {
      t.base = static_cast<char*>(base);
      ok = 1;
    }
  }
  bool all_mapped = false;
  try {
    all_mapped = agree(s, w, m, ok, op);
  } catch (...) {
    if (s.rank == 0) shm_unlink(m.name);
    throw;
  }
  if (s.rank == 0) shm_unlink(m.name);  // every rank holds its mapping (or gave up)
  if (!all_mapped) {
    t.unmap();
    return false;
  }
  t.staging.resize(static_cast<size_t>(s.size));
  for (int q = 0; q < s.size; ++q) t.staging[static_cast<size_t>(q)] = t.base + segment * q;
  t.slot_writers.assign(static_cast<size_t>(s.size), {});
  // The segment starts zeroed (posix_fallocate): every call number is 0.
  t.arrived.resize(static_cast<size_t>(s.size));
  t.slot_calls.resize(static_cast<size_t>(s.size));
  t.small_slots.resize(static_cast<size_t>(s.size));
  for (int q = 0; q < s.size; ++q) {
    char* area = t.base + segment * s.size + small_area * q;
    t.arrived[static_cast<size_t>(q)] = reinterpret_cast<std::atomic<uint64_t>*>(area);
    t.slot_calls[static_cast<size_t>(q)] = reinterpret_cast<SlotCall*>(area + kSlotCallsAt);
    t.small_slots[static_cast<size_t>(q)] = area + kCallNumberBytes;
  }
  return true;
}

}  // namespace

void wait_setup(Waiter& w, MPI_Request& req, const char* op) {
  w.poll(
      [&] {
        int done = 0;
        check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), op, "MPI_Test");
        return done != 0;
      },
      "every rank (shared-memory setup)");
}

bool all_ranks_agree(Communicator::State& s, Waiter& w, bool mine, const char* op) {
  auto m = std::make_unique<SetupMessages>();
  try {
    return agree(s, w, *m, mine ? 1 : 0, op);
  } catch (...) {
    (void)m.release();  // see SetupMessages
    throw;
  }
}

bool ranks_on_one_host(Communicator::State& s, Waiter& w, const char* op) {
  ShmTransport& t = *s.shm;
  if (t.one_host != 0) return t.one_host > 0;
  handshake(s, w, op);
  auto m = std::make_unique<SetupMessages>();
  try {
    const bool mine = one_host(s, w, *m, op);
    t.one_host = agree(s, w, *m, mine ? 1 : 0, op) ? 1 : -1;
  } catch (...) {
    (void)m.release();  // see SetupMessages
    throw;
  }
  t.oversubscribed = t.one_host > 0 && s.size > sysconf(_SC_NPROCESSORS_ONLN);
  return t.one_host > 0;
}

// A POSIX shared-memory segment rather than an MPI window: freeing a window
// is collective (Open MPI's holds a barrier), and communicators die at
// different times on different ranks, so windows left to MPI_Finalize get
// freed in different orders and deadlock. A segment is unlinked as soon as
// every rank has mapped it and each rank unmaps its view alone.
bool shm_ready(Communicator::State& s, Waiter& w, const char* op) {
  ShmTransport& t = *s.shm;
  if (t.state != 0) return t.state > 0;
  handshake(s, w, op);
  auto m = std::make_unique<SetupMessages>();
  bool ready = false;
  try {
    ready = map_segment(s, w, *m, op);
  } catch (...) {
    (void)m.release();  // see SetupMessages
    throw;
  }
  t.state = ready ? 1 : -1;
  return ready;
}

namespace {

// ---- writing a slot ------------------------------------------------------------------
//
// A slot is written by one core and read by another right after. While the
// two cores share a cache its lines go from cache to cache, and a plain copy
// is the fast way to write it. When they sit on different dies or sockets,
// where a VM's vCPUs can land and move between while a job runs, each line
// crosses the machine twice (the writer takes it from the reader's cache to
// write it, the reader takes it back): on this project's 2-vCPU machine the
// 16 MiB reduce-scatter took 1.5 ms one minute and 3.4 to 3.8 ms the next.
// A copy with non-temporal stores sends the lines to memory instead: much
// cheaper then (1.5 ms), but when the cores are close it makes the reader
// fetch from memory what a neighbouring cache would have served (2.0 ms).
//
// A probe of the cores' distance (a cache line bounced between the ranks)
// could not tell the two cases apart in the middle of heavy traffic, but the
// plain copy's own time can: with the cores far apart it costs 4 to 6 times
// a non-temporal copy, with them close about the same (the writer does not
// see the reader's extra cost). So a rank times its copies into each peer's
// slots, streams only while plain copies cost kFarCopyRatio times as much,
// and keeps both costs current by copying the other way now and then.

// Slots smaller than this are copied plainly and untimed (too short to time).
constexpr int64_t kTimedSlotBytes = int64_t{64} << 10;
constexpr double kFarCopyRatio = 3;
// One copy in this many goes the other way, since the vCPUs can move within
// seconds: often while copying plainly (a non-temporal trial costs little),
// rarely while streaming (a plain trial with the cores apart costs 5 times a
// copy, for the writer and again for the reader).
constexpr uint64_t kStreamingTrialEvery = 32;
constexpr uint64_t kPlainTrialEvery = 128;

void write_slot(ShmTransport::SlotWriter& writer, char* slot, const char* from, int64_t bytes) {
  auto copy = [&](bool streaming) {
    if (streaming) {
      detail::copy_streaming(slot, from, bytes);
      detail::streaming_store_fence();  // before the peer is told
    } else {
      std::memcpy(slot, from, static_cast<size_t>(bytes));
    }
  };
  const int forced = forced_slot_streaming();
  if (forced >= 0 || bytes < kTimedSlotBytes) {
    copy(forced == 1);
    return;
  }
  double* cost = writer.ns_per_byte;  // [plain, streaming]
  bool streaming;
  if (cost[0] == 0 || cost[1] == 0) {
    streaming = cost[0] != 0;  // measure each way once, plain first
  } else {
    streaming = cost[0] > kFarCopyRatio * cost[1];
    if (++writer.copies % (streaming ? kPlainTrialEvery : kStreamingTrialEvery) == 0) streaming = !streaming;
  }
  const auto start = std::chrono::steady_clock::now();
  copy(streaming);
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  const double sample = std::max(ns, 1.0) / static_cast<double>(bytes);
  double& mean = cost[streaming ? 1 : 0];
  mean = mean == 0 ? sample : (mean + sample) / 2;
}

// ---- the reduce-scatter ----------------------------------------------------------------

// Waits for an empty message (a "ready" or "free" note) from `peer`.
void wait_note(Communicator::State& s, Waiter& w, int peer, int tag, const char* op) {
  char note = 0;
  MPI_Request req;
  check_mpi(MPI_Irecv(&note, 0, MPI_BYTE, peer, tag, s.comm, &req), op, "MPI_Irecv");
  w.wait(req, rank_name(peer));
}

}  // namespace

bool slot_rendezvous(Communicator::State& s, Waiter& w, const char* op) {
  return shm_ready(s, w, op) && !s.shm->oversubscribed;
}

int forced_slot_streaming() {
  static const int forced = [] {
    const std::string way = detail::knob_choice(detail::Knob::DistShmStream);
    return way == "auto" ? -1 : way == "1" ? 1 : 0;
  }();
  return forced;
}

// Rank q copies chunk c of its block p into its staging slot (p, c %
// kShmSlots) and tells p; p folds every rank's chunk c of block p (its own
// from src, the others straight out of their slots, in rank order) into out
// and tells each sender the slot is free.
void shm_reduce_scatter(Communicator::State& s, Waiter& w, int tag, const char* src, char* out, const Blocks& blocks,
                        DType dtype, Reduce reduce, int64_t mean_count, const char* op, int64_t chunk,
                        const ChunkDone& on_done) {
  ShmTransport& t = *s.shm;
  const int ws = s.size;
  const int r = s.rank;
  const int64_t es = element_size(dtype);
  const int free_tag = tag + kShmFreeTagOffset;
  auto n_chunks = [&](int b) {
    const int64_t len = blocks.length[static_cast<size_t>(b)];
    return len == 0 ? int64_t{1} : (len + chunk - 1) / chunk;
  };
  auto slot = [&](int sender, int receiver, int64_t c) {
    return t.staging[static_cast<size_t>(sender)] +
           (static_cast<int64_t>(receiver) * kShmSlots + c % kShmSlots) * t.slot_bytes;
  };
  int64_t rounds = 0;
  for (int b = 0; b < ws; ++b) rounds = std::max(rounds, n_chunks(b));
  std::vector<MPI_Request> signals;  // "ready" and "free" notes in flight
  char note = 0;
  for (int64_t c = 0; c < rounds; ++c) {
    // Produce: chunk c of every peer's block, once that slot was freed.
    for (int i = 1; i < ws; ++i) {
      const int p = mod(r + i, ws);
      if (c >= n_chunks(p)) continue;
      if (c >= kShmSlots) wait_note(s, w, p, free_tag, op);
      const int64_t begin = c * chunk;
      const int64_t len = std::min(chunk, blocks.length[static_cast<size_t>(p)] - begin);
      if (len > 0)
        write_slot(t.slot_writers[static_cast<size_t>(p)], slot(r, p, c),
                   src + (blocks.offset[static_cast<size_t>(p)] + begin) * es, len * es);
      std::atomic_thread_fence(std::memory_order_release);
      post_send(&note, 0, p, tag, s.comm, signals, op);
    }
    // Consume: chunk c of this rank's block from everyone.
    if (c < n_chunks(r)) {
      const int64_t begin = c * chunk;
      const int64_t len = std::min(chunk, blocks.length[static_cast<size_t>(r)] - begin);
      const char* own = src + (blocks.offset[static_cast<size_t>(r)] + begin) * es;
      char* dst = out + begin * es;
      for (int q = 0; q < ws; ++q) {
        if (q != r) {
          wait_note(s, w, q, tag, op);
          std::atomic_thread_fence(std::memory_order_acquire);
        }
      }
      // Own values first (out may be own's memory, as in all_reduce), then
      // the other ranks' in rank order.
      bool first = true;
      for (int q = 0; q < ws; ++q) {
        if (q == r) continue;
        const bool last = q == ws - 1 || (q == ws - 2 && r == ws - 1);
        detail::combine_cpu(dst, first ? own : dst, slot(q, r, c), len, dtype, reduce, last ? mean_count : 0, op);
        first = false;
      }
      for (int q = 0; q < ws; ++q) {
        if (q != r) post_send(&note, 0, q, free_tag, s.comm, signals, op);
      }
      if (on_done) on_done(begin, len);
    }
    // Completed notes need no further attention; keep the list short.
    if (signals.size() > 64) {
      w.wait_all(static_cast<int>(signals.size()), signals.data(), "the other ranks");
      signals.clear();
    }
  }
  // The last kShmSlots "free" notes of each peer are still to be received,
  // so that the next collective starts with every slot free.
  for (int i = 1; i < ws; ++i) {
    const int p = mod(r + i, ws);
    const int64_t owed = std::min<int64_t>(n_chunks(p), kShmSlots);
    for (int64_t k = 0; k < owed; ++k) wait_note(s, w, p, free_tag, op);
  }
  w.wait_all(static_cast<int>(signals.size()), signals.data(), "the other ranks");
}

}  // namespace scatterx::dist

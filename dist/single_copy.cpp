// The single-copy transport (single_copy.h): the probe that decides whether
// ranks may read each other's memory, and the exchange of records, reads and
// "done" notes.
#include "dist/single_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "dist/p2p.h"
#include "dist/shm_transport.h"

namespace scatterx::dist {

namespace {

// Copies `bytes` at `address` in process `pid` into `into`; "" on success,
// else why not. process_vm_readv may move fewer bytes than asked (it stops
// at about 2 GiB, or at a page it cannot pin), so it loops.
std::string read_peer(int64_t pid, uint64_t address, char* into, int64_t bytes) {
  int64_t done = 0;
  while (done < bytes) {
    iovec local{into + done, static_cast<size_t>(bytes - done)};
    iovec remote{reinterpret_cast<void*>(address + static_cast<uint64_t>(done)), static_cast<size_t>(bytes - done)};
    const ssize_t n = process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? std::strerror(errno) : "no bytes moved";
    done += n;
  }
  return "";
}

// The probe's messages: heap-held and left allocated when a wait times out,
// since MPI may still write them (see shm_transport.cpp, SetupMessages).
struct ProbeMessages {
  uint64_t word = 0;     // what the peers read out of this rank
  int64_t mine[2] = {};  // pid, address of word
  std::vector<int64_t> all;
};

uint64_t probe_value(int64_t pid) { return 0x5c47c0de00000000ULL ^ static_cast<uint64_t>(pid); }

// Every rank reads the probe word out of every peer; the verdict is true only
// when every read on every rank returned the peer's value.
bool probe_reads(Communicator::State& s, Waiter& w, const char* op) {
  auto m = std::make_unique<ProbeMessages>();
  try {
    m->mine[0] = static_cast<int64_t>(getpid());
    m->word = probe_value(m->mine[0]);
    m->mine[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(&m->word));
    m->all.assign(static_cast<size_t>(2 * s.size), 0);
    MPI_Request req;
    check_mpi(MPI_Iallgather(m->mine, 2, MPI_INT64_T, m->all.data(), 2, MPI_INT64_T, s.comm, &req), op,
              "MPI_Iallgather");
    wait_setup(w, req, op);
    bool ok = true;
    for (int p = 0; p < s.size && ok; ++p) {
      if (p == s.rank) continue;
      const int64_t pid = m->all[static_cast<size_t>(2 * p)];
      uint64_t seen = 0;
      ok = read_peer(pid, static_cast<uint64_t>(m->all[static_cast<size_t>(2 * p + 1)]), reinterpret_cast<char*>(&seen),
                     sizeof seen)
               .empty() &&
           seen == probe_value(pid);
    }
    // Every peer has read this rank's word once the verdict is in.
    return all_ranks_agree(s, w, ok, op);
  } catch (...) {
    (void)m.release();
    throw;
  }
}

}  // namespace

bool single_copy_ready(Communicator::State& s, Waiter& w, const char* op) {
  if (s.single_copy_state != 0) return s.single_copy_state > 0;
  // The option agrees across ranks (agree_on_settings) and so does the host
  // verdict, so every rank takes the same branches here.
  const bool ready = s.single_copy && s.size > 1 && ranks_on_one_host(s, w, op) && probe_reads(s, w, op);
  s.single_copy_state = ready ? 1 : -1;
  return ready;
}

SingleCopyExchange::SingleCopyExchange(Communicator::State& s, int tag, const char* op, std::vector<MPI_Request>& reqs,
                                       std::vector<int>& peers)
    : s_(s), tag_(tag), op_(op), reqs_(reqs), peers_(peers) {
  offered_.reserve(static_cast<size_t>(s.size));
  incoming_.reserve(static_cast<size_t>(s.size));
}

void SingleCopyExchange::offer(int p, const char* data, int64_t bytes) {
  offered_.push_back({static_cast<int64_t>(getpid()), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(data)), bytes});
  post_send(reinterpret_cast<const char*>(&offered_.back()), sizeof(Record), p, tag_, s_.comm, reqs_, op_);
  peers_.resize(reqs_.size(), p);
  post_recv(&note_, 0, p, tag_ + kShmFreeTagOffset, s_.comm, reqs_, op_);
  peers_.resize(reqs_.size(), p);
}

void SingleCopyExchange::expect(int p, char* into, int64_t bytes) {
  incoming_.push_back({p, into, bytes, MPI_REQUEST_NULL, {}});
  Incoming& in = incoming_.back();
  check_mpi(MPI_Irecv(&in.record, sizeof(Record), MPI_BYTE, p, tag_, s_.comm, &in.request), op_, "MPI_Irecv");
}

void SingleCopyExchange::read_all(Waiter& w) {
  size_t left = incoming_.size();
  auto read_arrived = [&] {
    for (Incoming& in : incoming_) {
      if (in.request == MPI_REQUEST_NULL) continue;
      int arrived = 0;
      check_mpi(MPI_Test(&in.request, &arrived, MPI_STATUS_IGNORE), op_, "MPI_Test");
      if (!arrived) continue;
      --left;
      if (in.record.bytes != in.bytes) {
        if (error_.empty())
          error_ = detail::concat(op_, ": rank ", in.peer, " sends ", in.record.bytes, " bytes to rank ", s_.rank,
                                  ", which expects ", in.bytes);
        mismatch_ = true;
      } else {
        const std::string why = read_peer(in.record.pid, in.record.address, in.into, in.bytes);
        if (!why.empty() && error_.empty())
          error_ = detail::concat(op_, ": reading ", in.bytes, " bytes out of rank ", in.peer,
                                  " (process_vm_readv) failed: ", why);
      }
      post_send(&note_, 0, in.peer, tag_ + kShmFreeTagOffset, s_.comm, reqs_, op_);
      peers_.resize(reqs_.size(), in.peer);
    }
    return left == 0;
  };
  if (w.poll_until_deadline(read_arrived)) return;
  // Past the deadline: the caller's wait names whom the records came from.
  for (Incoming& in : incoming_) {
    if (in.request == MPI_REQUEST_NULL) continue;
    reqs_.push_back(in.request);
    peers_.push_back(in.peer);
    in.request = MPI_REQUEST_NULL;
  }
}

void SingleCopyExchange::raise_if_failed() const {
  if (error_.empty()) return;
  if (mismatch_) throw MismatchError(error_);
  throw Error(error_);
}

}  // namespace scatterx::dist

// The single-copy transport (single_copy.h): the probe that decides whether
// ranks may read each other's memory, and the exchange of records, reads and
// "done" notes.
#include "dist/single_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "dist/p2p.h"
#include "dist/shm_transport.h"
#include "ops/runtime/shareable_memory.h"

namespace scatterx::dist {

namespace {

// Copies `bytes` between `local` in this process and `address` in process
// `pid`: out of the peer with process_vm_readv, or into it with
// process_vm_writev when `into_peer`; "" on success, else why not. Either may
// move fewer bytes than asked (it stops at about 2 GiB, or at a page it
// cannot pin), so it loops.
std::string copy_with_peer(int64_t pid, uint64_t address, char* local, int64_t bytes, bool into_peer) {
  int64_t done = 0;
  while (done < bytes) {
    iovec here{local + done, static_cast<size_t>(bytes - done)};
    iovec there{reinterpret_cast<void*>(address + static_cast<uint64_t>(done)), static_cast<size_t>(bytes - done)};
    const auto peer = static_cast<pid_t>(pid);
    const ssize_t n =
        into_peer ? process_vm_writev(peer, &here, 1, &there, 1, 0) : process_vm_readv(peer, &here, 1, &there, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? std::strerror(errno) : "no bytes moved";
    done += n;
  }
  return "";
}

std::string read_peer(int64_t pid, uint64_t address, char* into, int64_t bytes) {
  return copy_with_peer(pid, address, into, bytes, false);
}

// Whether bytes [at, at + bytes) lie inside the message a peer's record names.
bool inside_record(const SingleCopyRecord& r, int64_t at, int64_t bytes) {
  return at >= 0 && bytes >= 0 && at <= r.bytes && bytes <= r.bytes - at;
}

// Peers' memory files mapped read-only, by (pid, inode): a pid reused by a
// later process has other inodes. Never unmapped, so a read never races an
// unmapping; a failed mapping is kept as nullptr and not tried again.
constexpr size_t kMaxPeerMappings = 256;

struct PeerMappings {
  std::mutex mutex;
  std::map<std::pair<int64_t, uint64_t>, const char*> mapped;
};

PeerMappings& peer_mappings() {
  static PeerMappings* const instance = new PeerMappings;  // never destroyed, as its mappings
  return *instance;
}

// The peer's file `fd` mapped, or nullptr when it cannot be: no such file
// any more, another inode under that number, no permission, or the table full.
const char* map_peer_file(int64_t pid, int64_t fd, uint64_t inode, uint64_t file_bytes) {
  PeerMappings& m = peer_mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  const auto key = std::make_pair(pid, inode);
  if (auto it = m.mapped.find(key); it != m.mapped.end()) return it->second;
  if (m.mapped.size() >= kMaxPeerMappings) return nullptr;
  const char* base = nullptr;
  const std::string path = detail::concat("/proc/", pid, "/fd/", fd);
  const int file = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file >= 0) {
    struct stat st {};
    if (fstat(file, &st) == 0 && static_cast<uint64_t>(st.st_ino) == inode &&
        static_cast<uint64_t>(st.st_size) >= file_bytes) {
      void* p = mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, file, 0);
      if (p != MAP_FAILED) base = static_cast<const char*>(p);
    }
    close(file);
  }
  m.mapped.emplace(key, base);
  return base;
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

SingleCopyRecord single_copy_record(const char* data, int64_t bytes) {
  SingleCopyRecord r{static_cast<int64_t>(getpid()), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(data)), bytes};
  detail::ShareableRegion region;
  if (detail::shareable_region(data, static_cast<size_t>(bytes), &region)) {
    r.fd = region.fd;
    r.inode = region.inode;
    r.offset = region.offset;
    r.file_bytes = region.file_bytes;
  }
  return r;
}

const char* single_copy_view(const SingleCopyRecord& r, int64_t at, int64_t bytes) {
  // The record came from a peer: check that the range lies in its file.
  if (r.fd < 0 || !inside_record(r, at, bytes) || r.offset > r.file_bytes ||
      static_cast<uint64_t>(r.bytes) > r.file_bytes - r.offset)
    return nullptr;
  const char* file = map_peer_file(r.pid, r.fd, r.inode, r.file_bytes);
  return file == nullptr ? nullptr : file + r.offset + at;
}

std::string single_copy_read(const SingleCopyRecord& r, int64_t at, char* into, int64_t bytes) {
  if (const char* view = single_copy_view(r, at, bytes)) {
    std::memcpy(into, view, static_cast<size_t>(bytes));
    return "";
  }
  return read_peer(r.pid, r.address + static_cast<uint64_t>(at), into, bytes);
}

std::string single_copy_write(const SingleCopyRecord& r, int64_t at, const char* from, int64_t bytes) {
  // The record came from a peer: write nowhere outside the range it names.
  if (!inside_record(r, at, bytes))
    return detail::concat("bytes [", at, ", ", at + bytes, ") lie outside the peer's ", r.bytes);
  // process_vm_writev only reads `from`.
  return copy_with_peer(r.pid, r.address + static_cast<uint64_t>(at), const_cast<char*>(from), bytes, true);
}

void on_each_arrival(Waiter& w, std::vector<MPI_Request>& pending, const std::function<void(int)>& arrived,
                     std::vector<MPI_Request>& reqs, std::vector<int>& peers, const char* op,
                     std::vector<int64_t>* arrived_bytes) {
  size_t left = 0;
  for (MPI_Request r : pending) left += r != MPI_REQUEST_NULL;
  const bool all = w.poll_until_deadline([&] {
    for (size_t p = 0; p < pending.size(); ++p) {
      if (pending[p] == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Status status;
      check_mpi(MPI_Test(&pending[p], &done, &status), op, "MPI_Test");
      if (!done) continue;
      --left;
      if (arrived_bytes != nullptr) {
        MPI_Count count = 0;
        check_mpi(MPI_Get_elements_x(&status, MPI_BYTE, &count), op, "MPI_Get_elements_x");
        (*arrived_bytes)[p] = static_cast<int64_t>(count);
      }
      arrived(static_cast<int>(p));
    }
    return left == 0;
  });
  if (all) return;
  for (size_t p = 0; p < pending.size(); ++p) {
    if (pending[p] == MPI_REQUEST_NULL) continue;
    reqs.push_back(pending[p]);
    peers.push_back(static_cast<int>(p));
    pending[p] = MPI_REQUEST_NULL;
  }
}

bool sends_by_single_copy(const Communicator::State& s, const char* data, int64_t bytes) {
  if (by_single_copy(s, bytes)) return true;
  detail::ShareableRegion region;
  return by_single_copy_if_shareable(s, bytes) && detail::shareable_region(data, static_cast<size_t>(bytes), &region);
}

bool single_copy_ready(Communicator::State& s, Waiter& w, const char* op) {
  if (s.single_copy_state != 0) return s.single_copy_state > 0;
  // The option agrees across ranks (agree_on_settings) and so does the host
  // verdict, so every rank takes the same branches here.
  const bool ready = s.single_copy && s.size > 1 && ranks_on_one_host(s, w, op) && probe_reads(s, w, op);
  // With more ranks than cores the readers have no core to spare for the
  // root's share. Every rank is on this host, so all see the same.
  const int share = s.broadcast_root_share_setting;
  s.broadcast_root_share = ready && (share == 1 || (share == 2 && !s.shm->oversubscribed));
  s.single_copy_state = ready ? 1 : -1;
  return ready;
}

SingleCopyExchange::SingleCopyExchange(Communicator::State& s, int tag, const char* op, std::vector<MPI_Request>& reqs,
                                       std::vector<int>& peers)
    : s_(s),
      tag_(tag),
      op_(op),
      reqs_(reqs),
      peers_(peers),
      incoming_(static_cast<size_t>(s.size)),
      records_(static_cast<size_t>(s.size), MPI_REQUEST_NULL),
      arrived_bytes_(static_cast<size_t>(s.size), 0) {
  offered_.reserve(static_cast<size_t>(s.size));
}

void SingleCopyExchange::offer(int p, const char* data, int64_t bytes) {
  offered_.push_back(single_copy_record(data, bytes));
  post_send(reinterpret_cast<const char*>(&offered_.back()), sizeof(SingleCopyRecord), p, tag_, s_.comm, reqs_, op_);
  peers_.resize(reqs_.size(), p);
  post_recv(&note_, 0, p, tag_ + kShmFreeTagOffset, s_.comm, reqs_, op_);
  peers_.resize(reqs_.size(), p);
}

void SingleCopyExchange::expect(int p, char* into, int64_t bytes) {
  Incoming& in = incoming_[static_cast<size_t>(p)];
  in.into = into;
  in.bytes = bytes;
  check_mpi(
      MPI_Irecv(&in.record, sizeof(SingleCopyRecord), MPI_BYTE, p, tag_, s_.comm, &records_[static_cast<size_t>(p)]),
      op_, "MPI_Irecv");
}

void SingleCopyExchange::expect_either(int p, char* into, int64_t bytes) {
  Incoming& in = incoming_[static_cast<size_t>(p)];
  in.into = into;
  in.bytes = bytes;
  in.either = true;
  // A record is far smaller than any message sent this way
  // (kPairSingleCopyMinBytes), so its size tells the two apart.
  check_mpi(MPI_Irecv(into, static_cast<int>(bytes), MPI_BYTE, p, tag_, s_.comm, &records_[static_cast<size_t>(p)]),
            op_, "MPI_Irecv");
}

void SingleCopyExchange::read_all(Waiter& w) {
  on_each_arrival(
      w, records_,
      [&](int p) {
        Incoming& in = incoming_[static_cast<size_t>(p)];
        // From expect_either: the bytes themselves came unless a record did.
        const int64_t arrived = arrived_bytes_[static_cast<size_t>(p)];
        const bool bytes_came = in.either && arrived != static_cast<int64_t>(sizeof(SingleCopyRecord));
        if (in.either && !bytes_came) std::memcpy(&in.record, in.into, sizeof(SingleCopyRecord));
        const int64_t sent = bytes_came ? arrived : in.record.bytes;
        if (sent != in.bytes) {
          if (error_.empty())
            error_ = detail::concat(op_, ": rank ", p, " sends ", sent, " bytes to rank ", s_.rank, ", which expects ",
                                    in.bytes);
          mismatch_ = true;
        } else if (!bytes_came) {
          const std::string why = single_copy_read(in.record, 0, in.into, in.bytes);
          if (!why.empty() && error_.empty())
            error_ = detail::concat(op_, ": reading ", in.bytes, " bytes out of rank ", p,
                                    " (process_vm_readv) failed: ", why);
        }
        if (bytes_came) return;  // no "done" is awaited for them
        post_send(&note_, 0, p, tag_ + kShmFreeTagOffset, s_.comm, reqs_, op_);
        peers_.resize(reqs_.size(), p);
      },
      reqs_, peers_, op_, &arrived_bytes_);
}

void SingleCopyExchange::raise_if_failed() const {
  if (error_.empty()) return;
  if (mismatch_) throw MismatchError(error_);
  throw Error(error_);
}

}  // namespace scatterx::dist

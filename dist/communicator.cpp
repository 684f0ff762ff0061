#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/internal.h"
#include "dist/shm_transport.h"
#include "ops/runtime/knobs.h"

namespace scatterx::dist {

namespace {

// Communicators alive, so that MPI_Finalize (when scatterx initialized MPI)
// can first stop their progress threads.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::weak_ptr<Communicator::State>>& registry() {
  static std::vector<std::weak_ptr<Communicator::State>> r;
  return r;
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

void finalize_at_exit() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (auto& weak : registry()) {
      if (auto state = weak.lock()) state->stop_worker();
    }
  }
  if (!mpi_finalized()) MPI_Finalize();
}

// Receives and drops the messages that arrived on `comm` and that no one
// will receive now: those of a collective a peer ran into a timeout on while
// this rank never joined it. Freed with them, its context id may go to a
// later communicator of other ranks (Open MPI reuses it when none of them
// still holds it), and a message that reaches this process only after the
// free is delivered to that communicator as if sent there, where it takes
// the place of the first real message from the peer of that rank number
// (hence also retire() below, for the messages not here yet).
// Each probe also progresses MPI, which moves the messages sitting in the
// transport's queues (sent long ago, not yet looked at) into `comm`'s, so a
// few empty probes in a row find those too. Returns how many were dropped.
int64_t drop_unreceived_messages(MPI_Comm comm) {
  constexpr int kEmptyProbes = 8;
  int64_t dropped = 0;
  std::vector<char> sink;
  for (int empty = 0; empty < kEmptyProbes;) {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &found, &message, &status) != MPI_SUCCESS) break;
    if (found == 0) {
      ++empty;
      continue;
    }
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    sink.resize(static_cast<size_t>(std::max(bytes, 1)));
    MPI_Mrecv(sink.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    ++dropped;
  }
  return dropped;
}

std::atomic<int64_t> g_dropped_at_destruction{0};

// Destroyed communicators, held a while before MPI_Comm_free. A rank that
// skipped a collective may destroy the communicator before its peers'
// messages of that collective reach it (they are sent after the drain above
// looked), and Open MPI would give the freed context id to this rank's next
// communicator, where such a message waits as if sent there: in the place of
// a real message, or from a rank the new communicator lacks, which crashed
// MPI_Comm_dup (FaultsTest.LateMessagesToADestroyedCommunicatorReachNoLaterOne).
// Held, the id stays taken, and what arrives is dropped with the rest when
// the communicator is freed: once its timeout has passed (a peer still in
// that collective has timed out and sends nothing more), or when more than
// kMaxRetired are held (the oldest first: long enough ago for anything sent).
struct Retired {
  MPI_Comm comm;
  std::chrono::steady_clock::time_point free_after;
};
constexpr size_t kMaxRetired = 64;

std::mutex& retired_mutex() {
  static std::mutex m;
  return m;
}
std::deque<Retired>& retired() {
  static std::deque<Retired> r;
  return r;
}

void retire(MPI_Comm comm, double timeout_s) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(retired_mutex());
  std::deque<Retired>& held = retired();
  held.push_back({comm, now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(timeout_s + 1.0))});
  while (!held.empty() && (held.size() > kMaxRetired || held.front().free_after <= now)) {
    MPI_Comm c = held.front().comm;
    held.pop_front();
    g_dropped_at_destruction += drop_unreceived_messages(c);
    MPI_Comm_free(&c);
  }
}

bool threaded_mpi() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

// The settings `options` asks for; an unset field is `inherited`'s when
// that has it (a split's parent), else the environment's. The values are
// not validated here (validation_error does, before any rank can raise).
CommunicatorOptions resolve(const CommunicatorOptions& options, const CommunicatorOptions& inherited) {
  CommunicatorOptions r;
  r.timeout = options.timeout     ? options.timeout
              : inherited.timeout ? inherited.timeout
                                  : std::chrono::duration<double>(detail::knob_seconds(detail::Knob::DistTimeout));
  r.checks = options.checks     ? options.checks
             : inherited.checks ? inherited.checks
                                : detail::knob_flag(detail::Knob::DistChecks);
  r.chunk_bytes = options.chunk_bytes     ? options.chunk_bytes
                  : inherited.chunk_bytes ? inherited.chunk_bytes
                                          : detail::knob_bytes(detail::Knob::DistChunkBytes);
  r.shared_memory = options.shared_memory     ? options.shared_memory
                    : inherited.shared_memory ? inherited.shared_memory
                                              : detail::knob_flag(detail::Knob::DistShm);
  r.single_copy = options.single_copy     ? options.single_copy
                  : inherited.single_copy ? inherited.single_copy
                                          : detail::knob_flag(detail::Knob::DistSingleCopy);
  return r;
}

// What is wrong with resolved settings, or "" when nothing is.
std::string validation_error(const CommunicatorOptions& r, const char* op) {
  const double seconds = r.timeout->count();
  if (!(std::isfinite(seconds) && seconds > 0)) {
    return detail::concat(op, ": options.timeout expected a positive number of seconds, got ", seconds);
  }
  const detail::KnobSpec& chunk = detail::knob_spec(detail::Knob::DistChunkBytes);
  if (*r.chunk_bytes < chunk.min || *r.chunk_bytes > chunk.max) {
    return detail::concat(op, ": options.chunk_bytes expected a whole number of bytes from ", chunk.min, " to ",
                          chunk.max, ", got ", *r.chunk_bytes);
  }
  return "";
}

// Every rank of `comm` learns whether the others' settings are valid and
// agree on what decides the messages (chunk_bytes, shared_memory, checks,
// single_copy, all_reduce's latency threshold and the broadcast's root
// share), and raises if not:
// ArgumentError on a rank whose own settings are
// invalid, MismatchError on the others, so that no rank is left waiting in
// a later collective that its peers never join.
void agree_on_settings(MPI_Comm comm, const CommunicatorOptions& r, int64_t allreduce_small_bytes, int64_t root_share,
                       const std::string& error, const char* op) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  constexpr int kFields = 7;
  const int64_t mine[kFields] = {
      error.empty() ? 1 : 0, *r.chunk_bytes, *r.shared_memory ? 1 : 0, *r.checks ? 1 : 0, *r.single_copy ? 1 : 0,
      allreduce_small_bytes, root_share};
  std::vector<int64_t> all(static_cast<size_t>(kFields * size));
  check_mpi(MPI_Allgather(mine, kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, comm), op, "MPI_Allgather");
  if (!error.empty()) throw ArgumentError(error);
  const char* names[kFields] = {"",
                                "options.chunk_bytes",
                                "options.shared_memory",
                                "options.checks",
                                "options.single_copy",
                                "SCATTERX_DIST_ALLREDUCE_SMALL_BYTES",
                                "SCATTERX_DIST_BROADCAST_ROOT_SHARE (0 never, 1 always, 2 auto)"};
  for (int p = 0; p < size; ++p) {
    const int64_t* theirs = &all[static_cast<size_t>(kFields * p)];
    if (theirs[0] == 0) detail::raise<MismatchError>(op, "rank ", p, "'s options are invalid (it raised why)");
    for (int f = 1; f < kFields; ++f) {
      if (theirs[f] == mine[f]) continue;
      detail::raise<MismatchError>(op, names[f], " expected the same on every rank, got ", mine[f], " on rank ", rank,
                                   " and ", theirs[f], " on rank ", p);
    }
  }
}

// A communicator around `owned` (a duplicate or a split this process made)
// with the settings `options` asks for. Collective over `owned`.
std::shared_ptr<Communicator::State> adopt(MPI_Comm owned, const CommunicatorOptions& options,
                                           const CommunicatorOptions& inherited, const char* op) {
  // Resolving reads the environment, which may raise: the ranks still meet
  // in agree_on_settings, so that a bad variable on one rank raises on all.
  CommunicatorOptions settings;
  int64_t allreduce_small_bytes = 0;
  int64_t root_share = 2;
  std::string error;
  try {
    settings = resolve(options, inherited);
    error = validation_error(settings, op);
    allreduce_small_bytes = detail::knob_bytes(detail::Knob::DistAllReduceSmallBytes);
    const std::string share = detail::knob_choice(detail::Knob::DistBroadcastRootShare);
    root_share = share == "auto" ? 2 : share == "1" ? 1 : 0;
  } catch (const Error& e) {
    error = e.what();
    settings = CommunicatorOptions{std::chrono::duration<double>(1), false, 1, false, false};
  }
  auto state = std::make_shared<Communicator::State>(owned, threaded_mpi(), settings);
  state->allreduce_small_bytes = allreduce_small_bytes;
  state->broadcast_root_share_setting = static_cast<int>(root_share);
  agree_on_settings(owned, settings, allreduce_small_bytes, root_share, error, op);
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  r.erase(std::remove_if(r.begin(), r.end(), [](const auto& w) { return w.expired(); }), r.end());
  r.push_back(state);
  return state;
}

std::shared_ptr<Communicator::State> duplicate(MPI_Comm comm, const CommunicatorOptions& options, const char* op) {
  Communicator::ensure_mpi_initialized();
  SCATTERX_CHECK(comm != MPI_COMM_NULL, ArgumentError, op, "comm expected a valid MPI communicator, got MPI_COMM_NULL");
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &dup), op, "MPI_Comm_dup");
  return adopt(dup, options, {}, op);
}

}  // namespace

void check_mpi(int rc, const char* op, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  detail::raise<Error>(op, call, " failed: ", std::string(text, static_cast<size_t>(len)));
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
#define SCATTERX_DIST_REDUCE_NAME(name, str) \
  case ReduceOp::name:                       \
    return str;
    SCATTERX_FORALL_DIST_REDUCE_OPS(SCATTERX_DIST_REDUCE_NAME)
#undef SCATTERX_DIST_REDUCE_NAME
  }
  return "unknown";
}

Communicator::State::State(MPI_Comm owned, bool threaded_mpi, const CommunicatorOptions& settings)
    : comm(owned),
      chunk_bytes(*settings.chunk_bytes),
      shared_memory(*settings.shared_memory),
      single_copy(*settings.single_copy),
      threaded(threaded_mpi),
      shm(std::make_unique<ShmTransport>()) {
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Errors come back as return codes, which check_mpi turns into exceptions.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_dup(comm, &p2p_comm), "scatterx.dist", "MPI_Comm_dup");
  int* tag_ub = nullptr;
  int has_tag_ub = 0;
  MPI_Comm_get_attr(p2p_comm, MPI_TAG_UB, &tag_ub, &has_tag_ub);
  if (has_tag_ub != 0 && tag_ub != nullptr) p2p_tag_ub = *tag_ub;
  timeout_s = settings.timeout->count();
  checks = *settings.checks;
}

Communicator::State::~State() {
  stop_worker();
  shm.reset();
  if (mpi_finalized() || broken) return;
  for (MPI_Comm* c : {&p2p_comm, &comm}) {
    if (*c == MPI_COMM_NULL) continue;
    g_dropped_at_destruction += drop_unreceived_messages(*c);
    retire(*c, timeout_s.load());
    *c = MPI_COMM_NULL;
  }
}

int64_t messages_dropped_at_destruction() { return g_dropped_at_destruction.load(); }

void Communicator::State::check_usable(const char* op) const {
  if (broken) detail::raise<Error>(op, "communicator is unusable after an earlier failure: ", broken_reason);
}

void Communicator::State::fail_timeout(const char* op, const std::string& waiting_for) {
  const std::string reason = detail::concat(op, ": timed out after ", timeout_s.load(), " s on rank ", rank, " of ",
                                            size, " waiting for ", waiting_for);
  fail_broken(reason);
}

void Communicator::State::fail_broken(const std::string& reason) {
  if (!broken) {
    broken_reason = reason;
    broken = true;
  }
  throw TimeoutError(reason + " (this communicator is unusable from now on; make a new one)");
}

void Communicator::ensure_mpi_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    SCATTERX_CHECK(!mpi_finalized(), Error, "scatterx.dist", "MPI was already finalized");
    int provided = MPI_THREAD_SINGLE;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "scatterx.dist", "MPI_Init_thread");
    // The registry must outlive the exit handler: statics built after
    // std::atexit() are destroyed before the handler runs.
    registry_mutex();
    registry();
    std::atexit(finalize_at_exit);
  });
}

Communicator Communicator::world(const CommunicatorOptions& options) {
  return Communicator(duplicate(MPI_COMM_WORLD, options, "Communicator::world"));
}

Communicator Communicator::from_fortran_handle(int64_t handle, const CommunicatorOptions& options) {
  ensure_mpi_initialized();
  return Communicator(
      duplicate(MPI_Comm_f2c(static_cast<MPI_Fint>(handle)), options, "Communicator::from_fortran_handle"));
}

Communicator Communicator::from_c_handle(const void* comm_handle_bits, size_t size,
                                         const CommunicatorOptions& options) {
  SCATTERX_CHECK(size == sizeof(MPI_Comm), ArgumentError, "Communicator::from_c_handle", "size expected ",
                 sizeof(MPI_Comm), " (sizeof(MPI_Comm)), got ", size);
  MPI_Comm comm;
  std::memcpy(&comm, comm_handle_bits, sizeof(MPI_Comm));
  return Communicator(duplicate(comm, options, "Communicator::from_c_handle"));
}

Communicator::State& Communicator::state() const {
  SCATTERX_CHECK(state_ != nullptr, ArgumentError, "scatterx.dist",
                 "communicator expected a member of the group, got a null communicator (this rank opted out of it)");
  return *state_;
}

Communicator Communicator::split(int color, int key, const CommunicatorOptions& options) const {
  State& s = state();
  s.check_usable("Communicator::split");
  MPI_Comm out = MPI_COMM_NULL;
  // In order with the collectives queued on this communicator (MPI allows
  // one collective at a time per communicator).
  s.submit(
       [&] {
         check_mpi(MPI_Comm_split(s.comm, color < 0 ? MPI_UNDEFINED : color, key, &out), "Communicator::split",
                   "MPI_Comm_split");
       },
       false)
      .wait();
  if (out == MPI_COMM_NULL) return Communicator(nullptr);
  return Communicator(adopt(out, options, this->options(), "Communicator::split"));
}

CommunicatorOptions Communicator::options() const {
  const State& s = state();
  return CommunicatorOptions{std::chrono::duration<double>(s.timeout_s.load()), s.checks.load(), s.chunk_bytes,
                             s.shared_memory, s.single_copy};
}

int Communicator::rank() const { return state().rank; }
int Communicator::size() const { return state().size; }

void Communicator::set_timeout(std::chrono::duration<double> timeout) {
  SCATTERX_CHECK(timeout.count() > 0, ArgumentError, "Communicator::set_timeout", "timeout expected > 0 s, got ",
                 timeout.count());
  state().timeout_s = timeout.count();
}
std::chrono::duration<double> Communicator::timeout() const {
  return std::chrono::duration<double>(state().timeout_s.load());
}
void Communicator::set_checks(bool enabled) { state().checks = enabled; }
bool Communicator::checks() const { return state().checks; }
std::optional<bool> Communicator::shared_memory_path() const {
  const int verdict = state().shm->state;
  if (verdict == 0) return std::nullopt;
  return verdict > 0;
}

std::optional<bool> Communicator::single_copy_path() const {
  const int verdict = state().single_copy_state;
  if (verdict == 0) return std::nullopt;
  return verdict > 0;
}

Waiter::Waiter(Communicator::State& state, const char* op)
    : Waiter(state, op, std::chrono::duration<double>(state.timeout_s.load())) {}

Waiter::Waiter(Communicator::State& state, const char* op, std::chrono::duration<double> timeout)
    : state_(state),
      op_(op),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout)) {}

void Waiter::wait_all(int n, MPI_Request* requests, const std::string& what) {
  poll(
      [&] {
        int done = 0;
        check_mpi(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE), op_, "MPI_Testall");
        return done != 0;
      },
      what,
      [&] {
        for (int i = 0; i < n; ++i) {
          if (requests[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&requests[i]);
            MPI_Request_free(&requests[i]);
          }
        }
      });
}

void Waiter::wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers, const char* what) {
  const int n = static_cast<int>(requests.size());
  const bool done = poll_until_deadline([&] {
    int all = 0;
    check_mpi(MPI_Testall(n, requests.data(), &all, MPI_STATUSES_IGNORE), op_, "MPI_Testall");
    return all != 0;
  });
  if (done) return;
  std::vector<int> late;
  for (int i = 0; i < n; ++i) {
    int finished = 0;
    if (requests[i] != MPI_REQUEST_NULL) MPI_Test(&requests[i], &finished, MPI_STATUS_IGNORE);
    if (requests[i] == MPI_REQUEST_NULL || finished) continue;
    late.push_back(peers[static_cast<size_t>(i)]);
    MPI_Cancel(&requests[i]);
    MPI_Request_free(&requests[i]);
  }
  std::sort(late.begin(), late.end());
  late.erase(std::unique(late.begin(), late.end()), late.end());
  std::string names = late.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < late.size(); ++i) names += (i ? ", " : "") + std::to_string(late[i]);
  state_.fail_timeout(op_, detail::concat(names, " (", what, ")"));
}

void Waiter::poll(const std::function<bool()>& done, const std::string& what, const std::function<void()>& give_up) {
  if (poll_until_deadline(done)) return;
  if (give_up) give_up();
  state_.fail_timeout(op_, what);
}

bool Waiter::poll_until_deadline(const std::function<bool()>& done) {
  // With more ranks than cores a rank that spins on may hold the core its
  // peer needs for the rest of its time slice (milliseconds): it yields after
  // every poll once it has waited a little.
  const bool crowded = state_.shm != nullptr && state_.shm->oversubscribed;
  const uint64_t patience = crowded ? kSpinsBeforeYieldOversubscribed : kSpinsBeforeYield;
  for (uint64_t spins = 0;; ++spins) {
    if (done()) return true;
    if (spins >= patience && (crowded || (spins & 255) == 255)) std::this_thread::yield();
    if ((spins & 255) == 255 && std::chrono::steady_clock::now() > deadline_) return false;
  }
}

}  // namespace scatterx::dist

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
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

bool threaded_mpi() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

double default_timeout_s() { return detail::knob_seconds(detail::Knob::DistTimeout); }

bool default_checks() { return detail::knob_flag(detail::Knob::DistChecks); }

std::shared_ptr<Communicator::State> adopt(MPI_Comm owned) {
  auto state = std::make_shared<Communicator::State>(owned, threaded_mpi());
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  r.erase(std::remove_if(r.begin(), r.end(), [](const auto& w) { return w.expired(); }), r.end());
  r.push_back(state);
  return state;
}

std::shared_ptr<Communicator::State> duplicate(MPI_Comm comm, const char* op) {
  Communicator::ensure_mpi_initialized();
  SCATTERX_CHECK(comm != MPI_COMM_NULL, ArgumentError, op, "comm expected a valid MPI communicator, got MPI_COMM_NULL");
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &dup), op, "MPI_Comm_dup");
  return adopt(dup);
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

Communicator::State::State(MPI_Comm owned, bool threaded_mpi)
    : comm(owned), threaded(threaded_mpi), shm(std::make_unique<ShmTransport>()) {
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Errors come back as return codes, which check_mpi turns into exceptions.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  timeout_s = default_timeout_s();
  checks = default_checks();
}

Communicator::State::~State() {
  stop_worker();
  shm.reset();
  if (comm != MPI_COMM_NULL && !mpi_finalized() && !broken) MPI_Comm_free(&comm);
}

void Communicator::State::check_usable(const char* op) const {
  if (broken) detail::raise<Error>(op, "communicator is unusable after an earlier failure: ", broken_reason);
}

void Communicator::State::fail_timeout(const char* op, const std::string& waiting_for) {
  const std::string reason = detail::concat(op, ": timed out after ", timeout_s.load(), " s on rank ", rank, " of ",
                                            size, " waiting for ", waiting_for);
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

Communicator Communicator::world() { return Communicator(duplicate(MPI_COMM_WORLD, "Communicator::world")); }

Communicator Communicator::from_fortran_handle(int64_t handle) {
  ensure_mpi_initialized();
  return Communicator(duplicate(MPI_Comm_f2c(static_cast<MPI_Fint>(handle)), "Communicator::from_fortran_handle"));
}

Communicator Communicator::from_c_handle(const void* comm_handle_bits, size_t size) {
  SCATTERX_CHECK(size == sizeof(MPI_Comm), ArgumentError, "Communicator::from_c_handle", "size expected ",
                 sizeof(MPI_Comm), " (sizeof(MPI_Comm)), got ", size);
  MPI_Comm comm;
  std::memcpy(&comm, comm_handle_bits, sizeof(MPI_Comm));
  return Communicator(duplicate(comm, "Communicator::from_c_handle"));
}

Communicator::State& Communicator::state() const {
  SCATTERX_CHECK(state_ != nullptr, ArgumentError, "scatterx.dist",
                 "communicator expected a member of the group, got a null communicator (this rank opted out of it)");
  return *state_;
}

Communicator Communicator::split(int color, int key) const {
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
  auto state = adopt(out);
  state->timeout_s = s.timeout_s.load();
  state->checks = s.checks.load();
  return Communicator(state);
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

Waiter::Waiter(Communicator::State& state, const char* op)
    : state_(state),
      op_(op),
      deadline_(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(state.timeout_s.load()))) {}

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

void Waiter::poll(const std::function<bool()>& done, const std::string& what, const std::function<void()>& give_up) {
  for (uint64_t spins = 0;; ++spins) {
    if (done()) return;
    if ((spins & 255) == 255) {
      if (std::chrono::steady_clock::now() > deadline_) {
        if (give_up) give_up();
        state_.fail_timeout(op_, what);
      }
      // Spinning keeps latency low; past a few thousand spins the peer is
      // not about to answer, so let another thread (maybe a rank on this
      // core) run.
      if (spins > 4096) std::this_thread::yield();
    }
  }
}

}  // namespace scatterx::dist

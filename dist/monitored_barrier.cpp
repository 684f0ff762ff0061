// monitored_barrier (dist.h): gloo's protocol, with the outcome sent back.
// Every rank other than 0 posts the receive of the outcome, sends rank 0 an
// arrival note and waits; rank 0 waits for the notes until its deadline,
// then sends every other rank the outcome (late ranks too, so that they
// learn it when they arrive): [its timeout in ms, wait_all_ranks, one
// "arrived" flag per rank]. Each rank words a failure from that record, so
// all of them name the same ranks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/internal.h"

namespace scatterx::dist {

namespace {

using detail::concat;

const char* const kOp = "monitored_barrier";
const int64_t kArrived = 1;  // the arrival note's payload (static: a send abandoned at a timeout may still read it)

// The outcome record: [0] rank 0's timeout in ms, [1] wait_all_ranks,
// [2 + r] whether rank r arrived in time.
int64_t outcome_length(int ws) { return ws + 2; }

// torch's (gloo's) text for the ranks that did not arrive, or "" when all did.
std::string failure_text(const int64_t* outcome, int ws) {
  std::vector<int> missing;
  for (int r = 1; r < ws; ++r)
    if (outcome[2 + r] == 0) missing.push_back(r);
  if (missing.empty()) return "";
  if (outcome[1] == 0) missing.resize(1);  // without wait_all_ranks: the first one
  std::string ranks;
  for (size_t i = 0; i < missing.size(); ++i) ranks += concat(i ? ", " : "", missing[i]);
  return concat(missing.size() == 1 ? "Rank " : "Ranks ", ranks, " failed to pass monitoredBarrier in ", outcome[0],
                " ms");
}

void cancel_receive(MPI_Request& request) {
  if (request == MPI_REQUEST_NULL) return;
  MPI_Cancel(&request);
  MPI_Request_free(&request);
}

bool test(MPI_Request& request) {
  int done = 0;
  check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), kOp, "MPI_Test");
  return done != 0;
}

void rank0(Communicator::State& s, std::chrono::duration<double> timeout, bool wait_all_ranks) {
  const int ws = s.size;
  std::vector<int64_t> notes(static_cast<size_t>(ws));
  std::vector<MPI_Request> arrivals(static_cast<size_t>(ws), MPI_REQUEST_NULL);
  for (int r = 1; r < ws; ++r) {
    check_mpi(MPI_Irecv(&notes[static_cast<size_t>(r)], 1, MPI_INT64_T, r, kBarrierArrivalTag, s.comm,
                        &arrivals[static_cast<size_t>(r)]),
              kOp, "MPI_Irecv");
  }
  // Kept past a failure: the outcome's sends to ranks that never come are
  // left to MPI, which may still read it.
  auto* outcome = new int64_t[static_cast<size_t>(outcome_length(ws))]();
  std::unique_ptr<int64_t[]> owned(outcome);
  outcome[0] = static_cast<int64_t>(std::llround(timeout.count() * 1000));
  outcome[1] = wait_all_ranks ? 1 : 0;
  outcome[2] = 1;
  Waiter(s, kOp, timeout).poll_until_deadline([&] {
    bool all = true;
    for (int r = 1; r < ws; ++r) {
      MPI_Request& a = arrivals[static_cast<size_t>(r)];
      if (outcome[2 + r] == 0 && test(a)) outcome[2 + r] = 1;
      all = all && outcome[2 + r] != 0;
    }
    return all;
  });
  for (MPI_Request& a : arrivals) cancel_receive(a);
  const std::string failure = failure_text(outcome, ws);
  std::vector<MPI_Request> sends;
  for (int r = 1; r < ws; ++r) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(
        MPI_Isend(outcome, static_cast<int>(outcome_length(ws)), MPI_INT64_T, r, kBarrierOutcomeTag, s.comm, &request),
        kOp, "MPI_Isend");
    if (outcome[2 + r] != 0) {
      sends.push_back(request);
    } else {
      MPI_Request_free(&request);  // a rank that may never come
    }
  }
  // The ranks that arrived posted their receives before their notes.
  const bool sent = Waiter(s, kOp, timeout).poll_until_deadline([&] {
    return std::all_of(sends.begin(), sends.end(), [](MPI_Request& r) { return test(r); });
  });
  if (!sent) owned.release();  // still being read
  if (failure.empty()) return;
  owned.release();
  s.fail_broken(concat(kOp, ": [Rank 0]: ", failure));
}

void other_rank(Communicator::State& s, std::chrono::duration<double> timeout) {
  const int ws = s.size;
  auto* outcome = new int64_t[static_cast<size_t>(outcome_length(ws))]();
  std::unique_ptr<int64_t[]> owned(outcome);
  MPI_Request heard = MPI_REQUEST_NULL;
  MPI_Request told = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Irecv(outcome, static_cast<int>(outcome_length(ws)), MPI_INT64_T, 0, kBarrierOutcomeTag, s.comm, &heard), kOp,
      "MPI_Irecv");
  check_mpi(MPI_Isend(&kArrived, 1, MPI_INT64_T, 0, kBarrierArrivalTag, s.comm, &told), kOp, "MPI_Isend");
  // Rank 0 may arrive up to `timeout` after this rank and then wait `timeout`.
  const bool answered = Waiter(s, kOp, 2 * timeout).poll_until_deadline([&] { return test(told) && test(heard); });
  if (!answered) {
    cancel_receive(heard);
    if (told != MPI_REQUEST_NULL) MPI_Request_free(&told);
    owned.release();  // a cancel that came too late may still write it
    s.fail_broken(concat(kOp, ": Rank ", s.rank, " reached monitoredBarrier, but rank 0 did not report the outcome ",
                         "within ", std::llround(2 * timeout.count() * 1000),
                         " ms (rank 0 did not arrive, or arrived too late)"));
  }
  const std::string failure = failure_text(outcome, ws);
  if (failure.empty()) return;
  const char* how = outcome[2 + s.rank] != 0 ? " reached monitoredBarrier, but rank 0 reported: "
                                             : " arrived after rank 0 stopped waiting; rank 0 reported: ";
  s.fail_broken(concat(kOp, ": Rank ", s.rank, how, failure));
}

}  // namespace

void monitored_barrier(const Communicator& comm, std::chrono::duration<double> timeout, bool wait_all_ranks) {
  Communicator::State& s = comm.state();
  s.check_usable(kOp);
  SCATTERX_CHECK(std::isfinite(timeout.count()) && timeout.count() > 0, ArgumentError, kOp,
                 "timeout expected a positive number of seconds, got ", timeout.count());
  if (s.size == 1) return;
  // In order with the collectives queued before it, like a barrier.
  s.submit(
       [&] {
         if (s.rank == 0)
           rank0(s, timeout, wait_all_ranks);
         else
           other_rank(s, timeout);
       },
       false)
      .wait();
}

}  // namespace scatterx::dist

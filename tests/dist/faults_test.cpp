// Faults (dist/dist.h, "Faults"): what a rank sees when a peer straggles,
// when an async collective fails, after a recoverable or unrecoverable
// error, and when a communicator goes away with work in flight. The
// process-level faults (a rank killed with SIGKILL, a process exiting without
// destroying its communicator) run as separate mpirun jobs: see
// fault_scenarios.cpp and fault_scenario.sh.
//
// These tests wait out short timeouts on purpose, so the whole-suite runs
// skip them; ctest runs them in the dist_faults_np* entries
// (SCATTERX_TEST_FAULTS=1).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/internal.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

using namespace std::chrono_literals;
namespace dist = scatterx::dist;

// The timeout of the communicators that time out here, and how much later
// than it the error may come (a loaded CI machine, oversubscribed ranks).
constexpr double kTimeout = 0.5;
constexpr double kSlack = 3.0;

class FaultsTest : public DistTest {
 protected:
  void SetUp() override {
    const char* on = std::getenv("SCATTERX_TEST_FAULTS");
    if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "fault tests run with SCATTERX_TEST_FAULTS=1";
  }

  // A fresh communicator over the world with the short timeout and `checks`.
  Communicator dedicated(bool checks = false) const {
    Communicator c = comm().split(0, rank());
    c.set_timeout(std::chrono::duration<double>(kTimeout));
    c.set_checks(checks);
    return c;
  }

  int straggler() const { return ws() - 1; }

  // Every collective that needs the straggler's data, on its own communicator
  // (a timeout makes it unusable). Each entry runs the collective on c.
  std::vector<std::pair<std::string, std::function<void(const Communicator&)>>> needing_everyone() const {
    const int n = ws();
    return {
        {"all_reduce",
         [](const Communicator& c) {
           Tensor t = Tensor::zeros({1 << 18}, DType::Float32);
           dist::all_reduce(t, ReduceOp::Sum, c);
         }},
        {"all_gather_into_tensor",
         [n](const Communicator& c) {
           Tensor in = Tensor::zeros({64}, DType::Int32);
           Tensor out = Tensor::zeros({n * 64}, DType::Int32);
           dist::all_gather_into_tensor(out, in, c);
         }},
        {"reduce_scatter_tensor",
         [n](const Communicator& c) {
           Tensor in = Tensor::zeros({n * 4096}, DType::Float64);
           Tensor out = Tensor::zeros({4096}, DType::Float64);
           dist::reduce_scatter_tensor(out, in, ReduceOp::Max, c);
         }},
        {"all_to_all_single",
         [n](const Communicator& c) {
           Tensor in = Tensor::zeros({n * 8}, DType::Int64);
           Tensor out = Tensor::zeros({n * 8}, DType::Int64);
           dist::all_to_all_single(out, in, {}, {}, c);
         }},
        {"broadcast",
         [n](const Communicator& c) {
           Tensor t = Tensor::zeros({100}, DType::Float32);
           dist::broadcast(t, n - 1, c);  // from the straggler
         }},
        {"barrier", [](const Communicator& c) { dist::barrier(c); }},
    };
  }
};

// A rank that never joins: every waiting rank raises TimeoutError within the
// timeout plus a small slack, naming the collective and the ranks it waited
// for; the straggler itself was never told and goes on. An all_reduce and an
// all-to-all run once on every rank first, so that the shared-memory segment
// and the single-copy verdict are settled (their setup is itself collective
// and can only say it waited for "every rank") and the straggler is missed
// in the data paths themselves.
TEST_F(FaultsTest, StragglerTimesOutEveryWaitingRank) {
  SXD_REQUIRE_WS2();
  for (const auto& [name, run] : needing_everyone()) {
    Communicator c = dedicated();
    expect_all_reduce_works(c);
    {
      Tensor in = Tensor::zeros({ws()}, DType::Int64);
      Tensor out = Tensor::zeros({ws()}, DType::Int64);
      dist::all_to_all_single(out, in, {}, {}, c);
    }
    if (rank() == straggler()) continue;
    const auto start = std::chrono::steady_clock::now();
    const std::string msg = error_message<TimeoutError>([&c, &call = run] { call(c); });
    const double elapsed = seconds_since(start);
    EXPECT_GE(elapsed, 0.9 * kTimeout) << name << " raised before the timeout";
    EXPECT_LT(elapsed, kTimeout + kSlack) << name << " raised long after the timeout";
    EXPECT_TRUE(mentions(msg, {name, "timed out", "waiting for", "unusable"})) << msg;
    bool names_a_peer = false;
    for (int r = 0; r < ws(); ++r) names_a_peer = names_a_peer || (r != rank() && names_rank(msg, r));
    EXPECT_TRUE(names_a_peer || msg.find("every rank") != std::string::npos ||
                msg.find("other ranks") != std::string::npos)
        << "the message names no rank it waited for: " << msg;
    // an all-to-all knows whose messages did not come: the straggler's
    if (name.rfind("all_to_all", 0) == 0) {
      EXPECT_TRUE(names_rank(msg, straggler())) << msg;
    }
  }
  expect_all_reduce_works(comm());  // the world was never involved
}

// all_reduce's shared-memory latency path waits for call numbers, not
// messages: a rank that does not come still makes the others raise
// TimeoutError within the timeout, naming that rank (the segment is set up
// by a first call that every rank makes).
TEST_F(FaultsTest, StragglerTimesOutTheSharedMemoryLatencyPath) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated();
  expect_all_reduce_works(c, 16);
  if (c.shared_memory_path() != std::optional<bool>(true)) GTEST_SKIP() << "the ranks share no segment";
  if (rank() != straggler()) {
    Tensor t = Tensor::zeros({16}, DType::Float32);
    const auto start = std::chrono::steady_clock::now();
    const std::string msg = error_message<TimeoutError>([&] { dist::all_reduce(t, ReduceOp::Sum, c); });
    EXPECT_GE(seconds_since(start), 0.9 * kTimeout);
    EXPECT_LT(seconds_since(start), kTimeout + kSlack);
    EXPECT_TRUE(mentions(msg, {"all_reduce", "timed out", "shared-memory", "call numbers"})) << msg;
    EXPECT_TRUE(names_rank(msg, straggler())) << msg;
  }
  expect_all_reduce_works(comm());
}

// The same in the single-copy path (dist/single_copy.h): a large all-gather
// first settles the path on every rank, then the straggler skips a large
// collective; every waiting rank names it (whose record or "done" never
// came) instead of hanging, and none reads from it.
TEST_F(FaultsTest, StragglerTimesOutInTheSingleCopyPath) {
  SXD_REQUIRE_WS2();
  const int n = ws();
  const int64_t big = int64_t{1} << 18;  // int32: 1 MiB per message
  const std::vector<std::pair<std::string, std::function<void(const Communicator&)>>> large = {
      {"all_gather_into_tensor",
       [&](const Communicator& c) {
         Tensor in = Tensor::zeros({big}, DType::Int32);
         Tensor out = Tensor::zeros({n * big}, DType::Int32);
         dist::all_gather_into_tensor(out, in, c);
       }},
      {"all_to_all_single",
       [&](const Communicator& c) {
         Tensor in = Tensor::zeros({n * big}, DType::Int32);
         Tensor out = Tensor::zeros({n * big}, DType::Int32);
         dist::all_to_all_single(out, in, {}, {}, c);
       }},
      {"broadcast",
       [&](const Communicator& c) {
         Tensor t = Tensor::zeros({big}, DType::Int32);
         dist::broadcast(t, n - 1, c);  // from the straggler
       }},
  };
  for (const auto& [name, run] : large) {
    Communicator c = dedicated();
    Tensor in = Tensor::zeros({big}, DType::Int32);
    Tensor out = Tensor::zeros({n * big}, DType::Int32);
    dist::all_gather_into_tensor(out, in, c);
    if (rank() == straggler()) continue;
    const auto start = std::chrono::steady_clock::now();
    const std::string msg = error_message<TimeoutError>([&c, &call = run] { call(c); });
    const double elapsed = seconds_since(start);
    EXPECT_GE(elapsed, 0.9 * kTimeout) << name << " raised before the timeout";
    EXPECT_LT(elapsed, kTimeout + kSlack) << name << " raised long after the timeout";
    EXPECT_TRUE(mentions(msg, {name, "timed out", "waiting for", "unusable"})) << msg;
    EXPECT_TRUE(names_rank(msg, straggler())) << msg;
  }
  expect_all_reduce_works(comm());
}

// After a timeout the communicator is unusable on the ranks that raised: the
// next call of any kind raises at once (no waiting), naming the first
// failure, instead of hanging or timing out again.
TEST_F(FaultsTest, UnusableAfterTimeoutRaisesAtOnce) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated();
  if (rank() != straggler()) {
    Tensor t = Tensor::zeros({16}, DType::Float32);
    error_message<TimeoutError>([&] { dist::all_reduce(t, ReduceOp::Sum, c); });
    const std::vector<std::pair<std::string, std::function<void()>>> calls = {
        {"all_reduce", [&] { dist::all_reduce(t, ReduceOp::Sum, c); }},
        {"all_reduce_async", [&] { dist::all_reduce_async(t, ReduceOp::Sum, c).wait(); }},
        {"broadcast", [&] { dist::broadcast(t, 0, c); }},
        {"barrier", [&] { dist::barrier(c); }},
        {"split", [&] { c.split(0, 0); }},
        {"isend", [&] { dist::isend(t, (rank() + 1) % ws(), c).wait(); }},
        {"irecv", [&] { dist::irecv(t, dist::kAnySource, c).wait(); }},
        {"monitored_barrier", [&] { dist::monitored_barrier(c, 1s); }},
    };
    for (const auto& [name, call] : calls) {
      const auto start = std::chrono::steady_clock::now();
      const std::string msg = error_message<scatterx::Error>(call);
      EXPECT_LT(seconds_since(start), 0.4) << name << " did not raise at once (the timeout is 0.5 s)";
      EXPECT_TRUE(mentions(msg, {"unusable", "all_reduce", "timed out"})) << name << ": " << msg;
    }
  }
  expect_all_reduce_works(comm());
  expect_all_reduce_works(dedicated());  // a new communicator works
}

// Argument errors, cross-rank mismatches (sync and async) and a local error
// on one rank only are recoverable: nothing moved, and the same
// communicator then runs correct collectives of every kind.
TEST_F(FaultsTest, UsableAfterRecoverableErrors) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  c.set_timeout(20s);  // a hang would show as TimeoutError, not pass
  Tensor f = Tensor::zeros({4}, DType::Float32);
  Tensor z = Tensor::zeros({4}, DType::Complex64);
  expect_local_error([&] { dist::all_reduce(z, ReduceOp::Max, c); });
  expect_local_error([&] { dist::broadcast(f, ws(), c); });
  expect_local_error([&] { dist::isend(f, ws() + 3, c); });
  Tensor uneven = Tensor::zeros({rank() == 0 ? 5 : 4}, DType::Float32);
  error_message<MismatchError>([&] { dist::all_reduce(uneven, ReduceOp::Sum, c); });
  error_message<MismatchError>([&] { dist::all_reduce_async(uneven, ReduceOp::Sum, c).wait(); });
  Tensor out = Tensor::zeros({ws() * 4}, rank() == 1 ? DType::Float64 : DType::Float32);
  try {
    dist::all_gather_into_tensor(out, f, c);
    ADD_FAILURE() << "a dtype error on rank 1 raised nothing here";
  } catch (const scatterx::Error& e) {
    EXPECT_EQ(dynamic_cast<const TimeoutError*>(&e), nullptr) << e.what();
  }
  // every kind still works, with the checks on and off
  for (bool checks : {true, false}) {
    c.set_checks(checks);
    expect_all_reduce_works(c, 1 << 16);
    Tensor in = make({3}, DType::Int64, [&](int64_t i) { return plain_value(DType::Int64, rank(), i); });
    Tensor gathered = Tensor::zeros({ws() * 3}, DType::Int64);
    dist::all_gather_into_tensor(gathered, in, c);
    EXPECT_TRUE(holds(gathered, [&](int64_t i) { return plain_value(DType::Int64, static_cast<int>(i / 3), i % 3); }));
    Tensor b = make({5}, DType::Int16, [&](int64_t i) { return plain_value(DType::Int16, rank(), i); });
    dist::broadcast(b, ws() - 1, c);
    EXPECT_TRUE(holds(b, [&](int64_t i) { return plain_value(DType::Int16, ws() - 1, i); }));
    Tensor a_in = make({ws()}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(rank() * 100 + i), 0}; });
    Tensor a_out = Tensor::zeros({ws()}, DType::Int32);
    dist::all_to_all_single(a_out, a_in, {}, {}, c);
    EXPECT_TRUE(holds(a_out, [&](int64_t i) { return V{static_cast<double>(i * 100 + rank()), 0}; }));
  }
}

// An error that arises inside an async collective (here a mismatch found by
// the metadata exchange) surfaces at wait() on every rank, and neither hangs
// the others nor disturbs the collectives queued before and after it.
TEST_F(FaultsTest, AsyncErrorSurfacesAtWait) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  c.set_timeout(20s);
  const auto input = [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank(), i); };
  const auto expected = [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws()), i); };
  Tensor before = make({1 << 16}, DType::Float32, input);
  Tensor bad = Tensor::zeros({rank() == straggler() ? 7 : 6}, DType::Float32);
  Tensor after = make({1 << 16}, DType::Float32, input);
  const auto start = std::chrono::steady_clock::now();
  Work w0 = dist::all_reduce_async(before, ReduceOp::Sum, c);
  Work w1;
  EXPECT_NO_THROW(w1 = dist::all_reduce_async(bad, ReduceOp::Sum, c)) << "raised at the call, not at wait()";
  Work w2 = dist::all_reduce_async(after, ReduceOp::Sum, c);
  const std::string msg = error_message<MismatchError>([&] { w1.wait(); });
  EXPECT_TRUE(mentions(msg, {"all_reduce"}));
  EXPECT_TRUE(names_rank(msg, straggler())) << msg;
  EXPECT_TRUE(w1.is_completed());
  w0.wait();
  w2.wait();
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_TRUE(holds(before, expected));
  EXPECT_TRUE(holds(after, expected));
}

// The messages a rank sent before it timed out (here the shared-memory
// setup's: the first call on a fresh communicator) reach the ranks that never
// joined, which never receive them: they drop them when they destroy the
// communicator. Freed with them, the messages could reach a later
// communicator of those ranks alone that gets the same MPI context id (the
// waiting rank holds the old one, they do not) and take the place of a real
// message there: a hang, once, in CI.
TEST_F(FaultsTest, StragglersDropTheMessagesTheyNeverReceived) {
  SXD_REQUIRE_WS2();
  const bool waiter = rank() == 0;
  const int64_t before = dist::messages_dropped_at_destruction();
  {
    Communicator c = dedicated();
    if (waiter) {
      Tensor t = Tensor::zeros({4}, DType::Float32);
      error_message<TimeoutError>([&] { dist::all_reduce(t, ReduceOp::Sum, c); });
    }
    expect_all_reduce_works(comm());  // every rank is past the timeout
  }
  if (!waiter) {
    EXPECT_GE(dist::messages_dropped_at_destruction() - before, 1) << "rank 0's setup message";
  }
  // Communicators made by the stragglers alone, which may reuse the old id.
  Communicator stragglers = comm().split(waiter ? -1 : 0, rank());
  if (waiter) return;
  for (int k = 0; k < 3; ++k) {
    Communicator sub = stragglers.split(0, rank());
    Tensor t = make({4}, DType::Float32, [](int64_t) { return V{1, 0}; });
    dist::all_reduce(t, ReduceOp::Sum, sub);
    EXPECT_TRUE(holds(t, [&](int64_t) { return V{static_cast<double>(ws() - 1), 0}; })) << "communicator " << k;
  }
}

// The other order: the rank that skips the collective destroys the
// communicator at once, before its peer's first messages on it (the small
// all_reduce's shared-memory setup) arrive, so no drain at destruction can
// see them. Open MPI gives the freed context id to the skipper's next
// communicators; a message that then arrives for it waits there as if sent
// on the new one, and from a rank the new one lacks it crashed
// MPI_Comm_dup (mca_pml_ob1_add_comm, the sanitizer build). The skipper's
// communicators of one rank each take the lowest free ids, the freed ones
// among them.
TEST_F(FaultsTest, LateMessagesToADestroyedCommunicatorReachNoLaterOne) {
  SXD_REQUIRE_WS2();
  const bool skipper = rank() == 0;
  {
    Communicator c = dedicated();
    if (!skipper) {
      Tensor t = Tensor::zeros({4}, DType::Float32);
      error_message<TimeoutError>([&] { dist::all_reduce(t, ReduceOp::Sum, c); });
    }
  }
  expect_all_reduce_works(comm());  // every rank is past the timeout
  for (int k = 0; k < 4; ++k) {
    Communicator alone = comm().split(rank(), 0);
    ASSERT_EQ(alone.size(), 1);
    Tensor t = make({4}, DType::Float32, [](int64_t) { return V{2, 0}; });
    dist::all_reduce(t, ReduceOp::Sum, alone);
    EXPECT_TRUE(holds(t, [](int64_t) { return V{2, 0}; })) << "communicator " << k;
  }
  expect_all_reduce_works(comm());
}

// A communicator destroyed with work in flight: its queued collectives still
// run (the Works keep it alive) and complete correctly; with the Works
// dropped too, the queue drains and the progress thread ends by itself.
TEST_F(FaultsTest, DestroyedWithWorkInFlight) {
  const auto input = [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank(), i); };
  const auto expected = [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws()), i); };
  const int64_t before = thread_count();
  std::vector<Tensor> tensors;
  for (int k = 0; k < 8; ++k) tensors.push_back(make({1 << 18}, DType::Float32, input));
  std::vector<Work> works;
  {
    Communicator c = comm().split(0, rank());
    for (int k = 0; k < 4; ++k) works.push_back(dist::all_reduce_async(tensors[k], ReduceOp::Sum, c));
  }
  for (const Work& w : works) w.wait();
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(holds(tensors[k], expected)) << "tensor " << k;
  works.clear();
  {
    Communicator c = comm().split(0, rank());
    for (int k = 4; k < 8; ++k) dist::all_reduce_async(tensors[k], ReduceOp::Sum, c);
  }  // communicator and Works dropped, four collectives queued
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (thread_count() > before && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_LE(thread_count(), before) << "the dropped communicator's progress thread is still alive";
  for (int k = 4; k < 8; ++k) EXPECT_TRUE(holds(tensors[k], expected)) << "tensor " << k;
}

}  // namespace
}  // namespace sxd

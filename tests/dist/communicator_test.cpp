// Communicator: world, split (subgroups, opting out), settings, timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

using namespace std::chrono_literals;
namespace dist = scatterx::dist;

class CommunicatorTest : public DistTest {};

TEST_F(CommunicatorTest, WorldRankAndSize) {
  ASSERT_TRUE(comm().valid());
  EXPECT_GE(ws(), 1);
  EXPECT_GE(rank(), 0);
  EXPECT_LT(rank(), ws());
  // All ranks agree on the size and hold distinct ranks.
  Tensor ranks = Tensor::empty({ws()}, DType::Int32);
  Tensor mine = make({}, DType::Int32, [&](int64_t) { return V{static_cast<double>(rank()), 0}; });
  dist::all_gather_into_tensor(ranks, mine, comm());
  EXPECT_TRUE(holds(ranks, [](int64_t i) { return V{static_cast<double>(i), 0}; }));
}

TEST_F(CommunicatorTest, ReduceOpNames) {
  EXPECT_STREQ(dist::reduce_op_name(ReduceOp::Sum), "sum");
  EXPECT_STREQ(dist::reduce_op_name(ReduceOp::Prod), "product");
  EXPECT_STREQ(dist::reduce_op_name(ReduceOp::Min), "min");
  EXPECT_STREQ(dist::reduce_op_name(ReduceOp::Max), "max");
  EXPECT_STREQ(dist::reduce_op_name(ReduceOp::Avg), "avg");
}

TEST_F(CommunicatorTest, ErrorClassesDeriveFromError) {
  static_assert(std::is_base_of_v<scatterx::Error, MismatchError>, "MismatchError is an Error");
  static_assert(std::is_base_of_v<scatterx::Error, TimeoutError>, "TimeoutError is an Error");
  SUCCEED();
}

TEST_F(CommunicatorTest, DefaultTimeoutComesFromEnvironment) {
  Communicator fresh = Communicator::world();
  double expected = 600.0;
  if (const char* env = std::getenv("SCATTERX_DIST_TIMEOUT")) expected = std::strtod(env, nullptr);
  EXPECT_DOUBLE_EQ(fresh.timeout().count(), expected);
  fresh.set_timeout(2.5s);
  EXPECT_DOUBLE_EQ(fresh.timeout().count(), 2.5);
  fresh.set_timeout(std::chrono::milliseconds(1500));
  EXPECT_DOUBLE_EQ(fresh.timeout().count(), 1.5);
  // the world of the suite is a different communicator: untouched
  EXPECT_DOUBLE_EQ(comm().timeout().count(), expected);
}

TEST_F(CommunicatorTest, ChecksSetting) {
  Communicator fresh = comm().split(0, rank());
  const char* env = std::getenv("SCATTERX_DIST_CHECKS");
  const bool env_on = env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0;
  EXPECT_EQ(fresh.checks(), env_on);
  fresh.set_checks(true);
  EXPECT_TRUE(fresh.checks());
  // a correct collective with the checks on works as without
  Tensor t =
      make({5}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank(), i); });
  dist::all_reduce(t, ReduceOp::Sum, fresh);
  EXPECT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws()), i); }));
  fresh.set_checks(false);
  EXPECT_FALSE(fresh.checks());
}

// ---- CommunicatorOptions -----------------------------------------------------

// all_reduce (sum) and reduce_scatter_tensor (max) of 3000 float32 values on
// `c`, checked against the rank formula: the settings change the path, never
// the result.
void expect_collectives_correct(const Communicator& c, int rank, int ws) {
  Tensor t =
      make({3000}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank, i); });
  dist::all_reduce(t, ReduceOp::Sum, c);
  EXPECT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws), i); }));
  Tensor in = make({ws * 1000}, DType::Float32,
                   [&](int64_t i) { return reduce_input(ReduceOp::Max, DType::Float32, rank, i); });
  Tensor out = Tensor::empty({1000}, DType::Float32);
  dist::reduce_scatter_tensor(out, in, ReduceOp::Max, c);
  EXPECT_TRUE(holds(
      out, [&](int64_t i) { return reduce_expected(ReduceOp::Max, DType::Float32, iota_ranks(ws), rank * 1000 + i); }));
}

TEST_F(CommunicatorTest, OptionsOverrideTheEnvironment) {
  dist::CommunicatorOptions asked;
  asked.timeout = 7.5s;
  asked.checks = true;
  asked.chunk_bytes = 1000;  // many small chunks in the rings
  asked.shared_memory = false;
  Communicator c = Communicator::world(asked);
  const dist::CommunicatorOptions got = c.options();
  EXPECT_DOUBLE_EQ(got.timeout->count(), 7.5);
  EXPECT_EQ(got.checks, std::optional<bool>(true));
  EXPECT_EQ(got.chunk_bytes, std::optional<int64_t>(1000));
  EXPECT_EQ(got.shared_memory, std::optional<bool>(false));
  EXPECT_DOUBLE_EQ(c.timeout().count(), 7.5);
  EXPECT_TRUE(c.checks());
  expect_collectives_correct(c, rank(), ws());
}

TEST_F(CommunicatorTest, UnsetOptionsComeFromTheEnvironment) {
  const dist::CommunicatorOptions got = Communicator::world().options();
  const char* timeout = std::getenv("SCATTERX_DIST_TIMEOUT");
  EXPECT_DOUBLE_EQ(got.timeout->count(), timeout && *timeout ? std::strtod(timeout, nullptr) : 600.0);
  const char* chunk = std::getenv("SCATTERX_DIST_CHUNK_BYTES");
  EXPECT_EQ(*got.chunk_bytes, chunk && *chunk ? std::strtoll(chunk, nullptr, 10) : 524288);
  const char* shm = std::getenv("SCATTERX_DIST_SHM");
  EXPECT_EQ(*got.shared_memory, !(shm && std::strcmp(shm, "0") == 0));
  ASSERT_TRUE(got.checks.has_value());
}

TEST_F(CommunicatorTest, SplitInheritsUnsetOptions) {
  dist::CommunicatorOptions parent_options;
  parent_options.timeout = 9s;
  parent_options.chunk_bytes = 4096;
  parent_options.shared_memory = false;
  Communicator parent = Communicator::world(parent_options);
  Communicator same = parent.split(0, rank());
  EXPECT_DOUBLE_EQ(same.timeout().count(), 9.0);
  EXPECT_EQ(*same.options().chunk_bytes, 4096);
  EXPECT_FALSE(*same.options().shared_memory);
  dist::CommunicatorOptions changed;
  changed.chunk_bytes = 1000;
  changed.shared_memory = true;
  Communicator child = parent.split(0, rank(), changed);
  EXPECT_DOUBLE_EQ(child.timeout().count(), 9.0);
  EXPECT_EQ(*child.options().chunk_bytes, 1000);
  EXPECT_TRUE(*child.options().shared_memory);
  expect_collectives_correct(child, rank(), ws());
}

TEST_F(CommunicatorTest, InvalidOptionRaisesOnEveryRank) {
  // Rank 0 alone asks for an invalid chunk: it raises ArgumentError naming
  // the option and the value; its peers raise MismatchError naming rank 0.
  dist::CommunicatorOptions o;
  o.chunk_bytes = rank() == 0 ? 0 : 4096;
  if (rank() == 0) {
    const std::string msg = expect_local_error([&] { Communicator::world(o); });
    EXPECT_TRUE(mentions(msg, {"Communicator::world", "options.chunk_bytes", "got 0"})) << msg;
  } else {
    const std::string msg = error_message<MismatchError>([&] { Communicator::world(o); });
    EXPECT_TRUE(names_rank(msg, 0)) << msg;
  }
  dist::CommunicatorOptions bad_timeout;
  bad_timeout.timeout = std::chrono::duration<double>(-1);
  const std::string msg = expect_local_error([&] { Communicator::world(bad_timeout); });
  EXPECT_TRUE(mentions(msg, {"options.timeout", "positive", "got -1"})) << msg;
}

TEST_F(CommunicatorTest, BadEnvironmentOnOneRankRaisesOnEveryRank) {
  // The environment is read when a communicator is made; a bad value on
  // rank 0 alone must not leave the others waiting.
  const char* before = std::getenv("SCATTERX_DIST_CHUNK_BYTES");
  const std::string saved = before ? before : "";
  if (rank() == 0) setenv("SCATTERX_DIST_CHUNK_BYTES", "-5", 1);
  std::string msg;
  if (rank() == 0) {
    msg = expect_local_error([&] { Communicator::world(); });
    EXPECT_TRUE(mentions(msg, {"SCATTERX_DIST_CHUNK_BYTES", "-5"})) << msg;
  } else {
    msg = error_message<MismatchError>([&] { Communicator::world(); });
    EXPECT_TRUE(names_rank(msg, 0)) << msg;
  }
  if (before) {
    setenv("SCATTERX_DIST_CHUNK_BYTES", saved.c_str(), 1);
  } else {
    unsetenv("SCATTERX_DIST_CHUNK_BYTES");
  }
  // an explicit option does not read the variable at all
  if (rank() == 0) setenv("SCATTERX_DIST_CHUNK_BYTES", "-5", 1);
  dist::CommunicatorOptions o;
  o.chunk_bytes = 2048;
  EXPECT_EQ(*Communicator::world(o).options().chunk_bytes, 2048);
  if (before) {
    setenv("SCATTERX_DIST_CHUNK_BYTES", saved.c_str(), 1);
  } else {
    unsetenv("SCATTERX_DIST_CHUNK_BYTES");
  }
}

TEST_F(CommunicatorTest, DisagreeingOptionsRaiseOnEveryRank) {
  SXD_REQUIRE_WS2();
  // chunk_bytes, shared_memory and checks decide which messages each rank
  // expects: every rank raises MismatchError naming the option and a rank.
  dist::CommunicatorOptions chunk;
  chunk.chunk_bytes = 1000 + rank();
  std::string msg = error_message<MismatchError>([&] { Communicator::world(chunk); });
  EXPECT_TRUE(mentions(msg, {"Communicator::world", "options.chunk_bytes"})) << msg;
  dist::CommunicatorOptions shm;
  shm.shared_memory = rank() % 2 == 0;
  msg = error_message<MismatchError>([&] { comm().split(0, rank(), shm); });
  EXPECT_TRUE(mentions(msg, {"Communicator::split", "options.shared_memory"})) << msg;
  dist::CommunicatorOptions checks;
  checks.checks = rank() == 0;
  msg = error_message<MismatchError>([&] { Communicator::world(checks); });
  EXPECT_TRUE(mentions(msg, {"options.checks"})) << msg;
  // the timeout may differ
  dist::CommunicatorOptions timeout;
  timeout.timeout = std::chrono::duration<double>(30 + rank());
  EXPECT_DOUBLE_EQ(Communicator::world(timeout).timeout().count(), 30.0 + rank());
}

TEST_F(CommunicatorTest, CopiesShareTheCommunicator) {
  Communicator a = comm().split(0, rank());
  Communicator b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(a.rank(), b.rank());
  EXPECT_EQ(a.size(), b.size());
  // collectives through either copy are one sequence
  Tensor x = make({3}, DType::Int64, [&](int64_t i) { return V{static_cast<double>(rank() * 10 + i), 0}; });
  dist::all_reduce(x, ReduceOp::Max, a);
  dist::broadcast(x, 0, b);
  EXPECT_TRUE(holds(x, [&](int64_t i) { return V{static_cast<double>((ws() - 1) * 10 + i), 0}; }));
}

TEST_F(CommunicatorTest, SplitByParity) {
  Communicator sub = comm().split(rank() % 2, rank());
  ASSERT_TRUE(sub.valid());
  std::vector<int> members;
  for (int r = rank() % 2; r < ws(); r += 2) members.push_back(r);
  EXPECT_EQ(sub.size(), static_cast<int>(members.size()));
  EXPECT_EQ(sub.rank(), rank() / 2);

  // all_reduce over the group only (formulas use the world rank)
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Prod, ReduceOp::Avg}) {
    Tensor t = make({11}, DType::Int32, [&](int64_t i) { return reduce_input(op, DType::Int32, rank(), i); });
    dist::all_reduce(t, op, sub);
    EXPECT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(op, DType::Int32, members, i); })) << op_label(op);
  }
  // all_gather_into_tensor: rows in group-rank order
  Tensor mine = make({2}, DType::Float64, [&](int64_t i) { return plain_value(DType::Float64, rank(), i); });
  Tensor out = Tensor::empty({sub.size() * 2}, DType::Float64);
  dist::all_gather_into_tensor(out, mine, sub);
  EXPECT_TRUE(holds(out, [&](int64_t i) { return plain_value(DType::Float64, members[i / 2], i % 2); }));
  // broadcast from the group's last rank
  Tensor b = make({4}, DType::Int16, [&](int64_t i) { return plain_value(DType::Int16, rank(), i); });
  dist::broadcast(b, sub.size() - 1, sub);
  EXPECT_TRUE(holds(b, [&](int64_t i) { return plain_value(DType::Int16, members.back(), i); }));
  // the world still works and is unaffected
  Tensor w = make({}, DType::Int64, [&](int64_t) { return V{1, 0}; });
  dist::all_reduce(w, ReduceOp::Sum, comm());
  EXPECT_TRUE(holds(w, [&](int64_t) { return V{static_cast<double>(ws()), 0}; }));
}

TEST_F(CommunicatorTest, SplitKeyOrdersRanks) {
  // one group, ordered by descending world rank
  Communicator rev = comm().split(7, -rank());
  ASSERT_TRUE(rev.valid());
  EXPECT_EQ(rev.size(), ws());
  EXPECT_EQ(rev.rank(), ws() - 1 - rank());
  Tensor mine = make({}, DType::Int32, [&](int64_t) { return V{static_cast<double>(rank()), 0}; });
  Tensor out = Tensor::empty({ws()}, DType::Int32);
  dist::all_gather_into_tensor(out, mine, rev);
  EXPECT_TRUE(holds(out, [&](int64_t i) { return V{static_cast<double>(ws() - 1 - i), 0}; }));
  // equal keys: ties by rank
  Communicator same = comm().split(0, 0);
  EXPECT_EQ(same.rank(), rank());
}

TEST_F(CommunicatorTest, SplitWithNegativeColorOptsOut) {
  // rank 0 opts out; the others form a group of ws - 1
  Communicator sub = comm().split(rank() == 0 ? -1 : 3, rank());
  if (rank() == 0) {
    EXPECT_FALSE(sub.valid());
  } else {
    ASSERT_TRUE(sub.valid());
    EXPECT_EQ(sub.size(), ws() - 1);
    EXPECT_EQ(sub.rank(), rank() - 1);
    Tensor t =
        make({3}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank(), i); });
    dist::all_reduce(t, ReduceOp::Sum, sub);
    std::vector<int> members;
    for (int r = 1; r < ws(); ++r) members.push_back(r);
    EXPECT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, members, i); }));
  }
  // everyone opts out
  Communicator none = comm().split(-1, rank());
  EXPECT_FALSE(none.valid());
}

TEST_F(CommunicatorTest, NestedSplit) {
  Communicator a = comm().split(0, rank());
  Communicator b = a.split(a.rank() < 2 ? 0 : 1, a.rank());
  ASSERT_TRUE(b.valid());
  const int group_size = rank() < 2 ? std::min(ws(), 2) : ws() - 2;
  EXPECT_EQ(b.size(), group_size);
  Tensor t = make({}, DType::Int64, [&](int64_t) { return V{1, 0}; });
  dist::all_reduce(t, ReduceOp::Sum, b);
  EXPECT_TRUE(holds(t, [&](int64_t) { return V{static_cast<double>(group_size), 0}; }));
}

TEST_F(CommunicatorTest, ManyCommunicatorsCreatedAndFreed) {
  for (int k = 0; k < 20; ++k) {
    Communicator c = comm().split(k % 2 == 0 ? 0 : rank() % 2, rank());
    Tensor t = make({}, DType::Int32, [&](int64_t) { return V{static_cast<double>(k), 0}; });
    dist::all_reduce(t, ReduceOp::Max, c);
    ASSERT_TRUE(holds(t, [&](int64_t) { return V{static_cast<double>(k), 0}; })) << "iteration " << k;
  }
}

// Rank 0, the root, skips a broadcast that the others call: they wait to
// receive, and get TimeoutError after the dedicated communicator's timeout.
// Their first small broadcast sets up the shared segment, whose messages
// reach the root after it destroyed the communicator: held for the timeout
// (communicator.cpp, retire), it drops them, so no later communicator of the
// root's sees them (with them, the next test's MPI_Comm_dup crashed in the
// sanitizer build); the world goes on.
TEST_F(CommunicatorTest, TimeoutWhenRootSkipsBroadcast) {
  SXD_REQUIRE_WS2();
  {
    Communicator dedicated = comm().split(0, rank());
    dedicated.set_timeout(1s);
    EXPECT_DOUBLE_EQ(dedicated.timeout().count(), 1.0);
    if (rank() != 0) {
      Tensor t = Tensor::zeros({1000}, DType::Float32);
      const auto start = std::chrono::steady_clock::now();
      const std::string msg = error_message<TimeoutError>([&] { dist::broadcast(t, 0, dedicated); });
      const double elapsed = seconds_since(start);
      EXPECT_GE(elapsed, 0.8) << "raised before the timeout";
      EXPECT_LT(elapsed, 15.0) << "raised long after the 1 s timeout";
      EXPECT_TRUE(mentions(msg, {"broadcast"}));
      // the communicator is unusable afterwards: a further collective on it
      // raises rather than hangs (local, so only these ranks call it)
      const auto start2 = std::chrono::steady_clock::now();
      EXPECT_THROW(dist::broadcast(t, 0, dedicated), scatterx::Error);
      EXPECT_LT(seconds_since(start2), 15.0);
    }
  }
  // a fresh communicator and the world work: barrier-like all_reduce
  Tensor t = make({}, DType::Int32, [&](int64_t) { return V{1, 0}; });
  dist::all_reduce(t, ReduceOp::Sum, comm());
  EXPECT_TRUE(holds(t, [&](int64_t) { return V{static_cast<double>(ws()), 0}; }));
  Communicator fresh = comm().split(0, rank());
  Tensor b = make({16}, DType::Float64, [&](int64_t i) { return plain_value(DType::Float64, rank(), i); });
  dist::broadcast(b, 0, fresh);
  EXPECT_TRUE(holds(b, [&](int64_t i) { return plain_value(DType::Float64, 0, i); }));
}

// As above with the async form: the error surfaces from wait().
TEST_F(CommunicatorTest, TimeoutSurfacesFromWait) {
  SXD_REQUIRE_WS2();
  {
    Communicator dedicated = comm().split(0, rank());
    dedicated.set_timeout(1s);
    if (rank() != 0) {
      Tensor t = Tensor::zeros({7}, DType::Int64);
      const auto start = std::chrono::steady_clock::now();
      Work w;
      try {
        w = dist::broadcast_async(t, 0, dedicated);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "broadcast_async raised at the call: " << e.what();
      }
      error_message<TimeoutError>([&] { w.wait(); });
      EXPECT_TRUE(w.is_completed());
      EXPECT_LT(seconds_since(start), 15.0);
    }
  }
  Tensor t = make({}, DType::Int32, [&](int64_t) { return V{2, 0}; });
  dist::all_reduce(t, ReduceOp::Sum, comm());
  EXPECT_TRUE(holds(t, [&](int64_t) { return V{2.0 * ws(), 0}; }));
}

}  // namespace
}  // namespace sxd

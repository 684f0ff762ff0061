// The small-message paths: all_reduce's algorithms forced one by one (dist/latency_all_reduce.h):
// the shared-memory latency path, recursive doubling and the reduce-scatter
// + all-gather, each on a communicator made with its own
// SCATTERX_DIST_ALLREDUCE_SMALL_BYTES and shared_memory. Every reduce op
// and dtype at sizes around the switch point against the closed form
// (tests/dist/dist_test_util.h), results bit-identical on every rank for
// float sums whose order of addition matters, the async form, and a
// mismatched threshold rejected when the communicator is made. The small
// all-gathers and broadcasts share the segment's slots and call numbers with
// the all-reduce (shm_small_*, dist/shm_transport.h): every kind interleaved,
// sync and async, around the switch point; ranks in different calls (size,
// dtype, reduce op, collective) raise MismatchError on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/runtime/knobs.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

// The switch point of the test communicators: 4 KiB.
constexpr int64_t kSmallBytes = 4096;

enum class Algo { SharedMemory, RecursiveDoubling, Ring };

std::string algo_label(Algo a) {
  switch (a) {
    case Algo::SharedMemory:
      return "SharedMemory";
    case Algo::RecursiveDoubling:
      return "RecursiveDoubling";
    case Algo::Ring:
      return "Ring";
  }
  return "?";
}

// A communicator over the world whose all_reduce of fewer than `small` bytes
// takes the latency path (through the segment when `shm`).
Communicator make_comm(int64_t small, bool shm) {
  // The variable is read when the communicator is made; restored even when
  // making it raises.
  struct ScopedThreshold {
    const char* name = "SCATTERX_DIST_ALLREDUCE_SMALL_BYTES";
    const char* old = std::getenv(name);
    std::string saved = old ? old : "";
    explicit ScopedThreshold(int64_t v) { setenv(name, std::to_string(v).c_str(), 1); }
    ~ScopedThreshold() { old ? setenv(name, saved.c_str(), 1) : unsetenv(name); }
  } threshold(small);
  dist::CommunicatorOptions options;
  options.shared_memory = shm;
  return Communicator::world(options);
}

Communicator comm_for(Algo a) {
  switch (a) {
    case Algo::SharedMemory:
      return make_comm(kSmallBytes, true);
    case Algo::RecursiveDoubling:
      return make_comm(kSmallBytes, false);
    case Algo::Ring:
      return make_comm(0, true);
  }
  return make_comm(0, true);
}

class LatencyAllReduceTest : public DistTest, public ::testing::WithParamInterface<Algo> {
 protected:
  Algo algo() const { return GetParam(); }
};

// Sizes around the switch point (in elements of the dtype), 0 and 1.
std::vector<int64_t> sizes_around(int64_t element_size) {
  const int64_t at = kSmallBytes / element_size;
  return {0, 1, 3, at - 1, at, at + 1, 3 * at + 5};
}

TEST_P(LatencyAllReduceTest, EveryOpAndDtypeAroundTheSwitchPoint) {
  const Communicator c = comm_for(algo());
  const int r = rank();
  const std::vector<int> ranks = iota_ranks(ws());
  for (DType dtype : test_dtypes()) {
    for (ReduceOp op : all_reduce_ops()) {
      if (!reduce_supported(op, dtype)) continue;
      for (int64_t n : sizes_around(scatterx::element_size(dtype))) {
        Tensor t = make({n}, dtype, [&](int64_t i) { return reduce_input(op, dtype, r, i); });
        dist::all_reduce(t, op, c);
        ASSERT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(op, dtype, ranks, i); }))
            << algo_label(algo()) << " " << sxt::dtype_label(dtype) << " " << op_label(op) << " " << n << " elements";
      }
    }
  }
  // (The emulated device paths take the device's route, not the segment.)
  const bool emulated = scatterx::detail::knob_choice(scatterx::detail::Knob::DistEmulateDevice) != "off";
  if (ws() > 1 && algo() == Algo::SharedMemory && !emulated) {
    EXPECT_EQ(c.shared_memory_path(), std::optional<bool>(true)) << "the ranks of this suite share a host";
  }
}

// Float sums of values of very different magnitudes: the order of the
// additions shows in the last bits, so equal bits on every rank means every
// rank folded in the same order. Also the async form and barrier().
TEST_P(LatencyAllReduceTest, BitIdenticalOnEveryRank) {
  const Communicator c = comm_for(algo());
  const int r = rank();
  for (int64_t n : sizes_around(4)) {
    auto value = [&](int64_t i) {
      return V{std::ldexp(1.0 + std::sin(static_cast<double>(i * 7 + r)), (r * 13) % 40), 0};
    };
    Tensor sync = make({n}, DType::Float32, value);
    Tensor async = make({n}, DType::Float32, value);
    dist::all_reduce(sync, ReduceOp::Sum, c);
    dist::all_reduce_async(async, ReduceOp::Sum, c).wait();
    dist::barrier(c);
    const size_t bytes = static_cast<size_t>(n) * 4;
    EXPECT_EQ(std::memcmp(sync.data(), async.data(), bytes), 0) << n << " elements: async differs from sync";
    std::vector<char> first(sync.data() == nullptr ? 0 : bytes);
    if (bytes > 0) std::memcpy(first.data(), sync.data(), bytes);
    MPI_Bcast(first.data(), static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
    EXPECT_TRUE(bytes == 0 || std::memcmp(first.data(), sync.data(), bytes) == 0)
        << algo_label(algo()) << " " << n << " elements: rank " << r << "'s sum differs from rank 0's";
  }
}

// Several calls in flight at once (async), each checked: the two slots of
// the shared-memory path alternate between consecutive calls.
TEST_P(LatencyAllReduceTest, ManyAsyncCallsInFlight) {
  const Communicator c = comm_for(algo());
  const int r = rank();
  const std::vector<int> ranks = iota_ranks(ws());
  std::vector<Tensor> ts;
  std::vector<Work> works;
  for (int k = 0; k < 12; ++k) {
    ts.push_back(
        make({17 + k}, DType::Int64, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Int64, r, i + k); }));
    works.push_back(dist::all_reduce_async(ts.back(), ReduceOp::Sum, c));
  }
  for (int k = 0; k < 12; ++k) {
    works[static_cast<size_t>(k)].wait();
    EXPECT_TRUE(holds(ts[static_cast<size_t>(k)],
                      [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Int64, ranks, i + k); }))
        << "call " << k;
  }
}

// Small all-reduces, all-gathers (into a tensor, into a list, async) and
// broadcasts from every root, interleaved: every call of every kind advances
// the slots' call number alike on every rank, so each reads what its peers
// wrote for that very call. Blocks on both sides of the switch point.
TEST_P(LatencyAllReduceTest, SmallCallsOfEveryKindInterleaved) {
  const Communicator c = comm_for(algo());
  const int r = rank();
  const int w = ws();
  const std::vector<int> ranks = iota_ranks(w);
  const int64_t at = kSmallBytes / 4;  // int32 / float32 elements at the switch point
  auto block_value = [](int q, int64_t i, int k) { return V{static_cast<double>(q * 1000 + i + k), 0}; };
  for (int k = 0; k < 60; ++k) {
    const int64_t n = k % 10 == 9 ? at + (k / 10) % 2 : 1 + k % 7;
    const std::string trace = algo_label(algo()) + " call " + std::to_string(k) + ", " + std::to_string(n);
    switch (k % 4) {
      case 0: {
        Tensor t = make({n}, DType::Int64, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Int64, r, i); });
        dist::all_reduce(t, ReduceOp::Sum, c);
        ASSERT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Int64, ranks, i); }))
            << trace;
        break;
      }
      case 1: {
        Tensor in = make({n}, DType::Int32, [&](int64_t i) { return block_value(r, i, k); });
        Tensor out = make({w * n}, DType::Int32, [](int64_t) { return V{-1, 0}; });
        Tensor async_out = make({w * n}, DType::Int32, [](int64_t) { return V{-1, 0}; });
        Work pending = dist::all_gather_into_tensor_async(async_out, in, c);
        dist::all_gather_into_tensor(out, in, c);
        pending.wait();
        for (const Tensor* o : {&out, &async_out}) {
          ASSERT_TRUE(holds(*o, [&](int64_t i) { return block_value(static_cast<int>(i / n), i % n, k); })) << trace;
        }
        break;
      }
      case 2: {
        const int root = k % w;
        Tensor t = make({n}, DType::Float64, [&](int64_t i) {
          return r == root ? V{static_cast<double>(k * 100 + i), 0} : V{-1, 0};
        });
        dist::broadcast(t, root, c);
        ASSERT_TRUE(holds(t, [&](int64_t i) { return V{static_cast<double>(k * 100 + i), 0}; })) << trace;
        break;
      }
      default: {
        Tensor in = make({n}, DType::Float32, [&](int64_t i) { return block_value(r, i, k); });
        std::vector<Tensor> outs;
        std::vector<scatterx::TensorView> views;
        for (int q = 0; q < w; ++q) outs.push_back(make({n}, DType::Float32, [](int64_t) { return V{-1, 0}; }));
        for (const Tensor& o : outs) views.push_back(o);
        dist::all_gather(views, in, c);
        for (int q = 0; q < w; ++q) {
          ASSERT_TRUE(holds(outs[static_cast<size_t>(q)], [&](int64_t i) { return block_value(q, i, k); }))
              << trace << ", block " << q;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, LatencyAllReduceTest,
                         ::testing::Values(Algo::SharedMemory, Algo::RecursiveDoubling, Algo::Ring),
                         [](const ::testing::TestParamInfo<Algo>& info) { return algo_label(info.param); });

class LatencyThresholdTest : public DistTest {};

// Ranks whose latency-path calls differ, with the argument checks off:
// every SlotCall is compared on arrival, so every rank raises MismatchError
// naming both calls instead of reading the peers' slots as something else:
// another size, another dtype, another reduce op, another collective. The
// call numbers stay in step, so the communicator works afterwards.
TEST_F(LatencyThresholdTest, DifferentCallsRaiseEverywhere) {
  SXD_REQUIRE_WS2();
  if (scatterx::detail::knob_choice(scatterx::detail::Knob::DistEmulateDevice) != "off")
    GTEST_SKIP() << "the emulated device's runs take the device paths";
  dist::CommunicatorOptions options;
  options.checks = false;
  options.shared_memory = true;
  const Communicator c = Communicator::world(options);
  Tensor probe = make({4}, DType::Float32, [&](int64_t) { return V{1}; });
  dist::all_reduce(probe, ReduceOp::Sum, c);
  if (!c.shared_memory_path().value_or(false)) GTEST_SKIP() << "the ranks do not share a segment here";
  const bool first = rank() == 0;
  Tensor f16 = make({16}, DType::Float32, [&](int64_t i) { return V{static_cast<double>(i)}; });
  Tensor f32 = make({32}, DType::Float32, [&](int64_t i) { return V{static_cast<double>(i)}; });
  Tensor i16 = make({16}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(i)}; });
  Tensor gathered = Tensor::empty({16 * ws()}, DType::Float32);
  struct Case {
    const char* what;
    std::function<void()> run;
    std::vector<std::string> words;  // in every rank's message
  };
  const std::vector<Case> cases = {
      {"sizes", [&] { dist::all_reduce(first ? f16 : f32, ReduceOp::Sum, c); }, {"64 bytes", "128 bytes"}},
      {"dtypes", [&] { dist::all_reduce(first ? f16 : i16, ReduceOp::Sum, c); }, {"float32", "int32"}},
      {"reduce ops", [&] { dist::all_reduce(f16, first ? ReduceOp::Sum : ReduceOp::Max, c); }, {"sum", "amax"}},
      {"collectives",
       [&] { first ? dist::all_reduce(f16, ReduceOp::Sum, c) : dist::all_gather_into_tensor(gathered, f16, c); },
       {"all_reduce", "all_gather"}},
  };
  for (const Case& k : cases) {
    const std::string msg = error_message<MismatchError>(k.run);
    EXPECT_TRUE(mentions(msg, {"different collectives", "rank 0: ", "rank 1: "})) << k.what << ": " << msg;
    for (const std::string& word : k.words) EXPECT_NE(msg.find(word), std::string::npos) << k.what << ": " << msg;
    SCOPED_TRACE(std::string(k.what) + ": the all-reduce after the mismatch");
    expect_all_reduce_works(c, 5);
  }
}

// Ranks that disagree on the threshold would take different paths: making
// the communicator raises MismatchError instead.
TEST_F(LatencyThresholdTest, MustAgreeAcrossRanks) {
  SXD_REQUIRE_WS2();
  const std::string msg = error_message<MismatchError>([&] { make_comm(rank() == 0 ? 1024 : 2048, true); });
  EXPECT_NE(msg.find("SCATTERX_DIST_ALLREDUCE_SMALL_BYTES"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sxd

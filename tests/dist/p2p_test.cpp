// Point-to-point messages (send, recv, isend, irecv, batch_isend_irecv) and
// monitored_barrier. Values come from plain_value(dtype, sender, i), so a
// receiver knows exactly what each sender's message holds. At one rank the
// exchanges go to this rank itself through isend/irecv (which allow it);
// tests that need a second rank skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

using namespace std::chrono_literals;
namespace dist = scatterx::dist;
using dist::P2POp;

class P2PTest : public DistTest {
 protected:
  int next() const { return (rank() + 1) % ws(); }
  int prev() const { return (rank() + ws() - 1) % ws(); }
  // The message `sender` sends in a test: plain values shifted by `salt`.
  static std::function<V(int64_t)> from(DType dtype, int sender, int64_t salt = 0) {
    return [=](int64_t i) { return plain_value(dtype, sender, i + salt); };
  }
};

TEST_F(P2PTest, RingExchangeEveryDType) {
  for (DType dtype : test_dtypes()) {
    SCOPED_TRACE(scatterx::dtype_name(dtype));
    Tensor out = make({3, 5}, dtype, from(dtype, rank()));
    Tensor in = Tensor::zeros({3, 5}, dtype);
    Work r = dist::irecv(in, prev(), comm());
    Work s = dist::isend(out, next(), comm());
    s.wait();
    r.wait();
    EXPECT_TRUE(holds(in, from(dtype, prev())));
    EXPECT_EQ(r.source_rank(), prev());
    EXPECT_TRUE(r.is_completed());
    EXPECT_TRUE(s.is_completed());
  }
}

TEST_F(P2PTest, BlockingSendRecvRing) {
  SXD_REQUIRE_WS2();
  const DType dtype = DType::Int64;
  Tensor out = make({100}, dtype, from(dtype, rank()));
  Tensor in = Tensor::zeros({100}, dtype);
  // Even ranks send first, odd ranks receive first: no rank waits on a rank
  // that waits on it (an odd world's last even rank sends to rank 0, which
  // has already sent).
  if (rank() % 2 == 0) {
    dist::send(out, next(), comm());
    EXPECT_EQ(dist::recv(in, prev(), comm()), prev());
  } else {
    EXPECT_EQ(dist::recv(in, prev(), comm()), prev());
    dist::send(out, next(), comm());
  }
  EXPECT_TRUE(holds(in, from(dtype, prev())));
}

TEST_F(P2PTest, AnySourceReturnsTheSender) {
  SXD_REQUIRE_WS2();
  const DType dtype = DType::Float32;
  if (rank() == 0) {
    std::set<int> senders;
    for (int k = 1; k < ws(); ++k) {
      Tensor in = Tensor::zeros({64}, dtype);
      const int sender = k % 2 == 1 ? dist::recv(in, dist::kAnySource, comm(), 3)
                                    : dist::irecv(in, dist::kAnySource, comm(), 3).source_rank();
      ASSERT_GE(sender, 1);
      ASSERT_LT(sender, ws());
      EXPECT_TRUE(holds(in, from(dtype, sender))) << "from rank " << sender;
      senders.insert(sender);
    }
    EXPECT_EQ(senders.size(), static_cast<size_t>(ws() - 1));
  } else {
    dist::send(make({64}, dtype, from(dtype, rank())), 0, comm(), 3);
  }
}

TEST_F(P2PTest, TagsMatchOutOfOrder) {
  const DType dtype = DType::Int32;
  Tensor one = make({8}, dtype, from(dtype, rank(), 100));
  Tensor two = make({8}, dtype, from(dtype, rank(), 200));
  Work s1 = dist::isend(one, next(), comm(), 1);
  Work s2 = dist::isend(two, next(), comm(), 2);
  Tensor got2 = Tensor::zeros({8}, dtype);
  Tensor got1 = Tensor::zeros({8}, dtype);
  Work r2 = dist::irecv(got2, prev(), comm(), 2);
  Work r1 = dist::irecv(got1, prev(), comm(), 1);
  r2.wait();
  r1.wait();
  s1.wait();
  s2.wait();
  EXPECT_TRUE(holds(got2, from(dtype, prev(), 200)));
  EXPECT_TRUE(holds(got1, from(dtype, prev(), 100)));
}

TEST_F(P2PTest, NonContiguousViews) {
  const Layout layouts[] = {Layout::Transposed, Layout::Strided, Layout::Flipped, Layout::Contiguous};
  for (DType dtype : {DType::Float64, DType::Complex64, DType::Bool, DType::BFloat16}) {
    for (Layout send_layout : layouts) {
      for (Layout recv_layout : layouts) {
        SCOPED_TRACE(std::string(scatterx::dtype_name(dtype)) + " send " + layout_label(send_layout) + " recv " +
                     layout_label(recv_layout));
        Buf out = make_buf({4, 6}, dtype, send_layout);
        fill(out.view, from(dtype, rank()));
        Buf in = make_buf({4, 6}, dtype, recv_layout);
        in.take_snapshot();
        Work r = dist::irecv(in.view, prev(), comm(), 9);
        dist::isend(out.view, next(), comm(), 9).wait();
        r.wait();
        EXPECT_TRUE(holds(in.view, from(dtype, prev())));
        EXPECT_TRUE(in.unchanged_outside_view());
      }
    }
  }
}

TEST_F(P2PTest, EmptyMessages) {
  for (const Shape& shape : {Shape{0}, Shape{3, 0}}) {
    Tensor out = Tensor::empty(shape, DType::Float32);
    Tensor in = Tensor::empty(shape, DType::Float32);
    Work r = dist::irecv(in, prev(), comm(), 4);
    dist::isend(out, next(), comm(), 4).wait();
    r.wait();
    EXPECT_EQ(r.source_rank(), prev());
  }
}

TEST_F(P2PTest, BatchRingBothWays) {
  const DType dtype = DType::Float16;
  Tensor to_next = make({10}, dtype, from(dtype, rank(), 1));
  Tensor to_prev = make({10}, dtype, from(dtype, rank(), 2));
  Tensor from_prev = Tensor::zeros({10}, dtype);
  Tensor from_next = Tensor::zeros({10}, dtype);
  // Receives listed first: the batch posts everything before anyone waits.
  std::vector<P2POp> ops = {{P2POp::Kind::Recv, from_prev, prev(), 0},
                            {P2POp::Kind::Recv, from_next, next(), 0},
                            {P2POp::Kind::Send, to_next, next(), 0},
                            {P2POp::Kind::Send, to_prev, prev(), 0}};
  std::vector<Work> works = dist::batch_isend_irecv(ops, comm());
  ASSERT_EQ(works.size(), 4u);
  for (const Work& w : works) w.wait();
  // (With one or two ranks prev == next: the two messages from that peer
  // match the receives in send order, which gives the same values.)
  EXPECT_TRUE(holds(from_prev, from(dtype, prev(), 1)));
  EXPECT_TRUE(holds(from_next, from(dtype, next(), 2)));
  EXPECT_EQ(works[0].source_rank(), prev());
  EXPECT_THROW(works[2].source_rank(), ArgumentError);
}

TEST_F(P2PTest, ArgumentErrorsPostNothing) {
  Tensor t = Tensor::zeros({4}, DType::Int64);
  std::string msg = error_message<ArgumentError>([&] { dist::isend(t, ws(), comm()); });
  EXPECT_TRUE(mentions(msg, {"isend", "dst", std::to_string(ws())}));
  msg = error_message<ArgumentError>([&] { dist::irecv(t, -2, comm()); });
  EXPECT_TRUE(mentions(msg, {"irecv", "src", "-2"}));
  msg = error_message<ArgumentError>([&] { dist::isend(t, dist::kAnySource, comm()); });
  EXPECT_TRUE(mentions(msg, {"isend", "dst", "-1"}));
  msg = error_message<ArgumentError>([&] { dist::send(t, rank(), comm()); });
  EXPECT_TRUE(mentions(msg, {"send", "dst", "other than this one"}));
  msg = error_message<ArgumentError>([&] { dist::isend(t, next(), comm(), -1); });
  EXPECT_TRUE(mentions(msg, {"isend", "tag", "-1"}));
  Tensor overlapping = Tensor::zeros({1}, DType::Int64);
  const TensorView broadcast_view(overlapping.data(), DType::Int64, {4}, {0});
  msg = error_message<ArgumentError>([&] { dist::irecv(broadcast_view, prev(), comm()); });
  EXPECT_TRUE(mentions(msg, {"irecv", "tensor"}));

  // A batch with one bad op posts none: had its good send gone out, the
  // receive below would match it instead of the second send.
  Tensor first = make({4}, DType::Int64, from(DType::Int64, rank(), 10));
  Tensor second = make({4}, DType::Int64, from(DType::Int64, rank(), 20));
  std::vector<P2POp> bad = {{P2POp::Kind::Send, first, next(), 5}, {P2POp::Kind::Send, first, ws() + 3, 5}};
  msg = error_message<ArgumentError>([&] { dist::batch_isend_irecv(bad, comm()); });
  EXPECT_TRUE(mentions(msg, {"batch_isend_irecv", "ops[1]", "dst", std::to_string(ws() + 3)}));
  harness_barrier();
  Work r = dist::irecv(t, prev(), comm(), 5);
  dist::isend(second, next(), comm(), 5).wait();
  r.wait();
  EXPECT_TRUE(holds(t, from(DType::Int64, prev(), 20)));
}

TEST_F(P2PTest, SizeMismatchRaisesAndLeavesTheCommunicatorUsable) {
  const DType dtype = DType::Int32;
  Tensor four = make({4}, dtype, from(dtype, rank()));
  Tensor three = Tensor::zeros({3}, dtype);
  Tensor five = Tensor::zeros({5}, dtype);
  // A longer message: Open MPI reports the truncation between processes
  // only (its path from a rank to itself truncates silently).
  if (ws() >= 2) {
    Work r = dist::irecv(three, prev(), comm(), 6);
    Work s = dist::isend(four, next(), comm(), 6);
    const std::string msg = error_message<MismatchError>([&] { r.wait(); });
    EXPECT_TRUE(mentions(msg, {"irecv", "12 bytes", "longer", std::to_string(prev())}));
    s.wait();
  }
  Work r = dist::irecv(five, prev(), comm(), 6);
  Work s = dist::isend(four, next(), comm(), 6);
  const std::string msg = error_message<MismatchError>([&] { r.wait(); });
  EXPECT_TRUE(mentions(msg, {"irecv", "20 bytes", "16 bytes"}));
  s.wait();
  Tensor in = Tensor::zeros({4}, dtype);
  Work ok = dist::irecv(in, prev(), comm(), 6);
  dist::isend(four, next(), comm(), 6).wait();
  ok.wait();
  EXPECT_TRUE(holds(in, from(dtype, prev())));
}

TEST_F(P2PTest, DroppedReceiveIsCancelled) {
  const DType dtype = DType::Int16;
  Tensor decoy = Tensor::zeros({6}, dtype);
  { Work dropped = dist::irecv(decoy, prev(), comm(), 7); }
  harness_barrier();  // every rank dropped its receive before anything is sent
  Tensor in = Tensor::zeros({6}, dtype);
  Work r = dist::irecv(in, prev(), comm(), 7);
  dist::isend(make({6}, dtype, from(dtype, rank())), next(), comm(), 7).wait();
  r.wait();
  EXPECT_TRUE(holds(in, from(dtype, prev())));
  EXPECT_TRUE(holds(decoy, [](int64_t) { return V{0, 0}; }));
}

TEST_F(P2PTest, TimeoutNamesThePeerAndBreaksTheCommunicator) {
  // A fresh communicator of every rank (not one per rank: Open MPI may give
  // a communicator made by one rank alone the context id of one a peer still
  // sends on), on which no rank sends.
  Communicator fresh = comm().split(0, rank());
  fresh.set_timeout(300ms);
  Tensor t = Tensor::zeros({4}, DType::Float32);
  Work r = dist::irecv(t, prev(), fresh, 11);
  const std::string msg = error_message<TimeoutError>([&] { r.wait(); });
  EXPECT_TRUE(mentions(msg, {"irecv", "rank " + std::to_string(prev()), "tag 11", "unusable"}));
  const std::string after = error_message<scatterx::Error>([&] { dist::isend(t, next(), fresh); });
  EXPECT_TRUE(mentions(after, {"isend", "unusable"}));
}

TEST_F(P2PTest, MonitoredBarrierPasses) {
  for (int round = 0; round < 3; ++round) dist::monitored_barrier(comm(), 30s, round == 1);
  const std::string msg = expect_local_error([&] { dist::monitored_barrier(comm(), 0s); });
  EXPECT_TRUE(mentions(msg, {"monitored_barrier", "timeout"}));
  dist::monitored_barrier(comm(), 30s);  // still usable
}

// Ranks in `late` sleep past a short timeout before entering; every rank
// raises, naming the late ranks as rank 0 saw them.
void expect_monitored_barrier_failure(const Communicator& comm, const std::vector<int>& late, bool wait_all_ranks,
                                      const std::vector<int>& named) {
  const bool sleeper = std::find(late.begin(), late.end(), comm.rank()) != late.end();
  if (sleeper) std::this_thread::sleep_for(2500ms);
  const std::string msg = error_message<TimeoutError>([&] { dist::monitored_barrier(comm, 1s, wait_all_ranks); });
  std::string ranks;
  for (size_t i = 0; i < named.size(); ++i) ranks += (i ? ", " : "") + std::to_string(named[i]);
  const std::string text =
      (named.size() == 1 ? "Rank " : "Ranks ") + ranks + " failed to pass monitoredBarrier in 1000 ms";
  EXPECT_TRUE(mentions(msg, {"monitored_barrier", text}));
  if (comm.rank() == 0) {
    EXPECT_TRUE(mentions(msg, {"[Rank 0]"}));
  }
  if (sleeper) {
    EXPECT_TRUE(mentions(msg, {"arrived after rank 0 stopped waiting"}));
  }
  const std::string after = error_message<scatterx::Error>([&] { dist::monitored_barrier(comm, 1s); });
  EXPECT_TRUE(mentions(after, {"unusable"}));
}

TEST_F(P2PTest, MonitoredBarrierNamesTheFirstLateRank) {
  SXD_REQUIRE_WS2();
  // A fresh communicator: a failed barrier leaves it unusable.
  const Communicator fresh = comm().split(0, rank());
  std::vector<int> late = {ws() - 1};
  if (ws() >= 3) late.insert(late.begin(), 1);
  expect_monitored_barrier_failure(fresh, late, false, {late.front()});
}

TEST_F(P2PTest, MonitoredBarrierWaitAllRanksNamesEveryLateRank) {
  SXD_REQUIRE_WS2();
  const Communicator fresh = comm().split(0, rank());
  std::vector<int> late = {ws() - 1};
  if (ws() >= 3) late.insert(late.begin(), 1);
  expect_monitored_barrier_failure(fresh, late, true, late);
}

}  // namespace
}  // namespace sxd

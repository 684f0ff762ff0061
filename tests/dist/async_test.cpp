// The *_async forms: several outstanding Work handles on one communicator
// (run in call order), is_completed() after wait(), results as the blocking
// forms, and errors surfacing from wait() (or the call).
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

using namespace std::chrono_literals;
namespace dist = scatterx::dist;

class AsyncTest : public DistTest {};

TEST_F(AsyncTest, SeveralOutstandingThenWait) {
  const DType f32 = DType::Float32;
  // all_reduce
  Tensor ar = make({1000}, f32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, f32, rank(), i); });
  // all_gather_into_tensor
  Tensor ag_in = make({3, 2}, DType::Int64, [&](int64_t i) { return plain_value(DType::Int64, rank(), i); });
  Tensor ag_out = Tensor::zeros({ws() * 3, 2}, DType::Int64);
  // broadcast from the last rank
  Tensor bc = make({17}, DType::Float16, [&](int64_t i) { return plain_value(DType::Float16, rank(), i); });
  // reduce_scatter_tensor
  Tensor rs_in =
      make({ws() * 4}, DType::Int32, [&](int64_t i) { return reduce_input(ReduceOp::Max, DType::Int32, rank(), i); });
  Tensor rs_out = Tensor::zeros({4}, DType::Int32);
  // all_to_all_single, equal splits
  Tensor a2a_in =
      make({ws() * 2}, DType::Complex64, [&](int64_t i) { return plain_value(DType::Complex64, rank(), i); });
  Tensor a2a_out = Tensor::zeros({ws() * 2}, DType::Complex64);
  // all_gather (list)
  Tensor lg_in = make({2}, DType::UInt8, [&](int64_t i) { return plain_value(DType::UInt8, rank(), i); });
  std::vector<Tensor> lg_outs;
  for (int r = 0; r < ws(); ++r) lg_outs.push_back(Tensor::zeros({2}, DType::UInt8));
  std::vector<TensorView> lg_views(lg_outs.begin(), lg_outs.end());
  // reduce_scatter (list)
  std::vector<Tensor> rsl_ins;
  for (int j = 0; j < ws(); ++j) {
    rsl_ins.push_back(make({3}, DType::Float64,
                           [&](int64_t i) { return reduce_input(ReduceOp::Prod, DType::Float64, rank(), j * 3 + i); }));
  }
  std::vector<TensorView> rsl_views(rsl_ins.begin(), rsl_ins.end());
  Tensor rsl_out = Tensor::zeros({3}, DType::Float64);
  // all_to_all (list)
  std::vector<Tensor> al_ins, al_outs;
  for (int p = 0; p < ws(); ++p) {
    al_ins.push_back(
        make({p + 1}, DType::Int8, [&](int64_t i) { return plain_value(DType::Int8, rank(), p * 10 + i); }));
    al_outs.push_back(Tensor::zeros({rank() + 1}, DType::Int8));
  }
  std::vector<TensorView> al_in_views(al_ins.begin(), al_ins.end()), al_out_views(al_outs.begin(), al_outs.end());

  std::vector<Work> works;
  works.push_back(dist::all_reduce_async(ar, ReduceOp::Sum, comm()));
  works.push_back(dist::all_gather_into_tensor_async(ag_out, ag_in, comm()));
  works.push_back(dist::broadcast_async(bc, ws() - 1, comm()));
  works.push_back(dist::reduce_scatter_tensor_async(rs_out, rs_in, ReduceOp::Max, comm()));
  works.push_back(dist::all_to_all_single_async(a2a_out, a2a_in, {}, {}, comm()));
  works.push_back(dist::all_gather_async(lg_views, lg_in, comm()));
  works.push_back(dist::reduce_scatter_async(rsl_out, rsl_views, ReduceOp::Prod, comm()));
  works.push_back(dist::all_to_all_async(al_out_views, al_in_views, comm()));
  // wait in reverse order
  for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();
  for (size_t k = 0; k < works.size(); ++k) EXPECT_TRUE(works[k].is_completed()) << "work " << k;

  const std::vector<int> all = iota_ranks(ws());
  EXPECT_TRUE(holds(ar, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, f32, all, i); })) << "all_reduce";
  EXPECT_TRUE(holds(ag_out, [&](int64_t i) { return plain_value(DType::Int64, static_cast<int>(i / 6), i % 6); }))
      << "all_gather_into_tensor";
  EXPECT_TRUE(holds(bc, [&](int64_t i) { return plain_value(DType::Float16, ws() - 1, i); })) << "broadcast";
  EXPECT_TRUE(holds(rs_out, [&](int64_t i) {
    return reduce_expected(ReduceOp::Max, DType::Int32, all, rank() * 4 + i);
  })) << "reduce_scatter_tensor";
  EXPECT_TRUE(holds(a2a_out, [&](int64_t i) {
    return plain_value(DType::Complex64, static_cast<int>(i / 2), rank() * 2 + i % 2);
  })) << "all_to_all_single";
  for (int r = 0; r < ws(); ++r) {
    EXPECT_TRUE(holds(lg_outs[r], [&](int64_t i) { return plain_value(DType::UInt8, r, i); })) << "all_gather " << r;
  }
  EXPECT_TRUE(holds(rsl_out, [&](int64_t i) {
    return reduce_expected(ReduceOp::Prod, DType::Float64, all, rank() * 3 + i);
  })) << "reduce_scatter";
  for (int q = 0; q < ws(); ++q) {
    EXPECT_TRUE(holds(al_outs[q], [&](int64_t i) { return plain_value(DType::Int8, q, rank() * 10 + i); }))
        << "all_to_all from " << q;
  }
}

// Collectives on one communicator run in call order: two all_reduces of the
// same tensor give ws * (sum), then a broadcast of it.
TEST_F(AsyncTest, RunInCallOrder) {
  Tensor t = make({300}, DType::Int64, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Int64, rank(), i); });
  Work a = dist::all_reduce_async(t, ReduceOp::Sum, comm());
  Work b = dist::all_reduce_async(t, ReduceOp::Sum, comm());
  Work c = dist::broadcast_async(t, 0, comm());
  c.wait();
  EXPECT_TRUE(a.is_completed());
  EXPECT_TRUE(b.is_completed());
  a.wait();
  b.wait();
  EXPECT_TRUE(holds(t, [&](int64_t i) {
    const V s = reduce_expected(ReduceOp::Sum, DType::Int64, iota_ranks(ws()), i);
    return V{s.re * ws(), 0};
  }));
}

// A blocking collective called while async ones are queued runs after them.
TEST_F(AsyncTest, BlockingAfterAsync) {
  Tensor t = make({64}, DType::Float64, [&](int64_t i) { return V{static_cast<double>(rank() + i), 0}; });
  Work w = dist::all_reduce_async(t, ReduceOp::Max, comm());
  Tensor u = make({5}, DType::Int32, [&](int64_t) { return V{1, 0}; });
  dist::all_reduce(u, ReduceOp::Sum, comm());
  EXPECT_TRUE(w.is_completed()) << "a later blocking collective returned before an earlier async one";
  w.wait();
  EXPECT_TRUE(holds(t, [&](int64_t i) { return V{static_cast<double>(ws() - 1 + i), 0}; }));
  EXPECT_TRUE(holds(u, [&](int64_t) { return V{static_cast<double>(ws()), 0}; }));
}

// barrier: no rank leaves before the last one entered, and it runs after the
// async collectives queued before it.
TEST_F(AsyncTest, BarrierWaitsForTheLastRankAndQueuedWork) {
  Tensor t = make({64}, DType::Int32, [&](int64_t) { return V{1, 0}; });
  Work w = dist::all_reduce_async(t, ReduceOp::Sum, comm());
  const auto start = std::chrono::steady_clock::now();
  if (rank() == ws() - 1) std::this_thread::sleep_for(300ms);
  dist::barrier(comm());
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(w.is_completed()) << "barrier returned before a collective queued ahead of it";
  w.wait();
  EXPECT_TRUE(holds(t, [&](int64_t) { return V{static_cast<double>(ws()), 0}; }));
  EXPECT_GE(waited, 250ms) << "rank " << rank() << " left the barrier before the last rank entered it";
}

// is_completed() becomes true on its own (the progress thread runs the
// collective without a wait()).
TEST_F(AsyncTest, CompletesWithoutWait) {
  Tensor t =
      make({100000}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank(), i); });
  Work w = dist::all_reduce_async(t, ReduceOp::Sum, comm());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!w.is_completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(w.is_completed());
  w.wait();
  EXPECT_TRUE(holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws()), i); }));
}

// Large async all_reduces on two communicators at once (two progress
// threads), waited in either order.
TEST_F(AsyncTest, TwoCommunicatorsConcurrently) {
  Communicator a = comm().split(0, rank());
  Communicator b = comm().split(0, ws() - 1 - rank());
  const int64_t n = 1 << 20;
  Tensor x =
      make({n}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank(), i); });
  Tensor y = make({n}, DType::Int32, [&](int64_t i) { return reduce_input(ReduceOp::Max, DType::Int32, rank(), i); });
  Work wx = dist::all_reduce_async(x, ReduceOp::Sum, a);
  Work wy = dist::all_reduce_async(y, ReduceOp::Max, b);
  if (rank() % 2 == 0) {
    wx.wait();
    wy.wait();
  } else {
    wy.wait();
    wx.wait();
  }
  EXPECT_TRUE(holds(x, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws()), i); }));
  EXPECT_TRUE(holds(y, [&](int64_t i) { return reduce_expected(ReduceOp::Max, DType::Int32, iota_ranks(ws()), i); }));
}

// The progress thread may still hold the finished task (and with it the
// communicator's last reference) when the caller drops its handles right
// after wait(): the communicator must still be torn down, its thread ended.
TEST_F(AsyncTest, DroppedRightAfterWaitReleasesItsThread) {
  const int64_t before = thread_count();
  for (int k = 0; k < 20; ++k) {
    Communicator sub = comm().split(0, rank());
    Tensor t =
        make({4096}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank(), i); });
    dist::all_reduce_async(t, ReduceOp::Sum, sub).wait();
    EXPECT_TRUE(
        holds(t, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws()), i); }));
  }
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (thread_count() > before && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_LE(thread_count(), before) << "progress threads of dropped communicators are still alive";
}

// An async call with a local error (complex max): the error surfaces from
// wait() or from the call; later async collectives on the same
// communicator are unaffected.
TEST_F(AsyncTest, ErrorSurfaces) {
  Tensor before = make({4}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(rank() * 4 + i), 0}; });
  Work w0 = dist::all_reduce_async(before, ReduceOp::Max, comm());
  Tensor z = make({4}, DType::Complex128, [](int64_t i) { return V{1.0 * i, 1.0}; });
  std::string msg;
  bool at_call = false;
  try {
    Work w = dist::all_reduce_async(z, ReduceOp::Max, comm());
    try {
      w.wait();
      ADD_FAILURE() << "complex max raised nothing";
    } catch (const DTypeError& e) {
      msg = e.what();
      EXPECT_TRUE(w.is_completed());
      // waiting again rethrows
      EXPECT_THROW(w.wait(), DTypeError);
    }
  } catch (const DTypeError& e) {
    at_call = true;
    msg = e.what();
  }
  EXPECT_TRUE(mentions(msg, {"all_reduce", "max"})) << (at_call ? "(raised at the call)" : "(raised from wait)");
  Tensor after = make({4}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(rank() + i), 0}; });
  Work w1 = dist::all_reduce_async(after, ReduceOp::Sum, comm());
  w1.wait();
  w0.wait();
  EXPECT_TRUE(holds(before, [&](int64_t i) { return V{static_cast<double>((ws() - 1) * 4 + i), 0}; }));
  EXPECT_TRUE(holds(after, [&](int64_t i) { return V{static_cast<double>(ws() * (ws() - 1) / 2 + ws() * i), 0}; }));
}

// Errors of other kinds through the async forms.
TEST_F(AsyncTest, ArgumentErrorsSurface) {
  auto wait_error = [](auto&& call) -> std::string {
    try {
      call().wait();
    } catch (const ArgumentError& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
      return "";
    }
    ADD_FAILURE() << "threw nothing";
    return "";
  };
  Tensor input = Tensor::zeros({ws() * 2}, DType::Float32);
  Tensor output = Tensor::zeros({ws() * 2 + 1}, DType::Float32);
  std::string msg =
      wait_error([&] { return dist::all_gather_into_tensor_async(output, input.slice(0, 0, 2), comm()); });
  EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "output"}));
  std::vector<int64_t> bad(static_cast<size_t>(ws()), 2);
  bad[0] = 3;
  Tensor a2a_out = Tensor::zeros({ws() * 2}, DType::Float32);
  msg = wait_error([&] { return dist::all_to_all_single_async(a2a_out, input, bad, bad, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "split_sizes"}));
  // still usable
  Tensor t = make({}, DType::Int32, [&](int64_t) { return V{1, 0}; });
  dist::all_reduce_async(t, ReduceOp::Sum, comm()).wait();
  EXPECT_TRUE(holds(t, [&](int64_t) { return V{static_cast<double>(ws()), 0}; }));
}

// Many small async collectives in flight.
TEST_F(AsyncTest, ManyInFlight) {
  const int count = 64;
  std::vector<Tensor> ts;
  std::vector<Work> works;
  for (int k = 0; k < count; ++k) {
    ts.push_back(make({k % 5 + 1}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(rank() + k + i), 0}; }));
  }
  for (int k = 0; k < count; ++k) works.push_back(dist::all_reduce_async(ts[k], ReduceOp::Sum, comm()));
  for (Work& w : works) w.wait();
  for (int k = 0; k < count; ++k) {
    EXPECT_TRUE(works[k].is_completed());
    EXPECT_TRUE(holds(ts[k],
                      [&](int64_t i) {
                        return V{static_cast<double>(ws() * (ws() - 1) / 2 + ws() * (k + i)), 0};
                      }))
        << "collective " << k;
  }
}

}  // namespace
}  // namespace sxd

// reduce, gather and scatter (dist.h's rooted collectives) at every rank
// count, against the rank formulas of dist_test_util.h: roots at both ends,
// every dtype, strided views on both sides (nothing written outside them),
// empty tensors; then the errors: a bad list on the root raises there and
// MismatchError on the others, and the communicator still works afterwards.
#include <gtest/gtest.h>

#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

class RootedTest : public DistTest {
 protected:
  std::vector<int> roots() const { return ws() == 1 ? std::vector<int>{0} : std::vector<int>{0, ws() - 1}; }
};

TEST_F(RootedTest, ReduceReachesTheRootOnly) {
  for (int root : roots()) {
    for (DType dtype : test_dtypes()) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::BXor}) {
        if (!reduce_supported(op, dtype)) continue;
        SCOPED_TRACE(dtype_name(dtype) + std::string(" ") + op_label(op) + " root " + std::to_string(root));
        Buf buf = make_buf({5, 3}, dtype, Layout::Transposed);
        fill(buf.view, [&](int64_t i) { return reduce_input(op, dtype, rank(), i); });
        buf.take_snapshot();
        dist::reduce(buf.view, root, op, comm());
        if (rank() == root) {
          EXPECT_TRUE(holds(buf.view, [&](int64_t i) { return reduce_expected(op, dtype, iota_ranks(ws()), i); }));
        } else {
          EXPECT_TRUE(holds(buf.view, [&](int64_t i) { return reduce_input(op, dtype, rank(), i); }));
        }
        EXPECT_TRUE(buf.unchanged_outside_view());
      }
    }
  }
}

TEST_F(RootedTest, GatherCollectsEveryRanksTensor) {
  for (int root : roots()) {
    for (DType dtype : test_dtypes()) {
      SCOPED_TRACE(dtype_name(dtype) + std::string(" root ") + std::to_string(root));
      Buf input = make_buf({4, 3}, dtype, Layout::Strided);
      fill(input.view, [&](int64_t i) { return plain_value(dtype, rank(), i); });
      std::vector<Buf> outs;
      std::vector<TensorView> views;
      if (rank() == root) {
        for (int r = 0; r < ws(); ++r)
          outs.push_back(make_buf({4, 3}, dtype, r % 2 ? Layout::Flipped : Layout::Transposed));
        for (Buf& b : outs) {
          b.take_snapshot();
          views.push_back(b.view);
        }
      }
      dist::gather(views, input.view, root, comm());
      for (int r = 0; r < static_cast<int>(outs.size()); ++r) {
        EXPECT_TRUE(holds(outs[r].view, [&](int64_t i) { return plain_value(dtype, r, i); })) << "from rank " << r;
        EXPECT_TRUE(outs[r].unchanged_outside_view());
      }
    }
  }
}

TEST_F(RootedTest, ScatterHandsOutTheRootsList) {
  for (int root : roots()) {
    for (DType dtype : test_dtypes()) {
      SCOPED_TRACE(dtype_name(dtype) + std::string(" root ") + std::to_string(root));
      std::vector<Tensor> inputs;
      std::vector<TensorView> views;
      if (rank() == root) {
        for (int r = 0; r < ws(); ++r) {
          inputs.push_back(make({2, 6}, dtype, [&](int64_t i) { return plain_value(dtype, 10 + r, i); }));
          views.push_back(inputs.back().slice(1, 0, 6, 2));  // [2, 3], strided
        }
      }
      Buf out = make_buf({3, 2}, dtype, Layout::Transposed);
      out.take_snapshot();
      dist::scatter(out.view, views, root, comm());
      // root's inputs[rank] is every other element of rank + 10's plain values, read as 6 elements in order
      EXPECT_TRUE(
          holds(out.view, [&](int64_t i) { return plain_value(dtype, 10 + rank(), (i / 3) * 6 + (i % 3) * 2); }));
      EXPECT_TRUE(out.unchanged_outside_view());
    }
  }
}

TEST_F(RootedTest, EmptyTensors) {
  const Tensor none = Tensor::empty({0, 4}, DType::Float32);
  std::vector<TensorView> list;
  if (rank() == 0) list.assign(ws(), TensorView(none));
  dist::gather(list, none, 0, comm());
  dist::scatter(none, list, 0, comm());
  dist::reduce(none, 0, ReduceOp::Sum, comm());
}

TEST_F(RootedTest, ABadListRaisesOnEveryRankAndTheCommunicatorGoesOn) {
  SXD_REQUIRE_WS2();
  const int root = ws() - 1;
  const Tensor x = make({3}, DType::Int64, [&](int64_t i) { return plain_value(DType::Int64, rank(), i); });
  std::vector<Tensor> storage(ws() - 1, Tensor::zeros({3}, DType::Int64));  // one tensor short
  std::vector<TensorView> short_list(storage.begin(), storage.end());
  if (rank() == root) {
    const std::string msg = error_message<ArgumentError>([&] { dist::gather(short_list, x, root, comm()); });
    EXPECT_TRUE(mentions(msg, {"gather: ", "gather_list", "one tensor per rank", std::to_string(ws() - 1)})) << msg;
  } else {
    error_message<dist::MismatchError>([&] { dist::gather({}, x, root, comm()); });
  }
  // a list on a rank other than the root
  std::vector<TensorView> stray = rank() == 0 ? std::vector<TensorView>{x} : std::vector<TensorView>{};
  std::vector<Tensor> full;  // (copies of one Tensor would share its storage)
  for (int r = 0; r < ws(); ++r) full.push_back(Tensor::zeros({3}, DType::Int64));
  std::vector<TensorView> full_list(full.begin(), full.end());
  const Tensor out = Tensor::zeros({3}, DType::Int64);
  if (rank() == 0) {
    const std::string msg = error_message<ArgumentError>([&] { dist::scatter(out, stray, root, comm()); });
    EXPECT_TRUE(mentions(msg, {"scatter: ", "scatter_list", "empty on a rank other than the root"})) << msg;
  } else {
    error_message<dist::MismatchError>(
        [&] { dist::scatter(out, rank() == root ? full_list : std::vector<TensorView>{}, root, comm()); });
  }
  // every rank passes the same bad root: a local error everywhere
  const std::string msg = error_message<ArgumentError>([&] { dist::reduce(x, ws(), ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce: ", "dst", "[0, " + std::to_string(ws()) + ")"})) << msg;
  // and the communicator still runs correct collectives
  std::vector<TensorView> got = rank() == root ? full_list : std::vector<TensorView>{};
  dist::gather(got, x, root, comm());
  for (int r = 0; r < static_cast<int>(got.size()); ++r)
    EXPECT_TRUE(holds(got[r], [&](int64_t i) { return plain_value(DType::Int64, r, i); }));
}

}  // namespace
}  // namespace sxd

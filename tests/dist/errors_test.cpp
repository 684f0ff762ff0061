// Error paths.
//
// Local argument errors: every rank makes the same wrong call, so all raise
// before any data moves (ArgumentError / DTypeError naming the op and the
// argument) and the communicator stays usable.
//
// Cross-rank disagreement: MismatchError on every rank, naming the ranks and
// both values; always checked for the variable-split all-to-alls, and for the
// dense collectives with Communicator::set_checks(true). With the checks on,
// a rank whose local check fails still takes part, so its peers raise too
// instead of waiting.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <typeinfo>
#include <vector>

#include "ops/cuda.h"
#include "ops/runtime/knobs.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

using namespace std::chrono_literals;
namespace dist = scatterx::dist;

class LocalErrorTest : public DistTest {
 protected:
  // After each error: a collective on the same communicator still works.
  void TearDown() override {
    if (!HasFatalFailure()) {
      Tensor t = make({}, DType::Int32, [&](int64_t) { return V{1, 0}; });
      dist::all_reduce(t, ReduceOp::Sum, comm());
      EXPECT_TRUE(holds(t, [&](int64_t) {
        return V{static_cast<double>(ws()), 0};
      })) << "the communicator is unusable after a local error";
    }
    DistTest::TearDown();
  }

  std::vector<Tensor> tensors(int count, const Shape& shape, DType dtype) const {
    std::vector<Tensor> v;
    for (int i = 0; i < count; ++i) v.push_back(Tensor::zeros(shape, dtype));
    return v;
  }
  static std::vector<TensorView> views(const std::vector<Tensor>& ts) { return {ts.begin(), ts.end()}; }
};

// ---------------------------------------------------------------- all_gather

TEST_F(LocalErrorTest, AllGatherWrongNumberOfOutputs) {
  Tensor input = Tensor::zeros({2, 3}, DType::Float32);
  for (int count : {ws() + 1, ws() - 1}) {
    auto outs = tensors(count, {2, 3}, DType::Float32);
    const std::string msg = error_message<ArgumentError>([&] { dist::all_gather(views(outs), input, comm()); });
    EXPECT_TRUE(mentions(msg, {"all_gather", "outputs|tensor_list", std::to_string(count)})) << count << " outputs";
  }
}

TEST_F(LocalErrorTest, AllGatherOutputDTypeAndShape) {
  Tensor input = Tensor::zeros({2, 3}, DType::Float32);
  auto outs = tensors(ws(), {2, 3}, DType::Float32);
  outs[ws() - 1] = Tensor::zeros({2, 3}, DType::Float64);
  std::string msg = error_message<DTypeError>([&] { dist::all_gather(views(outs), input, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_gather", "outputs|tensor_list", "float32", "float64"}));

  outs[ws() - 1] = Tensor::zeros({3, 2}, DType::Float32);
  msg = error_message<ArgumentError>([&] { dist::all_gather(views(outs), input, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_gather", "outputs|tensor_list", "[3, 2]", "[2, 3]"}));
}

// ---------------------------------------------------------------- all_gather_into_tensor

TEST_F(LocalErrorTest, AllGatherIntoTensorOutputDType) {
  Tensor input = Tensor::zeros({2, 3}, DType::Int32);
  Tensor output = Tensor::zeros({ws() * 2, 3}, DType::Int64);
  const std::string msg = error_message<DTypeError>([&] { dist::all_gather_into_tensor(output, input, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "output", "int32", "int64"}));
}

TEST_F(LocalErrorTest, AllGatherIntoTensorOutputShape) {
  Tensor input = Tensor::zeros({2, 3}, DType::Float32);
  for (const Shape& bad : {Shape{ws() * 2 + 1, 3}, Shape{ws() * 2, 4}, Shape{ws() * 6}, Shape{ws() + 1, 2, 3}}) {
    Tensor output = Tensor::zeros(bad, DType::Float32);
    const std::string msg = error_message<ArgumentError>([&] { dist::all_gather_into_tensor(output, input, comm()); });
    EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "output", bad.str()})) << bad.str();
  }
  // 0-d input: the output must be [ws]
  Tensor scalar = Tensor::zeros({}, DType::Float32);
  Tensor output = Tensor::zeros({ws() + 1}, DType::Float32);
  const std::string msg = error_message<ArgumentError>([&] { dist::all_gather_into_tensor(output, scalar, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "output"}));
}

// ---------------------------------------------------------------- reduce_scatter

TEST_F(LocalErrorTest, ReduceScatterWrongNumberOfInputs) {
  Tensor output = Tensor::zeros({4}, DType::Float64);
  auto ins = tensors(ws() + 2, {4}, DType::Float64);
  const std::string msg =
      error_message<ArgumentError>([&] { dist::reduce_scatter(output, views(ins), ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter", "inputs|input_list", std::to_string(ws() + 2)}));
}

TEST_F(LocalErrorTest, ReduceScatterInputDTypeAndShape) {
  Tensor output = Tensor::zeros({4}, DType::Float64);
  auto ins = tensors(ws(), {4}, DType::Float64);
  ins[0] = Tensor::zeros({4}, DType::Float32);
  std::string msg = error_message<DTypeError>([&] { dist::reduce_scatter(output, views(ins), ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter", "inputs|input_list", "float32", "float64"}));
  ins[0] = Tensor::zeros({5}, DType::Float64);
  msg = error_message<ArgumentError>([&] { dist::reduce_scatter(output, views(ins), ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter", "inputs|input_list", "[5]", "[4]"}));
}

// ---------------------------------------------------------------- reduce_scatter_tensor

TEST_F(LocalErrorTest, ReduceScatterTensorShapes) {
  Tensor output = Tensor::zeros({2, 3}, DType::Float32);
  Tensor input = Tensor::zeros({ws() * 2 + 1, 3}, DType::Float32);
  std::string msg =
      error_message<ArgumentError>([&] { dist::reduce_scatter_tensor(output, input, ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter_tensor", "input"}));
  Tensor input2 = Tensor::zeros({ws() * 2, 4}, DType::Float32);
  msg = error_message<ArgumentError>([&] { dist::reduce_scatter_tensor(output, input2, ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter_tensor", "input"}));
}

TEST_F(LocalErrorTest, ReduceScatterTensorOutputDType) {
  Tensor output = Tensor::zeros({2}, DType::BFloat16);
  Tensor input = Tensor::zeros({ws() * 2}, DType::Float16);
  const std::string msg =
      error_message<DTypeError>([&] { dist::reduce_scatter_tensor(output, input, ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter_tensor", "output", "bfloat16", "float16"}));
}

// ---------------------------------------------------------------- all_reduce

TEST_F(LocalErrorTest, AllReduceComplexMinMax) {
  for (DType dtype : {DType::Complex64, DType::Complex128}) {
    for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      Tensor t = make({3}, dtype, [](int64_t i) { return V{1.0 * i, 2.0}; });
      const std::string msg = error_message<DTypeError>([&] { dist::all_reduce(t, op, comm()); });
      EXPECT_TRUE(mentions(msg, {"all_reduce", dist::reduce_op_name(op), scatterx::dtype_name(dtype)}));
    }
  }
}

// Without the CUDA backend, or without a visible device, CUDA tensors are
// refused by the local checks (cuda_dist_test.cpp covers real devices).
TEST_F(LocalErrorTest, CudaTensorsRejected) {
  if (scatterx::cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  Tensor host = Tensor::zeros({4}, DType::Float32);
  TensorView fake(host.data(), DType::Float32, {4}, scatterx::Device::cuda(0));
  std::string msg = expect_local_error([&] { dist::all_reduce(fake, ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_reduce", "cuda"}));
  msg = expect_local_error([&] { dist::broadcast(fake, 0, comm()); });
  EXPECT_TRUE(mentions(msg, {"broadcast", "cuda"}));
}

// ---------------------------------------------------------------- broadcast

TEST_F(LocalErrorTest, BroadcastRootOutOfRange) {
  Tensor t = Tensor::zeros({3}, DType::Float32);
  for (int root : {ws(), -1, ws() + 5}) {
    const std::string msg = error_message<ArgumentError>([&] { dist::broadcast(t, root, comm()); });
    EXPECT_TRUE(mentions(msg, {"broadcast", "root|src", std::to_string(root),
                               "[0, " + std::to_string(ws()) + ")|" + std::to_string(ws())}))
        << "root " << root;
  }
}

TEST_F(LocalErrorTest, BroadcastAsyncRootOutOfRange) {
  Tensor t = Tensor::zeros({3}, DType::Float32);
  std::string msg;
  try {
    dist::broadcast_async(t, ws(), comm()).wait();
    ADD_FAILURE() << "threw nothing";
  } catch (const ArgumentError& e) {
    msg = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  EXPECT_TRUE(mentions(msg, {"broadcast", "root|src"}));
}

// ---------------------------------------------------------------- all_to_all

TEST_F(LocalErrorTest, AllToAllWrongNumberOfTensors) {
  auto ok = tensors(ws(), {2}, DType::Int64);
  auto more = tensors(ws() + 1, {2}, DType::Int64);
  std::string msg = error_message<ArgumentError>([&] { dist::all_to_all(views(ok), views(more), comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all", "inputs|input_tensor_list", std::to_string(ws() + 1)}));
  msg = error_message<ArgumentError>([&] { dist::all_to_all(views(more), views(ok), comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all", "outputs|output_tensor_list", std::to_string(ws() + 1)}));
}

TEST_F(LocalErrorTest, AllToAllDTypes) {
  auto ins = tensors(ws(), {2}, DType::Int64);
  auto outs = tensors(ws(), {2}, DType::Int64);
  outs[0] = Tensor::zeros({2}, DType::UInt8);
  const std::string msg = error_message<DTypeError>([&] { dist::all_to_all(views(outs), views(ins), comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all", "outputs|output_tensor_list", "uint8", "int64"}));
}

// This rank's own block (inputs[rank] -> outputs[rank]) of another size: a
// local argument error (every rank makes it here), with or without the
// cross-rank checks.
TEST_F(LocalErrorTest, AllToAllOwnBlockSize) {
  auto ins = tensors(ws(), {2}, DType::Int64);
  auto outs = tensors(ws(), {2}, DType::Int64);
  outs[rank()] = Tensor::zeros({3}, DType::Int64);
  const std::string msg = error_message<ArgumentError>([&] { dist::all_to_all(views(outs), views(ins), comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all", "outputs|output_tensor_list"}));
}

// ---------------------------------------------------------------- all_to_all_single

TEST_F(LocalErrorTest, AllToAllSingleSplitListLength) {
  Tensor input = Tensor::zeros({ws() * 2, 3}, DType::Float32);
  Tensor output = Tensor::zeros({ws() * 2, 3}, DType::Float32);
  const std::vector<int64_t> good(static_cast<size_t>(ws()), 2);
  std::vector<int64_t> longer = good;
  longer.push_back(0);
  std::string msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, good, longer, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "input_split_sizes"}));
  msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, longer, good, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "output_split_sizes"}));
}

TEST_F(LocalErrorTest, AllToAllSingleSplitSumsNotDim0) {
  const int64_t rows = ws() * 2;
  Tensor input = Tensor::zeros({rows, 3}, DType::Float32);
  Tensor output = Tensor::zeros({rows, 3}, DType::Float32);
  const std::vector<int64_t> good(static_cast<size_t>(ws()), 2);
  std::vector<int64_t> bad = good;
  bad.back() += 1;  // sums to rows + 1
  std::string msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, good, bad, comm()); });
  EXPECT_TRUE(
      mentions(msg, {"all_to_all_single", "input_split_sizes", std::to_string(rows + 1), std::to_string(rows)}));
  msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, bad, good, comm()); });
  EXPECT_TRUE(
      mentions(msg, {"all_to_all_single", "output_split_sizes", std::to_string(rows + 1), std::to_string(rows)}));
}

TEST_F(LocalErrorTest, AllToAllSingleNegativeSplit) {
  const int64_t rows = ws() * 2;
  Tensor input = Tensor::zeros({rows, 3}, DType::Float32);
  Tensor output = Tensor::zeros({rows, 3}, DType::Float32);
  const std::vector<int64_t> good(static_cast<size_t>(ws()), 2);
  std::vector<int64_t> bad = good;
  // a negative entry, the sum still right
  bad[0] = -1;
  bad.back() += 3;
  if (ws() == 1) bad[0] = -1;
  std::string msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, good, bad, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "input_split_sizes", "-1"}));
  msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, bad, good, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "output_split_sizes", "-1"}));
}

TEST_F(LocalErrorTest, AllToAllSingleEqualSplitsNeedDivisibleDim0) {
  SXD_REQUIRE_WS2();
  Tensor input = Tensor::zeros({ws() * 2 + 1, 3}, DType::Float32);
  Tensor output = Tensor::zeros({ws() * 2 + 1, 3}, DType::Float32);
  const std::string msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, {}, {}, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", std::to_string(ws() * 2 + 1)}));
}

TEST_F(LocalErrorTest, AllToAllSingleDTypeAndShape) {
  Tensor input = Tensor::zeros({ws() * 2, 3}, DType::Int8);
  Tensor output = Tensor::zeros({ws() * 2, 3}, DType::UInt8);
  std::string msg = error_message<DTypeError>([&] { dist::all_to_all_single(output, input, {}, {}, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "output", "uint8", "int8"}));
  Tensor output2 = Tensor::zeros({ws() * 2, 4}, DType::Int8);
  msg = error_message<ArgumentError>([&] { dist::all_to_all_single(output2, input, {}, {}, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "output"}));
  Tensor scalar = Tensor::zeros({}, DType::Int8);
  msg = error_message<ArgumentError>([&] { dist::all_to_all_single(scalar, scalar, {}, {}, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "input"}));
}

// ---------------------------------------------------------------- all_to_all_v

TEST_F(LocalErrorTest, AllToAllVBadSendSplits) {
  const int64_t rows = ws() * 2;
  Tensor input = Tensor::zeros({rows, 2}, DType::Float64);
  std::vector<int64_t> splits(static_cast<size_t>(ws()), 2);
  splits.back() = 3;
  std::string msg = error_message<ArgumentError>([&] { dist::all_to_all_v(input, splits, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_v", "send_splits", std::to_string(rows + 1)}));
  splits.assign(static_cast<size_t>(ws()), 2);
  splits[0] = -2;
  splits.back() += 4;
  if (ws() == 1) splits[0] = -2;
  msg = error_message<ArgumentError>([&] { dist::all_to_all_v(input, splits, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_v", "send_splits", "-2"}));
  splits.assign(static_cast<size_t>(ws()) + 1, 0);
  splits[0] = rows;
  msg = error_message<ArgumentError>([&] { dist::all_to_all_v(input, splits, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_v", "send_splits"}));
}

// ---------------------------------------------------------------- aliasing, null communicator, settings

TEST_F(LocalErrorTest, OutputOverlapsInput) {
  Tensor buf = Tensor::zeros({ws() * 4, 2}, DType::Float32);
  // all_to_all_single in place
  std::string msg = error_message<ArgumentError>([&] { dist::all_to_all_single(buf, buf, {}, {}, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "output", "input", "overlap"}));
  // all_gather_into_tensor from a reversed view of its own block (not the in-place idiom)
  TensorView reversed = buf.slice(0, rank() * 4, rank() * 4 + 4).flip(0);
  msg = error_message<ArgumentError>([&] { dist::all_gather_into_tensor(buf, reversed, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "output", "input", "overlap"}));
  // reduce_scatter_tensor: output inside input
  TensorView inside = buf.slice(0, 0, 4);
  msg = error_message<ArgumentError>([&] { dist::reduce_scatter_tensor(inside, buf, ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter_tensor", "output", "input", "overlap"}));
}

TEST_F(LocalErrorTest, OutputWithInternalOverlap) {
  Tensor row = Tensor::zeros({1, 4}, DType::Int32);
  TensorView expanded = row.expand({3, 4});  // stride 0: three rows share memory
  std::string msg = error_message<ArgumentError>([&] { dist::all_reduce(expanded, ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_reduce", "overlap"}));
  msg = error_message<ArgumentError>([&] { dist::broadcast(expanded, 0, comm()); });
  EXPECT_TRUE(mentions(msg, {"broadcast", "overlap"}));
  Tensor input = Tensor::zeros({3, 4}, DType::Int32);
  Tensor big_row = Tensor::zeros({1, 4}, DType::Int32);
  msg = error_message<ArgumentError>([&] {
    dist::all_gather_into_tensor(big_row.expand({ws() * 3, 4}), input, comm());
  });
  EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "output", "overlap"}));
  // reading from an expanded input is fine
  Tensor out = Tensor::zeros({ws() * 3, 4}, DType::Int32);
  Tensor one = make({1, 4}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(rank() * 10 + i), 0}; });
  dist::all_gather_into_tensor(out, one.expand({3, 4}), comm());
  EXPECT_TRUE(holds(out, [&](int64_t i) { return V{static_cast<double>(i / 12 * 10 + i % 4), 0}; }));
}

TEST_F(LocalErrorTest, NullCommunicator) {
  const Communicator none = comm().split(-1, rank());
  ASSERT_FALSE(none.valid());
  Tensor t = Tensor::zeros({2}, DType::Float32);
  EXPECT_THROW(dist::all_reduce(t, ReduceOp::Sum, none), ArgumentError);
  EXPECT_THROW(dist::broadcast(t, 0, none), ArgumentError);
  EXPECT_THROW(dist::all_reduce_async(t, ReduceOp::Sum, none).wait(), ArgumentError);
  EXPECT_THROW(static_cast<void>(none.rank()), ArgumentError);
  EXPECT_THROW(static_cast<void>(none.size()), ArgumentError);
  EXPECT_THROW(static_cast<void>(none.split(0, 0)), ArgumentError);
}

TEST_F(LocalErrorTest, TimeoutMustBePositive) {
  Communicator c = comm().split(0, rank());
  for (double bad : {0.0, -1.0}) {
    const std::string msg = error_message<ArgumentError>([&] { c.set_timeout(std::chrono::duration<double>(bad)); });
    EXPECT_TRUE(mentions(msg, {"timeout"}));
  }
  EXPECT_DOUBLE_EQ(c.timeout().count(), comm().timeout().count()) << "a rejected timeout was applied";
}

// ---------------------------------------------------------------- cross-rank mismatches

class MismatchTest : public DistTest {
 protected:
  // A dedicated communicator, so that settings and a broken state stay here;
  // a timeout well below the world's, so that a hang shows as TimeoutError.
  Communicator dedicated(bool checks) const {
    Communicator c = comm().split(0, rank());
    c.set_checks(checks);
    c.set_timeout(20s);
    return c;
  }

  // After a mismatch the communicator still works (nothing moved).
  void expect_usable(const Communicator& c) {
    Tensor t = make({2}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(i + 1), 0}; });
    dist::all_reduce(t, ReduceOp::Sum, c);
    EXPECT_TRUE(holds(t, [&](int64_t i) {
      return V{static_cast<double>((i + 1) * ws()), 0};
    })) << "the communicator is unusable after a mismatch";
  }

  // f must raise on this rank, not time out, within a few seconds; the
  // type (MismatchError or any Error but TimeoutError) is checked here.
  template <typename F>
  std::string expect_peer_error(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    std::string msg;
    try {
      f();
      ADD_FAILURE() << "threw nothing";
    } catch (const TimeoutError& e) {
      ADD_FAILURE() << "timed out instead of raising on every rank: " << e.what();
    } catch (const scatterx::Error& e) {
      msg = e.what();
    }
    EXPECT_LT(seconds_since(start), 10.0);
    return msg;
  }
};

// Rank 0 expects 17 rows from rank 1, which sends 13: MismatchError on every
// rank (all_to_all_single always checks), naming both ranks and both sizes.
TEST_F(MismatchTest, AllToAllSingleSplitsDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(false);
  const int64_t m = 2;
  std::vector<int64_t> in_splits(static_cast<size_t>(ws()), 1), out_splits(static_cast<size_t>(ws()), 1);
  if (rank() == 1) in_splits[0] = 13;
  if (rank() == 0) out_splits[1] = 17;
  int64_t in_rows = 0, out_rows = 0;
  for (int64_t s : in_splits) in_rows += s;
  for (int64_t s : out_splits) out_rows += s;
  Tensor input = Tensor::zeros({in_rows, m}, DType::Float32);
  Tensor output = Tensor::zeros({out_rows, m}, DType::Float32);
  const auto start = std::chrono::steady_clock::now();
  const std::string msg =
      error_message<MismatchError>([&] { dist::all_to_all_single(output, input, out_splits, in_splits, c); });
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "13", "17"}));
  EXPECT_TRUE(names_rank(msg, 0));
  EXPECT_TRUE(names_rank(msg, 1));
  expect_usable(c);
}

// Same through the async form: the MismatchError surfaces from wait() (or
// the call) on every rank.
TEST_F(MismatchTest, AllToAllSingleAsyncSplitsDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(false);
  std::vector<int64_t> in_splits(static_cast<size_t>(ws()), 2), out_splits(static_cast<size_t>(ws()), 2);
  if (rank() == ws() - 1) in_splits[0] = 5;
  int64_t in_rows = 0;
  for (int64_t s : in_splits) in_rows += s;
  Tensor input = Tensor::zeros({in_rows}, DType::Int64);
  Tensor output = Tensor::zeros({2 * ws()}, DType::Int64);
  const std::string msg = error_message<MismatchError>(
      [&] { dist::all_to_all_single_async(output, input, out_splits, in_splits, c).wait(); });
  EXPECT_TRUE(mentions(msg, {"all_to_all_single", "5", "2"}));
  EXPECT_TRUE(names_rank(msg, 0));
  EXPECT_TRUE(names_rank(msg, ws() - 1));
  expect_usable(c);
}

TEST_F(MismatchTest, AllGatherIntoTensorDTypesDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  const DType mine = rank() == 0 ? DType::Float32 : DType::Float64;
  Tensor input = Tensor::zeros({2, 3}, mine);
  Tensor output = Tensor::zeros({ws() * 2, 3}, mine);
  const std::string msg = error_message<MismatchError>([&] { dist::all_gather_into_tensor(output, input, c); });
  EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "float32", "float64"}));
  EXPECT_TRUE(names_rank(msg, 0));
  expect_usable(c);
}

TEST_F(MismatchTest, AllGatherIntoTensorShapesDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  const int64_t n = rank() == 1 ? 3 : 2;
  Tensor input = Tensor::zeros({n, 3}, DType::Int32);
  Tensor output = Tensor::zeros({ws() * n, 3}, DType::Int32);
  const std::string msg = error_message<MismatchError>([&] { dist::all_gather_into_tensor(output, input, c); });
  EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "[3, 3]", "[2, 3]"}));
  EXPECT_TRUE(names_rank(msg, 1));
  expect_usable(c);
}

TEST_F(MismatchTest, AllReduceNumelDisagrees) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  Tensor t = Tensor::zeros({rank() == ws() - 1 ? 5 : 4}, DType::Float32);
  const std::string msg = error_message<MismatchError>([&] { dist::all_reduce(t, ReduceOp::Sum, c); });
  EXPECT_TRUE(mentions(msg, {"all_reduce"}));
  EXPECT_TRUE(names_rank(msg, ws() - 1));
  expect_usable(c);
}

TEST_F(MismatchTest, BroadcastShapeDisagrees) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  Tensor t = Tensor::zeros({rank() == 0 ? 6 : 8}, DType::Int16);
  const std::string msg = error_message<MismatchError>([&] { dist::broadcast(t, 0, c); });
  EXPECT_TRUE(mentions(msg, {"broadcast"}));
  expect_usable(c);
}

// Without the checks, a single-copy broadcast of 1 MiB where rank 1's tensor
// is larger: rank 1 raises, nothing is written into it, and where the root
// writes a share into its peers (SCATTERX_DIST_BROADCAST_ROOT_SHARE) the
// root raises too, having written into no peer whose size differs.
TEST_F(MismatchTest, BroadcastSizesDisagreeWithoutChecks) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(false);
  // Only the single-copy paths compare sizes without the checks (elsewhere
  // the ranks would wait for messages that never come). A large all-gather
  // settles the path, alike on every rank.
  Tensor block = Tensor::zeros({int64_t{1} << 16}, DType::Int32);
  Tensor gathered = Tensor::zeros({ws() * block.numel()}, DType::Int32);
  dist::all_gather_into_tensor(gathered, block, c);
  if (!c.single_copy_path().value_or(false) ||
      scatterx::detail::knob_choice(scatterx::detail::Knob::DistEmulateDevice) != "off")
    GTEST_SKIP() << "the broadcast does not go by single copy here";
  const int64_t n = (int64_t{1} << 18) + (rank() == 1 ? 4096 : 0);
  std::vector<int32_t> foreign(static_cast<size_t>(n), -7);  // the root shares only from foreign memory
  TensorView t(foreign.data(), DType::Int32, {n});
  if (rank() == 0) fill(t, [](int64_t i) { return V{static_cast<double>(i)}; });
  std::string msg;
  try {
    dist::broadcast(t, 0, c);
  } catch (const MismatchError& e) {
    msg = e.what();
  }
  if (rank() == 1) {
    EXPECT_TRUE(mentions(msg, {"broadcast", "1048576", "1064960"})) << msg;
    EXPECT_TRUE(holds(t, [](int64_t) { return V{-7}; })) << "rank 1's tensor was written";
  }
  const std::string share = scatterx::detail::knob_choice(scatterx::detail::Knob::DistBroadcastRootShare);
  if (rank() == 0 && (share == "1" || (share == "auto" && ws() <= sysconf(_SC_NPROCESSORS_ONLN)))) {
    EXPECT_TRUE(mentions(msg, {"broadcast", "rank 1", "1064960", "1048576"})) << msg;
  }
  expect_usable(c);
}

TEST_F(MismatchTest, ReduceScatterTensorDTypesDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  const DType mine = rank() == 1 ? DType::Int32 : DType::Float32;
  Tensor input = Tensor::zeros({ws() * 3}, mine);
  Tensor output = Tensor::zeros({3}, mine);
  const std::string msg =
      error_message<MismatchError>([&] { dist::reduce_scatter_tensor(output, input, ReduceOp::Sum, c); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter_tensor", "int32", "float32"}));
  EXPECT_TRUE(names_rank(msg, 1));
  expect_usable(c);
}

TEST_F(MismatchTest, AllToAllListShapesDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  // rank 1 sends [3, 2] to rank 0, which expects [5, 2]
  std::vector<Tensor> ins, outs;
  for (int p = 0; p < ws(); ++p) {
    ins.push_back(Tensor::zeros({rank() == 1 && p == 0 ? 3 : 2, 2}, DType::Float64));
    outs.push_back(Tensor::zeros({rank() == 0 && p == 1 ? 5 : 2, 2}, DType::Float64));
  }
  const std::vector<TensorView> inputs(ins.begin(), ins.end()), outputs(outs.begin(), outs.end());
  const std::string msg = error_message<MismatchError>([&] { dist::all_to_all(outputs, inputs, c); });
  EXPECT_TRUE(mentions(msg, {"all_to_all"}));
  EXPECT_TRUE(names_rank(msg, 0));
  EXPECT_TRUE(names_rank(msg, 1));
  expect_usable(c);
}

// Ranks passing different reduce ops (or broadcast roots) disagree too (the
// op travels in the metadata record).
TEST_F(MismatchTest, AllReduceOpsDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  const ReduceOp mine = rank() == ws() - 1 ? ReduceOp::Max : ReduceOp::Sum;
  Tensor t = Tensor::zeros({4}, DType::Float32);
  const std::string msg = error_message<MismatchError>([&] { dist::all_reduce(t, mine, c); });
  EXPECT_TRUE(mentions(msg, {"all_reduce", "sum", "max"}));
  EXPECT_TRUE(names_rank(msg, ws() - 1));
  expect_usable(c);
}

TEST_F(MismatchTest, ReduceScatterTensorOpsDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  const ReduceOp mine = rank() == ws() - 1 ? ReduceOp::Max : ReduceOp::Sum;
  Tensor in = Tensor::zeros({ws() * 2}, DType::Float32);
  Tensor out = Tensor::zeros({2}, DType::Float32);
  const std::string msg = error_message<MismatchError>([&] { dist::reduce_scatter_tensor(out, in, mine, c); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter_tensor", "sum", "max"}));
  EXPECT_TRUE(names_rank(msg, ws() - 1));
  expect_usable(c);
}

TEST_F(MismatchTest, ReduceScatterListOpsDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  const ReduceOp mine = rank() == ws() - 1 ? ReduceOp::Max : ReduceOp::Sum;
  Tensor out = Tensor::zeros({2}, DType::Float32);
  std::vector<Tensor> ins;
  for (int j = 0; j < ws(); ++j) ins.push_back(Tensor::zeros({2}, DType::Float32));
  const std::vector<TensorView> inputs(ins.begin(), ins.end());
  const std::string msg = error_message<MismatchError>([&] { dist::reduce_scatter(out, inputs, mine, c); });
  EXPECT_TRUE(mentions(msg, {"reduce_scatter", "sum", "max"}));
  EXPECT_TRUE(names_rank(msg, ws() - 1));
  expect_usable(c);
}

TEST_F(MismatchTest, BroadcastRootsDisagree) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  Tensor t = Tensor::zeros({4}, DType::Float32);
  const int root = rank() == 0 ? 1 : 0;
  const std::string msg = error_message<MismatchError>([&] { dist::broadcast(t, root, c); });
  EXPECT_TRUE(mentions(msg, {"broadcast", "src|root"}));
  expect_usable(c);
}

// With the checks on, rank 1's local check fails (wrong output dtype): it
// raises DTypeError, and the others raise too rather than wait for it.
TEST_F(MismatchTest, LocalFailureOnOneRankRaisesOnPeers) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  Tensor input = Tensor::zeros({2}, DType::Float32);
  Tensor output = Tensor::zeros({ws() * 2}, rank() == 1 ? DType::Float64 : DType::Float32);
  if (rank() == 1) {
    const std::string msg = error_message<DTypeError>([&] { dist::all_gather_into_tensor(output, input, c); });
    EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor", "output"}));
  } else {
    const std::string msg = expect_peer_error([&] { dist::all_gather_into_tensor(output, input, c); });
    EXPECT_TRUE(mentions(msg, {"all_gather_into_tensor"}));
    EXPECT_TRUE(names_rank(msg, 1));
  }
  expect_usable(c);
}

// The same for the small sync calls that can skip launch()'s queueing: with
// the checks on they go through launch(), which tells the peers.
TEST_F(MismatchTest, LocalFailureOfASmallSyncCallRaisesOnPeers) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(true);
  Tensor values = Tensor::zeros({4}, DType::Float32);
  if (rank() == 1) {
    const std::string msg = error_message<DTypeError>([&] { dist::all_reduce(values, ReduceOp::BAnd, c); });
    EXPECT_TRUE(mentions(msg, {"all_reduce", "band", "float32"}));
  } else {
    const std::string msg = expect_peer_error([&] { dist::all_reduce(values, ReduceOp::Sum, c); });
    EXPECT_TRUE(mentions(msg, {"all_reduce"}));
    EXPECT_TRUE(names_rank(msg, 1));
  }
  expect_usable(c);
  if (rank() == 1) {
    const std::string msg = error_message<ArgumentError>([&] { dist::broadcast(values, ws(), c); });
    EXPECT_TRUE(mentions(msg, {"broadcast", "src"}));
  } else {
    const std::string msg = expect_peer_error([&] { dist::broadcast(values, 0, c); });
    EXPECT_TRUE(mentions(msg, {"broadcast"}));
    EXPECT_TRUE(names_rank(msg, 1));
  }
  expect_usable(c);
}

// The same for the variable-split path (always checked): rank 0's split list
// does not add up to its input.
TEST_F(MismatchTest, LocalSplitFailureOnOneRankRaisesOnPeers) {
  SXD_REQUIRE_WS2();
  Communicator c = dedicated(false);
  std::vector<int64_t> splits(static_cast<size_t>(ws()), 1);
  if (rank() == 0) splits[0] = 4;  // sums to ws + 3, input has ws rows
  Tensor input = Tensor::zeros({ws()}, DType::Int32);
  Tensor output = Tensor::zeros({ws()}, DType::Int32);
  const std::vector<int64_t> recv(static_cast<size_t>(ws()), 1);
  if (rank() == 0) {
    const std::string msg =
        error_message<ArgumentError>([&] { dist::all_to_all_single(output, input, recv, splits, c); });
    EXPECT_TRUE(mentions(msg, {"all_to_all_single", "input_split_sizes"}));
  } else {
    const std::string msg = expect_peer_error([&] { dist::all_to_all_single(output, input, recv, splits, c); });
    EXPECT_TRUE(mentions(msg, {"all_to_all_single"}));
    EXPECT_TRUE(names_rank(msg, 0));
  }
  expect_usable(c);
}

}  // namespace
}  // namespace sxd

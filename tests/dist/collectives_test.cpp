// The data-moving collectives without reduction: all_gather (list),
// all_gather_into_tensor (concatenated and stacked), broadcast from every
// root; every dtype, 0-d and empty tensors, non-contiguous inputs and
// outputs.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

class DTypeTest : public DistTest, public ::testing::WithParamInterface<DType> {
 protected:
  DType dtype() const { return GetParam(); }
  V value(int r, int64_t i) const { return plain_value(dtype(), r, i); }
};

std::string dtype_name_of(const ::testing::TestParamInfo<DType>& info) { return sxt::dtype_label(info.param); }

// ---------------------------------------------------------------- all_gather

class AllGatherTest : public DTypeTest {};

TEST_P(AllGatherTest, List) {
  Tensor input = make({3, 4}, dtype(), [&](int64_t i) { return value(rank(), i); });
  std::vector<Buf> bufs;
  std::vector<TensorView> outputs;
  for (int r = 0; r < ws(); ++r) bufs.push_back(make_buf({3, 4}, dtype(), Layout::Contiguous));
  for (const Buf& b : bufs) outputs.push_back(b.view);
  dist::all_gather(outputs, input, comm());
  for (int r = 0; r < ws(); ++r) {
    EXPECT_TRUE(holds(outputs[r], [&](int64_t i) { return value(r, i); })) << "output " << r;
  }
  // the input is untouched
  EXPECT_TRUE(holds(input, [&](int64_t i) { return value(rank(), i); }));
}

TEST_P(AllGatherTest, ListNonContiguous) {
  // input: a transposed view; outputs: each a different layout
  Buf in = make_buf({4, 5}, dtype(), Layout::Transposed);
  fill(in.view, [&](int64_t i) { return value(rank(), i); });
  const Layout layouts[] = {Layout::Strided, Layout::Transposed, Layout::Flipped, Layout::Contiguous};
  std::vector<Buf> bufs;
  std::vector<TensorView> outputs;
  for (int r = 0; r < ws(); ++r) bufs.push_back(make_buf({4, 5}, dtype(), layouts[r % 4]));
  for (const Buf& b : bufs) outputs.push_back(b.view);
  dist::all_gather(outputs, in.view, comm());
  for (int r = 0; r < ws(); ++r) {
    EXPECT_TRUE(holds(outputs[r], [&](int64_t i) { return value(r, i); }))
        << "output " << r << " " << layout_label(layouts[r % 4]);
    EXPECT_TRUE(bufs[r].unchanged_outside_view());
  }
}

TEST_P(AllGatherTest, List0d) {
  Tensor input = make({}, dtype(), [&](int64_t) { return value(rank(), 5); });
  std::vector<Tensor> outs;
  std::vector<TensorView> outputs;
  for (int r = 0; r < ws(); ++r) outs.push_back(Tensor::zeros({}, dtype()));
  for (const Tensor& t : outs) outputs.push_back(t);
  dist::all_gather(outputs, input, comm());
  for (int r = 0; r < ws(); ++r) EXPECT_TRUE(holds(outputs[r], [&](int64_t) { return value(r, 5); }));
}

// torch's idiom all_gather(tensor_list, tensor_list[rank]): the input is one
// of the outputs.
TEST_P(AllGatherTest, InputIsOneOfTheOutputs) {
  std::vector<Tensor> outs;
  for (int r = 0; r < ws(); ++r) outs.push_back(Tensor::zeros({2, 5}, dtype()));
  fill(outs[rank()], [&](int64_t i) { return value(rank(), i); });
  const std::vector<TensorView> outputs(outs.begin(), outs.end());
  dist::all_gather(outputs, outs[rank()], comm());
  for (int r = 0; r < ws(); ++r) {
    EXPECT_TRUE(holds(outputs[r], [&](int64_t i) { return value(r, i); })) << "output " << r;
  }
}

// ---------------------------------------------------------------- all_gather_into_tensor

class AllGatherIntoTensorTest : public DTypeTest {};

TEST_P(AllGatherIntoTensorTest, Concatenated) {
  const int64_t n = 3, m = 5;
  Tensor input = make({n, m}, dtype(), [&](int64_t i) { return value(rank(), i); });
  Tensor output = Tensor::zeros({ws() * n, m}, dtype());
  dist::all_gather_into_tensor(output, input, comm());
  EXPECT_TRUE(holds(output, [&](int64_t i) { return value(static_cast<int>(i / (n * m)), i % (n * m)); }));
}

TEST_P(AllGatherIntoTensorTest, Stacked) {
  const int64_t n = 2, m = 3;
  Tensor input = make({n, m}, dtype(), [&](int64_t i) { return value(rank(), i); });
  Tensor output = Tensor::zeros({ws(), n, m}, dtype());
  dist::all_gather_into_tensor(output, input, comm());
  EXPECT_TRUE(holds(output, [&](int64_t i) { return value(static_cast<int>(i / (n * m)), i % (n * m)); }));
}

TEST_P(AllGatherIntoTensorTest, OneDimensional) {
  const int64_t n = 7;
  Tensor input = make({n}, dtype(), [&](int64_t i) { return value(rank(), i); });
  Tensor output = Tensor::zeros({ws() * n}, dtype());
  dist::all_gather_into_tensor(output, input, comm());
  EXPECT_TRUE(holds(output, [&](int64_t i) { return value(static_cast<int>(i / n), i % n); }));
}

TEST_P(AllGatherIntoTensorTest, ZeroDimInputGathersIntoVector) {
  Tensor input = make({}, dtype(), [&](int64_t) { return value(rank(), 3); });
  Tensor output = Tensor::zeros({ws()}, dtype());
  dist::all_gather_into_tensor(output, input, comm());
  EXPECT_TRUE(holds(output, [&](int64_t i) { return value(static_cast<int>(i), 3); }));
}

TEST_P(AllGatherIntoTensorTest, EmptyInput) {
  Tensor input = Tensor::empty({0, 4}, dtype());
  Tensor output = Tensor::empty({0, 4}, dtype());
  dist::all_gather_into_tensor(output, input, comm());
  EXPECT_EQ(output.numel(), 0);
  Tensor stacked = Tensor::empty({ws(), 0, 4}, dtype());
  dist::all_gather_into_tensor(stacked, input, comm());
  EXPECT_EQ(stacked.numel(), 0);
}

TEST_P(AllGatherIntoTensorTest, NonContiguous) {
  const int64_t n = 4, m = 6;
  for (Layout in_layout : {Layout::Transposed, Layout::Strided, Layout::Flipped}) {
    for (Layout out_layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Flipped}) {
      Buf in = make_buf({n, m}, dtype(), in_layout);
      fill(in.view, [&](int64_t i) { return value(rank(), i); });
      Buf out = make_buf({ws() * n, m}, dtype(), out_layout);
      dist::all_gather_into_tensor(out.view, in.view, comm());
      EXPECT_TRUE(holds(out.view, [&](int64_t i) { return value(static_cast<int>(i / (n * m)), i % (n * m)); }))
          << "input " << layout_label(in_layout) << ", output " << layout_label(out_layout);
      EXPECT_TRUE(out.unchanged_outside_view());
      EXPECT_TRUE(holds(in.view, [&](int64_t i) { return value(rank(), i); })) << "input modified";
    }
  }
  // stacked output given as a permuted view
  Tensor base = Tensor::zeros({m, ws(), n}, dtype());
  TensorView stacked = base.permute({1, 2, 0});  // [ws, n, m]
  Tensor input = make({n, m}, dtype(), [&](int64_t i) { return value(rank(), i); });
  dist::all_gather_into_tensor(stacked, input, comm());
  EXPECT_TRUE(holds(stacked, [&](int64_t i) { return value(static_cast<int>(i / (n * m)), i % (n * m)); }));
}

// torch's in-place idiom: the input is this rank's block of the output.
TEST_P(AllGatherIntoTensorTest, InPlace) {
  const int64_t n = 3, m = 4;
  Tensor output = Tensor::zeros({ws() * n, m}, dtype());
  TensorView input = output.slice(0, rank() * n, (rank() + 1) * n);
  fill(input, [&](int64_t i) { return value(rank(), i); });
  dist::all_gather_into_tensor(output, input, comm());
  EXPECT_TRUE(holds(output, [&](int64_t i) { return value(static_cast<int>(i / (n * m)), i % (n * m)); }));
  // stacked
  Tensor stacked = Tensor::zeros({ws(), n, m}, dtype());
  TensorView block = stacked.select(0, rank());
  fill(block, [&](int64_t i) { return value(rank(), i + 1); });
  dist::all_gather_into_tensor(stacked, block, comm());
  EXPECT_TRUE(holds(stacked, [&](int64_t i) { return value(static_cast<int>(i / (n * m)), i % (n * m) + 1); }));
}

// ---------------------------------------------------------------- broadcast

class BroadcastTest : public DTypeTest {};

TEST_P(BroadcastTest, FromEveryRoot) {
  for (int root = 0; root < ws(); ++root) {
    Tensor t = make({5, 3}, dtype(), [&](int64_t i) { return value(rank(), i); });
    dist::broadcast(t, root, comm());
    EXPECT_TRUE(holds(t, [&](int64_t i) { return value(root, i); })) << "root " << root;
  }
}

TEST_P(BroadcastTest, ZeroDim) {
  for (int root = 0; root < ws(); ++root) {
    Tensor t = make({}, dtype(), [&](int64_t) { return value(rank(), 11); });
    dist::broadcast(t, root, comm());
    EXPECT_TRUE(holds(t, [&](int64_t) { return value(root, 11); })) << "root " << root;
  }
}

TEST_P(BroadcastTest, Empty) {
  Tensor t = Tensor::empty({0, 3}, dtype());
  dist::broadcast(t, ws() - 1, comm());
  EXPECT_EQ(t.numel(), 0);
}

TEST_P(BroadcastTest, NonContiguous) {
  for (Layout layout : {Layout::Transposed, Layout::Strided, Layout::Flipped}) {
    for (int root = 0; root < ws(); ++root) {
      Buf b = make_buf({6, 5}, dtype(), layout);
      fill(b.view, [&](int64_t i) { return value(rank(), i); });
      b.take_snapshot();
      dist::broadcast(b.view, root, comm());
      EXPECT_TRUE(holds(b.view, [&](int64_t i) { return value(root, i); }))
          << layout_label(layout) << ", root " << root;
      EXPECT_TRUE(b.unchanged_outside_view());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, AllGatherTest, ::testing::ValuesIn(test_dtypes()), dtype_name_of);
INSTANTIATE_TEST_SUITE_P(AllDTypes, AllGatherIntoTensorTest, ::testing::ValuesIn(test_dtypes()), dtype_name_of);
INSTANTIATE_TEST_SUITE_P(AllDTypes, BroadcastTest, ::testing::ValuesIn(test_dtypes()), dtype_name_of);

// ---------------------------------------------------------------- messages of a few MiB

// Messages of several chunks, their ends ragged. These collectives move
// bytes, so what their chunking can get wrong depends on the element size
// alone: one dtype of each size (the small-message tests above take every
// dtype). Every whole-suite run repeats them, the sanitizer build's too.
class SeveralChunksTest : public DTypeTest {};

TEST_P(SeveralChunksTest, AllGatherIntoTensor) {
  const int64_t n = (3 << 20) / scatterx::element_size(dtype()) + 3;
  Tensor input = make({n}, dtype(), [&](int64_t i) { return value(rank(), i); });
  Tensor output = Tensor::empty({ws() * n}, dtype());
  dist::all_gather_into_tensor(output, input, comm());
  EXPECT_TRUE(holds(output, [&](int64_t i) { return value(static_cast<int>(i / n), i % n); }));
}

TEST_P(SeveralChunksTest, Broadcast) {
  const int64_t n = (5 << 20) / scatterx::element_size(dtype()) + 1;
  const int root = ws() / 2;
  Tensor t = make({n}, dtype(), [&](int64_t i) { return value(rank(), i); });
  dist::broadcast(t, root, comm());
  EXPECT_TRUE(holds(t, [&](int64_t i) { return value(root, i); }));
}

INSTANTIATE_TEST_SUITE_P(OnePerElementSize, SeveralChunksTest,
                         ::testing::Values(DType::UInt8, DType::BFloat16, DType::Float32, DType::Int64,
                                           DType::Complex128),
                         dtype_name_of);

}  // namespace
}  // namespace sxd

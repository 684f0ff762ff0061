// CUDA tensors in the distributed layer: staged through host memory around
// the exchange (dist/collectives.cpp), results equal to the rank formulas of
// the CPU tests. The device tests run where a GPU is visible (every rank
// uses device 0); without the CUDA backend CUDA tensors are refused on every
// rank before any communication.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/cuda.h"
#include "ops/cuda/backend.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;
namespace backend = scatterx::detail::cuda;
using scatterx::Device;

class CudaDistTest : public DistTest {};

TEST_F(CudaDistTest, RefusedWithoutTheBackend) {
  if (scatterx::cuda::is_built()) GTEST_SKIP() << "this build has the CUDA backend";
  const TensorView fake(reinterpret_cast<void*>(uintptr_t{0x10000}), DType::Float32, Shape{8}, Device::cuda(0));
  const std::string msg = expect_throws<ArgumentError>([&] { dist::all_reduce(fake, ReduceOp::Sum, comm()); });
  EXPECT_TRUE(mentions(msg, {"all_reduce", "expected cpu tensors", "no CUDA backend", "cuda:0"}));
}

Tensor to_device(const Tensor& host) {
  Tensor d = Tensor::empty(host.sizes(), host.dtype(), Device::cuda(0));
  backend::copy_from_host(d.data(), host.data(), host.numel() * host.element_size(), "test");
  return d;
}

Tensor to_host(const TensorView& device) {
  Tensor h = Tensor::empty(device.sizes(), device.dtype());
  backend::copy_to_host(h.data(), device.data(), h.numel() * h.element_size(), "test");
  return h;
}

class CudaDistDeviceTest : public DistTest {
 protected:
  void SetUp() override {
    if (scatterx::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

TEST_F(CudaDistDeviceTest, AllReduceAndReduceScatter) {
  for (DType dtype : {DType::Float32, DType::Int64, DType::BFloat16}) {
    SCOPED_TRACE(scatterx::dtype_name(dtype));
    const int64_t n = 1000 * ws() + 7;
    const Tensor host = make({n}, dtype, [&](int64_t i) { return reduce_input(ReduceOp::Sum, dtype, rank(), i); });
    const Tensor device = to_device(host);
    dist::all_reduce(device, ReduceOp::Sum, comm());
    EXPECT_TRUE(
        holds(to_host(device), [&](int64_t i) { return reduce_expected(ReduceOp::Sum, dtype, iota_ranks(ws()), i); }));
    const int64_t block = 3001;
    const Tensor in = to_device(
        make({block * ws()}, dtype, [&](int64_t i) { return reduce_input(ReduceOp::Max, dtype, rank(), i); }));
    const Tensor out = Tensor::empty({block}, dtype, Device::cuda(0));
    dist::reduce_scatter_tensor(out, in, ReduceOp::Max, comm());
    EXPECT_TRUE(holds(to_host(out), [&](int64_t i) {
      return reduce_expected(ReduceOp::Max, dtype, iota_ranks(ws()), rank() * block + i);
    }));
  }
}

TEST_F(CudaDistDeviceTest, AllGatherBroadcastAndAllToAllV) {
  const int64_t n = 513;
  const Tensor mine =
      to_device(make({n}, DType::Float32, [&](int64_t i) { return plain_value(DType::Float32, rank(), i); }));
  const Tensor gathered = Tensor::empty({n * ws()}, DType::Float32, Device::cuda(0));
  dist::all_gather_into_tensor(gathered, mine, comm());
  EXPECT_TRUE(
      holds(to_host(gathered), [&](int64_t i) { return plain_value(DType::Float32, static_cast<int>(i / n), i % n); }));

  const Tensor b = to_device(make({n}, DType::Int32, [&](int64_t i) { return plain_value(DType::Int32, rank(), i); }));
  dist::broadcast(b, ws() - 1, comm());
  EXPECT_TRUE(holds(to_host(b), [&](int64_t i) { return plain_value(DType::Int32, ws() - 1, i); }));

  // rank r sends r + 1 rows of 4 to every rank
  const int64_t rows = static_cast<int64_t>(rank() + 1) * ws();
  const Tensor send = to_device(make({rows, 4}, DType::Float32, [&](int64_t i) {
    return V{double(rank() * 1000 + i), 0};
  }));
  const std::vector<int64_t> splits(static_cast<size_t>(ws()), rank() + 1);
  const dist::AllToAllVResult r = dist::all_to_all_v(send, splits, comm());
  EXPECT_TRUE(r.output.device() == Device::cuda(0));
  const Tensor got = to_host(r.output);
  int64_t row = 0;
  for (int p = 0; p < ws(); ++p) {
    ASSERT_EQ(r.recv_splits[static_cast<size_t>(p)], p + 1);
    for (int64_t k = 0; k < p + 1; ++k, ++row) {
      for (int64_t c = 0; c < 4; ++c) {
        const double want = p * 1000 + (rank() * (p + 1) + k) * 4 + c;
        EXPECT_EQ(get(got, row * 4 + c).re, want) << "from rank " << p;
      }
    }
  }
}

}  // namespace
}  // namespace sxd

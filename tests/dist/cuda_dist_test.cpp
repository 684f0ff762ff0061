// CUDA tensors in the distributed layer: every collective runs the device
// paths (dist/device.h: folds on the GPU, chunks staged through pinned slots
// or handed to CUDA-aware MPI); results equal the rank formulas of the CPU
// tests. The device tests run where a GPU is visible (every rank uses
// device 0); without the CUDA backend CUDA tensors are refused on every rank
// before any communication. (The paths' ordering is also checked without a
// GPU: see dist_np*_device_* in CMakeLists.txt.)
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/cuda.h"
#include "ops/runtime/cuda/runtime.h"
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
  const std::string msg = error_message<ArgumentError>([&] { dist::all_reduce(fake, ReduceOp::Sum, comm()); });
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

// Every dtype x reduce op through the device paths (dist/device.h) with
// tensors of several staging chunks (2 MiB each), odd lengths so that the
// last chunk and the blocks are uneven; exact rank-formula results.
TEST_F(CudaDistDeviceTest, DeviceRingsEveryDtypeAndOp) {
  for (DType dtype : test_dtypes()) {
    for (ReduceOp op : all_reduce_ops()) {
      if (!reduce_supported(op, dtype)) continue;
      SCOPED_TRACE(scatterx::dtype_name(dtype) + std::string(" ") + op_label(op));
      const int64_t n = (int64_t{5} << 20) / scatterx::element_size(dtype) + 3;
      const Tensor device = to_device(make({n}, dtype, [&](int64_t i) { return reduce_input(op, dtype, rank(), i); }));
      dist::all_reduce(device, op, comm());
      EXPECT_TRUE(holds(to_host(device), [&](int64_t i) { return reduce_expected(op, dtype, iota_ranks(ws()), i); }));

      const int64_t block = n / 2 + 1;
      const Tensor in =
          to_device(make({block * ws()}, dtype, [&](int64_t i) { return reduce_input(op, dtype, rank(), i); }));
      const Tensor out = Tensor::empty({block}, dtype, Device::cuda(0));
      dist::reduce_scatter_tensor(out, in, op, comm());
      EXPECT_TRUE(holds(to_host(out),
                        [&](int64_t i) { return reduce_expected(op, dtype, iota_ranks(ws()), rank() * block + i); }));
    }
  }
}

// Strided device views are packed and unpacked on the device; the lists of
// reduce_scatter and all_gather go through one device buffer.
TEST_F(CudaDistDeviceTest, DeviceRingsStridedViewsAndLists) {
  const DType dtype = DType::Float64;
  const int64_t rows = 301;
  const int64_t cols = 7;
  // all_reduce on a transposed view of a [cols, rows] device tensor
  const Tensor base = to_device(make({cols, rows}, dtype, [&](int64_t i) {
    const int64_t c = i / rows, r = i % rows;
    return reduce_input(ReduceOp::Sum, dtype, rank(), r * cols + c);
  }));
  const TensorView transposed = base.transpose(0, 1);  // [rows, cols], element (r, c) = input r * cols + c
  dist::all_reduce(transposed, ReduceOp::Sum, comm());
  const Tensor back = to_host(base);
  EXPECT_TRUE(holds(back, [&](int64_t i) {
    const int64_t c = i / rows, r = i % rows;
    return reduce_expected(ReduceOp::Sum, dtype, iota_ranks(ws()), r * cols + c);
  }));

  // reduce_scatter with a list of device tensors, output a strided view
  const int64_t n = 1000;
  std::vector<Tensor> inputs;
  std::vector<TensorView> input_views;
  for (int r = 0; r < ws(); ++r) {
    inputs.push_back(
        to_device(make({n}, dtype, [&](int64_t i) { return reduce_input(ReduceOp::Max, dtype, rank(), r * n + i); })));
    input_views.push_back(inputs.back());
  }
  const Tensor wide = to_device(make({2 * n}, dtype, [](int64_t) { return V{-1.0, 0}; }));
  const TensorView every_other = wide.slice(0, 0, 2 * n, 2);
  dist::reduce_scatter(every_other, input_views, ReduceOp::Max, comm());
  const Tensor wide_host = to_host(wide);
  EXPECT_TRUE(holds(wide_host, [&](int64_t i) {
    return i % 2 == 0 ? reduce_expected(ReduceOp::Max, dtype, iota_ranks(ws()), rank() * n + i / 2) : V{-1.0, 0};
  }));

  // all_gather into a list
  const Tensor mine = to_device(make({n}, dtype, [&](int64_t i) { return plain_value(dtype, rank(), i); }));
  std::vector<Tensor> outs;
  std::vector<TensorView> out_views;
  for (int r = 0; r < ws(); ++r) {
    outs.push_back(Tensor::empty({n}, dtype, Device::cuda(0)));
    out_views.push_back(outs.back());
  }
  dist::all_gather(out_views, mine, comm());
  for (int r = 0; r < ws(); ++r) {
    EXPECT_TRUE(holds(to_host(outs[static_cast<size_t>(r)]), [&](int64_t i) { return plain_value(dtype, r, i); }))
        << "block of rank " << r;
  }
}

// Uneven and empty splits, several staging chunks per share; a broadcast
// of several chunks from every root.
TEST_F(CudaDistDeviceTest, DevicePathsAllToAllSingleAndBroadcast) {
  const int64_t cols = 1 << 15;  // 256 KiB rows of float64
  // rank r sends (r + p) % 3 rows to rank p
  std::vector<int64_t> send_splits, recv_splits;
  for (int p = 0; p < ws(); ++p) {
    send_splits.push_back((rank() + p) % 3);
    recv_splits.push_back((p + rank()) % 3);
  }
  int64_t send_rows = 0, recv_rows = 0;
  for (int p = 0; p < ws(); ++p) {
    send_rows += send_splits[static_cast<size_t>(p)];
    recv_rows += recv_splits[static_cast<size_t>(p)];
  }
  const Tensor send = to_device(make({send_rows, cols}, DType::Float64, [&](int64_t i) {
    return V{double(rank() * 100000000 + i), 0};
  }));
  const Tensor recv = Tensor::empty({recv_rows, cols}, DType::Float64, Device::cuda(0));
  dist::all_to_all_single(recv, send, recv_splits, send_splits, comm());
  const Tensor got = to_host(recv);
  int64_t row = 0;
  for (int p = 0; p < ws(); ++p) {
    int64_t first = 0;  // p's first row for this rank
    for (int q = 0; q < rank(); ++q) first += (p + q) % 3;
    for (int64_t k = 0; k < recv_splits[static_cast<size_t>(p)]; ++k, ++row) {
      for (int64_t c = 0; c < cols; c += 4099) {
        ASSERT_EQ(get(got, row * cols + c).re, double(p * 100000000 + (first + k) * cols + c)) << "from rank " << p;
      }
    }
  }

  const int64_t n = (int64_t{5} << 20) / 8 + 5;
  for (int root = 0; root < ws(); ++root) {
    const Tensor b =
        to_device(make({n}, DType::Int64, [&](int64_t i) { return plain_value(DType::Int64, rank(), i); }));
    dist::broadcast(b, root, comm());
    EXPECT_TRUE(holds(to_host(b), [&](int64_t i) { return plain_value(DType::Int64, root, i); })) << "root " << root;
  }
}

// The async form runs the device paths on the progress thread, on the
// stream that was current at the call.
TEST_F(CudaDistDeviceTest, DeviceRingsAsync) {
  const DType dtype = DType::BFloat16;
  const int64_t n = (int64_t{3} << 20) + 11;
  const Tensor device =
      to_device(make({n}, dtype, [&](int64_t i) { return reduce_input(ReduceOp::Avg, dtype, rank(), i); }));
  dist::Work work = dist::all_reduce_async(device, ReduceOp::Avg, comm());
  work.wait();
  EXPECT_TRUE(work.is_completed());
  EXPECT_TRUE(
      holds(to_host(device), [&](int64_t i) { return reduce_expected(ReduceOp::Avg, dtype, iota_ranks(ws()), i); }));
}

}  // namespace
}  // namespace sxd

// The core types: TensorView's views (shape, strides, data pointer, and the
// values seen through them), Tensor::clone / zeros / adopt, copy_, Scalar
// conversions, and dtype / reduce names.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <thread>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>

#include "ops/runtime/knobs.h"
#include "ops/runtime/memory.h"
#include "tests/op_checks.h"

namespace sxt {
namespace {

using scatterx::ArgumentError;
using scatterx::DTypeError;
using scatterx::IndexError;

// A contiguous float tensor holding 0, 1, 2, ... in row-major order.
Tensor iota_tensor(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  float* p = static_cast<float*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

float at(const TensorView& v, std::initializer_list<int64_t> c) { return load<float>(v, c.begin()); }

const char* byte_ptr(const TensorView& v) { return static_cast<const char*>(v.data()); }

TEST(TensorViewTest, ContiguousBasics) {
  Tensor t = iota_tensor({2, 3, 4});
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.element_size(), 4);
  EXPECT_EQ(t.strides(), Shape({12, 4, 1}));
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(-3), 12);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.owns_memory());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  EXPECT_EQ(t.str(), "float32[2, 3, 4] strides [12, 4, 1] on cpu");
  EXPECT_EQ(scatterx::contiguous_strides({5, 0, 3}), Shape({3, 3, 1}));
  EXPECT_EQ(scatterx::shape_numel({}), 1);
  EXPECT_EQ(scatterx::shape_numel({4, 0}), 0);
  expect_error<ArgumentError>([&] { (void)t.size(3); }, {"dim 3", "3 dimensions"});
  expect_error<DTypeError>([&] { (void)t.data_as<double>(); }, {"float64", "float32"});
  EXPECT_EQ(t.data_as<float>(), t.data());
}

TEST(TensorViewTest, TransposeAndPermute) {
  Tensor t = iota_tensor({2, 3, 4});
  const TensorView tr = t.transpose(0, -1);
  EXPECT_EQ(tr.sizes(), Shape({4, 3, 2}));
  EXPECT_EQ(tr.strides(), Shape({1, 4, 12}));
  EXPECT_EQ(tr.data(), t.data());
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(at(tr, {3, 2, 1}), 1 * 12 + 2 * 4 + 3);
  const TensorView p = t.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), Shape({4, 2, 3}));
  EXPECT_EQ(p.strides(), Shape({1, 12, 4}));
  EXPECT_EQ(at(p, {3, 1, 2}), 1 * 12 + 2 * 4 + 3);
  expect_error<ArgumentError>([&] { (void)t.permute({0, 0, 1}); }, {"permute"});
  expect_error<ArgumentError>([&] { (void)t.permute({0, 1}); }, {"permute"});
}

TEST(TensorViewTest, SliceSelectFlip) {
  Tensor t = iota_tensor({2, 3, 4});
  const TensorView s = t.slice(2, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.sizes(), Shape({2, 3, 2}));
  EXPECT_EQ(s.strides(), Shape({12, 4, 2}));
  EXPECT_EQ(byte_ptr(s), byte_ptr(t) + 4);
  EXPECT_EQ(at(s, {1, 2, 1}), 12 + 8 + 3);
  EXPECT_EQ(t.slice(1, 1, 3).sizes(), Shape({2, 2, 4}));
  EXPECT_EQ(t.slice(2, -3, 100).sizes(), Shape({2, 3, 3}));  // negative start, stop clamped
  EXPECT_EQ(t.slice(2, 3, 1).sizes(), Shape({2, 3, 0}));     // empty
  expect_error<ArgumentError>([&] { (void)t.slice(0, 0, 2, 0); }, {"step"});

  const TensorView sel = t.select(1, -1);
  EXPECT_EQ(sel.sizes(), Shape({2, 4}));
  EXPECT_EQ(sel.strides(), Shape({12, 1}));
  EXPECT_EQ(at(sel, {1, 3}), 12 + 8 + 3);
  expect_error<IndexError>([&] { (void)t.select(1, 3); }, {"index 3", "size 3"});

  const TensorView f = t.flip(2);
  EXPECT_EQ(f.strides(), Shape({12, 4, -1}));
  EXPECT_EQ(byte_ptr(f), byte_ptr(t) + 3 * 4);
  EXPECT_EQ(at(f, {0, 0, 0}), 3);
  EXPECT_EQ(at(f, {1, 2, 3}), 12 + 8);
  EXPECT_EQ(f.flip(-1).strides(), t.strides());
  EXPECT_EQ(f.flip(-1).data(), t.data());
  EXPECT_EQ(f.byte_range(), t.byte_range());
  EXPECT_EQ(t.byte_range().second - t.byte_range().first, 24 * 4);
  const TensorView f0 = t.flip(0).flip(1);
  EXPECT_EQ(at(f0, {0, 0, 2}), 12 + 8 + 2);
}

TEST(TensorViewTest, ExpandViewUnsqueeze) {
  Tensor t = iota_tensor({3, 1});
  const TensorView e = t.expand({2, 3, 4});
  EXPECT_EQ(e.sizes(), Shape({2, 3, 4}));
  EXPECT_EQ(e.strides(), Shape({0, 1, 0}));
  EXPECT_EQ(at(e, {1, 2, 3}), 2);
  EXPECT_EQ(t.expand({-1, 5}).sizes(), Shape({3, 5}));
  expect_error<ArgumentError>([&] { (void)t.expand({4, 1}); }, {"expand"});

  Tensor u = iota_tensor({2, 3, 4});
  // Tensor::view() (the view of the whole tensor) hides TensorView::view(shape).
  const TensorView v = u.view().view({6, -1});
  EXPECT_EQ(v.sizes(), Shape({6, 4}));
  EXPECT_EQ(v.strides(), Shape({4, 1}));
  EXPECT_EQ(at(v, {5, 3}), 23);
  expect_error<ArgumentError>([&] { (void)u.view().view({5, -1}); }, {"view"});
  expect_error<ArgumentError>([&] { (void)u.transpose(0, 1).view({24}); }, {"contiguous"});

  const TensorView un = u.unsqueeze(1);
  EXPECT_EQ(un.sizes(), Shape({2, 1, 3, 4}));
  EXPECT_EQ(u.unsqueeze(-1).sizes(), Shape({2, 3, 4, 1}));
  EXPECT_EQ(at(un, {1, 0, 2, 3}), 23);
}

TEST(TensorViewTest, ConstructorChecks) {
  float x = 0;
  expect_error<ArgumentError>([&] { TensorView(&x, DType::Float32, Shape{2}, Shape{1, 1}); }, {"stride"});
  expect_error<ArgumentError>([&] { TensorView(&x, DType::Float32, Shape{-1}); }, {"non-negative"});
  expect_error<ArgumentError>([&] { TensorView(nullptr, DType::Float32, Shape{2}); }, {"nullptr"});
  EXPECT_NO_THROW(TensorView(nullptr, DType::Float32, Shape{0, 2}));
  EXPECT_EQ(scatterx::Device::cuda(1).str(), "cuda:1");
  EXPECT_EQ(scatterx::Device::cpu().str(), "cpu");
}

// clone of every kind of non-contiguous view gives a contiguous tensor that
// owns new memory and holds the view's values in row-major order.
TEST(TensorTest, CloneOfNonContiguousViews) {
  for (DType dtype : all_dtypes()) {
    SCOPED_TRACE(scatterx::dtype_name(dtype));
    run_cases(12, [&](Rng& rng, int case_number) {
      Shape shape;
      const int rank = case_number % 5;
      for (int d = 0; d < rank; ++d) shape.push_back(rng.uniform(case_number == 4 ? 0 : 1, 5));
      Buf b = random_buf(shape, dtype, random_layout(rng, true), rng);
      SCOPED_TRACE(b.str());
      b.take_snapshot();
      const Tensor c = Tensor::clone(b.view);
      EXPECT_TRUE(c.is_contiguous());
      EXPECT_TRUE(c.owns_memory());
      EXPECT_EQ(c.strides(), scatterx::contiguous_strides(shape));
      EXPECT_TRUE(same_values(c, b.view));
      EXPECT_TRUE(b.unchanged());
      if (c.numel() > 0) {
        EXPECT_NE(c.data(), b.base.data());
      }
    });
  }
}

TEST(TensorTest, ZerosAndAdopt) {
  const Tensor z = Tensor::zeros({3, 5}, DType::Complex128);
  const auto* p = static_cast<const unsigned char*>(z.data());
  EXPECT_TRUE(std::all_of(p, p + 3 * 5 * 16, [](unsigned char c) { return c == 0; }));
  auto owner = std::make_shared<std::vector<int32_t>>(6, 7);
  std::weak_ptr<std::vector<int32_t>> weak = owner;
  {
    const Tensor a = Tensor::adopt(TensorView(owner->data(), DType::Int32, Shape{2, 3}), owner);
    owner.reset();
    EXPECT_FALSE(weak.expired());
    EXPECT_EQ(static_cast<const int32_t*>(a.data())[5], 7);
  }
  EXPECT_TRUE(weak.expired());
}

// A freed CPU tensor's block goes to the recycling cache (within
// SCATTERX_HOST_CACHE_BYTES) and the next tensor of that size gets it back,
// pages already faulted in; with the knob at 0 (the sanitizer runs) every
// block goes back to the allocator.
TEST(TensorTest, FreedHostMemoryIsRecycledWithinTheCacheLimit) {
  using scatterx::detail::recycled_cached_bytes;
  const Shape shape{3, 1 << 18};  // 3 MiB of float32: a huge-page allocation
  const size_t bytes = size_t{3} << 20;
  const bool caching = scatterx::detail::knob_bytes(scatterx::detail::Knob::HostCacheBytes) >= int64_t{8} << 20;
  const void* first = nullptr;
  size_t cached_while_alive = 0;
  {
    Tensor t = Tensor::empty(shape, DType::Float32);
    first = t.data();
    cached_while_alive = recycled_cached_bytes();
  }
  if (!caching) {
    EXPECT_EQ(recycled_cached_bytes(), 0u);
    return;
  }
  EXPECT_GE(recycled_cached_bytes(), cached_while_alive + bytes);
  Tensor again = Tensor::empty(shape, DType::Float32);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(recycled_cached_bytes(), cached_while_alive);
  // Recycled memory is still an uninitialized tensor the caller fills.
  std::fill_n(static_cast<float*>(again.data()), again.numel(), 2.0f);
  EXPECT_EQ(static_cast<const float*>(again.data())[again.numel() - 1], 2.0f);
  // Emptying the cache gives back what it holds, and no live tensor's memory.
  const size_t held = scatterx::host_cache_bytes();
  EXPECT_EQ(scatterx::empty_host_cache(), held);
  EXPECT_EQ(scatterx::host_cache_bytes(), 0u);
  EXPECT_EQ(static_cast<const float*>(again.data())[0], 2.0f);
}

// A child forked while another thread holds the cache's lock (a DataLoader
// worker forked mid-op, say) can still allocate: the lock is taken around
// fork and released on both sides. A child that hangs is killed by its alarm.
TEST(TensorTest, ForkWhileAnotherThreadAllocatesLeavesTheChildUsable) {
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load()) Tensor t = Tensor::empty({1 << 16}, DType::Float32);
  });
  int failed = 0;
  for (int i = 0; i < 100; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(5);
      Tensor t = Tensor::empty({1 << 16}, DType::Float32);
      _exit(t.data() != nullptr ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(failed, 0) << "children that could not allocate after fork";
}

TEST(TensorTest, CopyBetweenLayouts) {
  for (DType dtype : all_dtypes()) {
    SCOPED_TRACE(scatterx::dtype_name(dtype));
    run_cases(10, [&](Rng& rng, int case_number) {
      Shape shape;
      const int rank = case_number % 5;
      for (int d = 0; d < rank; ++d) shape.push_back(rng.uniform(1, 6));
      Buf dst = random_buf(shape, dtype, random_layout(rng, false), rng);
      Buf src = random_buf(shape, dtype, random_layout(rng, true), rng);
      dst.take_snapshot();
      src.take_snapshot();
      const TensorView r = scatterx::copy_(dst.view, src.view);
      EXPECT_EQ(r.data(), dst.view.data());
      EXPECT_TRUE(same_values(dst.view, src.view));
      EXPECT_TRUE(dst.unchanged_outside_view());
      EXPECT_TRUE(src.unchanged());
    });
  }
}

TEST(TensorTest, CopyErrors) {
  Tensor a = iota_tensor({2, 3});
  Tensor b = iota_tensor({3, 2});
  expect_error<ArgumentError>([&] { scatterx::copy_(a, b); }, {"copy_", "[2, 3]", "[3, 2]"});
  Tensor d = Tensor::zeros({2, 3}, DType::Float64);
  expect_error<DTypeError>([&] { scatterx::copy_(d, a); }, {"copy_", "float64", "float32"});
  expect_error<ArgumentError>([&] { scatterx::copy_(a.slice(1, 0, 2), a.slice(1, 1, 3)); }, {"copy_", "overlap"});
  Tensor one = iota_tensor({1, 3});
  expect_error<ArgumentError>([&] { scatterx::copy_(one.expand({2, 3}), a); }, {"copy_", "overlap"});
  const Tensor before = Tensor::clone(a);
  EXPECT_TRUE(same_values(a, before));
}

TEST(ScalarTest, Conversions) {
  // torch's ranges: [lowest, max], and down to -max for unsigned types (wrapping)
  EXPECT_EQ(Scalar(int64_t{-1}).to<uint8_t>("op", "value"), uint8_t{255});
  EXPECT_EQ(Scalar(int64_t{-255}).to<uint8_t>("op", "value"), uint8_t{1});
  EXPECT_EQ(Scalar(int64_t{-128}).to<int8_t>("op", "value"), int8_t{-128});
  EXPECT_EQ(Scalar(127.9).to<int8_t>("op", "value"), int8_t{127});
  expect_error<ArgumentError>([] { (void)Scalar(int64_t{300}).to<int8_t>("myop", "value"); },
                              {"myop: value 300 cannot be converted to int8 without overflow"});
  expect_error<ArgumentError>([] { (void)Scalar(int64_t{-256}).to<uint8_t>("myop", "value"); }, {"uint8"});
  expect_error<ArgumentError>([] { (void)Scalar(128.0).to<int8_t>("myop", "value"); }, {"int8", "overflow"});
  expect_error<ArgumentError>([] { (void)Scalar(1e30).to<int64_t>("myop", "value"); }, {"int64", "overflow"});
  expect_error<ArgumentError>([] { (void)Scalar(65520.0).to<Half>("myop", "value"); }, {"float16", "overflow"});
  expect_error<ArgumentError>([] { (void)Scalar(1e39).to<float>("myop", "value"); }, {"float32", "overflow"});
  EXPECT_TRUE(std::isinf(static_cast<float>(Scalar(1.0 / 0.0).to<Half>("op", "value"))));
  EXPECT_EQ(Scalar(2.7).to<int32_t>("op", "value"), 2);  // truncates toward zero
  EXPECT_EQ(Scalar(-2.7).to<int32_t>("op", "value"), -2);
  EXPECT_EQ(Scalar(0.5).to<bool>("op", "value"), true);
  EXPECT_EQ(Scalar(0.0).to<bool>("op", "value"), false);
  EXPECT_EQ(Scalar(int64_t{2}).to<bool>("op", "value"), true);
  EXPECT_EQ(Scalar(true).to<int64_t>("op", "value"), 1);
  EXPECT_EQ(Scalar(true).to<double>("op", "value"), 1.0);
  EXPECT_EQ(Scalar(int64_t{5}).to<double>("op", "value"), 5.0);
  EXPECT_EQ(Scalar(0.1).to<float>("op", "value"), 0.1f);
  EXPECT_EQ(Scalar(0.1).to<Half>("op", "value").bits, Half(0.1f).bits);
  EXPECT_EQ(Scalar(0.1).to<BFloat16>("op", "value").bits, BFloat16(0.1f).bits);
  EXPECT_EQ(Scalar(int64_t{(int64_t{1} << 53) + 1}).to<int64_t>("op", "value"), (int64_t{1} << 53) + 1);
  const auto c = Scalar(Complex<double>(1.5, -2.0)).to<Complex<float>>("op", "value");
  EXPECT_EQ(c.re, 1.5f);
  EXPECT_EQ(c.im, -2.0f);
  const auto c2 = Scalar(3.0).to<Complex<double>>("op", "value");
  EXPECT_EQ(c2.re, 3.0);
  EXPECT_EQ(c2.im, 0.0);
  EXPECT_EQ(Scalar(Complex<double>(4.0, 0.0)).to<float>("op", "value"), 4.0f);
  expect_error<ArgumentError>([] { (void)Scalar(Complex<double>(1.0, 2.0)).to<float>("myop", "alpha"); },
                              {"myop: ", "alpha", "real", "float32", "(1+2j)"});
}

TEST(ScalarTest, KindsAndStrings) {
  EXPECT_TRUE(Scalar(true).is_bool());
  EXPECT_TRUE(Scalar(true).is_integral());
  EXPECT_TRUE(Scalar(int64_t{3}).is_integral());
  EXPECT_FALSE(Scalar(int64_t{3}).is_bool());
  EXPECT_TRUE(Scalar(3).is_integral());
  EXPECT_TRUE(Scalar(2.5f).is_floating_point());
  EXPECT_TRUE(Scalar(Complex<double>(1, 2)).is_complex());
  EXPECT_EQ(Scalar().as_int(), 0);
  EXPECT_EQ(Scalar(int64_t{3}).str(), "3");
  EXPECT_EQ(Scalar(2.5).str(), "2.5");
  EXPECT_EQ(Scalar(true).str(), "true");
  EXPECT_EQ(Scalar(false).str(), "false");
  EXPECT_EQ(Scalar(Complex<double>(1, 2)).str(), "(1+2j)");
  EXPECT_EQ(Scalar(Complex<double>(1, -2)).str(), "(1-2j)");
}

TEST(NamesTest, DTypeNamesRoundTrip) {
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8}, {"complex64", 8}, {"complex128", 16},
      {"int8", 1},    {"uint8", 1},    {"int16", 2},   {"int32", 4},   {"int64", 8},     {"bool", 1}};
  ASSERT_EQ(all_dtypes().size(), expected.size());
  ASSERT_EQ(scatterx::kNumDTypes, static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const DType d = all_dtypes()[i];
    EXPECT_EQ(scatterx::dtype_name(d), expected[i].first);
    EXPECT_EQ(scatterx::element_size(d), expected[i].second);
    EXPECT_EQ(scatterx::dtype_from_name(expected[i].first), d);
  }
  EXPECT_TRUE(scatterx::is_index_dtype(DType::Int32));
  EXPECT_FALSE(scatterx::is_index_dtype(DType::Int16));
  EXPECT_TRUE(scatterx::is_integral(DType::Bool, true));
  EXPECT_FALSE(scatterx::is_integral(DType::Bool, false));
  EXPECT_TRUE(scatterx::is_floating_point(DType::BFloat16));
  EXPECT_FALSE(scatterx::is_floating_point(DType::Complex64));
  for (const char* bad : {"float", "Float32", "", "int"}) {
    expect_error<DTypeError>([&] { (void)scatterx::dtype_from_name(bad, "load"); },
                             {"load: ", "'" + std::string(bad) + "'"});
  }
  expect_error<DTypeError>([&] { (void)scatterx::dtype_from_name("half"); }, {"dtype_from_name: ", "'half'"});
}

TEST(NamesTest, ReduceNamesRoundTrip) {
  for (Reduce r : {Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin}) {
    EXPECT_EQ(scatterx::reduce_from_name(scatterx::reduce_name(r), "op"), r);
  }
  EXPECT_EQ(scatterx::reduce_from_name("add", "op"), Reduce::Sum);
  EXPECT_EQ(scatterx::reduce_from_name("multiply", "op"), Reduce::Prod);
  EXPECT_STREQ(scatterx::reduce_name(Reduce::Amin), "amin");
  EXPECT_STREQ(scatterx::reduce_name(Reduce::None), "none");
  for (const char* bad : {"max", "Sum", "", "mul"}) {
    expect_error<ArgumentError>([&] { (void)scatterx::reduce_from_name(bad, "scatter_reduce"); },
                                {"scatter_reduce: ", "'" + std::string(bad) + "'"});
  }
  EXPECT_TRUE(scatterx::reduce_supported(Reduce::Amax, DType::Float16));
  EXPECT_FALSE(scatterx::reduce_supported(Reduce::Amax, DType::Complex64));
  EXPECT_FALSE(scatterx::reduce_supported(Reduce::Mean, DType::Bool));
  EXPECT_TRUE(scatterx::reduce_supported(Reduce::Prod, DType::Bool));
}

}  // namespace
}  // namespace sxt

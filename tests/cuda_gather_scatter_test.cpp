// gather_scatter, scatter_by_plan and IndexPlan on the GPU against the CPU
// backend (checked against a serial loop in gather_scatter_test.cpp): bit
// for bit where both fold each destination's edges in edge order with the
// same functors (amax / amin, and every group of up to kSerialGroup edges),
// else within what rounding alone can do (tests/fold_tolerance.h): the GPU
// folds a longer group in chunks. Every floating dtype x reduce x index dtypes,
// weighted or not, strided x and indices, dim_size beyond max(dst), empty
// edge lists, a plan used twice and gather_scatter_out; then the plan's own
// behaviour on the GPU (counts, inferred sizes, errors, device mismatches)
// and the unchecked mode. Every test skips when no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "ops/cuda.h"
#include "ops/gather_scatter/cuda/chunks.cuh"
#include "scatterx.h"
#include "tests/cuda_test_util.h"
#include "tests/fold_tolerance.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

class CudaGatherScatter : public ::testing::Test {
 protected:
  void SetUp() override {
    if (scatterx::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
  void TearDown() override { scatterx::cuda::set_index_checks(true); }
};

// A 1-d list of n entries on both devices: storage of n, or of 2n read with step 2.
struct EdgeList {
  Tensor host_storage, gpu_storage;
  TensorView host, gpu;
};

EdgeList edge_list(int64_t n, DType dtype, Rng& rng, const std::function<void(const TensorView&)>& fill) {
  EdgeList l;
  const bool strided = rng.chance(0.5);
  l.host_storage = Tensor::zeros({strided ? 2 * n : n}, dtype);
  l.host = strided ? l.host_storage.slice(0, 0, 2 * n, 2) : TensorView(l.host_storage);
  fill(l.host);
  l.gpu_storage = to_device(l.host_storage).base;
  l.gpu = strided ? l.gpu_storage.slice(0, 0, 2 * n, 2) : TensorView(l.gpu_storage);
  return l;
}

int64_t max_value(const TensorView& index) {
  int64_t m = -1;
  for (int64_t e = 0; e < index.size(0); ++e) {
    const int64_t c[1] = {e};
    m = std::max(m, index.dtype() == DType::Int32 ? int64_t{load<int32_t>(index, c)} : load<int64_t>(index, c));
  }
  return m;
}

int64_t longest_group(const TensorView& dst, int64_t dim_size) {
  const Tensor counts = scatterx::IndexPlan(dst, dim_size).counts();
  int64_t longest = 0;
  for (int64_t t = 0; t < counts.numel(); ++t)
    longest = std::max(longest, static_cast<const int64_t*>(counts.data())[t]);
  return longest;
}

// The GPU's result (on the host) against the CPU's for gather_scatter(x, src,
// dst, reduce, w, num_out): bitwise where the GPU folds in the CPU's order.
::testing::AssertionResult matches_cpu(const Tensor& got, const Tensor& want, Reduce reduce, const TensorView& x,
                                       const TensorView& src, const TensorView& dst, const TensorView* w) {
  const int64_t num_out = want.size(0);
  if (reduce == Reduce::Amax || reduce == Reduce::Amin ||
      longest_group(dst, num_out) <= scatterx::detail::cuda::kSerialGroup)
    return same_values(got, want);
  const Tensor abs_w = w != nullptr ? abs_copy(*w) : Tensor();
  const FoldBounds bounds =
      fold_bounds(want, reduce, want, x, [&](const TensorView&, const TensorView& rows, Reduce r, bool counting) {
        return scatterx::gather_scatter(rows, src, dst, r, counting || w == nullptr ? nullptr : &abs_w, num_out);
      });
  return fold_matches(got, want, reduce, false, &bounds);
}

TEST_F(CudaGatherScatter, MatchesTheCpuBackend) {
  Rng rng(case_seed("CudaGatherScatter.MatchesTheCpuBackend", 0));
  int cases = 0;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (Reduce reduce : {Reduce::Sum, Reduce::Mean, Reduce::Amax, Reduce::Amin}) {
      // NaN and infinities fold the same way in any order; +-max-finite does not (a chunked sum may
      // overflow where the serial one does not), so there are none.
      ValueOptions values = fold_values(dtype, reduce);
      values.special_rate = 0.02;
      for (DType src_dtype : {DType::Int32, DType::Int64}) {
        for (int weighted = 0; weighted < 2; ++weighted) {
          for (int rep = 0; rep < 3; ++rep) {
            SCOPED_TRACE(dtype_label(dtype) + " " + reduce_label(reduce) + " " + dtype_label(src_dtype) +
                         (weighted ? " weighted" : "") + " rep " + std::to_string(rep));
            const int64_t nodes = rng.uniform(1, 40);
            const int64_t edges = rep == 0 ? 0 : rng.uniform(1, 2000);
            Shape xs = {nodes};
            const int rank = static_cast<int>(rng.uniform(0, 2));
            for (int d = 0; d < rank; ++d) xs.push_back(rng.uniform(1, d == 0 ? 70 : 3));
            const bool strided_x = rank >= 1 && rng.chance(0.5);
            Shape storage_shape = xs;
            if (strided_x) storage_shape[1] *= 2;
            Tensor x = Tensor::empty(storage_shape, dtype);
            fill_random(x, rng, values);
            const Tensor gx_storage = to_device(x).base;
            const TensorView xv = strided_x ? x.slice(1, 0, storage_shape[1], 2) : TensorView(x);
            const TensorView gx = strided_x ? gx_storage.slice(1, 0, storage_shape[1], 2) : TensorView(gx_storage);
            const DType dst_dtype = rng.chance(0.5) ? DType::Int32 : DType::Int64;
            const int64_t dst_hi = rng.uniform(0, 60);
            const EdgeList src =
                edge_list(edges, src_dtype, rng, [&](const TensorView& v) { fill_index(v, rng, 0, nodes - 1); });
            const EdgeList dst =
                edge_list(edges, dst_dtype, rng, [&](const TensorView& v) { fill_index(v, rng, 0, dst_hi); });
            const EdgeList w = edge_list(edges, dtype, rng, [&](const TensorView& v) { fill_random(v, rng, values); });
            const int64_t max_dst = max_value(dst.host);
            const int64_t dim_size = rng.chance(0.5) ? -1 : max_dst + 1 + rng.uniform(0, 5);
            const TensorView* hw = weighted ? &w.host : nullptr;
            const TensorView* gw = weighted ? &w.gpu : nullptr;
            const Tensor want = scatterx::gather_scatter(xv, src.host, dst.host, reduce, hw, dim_size);
            const Tensor got = scatterx::gather_scatter(gx, src.gpu, dst.gpu, reduce, gw, dim_size);
            ASSERT_TRUE(got.device() == kGpu);
            const Tensor got_host = to_host(got);
            EXPECT_TRUE(matches_cpu(got_host, want, reduce, xv, src.host, dst.host, hw));
            // A plan built on the GPU, used twice: the same grouping, so the same bits.
            const scatterx::IndexPlan plan(dst.gpu, dim_size);
            EXPECT_EQ(plan.dim_size(), want.size(0));
            EXPECT_TRUE(plan.device() == kGpu);
            EXPECT_TRUE(same_values(to_host(scatterx::gather_scatter(gx, src.gpu, plan, reduce, gw)), got_host))
                << "plan";
            EXPECT_TRUE(same_values(to_host(scatterx::gather_scatter(gx, src.gpu, plan, reduce, gw)), got_host))
                << "plan, again";
            // Into a caller's GPU buffer holding garbage: every row is overwritten.
            Tensor garbage = Tensor::empty(want.sizes(), dtype);
            fill_random(garbage, rng, values);
            Tensor into = to_device(garbage).base;
            scatterx::gather_scatter_out(into, gx, src.gpu, dst.gpu, reduce, gw);
            EXPECT_TRUE(same_values(to_host(into), got_host)) << "gather_scatter_out";
            // The rows of a [edges, F...] source by the plan alone.
            if (src_dtype == DType::Int64) {
              Shape ms = xs;
              ms[0] = edges;
              Tensor messages = Tensor::empty(ms, dtype);
              fill_random(messages, rng, values);
              Tensor identity = Tensor::empty({edges}, DType::Int64);
              for (int64_t e = 0; e < edges; ++e) static_cast<int64_t*>(identity.data())[e] = e;
              if (weighted) {  // scatter_rows weighted: the identity for src_index, not built
                EXPECT_TRUE(matches_cpu(
                    to_host(scatterx::scatter_rows(to_device(messages).base, dst.gpu, reduce, dim_size, gw)),
                    scatterx::scatter_rows(messages, dst.host, reduce, dim_size, hw), reduce, messages, identity,
                    dst.host, hw))
                    << "scatter_rows, weighted";
                ++cases;
                continue;
              }
              const scatterx::IndexPlan host_plan(dst.host, dim_size);
              EXPECT_TRUE(matches_cpu(to_host(scatterx::scatter_by_plan(to_device(messages).base, plan, reduce)),
                                      scatterx::scatter_by_plan(messages, host_plan, reduce), reduce, messages,
                                      identity, dst.host, nullptr))
                  << "scatter_by_plan";
              EXPECT_TRUE(
                  same_values(to_host(scatterx::scatter_rows(to_device(messages).base, dst.gpu, reduce, dim_size)),
                              to_host(scatterx::scatter_by_plan(to_device(messages).base, plan, reduce))))
                  << "scatter_rows: the same grouping as the plan's";
            }
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 4 * 2 * 2 * 3);
}

// Many edges into a few hot destinations (groups folded in chunks) and many
// destinations each hit a few times, large enough that every kernel runs
// many blocks.
TEST_F(CudaGatherScatter, LongAndShortGroups) {
  Rng rng(case_seed("CudaGatherScatter.LongAndShortGroups", 0));
  ValueOptions values;
  values.special_rate = 0;
  for (const auto& [nodes, edges, features] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 200000, 5}, {100000, 300000, 64}, {70000, 70000, 1}}) {
    SCOPED_TRACE(std::to_string(nodes) + " nodes, " + std::to_string(edges) + " edges");
    Tensor x = Tensor::empty({nodes, features}, DType::Float32);
    fill_random(x, rng, values);
    const EdgeList src =
        edge_list(edges, DType::Int64, rng, [&](const TensorView& v) { fill_index(v, rng, 0, nodes - 1); });
    const EdgeList dst =
        edge_list(edges, DType::Int32, rng, [&](const TensorView& v) { fill_index(v, rng, 0, nodes - 1); });
    const EdgeList w = edge_list(edges, DType::Float32, rng, [&](const TensorView& v) { fill_random(v, rng, values); });
    for (Reduce reduce : {Reduce::Sum, Reduce::Mean, Reduce::Amax}) {
      const Tensor want = scatterx::gather_scatter(x, src.host, dst.host, reduce, &w.host, nodes);
      const Tensor got = scatterx::gather_scatter(to_device(x).base, src.gpu, dst.gpu, reduce, &w.gpu, nodes);
      EXPECT_TRUE(matches_cpu(to_host(got), want, reduce, x, src.host, dst.host, &w.host)) << reduce_label(reduce);
    }
  }
}

TEST_F(CudaGatherScatter, PlanCountsAndSizes) {
  Rng rng(case_seed("CudaGatherScatter.PlanCountsAndSizes", 0));
  for (DType dtype : {DType::Int32, DType::Int64}) {
    for (int64_t n : {0, 1, 17, 100000}) {
      const EdgeList index = edge_list(n, dtype, rng, [&](const TensorView& v) { fill_index(v, rng, 0, 300); });
      const scatterx::IndexPlan want(index.host);
      const scatterx::IndexPlan got(index.gpu);
      EXPECT_EQ(got.dim_size(), want.dim_size()) << n;
      EXPECT_EQ(got.positions(), n);
      const Tensor counts = got.counts();
      EXPECT_TRUE(counts.device() == kGpu);
      EXPECT_TRUE(same_values(to_host(counts), want.counts())) << n;
      const scatterx::IndexPlan wider(index.gpu, 400);
      EXPECT_EQ(wider.dim_size(), 400);
      EXPECT_TRUE(same_values(to_host(wider.counts()), scatterx::IndexPlan(index.host, 400).counts()));
    }
  }
}

TEST_F(CudaGatherScatter, ErrorsMatchTheCpuBackend) {
  Tensor values = make_tensor<int64_t>({5}, {2, 0, -3, 1, -1});
  const Tensor gpu_values = to_device(values).base;
  auto message_of = [](const auto& make) { return error_message<scatterx::IndexError>(make); };
  // A negative value when the size is inferred: the CPU's message, first bad position named.
  EXPECT_EQ(message_of([&] { scatterx::IndexPlan p(gpu_values); }), message_of([&] { scatterx::IndexPlan p(values); }));
  // A value past dim_size.
  Tensor big = make_tensor<int32_t>({3}, {0, 9, 1});
  EXPECT_EQ(message_of([&] { scatterx::IndexPlan p(to_device(big).base, 4); }),
            message_of([&] { scatterx::IndexPlan p(big, 4); }));
  // Plan and tensors on different devices.
  Tensor index = make_tensor<int64_t>({3}, {0, 1, 1});
  Tensor x = Tensor::zeros({2, 4}, DType::Float32);
  const scatterx::IndexPlan cpu_plan(index);
  const scatterx::IndexPlan gpu_plan(to_device(index).base);
  const Tensor gx = to_device(x).base;
  const Tensor gindex = to_device(index).base;
  EXPECT_NE(error_message<scatterx::ArgumentError>([&] {
              scatterx::gather_scatter(gx, gindex, cpu_plan, Reduce::Sum);
            }).find("expected the plan on x's device (cuda:0), got a plan on cpu"),
            std::string::npos);
  EXPECT_NE(error_message<scatterx::ArgumentError>([&] {
              scatterx::gather_scatter(x, index, gpu_plan, Reduce::Sum);
            }).find("expected the plan on x's device (cpu), got a plan on cuda:0"),
            std::string::npos);
  // Mixed devices among the edge lists.
  EXPECT_THROW(scatterx::gather_scatter(gx, index, gindex, Reduce::Sum), scatterx::ArgumentError);
  // A src_index value past x's rows.
  Tensor far = make_tensor<int64_t>({3}, {0, 5, 1});
  EXPECT_EQ(message_of([&] { scatterx::gather_scatter(gx, to_device(far).base, gindex, Reduce::Sum); }),
            message_of([&] { scatterx::gather_scatter(x, far, index, Reduce::Sum); }));
}

// With index checks off an edge whose destination or source is out of range
// is skipped: the result is that of the edge list without it.
TEST_F(CudaGatherScatter, UncheckedModeSkipsBadEdges) {
  Rng rng(case_seed("CudaGatherScatter.UncheckedModeSkipsBadEdges", 0));
  Tensor x = Tensor::empty({4, 3}, DType::Float64);
  fill_random(x, rng);
  Tensor src = make_tensor<int64_t>({5}, {0, 1, 99, 3, 2});
  Tensor dst = make_tensor<int64_t>({5}, {1, -4, 0, 2, 1});
  for (Reduce reduce : {Reduce::Sum, Reduce::Mean, Reduce::Amin}) {
    const Tensor want = scatterx::gather_scatter(x, make_tensor<int64_t>({3}, {0, 3, 2}),
                                                 make_tensor<int64_t>({3}, {1, 2, 1}), reduce, nullptr, 3);
    scatterx::cuda::set_index_checks(false);
    const Tensor got =
        scatterx::gather_scatter(to_device(x).base, to_device(src).base, to_device(dst).base, reduce, nullptr, 3);
    scatterx::cuda::set_index_checks(true);
    EXPECT_TRUE(same_values(to_host(got), want)) << reduce_label(reduce);
  }
}

}  // namespace
}  // namespace sxt

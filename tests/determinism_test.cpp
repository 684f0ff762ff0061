// Determinism: float sums and means with heavy duplicates give bit-identical
// results across runs and across 1, 2 and 3 OpenMP threads, on the
// slice-wise (broadcast index: grouped, block fold) paths and on the general path, and
// equal the serial reference's index-order fold.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ops/detail/block_fold.h"
#include "ops/runtime/parallel.h"
#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

class DeterminismTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_threads_ = omp_get_max_threads(); }
  void TearDown() override { omp_set_num_threads(saved_threads_); }

  // Runs op twice under each thread count; every result must be byte-identical
  // to the first, and the first must equal the reference.
  static void expect_deterministic(const char* what, const std::function<Tensor()>& op, const Tensor& expected) {
    SCOPED_TRACE(what);
    Tensor first;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      for (int run = 0; run < 2; ++run) {
        const Tensor r = op();
        ASSERT_TRUE(r.is_contiguous());
        if (first.data() == nullptr) {
          first = r;
          continue;
        }
        ASSERT_EQ(r.sizes(), first.sizes());
        EXPECT_EQ(std::memcmp(r.data(), first.data(), static_cast<size_t>(r.numel() * r.element_size())), 0)
            << "result with " << threads << " threads (run " << run << ") differs from the 1-thread result";
      }
    }
    EXPECT_TRUE(same_values(first, expected)) << "differs from the serial index-order fold";
  }

  // index_add, index_add_weighted and index_reduce with `reduce` of source
  // into self by index, each against the reference.
  static void expect_index_folds(const TensorView& self, const TensorView& index, const TensorView& source,
                                 const TensorView& weights, Reduce reduce, bool include_self) {
    expect_deterministic(
        "index_add", [&] { return scatterx::index_add(self, 0, index, source); },
        ref::index_add(self, 0, index, source, Scalar(int64_t{1})));
    expect_deterministic(
        "index_add_weighted", [&] { return scatterx::index_add_weighted(self, 0, index, source, weights); },
        ref::index_add_weighted(self, 0, index, source, weights));
    expect_deterministic(
        "index_reduce", [&] { return scatterx::index_reduce(self, 0, index, source, reduce, include_self); },
        ref::index_reduce(self, 0, index, source, reduce, include_self));
  }

 private:
  int saved_threads_ = 1;
};

// dim-0 scatter of 64-wide rows with an index broadcast from [E, 1]: 20000
// rows onto 8 targets.
TEST_F(DeterminismTest, BroadcastIndexSumAndMean) {
  for (DType dtype : {DType::Float32, DType::Float16}) {
    SCOPED_TRACE(scatterx::dtype_name(dtype));
    Rng rng(case_seed(current_test_name(), static_cast<int>(dtype)));
    const int64_t edges = 20000;
    const int64_t width = 64;
    Buf self = random_buf({8, width}, dtype, kContiguous, rng);
    Buf narrow = index_buf({edges, 1}, DType::Int64, kContiguous, rng, 0, 7);
    const TensorView index = narrow.view.expand({edges, width});
    Buf src = random_buf({edges, width}, dtype, kContiguous, rng);
    const TensorView s = self.view;
    expect_deterministic(
        "scatter_add", [&] { return scatterx::scatter_add(s, 0, index, src.view); },
        ref::scatter_reduce(s, 0, index, src.view, Reduce::Sum, true));
    expect_deterministic(
        "scatter_reduce sum, include_self=false",
        [&] { return scatterx::scatter_reduce(s, 0, index, src.view, Reduce::Sum, false); },
        ref::scatter_reduce(s, 0, index, src.view, Reduce::Sum, false));
    expect_deterministic(
        "scatter_reduce mean", [&] { return scatterx::scatter_reduce(s, 0, index, src.view, Reduce::Mean, true); },
        ref::scatter_reduce(s, 0, index, src.view, Reduce::Mean, true));
    expect_deterministic(
        "scatter_reduce mean, include_self=false",
        [&] { return scatterx::scatter_reduce(s, 0, index, src.view, Reduce::Mean, false); },
        ref::scatter_reduce(s, 0, index, src.view, Reduce::Mean, false));
    if (::testing::Test::HasFailure()) return;
  }
}

// A general (per-element) index: 3000 x 300 positions onto 16 targets along
// dim 0, and the transposed problem along dim 1.
TEST_F(DeterminismTest, GeneralIndexSumAndMean) {
  Rng rng(case_seed(current_test_name(), 0));
  Buf self = random_buf({16, 300}, DType::Float32, kContiguous, rng);
  Buf index = index_buf({3000, 300}, DType::Int32, kContiguous, rng, 0, 15);
  Buf src = random_buf({3000, 300}, DType::Float32, kContiguous, rng);
  const TensorView s = self.view;
  const TensorView i = index.view;
  expect_deterministic(
      "dim 0 sum", [&] { return scatterx::scatter_reduce(s, 0, i, src.view, Reduce::Sum, true); },
      ref::scatter_reduce(s, 0, i, src.view, Reduce::Sum, true));
  expect_deterministic(
      "dim 0 mean", [&] { return scatterx::scatter_reduce(s, 0, i, src.view, Reduce::Mean, false); },
      ref::scatter_reduce(s, 0, i, src.view, Reduce::Mean, false));
  const TensorView st = s.transpose(0, 1);
  const TensorView it = i.transpose(0, 1);
  const TensorView srct = src.view.transpose(0, 1);
  expect_deterministic(
      "dim 1 sum (transposed views)", [&] { return scatterx::scatter_add(st, 1, it, srct); },
      ref::scatter_reduce(st, 1, it, srct, Reduce::Sum, true));
  expect_deterministic(
      "dim 1 mean (transposed views)", [&] { return scatterx::scatter_reduce(st, -1, it, srct, Reduce::Mean, true); },
      ref::scatter_reduce(st, -1, it, srct, Reduce::Mean, true));
}

// index_add_ / index_reduce_ of 20000 rows onto 8, and a long 1-d scatter_add.
TEST_F(DeterminismTest, IndexAddAndLongVector) {
  Rng rng(case_seed(current_test_name(), 0));
  Buf self = random_buf({8, 64}, DType::Float32, kContiguous, rng);
  Buf index = index_buf({20000}, DType::Int64, kContiguous, rng, 0, 7);
  Buf source = random_buf({20000, 64}, DType::Float32, kContiguous, rng);
  const TensorView s = self.view;
  expect_deterministic(
      "index_add", [&] { return scatterx::index_add(s, 0, index.view, source.view); },
      ref::index_add(s, 0, index.view, source.view, Scalar(int64_t{1})));
  expect_deterministic(
      "index_add alpha 0.1", [&] { return scatterx::index_add(s, 0, index.view, source.view, Scalar(0.1)); },
      ref::index_add(s, 0, index.view, source.view, Scalar(0.1)));
  expect_deterministic(
      "index_reduce mean", [&] { return scatterx::index_reduce(s, 0, index.view, source.view, Reduce::Mean, false); },
      ref::index_reduce(s, 0, index.view, source.view, Reduce::Mean, false));

  Buf vec = random_buf({5}, DType::Float32, kContiguous, rng);
  Buf vec_index = index_buf({300000}, DType::Int32, kContiguous, rng, 0, 4);
  Buf vec_src = random_buf({300000}, DType::Float32, kContiguous, rng);
  expect_deterministic(
      "1-d scatter_add", [&] { return scatterx::scatter_add(vec.view, 0, vec_index.view, vec_src.view); },
      ref::scatter_reduce(vec.view, 0, vec_index.view, vec_src.view, Reduce::Sum, true));
  expect_deterministic(
      "1-d scatter_reduce mean",
      [&] { return scatterx::scatter_reduce(vec.view, 0, vec_index.view, vec_src.view, Reduce::Mean, true); },
      ref::scatter_reduce(vec.view, 0, vec_index.view, vec_src.view, Reduce::Mean, true));
}

// index_add_ / index_reduce_ into 2^18 + 700 targets, with most targets hit a
// few times or never, one target hit by every 16th position, and a last
// block only partly filled; int64 and int32 indices. Float32 rows of 16 take
// the block fold (scatter_cpu_impl.h), bfloat16 rows of 8 (under a cache
// line) the grouped fold over the two-level counting sort (target_blocks.h).
TEST_F(DeterminismTest, IndexAddIntoManyTargets) {
  Rng rng(case_seed(current_test_name(), 0));
  const int64_t targets = (int64_t{1} << 18) + 700;
  const int64_t positions = 80000;
  const int64_t hot = 123457;
  for (DType index_dtype : {DType::Int64, DType::Int32}) {
    SCOPED_TRACE(index_dtype == DType::Int64 ? "int64 index" : "int32 index");
    Buf index = index_buf({positions}, index_dtype, kContiguous, rng, 0, targets - 1);
    for (int64_t i = 0; i < positions; i += 16) set_index(index.view, i, hot);
    const TensorView i = index.view;
    Buf self = random_buf({targets, 16}, DType::Float32, kContiguous, rng);
    Buf source = random_buf({positions, 16}, DType::Float32, kContiguous, rng);
    Buf weights = random_buf({positions}, DType::Float32, kContiguous, rng);
    const TensorView s = self.view;
    expect_index_folds(s, i, source.view, weights.view, Reduce::Mean, false);
    expect_deterministic(
        "index_reduce amax", [&] { return scatterx::index_reduce(s, 0, i, source.view, Reduce::Amax, true); },
        ref::index_reduce(s, 0, i, source.view, Reduce::Amax, true));
    Buf half_self = random_buf({targets, 8}, DType::BFloat16, kContiguous, rng);
    Buf half_source = random_buf({positions, 8}, DType::BFloat16, kContiguous, rng);
    expect_deterministic(
        "bfloat16 index_add", [&] { return scatterx::index_add(half_self.view, 0, i, half_source.view); },
        ref::index_add(half_self.view, 0, i, half_source.view, Scalar(int64_t{1})));
    if (::testing::Test::HasFailure()) return;
  }
}

// The block fold compiles its inner loop for rows of 64, 128, 256 and 512
// accumulator bytes (with_block_row_len, block_fold.h) and reads the length at
// run time for the others: rows of each kind, and of the odd lengths between,
// against the serial reference, in float32 and float64 (float accumulators of
// 4 and 8 bytes), each into enough targets to take the block fold.
TEST_F(DeterminismTest, BlockFoldEveryRowLength) {
  Rng rng(case_seed(current_test_name(), 0));
  struct Case {
    DType dtype;
    int64_t len;
    int64_t known;  // what with_block_row_len makes of it
  };
  const std::vector<Case> cases = {{DType::Float32, 16, 16},   {DType::Float32, 20, 0},  {DType::Float32, 32, 32},
                                   {DType::Float32, 48, 0},    {DType::Float32, 64, 64}, {DType::Float32, 100, 0},
                                   {DType::Float32, 128, 128}, {DType::Float32, 256, 0}, {DType::Float64, 8, 8},
                                   {DType::Float64, 12, 0},    {DType::Float64, 16, 16}, {DType::Float64, 32, 32},
                                   {DType::Float64, 64, 64},   {DType::Float64, 96, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(scatterx::dtype_name(c.dtype)) + " rows of " + std::to_string(c.len));
    const int64_t acc_bytes = c.dtype == DType::Float64 ? 8 : 4;
    const int64_t known =
        c.dtype == DType::Float64
            ? scatterx::detail::with_block_row_len<double>(c.len, [](auto n) { return decltype(n)::value; })
            : scatterx::detail::with_block_row_len<float>(c.len, [](auto n) { return decltype(n)::value; });
    EXPECT_EQ(known, c.known);
    // A block fold's worth of target rows and a bit, a last block partly filled.
    const int64_t targets = scatterx::detail::kMinBlockFoldBytes / (c.len * acc_bytes) + 333;
    const int64_t positions = targets / 2;
    ASSERT_TRUE(scatterx::detail::block_fold_pays(c.len * acc_bytes, c.len * acc_bytes, positions, targets));
    Buf index = index_buf({positions}, DType::Int64, kContiguous, rng, 0, targets - 1);
    for (int64_t i = 0; i < positions; i += 9) set_index(index.view, i, targets / 3);
    Buf self = random_buf({targets, c.len}, c.dtype, kContiguous, rng);
    Buf source = random_buf({positions, c.len}, c.dtype, kContiguous, rng);
    Buf weights = random_buf({positions}, c.dtype, kContiguous, rng);
    expect_index_folds(self.view, index.view, source.view, weights.view, Reduce::Amin, false);
    if (::testing::Test::HasFailure()) return;
  }
}

// Medium-sized problems (10^5 to 10^6 positions) under 3 threads, so every
// kernel path really splits its work: each reduce against the reference on a
// general index along dim 0 (one outer position, the row dim cut into
// chunks) and along dim 1, a general index onto many more targets than
// positions, a broadcast index with rows wider than one 256-element chunk,
// and a long 1-d index; plus gather and index_add_.
class ParallelTest : public ::testing::TestWithParam<OpParam> {
 protected:
  void SetUp() override {
    saved_threads_ = omp_get_max_threads();
    omp_set_num_threads(3);
  }
  void TearDown() override { omp_set_num_threads(saved_threads_); }

 private:
  int saved_threads_ = 1;
};

TEST_P(ParallelTest, MediumShapesUnderThreeThreads) {
  const OpParam& p = GetParam();
  const ValueOptions values = value_options_for(p.reduce);
  const ScatterForm form = p.reduce == Reduce::None ? ScatterForm::Src : ScatterForm::Reduce;
  Rng rng(case_seed(current_test_name(), 0));
  const DType i = p.index_dtype;
  {
    SCOPED_TRACE("general index, dim 0");
    Buf self = random_buf({40, 600}, p.dtype, kContiguous, rng, values);
    Buf index = index_buf({300, 600}, i, kContiguous, rng, 0, 39);
    Buf src = random_buf({300, 600}, p.dtype, kContiguous, rng, values);
    check_scatter(form, p.reduce, p.include_self, 0, self, index, &src, Scalar());
  }
  {
    SCOPED_TRACE("general index, dim 1, transposed self");
    Buf self = random_buf({600, 40}, p.dtype, kPermute, rng, values);
    Buf index = index_buf({600, 300}, i, kContiguous, rng, 0, 39);
    Buf src = random_buf({600, 300}, p.dtype, kStep2, rng, values);
    check_scatter(form, p.reduce, p.include_self, 1, self, index, &src, Scalar());
  }
  {
    SCOPED_TRACE("general index, many more targets than positions");
    Buf self = random_buf({3000, 400}, p.dtype, kContiguous, rng, values);
    Buf index = index_buf({200, 400}, i, kFlip, rng, 0, 2999);
    Buf src = random_buf({200, 400}, p.dtype, kContiguous, rng, values);
    check_scatter(form, p.reduce, p.include_self, 0, self, index, &src, Scalar());
  }
  // Broadcast indices (one value per slice along dim): rows of 300 with 360K folds (grouped); a 50-row slab
  // with 128K folds in two outer slabs (inside run_direct_rows' caps); a slab past its slab cap (grouped).
  struct Broadcast {
    const char* what;
    scatterx::Shape self, src;
    int64_t dim;
  };
  for (const Broadcast& b : {Broadcast{"rows of 300, dim 1 of 3-d", {3, 40, 300}, {3, 400, 300}, 1},
                             Broadcast{"direct rows, dim 1 of 3-d", {2, 50, 64}, {2, 1000, 64}, 1},
                             Broadcast{"a slab past the direct rows' cap", {5000, 64}, {300, 64}, 0}}) {
    SCOPED_TRACE(std::string("broadcast index, ") + b.what);
    Buf self = random_buf(b.self, p.dtype, kContiguous, rng, values);
    std::vector<int64_t> narrow_shape(static_cast<size_t>(b.src.size()), 1);
    narrow_shape[static_cast<size_t>(b.dim)] = b.src[b.dim];
    Buf narrow = index_buf(scatterx::Shape(narrow_shape), i, kContiguous, rng, 0, b.self[b.dim] - 1);
    narrow.view = narrow.view.expand(b.src);
    Buf src = random_buf(b.src, p.dtype, kContiguous, rng, values);
    check_scatter(form, p.reduce, p.include_self, b.dim, self, narrow, &src, Scalar());
  }
  {
    // 17000 targets of 64 elements: the block fold (scatter_cpu_impl.h) for every accumulator of up to 16
    // bytes; one target hit by every 7th position, about a third of the targets by none.
    SCOPED_TRACE("broadcast index into many targets, a hot one");
    const int64_t targets = 17000;
    const int64_t positions = 5000;
    Buf self = random_buf({targets, 64}, p.dtype, kContiguous, rng, values);
    Buf narrow = index_buf({positions, 1}, i, kContiguous, rng, 0, targets - 1);
    for (int64_t pos = 0; pos < positions; pos += 7) set_index(narrow.view, pos, 4321);
    narrow.view = narrow.view.expand({positions, 64});
    Buf src = random_buf({positions, 64}, p.dtype, kContiguous, rng, values);
    check_scatter(form, p.reduce, p.include_self, 0, self, narrow, &src, Scalar());
  }
  {
    SCOPED_TRACE("1-d");
    Buf self = random_buf({1000}, p.dtype, kContiguous, rng, values);
    Buf index = index_buf({200000}, i, kContiguous, rng, 0, 999);
    Buf src = random_buf({200000}, p.dtype, kFlip, rng, values);
    check_scatter(form, p.reduce, p.include_self, 0, self, index, &src, Scalar());
  }
  if (p.reduce == Reduce::None) {
    SCOPED_TRACE("gather / index_select / index_add_");
    Buf input = random_buf({300, 500}, p.dtype, kContiguous, rng);
    Buf index = index_buf({300, 500}, i, kContiguous, rng, 0, 299);
    check_gather(false, 0, input, index, nullptr);
    Buf index_t = index_buf({300, 700}, i, kPermute, rng, 0, 499);
    check_gather(false, 1, input, index_t, nullptr);
    Buf rows = index_buf({2000}, i, kContiguous, rng, 0, 299);
    Buf out = random_buf({2000, 500}, p.dtype, kContiguous, rng);
    check_gather(true, 0, input, rows, &out);
    Buf cols = index_buf({700}, i, kContiguous, rng, 0, 499);
    check_gather(true, 1, input, cols, nullptr);
    Buf self = random_buf({50, 500}, p.dtype, kContiguous, rng);
    Buf add_index = index_buf({2000}, i, kContiguous, rng, 0, 49);
    Buf source = random_buf({2000, 500}, p.dtype, kContiguous, rng);
    check_index_op(Reduce::Sum, true, other_alpha(p.dtype, rng), false, 0, self, add_index, source);
  }
}

// One dtype per reduce (those dtypes whose kernels differ: direct folds, float
// accumulators for 16-bit floats, counts for mean), both index dtypes.
std::vector<OpParam> parallel_params() {
  const std::vector<std::pair<Reduce, std::vector<DType>>> plan = {
      {Reduce::None, {DType::Float16, DType::Int64, DType::Bool}},
      {Reduce::Sum, {DType::Float32, DType::Int8, DType::Complex64, DType::BFloat16}},
      {Reduce::Prod, {DType::Float64, DType::Int32, DType::Float16}},
      {Reduce::Mean, {DType::Float32, DType::Int16, DType::BFloat16, DType::Complex128}},
      {Reduce::Amax, {DType::Float32, DType::UInt8, DType::Float16}},
      {Reduce::Amin, {DType::Float64, DType::Bool, DType::BFloat16}},
  };
  std::vector<OpParam> params;
  int n = 0;
  for (const auto& [reduce, dtypes] : plan) {
    for (DType dtype : dtypes) {
      OpParam p;
      p.dtype = dtype;
      p.reduce = reduce;
      p.index_dtype = n % 2 == 0 ? DType::Int64 : DType::Int32;
      p.include_self = reduce == Reduce::None || n % 3 != 0;
      p.name = dtype_label(dtype) + "_" + reduce_label(reduce) + "_Index" + dtype_label(p.index_dtype) +
               (p.include_self ? "_IncludeSelf" : "_ExcludeSelf");
      params.push_back(p);
      ++n;
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Parallel, ParallelTest, ::testing::ValuesIn(parallel_params()), param_name);

// The library called from inside a parallel region (each thread on its own
// tensors) runs correctly.
TEST(ConcurrencyTest, CallsFromInsideAParallelRegion) {
  constexpr int kThreads = 3;
  std::vector<Buf> selves;
  std::vector<Buf> indices;
  std::vector<Buf> srcs;
  std::vector<Tensor> expected;
  Rng rng(case_seed(current_test_name(), 0));
  for (int t = 0; t < kThreads; ++t) {
    selves.push_back(random_buf({20, 64}, DType::Float32, kContiguous, rng));
    indices.push_back(index_buf({3000, 64}, DType::Int64, kContiguous, rng, 0, 19));
    srcs.push_back(random_buf({3000, 64}, DType::Float32, kContiguous, rng));
    expected.push_back(ref::scatter_reduce(selves[t].view, 0, indices[t].view, srcs[t].view, Reduce::Mean, false));
  }
  std::vector<Tensor> results(kThreads);
#pragma omp parallel for num_threads(kThreads)
  for (int t = 0; t < kThreads; ++t) {
    results[t] = scatterx::scatter_reduce(selves[t].view, 0, indices[t].view, srcs[t].view, Reduce::Mean, false);
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(same_values(results[t], expected[t])) << "thread " << t;
}

// for_each_piece, under the pieces the sorts and checks are cut into: every
// piece once at any thread count; one thread runs them in order on the
// calling thread, outside any OpenMP region (the point of the helper).
TEST(ForEachPieceTest, EveryPieceOnceAndOneThreadInline) {
  for (int nthreads : {1, 2, 3, 4}) {
    for (int64_t pieces : {0, 1, 2, 5, 9}) {
      std::vector<int> visits(static_cast<size_t>(pieces), 0);
      std::vector<int64_t> order;
      bool inside_region = false;
      scatterx::detail::for_each_piece(pieces, nthreads, [&](int64_t p) {
#pragma omp atomic
        visits[static_cast<size_t>(p)]++;
        if (nthreads == 1) {
          order.push_back(p);
          inside_region = inside_region || omp_get_level() > 0;  // counts one-thread regions too
        }
      });
      for (int64_t p = 0; p < pieces; ++p) EXPECT_EQ(visits[p], 1) << nthreads << " threads, piece " << p;
      if (nthreads == 1) {
        EXPECT_FALSE(inside_region);
        for (int64_t p = 0; p < pieces; ++p) EXPECT_EQ(order[p], p);
      }
    }
  }
}

}  // namespace
}  // namespace sxt

// gather_scatter against a serial reference (a plain loop over the edges in
// order, folding x[src[e]] * w[e] into out[dst[e]] with the functors of
// ops/reduce_ops.h, so results must match bit for bit): every floating
// dtype x reduce x index dtypes, with and without weights, strided
// arguments, empty edge lists, dim_size beyond max(dst); then the error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/detail/block_fold.h"
#include "ops/detail/segments.h"
#include "ops/gather_scatter/gather_scatter_cpu_blocks.h"
#include "ops/reduce_ops.h"
#include "scatterx.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
  return kDTypes;
}

const std::vector<Reduce>& reduces() {
  static const std::vector<Reduce> kReduces = {Reduce::Sum, Reduce::Mean, Reduce::Amax, Reduce::Amin};
  return kReduces;
}

template <typename T, Reduce R>
Tensor reference_typed(const TensorView& x, const TensorView& src, const TensorView& dst, const TensorView* w,
                       int64_t num_out) {
  using A = scatterx::acc_t<T>;
  using Op = scatterx::ReduceOp<R, A>;
  const Tensor xc = Tensor::clone(x);
  // Features per row from the shape: with no rows an output row still has them all.
  int64_t F = 1;
  for (int64_t d = 1; d < x.dim(); ++d) F *= x.size(d);
  std::vector<A> acc(static_cast<size_t>(num_out * F), Op::identity());
  std::vector<int64_t> count(static_cast<size_t>(num_out), 0);
  auto index_at = [](const TensorView& v, int64_t e) {
    const int64_t c[1] = {e};
    return v.dtype() == DType::Int32 ? int64_t{load<int32_t>(v, c)} : load<int64_t>(v, c);
  };
  const T* xd = static_cast<const T*>(xc.data());
  for (int64_t e = 0; e < src.size(0); ++e) {
    const int64_t s = index_at(src, e);
    const int64_t d = index_at(dst, e);
    const int64_t c[1] = {e};
    const A weight = w != nullptr ? static_cast<A>(load<T>(*w, c)) : A(1);
    ++count[d];
    for (int64_t j = 0; j < F; ++j) {
      const A v = static_cast<A>(xd[s * F + j]);
      acc[d * F + j] = Op::combine(acc[d * F + j], w != nullptr ? scatterx::arith::mul(v, weight) : v);
    }
  }
  Shape shape = x.sizes();
  shape[0] = num_out;
  Tensor out = Tensor::empty(shape, x.dtype());
  T* o = static_cast<T*>(out.data());
  for (int64_t n = 0; n < num_out; ++n) {
    for (int64_t j = 0; j < F; ++j) {
      const bool zero = count[n] == 0;
      o[n * F + j] = zero ? T(0) : static_cast<T>(Op::finalize(acc[n * F + j], count[n]));
    }
  }
  return out;
}

Tensor reference(const TensorView& x, const TensorView& src, const TensorView& dst, Reduce reduce, const TensorView* w,
                 int64_t num_out) {
  Tensor out;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      switch (reduce) {
        case Reduce::Sum:
          out = reference_typed<T, Reduce::Sum>(x, src, dst, w, num_out);
          break;
        case Reduce::Mean:
          out = reference_typed<T, Reduce::Mean>(x, src, dst, w, num_out);
          break;
        case Reduce::Amax:
          out = reference_typed<T, Reduce::Amax>(x, src, dst, w, num_out);
          break;
        default:
          out = reference_typed<T, Reduce::Amin>(x, src, dst, w, num_out);
          break;
      }
    }
  });
  return out;
}

// A 1-d tensor of `n` elements, read through a step-2 view half the time.
TensorView strided_1d(int64_t n, DType dtype, Rng& rng, Tensor& storage) {
  if (rng.chance(0.5)) {
    storage = Tensor::empty({n}, dtype);
    return storage;
  }
  storage = Tensor::zeros({2 * n}, dtype);
  return storage.slice(0, 0, 2 * n, 2);
}

TEST(GatherScatter, MatchesReference) {
  Rng rng(case_seed("GatherScatter.MatchesReference", 0));
  ValueOptions values;
  values.special_rate = 0;
  int cases = 0;
  for (DType dtype : float_dtypes()) {
    for (Reduce reduce : reduces()) {
      for (DType src_dtype : {DType::Int32, DType::Int64}) {
        for (int weighted = 0; weighted < 2; ++weighted) {
          for (int rep = 0; rep < 3; ++rep) {
            SCOPED_TRACE(dtype_label(dtype) + " " + reduce_label(reduce) + " " + dtype_label(src_dtype) +
                         (weighted ? " weighted" : "") + " rep " + std::to_string(rep));
            const int64_t nodes = rng.uniform(1, 30);
            const int64_t edges = rep == 0 ? 0 : rng.uniform(1, 300);
            Shape xs = {nodes};
            const int rank = static_cast<int>(rng.uniform(0, 2));
            for (int d = 0; d < rank; ++d) xs.push_back(rng.uniform(1, d == 0 ? 70 : 3));
            // Half the time x is read through a step-2 view of its dim 1.
            const bool strided_x = rank >= 1 && rng.chance(0.5);
            Shape storage_shape = xs;
            if (strided_x) storage_shape[1] *= 2;
            Tensor x = Tensor::empty(storage_shape, dtype);
            const TensorView xv = strided_x ? x.slice(1, 0, storage_shape[1], 2) : TensorView(x);
            fill_random(xv, rng, values);
            Tensor s_store, d_store, w_store;
            const DType dst_dtype = rng.chance(0.5) ? DType::Int32 : DType::Int64;
            const TensorView src = strided_1d(edges, src_dtype, rng, s_store);
            const TensorView dst = strided_1d(edges, dst_dtype, rng, d_store);
            const TensorView w = strided_1d(edges, dtype, rng, w_store);
            const int64_t dst_hi = rng.uniform(0, 40);
            fill_index(src, rng, 0, nodes - 1);
            fill_index(dst, rng, 0, dst_hi);
            fill_random(w, rng, values);
            const int64_t max_dst = [&] {
              int64_t m = -1;
              for (int64_t e = 0; e < edges; ++e) {
                const int64_t c[1] = {e};
                m = std::max(m, dst_dtype == DType::Int32 ? int64_t{load<int32_t>(dst, c)} : load<int64_t>(dst, c));
              }
              return m;
            }();
            const int64_t dim_size = rng.chance(0.5) ? -1 : max_dst + 1 + rng.uniform(0, 5);
            const TensorView* wp = weighted ? &w : nullptr;
            const Tensor got = scatterx::gather_scatter(xv, src, dst, reduce, wp, dim_size);
            const Tensor want = reference(xv, src, dst, reduce, wp, dim_size < 0 ? max_dst + 1 : dim_size);
            EXPECT_TRUE(same_values(got, want));
            // The same destinations through an IndexPlan, used twice.
            const scatterx::IndexPlan plan(dst, dim_size);
            EXPECT_EQ(plan.dim_size(), dim_size < 0 ? max_dst + 1 : dim_size);
            EXPECT_TRUE(same_values(scatterx::gather_scatter(xv, src, plan, reduce, wp), want)) << "plan";
            EXPECT_TRUE(same_values(scatterx::gather_scatter(xv, src, plan, reduce, wp), want)) << "plan, again";
            // Into a caller's buffer holding garbage: every row is overwritten.
            Shape out_shape = xs;
            out_shape[0] = want.size(0);
            Tensor into = Tensor::empty(out_shape, dtype);
            fill_random(into, rng, values);
            scatterx::gather_scatter_out(into, xv, src, dst, reduce, wp);
            EXPECT_TRUE(same_values(into, want)) << "gather_scatter_out";
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 4 * 2 * 2 * 3);
}

// Many edges into few destinations and about as many destinations as edges
// (both grouped densely, by the kernel's counting sort), 2^18 destinations
// and more (densely, the counting sort in two levels) and far more
// destinations than edges (grouped sparsely, by a plan), unweighted sum
// against index_select + index_add; the many destinations by a plan too.
TEST(GatherScatter, MatchesIndexSelectIndexAdd) {
  Rng rng(case_seed("GatherScatter.MatchesIndexSelectIndexAdd", 0));
  ValueOptions values;
  values.special_rate = 0;
  for (const auto& [nodes, edges] :
       {std::pair<int64_t, int64_t>{7, 20000}, {5000, 20000}, {300000, 100000}, {200000, 300}}) {
    ASSERT_EQ(scatterx::detail::groups_densely(edges, nodes), nodes != 200000);
    Tensor x = Tensor::empty({nodes, 16}, DType::Float64);
    fill_random(x, rng, values);
    Tensor src = Tensor::empty({edges}, DType::Int64);
    Tensor dst = Tensor::empty({edges}, DType::Int64);
    fill_index(src, rng, 0, nodes - 1);
    fill_index(dst, rng, 0, nodes - 1);
    const Tensor messages = scatterx::index_select(x, 0, src);
    const Tensor want = scatterx::index_add(Tensor::zeros({nodes, 16}, DType::Float64), 0, dst, messages);
    const Tensor got = scatterx::gather_scatter(x, src, dst, Reduce::Sum, nullptr, nodes);
    EXPECT_TRUE(same_values(got, want)) << nodes;
    if (nodes == 300000) {
      const scatterx::IndexPlan plan(dst, nodes);
      EXPECT_TRUE(same_values(scatterx::gather_scatter(x, src, plan, Reduce::Sum), want)) << nodes << " plan";
    }
  }
}

// Short rows into many destinations, which fold by blocks of destinations
// (ops/detail/block_fold.h) when no plan groups them: every dtype x reduce,
// weighted or not, against the serial reference, with an identity source
// (scatter_rows of the gathered messages) and against the same call
// through a plan (the grouped fold), into a buffer of garbage. The first
// block of destinations gets no edge, the last is partial, one destination
// is hot, and about a fifth get none.
TEST(GatherScatter, ManyDestinationsByBlocks) {
  Rng rng(case_seed("GatherScatter.ManyDestinationsByBlocks", 0));
  ValueOptions values;
  values.special_rate = 0;
  const int64_t nodes = 140001;
  const int64_t edges = 150000;  // two pieces of the split on two threads
  for (DType dtype : float_dtypes()) {
    const int64_t element = dtype == DType::Float64 ? 8 : dtype == DType::Float32 ? 4 : 2;
    const int64_t features = 64 / element;  // 64-byte rows: the shortest that fold by blocks
    const int64_t acc_row = features * (dtype == DType::Float64 ? 8 : 4);
    ASSERT_TRUE(scatterx::detail::gather_scatter_cpu_impl::out_blocks_pay(acc_row, features * element, edges, nodes))
        << dtype_label(dtype);
    const int64_t first_hit =  // block 0 stays empty
        int64_t{1} << scatterx::detail::gather_scatter_cpu_impl::out_block_shift(acc_row, nodes);
    for (Reduce reduce : reduces()) {
      for (int weighted = 0; weighted < 2; ++weighted) {
        SCOPED_TRACE(dtype_label(dtype) + " " + reduce_label(reduce) + (weighted ? " weighted" : ""));
        Tensor x = Tensor::empty({nodes, features}, dtype);
        fill_random(x, rng, values);
        Tensor s_store, d_store, w_store;
        const TensorView src = strided_1d(edges, weighted ? DType::Int32 : DType::Int64, rng, s_store);
        const TensorView dst = strided_1d(edges, weighted ? DType::Int64 : DType::Int32, rng, d_store);
        const TensorView w = strided_1d(edges, dtype, rng, w_store);
        fill_index(src, rng, 0, nodes - 1);
        fill_index(dst, rng, first_hit, nodes - 1);
        for (int64_t e = 0; e < edges; e += 9) set_index(dst, e, 123457);
        fill_random(w, rng, values);
        const TensorView* wp = weighted ? &w : nullptr;
        const Tensor want = reference(x, src, dst, reduce, wp, nodes);
        Tensor into = Tensor::empty({nodes, features}, dtype);
        fill_random(into, rng, values);
        scatterx::gather_scatter_out(into, x, src, dst, reduce, wp);
        EXPECT_TRUE(same_values(into, want)) << "by blocks";
        const Tensor messages = scatterx::index_select(x, 0, src);
        EXPECT_TRUE(same_values(scatterx::scatter_rows(messages, dst, reduce, nodes, wp), want))
            << "scatter_rows (the identity source), by blocks";
        const scatterx::IndexPlan plan(dst, nodes);
        EXPECT_TRUE(same_values(scatterx::gather_scatter(x, src, plan, reduce, wp), want)) << "grouped, by a plan";
      }
    }
  }
}

// Destinations already grouped (non-decreasing, as an embedding-bag owner's
// ids arrive), which the grouping passes through in order: empty rows at
// both ends and inside, against index_select + index_add, dense and sparse.
TEST(GatherScatter, SortedDestinations) {
  Rng rng(case_seed("GatherScatter.SortedDestinations", 0));
  ValueOptions values;
  values.special_rate = 0;
  for (const auto& [nodes, edges] : {std::pair<int64_t, int64_t>{50, 20000}, {200000, 300}, {9, 1}}) {
    Tensor x = Tensor::empty({nodes, 8}, DType::Float64);
    fill_random(x, rng, values);
    Tensor src = Tensor::empty({edges}, DType::Int64);
    fill_index(src, rng, 0, nodes - 1);
    std::vector<int64_t> d(static_cast<size_t>(edges));
    for (auto& v : d) v = rng.uniform(1, nodes - 2);  // rows 0 and nodes - 1 stay empty
    std::sort(d.begin(), d.end());
    const Tensor dst = make_tensor<int64_t>({edges}, d);
    const Tensor messages = scatterx::index_select(x, 0, src);
    const Tensor want = scatterx::index_add(Tensor::zeros({nodes, 8}, DType::Float64), 0, dst, messages);
    EXPECT_TRUE(same_values(scatterx::gather_scatter(x, src, dst, Reduce::Sum, nullptr, nodes), want)) << nodes;
    const scatterx::IndexPlan plan(dst, nodes);
    EXPECT_TRUE(same_values(scatterx::gather_scatter(x, src, plan, Reduce::Sum), want)) << nodes << " plan";
  }
}

TEST(GatherScatter, Deterministic) {
  Rng rng(case_seed("GatherScatter.Deterministic", 0));
  Tensor x = Tensor::empty({1000, 64}, DType::Float32);
  fill_random(x, rng);
  Tensor src = Tensor::empty({50000}, DType::Int32);
  Tensor dst = Tensor::empty({50000}, DType::Int32);
  Tensor w = Tensor::empty({50000}, DType::Float32);
  fill_index(src, rng, 0, 999);
  fill_index(dst, rng, 0, 99);
  fill_random(w, rng);
  const Tensor a = scatterx::gather_scatter(x, src, dst, Reduce::Sum, &w, -1);
  const Tensor b = scatterx::gather_scatter(x, src, dst, Reduce::Sum, &w, -1);
  EXPECT_TRUE(same_values(a, b));
  EXPECT_EQ(a.size(0), 100);
}

TEST(GatherScatter, EmptyEdgesGiveZeros) {
  const Tensor x = make_tensor<float>({2, 2}, {1, 2, 3, 4});
  const Tensor none = Tensor::empty({0}, DType::Int64);
  const Tensor out = scatterx::gather_scatter(x, none, none, Reduce::Amax, nullptr, 3);
  EXPECT_TRUE(same_values(out, Tensor::zeros({3, 2}, DType::Float32)));
  EXPECT_EQ(scatterx::gather_scatter(x, none, none, Reduce::Sum, nullptr, -1).size(0), 0);
}

TEST(GatherScatterErrors, Checked) {
  const Tensor x = Tensor::zeros({4, 2}, DType::Float32);
  const Tensor src = make_tensor<int64_t>({3}, {0, 1, 2});
  const Tensor dst = make_tensor<int64_t>({3}, {0, 1, 1});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::gather_scatter(x, make_tensor<int64_t>({3}, {0, 4, 1}), dst, Reduce::Sum);
      },
      {"gather_scatter: src_index 4 is out of bounds", "(src_index position [1])"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::gather_scatter(x, src, make_tensor<int32_t>({3}, {0, 1, -2}), Reduce::Sum);
      },
      {"gather_scatter: ", "-2", "[2]"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::gather_scatter(x, src, make_tensor<int64_t>({3}, {0, 5, 1}), Reduce::Sum, nullptr, 5);
      },
      {"gather_scatter: dst_index 5 is out of bounds", "(dst_index position [1])"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::gather_scatter(x, make_tensor<float>({3}, {0, 1, 2}), dst, Reduce::Sum);
      },
      {"gather_scatter: ", "int32 or int64", "float32"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::gather_scatter(Tensor::zeros({4, 2}, DType::Int64), src, dst, Reduce::Sum);
      },
      {"gather_scatter: ", "floating", "int64"});
  const Tensor w64 = make_tensor<double>({3}, {1, 2, 3});
  expect_error<scatterx::DTypeError>([&] { scatterx::gather_scatter(x, src, dst, Reduce::Sum, &w64); },
                                     {"gather_scatter: ", "edge_weight"});
  const Tensor w2 = make_tensor<float>({2}, {1, 2});
  expect_error<scatterx::ArgumentError>([&] { scatterx::gather_scatter(x, src, dst, Reduce::Sum, &w2); },
                                        {"gather_scatter: ", "edge_weight of length 3", "got 2"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::gather_scatter(x, src, make_tensor<int64_t>({2}, {0, 1}), Reduce::Sum);
      },
      {"gather_scatter: ", "dst_index of length 3"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::gather_scatter(x, Tensor::zeros({3, 1}, DType::Int64), dst, Reduce::Sum);
      },
      {"gather_scatter: ", "src_index to be 1-d"});
  expect_error<scatterx::ArgumentError>([&] { scatterx::gather_scatter(x, src, dst, Reduce::Prod); },
                                        {"gather_scatter: ", "sum, mean, amax, amin", "prod"});
  expect_error<scatterx::ArgumentError>(
      [&] { scatterx::gather_scatter(Tensor::zeros({}, DType::Float32), src, dst, Reduce::Sum); },
      {"gather_scatter: ", "at least 1 dimension"});
  // gather_scatter_out: the caller's buffer is checked like the arguments, and left alone on error
  const Tensor out = make_tensor<float>({2, 2}, {7, 7, 7, 7});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::gather_scatter_out(Tensor::zeros({2, 3}, DType::Float32), x, src, dst, Reduce::Sum);
      },
      {"gather_scatter_out: ", "expected out to be a contiguous [num_out, x.shape[1:]] tensor", "[2, 3]"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        const Tensor wide = Tensor::zeros({2, 4}, DType::Float32);
        scatterx::gather_scatter_out(wide.slice(1, 0, 4, 2), x, src, dst, Reduce::Sum);
      },
      {"gather_scatter_out: ", "(strided)"});
  expect_error<scatterx::DTypeError>(
      [&] {
        scatterx::gather_scatter_out(Tensor::zeros({2, 2}, DType::Float64), x, src, dst, Reduce::Sum);
      },
      {"gather_scatter_out: ", "out"});
  expect_error<scatterx::IndexError>(
      [&] { scatterx::gather_scatter_out(out.slice(0, 0, 1), x, src, dst, Reduce::Sum); },
      {"gather_scatter_out: dst_index 1 is out of bounds"});
  EXPECT_TRUE(same_values(out, make_tensor<float>({2, 2}, {7, 7, 7, 7})));
}

}  // namespace
}  // namespace sxt

namespace sxt {
namespace {

// scatter_by_plan: the rows of src folded by a 1-d index, against the serial
// reference with the identity as src_index.
TEST(IndexPlan, ScatterByPlanMatchesReference) {
  Rng rng(case_seed("IndexPlan.ScatterByPlanMatchesReference", 0));
  ValueOptions values;
  values.special_rate = 0;
  for (DType dtype : float_dtypes()) {
    for (Reduce reduce : reduces()) {
      for (DType index_dtype : {DType::Int32, DType::Int64}) {
        SCOPED_TRACE(dtype_label(dtype) + " " + reduce_label(reduce) + " " + dtype_label(index_dtype));
        const int64_t rows = rng.uniform(0, 400);
        Tensor src = Tensor::empty({rows, 3, 5}, dtype);
        fill_random(src, rng, values);
        Tensor index = Tensor::empty({rows}, index_dtype);
        fill_index(index, rng, 0, 60);
        Tensor identity = Tensor::empty({rows}, DType::Int64);
        for (int64_t r = 0; r < rows; ++r) static_cast<int64_t*>(identity.data())[r] = r;
        const scatterx::IndexPlan plan(index, 64);
        const Tensor want = reference(src, identity, index, reduce, nullptr, 64);
        EXPECT_TRUE(same_values(scatterx::scatter_by_plan(src, plan, reduce), want));
        // The unplanned form, dense (64 rows) and sparse (far more rows than positions) grouping, and
        // through a transposed src (copied once by the front end).
        EXPECT_TRUE(same_values(scatterx::scatter_rows(src, index, reduce, 64), want)) << "scatter_rows";
        // The 64-row form of a float sum, amax or amin is index_add_ / index_reduce_ into zeros (a slab
        // within detail::direct_rows_fit);
        // far more rows than positions (at most 400), in a slab past that fit: the sparse grouping
        // (detail::groups_densely)
        const int64_t wide = 20000;
        EXPECT_TRUE(same_values(scatterx::scatter_rows(src, index, reduce, wide),
                                reference(src, identity, index, reduce, nullptr, wide)))
            << "scatter_rows, sparse";
        Tensor transposed_storage = Tensor::empty({rows, 5, 3}, dtype);
        const TensorView transposed = transposed_storage.transpose(1, 2);
        scatterx::copy_(transposed, src);
        EXPECT_TRUE(same_values(scatterx::scatter_rows(transposed, index, reduce, 64), want)) << "strided src";
        // Weighted: gather_scatter's fold with the identity for src_index.
        Tensor weight = Tensor::empty({rows}, dtype);
        fill_random(weight, rng, values);
        EXPECT_TRUE(same_values(scatterx::scatter_rows(src, index, reduce, 64, &weight),
                                reference(src, identity, index, reduce, &weight, 64)))
            << "scatter_rows, weighted";
      }
    }
  }
}

// A small float amax / amin of scatter_rows (index_reduce_ into zeros, the
// direct rows) against the grouped fold of a plan, with NaN, infinities and
// signed zeros among the values: the same bits.
TEST(IndexPlan, SmallScatterRowsExtremaMatchThePlanWithSpecialValues) {
  Rng rng(case_seed("IndexPlan.SmallScatterRowsExtremaMatchThePlanWithSpecialValues", 0));
  ValueOptions values;
  values.special_rate = 0.2;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (Reduce reduce : {Reduce::Amax, Reduce::Amin}) {
      SCOPED_TRACE(dtype_label(dtype) + " " + reduce_label(reduce));
      const int64_t rows = 300;
      Tensor src = Tensor::empty({rows, 7}, dtype);
      fill_random(src, rng, values);
      Tensor index = Tensor::empty({rows}, DType::Int64);
      fill_index(index, rng, 0, 40);
      const scatterx::IndexPlan plan(index, 48);  // rows 40-47 reached by no position: 0
      EXPECT_TRUE(
          same_values(scatterx::scatter_rows(src, index, reduce, 48), scatterx::scatter_by_plan(src, plan, reduce)));
    }
  }
}

TEST(IndexPlan, ScatterRowsErrors) {
  const Tensor src = Tensor::zeros({3, 2}, DType::Float32);
  const Tensor index = make_tensor<int64_t>({3}, {0, 2, 1});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::scatter_rows(src, make_tensor<int64_t>({2}, {0, 1}), Reduce::Sum);
      },
      {"scatter_rows", "src.size(0) to equal index's length (2)", "got 3"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::scatter_rows(src, Tensor::zeros({3, 1}, DType::Int64), Reduce::Sum);
      },
      {"scatter_rows", "index to be 1-d", "[3, 1]"});
  expect_error<scatterx::IndexError>([&] { scatterx::scatter_rows(src, index, Reduce::Sum, 2); },
                                     {"scatter_rows", "2", "[1]"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::scatter_rows(src, make_tensor<int64_t>({3}, {0, -2, 1}), Reduce::Sum);
      },
      {"scatter_rows", "index values >= 0", "-2", "[1]"});
  expect_error<scatterx::ArgumentError>([&] { scatterx::scatter_rows(src, index, Reduce::Prod); },
                                        {"scatter_rows", "reduce", "prod"});
  expect_error<scatterx::DTypeError>(
      [&] { scatterx::scatter_rows(Tensor::zeros({3}, DType::Int32), index, Reduce::Sum); },
      {"scatter_rows", "src of a floating dtype", "int32"});
  expect_error<scatterx::DTypeError>(
      [&] { scatterx::scatter_rows(src, Tensor::zeros({3}, DType::Float32), Reduce::Sum); }, {"scatter_rows", "index"});
  const Tensor short_weight = Tensor::zeros({2}, DType::Float32);
  expect_error<scatterx::ArgumentError>([&] { scatterx::scatter_rows(src, index, Reduce::Sum, -1, &short_weight); },
                                        {"scatter_rows", "edge_weight of length 3 (index's)", "got 2"});
  const Tensor double_weight = Tensor::zeros({3}, DType::Float64);
  expect_error<scatterx::DTypeError>([&] { scatterx::scatter_rows(src, index, Reduce::Sum, -1, &double_weight); },
                                     {"scatter_rows", "edge_weight", "float64"});
}

TEST(IndexPlan, OutlivesItsIndexAndCounts) {
  Tensor index = make_tensor<int64_t>({6}, {2, 0, 2, 5, 2, 0});
  const scatterx::IndexPlan plan(index, -1);
  static_cast<int64_t*>(index.data())[0] = 99;  // the plan copied what it needs
  index = Tensor();
  EXPECT_EQ(plan.dim_size(), 6);
  EXPECT_EQ(plan.positions(), 6);
  EXPECT_TRUE(same_values(plan.counts(), make_tensor<int64_t>({6}, {2, 0, 3, 0, 0, 1})));
  const Tensor src = make_tensor<double>({6}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(
      same_values(scatterx::scatter_by_plan(src, plan, Reduce::Sum), make_tensor<double>({6}, {8, 0, 9, 0, 0, 4})));
  const scatterx::IndexPlan copy = plan;  // copies share the grouping
  EXPECT_TRUE(
      same_values(scatterx::scatter_by_plan(src, copy, Reduce::Amax), make_tensor<double>({6}, {6, 0, 5, 0, 0, 4})));
}

TEST(IndexPlan, Errors) {
  const Tensor index = make_tensor<int64_t>({3}, {0, 4, 1});
  expect_error<scatterx::IndexError>([&] { scatterx::IndexPlan(index, 4); }, {"IndexPlan", "index", "4"});
  expect_error<scatterx::IndexError>(
      [&] {
        scatterx::IndexPlan(make_tensor<int64_t>({2}, {1, -1}), -1);
      },
      {"IndexPlan", "index values >= 0", "-1", "[1]"});
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::IndexPlan(Tensor::zeros({2, 2}, DType::Int64), -1);
      },
      {"IndexPlan", "1-d", "[2, 2]"});
  expect_error<scatterx::DTypeError>([&] { scatterx::IndexPlan(Tensor::zeros({2}, DType::Float32), -1); },
                                     {"IndexPlan", "index"});
  const scatterx::IndexPlan plan(index, 5);
  const Tensor x = Tensor::zeros({4, 2}, DType::Float32);
  expect_error<scatterx::ArgumentError>(
      [&] {
        scatterx::gather_scatter(x, make_tensor<int64_t>({2}, {0, 1}), plan, Reduce::Sum);
      },
      {"gather_scatter", "src_index of length 3", "got 2"});
  expect_error<scatterx::ArgumentError>([&] { scatterx::scatter_by_plan(x, plan, Reduce::Sum); },
                                        {"scatter_by_plan", "src.size(0)", "3", "got 4"});
  expect_error<scatterx::ArgumentError>(
      [&] { scatterx::scatter_by_plan(Tensor::zeros({3}, DType::Float32), plan, Reduce::Prod); },
      {"scatter_by_plan", "reduce", "prod"});
  expect_error<scatterx::DTypeError>(
      [&] { scatterx::scatter_by_plan(Tensor::zeros({3}, DType::Int32), plan, Reduce::Sum); },
      {"scatter_by_plan", "src of a floating dtype", "int32"});
}

}  // namespace
}  // namespace sxt

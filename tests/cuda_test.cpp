// The CUDA backend against the serial reference (tests/reference.h): every
// op x dtype x reduce x index dtype, random shapes of rank 0 to 4 with heavy
// duplicates and non-contiguous views of every argument (the device buffers
// mirror the host layouts), on each scatter path: atomic, sorted (forced)
// and the deterministic mode (sorted).
//
// Expected results are bitwise the reference's, except float and complex
// sums, means and products: the atomic path folds in arrival order, and the
// sorted path folds runs of more than 64 values in chunks, so these take
// inputs whose result no order can change and are compared within what
// rounding alone can do (tests/fold_tolerance.h). The sorted paths are
// checked run to run, bitwise; so is the automatic path choice (contention).
//
// Also: out-of-range indices raise the CPU backend's IndexError, write
// nothing and leave the GPU usable; unchecked mode; streams; determinism run
// to run. Every test skips when no CUDA device is visible (this file builds
// wherever the backend builds; scripts/gpu_suite.sh runs it on a GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "ops/cuda.h"
#include "ops/detail/cuda/contention.h"
#include "ops/detail/cuda/index_check.h"
#include "ops/runtime/combine.h"
#include "ops/runtime/cuda/runtime.h"
#include "tests/cuda_test_util.h"
#include "tests/fold_tolerance.h"
#include "tests/op_checks.h"
#include "tests/reference.h"

namespace sxt {
namespace {

namespace sxc = scatterx::cuda;
using scatterx::Device;
namespace backend = scatterx::detail::cuda;

// ---------------------------------------------------------------- device mirrors

// A contiguous int64 index Buf holding `values`.
Buf index_of(const std::vector<int64_t>& values, Rng& rng) {
  return make_buf({static_cast<int64_t>(values.size())}, DType::Int64, kContiguous, rng,
                  [&](const TensorView& v) { std::memcpy(v.data(), values.data(), values.size() * sizeof(int64_t)); });
}

// ---------------------------------------------------------------- comparison

// actual against the reference (tests/fold_tolerance.h): bitwise where the
// fold's order cannot matter, within `bounds` where it can.
::testing::AssertionResult matches(const TensorView& actual, const TensorView& expected, Reduce reduce, bool ordered,
                                   const FoldBounds& bounds = {}) {
  return fold_matches(actual, expected, reduce, ordered, bounds.empty() ? nullptr : &bounds);
}

// The bounds of an order-dependent fold (none otherwise: compared bitwise).
FoldBounds bounds_for(const TensorView& expected, Reduce reduce, const TensorView& self, const TensorView& src,
                      const ReferenceFold& fold) {
  if (!order_dependent(expected.dtype(), reduce)) return {};
  return fold_bounds(expected, reduce, self, src, fold);
}

// ---------------------------------------------------------------- fixtures

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sxc::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
  void TearDown() override {
    sxc::set_deterministic(false);
    sxc::set_index_checks(true);
    sxc::set_scatter_path(sxc::ScatterPath::Auto);
  }
};

// How a suite's scatters fold: atomics forced, the sorted path forced, or
// the deterministic mode (sorted, with the path left on Auto).
enum class Mode { Atomic, Sorted, Deterministic };
using CudaParam = std::tuple<OpParam, Mode>;

std::string cuda_param_name(const ::testing::TestParamInfo<CudaParam>& info) {
  static const char* const kNames[] = {"_Atomic", "_Sorted", "_Deterministic"};
  return std::get<0>(info.param).name + kNames[static_cast<int>(std::get<1>(info.param))];
}

ParamSpec spec_of(std::vector<Reduce> reduces, bool vary_include_self, const char* variant_off = nullptr,
                  const char* variant_on = nullptr) {
  ParamSpec spec;
  spec.reduces = std::move(reduces);
  spec.name_reduce = spec.reduces.size() > 1 || spec.reduces[0] != Reduce::None;
  spec.vary_include_self = vary_include_self;
  spec.variant_names[0] = variant_off;
  spec.variant_names[1] = variant_on;
  return spec;
}

// Every op parameter, in every mode (or the ones given).
auto in_modes(const ParamSpec& spec, std::vector<Mode> modes = {Mode::Atomic, Mode::Sorted, Mode::Deterministic}) {
  return ::testing::Combine(::testing::ValuesIn(make_params(spec)), ::testing::ValuesIn(modes));
}

class CudaOpSuite : public ::testing::TestWithParam<CudaParam> {
 protected:
  void SetUp() override {
    if (sxc::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    sxc::set_deterministic(mode() == Mode::Deterministic);
    sxc::set_scatter_path(mode() == Mode::Atomic   ? sxc::ScatterPath::Atomic
                          : mode() == Mode::Sorted ? sxc::ScatterPath::Sorted
                                                   : sxc::ScatterPath::Auto);
  }
  void TearDown() override {
    sxc::set_deterministic(false);
    sxc::set_scatter_path(sxc::ScatterPath::Auto);
  }
  const OpParam& op() const { return std::get<0>(GetParam()); }
  Mode mode() const { return std::get<1>(GetParam()); }
  bool deterministic() const { return mode() == Mode::Deterministic; }
  // Reduces fold in a fixed order (scatter_ without reduce stays atomic
  // unless deterministic).
  bool ordered() const { return mode() != Mode::Atomic; }
};

struct Shapes {
  Shape self;
  Shape index;
  Shape src;
  int64_t dim = 0;
  int64_t bound = 0;
};

// As scatter_test.cpp's: index no larger than src anywhere nor than self off
// dim; heavy duplicates put many positions on one or two slots.
Shapes random_shapes(Rng& rng, int rank, bool heavy) {
  Shapes s;
  if (rank == 0) {
    s.bound = 1;
    return s;
  }
  static const int64_t kMaxSize[] = {0, 300, 24, 9, 6};
  const int64_t max_size = kMaxSize[rank];
  const int64_t dim = rng.uniform(0, rank - 1);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = rng.uniform(1, max_size);
    if (d == dim && heavy) n = rng.uniform(max_size, 3 * max_size);
    s.index.push_back(n);
    s.src.push_back(n + (rng.chance(0.5) ? 0 : rng.uniform(1, 2)));
    s.self.push_back(d == dim ? (heavy ? rng.uniform(1, 2) : rng.uniform(1, max_size))
                              : n + (rng.chance(0.5) ? 0 : rng.uniform(1, 2)));
  }
  s.bound = s.self[dim];
  s.dim = rng.chance(0.35) ? dim - rank : dim;
  return s;
}

// ---------------------------------------------------------------- scatter

using CudaScatterReduce = CudaOpSuite;
TEST_P(CudaScatterReduce, MatchesReference) {
  const OpParam& p = op();
  const ValueOptions values = fold_values(p.dtype, p.reduce);
  run_cases(20, [&](Rng& rng, int case_number) {
    const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
    const bool heavy = rng.chance(0.3);
    const Shapes s = random_shapes(rng, rank, heavy);
    Buf self = random_buf(s.self, p.dtype, random_layout(rng, false), rng, values);
    Buf index = index_buf(s.index, p.index_dtype, random_layout(rng, true), rng, 0,
                          (heavy ? std::min<int64_t>(s.bound, 2) : s.bound) - 1);
    Buf src = random_buf(s.src, p.dtype, random_layout(rng, true), rng, values);
    const Tensor expected = ref::scatter_reduce(self.view, s.dim, index.view, src.view, p.reduce, p.include_self);
    const FoldBounds bounds = bounds_for(expected, p.reduce, self.view, src.view,
                                         [&](const TensorView& a, const TensorView& b, Reduce r, bool) {
                                           return ref::scatter_reduce(a, s.dim, index.view, b, r, p.include_self);
                                         });
    self.take_snapshot();
    DeviceBuf dself = to_device(self);
    const DeviceBuf dindex = to_device(index);
    const DeviceBuf dsrc = to_device(src);
    // out of place first (a device clone of self), then in place
    const Tensor copy = scatterx::scatter_reduce(dself.view, s.dim, dindex.view, dsrc.view, p.reduce, p.include_self);
    EXPECT_TRUE(matches(to_host(copy), expected, p.reduce, ordered(), bounds)) << "scatter_reduce";
    if (ordered()) {
      const Tensor again =
          scatterx::scatter_reduce(dself.view, s.dim, dindex.view, dsrc.view, p.reduce, p.include_self);
      EXPECT_TRUE(same_values(to_host(again), to_host(copy))) << "sorted path, second run";
    }
    scatterx::scatter_reduce_(dself.view, s.dim, dindex.view, dsrc.view, p.reduce, p.include_self);
    to_host(dself, self);
    EXPECT_TRUE(matches(self.view, expected, p.reduce, ordered(), bounds)) << "scatter_reduce_";
    EXPECT_TRUE(self.unchanged_outside_view());
  });
}
INSTANTIATE_TEST_SUITE_P(Cuda, CudaScatterReduce,
                         in_modes(spec_of({Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin}, true)),
                         cuda_param_name);

// scatter_ (src and value forms) and scatter_add_. Reduce::None with
// duplicate indices leaves "last in index order wins" to the deterministic
// mode (the atomic mode, like torch, writes one of them), so its atomic
// cases use indices without duplicates along dim.
using CudaScatter = CudaOpSuite;
TEST_P(CudaScatter, MatchesReference) {
  const OpParam& p = op();
  const ValueOptions values = fold_values(p.dtype, p.reduce);
  run_cases(20, [&](Rng& rng, int case_number) {
    const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
    const bool unique = p.reduce == Reduce::None && !deterministic();
    const bool heavy = !unique && rng.chance(0.3);
    Shapes s = random_shapes(rng, rank, heavy);
    Buf self = random_buf(s.self, p.dtype, random_layout(rng, false), rng, values);
    Buf index =
        index_buf(s.index, p.index_dtype, kContiguous, rng, 0, (heavy ? std::min<int64_t>(s.bound, 2) : s.bound) - 1);
    if (unique && rank > 0) {
      // along dim, each line of index takes distinct values: a prefix of a permutation
      const int64_t d = s.dim < 0 ? s.dim + rank : s.dim;
      Shape line_shape = index.view.sizes();
      const int64_t k = std::min(line_shape[d], s.bound);
      line_shape[d] = k;
      index = index_buf(line_shape, p.index_dtype, kContiguous, rng, 0, 0);
      for_each_coord(line_shape, [&](const int64_t* c) {
        if (c[d] != 0) return;
        std::vector<int64_t> perm(static_cast<size_t>(s.bound));
        for (int64_t v = 0; v < s.bound; ++v) perm[static_cast<size_t>(v)] = v;
        for (int64_t v = s.bound - 1; v > 0; --v) std::swap(perm[static_cast<size_t>(v)], perm[rng.uniform(0, v)]);
        int64_t at[scatterx::kMaxDims];
        std::copy(c, c + rank, at);
        for (int64_t i = 0; i < k; ++i) {
          at[d] = i;
          visit_index_dtype(p.index_dtype, [&](auto tag) {
            using I = typename decltype(tag)::type;
            store<I>(index.view, at, static_cast<I>(perm[static_cast<size_t>(i)]));
          });
        }
      });
    }
    Buf src = random_buf(s.src, p.dtype, random_layout(rng, true), rng, values);
    const Scalar value = random_scalar(p.dtype, rng);
    const bool value_form = p.variant;
    const Tensor expected = value_form ? ref::scatter_value(self.view, s.dim, index.view, value, p.reduce)
                                       : ref::scatter(self.view, s.dim, index.view, src.view, p.reduce);
    const FoldBounds bounds =
        bounds_for(expected, p.reduce, self.view, src.view,
                   [&](const TensorView& a, const TensorView& b, Reduce r, bool counting) {
                     if (!value_form) return ref::scatter(a, s.dim, index.view, b, r);
                     return ref::scatter_value(a, s.dim, index.view, counting ? Scalar(1.0) : abs_scalar(value), r);
                   });
    self.take_snapshot();
    DeviceBuf dself = to_device(self);
    const DeviceBuf dindex = to_device(index);
    const DeviceBuf dsrc = to_device(src);
    if (value_form) {
      scatterx::scatter_(dself.view, s.dim, dindex.view, value, p.reduce);
    } else if (p.reduce == Reduce::Sum && rng.chance(0.5)) {
      scatterx::scatter_add_(dself.view, s.dim, dindex.view, dsrc.view);
    } else {
      scatterx::scatter_(dself.view, s.dim, dindex.view, dsrc.view, p.reduce);
    }
    to_host(dself, self);
    EXPECT_TRUE(matches(self.view, expected, p.reduce, ordered(), bounds));
    EXPECT_TRUE(self.unchanged_outside_view());
  });
}
INSTANTIATE_TEST_SUITE_P(Cuda, CudaScatter,
                         in_modes(spec_of({Reduce::None, Reduce::Sum, Reduce::Prod}, false, "Src", "Value")),
                         cuda_param_name);

// index_add_ (alpha 1 and others) and index_reduce_.
using CudaIndexOps = CudaOpSuite;
TEST_P(CudaIndexOps, MatchesReference) {
  const OpParam& p = op();
  const ValueOptions values = fold_values(p.dtype, p.reduce);
  run_cases(20, [&](Rng& rng, int case_number) {
    const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
    const bool heavy = rng.chance(0.3);
    const Shapes s = random_shapes(rng, rank, heavy);
    const int64_t d = rank == 0 ? 0 : (s.dim < 0 ? s.dim + rank : s.dim);
    Shape source_shape = s.self;
    const int64_t n_index = rank == 0 ? 1 : s.index[d];
    if (rank > 0) source_shape[d] = n_index;
    Buf self = random_buf(s.self, p.dtype, random_layout(rng, false), rng, values);
    Buf index = index_buf(rank == 0 ? Shape{} : Shape{n_index}, p.index_dtype, random_layout(rng, true), rng, 0,
                          (heavy ? std::min<int64_t>(s.bound, 2) : s.bound) - 1);
    Buf source = random_buf(source_shape, p.dtype, random_layout(rng, true), rng, values);
    const Scalar alpha = p.variant ? other_alpha(p.dtype, rng) : one_alpha(p.dtype);
    const bool add = p.reduce == Reduce::Sum;
    const Tensor expected =
        add ? ref::index_add(self.view, s.dim, index.view, source.view, alpha)
            : ref::index_reduce(self.view, s.dim, index.view, source.view, p.reduce, p.include_self);
    // (Counting through index_add counts self where include_self=false
    // leaves it out: a bound one value looser.)
    const FoldBounds bounds = bounds_for(expected, p.reduce, self.view, source.view,
                                         [&](const TensorView& a, const TensorView& b, Reduce r, bool counting) {
                                           if (add || r == Reduce::Sum) {
                                             return ref::index_add(a, s.dim, index.view, b,
                                                                   counting ? Scalar(int64_t{1}) : abs_scalar(alpha));
                                           }
                                           return ref::index_reduce(a, s.dim, index.view, b, r, p.include_self);
                                         });
    self.take_snapshot();
    DeviceBuf dself = to_device(self);
    const DeviceBuf dindex = to_device(index);
    const DeviceBuf dsource = to_device(source);
    if (add && ordered()) {
      const Tensor first = scatterx::index_add(dself.view, s.dim, dindex.view, dsource.view, alpha);
      const Tensor second = scatterx::index_add(dself.view, s.dim, dindex.view, dsource.view, alpha);
      EXPECT_TRUE(same_values(to_host(first), to_host(second))) << "sorted path, run to run";
    }
    if (add) {
      scatterx::index_add_(dself.view, s.dim, dindex.view, dsource.view, alpha);
    } else {
      scatterx::index_reduce_(dself.view, s.dim, dindex.view, dsource.view, p.reduce, p.include_self);
    }
    to_host(dself, self);
    EXPECT_TRUE(matches(self.view, expected, p.reduce, ordered(), bounds));
    EXPECT_TRUE(self.unchanged_outside_view());
  });
}
INSTANTIATE_TEST_SUITE_P(CudaIndexAdd, CudaIndexOps, in_modes(spec_of({Reduce::Sum}, false, "AlphaOne", "Alpha")),
                         cuda_param_name);
INSTANTIATE_TEST_SUITE_P(CudaIndexReduce, CudaIndexOps,
                         in_modes(spec_of({Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin}, true)),
                         cuda_param_name);

// ---------------------------------------------------------------- gather

using CudaGather = CudaOpSuite;
TEST_P(CudaGather, MatchesReference) {
  const OpParam& p = op();
  run_cases(20, [&](Rng& rng, int case_number) {
    const int rank = case_number == 0 ? 0 : static_cast<int>(rng.uniform(1, 4));
    const Shapes s = random_shapes(rng, rank, rng.chance(0.2));
    const bool select = p.variant;
    const int64_t d = rank == 0 ? 0 : (s.dim < 0 ? s.dim + rank : s.dim);
    Buf input = random_buf(s.self, p.dtype, random_layout(rng, false), rng);
    const Shape index_shape = select ? (rank == 0 ? Shape{} : Shape{s.index[d]}) : s.index;
    Shape gather_index_shape = index_shape;
    if (!select) {
      for (int64_t i = 0; i < rank; ++i) {
        if (i != d) gather_index_shape[i] = std::min(gather_index_shape[i], s.self[i]);
      }
    }
    Buf index = index_buf(gather_index_shape, p.index_dtype, random_layout(rng, true), rng, 0, s.bound - 1);
    const Tensor expected =
        select ? ref::index_select(input.view, s.dim, index.view) : ref::gather(input.view, s.dim, index.view);
    const DeviceBuf dinput = to_device(input);
    const DeviceBuf dindex = to_device(index);
    const Tensor out = select ? scatterx::index_select(dinput.view, s.dim, dindex.view)
                              : scatterx::gather(dinput.view, s.dim, dindex.view);
    EXPECT_TRUE(out.device() == kGpu);
    EXPECT_TRUE(same_values(to_host(out), expected));
  });
}
INSTANTIATE_TEST_SUITE_P(Cuda, CudaGather,
                         in_modes(spec_of({Reduce::None}, false, "Gather", "IndexSelect"), {Mode::Atomic}),
                         cuda_param_name);

// Rows of every byte width (1 to 16-byte vectors) and misaligned starts.
// The distributed layer's device folds: the same bits as combine_cpu for
// every dtype x reduce, with and without the mean's division, NaN and
// wrapping values included.
TEST_F(CudaTest, CombineMatchesTheCpuFoldBitwise) {
  Rng rng(case_seed(current_test_name(), 0));
  const int64_t n = 100003;
  for (DType dtype : all_dtypes()) {
    for (Reduce reduce : {Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin}) {
      if (!scatterx::reduce_supported(reduce, dtype)) continue;
      for (int64_t count : {int64_t{0}, int64_t{3}}) {
        if (count > 0 && reduce != Reduce::Mean) continue;
        SCOPED_TRACE(std::string(scatterx::dtype_name(dtype)) + " " + scatterx::reduce_name(reduce) + " count " +
                     std::to_string(count));
        const Tensor a = Tensor::empty({n}, dtype);
        const Tensor b = Tensor::empty({n}, dtype);
        fill_random(a, rng);
        fill_random(b, rng);
        const Tensor expected = Tensor::empty({n}, dtype);
        scatterx::detail::combine_cpu(expected.data(), a.data(), b.data(), n, dtype, reduce, count, "test");
        const int64_t bytes = n * a.element_size();
        const Tensor da = Tensor::empty({n}, dtype, kGpu);
        const Tensor db = Tensor::empty({n}, dtype, kGpu);
        backend::copy_from_host(da.data(), a.data(), bytes, "test");
        backend::copy_from_host(db.data(), b.data(), bytes, "test");
        backend::combine(db.data(), da.data(), db.data(), n, dtype, reduce, count, "test");  // out aliases b
        EXPECT_TRUE(same_values(to_host(db), expected));
      }
    }
  }
}

// The row kernel takes up to 32 rows a step and spreads their vectors over
// the lanes four rounds at a time: index lengths that end a step part-way, and
// rows of fewer, exactly 32 x 4 and more vectors than one round holds.
TEST_F(CudaTest, IndexSelectRowWidths) {
  Rng rng(7);
  for (int64_t row : {1, 3, 4, 8, 12, 16, 33, 128, 129, 512, 1000, 2048, 2049}) {
    for (int64_t start : {0, 1}) {
      for (int64_t selected : {70, 1029}) {
        SCOPED_TRACE("row " + std::to_string(row) + ", start " + std::to_string(start) + ", " +
                     std::to_string(selected) + " rows selected");
        Buf input = random_buf({50, row + start}, DType::Float32, kContiguous, rng);
        const TensorView rows = input.view.slice(1, start, row + start);
        Buf index = index_buf({selected}, DType::Int64, kContiguous, rng, 0, 49);
        const Tensor expected = ref::index_select(rows, 0, index.view);
        const DeviceBuf dinput = to_device(input);
        const DeviceBuf dindex = to_device(index);
        const TensorView drows = dinput.view.slice(1, start, row + start);
        EXPECT_TRUE(same_values(to_host(scatterx::index_select(drows, 0, dindex.view)), expected));
      }
    }
  }
}

// ---------------------------------------------------------------- errors

TEST_F(CudaTest, OutOfRangeIndexRaisesTheCpuErrorAndWritesNothing) {
  Rng rng(11);
  const ValueOptions values = fold_values(DType::Float32, Reduce::Sum);
  Buf self = random_buf({4, 5}, DType::Float32, kContiguous, rng, values);
  Tensor index = make_tensor<int64_t>({2, 5}, {0, 1, 2, 3, 0, 1, 2, 4, 3, 2});
  Buf src = random_buf({2, 5}, DType::Float32, kContiguous, rng, values);
  const std::string cpu_message =
      error_message<scatterx::IndexError>([&] { (void)scatterx::scatter_add(self.view, 0, index, src.view); });
  ASSERT_FALSE(cpu_message.empty());
  self.take_snapshot();
  DeviceBuf dself = to_device(self);
  Buf index_buf_host{index, index, kContiguous, {}};
  const DeviceBuf dindex = to_device(index_buf_host);
  const DeviceBuf dsrc = to_device(src);
  // the same message as the CPU's, out of place and in place
  EXPECT_EQ(
      error_message<scatterx::IndexError>([&] { (void)scatterx::scatter_add(dself.view, 0, dindex.view, dsrc.view); }),
      cpu_message);
  const std::string detail = cpu_message.substr(cpu_message.find(':'));
  EXPECT_EQ(error_message<scatterx::IndexError>([&] { scatterx::scatter_add_(dself.view, 0, dindex.view, dsrc.view); }),
            "scatter_add_" + detail);
  to_host(dself, self);
  EXPECT_TRUE(self.unchanged());
  // The GPU is still usable: a valid op right after works.
  Tensor good = make_tensor<int64_t>({2, 5}, {0, 1, 2, 3, 0, 1, 2, 3, 3, 2});
  Buf good_host{good, good, kContiguous, {}};
  const DeviceBuf dgood = to_device(good_host);
  const Tensor expected = ref::scatter_reduce(self.view, 0, good, src.view, Reduce::Sum, true);
  scatterx::scatter_add_(dself.view, 0, dgood.view, dsrc.view);
  to_host(dself, self);
  EXPECT_TRUE(matches(self.view, expected, Reduce::Sum, false));
  EXPECT_NO_THROW(sxc::synchronize());
}

TEST_F(CudaTest, GatherOutOfRangeRaisesIndexError) {
  Rng rng(12);
  Buf input = random_buf({6, 3}, DType::Int32, kContiguous, rng);
  Tensor index = make_tensor<int32_t>({3}, {0, -1, 2});
  Buf index_host{index, index, kContiguous, {}};
  const DeviceBuf dinput = to_device(input);
  const DeviceBuf dindex = to_device(index_host);
  expect_error<scatterx::IndexError>(
      [&] { (void)scatterx::index_select(dinput.view, 0, dindex.view); },
      {"index_select: index -1 is out of bounds for dimension 0 with size 6", "(index position [1])"});
}

// Unchecked: no host synchronization, no error; out-of-range positions are
// skipped, every other destination is right, and nothing faults.
TEST_F(CudaTest, UncheckedModeSkipsBadIndices) {
  sxc::set_index_checks(false);
  Tensor self = make_tensor<float>({3}, {1, 1, 1});
  Tensor index = make_tensor<int64_t>({4}, {0, 7, 2, -3});
  Tensor src = make_tensor<float>({4}, {10, 20, 30, 40});
  Buf self_host{self, self, kContiguous, {}};
  Buf index_host{index, index, kContiguous, {}};
  Buf src_host{src, src, kContiguous, {}};
  DeviceBuf dself = to_device(self_host);
  const DeviceBuf dindex = to_device(index_host);
  const DeviceBuf dsrc = to_device(src_host);
  EXPECT_NO_THROW(scatterx::scatter_add_(dself.view, 0, dindex.view, dsrc.view));
  EXPECT_NO_THROW(sxc::synchronize());
  to_host(dself, self_host);
  EXPECT_TRUE(same_values(self, make_tensor<float>({3}, {11, 1, 31})));
}

TEST_F(CudaTest, MixedDevicesAreRefused) {
  Tensor self = Tensor::zeros({4}, DType::Float32, kGpu);
  Tensor index = make_tensor<int64_t>({2}, {0, 1});
  Tensor src = Tensor::zeros({2}, DType::Float32, kGpu);
  expect_error<scatterx::ArgumentError>([&] { scatterx::scatter_add_(self, 0, index, src); },
                                        {"scatter_add_: expected index on self's device cuda:0, got cpu"});
}

// ---------------------------------------------------------------- streams, determinism

TEST_F(CudaTest, RunsOnTheCurrentStream) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Rng rng(13);
  Buf input = random_buf({1000, 64}, DType::Float32, kContiguous, rng);
  Buf index = index_buf({5000}, DType::Int64, kContiguous, rng, 0, 999);
  const Tensor expected = ref::index_select(input.view, 0, index.view);
  {
    sxc::StreamGuard guard(stream);
    EXPECT_EQ(sxc::current_stream(), static_cast<void*>(stream));
    const DeviceBuf dinput = to_device(input);
    const DeviceBuf dindex = to_device(index);
    const Tensor out = scatterx::index_select(dinput.view, 0, dindex.view);
    sxc::synchronize();
    EXPECT_TRUE(same_values(to_host(out), expected));
  }
  EXPECT_EQ(sxc::current_stream(), nullptr);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// With index checks off nothing in a GNN layer (index_select of the edge
// sources, index_add_ into their destinations) or an MoE combine
// (index_add_weighted_) synchronizes, allocates outside the stream or copies
// to the host, so both capture into a CUDA graph; replayed, the graph gives
// the reference's results, twice over fresh outputs.
TEST_F(CudaTest, UncheckedGnnLayerAndMoeCombineReplayFromACudaGraph) {
  sxc::set_index_checks(false);
  Rng rng(23);
  const ValueOptions values = fold_values(DType::Float32, Reduce::Sum);
  const int64_t nodes = 1000, edges = 20000, features = 64;
  Buf x = random_buf({nodes, features}, DType::Float32, kContiguous, rng, values);
  Buf edge_src = index_buf({edges}, DType::Int64, kContiguous, rng, 0, nodes - 1);
  Buf edge_dst = index_buf({edges}, DType::Int32, kContiguous, rng, 0, nodes - 1);
  const int64_t tokens = 500, rows = 1000, hidden = 96;
  Buf expert_rows = random_buf({rows, hidden}, DType::Float32, kContiguous, rng, values);
  Buf token_ids = index_buf({rows}, DType::Int64, kContiguous, rng, 0, tokens - 1);
  Buf probs = random_buf({rows}, DType::Float32, kContiguous, rng, values);
  const Tensor zeros_nodes = Tensor::zeros({nodes, features}, DType::Float32);
  const Tensor zeros_tokens = Tensor::zeros({tokens, hidden}, DType::Float32);
  const Tensor messages = ref::index_select(x.view, 0, edge_src.view);
  const Tensor expected_agg = ref::index_add(zeros_nodes, 0, edge_dst.view, messages, Scalar(int64_t{1}));
  const FoldBounds agg_bounds = bounds_for(expected_agg, Reduce::Sum, zeros_nodes, messages,
                                           [&](const TensorView& a, const TensorView& b, Reduce, bool) {
                                             return ref::index_add(a, 0, edge_dst.view, b, Scalar(int64_t{1}));
                                           });
  const Tensor expected_moe = ref::index_add_weighted(zeros_tokens, 0, token_ids.view, expert_rows.view, probs.view);
  const FoldBounds moe_bounds = bounds_for(expected_moe, Reduce::Sum, zeros_tokens, expert_rows.view,
                                           [&](const TensorView& a, const TensorView& b, Reduce, bool counting) {
                                             const Tensor w =
                                                 counting ? float64_ones(probs.view.sizes()) : abs_copy(probs.view);
                                             return ref::index_add_weighted(a, 0, token_ids.view, b, w);
                                           });

  const DeviceBuf dx = to_device(x), dsrc = to_device(edge_src), ddst = to_device(edge_dst);
  const DeviceBuf drows = to_device(expert_rows), dids = to_device(token_ids), dprobs = to_device(probs);
  const Tensor h = Tensor::empty({edges, features}, DType::Float32, kGpu);
  const Tensor agg = Tensor::empty({nodes, features}, DType::Float32, kGpu);
  const Tensor moe = Tensor::empty({tokens, hidden}, DType::Float32, kGpu);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  {
    sxc::StreamGuard guard(stream);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    scatterx::index_select_out(h, dx.view, 0, dsrc.view);
    scatterx::index_add_(agg, 0, ddst.view, h);
    scatterx::index_add_weighted_(moe, 0, dids.view, drows.view, dprobs.view);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess) << "an op broke the capture";
  }
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaMemsetAsync(agg.data(), 0, nodes * features * sizeof(float), stream), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(moe.data(), 0, tokens * hidden * sizeof(float), stream), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_TRUE(matches(to_host(agg), expected_agg, Reduce::Sum, false, agg_bounds)) << "replay " << replay;
    EXPECT_TRUE(matches(to_host(moe), expected_moe, Reduce::Sum, false, moe_bounds)) << "replay " << replay;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// index_add_weighted_ (MoE combine) on each path, against the reference:
// rows of 1, 13 and 96 columns, a strided weight vector, hot tokens. The
// offset views start rows at every alignment, so the row kernel's 16-byte
// vectors, its 4-byte pairs (16-bit types) and its column-by-column tail
// all run.
TEST_F(CudaTest, WeightedIndexAddMatchesReference) {
  Rng rng(19);
  for (DType dtype :
       {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64, DType::Int32, DType::Complex64}) {
    // 1100 columns: more 16-byte vectors than a row's lanes take in one round
    for (int64_t hidden : {1, 13, 96, 1100}) {
      for (unsigned layout : {kContiguous, kOffset}) {
        for (sxc::ScatterPath path : {sxc::ScatterPath::Atomic, sxc::ScatterPath::Sorted}) {
          sxc::set_scatter_path(path);
          const int64_t tokens = 40;
          const int64_t rows = hidden > 100 ? 500 : 3000;
          const ValueOptions values = fold_values(dtype, Reduce::Sum);
          Buf self = random_buf({tokens, hidden}, dtype, layout, rng, values);
          Buf index = index_buf({rows}, DType::Int64, kContiguous, rng, 0, hidden == 1 ? 3 : tokens - 1);
          Buf source = random_buf({rows, hidden}, dtype, layout, rng, values);
          Buf weights = random_buf({rows}, dtype, random_layout(rng, false), rng, values);
          const Tensor expected = ref::index_add_weighted(self.view, 0, index.view, source.view, weights.view);
          const FoldBounds bounds =
              bounds_for(expected, Reduce::Sum, self.view, source.view,
                         [&](const TensorView& a, const TensorView& b, Reduce, bool counting) {
                           const Tensor w = counting ? float64_ones(weights.view.sizes()) : abs_copy(weights.view);
                           return ref::index_add_weighted(a, 0, index.view, b, w);
                         });
          DeviceBuf dself = to_device(self);
          const DeviceBuf dindex = to_device(index);
          const DeviceBuf dsource = to_device(source);
          const DeviceBuf dweights = to_device(weights);
          scatterx::index_add_weighted_(dself.view, 0, dindex.view, dsource.view, dweights.view);
          to_host(dself, self);
          EXPECT_TRUE(matches(self.view, expected, Reduce::Sum, path == sxc::ScatterPath::Sorted, bounds))
              << dtype_label(dtype) << " hidden " << hidden << " " << layout_str(layout)
              << (path == sxc::ScatterPath::Sorted ? " sorted" : " atomic");
        }
      }
    }
  }
}

// Deterministic mode: float sums bit-identical run to run, and equal to the
// CPU backend's where no destination has more than 64 values (those fold in
// index order, one thread each).
TEST_F(CudaTest, DeterministicShortRunsAreBitIdenticalToTheCpu) {
  sxc::set_deterministic(true);
  Rng rng(14);
  Buf self = random_buf({100, 8}, DType::Float32, kContiguous, rng);
  Buf index = index_buf({2000, 8}, DType::Int64, kContiguous, rng, 0, 99);  // about 20 values per destination
  Buf src = random_buf({2000, 8}, DType::Float32, kContiguous, rng);
  const Tensor cpu = scatterx::scatter_reduce(self.view, 0, index.view, src.view, Reduce::Sum);
  const DeviceBuf dself = to_device(self);
  const DeviceBuf dindex = to_device(index);
  const DeviceBuf dsrc = to_device(src);
  for (int run = 0; run < 3; ++run) {
    const Tensor gpu = scatterx::scatter_reduce(dself.view, 0, dindex.view, dsrc.view, Reduce::Sum);
    EXPECT_TRUE(same_values(to_host(gpu), cpu)) << "run " << run;
  }
}

// Element scatters onto a few hot destinations (thousands of values each):
// chunked partial folds, then a block per destination. Bit-identical run to
// run, close to the CPU; mean's counts and scatter_'s "last wins" exact.
TEST_F(CudaTest, DeterministicLongElementRunsRepeatExactly) {
  sxc::set_deterministic(true);
  Rng rng(16);
  const ValueOptions values = fold_values(DType::Float32, Reduce::Sum);
  Buf self = random_buf({16, 8}, DType::Float32, kContiguous, rng, values);
  Buf index = index_buf({20000, 8}, DType::Int64, kContiguous, rng, 0, 15);
  Buf src = random_buf({20000, 8}, DType::Float32, kContiguous, rng, values);
  const DeviceBuf dself = to_device(self);
  const DeviceBuf dindex = to_device(index);
  const DeviceBuf dsrc = to_device(src);
  for (Reduce reduce : {Reduce::Sum, Reduce::Mean, Reduce::Amax}) {
    for (bool include_self : {true, false}) {
      const Tensor cpu = scatterx::scatter_reduce(self.view, 0, index.view, src.view, reduce, include_self);
      const Tensor first =
          to_host(scatterx::scatter_reduce(dself.view, 0, dindex.view, dsrc.view, reduce, include_self));
      const FoldBounds bounds =
          bounds_for(cpu, reduce, self.view, src.view, [&](const TensorView& a, const TensorView& b, Reduce r, bool) {
            return ref::scatter_reduce(a, 0, index.view, b, r, include_self);
          });
      EXPECT_TRUE(matches(first, cpu, reduce, true, bounds)) << reduce_name(reduce) << " include_self " << include_self;
      for (int run = 0; run < 2; ++run) {
        EXPECT_TRUE(same_values(
            to_host(scatterx::scatter_reduce(dself.view, 0, dindex.view, dsrc.view, reduce, include_self)), first))
            << reduce_name(reduce) << " run " << run;
      }
    }
  }
  const Tensor cpu = scatterx::scatter(self.view, 0, index.view, src.view);
  EXPECT_TRUE(same_values(to_host(scatterx::scatter(dself.view, 0, dindex.view, dsrc.view)), cpu))
      << "scatter_: the last value in index order wins";
}

// The index check's contention measure: the share of the most frequent
// value, exact when that value is among the samples (a value with a quarter
// of the index is missed with probability 0.75^32 ~ 1e-4).
TEST_F(CudaTest, IndexCheckMeasuresTheHottestValuesShare) {
  Rng rng(17);
  const int64_t n = int64_t{1} << 17;
  std::vector<int64_t> values(static_cast<size_t>(n));
  int64_t hot = 0;
  for (int64_t& v : values) {
    v = rng.chance(0.25) ? 3 : rng.uniform(4, 49999);
    hot += v == 3;
  }
  const DeviceBuf index = to_device(index_of(values, rng));
  const double share = backend::check_index_bounds("test", index.view, 0, 50000, true);
  EXPECT_EQ(share, static_cast<double>(hot) / static_cast<double>(n));
  EXPECT_EQ(backend::check_index_bounds("test", index.view, 0, 50000, false), -1.0) << "not asked";
  sxc::set_index_checks(false);
  EXPECT_EQ(backend::check_index_bounds("test", index.view, 0, 50000, true), -1.0) << "checks off";
}

// Auto takes the sorted path for a hot index and atomics otherwise; either
// way the result is the reference's. Products fold by swaps that every value
// must win, so a destination drawing a fifth of the index (a few thousand
// values) already sorts them, while sums and extrema stay atomic.
TEST_F(CudaTest, AutoPathSortsOnlyContendedScatters) {
  Rng rng(18);
  const int64_t n = int64_t{1} << 17;
  Buf self = random_buf({4096}, DType::Float32, kContiguous, rng, fold_values(DType::Float32, Reduce::Sum));
  Buf src = random_buf({n}, DType::Float32, kContiguous, rng, fold_values(DType::Float32, Reduce::Sum));
  // Products of values near one: no order can overflow them.
  Buf prod_self = random_buf({4096}, DType::Float32, kContiguous, rng, fold_values(DType::Float32, Reduce::Prod));
  Buf prod_src = random_buf({n}, DType::Float32, kContiguous, rng, fold_values(DType::Float32, Reduce::Prod));
  std::vector<int64_t> hot_values(static_cast<size_t>(n));
  for (int64_t& v : hot_values) v = rng.chance(0.75) ? 7 : rng.uniform(0, 4095);  // above kContendedShare
  std::vector<int64_t> warm_values(static_cast<size_t>(n));
  for (int64_t& v : warm_values) v = rng.chance(0.2) ? 7 : rng.uniform(0, 4095);  // ~26k values: kContendedSwapHits
  const Buf hot = index_of(hot_values, rng);
  const Buf warm = index_of(warm_values, rng);
  const Buf uniform = index_buf({n}, DType::Int64, kContiguous, rng, 0, 4095);  // 32 values per destination
  constexpr auto kSorted = sxc::ScatterPath::Sorted;
  constexpr auto kAtomic = sxc::ScatterPath::Atomic;
  struct Case {
    const char* name;
    const Buf* index;
    bool checks;
    bool deterministic;
    sxc::ScatterPath expected;       // sum and amax
    sxc::ScatterPath expected_prod;  // prod
  };
  const Case cases[] = {
      {"hot", &hot, true, false, kSorted, kSorted},
      {"warm", &warm, true, false, kAtomic, kSorted},
      {"uniform", &uniform, true, false, kAtomic, kAtomic},
      {"hot, checks off (not measured)", &hot, false, false, kAtomic, kAtomic},
      {"uniform, deterministic", &uniform, true, true, kSorted, kSorted},
  };
  for (const Case& c : cases) {
    sxc::set_index_checks(c.checks);
    sxc::set_deterministic(c.deterministic);
    const DeviceBuf dindex = to_device(*c.index);
    for (Reduce reduce : {Reduce::Sum, Reduce::Amax, Reduce::Prod}) {
      const Buf& self_in = reduce == Reduce::Prod ? prod_self : self;
      const Buf& src_in = reduce == Reduce::Prod ? prod_src : src;
      const DeviceBuf dself = to_device(self_in);
      const DeviceBuf dsrc = to_device(src_in);
      const Tensor expected = ref::scatter_reduce(self_in.view, 0, c.index->view, src_in.view, reduce, true);
      const FoldBounds bounds = bounds_for(expected, reduce, self_in.view, src_in.view,
                                           [&](const TensorView& a, const TensorView& b, Reduce r, bool) {
                                             return ref::scatter_reduce(a, 0, c.index->view, b, r, true);
                                           });
      const Tensor gpu = to_host(scatterx::scatter_reduce(dself.view, 0, dindex.view, dsrc.view, reduce, true));
      EXPECT_EQ(backend::last_scatter_path(), reduce == Reduce::Prod ? c.expected_prod : c.expected)
          << c.name << ", " << reduce_name(reduce);
      EXPECT_TRUE(matches(gpu, expected, reduce, false, bounds)) << c.name << ", " << reduce_name(reduce);
    }
  }
}

// Float and double extrema fold by integer atomics on the values' ordered
// bits (atomics.cuh): across signs, infinities, signed zeros, and NaNs of
// either sign in self or src, each destination must end where the
// reference does (a NaN anywhere wins; +0 and -0 compare equal).
template <typename F>
void check_extrema_by_ordered_bits(Reduce reduce, bool include_self) {
  const F nan = std::numeric_limits<F>::quiet_NaN();
  const F inf = std::numeric_limits<F>::infinity();
  // Destinations: 0 negatives only, 1 positives only, 2 mixed signs,
  // 3 a +NaN in src, 4 a -NaN in src, 5 -NaN in self, 6 +NaN in self,
  // 7 infinities, 8 tiny values of both signs, 9 untouched.
  const std::vector<F> self_values = {F(-5), F(5), F(0.5), F(1), F(-1), -nan, nan, F(0), F(-0.0), F(3)};
  std::vector<int64_t> index;
  std::vector<F> src;
  auto add = [&](int64_t d, std::initializer_list<F> vs) {
    for (F v : vs) {
      index.push_back(d);
      src.push_back(v);
    }
  };
  for (int round = 0; round < 64; ++round) {  // many arrivals per destination, interleaved
    const F r = F(round + 1);
    add(0, {-r, F(-0.25) * r});
    add(1, {r, F(0.125) * r});
    add(2, {-r, r, F(-0.0), F(0.0)});
    add(3, {r, round == 40 ? nan : -r});
    add(4, {-r, round == 13 ? -nan : r});
    add(5, {r, -r});
    add(6, {-r, r});
    add(7, {round % 3 == 0 ? inf : r, round % 5 == 0 ? -inf : -r});
    add(8, {std::numeric_limits<F>::denorm_min() * r, -std::numeric_limits<F>::denorm_min() * r});
  }
  const int64_t n = static_cast<int64_t>(src.size());
  const Tensor self = make_tensor<F>({10}, self_values);
  const Tensor src_t = make_tensor<F>({n}, src);
  const Tensor index_t = make_tensor<int64_t>({n}, index);
  const Tensor expected = ref::scatter_reduce(self, 0, index_t, src_t, reduce, include_self);
  const DeviceBuf dself = to_device(self);
  const DeviceBuf dsrc = to_device(src_t);
  const DeviceBuf dindex = to_device(index_t);
  const Tensor gpu = to_host(scatterx::scatter_reduce(dself.view, 0, dindex.view, dsrc.view, reduce, include_self));
  EXPECT_EQ(backend::last_scatter_path(), sxc::ScatterPath::Atomic);
  EXPECT_TRUE(matches(gpu, expected, reduce, false)) << reduce_name(reduce) << ", include_self " << include_self;
}

TEST_F(CudaTest, FloatExtremaByOrderedBitsKeepNaNsSignsAndInfinities) {
  sxc::set_scatter_path(sxc::ScatterPath::Atomic);
  for (Reduce reduce : {Reduce::Amax, Reduce::Amin}) {
    for (bool include_self : {true, false}) {
      check_extrema_by_ordered_bits<float>(reduce, include_self);
      check_extrema_by_ordered_bits<double>(reduce, include_self);
    }
  }
}

// GNN-like rows: a few destinations with thousands of rows each (chunked
// partial folds), deterministic run to run, and close to the CPU's result.
TEST_F(CudaTest, DeterministicLongRowRunsRepeatExactly) {
  sxc::set_deterministic(true);
  Rng rng(15);
  const ValueOptions values = fold_values(DType::Float32, Reduce::Sum);
  Buf self = random_buf({5, 96}, DType::Float32, kContiguous, rng, values);
  Buf index = index_buf({30000}, DType::Int64, kContiguous, rng, 0, 4);
  Buf source = random_buf({30000, 96}, DType::Float32, kContiguous, rng, values);
  const Tensor cpu = scatterx::index_add(self.view, 0, index.view, source.view);
  const FoldBounds bounds =
      bounds_for(cpu, Reduce::Sum, self.view, source.view, [&](const TensorView& a, const TensorView& b, Reduce, bool) {
        return ref::index_add(a, 0, index.view, b, Scalar(int64_t{1}));
      });
  const DeviceBuf dself = to_device(self);
  const DeviceBuf dindex = to_device(index);
  const DeviceBuf dsource = to_device(source);
  const Tensor first = to_host(scatterx::index_add(dself.view, 0, dindex.view, dsource.view));
  EXPECT_TRUE(matches(first, cpu, Reduce::Sum, true, bounds));
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(same_values(to_host(scatterx::index_add(dself.view, 0, dindex.view, dsource.view)), first))
        << "run " << run;
  }
}

// ---------------------------------------------------------------- segment ops

// segment_csr / segment_coo (and arg forms), scatter_arg_reduce, gather_csr
// and gather_coo on the GPU against the CPU backend, bit for bit (both fold
// each output in position order).
class CudaSegment : public ::testing::TestWithParam<OpParam> {
 protected:
  void SetUp() override {
    if (sxc::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

// Sorted values in [0, hi] per row of a [rows, len] contiguous position tensor (last value of the last row = hi).
Buf sorted_positions(int64_t rows, int64_t len, DType dtype, Rng& rng, int64_t hi) {
  return make_buf({rows, len}, dtype, kContiguous, rng, [&](const TensorView& v) {
    visit_index_dtype(dtype, [&](auto tag) {
      using I = typename decltype(tag)::type;
      I* p = static_cast<I*>(v.data());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < len; ++i) p[r * len + i] = static_cast<I>(rng.uniform(0, hi));
        std::sort(p + r * len, p + (r + 1) * len);
      }
      if (rows * len > 0) p[rows * len - 1] = static_cast<I>(hi);
    });
  });
}

TEST_P(CudaSegment, MatchesTheCpuBackend) {
  const OpParam& p = GetParam();
  const bool arg = p.reduce == Reduce::Amax || p.reduce == Reduce::Amin;
  run_cases(20, [&](Rng& rng, int) {
    const int64_t rows = rng.uniform(1, 3);
    const int64_t len = rng.uniform(0, 300);
    const int64_t inner = rng.uniform(1, 70);
    const int64_t segments = rng.uniform(0, 20);
    Buf src = random_buf({rows, len, inner}, p.dtype, random_layout(rng, true), rng, value_options_for(p.reduce));
    const Buf indptr = sorted_positions(rows, segments + 1, p.index_dtype, rng, len);
    const Buf index = sorted_positions(rows, len, p.index_dtype, rng, segments);
    const DeviceBuf dsrc = to_device(src);
    const DeviceBuf dindptr = to_device(indptr);
    const DeviceBuf dindex = to_device(index);
    EXPECT_TRUE(same_values(to_host(scatterx::segment_csr(dsrc.view, dindptr.view, p.reduce)),
                            scatterx::segment_csr(src.view, indptr.view, p.reduce)));
    EXPECT_TRUE(same_values(to_host(scatterx::segment_coo(dsrc.view, dindex.view, p.reduce)),
                            scatterx::segment_coo(src.view, index.view, p.reduce)));
    if (arg) {
      const auto want = scatterx::segment_csr_arg(src.view, indptr.view, p.reduce);
      const auto got = scatterx::segment_csr_arg(dsrc.view, dindptr.view, p.reduce);
      EXPECT_TRUE(same_values(to_host(got.values), want.values));
      EXPECT_TRUE(same_values(to_host(got.args), want.args));
      const Buf full = index_buf({rows, len, inner}, p.index_dtype, random_layout(rng, true), rng, 0, segments);
      const DeviceBuf dfull = to_device(full);
      const auto want_s = scatterx::scatter_arg_reduce(src.view, 1, full.view, p.reduce, segments + 1);
      const auto got_s = scatterx::scatter_arg_reduce(dsrc.view, 1, dfull.view, p.reduce, segments + 1);
      EXPECT_TRUE(same_values(to_host(got_s.values), want_s.values));
      EXPECT_TRUE(same_values(to_host(got_s.args), want_s.args));
    }
    if (p.reduce == Reduce::Sum) {
      const Buf rows_src = random_buf({rows, segments, inner}, p.dtype, random_layout(rng, true), rng);
      const DeviceBuf drows = to_device(rows_src);
      EXPECT_TRUE(same_values(to_host(scatterx::gather_csr(drows.view, dindptr.view)),
                              scatterx::gather_csr(rows_src.view, indptr.view)));
      if (len > 0) {
        const Buf picks = index_buf({rows, 9}, p.index_dtype, random_layout(rng, true), rng, 0, len - 1);
        const DeviceBuf dpicks = to_device(picks);
        EXPECT_TRUE(same_values(to_host(scatterx::gather_coo(dsrc.view, dpicks.view)),
                                scatterx::gather_coo(src.view, picks.view)));
      }
    }
  });
}
INSTANTIATE_TEST_SUITE_P(Cuda, CudaSegment, ::testing::ValuesIn(make_params([] {
                           ParamSpec spec;
                           spec.reduces = {Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin};
                           return spec;
                         }())),
                         param_name);

}  // namespace
}  // namespace sxt

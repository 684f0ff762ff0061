// embedding_bag_forward / _backward and the fused updates (dist/embedding_bag.h)
// against a serial reference: every rank regenerates the full table and every
// rank's bags (seeded by rank, the same as all-gathering them) and computes
// its pooled rows and its shard's gradient densely, id by id, in float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dist/embedding_bag.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;
using dist::BagMode;

struct Case {
  const char* name;
  BagMode mode;
  bool table_wise;
  bool skewed;    // ids in [0, 3) only: many duplicates, bags on one owner
  bool weighted;  // per_sample_weights (sum only)
};

constexpr int64_t kRows = 37;
constexpr int64_t kDim = 4;

struct Bags {
  std::vector<int64_t> ids, offsets;
  std::vector<double> weights, grad;  // [N], [B, D]
};

Bags bags_of(const Case& c, int r) {
  std::mt19937_64 gen(99 + 13 * r);
  std::uniform_int_distribution<int64_t> len(0, 6), id(0, c.skewed ? 2 : kRows - 1);
  std::uniform_real_distribution<double> u(-1, 1);
  Bags b;
  const int64_t bags = 5 + r;
  for (int64_t k = 0; k < bags; ++k) {
    b.offsets.push_back(static_cast<int64_t>(b.ids.size()));
    const int64_t n = k == 1 ? 0 : len(gen);  // bag 1 is empty everywhere
    for (int64_t i = 0; i < n; ++i) {
      b.ids.push_back(id(gen));
      b.weights.push_back(u(gen));
    }
  }
  for (int64_t i = 0; i < bags * kDim; ++i) b.grad.push_back(u(gen));
  return b;
}

std::vector<double> table() {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> t(kRows * kDim);
  for (double& v : t) v = u(gen);
  return t;
}

struct Reference {
  std::vector<double> out;   // [B, D] of this rank
  std::vector<double> grad;  // [kRows, D]: every rank's contribution
  std::vector<double> gw;    // [N] of this rank
};

// One rank's bags into the reference: pooled rows (when out) and the table gradient.
void reference_bags(const Case& c, const Bags& b, const std::vector<double>& t, Reference& ref, bool mine) {
  const auto bags = static_cast<int64_t>(b.offsets.size());
  const auto n = static_cast<int64_t>(b.ids.size());
  for (int64_t k = 0; k < bags; ++k) {
    const int64_t lo = b.offsets[k], hi = k + 1 < bags ? b.offsets[k + 1] : n;
    for (int64_t d = 0; d < kDim; ++d) {
      double acc = 0;
      int64_t arg = -1;
      for (int64_t i = lo; i < hi; ++i) {
        const double v = t[b.ids[i] * kDim + d] * (c.weighted ? b.weights[i] : 1.0);
        if (c.mode != BagMode::Max) acc += v;
        if (c.mode == BagMode::Max && (arg < 0 || v > acc)) acc = v, arg = i;
      }
      if (c.mode == BagMode::Mean && hi > lo) acc /= static_cast<double>(hi - lo);
      if (mine) ref.out.push_back(acc);
      const double g = b.grad[k * kDim + d];
      for (int64_t i = lo; i < hi; ++i) {
        if (c.mode == BagMode::Max && i != arg) continue;
        const double scale = c.mode == BagMode::Mean ? 1.0 / static_cast<double>(hi - lo) : 1.0;
        ref.grad[b.ids[i] * kDim + d] += g * scale * (c.weighted ? b.weights[i] : 1.0);
        if (mine && c.weighted) ref.gw[i] += g * t[b.ids[i] * kDim + d];
      }
    }
  }
}

Tensor doubles(const std::vector<double>& v, Shape shape) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  std::copy(v.begin(), v.end(), t.data_as<double>());
  return t;
}

Tensor longs(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::Int64);
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}

void expect_near(const TensorView& t, const double* ref, int64_t n, const char* what) {
  ASSERT_EQ(t.numel(), n) << what;
  const double* p = t.data_as<double>();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], ref[i], 1e-12 * (1 + std::abs(ref[i]))) << what << " " << i;
}

class EmbeddingBagTest : public DistTest, public ::testing::WithParamInterface<Case> {};

TEST_P(EmbeddingBagTest, MatchesTheSerialReference) {
  const Case& c = GetParam();
  const std::vector<double> t = table();
  const std::vector<int64_t> starts =
      c.table_wise ? dist::table_wise_starts(kRows, ws(), ws() - 1) : dist::row_wise_starts(kRows, ws());
  const int64_t lo = starts[rank()], hi = starts[rank() + 1];
  std::vector<double> local(t.begin() + lo * kDim, t.begin() + hi * kDim);
  Tensor shard = doubles(local, {hi - lo, kDim});
  Reference ref;
  ref.grad.assign(kRows * kDim, 0.0);
  Bags mine = bags_of(c, rank());
  ref.gw.assign(mine.ids.size(), 0.0);
  for (int r = 0; r < ws(); ++r) reference_bags(c, bags_of(c, r), t, ref, r == rank());

  Tensor ids = longs(mine.ids), offsets = longs(mine.offsets);
  Tensor w = doubles(mine.weights, {static_cast<int64_t>(mine.weights.size())});
  dist::EmbeddingBagForward f =
      dist::embedding_bag_forward(shard, ids, offsets, c.weighted ? &w : nullptr, starts, c.mode, comm());
  expect_near(f.out, ref.out.data(), static_cast<int64_t>(ref.out.size()), "out");

  Tensor grad = doubles(mine.grad, {static_cast<int64_t>(mine.offsets.size()), kDim});
  dist::EmbeddingBagGrads g = dist::embedding_bag_backward(grad, shard, *f.handle, true);
  Tensor dense = dist::embedding_dense_grad(g.row_ids, g.rows, hi - lo);
  expect_near(dense, ref.grad.data() + lo * kDim, (hi - lo) * kDim, "grad");
  if (c.weighted) expect_near(g.grad_per_sample_weights, ref.gw.data(), static_cast<int64_t>(ref.gw.size()), "gw");

  // One SGD step on the shard from the sparse gradient.
  std::vector<double> stepped(local);
  for (int64_t i = 0; i < (hi - lo) * kDim; ++i) stepped[i] -= 0.5 * ref.grad[lo * kDim + i];
  dist::embedding_sgd_update(shard, g.row_ids, g.rows, 0.5);
  expect_near(shard, stepped.data(), (hi - lo) * kDim, "sgd");

  // The same call again gives the same bits.
  dist::EmbeddingBagForward again =
      dist::embedding_bag_forward(shard, ids, offsets, c.weighted ? &w : nullptr, starts, c.mode, comm());
  dist::EmbeddingBagForward third =
      dist::embedding_bag_forward(shard, ids, offsets, c.weighted ? &w : nullptr, starts, c.mode, comm());
  EXPECT_TRUE(sxt::same_values(again.out, third.out));
}

INSTANTIATE_TEST_SUITE_P(Cases, EmbeddingBagTest,
                         ::testing::Values(Case{"Sum", BagMode::Sum, false, false, false},
                                           Case{"SumWeighted", BagMode::Sum, false, false, true},
                                           Case{"SumSkewedWeighted", BagMode::Sum, false, true, true},
                                           Case{"Mean", BagMode::Mean, false, false, false},
                                           Case{"MeanSkewed", BagMode::Mean, false, true, false},
                                           Case{"Max", BagMode::Max, false, false, false},
                                           Case{"MaxSkewed", BagMode::Max, false, true, false},
                                           Case{"SumTableWise", BagMode::Sum, true, false, false},
                                           Case{"MaxTableWise", BagMode::Max, true, false, false}),
                         [](const auto& info) { return std::string(info.param.name); });

class EmbeddingBagErrorTest : public DistTest {
 protected:
  Tensor shard_for(const std::vector<int64_t>& starts) const {
    return Tensor::zeros({starts[rank() + 1] - starts[rank()], 3}, DType::Float32);
  }
};

TEST_F(EmbeddingBagErrorTest, BadIdRaisesOnEveryRank) {
  const std::vector<int64_t> starts = dist::row_wise_starts(10, ws());
  Tensor shard = shard_for(starts);
  Tensor ids = longs({1, 2, rank() == ws() - 1 ? 1234 : 3});
  Tensor offsets = longs({0, 2});
  auto call = [&] { dist::embedding_bag_forward(shard, ids, offsets, nullptr, starts, BagMode::Sum, comm()); };
  if (rank() == ws() - 1) {
    const std::string msg = error_message<scatterx::IndexError>(call);
    EXPECT_TRUE(mentions(msg, {"ShardedEmbeddingBag: expected input ids in [0, 10), got 1234"})) << msg;
  } else {
    const std::string msg = error_message<MismatchError>(call);
    EXPECT_TRUE(mentions(msg, {"ShardedEmbeddingBag", "failed their argument checks"})) << msg;
  }
}

TEST_F(EmbeddingBagErrorTest, ArgumentErrorsNameTheArgument) {
  const std::vector<int64_t> starts = dist::row_wise_starts(10, ws());
  Tensor shard = shard_for(starts);
  Tensor ids = longs({1, 2, 3});
  std::string msg = error_message<ArgumentError>([&] {
    dist::embedding_bag_forward(shard, ids, longs({1, 2}), nullptr, starts, BagMode::Sum, comm());
  });
  EXPECT_TRUE(mentions(msg, {"offsets[0] == 0, got 1"})) << msg;
  msg = error_message<ArgumentError>([&] {
    dist::embedding_bag_forward(shard, ids, longs({0, 2, 1}), nullptr, starts, BagMode::Sum, comm());
  });
  EXPECT_TRUE(mentions(msg, {"non-decreasing offsets", "offsets[2] = 1"})) << msg;
  Tensor w = Tensor::zeros({3}, DType::Float32);
  msg = error_message<ArgumentError>(
      [&] { dist::embedding_bag_forward(shard, ids, longs({0}), &w, starts, BagMode::Max, comm()); });
  EXPECT_TRUE(mentions(msg, {"per_sample_weights only with mode 'sum'"})) << msg;
}

TEST_F(EmbeddingBagErrorTest, DisagreementsRaiseOnEveryRank) {
  SXD_REQUIRE_WS2();
  const std::vector<int64_t> starts = dist::row_wise_starts(10, ws());
  Tensor shard = shard_for(starts);
  Tensor ids = longs({1});
  const BagMode mode = rank() == 0 ? BagMode::Sum : BagMode::Mean;
  const std::string msg = error_message<MismatchError>(
      [&] { dist::embedding_bag_forward(shard, ids, longs({0}), nullptr, starts, mode, comm()); });
  EXPECT_TRUE(mentions(msg, {"same mode", "rank 1: 1"})) << msg;
}

TEST_F(EmbeddingBagErrorTest, EmptyInputEverywhere) {
  const std::vector<int64_t> starts = dist::row_wise_starts(10, ws());
  Tensor shard = shard_for(starts);
  Tensor none = Tensor::empty({0}, DType::Int64);
  dist::EmbeddingBagForward f = dist::embedding_bag_forward(shard, none, none, nullptr, starts, BagMode::Max, comm());
  EXPECT_EQ(f.out.size(0), 0);
  dist::EmbeddingBagGrads g =
      dist::embedding_bag_backward(Tensor::empty({0, 3}, DType::Float32), shard, *f.handle, false);
  EXPECT_EQ(g.row_ids.numel(), 0);
}

}  // namespace
}  // namespace sxd

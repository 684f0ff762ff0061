// moe_dispatch / moe_combine and their backward (dist/moe.h) against a serial
// reference: every rank regenerates every rank's inputs (seeded by rank, the
// same as all-gathering them) and computes its expected rows, outputs and
// gradients densely, pair by pair, in float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dist/moe.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

struct Case {
  const char* name;
  int64_t k;
  int64_t experts_per_rank;
  double capacity;  // <= 0: none
  int64_t pad;
  bool rank0_empty;  // T = 0 on rank 0
  bool one_expert;   // every token's first slot is expert 0
};

constexpr int64_t kHidden = 5;

int64_t tokens_of(const Case& c, int r) { return c.rank0_empty && r == 0 ? 0 : 6 + 3 * r; }

// Rank r's inputs.
struct Inputs {
  int64_t tokens = 0;
  std::vector<double> x, w, dy;  // [T, H], [T, k], [T, H]
  std::vector<int64_t> idx;      // [T, k]
  std::vector<char> kept;        // [T, k]
};

Inputs inputs_of(const Case& c, int r, int64_t num_experts) {
  Inputs in;
  in.tokens = tokens_of(c, r);
  std::mt19937_64 gen(1234 + 77 * r);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < in.tokens * kHidden; ++i) in.x.push_back(u(gen));
  for (int64_t i = 0; i < in.tokens * kHidden; ++i) in.dy.push_back(u(gen));
  for (int64_t t = 0; t < in.tokens; ++t) {
    std::vector<int64_t> pool(static_cast<size_t>(num_experts));
    for (int64_t e = 0; e < num_experts; ++e) pool[e] = e;
    std::shuffle(pool.begin(), pool.end(), gen);
    if (c.one_expert) std::swap(pool[0], *std::find(pool.begin(), pool.end(), 0));
    for (int64_t s = 0; s < c.k; ++s) {
      in.idx.push_back(pool[s]);
      in.w.push_back(u(gen));
    }
  }
  // Capacity, counted independently of the library: pairs per expert in token, slot order.
  in.kept.assign(in.idx.size(), 1);
  if (c.capacity > 0) {
    const auto cap = static_cast<int64_t>(std::ceil(c.capacity * in.tokens * c.k / num_experts));
    std::vector<int64_t> seen(static_cast<size_t>(num_experts), 0);
    for (size_t i = 0; i < in.idx.size(); ++i) in.kept[i] = seen[in.idx[i]]++ < cap;
  }
  return in;
}

// The experts' stand-in: expert g maps a row v to (g + 1) v - g / 4.
double expert_fn(int64_t g, double v) { return (g + 1) * v - 0.25 * g; }

Tensor tensor_of(const std::vector<double>& v, int64_t rows, int64_t cols) {
  Tensor t = Tensor::empty({rows, cols}, DType::Float64);
  std::copy(v.begin(), v.end(), t.data_as<double>());
  return t;
}

void expect_near(const TensorView& t, const std::vector<double>& ref, const char* what) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(ref.size())) << what;
  const double* p = t.data_as<double>();
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(p[i], ref[i], 1e-12 * (1 + std::abs(ref[i]))) << what << " element " << i;
}

class MoeTest : public DistTest, public ::testing::WithParamInterface<Case> {};

TEST_P(MoeTest, MatchesTheDenseReference) {
  const Case& c = GetParam();
  const int64_t local = c.experts_per_rank;
  const int64_t num_experts = local * ws();
  if (c.k > num_experts) GTEST_SKIP() << "k exceeds the experts";
  std::vector<Inputs> all;
  for (int r = 0; r < ws(); ++r) all.push_back(inputs_of(c, r, num_experts));
  const Inputs& mine = all[rank()];
  const int64_t T = mine.tokens;
  Tensor x = tensor_of(mine.x, T, kHidden);
  Tensor idx = Tensor::empty({T, c.k}, DType::Int64);
  std::copy(mine.idx.begin(), mine.idx.end(), idx.data_as<int64_t>());
  Tensor w = tensor_of(mine.w, T, c.k);
  dist::MoeOptions options;
  if (c.capacity > 0) options.capacity_factor = c.capacity;
  options.pad_to_multiple = c.pad;

  dist::MoeDispatch d = dist::moe_dispatch(x, idx, w, num_experts, comm(), options);

  // Expected recv_x: for each local expert, rows by source rank, then token; zero padding.
  std::vector<double> recv, eo, grad_eo, grad_recv;
  std::vector<int64_t> counts;
  std::vector<char> padding_row;
  for (int64_t e = 0; e < local; ++e) {
    const int64_t g = rank() * local + e;
    int64_t n = 0;
    for (int r = 0; r < ws(); ++r) {
      const Inputs& in = all[r];
      for (int64_t t = 0; t < in.tokens; ++t) {
        for (int64_t s = 0; s < c.k; ++s) {
          if (in.idx[t * c.k + s] != g || !in.kept[t * c.k + s]) continue;
          for (int64_t h = 0; h < kHidden; ++h) {
            const double v = in.x[t * kHidden + h];
            recv.push_back(v);
            eo.push_back(expert_fn(g, v));
            grad_eo.push_back(in.w[t * c.k + s] * in.dy[t * kHidden + h]);
            grad_recv.push_back(expert_fn(g, v));  // the gradient fed to dispatch_backward
          }
          ++n;
          padding_row.push_back(0);
        }
      }
    }
    for (; n % c.pad != 0; ++n) {
      padding_row.push_back(1);
      recv.insert(recv.end(), kHidden, 0.0);
      eo.insert(eo.end(), kHidden, 0.0);
      grad_eo.insert(grad_eo.end(), kHidden, 0.0);
      grad_recv.insert(grad_recv.end(), kHidden, 0.0);
    }
    counts.push_back(n);
  }
  ASSERT_EQ(d.tokens_per_expert.numel(), local);
  for (int64_t e = 0; e < local; ++e) EXPECT_EQ(d.tokens_per_expert.data_as<int64_t>()[e], counts[e]) << e;
  expect_near(d.recv_x, recv, "recv_x");
  const int64_t rows = d.recv_x.size(0);

  // Expert outputs: the stand-in on real rows; padding rows hold garbage, which combine must ignore.
  Tensor expert_out = Tensor::empty({rows, kHidden}, DType::Float64);
  for (int64_t i = 0; i < rows * kHidden; ++i)
    expert_out.data_as<double>()[i] = padding_row[i / kHidden] ? 1e30 : eo[i];
  Tensor y = dist::moe_combine(expert_out, *d.handle);
  std::vector<double> y_ref(static_cast<size_t>(T * kHidden), 0.0), gx_ref(y_ref.size(), 0.0);
  std::vector<double> gw_ref(static_cast<size_t>(T * c.k), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t s = 0; s < c.k; ++s) {
      if (!mine.kept[t * c.k + s]) continue;
      const int64_t g = mine.idx[t * c.k + s];
      for (int64_t h = 0; h < kHidden; ++h) {
        const double out = expert_fn(g, mine.x[t * kHidden + h]);
        y_ref[t * kHidden + h] += mine.w[t * c.k + s] * out;
        gx_ref[t * kHidden + h] += out;
        gw_ref[t * c.k + s] += mine.dy[t * kHidden + h] * out;
      }
    }
  }
  expect_near(y, y_ref, "y");

  // dispatch_backward: each token's gradient summed over its rows.
  Tensor grad_recv_x = tensor_of(grad_recv, rows, kHidden);
  expect_near(dist::moe_dispatch_backward(grad_recv_x, *d.handle), gx_ref, "grad_x");

  // combine_backward: padding rows of expert_out (garbage) get 0 and matter nowhere.
  dist::MoeCombineGrads grads = dist::moe_combine_backward(tensor_of(mine.dy, T, kHidden), expert_out, *d.handle);
  expect_near(grads.grad_expert_out, grad_eo, "grad_expert_out");
  expect_near(grads.grad_topk_weights, gw_ref, "grad_topk_weights");

  // A second dispatch of the same inputs gives the same bits.
  dist::MoeDispatch again = dist::moe_dispatch(x, idx, w, num_experts, comm(), options);
  EXPECT_TRUE(sxt::same_values(again.recv_x, d.recv_x));
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeTest,
                         ::testing::Values(Case{"TopTwo", 2, 2, 0, 1, false, false},
                                           Case{"TopOne", 1, 3, 0, 1, false, false},
                                           Case{"CapacityAndPadding", 2, 2, 0.5, 4, false, false},
                                           Case{"NoTokensOnRankZero", 2, 2, 0, 3, true, false},
                                           Case{"AllToOneExpert", 2, 2, 0, 1, false, true},
                                           Case{"AllToOneExpertCapacity", 3, 1, 0.75, 2, false, true},
                                           Case{"OneExpertPerRank", 1, 1, 0, 1, false, false}),
                         [](const auto& info) { return std::string(info.param.name); });

class MoeErrorTest : public DistTest {
 protected:
  // x [3, 4] float64, topk_idx [3, 2] int64 = {0, 1} each row, weights ones.
  Tensor x = Tensor::zeros({3, 4}, DType::Float64);
  Tensor idx = Tensor::empty({3, 2}, DType::Int64);
  Tensor w = Tensor::zeros({3, 2}, DType::Float64);
  void SetUp() override {
    for (int64_t i = 0; i < 6; ++i) idx.data_as<int64_t>()[i] = i % 2;
  }
  int64_t experts() const { return 2 * ws(); }
};

TEST_F(MoeErrorTest, DuplicateExpertsRaiseOnEveryRank) {
  if (rank() == ws() - 1) idx.data_as<int64_t>()[3] = 0;  // row 1 = [0, 0]
  if (rank() == ws() - 1) {
    const std::string msg = error_message<ArgumentError>([&] { dist::moe_dispatch(x, idx, w, experts(), comm()); });
    EXPECT_TRUE(mentions(msg, {"moe.dispatch", "distinct experts", "row 1 = [0, 0]"})) << msg;
  } else {
    const std::string msg = error_message<MismatchError>([&] { dist::moe_dispatch(x, idx, w, experts(), comm()); });
    EXPECT_TRUE(mentions(msg, {"moe.dispatch", "failed their argument checks"})) << msg;
  }
}

TEST_F(MoeErrorTest, DisagreementsRaiseOnEveryRank) {
  SXD_REQUIRE_WS2();
  Tensor wide = Tensor::zeros({3, 4 + rank()}, DType::Float64);
  std::string msg = error_message<MismatchError>([&] { dist::moe_dispatch(wide, idx, w, experts(), comm()); });
  EXPECT_TRUE(mentions(msg, {"same hidden size", "rank 1: 5"})) << msg;
  dist::MoeOptions options;
  options.pad_to_multiple = 1 + rank();
  msg = error_message<MismatchError>([&] { dist::moe_dispatch(x, idx, w, experts(), comm(), options); });
  EXPECT_TRUE(mentions(msg, {"same pad_to_multiple"})) << msg;
  msg = error_message<MismatchError>([&] { dist::moe_dispatch(x, idx, w, experts() + 2 * rank() * ws(), comm()); });
  EXPECT_TRUE(mentions(msg, {"same num_experts"})) << msg;
}

TEST_F(MoeErrorTest, ArgumentErrorsNameTheArgument) {
  SXD_REQUIRE_WS2();  // with one rank every num_experts divides
  std::string msg = error_message<ArgumentError>([&] { dist::moe_dispatch(x, idx, w, 2 * ws() + 1, comm()); });
  EXPECT_TRUE(mentions(msg, {"num_experts to be a positive multiple", std::to_string(ws())})) << msg;
  idx.data_as<int64_t>()[5] = experts();
  msg = error_message<scatterx::IndexError>([&] { dist::moe_dispatch(x, idx, w, experts(), comm()); });
  EXPECT_TRUE(mentions(msg, {"topk_idx values in [0, " + std::to_string(experts()) + ")", "[2, 1]"})) << msg;
  idx.data_as<int64_t>()[5] = 1;
  Tensor short_w = Tensor::zeros({3, 1}, DType::Float64);
  msg = error_message<ArgumentError>([&] { dist::moe_dispatch(x, idx, short_w, experts(), comm()); });
  EXPECT_TRUE(mentions(msg, {"topk_weights of topk_idx's shape"})) << msg;
  Tensor ints = Tensor::zeros({3, 4}, DType::Int32);
  msg = error_message<DTypeError>([&] { dist::moe_dispatch(ints, idx, w, experts(), comm()); });
  EXPECT_TRUE(mentions(msg, {"x of a floating dtype", "int32"})) << msg;
  dist::MoeDispatch d = dist::moe_dispatch(x, idx, w, experts(), comm());
  Tensor bad = Tensor::zeros({d.recv_x.size(0) + 1, 4}, DType::Float64);
  msg = error_message<ArgumentError>([&] { dist::moe_combine(bad, *d.handle); });
  EXPECT_TRUE(mentions(msg, {"moe.combine: expected expert_out of recv_x's shape"})) << msg;
}

}  // namespace
}  // namespace sxd

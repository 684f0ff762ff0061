// A small expert-parallel MoE layer trained for a few SGD steps with
// dist/moe.h, under mpirun with any number of ranks:
//   router: logits = x Wr, p = softmax(logits), the top-k experts by p and
//           their probabilities as weights;
//   experts: linear, expert e maps a row v to v We (each expert lives on its
//            owning rank only);
//   loss = sum over ranks and tokens of c . y (c a fixed per-rank tensor).
// The backward is written by hand through moe_combine_backward and
// moe_dispatch_backward. Every step checks the output, the loss and every
// gradient against the same layer computed densely on one process in double
// (each rank rebuilds every rank's tokens), and the whole training is run
// twice to check that it is bit-identical. Exits nonzero on a mismatch.
// Then it times dispatch + combine alone at a larger size (float32).
//
//   mpirun -n 4 build/release/examples/scatterx_moe_layer
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "dist/moe.h"

namespace dist = scatterx::dist;
using scatterx::DType;
using scatterx::Tensor;
using scatterx::TensorView;
using Mat = std::vector<double>;  // row-major

namespace {

constexpr int64_t kHidden = 8, kExpertsPerRank = 2, kTopK = 2, kTokens = 12, kSteps = 3;
constexpr double kLr = 0.1;

// out[n, m] = a[n, :] . b[:, m], with a [n, k] (or a^T when ta) and b [k, m] (or b^T when tb).
Mat matmul(const Mat& a, const Mat& b, int64_t n, int64_t k, int64_t m, bool ta = false, bool tb = false) {
  Mat out(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += (ta ? a[l * n + i] : a[i * k + l]) * (tb ? b[j * k + l] : b[l * m + j]);
      out[i * m + j] = s;
    }
  return out;
}

Mat random_mat(std::mt19937_64& gen, int64_t n, double scale) {
  std::uniform_real_distribution<double> u(-scale, scale);
  Mat m(static_cast<size_t>(n));
  for (double& v : m) v = u(gen);
  return m;
}

struct Inputs {
  Mat x, c;  // [T, H] each
};
Inputs inputs_of(int r) {
  std::mt19937_64 gen(1000 + r);
  return {random_mat(gen, kTokens * kHidden, 1.0), random_mat(gen, kTokens * kHidden, 1.0)};
}

// The router's forward for rows x: probabilities [T, E], top-k ids and weights [T, k].
struct Routing {
  Mat p;
  std::vector<int64_t> idx;
  Mat w;
};
Routing route(const Mat& x, const Mat& wr, int64_t experts) {
  Routing r;
  r.p = matmul(x, wr, kTokens, kHidden, experts);
  for (int64_t t = 0; t < kTokens; ++t) {
    double* row = &r.p[t * experts];
    const double top = *std::max_element(row, row + experts);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += row[e] = std::exp(row[e] - top);
    for (int64_t e = 0; e < experts; ++e) row[e] /= sum;
    std::vector<int64_t> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t s = 0; s < kTopK; ++s) {
      r.idx.push_back(order[s]);
      r.w.push_back(row[order[s]]);
    }
  }
  return r;
}

// The router's backward: from d loss / d weights [T, k] to d loss / d logits [T, E].
Mat router_backward(const Routing& r, const Mat& grad_w, int64_t experts) {
  Mat g(static_cast<size_t>(kTokens * experts), 0.0);
  for (int64_t t = 0; t < kTokens; ++t) {
    Mat gp(static_cast<size_t>(experts), 0.0);
    for (int64_t s = 0; s < kTopK; ++s) gp[r.idx[t * kTopK + s]] += grad_w[t * kTopK + s];
    double dot = 0;
    for (int64_t e = 0; e < experts; ++e) dot += gp[e] * r.p[t * experts + e];
    for (int64_t e = 0; e < experts; ++e) g[t * experts + e] = r.p[t * experts + e] * (gp[e] - dot);
  }
  return g;
}

// One step's results on this rank: y, the loss, d loss / d x, d loss / d Wr
// (summed over ranks) and d loss / d We of this rank's experts.
struct Step {
  Mat y, grad_x, grad_wr;
  std::vector<Mat> grad_we;
  double loss = 0;
};

Tensor tensor_of(Mat& m, int64_t rows, int64_t cols) {
  return Tensor::adopt(TensorView(m.data(), DType::Float64, {rows, cols}), nullptr);
}
Mat mat_of(const TensorView& t) {
  const auto* p = static_cast<const double*>(t.data());
  return Mat(p, p + t.numel());
}

Step distributed_step(const dist::Communicator& comm, Inputs& in, const Mat& wr, const std::vector<Mat>& we) {
  const int64_t experts = kExpertsPerRank * comm.size();
  Routing r = route(in.x, wr, experts);
  Tensor idx = Tensor::empty({kTokens, kTopK}, DType::Int64);
  std::copy(r.idx.begin(), r.idx.end(), idx.data_as<int64_t>());
  dist::MoeDispatch d =
      dist::moe_dispatch(tensor_of(in.x, kTokens, kHidden), idx, tensor_of(r.w, kTokens, kTopK), experts, comm);
  // Each local expert on its group of recv_x rows.
  const Mat recv = mat_of(d.recv_x);
  const auto* sizes = d.tokens_per_expert.data_as<int64_t>();
  Mat out(recv.size());
  for (int64_t e = 0, row = 0; e < kExpertsPerRank; row += sizes[e++]) {
    const Mat part(recv.begin() + row * kHidden, recv.begin() + (row + sizes[e]) * kHidden);
    const Mat o = matmul(part, we[comm.rank() * kExpertsPerRank + e], sizes[e], kHidden, kHidden);
    std::copy(o.begin(), o.end(), out.begin() + row * kHidden);
  }
  Tensor expert_out = tensor_of(out, d.recv_x.size(0), kHidden);
  Step s;
  s.y = mat_of(dist::moe_combine(expert_out, *d.handle));
  for (size_t i = 0; i < s.y.size(); ++i) s.loss += in.c[i] * s.y[i];
  dist::all_reduce(TensorView(&s.loss, DType::Float64, {}), dist::ReduceOp::Sum, comm);

  // Backward: d loss / d y = c.
  dist::MoeCombineGrads g = dist::moe_combine_backward(tensor_of(in.c, kTokens, kHidden), expert_out, *d.handle);
  const Mat grad_out = mat_of(g.grad_expert_out);
  Mat grad_recv(recv.size());
  for (int64_t e = 0, row = 0; e < kExpertsPerRank; row += sizes[e++]) {
    const Mat part(recv.begin() + row * kHidden, recv.begin() + (row + sizes[e]) * kHidden);
    const Mat go(grad_out.begin() + row * kHidden, grad_out.begin() + (row + sizes[e]) * kHidden);
    s.grad_we.push_back(matmul(part, go, kHidden, sizes[e], kHidden, /*ta=*/true));
    const Mat gr = matmul(go, we[comm.rank() * kExpertsPerRank + e], sizes[e], kHidden, kHidden, false, true);
    std::copy(gr.begin(), gr.end(), grad_recv.begin() + row * kHidden);
  }
  s.grad_x = mat_of(dist::moe_dispatch_backward(tensor_of(grad_recv, d.recv_x.size(0), kHidden), *d.handle));
  const Mat grad_logits = router_backward(r, mat_of(g.grad_topk_weights), experts);
  const Mat via_router = matmul(grad_logits, wr, kTokens, experts, kHidden, false, true);
  for (size_t i = 0; i < s.grad_x.size(); ++i) s.grad_x[i] += via_router[i];
  s.grad_wr = matmul(in.x, grad_logits, kHidden, kTokens, experts, /*ta=*/true);
  dist::all_reduce(tensor_of(s.grad_wr, kHidden, experts), dist::ReduceOp::Sum, comm);
  return s;
}

// The same step for every rank's tokens on one process: rank q's results in out[q].
std::vector<Step> dense_step(int world, std::vector<Inputs>& all, const Mat& wr, const std::vector<Mat>& we) {
  const int64_t experts = kExpertsPerRank * world;
  std::vector<Step> out(static_cast<size_t>(world));
  Mat grad_wr(static_cast<size_t>(kHidden * experts), 0.0);
  std::vector<Mat> grad_we(static_cast<size_t>(experts), Mat(static_cast<size_t>(kHidden * kHidden), 0.0));
  double loss = 0;
  for (int q = 0; q < world; ++q) {
    const Inputs& in = all[q];
    const Routing r = route(in.x, wr, experts);
    Step& s = out[q];
    s.y.assign(in.x.size(), 0.0);
    s.grad_x.assign(in.x.size(), 0.0);
    Mat grad_w(static_cast<size_t>(kTokens * kTopK), 0.0);
    for (int64_t t = 0; t < kTokens; ++t) {
      const Mat xt(in.x.begin() + t * kHidden, in.x.begin() + (t + 1) * kHidden);
      const Mat ct(in.c.begin() + t * kHidden, in.c.begin() + (t + 1) * kHidden);
      for (int64_t k = 0; k < kTopK; ++k) {
        const int64_t e = r.idx[t * kTopK + k];
        const double w = r.w[t * kTopK + k];
        const Mat o = matmul(xt, we[e], 1, kHidden, kHidden);
        const Mat back = matmul(ct, we[e], 1, kHidden, kHidden, false, true);
        for (int64_t h = 0; h < kHidden; ++h) {
          s.y[t * kHidden + h] += w * o[h];
          grad_w[t * kTopK + k] += ct[h] * o[h];
          s.grad_x[t * kHidden + h] += w * back[h];
          for (int64_t j = 0; j < kHidden; ++j) grad_we[e][h * kHidden + j] += xt[h] * w * ct[j];
        }
      }
    }
    for (size_t i = 0; i < s.y.size(); ++i) loss += in.c[i] * s.y[i];
    const Mat grad_logits = router_backward(r, grad_w, experts);
    const Mat via_router = matmul(grad_logits, wr, kTokens, experts, kHidden, false, true);
    for (size_t i = 0; i < s.grad_x.size(); ++i) s.grad_x[i] += via_router[i];
    const Mat gwr = matmul(in.x, grad_logits, kHidden, kTokens, experts, true);
    for (size_t i = 0; i < gwr.size(); ++i) grad_wr[i] += gwr[i];
  }
  for (int q = 0; q < world; ++q) {
    out[q].loss = loss;
    out[q].grad_wr = grad_wr;
    for (int64_t e = 0; e < kExpertsPerRank; ++e) out[q].grad_we.push_back(grad_we[q * kExpertsPerRank + e]);
  }
  return out;
}

double max_rel_diff(const Mat& a, const Mat& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  return worst;
}

// Trains kSteps steps; returns every result as bytes (for the bit comparison)
// and the worst relative difference from the dense layer.
struct Run {
  std::vector<double> bits;
  double worst = 0;
  double first_loss = 0, last_loss = 0;
};

Run train(const dist::Communicator& comm) {
  const int world = comm.size();
  const int64_t experts = kExpertsPerRank * world;
  std::mt19937_64 gen(7);  // the same initial weights on every rank
  Mat wr = random_mat(gen, kHidden * experts, 0.5);
  std::vector<Mat> we;
  for (int64_t e = 0; e < experts; ++e) we.push_back(random_mat(gen, kHidden * kHidden, 0.5));
  std::vector<Inputs> all;
  for (int q = 0; q < world; ++q) all.push_back(inputs_of(q));
  Run run;
  for (int64_t step = 0; step < kSteps; ++step) {
    const Step s = distributed_step(comm, all[comm.rank()], wr, we);
    const Step ref = dense_step(world, all, wr, we)[comm.rank()];
    run.worst = std::max({run.worst, max_rel_diff(s.y, ref.y), max_rel_diff(s.grad_x, ref.grad_x),
                          max_rel_diff(s.grad_wr, ref.grad_wr), max_rel_diff({s.loss}, {ref.loss})});
    for (int64_t e = 0; e < kExpertsPerRank; ++e)
      run.worst = std::max(run.worst, max_rel_diff(s.grad_we[e], ref.grad_we[e]));
    for (const Mat* m : {&s.y, &s.grad_x, &s.grad_wr}) run.bits.insert(run.bits.end(), m->begin(), m->end());
    for (const Mat& m : s.grad_we) run.bits.insert(run.bits.end(), m.begin(), m.end());
    run.bits.push_back(s.loss);
    (step == 0 ? run.first_loss : run.last_loss) = s.loss;
    // SGD: the router on every rank (its gradient is all-reduced), each expert on its owner only.
    for (size_t i = 0; i < wr.size(); ++i) wr[i] -= kLr * s.grad_wr[i];
    for (int64_t e = 0; e < kExpertsPerRank; ++e) {
      Mat& w = we[comm.rank() * kExpertsPerRank + e];
      for (size_t i = 0; i < w.size(); ++i) w[i] -= kLr * s.grad_we[e][i];
    }
    // The dense reference needs every expert: each owner broadcasts its updated ones.
    for (int64_t e = 0; e < experts; ++e)
      dist::broadcast(tensor_of(we[e], kHidden, kHidden), static_cast<int>(e / kExpertsPerRank), comm);
  }
  return run;
}

}  // namespace

// Median seconds of one moe_dispatch + moe_combine (identity experts) of
// `tokens` x `hidden` float32 rows per rank, each token to kTopK distinct experts.
double dispatch_combine_seconds(const dist::Communicator& comm, int64_t tokens, int64_t hidden) {
  const int64_t experts = kExpertsPerRank * comm.size();
  std::mt19937_64 rng(static_cast<uint64_t>(comm.rank()) + 7);
  Tensor x = Tensor::empty({tokens, hidden}, DType::Float32);
  Tensor idx = Tensor::empty({tokens, kTopK}, DType::Int64);
  Tensor weights = Tensor::empty({tokens, kTopK}, DType::Float32);
  std::uniform_real_distribution<float> uniform(0.f, 1.f);
  auto* xp = static_cast<float*>(x.data());
  for (int64_t i = 0; i < tokens * hidden; ++i) xp[i] = uniform(rng);
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t j = 0; j < kTopK; ++j) {
      static_cast<int64_t*>(idx.data())[t * kTopK + j] = order[static_cast<size_t>(j)];
      static_cast<float*>(weights.data())[t * kTopK + j] = uniform(rng);
    }
  }
  std::vector<double> times;
  for (int rep = 0; rep < 6; ++rep) {  // the first warms the buffers up
    int64_t together = 0;              // a barrier: every rank starts the timed call at once
    dist::all_reduce(TensorView(&together, DType::Int64, {}), dist::ReduceOp::Sum, comm);
    const auto start = std::chrono::steady_clock::now();
    const dist::MoeDispatch d = dist::moe_dispatch(x, idx, weights, experts, comm);
    const Tensor y = dist::moe_combine(d.recv_x, *d.handle);
    if (rep > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int main() {
  const dist::Communicator comm = dist::Communicator::world();
  const Run a = train(comm);
  const Run b = train(comm);
  const bool same =
      a.bits.size() == b.bits.size() && std::memcmp(a.bits.data(), b.bits.data(), a.bits.size() * sizeof(double)) == 0;
  double worst = std::max(a.worst, b.worst);
  int failed = (worst < 1e-12 && same) ? 0 : 1;
  dist::all_reduce(TensorView(&worst, DType::Float64, {}), dist::ReduceOp::Max, comm);
  dist::all_reduce(TensorView(&failed, DType::Int32, {}), dist::ReduceOp::Max, comm);
  if (comm.rank() == 0) {
    std::printf("moe_layer: %d ranks, %lld tokens/rank, %lld experts, top-%lld, %lld SGD steps: loss %.6f -> %.6f\n",
                comm.size(), static_cast<long long>(kTokens), static_cast<long long>(kExpertsPerRank * comm.size()),
                static_cast<long long>(kTopK), static_cast<long long>(kSteps), a.first_loss, a.last_loss);
    std::printf(
        "vs the dense float64 layer: max relative difference %.2e (output, loss, every gradient); "
        "two runs bit-identical: %s\n%s\n",
        worst, same ? "yes" : "no", failed ? "FAILED" : "OK");
  }
  const int64_t tokens = 4096, hidden = 1024;
  const double seconds = dispatch_combine_seconds(comm, tokens, hidden);
  if (comm.rank() == 0) {
    std::printf(
        "dispatch + combine of %lld tokens x %lld float32 per rank: %.1f ms (median of 5), %.2f M tokens/s "
        "over all ranks\n",
        static_cast<long long>(tokens), static_cast<long long>(hidden), seconds * 1e3,
        static_cast<double>(tokens * comm.size()) / seconds / 1e6);
  }
  return failed;
}

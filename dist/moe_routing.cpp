#include "dist/moe_routing.h"

#include <cmath>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>

#include "dist/agreement.h"
#include "ops/dispatch.h"
#include "ops/error.h"

namespace scatterx::dist::moe_detail {
namespace {

constexpr const char* kOp = "moe.dispatch";

bool is_moe_dtype(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}

// v as a value of type T, rounded as torch's .to(dtype) rounds (16-bit types
// through float, as c10::Half and c10::BFloat16 convert).
template <typename T>
T round_to(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return T(static_cast<float>(v));
  }
}

// Element [t, s] of a 2-d index or floating view, any strides.
int64_t index_at(const TensorView& v, int64_t t, int64_t s) {
  const int64_t off = t * v.stride(0) + s * v.stride(1);
  return v.dtype() == DType::Int32 ? static_cast<const int32_t*>(v.data())[off]
                                   : static_cast<const int64_t*>(v.data())[off];
}

std::vector<double> floats_of(const TensorView& v) {
  std::vector<double> out(static_cast<size_t>(v.numel()));
  dispatch_dtype(v.dtype(), kOp, [&](auto tag) {
    using T = CppType<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      const T* p = static_cast<const T*>(v.data());
      const int64_t k = v.size(1);
      for (int64_t t = 0; t < v.size(0); ++t)
        for (int64_t s = 0; s < k; ++s) out[t * k + s] = static_cast<double>(p[t * v.stride(0) + s * v.stride(1)]);
    }
  });
  return out;
}

// This rank's argument errors, in the order moe.dispatch documents them.
void check_local(const TensorView& x, const TensorView& idx, const TensorView& w, int64_t num_experts, int world,
                 const MoeOptions& options) {
  SCATTERX_CHECK(x.dim() == 2, ArgumentError, kOp, "expected x to be a 2-d tensor [tokens, hidden], got shape ",
                 x.sizes().str());
  SCATTERX_CHECK(is_moe_dtype(x.dtype()), DTypeError, kOp, "expected x of a floating dtype, got ",
                 dtype_name(x.dtype()));
  SCATTERX_CHECK(idx.dim() == 2 && idx.size(0) == x.size(0), ArgumentError, kOp,
                 "expected topk_idx to be a 2-d tensor [tokens=", x.size(0), ", k], got shape ", idx.sizes().str());
  SCATTERX_CHECK(idx.dtype() == DType::Int32 || idx.dtype() == DType::Int64, DTypeError, kOp,
                 "expected topk_idx of dtype int32 or int64, got ", dtype_name(idx.dtype()));
  SCATTERX_CHECK(w.sizes() == idx.sizes(), ArgumentError, kOp, "expected topk_weights of topk_idx's shape ",
                 idx.sizes().str(), ", got ", w.sizes().str());
  SCATTERX_CHECK(is_moe_dtype(w.dtype()), DTypeError, kOp, "expected topk_weights of a floating dtype, got ",
                 dtype_name(w.dtype()));
  SCATTERX_CHECK(x.device().is_cpu() && idx.device().is_cpu() && w.device().is_cpu(), ArgumentError, kOp,
                 "expected x, topk_idx and topk_weights on the cpu, got ", x.device().str(), ", ", idx.device().str(),
                 ", ", w.device().str());
  SCATTERX_CHECK(num_experts > 0 && num_experts % world == 0, ArgumentError, kOp,
                 "expected num_experts to be a positive multiple of the group size (", world, "), got ", num_experts);
  SCATTERX_CHECK(!options.capacity_factor || *options.capacity_factor > 0, ArgumentError, kOp,
                 "expected capacity_factor to be None or > 0, got ", options.capacity_factor.value_or(0));
  SCATTERX_CHECK(options.pad_to_multiple >= 1, ArgumentError, kOp, "expected pad_to_multiple to be an int >= 1, got ",
                 options.pad_to_multiple);
  const int64_t k = idx.size(1);
  for (int64_t t = 0; t < idx.size(0); ++t) {
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = index_at(idx, t, s);
      SCATTERX_CHECK(e >= 0 && e < num_experts, IndexError, kOp, "expected topk_idx values in [0, ", num_experts,
                     "), got ", e, " at topk_idx position [", t, ", ", s, "]");
    }
  }
  for (int64_t t = 0; t < idx.size(0); ++t) {
    for (int64_t s = 1; s < k; ++s) {
      for (int64_t u = 0; u < s; ++u) {
        if (index_at(idx, t, s) != index_at(idx, t, u)) continue;
        std::ostringstream row;
        for (int64_t j = 0; j < k; ++j) row << (j ? ", " : "[") << index_at(idx, t, j);
        detail::raise<ArgumentError>(kOp, "expected distinct experts in each row of topk_idx, got row ", t, " = ",
                                     row.str(), "]");
      }
    }
  }
}

using agreement::gather_records;

constexpr int64_t kFields = 7;

}  // namespace

void agree_as_failed(const Communicator& comm) {
  std::vector<int64_t> mine(kFields, -1);
  mine[0] = 1;
  gather_records(mine, comm);
}

void check_and_agree(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights,
                     int64_t num_experts, const Communicator& comm, const MoeOptions& options) {
  const int world = comm.size();
  std::exception_ptr problem;
  try {
    check_local(x, topk_idx, topk_weights, num_experts, world, options);
  } catch (const Error&) {
    problem = std::current_exception();
  }
  const bool ok = !problem;
  // The same fields moe.py compared: a failed rank sends -1 where it has no value.
  const std::vector<int64_t> mine = {ok ? 0 : 1,
                                     num_experts,
                                     ok ? topk_idx.size(1) : -1,
                                     ok ? x.size(1) : -1,
                                     ok ? static_cast<int64_t>(x.dtype()) : -1,
                                     options.capacity_factor ? std::llround(*options.capacity_factor * 1e6) : -1,
                                     options.pad_to_multiple};
  const std::vector<int64_t> every = gather_records(mine, comm);
  if (problem) std::rethrow_exception(problem);
  const char* names[] = {"num_experts", "k", "hidden size", "x dtype", "capacity_factor", "pad_to_multiple"};
  agreement::raise_mismatches(kOp, every, world, [&](int64_t i) { return std::string(names[i - 1]); });
}

SendPlan plan_sends(const TensorView& topk_idx, const TensorView& topk_weights, DType x_dtype, int64_t num_experts,
                    int world, const MoeOptions& options) {
  const int64_t tokens = topk_idx.size(0);
  const int64_t k = topk_idx.size(1);
  const int64_t local = num_experts / world;
  // kept[t * k + s]: the pair is within its expert's capacity (token, then slot order).
  std::vector<char> kept(static_cast<size_t>(tokens * k), 1);
  if (options.capacity_factor) {
    const auto capacity = static_cast<int64_t>(std::ceil(*options.capacity_factor * static_cast<double>(tokens) *
                                                         static_cast<double>(k) / static_cast<double>(num_experts)));
    std::vector<int64_t> taken(static_cast<size_t>(num_experts), 0);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t s = 0; s < k; ++s) kept[t * k + s] = taken[index_at(topk_idx, t, s)]++ < capacity;
  }
  // A token goes to rank d when one of its kept pairs lives there; count, then
  // place rows rank-major, token-minor (a counting sort over tokens in order).
  SendPlan plan;
  plan.send_splits.assign(static_cast<size_t>(world), 0);
  auto goes = [&](int64_t t, int64_t s) {  // the destination of slot s if it is its token's first kept one there
    if (!kept[t * k + s]) return -1;
    const int64_t d = index_at(topk_idx, t, s) / local;
    for (int64_t u = 0; u < s; ++u)
      if (kept[t * k + u] && index_at(topk_idx, t, u) / local == d) return -1;
    return static_cast<int>(d);
  };
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t s = 0; s < k; ++s)
      if (int d = goes(t, s); d >= 0) ++plan.send_splits[d];
  std::vector<int64_t> next(static_cast<size_t>(world), 0);
  for (int d = 1; d < world; ++d) next[d] = next[d - 1] + plan.send_splits[d - 1];
  const int64_t rows = next[world - 1] + plan.send_splits[world - 1];
  plan.sent_token = Tensor::empty({rows}, DType::Int64);
  plan.meta = Tensor::empty({rows, 2 * k}, DType::Int64);
  auto* token = plan.sent_token.data_as<int64_t>();
  auto* meta = plan.meta.data_as<int64_t>();
  const std::vector<double> weights = floats_of(topk_weights);
  dispatch_dtype(x_dtype, kOp, [&](auto tag) {
    using T = CppType<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t s = 0; s < k; ++s) {
          const int d = goes(t, s);
          if (d < 0) continue;
          const int64_t p = next[d]++;
          token[p] = t;
          int64_t* ids = meta + p * 2 * k;
          for (int64_t u = 0; u < k; ++u) {
            const int64_t e = index_at(topk_idx, t, u);
            const bool here = kept[t * k + u] && e / local == d;
            ids[u] = here ? e % local : -1;
            const double w = here ? static_cast<double>(round_to<T>(weights[t * k + u])) : 0.0;
            std::memcpy(ids + k + u, &w, sizeof w);
          }
        }
      }
    }
  });
  return plan;
}

void plan_groups(const TensorView& recv_meta, int64_t local_experts, int64_t pad_to_multiple, MoeHandle& h) {
  const int64_t received = recv_meta.size(0);
  const int64_t k = h.k;
  const auto* meta = static_cast<const int64_t*>(recv_meta.data());
  h.kept_per_expert = Tensor::zeros({local_experts}, DType::Int64);
  h.tokens_per_expert = Tensor::empty({local_experts}, DType::Int64);
  auto* kept = h.kept_per_expert.data_as<int64_t>();
  auto* padded = h.tokens_per_expert.data_as<int64_t>();
  for (int64_t r = 0; r < received; ++r)
    for (int64_t s = 0; s < k; ++s)
      if (meta[r * 2 * k + s] >= 0) ++kept[meta[r * 2 * k + s]];
  // Pair slots are packed (pairs of expert e before e + 1); recv_x rows leave room for padding.
  std::vector<int64_t> next_pair(static_cast<size_t>(local_experts)), next_row(static_cast<size_t>(local_experts));
  int64_t pairs = 0;
  h.rows = 0;
  for (int64_t e = 0; e < local_experts; ++e) {
    padded[e] = (kept[e] + pad_to_multiple - 1) / pad_to_multiple * pad_to_multiple;
    next_pair[e] = pairs;
    next_row[e] = h.rows;
    pairs += kept[e];
    h.rows += padded[e];
  }
  h.expert_row = Tensor::empty({pairs}, DType::Int64);
  h.received_row = Tensor::empty({pairs}, DType::Int64);
  h.received_slot = Tensor::empty({pairs}, DType::Int64);
  h.weight = Tensor::empty({pairs}, h.dtype);
  auto* expert_row = h.expert_row.data_as<int64_t>();
  auto* received_row = h.received_row.data_as<int64_t>();
  auto* received_slot = h.received_slot.data_as<int64_t>();
  dispatch_dtype(h.dtype, kOp, [&](auto tag) {
    using T = CppType<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* weight = h.weight.data_as<T>();
      for (int64_t r = 0; r < received; ++r) {
        for (int64_t s = 0; s < k; ++s) {
          const int64_t e = meta[r * 2 * k + s];
          if (e < 0) continue;
          const int64_t i = next_pair[e]++;
          expert_row[i] = next_row[e]++;
          received_row[i] = r;
          received_slot[i] = r * k + s;
          double w;
          std::memcpy(&w, meta + r * 2 * k + k + s, sizeof w);
          weight[i] = round_to<T>(w);
        }
      }
    }
  });
}

}  // namespace scatterx::dist::moe_detail

// The sharding helpers, the dense gradient and the fused optimizer steps of
// dist/embedding_bag.h: each runs on one rank's shard, no communication.
#include <algorithm>
#include <cmath>

#include "dist/embedding_bag.h"
#include "dist/embedding_routing.h"
#include "ops/error.h"
#include "ops/runtime/parallel.h"
#include "ops/scatter/scatter.h"

namespace scatterx::dist {
namespace {

using embedding_detail::with_float;

void check_update(const char* op, const TensorView& shard, const TensorView& row_ids, const TensorView& rows) {
  SCATTERX_CHECK(
      shard.dim() == 2 && (shard.dtype() == DType::Float32 || shard.dtype() == DType::Float64) && shard.is_contiguous(),
      ArgumentError, op, "expected a contiguous float32 or float64 2-d weight shard, got ", shard.str());
  SCATTERX_CHECK(row_ids.dim() == 1 && row_ids.dtype() == DType::Int64 && row_ids.is_contiguous(), ArgumentError, op,
                 "expected row_ids to be contiguous 1-d int64, got ", row_ids.str());
  SCATTERX_CHECK(rows.dim() == 2 && rows.size(0) == row_ids.size(0) && rows.size(1) == shard.size(1) &&
                     rows.dtype() == shard.dtype() && rows.is_contiguous(),
                 ArgumentError, op, "expected rows contiguous [", row_ids.size(0), ", ", shard.size(1), "] ",
                 dtype_name(shard.dtype()), ", got ", rows.str());
  const auto* ids = row_ids.data_as<int64_t>();
  for (int64_t i = 0; i < row_ids.size(0); ++i)
    SCATTERX_CHECK(ids[i] >= 0 && ids[i] < shard.size(0) && (i == 0 || ids[i] > ids[i - 1]), IndexError, op,
                   "expected ascending distinct row_ids in [0, ", shard.size(0), "), got ", ids[i], " at position ", i);
}

}  // namespace

std::vector<int64_t> row_wise_starts(int64_t num_embeddings, int world) {
  SCATTERX_CHECK(num_embeddings >= 0 && world >= 1, ArgumentError, embedding_detail::kOp,
                 "expected num_embeddings >= 0, got ", num_embeddings);
  const int64_t block = (num_embeddings + world - 1) / world;
  std::vector<int64_t> starts(static_cast<size_t>(world + 1));
  for (int r = 0; r <= world; ++r) starts[r] = std::min<int64_t>(r * block, num_embeddings);
  return starts;
}

std::vector<int64_t> table_wise_starts(int64_t num_embeddings, int world, int owner) {
  SCATTERX_CHECK(owner >= 0 && owner < world, ArgumentError, embedding_detail::kOp, "expected an owner rank in [0, ",
                 world, "), got ", owner);
  std::vector<int64_t> starts(static_cast<size_t>(world + 1), 0);
  for (int r = owner + 1; r <= world; ++r) starts[r] = num_embeddings;
  return starts;
}

Tensor embedding_dense_grad(const TensorView& row_ids, const TensorView& rows, int64_t shard_rows) {
  Tensor out = Tensor::zeros({shard_rows, rows.size(1)}, rows.dtype());
  index_add_(out, 0, row_ids, rows);  // distinct ids: each row written once
  return out;
}

void embedding_sgd_update(const TensorView& shard, const TensorView& row_ids, const TensorView& rows, double lr) {
  check_update("ShardedEmbeddingBag.sgd_update", shard, row_ids, rows);
  const int64_t D = shard.size(1);
  const auto* ids = row_ids.data_as<int64_t>();
  with_float(shard.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* w = static_cast<T*>(shard.data());
    const T* g = static_cast<const T*>(rows.data());
    const T step = static_cast<T>(lr);
    detail::parallel_for(row_ids.size(0), 256, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t d = 0; d < D; ++d) w[ids[i] * D + d] -= step * g[i * D + d];
    });
  });
}

void embedding_adagrad_update(const TensorView& shard, const TensorView& state_sum, const TensorView& row_ids,
                              const TensorView& rows, double lr, double eps) {
  const char* op = "ShardedEmbeddingBag.adagrad_update";
  check_update(op, shard, row_ids, rows);
  SCATTERX_CHECK(state_sum.sizes() == shard.sizes() && state_sum.dtype() == shard.dtype() && state_sum.is_contiguous(),
                 ArgumentError, op, "expected state_sum of the shard's shape and dtype, contiguous, got ",
                 state_sum.str());
  const int64_t D = shard.size(1);
  const auto* ids = row_ids.data_as<int64_t>();
  with_float(shard.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* w = static_cast<T*>(shard.data());
    T* s = static_cast<T*>(state_sum.data());
    const T* g = static_cast<const T*>(rows.data());
    const T step = static_cast<T>(lr);
    const T e = static_cast<T>(eps);
    detail::parallel_for(row_ids.size(0), 256, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        for (int64_t d = 0; d < D; ++d) {
          const int64_t k = ids[i] * D + d;
          const T gi = g[i * D + d];
          s[k] += gi * gi;
          w[k] -= step * (gi / (std::sqrt(s[k]) + e));  // as torch: param.addcdiv_(g, std, -lr)
        }
      }
    });
  });
}

}  // namespace scatterx::dist

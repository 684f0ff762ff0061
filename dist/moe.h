// Expert-parallel MoE token routing: moe_dispatch sends each token to the
// ranks that own its chosen experts, moe_combine brings the experts' outputs
// back weighted by the router; the *_backward functions are their transposes,
// for a hand-written (or autograd) backward pass.
//
// Contract
// - Ownership: with E experts over a communicator of W ranks (E divisible by
//   W), rank r owns experts r*E/W .. (r+1)*E/W - 1, its local experts
//   0 .. E/W - 1.
// - Inputs (CPU): x [T, H] float16/bfloat16/float32/float64 (T may be 0, any
//   strides); topk_idx [T, k] int32/int64, k >= 1, ids in [0, E) and distinct
//   within a row; topk_weights [T, k] floating, cast to x's dtype.
// - What moves: a token crosses to a rank once however many of its experts
//   live there (rows ordered by destination rank, then token), with its k
//   local expert ids and weights beside it in one small message; on the way
//   back each rank first folds the weighted outputs of its local experts for
//   a token, so again one row per token and rank crosses.
// - recv_x [rows, H]: the received tokens grouped by local expert, within an
//   expert by source rank, then token; each group padded with zero rows to a
//   multiple of pad_to_multiple. tokens_per_expert [E/W] int64 holds each
//   group's rows, padding included (the sizes a grouped GEMM takes).
// - Capacity: with capacity_factor c each expert keeps at most
//   ceil(c * T * k / E) (token, slot) pairs from each source rank (T that
//   rank's count), taken in token order, then slot order; later pairs are
//   dropped: they add 0 to the combined output and get no gradient. Without
//   c nothing is dropped.
// - moe_combine: y[t] = sum over t's kept (expert, weight) pairs of weight *
//   expert_out[row of (t, expert)]; padding rows of expert_out are ignored.
// - Deterministic: every fold runs in a fixed order (gather_scatter,
//   gather_dot), so results are bit-identical across runs and thread counts.
// - Collective: every rank of the communicator calls each function, in the
//   same order. Errors: a rank's own bad argument raises ArgumentError,
//   DTypeError or IndexError there ("moe.dispatch: expected ..., got ...")
//   and MismatchError on the other ranks; ranks that disagree on
//   num_experts, k, the hidden size, x's dtype or the options all raise
//   MismatchError. The checks run before any token moves, so nobody waits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "dist/dist.h"
#include "ops/tensor.h"

namespace scatterx::dist {

struct MoeOptions {
  // > 0 when set: the per-expert, per-source-rank capacity factor (above).
  std::optional<double> capacity_factor;
  // >= 1: each expert's group of recv_x rows is padded to a multiple of it.
  int64_t pad_to_multiple = 1;
};

// What combine and the backward functions need from dispatch. Opaque to users
// (the fields are for the implementation and the bindings).
struct MoeHandle {
  explicit MoeHandle(Communicator c) : comm(std::move(c)) {}
  Communicator comm;
  int64_t tokens = 0;    // T on this rank
  int64_t hidden = 0;    // H
  int64_t k = 0;         // experts per token
  int64_t received = 0;  // R: token rows received (before expansion into groups)
  DType dtype = DType::Float32;
  std::vector<int64_t> send_splits;  // token rows sent to each rank
  std::vector<int64_t> recv_splits;  // token rows received from each rank
  Tensor sent_token;                 // [P] int64: the token of each row sent
  Tensor sent_rows;                  // [P] int64: 0 .. P-1
  // The kept (token, expert) pairs received, in recv_x order: the recv_x row
  // (expert_row), the received row it copies (received_row), the flat slot
  // row * k + slot of its weight among the received ones, and the weight.
  Tensor expert_row, received_row, received_slot, weight;
  Tensor tokens_per_expert;  // [E/W] int64, padding included
  Tensor kept_per_expert;    // [E/W] int64, real pairs only
  int64_t rows = 0;          // rows of recv_x, padding included
};

struct MoeDispatch {
  Tensor recv_x;             // [rows, H] in x's dtype
  Tensor tokens_per_expert;  // [E/W] int64 (a copy; the handle keeps its own)
  std::shared_ptr<const MoeHandle> handle;
};

MoeDispatch moe_dispatch(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights,
                         int64_t num_experts, const Communicator& comm, const MoeOptions& options = {});

// y [T, H] in expert_out's dtype; expert_out is recv_x's shape and dtype.
Tensor moe_combine(const TensorView& expert_out, const MoeHandle& handle);

// grad_x [T, H] from grad_recv_x [rows, H]: each token's gradient summed over
// its recv_x rows (padding rows ignored).
Tensor moe_dispatch_backward(const TensorView& grad_recv_x, const MoeHandle& handle);

// From grad_y [T, H] and the expert_out combine was given: grad_expert_out
// [rows, H] (0 on padding rows) and grad_topk_weights [T, k] in x's dtype (0
// for dropped pairs).
struct MoeCombineGrads {
  Tensor grad_expert_out;
  Tensor grad_topk_weights;
};
MoeCombineGrads moe_combine_backward(const TensorView& grad_y, const TensorView& expert_out, const MoeHandle& handle);

}  // namespace scatterx::dist

// The routing behind moe_dispatch (dist/moe.h), apart from the data movement:
// the argument checks and the ranks' agreement, the send plan (which token
// rows go to which rank, with their local expert ids and weights), and the
// receive plan (which received row lands in which expert group row).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/moe.h"

namespace scatterx::dist::moe_detail {

// Checks this rank's arguments, then all-gathers a small record so that every
// rank learns whether every rank passed and whether they agree on the shared
// settings. Throws this rank's own error, or MismatchError, on every rank.
void check_and_agree(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights,
                     int64_t num_experts, const Communicator& comm, const MoeOptions& options);

// For a front end (the Python bindings) whose own checks failed before it
// could call moe_dispatch: takes part in check_and_agree's exchange as a
// failed rank, so that the peers raise MismatchError; returns normally.
void agree_as_failed(const Communicator& comm);

// The rows a rank sends: one per (destination rank, token) with at least one
// kept pair there, ordered by rank, then token. meta [P, 2k] int64 carries,
// per row, the k local expert ids on the destination (-1: none) and the k
// weights (rounded to x's dtype, then stored as float64 bits; 0 where no id).
struct SendPlan {
  std::vector<int64_t> send_splits;
  Tensor sent_token;  // [P] int64
  Tensor meta;        // [P, 2k] int64
};
SendPlan plan_sends(const TensorView& topk_idx, const TensorView& topk_weights, DType x_dtype, int64_t num_experts,
                    int world, const MoeOptions& options);

// From the received meta [R, 2k]: the kept pairs in recv_x order (grouped by
// local expert, stable in (row, slot) order) and the group sizes. Fills the
// handle's expert_row, received_row, received_slot, weight (x's dtype),
// tokens_per_expert, kept_per_expert and rows.
void plan_groups(const TensorView& recv_meta, int64_t local_experts, int64_t pad_to_multiple, MoeHandle& handle);

}  // namespace scatterx::dist::moe_detail

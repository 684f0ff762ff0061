// The routing behind embedding_bag_forward (dist/embedding_bag.h), apart from
// the data movement: the argument checks and the ranks' agreement, the
// requests (which id goes to which owner, and which partial rows come back),
// and the owner's grouping of the received ids into partial bags.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/embedding_bag.h"

namespace scatterx::dist::embedding_detail {

constexpr const char* kOp = "ShardedEmbeddingBag";

// f(T{}) with T the C++ type of a float32 or float64 dtype (the only ones the
// embedding functions take; checked before any call).
template <typename F>
void with_float(DType dtype, F&& f) {
  if (dtype == DType::Float64) {
    f(double{});
  } else {
    f(float{});
  }
}

// Element i of a 1-d int32 or int64 view, any stride.
inline int64_t index_at(const TensorView& v, int64_t i) {
  const int64_t off = i * v.stride(0);
  return v.dtype() == DType::Int32 ? static_cast<const int32_t*>(v.data())[off]
                                   : static_cast<const int64_t*>(v.data())[off];
}

// Checks this rank's arguments, then all-gathers a small record so that every
// rank learns whether every rank passed and whether they agree on the shared
// settings. Throws this rank's own error, or MismatchError, on every rank.
void check_and_agree(const TensorView& shard, const TensorView& input, const TensorView& offsets,
                     const TensorView* per_sample_weights, const std::vector<int64_t>& row_starts, BagMode mode,
                     const Communicator& comm);

// For a front end whose own checks failed before it could call the forward:
// takes part in check_and_agree's exchange as a failed rank, so that the
// peers raise MismatchError; returns normally.
void agree_as_failed(const Communicator& comm);

// Fills the handle's requester fields (id_send_splits, sent_pos,
// part_recv_splits, part_bag, part_scale) and returns the message to the
// owners: [S, 2 or 3] int64 rows (local row, bag, weight as float64 bits),
// owner-major, in input position order within an owner.
Tensor plan_requests(const TensorView& input, const TensorView& offsets, const TensorView* per_sample_weights,
                     const std::vector<int64_t>& row_starts, EmbeddingBagHandle& handle);

// From the received message [R, 2 or 3]: fills recv_row, recv_part,
// recv_weight, part_send_splits and parts; returns the partials' CSR indptr
// [P + 1] int64 over the received ids.
Tensor plan_parts(const TensorView& received, EmbeddingBagHandle& handle);

// Position of each received id's row among the distinct rows received,
// ascending (a counting sort over the shard's rows); sets *distinct and
// fills *row_ids with those rows.
Tensor distinct_rows(const EmbeddingBagHandle& handle, Tensor* row_ids);

}  // namespace scatterx::dist::embedding_detail

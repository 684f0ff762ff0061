// Sharded embedding bags: torch.nn.EmbeddingBag over a table whose rows are
// spread over the ranks of a communicator. Each rank asks for the pooled rows
// of its own batch of bags; the ids go to the ranks that own their rows, are
// looked up and pooled there, and the partial bags come back to be finished.
// The *_backward function is the transpose; the *_update functions are fused
// SGD / Adagrad steps on a shard from the sparse gradient.
//
// Contract
// - Sharding: row_starts has W + 1 non-decreasing entries, row_starts[0] = 0
//   and row_starts[W] = num_embeddings; rank r owns the rows row_starts[r] ..
//   row_starts[r + 1] - 1, its shard [row_starts[r + 1] - row_starts[r], D].
//   row_wise_starts gives contiguous blocks of ceil(N / W) rows (the last
//   ones shorter, possibly empty); table_wise_starts puts all rows on one
//   rank (the others hold [0, D] shards).
// - Inputs (CPU): shard float32/float64 [rows, D] (any strides); input 1-d
//   int32/int64 ids in [0, num_embeddings); offsets 1-d int32/int64 [B]
//   (torch's convention: bag b is input[offsets[b] : offsets[b + 1]], the
//   last bag runs to the end; offsets[0] == 0, non-decreasing, <= len(input);
//   B == 0 only with an empty input); per_sample_weights null or [len(input)]
//   in the shard's dtype, mode Sum only (as torch).
// - Semantics as torch.nn.functional.embedding_bag: sum, mean (divided by the
//   bag's whole length, however many ranks its ids live on), max (per column,
//   exact); an empty bag gives zeros; duplicate ids count each time.
// - What moves: each id crosses once to its owner (local row, bag, weight:
//   2 or 3 int64 words); the owner pools the ids of each (source rank, bag)
//   into one partial row and sends it back (max also sends, per column, which
//   id won); the requester folds the partials of a bag in owner order. The
//   backward sends one gradient row per partial to the owner, which folds it
//   into its rows; with per-sample weights their gradient (one number per id)
//   comes back.
// - Deterministic: every fold runs in a fixed order (gather_scatter,
//   segment_csr_arg, gather_dot, loops in index order), so results are
//   bit-identical across runs and thread counts. Max ties go to the first
//   position in the bag, as torch's CPU kernel (NaN is not special-cased).
// - Collective: every rank calls each function, in the same order. Errors: a
//   rank's own bad argument raises ArgumentError, DTypeError or IndexError
//   there ("ShardedEmbeddingBag: expected ..., got ...") and MismatchError on
//   the other ranks; ranks that disagree on the sharding, D, the dtype, the
//   mode or whether per-sample weights are given all raise MismatchError.
//   The checks run before any id moves, so nobody waits.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "dist/dist.h"
#include "ops/tensor.h"

namespace scatterx::dist {

enum class BagMode : int { Sum = 0, Mean = 1, Max = 2 };

std::vector<int64_t> row_wise_starts(int64_t num_embeddings, int world);
std::vector<int64_t> table_wise_starts(int64_t num_embeddings, int world, int owner);

// What the backward needs from the forward. Opaque to users.
struct EmbeddingBagHandle {
  explicit EmbeddingBagHandle(Communicator c) : comm(std::move(c)) {}
  Communicator comm;
  BagMode mode = BagMode::Sum;
  DType dtype = DType::Float32;
  int64_t dim = 0;         // D
  int64_t bags = 0;        // B on this rank
  int64_t ids = 0;         // len(input) on this rank
  int64_t shard_rows = 0;  // rows of this rank's shard
  bool weighted = false;
  // Requester side: ids sent to each owner (owner-major, position order) and
  // the partial rows received from each owner (owner-major, bag order).
  std::vector<int64_t> id_send_splits, part_recv_splits;
  Tensor sent_pos;    // [S] int64: the input position of each id sent
  Tensor part_bag;    // [Q] int64: the bag of each partial received
  Tensor part_scale;  // [Q] dtype: 1 / bag length (mean only)
  Tensor win;         // [B, D] int64: the partial that won each column (max only; -1 none)
  // Owner side: ids received from each source and partials sent back.
  std::vector<int64_t> id_recv_splits, part_send_splits;
  Tensor recv_row;     // [R] int64: local row of each received id
  Tensor recv_part;    // [R] int64: the partial it was pooled into
  Tensor recv_weight;  // [R] dtype (weighted only)
  Tensor arg;          // [P, D] int64: received id that won each column (max only)
  int64_t parts = 0;   // P
};

struct EmbeddingBagForward {
  Tensor out;  // [B, D] in the shard's dtype
  std::shared_ptr<const EmbeddingBagHandle> handle;
};

EmbeddingBagForward embedding_bag_forward(const TensorView& shard, const TensorView& input, const TensorView& offsets,
                                          const TensorView* per_sample_weights, const std::vector<int64_t>& row_starts,
                                          BagMode mode, const Communicator& comm);

// The gradient in this rank's shard as coalesced sparse rows: row_ids [U]
// int64 local rows, ascending and distinct, rows [U, D]; and, when asked for
// and the forward had per-sample weights, their gradient [len(input)].
struct EmbeddingBagGrads {
  Tensor row_ids;
  Tensor rows;
  Tensor grad_per_sample_weights;  // empty unless requested
};
EmbeddingBagGrads embedding_bag_backward(const TensorView& grad_out, const TensorView& shard,
                                         const EmbeddingBagHandle& handle, bool per_sample_weights_grad);

// The dense [shard_rows, D] gradient: zeros with rows index_add_-ed at row_ids.
Tensor embedding_dense_grad(const TensorView& row_ids, const TensorView& rows, int64_t shard_rows);

// In place on the shard, for coalesced (distinct) row_ids as the backward
// gives them; rows outside row_ids are untouched. SGD: w -= lr * g. Adagrad
// (torch.optim.Adagrad without decay): s += g * g; w -= lr * g / (sqrt(s) + eps).
void embedding_sgd_update(const TensorView& shard, const TensorView& row_ids, const TensorView& rows, double lr);
void embedding_adagrad_update(const TensorView& shard, const TensorView& state_sum, const TensorView& row_ids,
                              const TensorView& rows, double lr, double eps);

}  // namespace scatterx::dist

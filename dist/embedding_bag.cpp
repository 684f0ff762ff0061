// embedding_bag_forward and embedding_bag_backward (dist/embedding_bag.h):
// each a short composition of the routing plans (embedding_routing.cpp),
// scatterx's row kernels (gather_scatter, index_select, segment_csr_arg,
// gather_dot) and all-to-alls. Max mode adds two small loops: the
// requester's choice among owners and the owner's per-column fold of the
// gradient into its winning rows.
#include <algorithm>
#include <memory>
#include <vector>

#include "dist/embedding_bag.h"
#include "dist/embedding_routing.h"
#include "ops/error.h"
#include "ops/gather/gather.h"
#include "ops/gather_scatter/gather_dot.h"
#include "ops/gather_scatter/gather_scatter.h"
#include "ops/segment/segment.h"

namespace scatterx::dist {
namespace {

using embedding_detail::kOp;
using embedding_detail::with_float;
Tensor iota(int64_t n) {
  Tensor t = Tensor::empty({n}, DType::Int64);
  for (int64_t i = 0; i < n; ++i) t.data_as<int64_t>()[i] = i;
  return t;
}

std::vector<int64_t> starts_of(const std::vector<int64_t>& splits) {
  std::vector<int64_t> s(splits.size(), 0);
  for (size_t i = 1; i < splits.size(); ++i) s[i] = s[i - 1] + splits[i - 1];
  return s;
}

// The requests to their owners: the counts first, then the rows into
// recycled memory (Tensor::empty's; all_to_all_v would receive them into
// fresh pages).
Tensor exchange_ids(const TensorView& meta, EmbeddingBagHandle& h) {
  const int world = h.comm.size();
  h.id_recv_splits.assign(static_cast<size_t>(world), 0);
  all_to_all_single(TensorView(h.id_recv_splits.data(), DType::Int64, {world}),
                    TensorView(h.id_send_splits.data(), DType::Int64, {world}), {}, {}, h.comm);
  int64_t received = 0;
  for (int64_t n : h.id_recv_splits) received += n;
  Tensor got = Tensor::empty({received, meta.size(1)}, DType::Int64);
  all_to_all_single(got, meta, h.id_recv_splits, h.id_send_splits, h.comm);
  return got;
}

// Max on the owner: each partial's columns and the received id that won each
// (block-relative: its position among the ids from that source), in h.arg.
Tensor pool_max(const TensorView& shard, const TensorView& indptr, EmbeddingBagHandle& h, Tensor* block_arg) {
  Tensor rows = index_select(shard, 0, h.recv_row);
  ValuesAndArgs va = segment_csr_arg(rows, indptr, Reduce::Amax);
  h.arg = va.args;
  *block_arg = Tensor::clone(va.args);
  const std::vector<int64_t> first = starts_of(h.id_recv_splits);
  auto* a = block_arg->data_as<int64_t>();
  const auto* ptr = indptr.data_as<int64_t>();
  for (int64_t p = 0, s = 0; p < h.parts; ++p) {
    while (ptr[p] >= first[s] + h.id_recv_splits[s]) ++s;  // the source block partial p lies in
    for (int64_t d = 0; d < h.dim; ++d) a[p * h.dim + d] -= first[s];
  }
  return va.values;
}

// Max on the requester: per (bag, column) the largest partial, ties to the
// smaller input position; fills h.win.
Tensor fold_max(const TensorView& parts, const TensorView& pos, EmbeddingBagHandle& h) {
  const int64_t D = h.dim;
  Tensor out = Tensor::zeros({h.bags, D}, h.dtype);
  h.win = Tensor::empty({h.bags, D}, DType::Int64);
  auto* win = h.win.data_as<int64_t>();
  std::fill(win, win + h.bags * D, -1);
  std::vector<int64_t> best_pos(static_cast<size_t>(h.bags * D), 0);
  const auto* bag = h.part_bag.data_as<int64_t>();
  const auto* p = static_cast<const int64_t*>(pos.data());
  with_float(h.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* v = static_cast<const T*>(parts.data());
    T* o = out.data_as<T>();
    for (int64_t q = 0; q < parts.size(0); ++q) {
      for (int64_t d = 0; d < D; ++d) {
        const int64_t k = bag[q] * D + d;
        const T x = v[q * D + d];
        if (win[k] < 0 || x > o[k] || (x == o[k] && p[q * D + d] < best_pos[k])) {
          o[k] = x;
          win[k] = q;
          best_pos[k] = p[q * D + d];
        }
      }
    }
  });
  return out;
}

// The partials' winning ids back on the requester, as input positions.
Tensor exchange_args(const TensorView& block_arg, const EmbeddingBagHandle& h) {
  const int64_t received = h.part_bag.numel();
  Tensor got = Tensor::empty({received, h.dim}, DType::Int64);
  all_to_all_single(got, block_arg, h.part_recv_splits, h.part_send_splits, h.comm);
  const std::vector<int64_t> first = starts_of(h.id_send_splits);
  const std::vector<int64_t> part_first = starts_of(h.part_recv_splits);
  const auto* sent_pos = h.sent_pos.data_as<int64_t>();
  auto* g = got.data_as<int64_t>();
  for (size_t o = 0; o < first.size(); ++o)
    for (int64_t q = part_first[o]; q < part_first[o] + h.part_recv_splits[o]; ++q)
      for (int64_t d = 0; d < h.dim; ++d) g[q * h.dim + d] = sent_pos[first[o] + g[q * h.dim + d]];
  return got;
}

// The requester's gradient rows, one per partial received, for the owners.
Tensor grad_parts(const TensorView& grad_out, const EmbeddingBagHandle& h) {
  const int64_t received = h.part_bag.numel();
  if (h.mode == BagMode::Sum) {
    Tensor g = Tensor::empty({received, h.dim}, h.dtype);
    index_select_out(g, grad_out, 0, h.part_bag);
    return g;
  }
  if (h.mode == BagMode::Mean)
    return gather_scatter(grad_out, h.part_bag, iota(received), Reduce::Sum, &h.part_scale, received);
  Tensor g = Tensor::zeros({received, h.dim}, h.dtype);
  const auto* win = h.win.data_as<int64_t>();
  const auto* bag = h.part_bag.data_as<int64_t>();
  with_float(h.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = g.data_as<T>();
    for (int64_t q = 0; q < received; ++q)
      for (int64_t d = 0; d < h.dim; ++d)
        if (win[bag[q] * h.dim + d] == q)
          out[q * h.dim + d] =
              static_cast<const T*>(grad_out.data())[bag[q] * grad_out.stride(0) + d * grad_out.stride(1)];
  });
  return g;
}

// Max on the owner: each partial's gradient column goes to the row that won it.
Tensor fold_max_grad(const TensorView& g, const TensorView& distinct_pos, int64_t distinct,
                     const EmbeddingBagHandle& h) {
  Tensor rows = Tensor::zeros({distinct, h.dim}, h.dtype);
  const auto* arg = h.arg.data_as<int64_t>();
  const auto* pos = static_cast<const int64_t*>(distinct_pos.data());
  with_float(h.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* in = static_cast<const T*>(g.data());
    T* out = rows.data_as<T>();
    for (int64_t p = 0; p < h.parts; ++p)
      for (int64_t d = 0; d < h.dim; ++d) out[pos[arg[p * h.dim + d]] * h.dim + d] += in[p * h.dim + d];
  });
  return rows;
}

// d out / d per_sample_weights: on the owner the dot of each id's partial
// gradient and its row, sent back and put at the id's input position.
Tensor weight_grad(const TensorView& g, const TensorView& shard, const EmbeddingBagHandle& h) {
  Tensor dots = gather_dot(g, h.recv_part, shard, h.recv_row);
  Tensor back = Tensor::empty({h.ids}, h.dtype);
  all_to_all_single(back, dots, h.id_send_splits, h.id_recv_splits, h.comm);
  Tensor out = Tensor::empty({h.ids}, h.dtype);
  const auto* pos = h.sent_pos.data_as<int64_t>();
  with_float(h.dtype, [&](auto zero) {
    using T = decltype(zero);
    for (int64_t s = 0; s < h.ids; ++s) out.data_as<T>()[pos[s]] = back.data_as<T>()[s];
  });
  return out;
}

}  // namespace

EmbeddingBagForward embedding_bag_forward(const TensorView& shard, const TensorView& input, const TensorView& offsets,
                                          const TensorView* psw, const std::vector<int64_t>& row_starts, BagMode mode,
                                          const Communicator& comm) {
  embedding_detail::check_and_agree(shard, input, offsets, psw, row_starts, mode, comm);
  auto h = std::make_shared<EmbeddingBagHandle>(comm);
  h->mode = mode;
  h->dtype = shard.dtype();
  h->dim = shard.size(1);
  h->bags = offsets.size(0);
  h->ids = input.size(0);
  h->shard_rows = shard.size(0);
  h->weighted = psw != nullptr;
  // Ids to their owners, pooled there into one partial per (source, bag).
  Tensor meta = embedding_detail::plan_requests(input, offsets, psw, row_starts, *h);
  Tensor got = exchange_ids(meta, *h);
  Tensor indptr = embedding_detail::plan_parts(got, *h);
  Tensor block_arg;
  Tensor partial = mode == BagMode::Max ? pool_max(shard, indptr, *h, &block_arg)
                                        : gather_scatter(shard, h->recv_row, h->recv_part, Reduce::Sum,
                                                         h->weighted ? &h->recv_weight : nullptr, h->parts);
  // The partials back to the requesters, folded there into their bags.
  Tensor parts = Tensor::empty({h->part_bag.numel(), h->dim}, h->dtype);
  all_to_all_single(parts, partial, h->part_recv_splits, h->part_send_splits, comm);
  EmbeddingBagForward out;
  if (mode == BagMode::Max) {
    Tensor pos = exchange_args(block_arg, *h);
    out.out = fold_max(parts, pos, *h);
  } else {
    out.out = scatter_rows(parts, h->part_bag, Reduce::Sum, h->bags, mode == BagMode::Mean ? &h->part_scale : nullptr);
  }
  out.handle = std::move(h);
  return out;
}

EmbeddingBagGrads embedding_bag_backward(const TensorView& grad_out, const TensorView& shard,
                                         const EmbeddingBagHandle& h, bool per_sample_weights_grad) {
  const char* op = "ShardedEmbeddingBag.backward";
  SCATTERX_CHECK(grad_out.dim() == 2 && grad_out.size(0) == h.bags && grad_out.size(1) == h.dim, ArgumentError, op,
                 "expected grad_output of shape [", h.bags, ", ", h.dim, "], got ", grad_out.sizes().str());
  SCATTERX_CHECK(grad_out.dtype() == h.dtype, DTypeError, op, "expected grad_output of dtype ", dtype_name(h.dtype),
                 ", got ", dtype_name(grad_out.dtype()));
  SCATTERX_CHECK(
      shard.dim() == 2 && shard.size(0) == h.shard_rows && shard.size(1) == h.dim && shard.dtype() == h.dtype,
      ArgumentError, op, "expected the forward's weight shard [", h.shard_rows, ", ", h.dim, "], got ", shard.str());
  // One gradient row per partial, to the owner that pooled it.
  Tensor mine = grad_parts(grad_out, h);
  Tensor g = Tensor::empty({h.parts, h.dim}, h.dtype);
  all_to_all_single(g, mine, h.part_send_splits, h.part_recv_splits, h.comm);
  EmbeddingBagGrads out;
  Tensor pos = embedding_detail::distinct_rows(h, &out.row_ids);
  const int64_t distinct = out.row_ids.numel();
  if (h.mode == BagMode::Max) {
    out.rows = fold_max_grad(g, pos, distinct, h);
  } else {
    out.rows = gather_scatter(g, h.recv_part, pos, Reduce::Sum, h.weighted ? &h.recv_weight : nullptr, distinct);
  }
  if (per_sample_weights_grad && h.weighted) out.grad_per_sample_weights = weight_grad(g, shard, h);
  return out;
}

}  // namespace scatterx::dist

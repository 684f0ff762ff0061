// moe_dispatch, moe_combine and their backward (dist/moe.h): each a short
// composition of the routing plans (moe_routing.cpp), scatterx's row kernels
// (index_select, gather_scatter, gather_dot) and all-to-alls. Every pass over
// the [rows, H] data is one of those kernels or one all-to-all.
#include <cstring>
#include <memory>

#include "dist/moe.h"
#include "dist/moe_routing.h"
#include "ops/error.h"
#include "ops/gather/gather.h"
#include "ops/gather_scatter/gather_dot.h"
#include "ops/gather_scatter/gather_scatter.h"

namespace scatterx::dist {
namespace {

// The experts' rows folded into their received rows, weighted (or not: weight
// null); every received row has at least one pair.
Tensor fold_to_received(const TensorView& rows, const TensorView* weight, const MoeHandle& h) {
  return gather_scatter(rows, h.expert_row, h.received_row, Reduce::Sum, weight, h.received);
}

// rows [n, H] to the ranks that sent the tokens: the transpose of dispatch's row exchange.
Tensor send_back(const TensorView& rows, const MoeHandle& h) {
  Tensor back = Tensor::empty({h.sent_token.numel(), rows.size(1)}, rows.dtype());
  all_to_all_single(back, rows, h.send_splits, h.recv_splits, h.comm);
  return back;
}

// Token rows sent back folded into [T, H] by their token (each token row written once).
Tensor fold_by_token(const TensorView& back, const MoeHandle& h) {
  return gather_scatter(back, h.sent_rows, h.sent_token, Reduce::Sum, nullptr, h.tokens);
}

void check_rows(const char* op, const char* name, const TensorView& t, const MoeHandle& h, int64_t rows) {
  SCATTERX_CHECK(t.dim() == 2 && t.size(0) == rows && t.size(1) == h.hidden, ArgumentError, op, "expected ", name,
                 " of shape [", rows, ", ", h.hidden, "], got ", t.sizes().str());
  SCATTERX_CHECK(t.dtype() == h.dtype, DTypeError, op, "expected ", name, " of dtype ", dtype_name(h.dtype), ", got ",
                 dtype_name(t.dtype()));
}

}  // namespace

MoeDispatch moe_dispatch(const TensorView& x, const TensorView& topk_idx, const TensorView& topk_weights,
                         int64_t num_experts, const Communicator& comm, const MoeOptions& options) {
  moe_detail::check_and_agree(x, topk_idx, topk_weights, num_experts, comm, options);
  const int world = comm.size();
  auto h = std::make_shared<MoeHandle>(comm);
  h->tokens = x.size(0);
  h->hidden = x.size(1);
  h->k = topk_idx.size(1);
  h->dtype = x.dtype();
  moe_detail::SendPlan plan = moe_detail::plan_sends(topk_idx, topk_weights, x.dtype(), num_experts, world, options);
  h->send_splits = plan.send_splits;
  h->sent_token = plan.sent_token;
  h->sent_rows = Tensor::empty({plan.sent_token.numel()}, DType::Int64);
  for (int64_t p = 0; p < plan.sent_token.numel(); ++p) h->sent_rows.data_as<int64_t>()[p] = p;

  // The small message first (its splits tell the receive sizes), then the rows,
  // packed from x in one pass and received in source-rank order.
  AllToAllVResult meta = all_to_all_v(plan.meta, plan.send_splits, comm);
  h->recv_splits = meta.recv_splits;
  h->received = meta.output.size(0);
  Tensor sent = Tensor::empty({plan.sent_token.numel(), h->hidden}, x.dtype());
  index_select_out(sent, x, 0, plan.sent_token);
  Tensor received = Tensor::empty({h->received, h->hidden}, x.dtype());
  all_to_all_single(received, sent, h->recv_splits, h->send_splits, comm);

  moe_detail::plan_groups(meta.output, num_experts / world, options.pad_to_multiple, *h);
  MoeDispatch out;
  out.recv_x = Tensor::empty({h->rows, h->hidden}, x.dtype());
  if (h->rows == h->expert_row.numel()) {  // no padding: pair i is recv_x row i
    index_select_out(out.recv_x, received, 0, h->received_row);
  } else {  // each group's pairs, then its zero padding rows
    const auto* kept = h->kept_per_expert.data_as<int64_t>();
    const auto* padded = h->tokens_per_expert.data_as<int64_t>();
    int64_t pair = 0;
    int64_t row = 0;
    for (int64_t e = 0; e < h->tokens_per_expert.numel(); ++e) {
      index_select_out(out.recv_x.slice(0, row, row + kept[e]), received, 0,
                       h->received_row.slice(0, pair, pair + kept[e]));
      TensorView pad = out.recv_x.slice(0, row + kept[e], row + padded[e]);
      std::memset(pad.data(), 0, static_cast<size_t>(pad.numel() * pad.element_size()));
      pair += kept[e];
      row += padded[e];
    }
  }
  out.tokens_per_expert = Tensor::clone(h->tokens_per_expert);
  out.handle = std::move(h);
  return out;
}

Tensor moe_combine(const TensorView& expert_out, const MoeHandle& h) {
  SCATTERX_CHECK(expert_out.dim() == 2 && expert_out.size(0) == h.rows && expert_out.size(1) == h.hidden, ArgumentError,
                 "moe.combine", "expected expert_out of recv_x's shape [", h.rows, ", ", h.hidden, "], got ",
                 expert_out.sizes().str());
  check_rows("moe.combine", "expert_out", expert_out, h, h.rows);
  // On the experts' rank each received token's weighted outputs folded into one
  // row; back on the token's rank its rows from the ranks folded into y.
  Tensor partial = fold_to_received(expert_out, &h.weight, h);
  return fold_by_token(send_back(partial, h), h);
}

Tensor moe_dispatch_backward(const TensorView& grad_recv_x, const MoeHandle& h) {
  check_rows("moe.dispatch_backward", "grad_recv_x", grad_recv_x, h, h.rows);
  Tensor folded = fold_to_received(grad_recv_x, nullptr, h);
  return fold_by_token(send_back(folded, h), h);
}

MoeCombineGrads moe_combine_backward(const TensorView& grad_y, const TensorView& expert_out, const MoeHandle& h) {
  const char* op = "moe.combine_backward";
  check_rows(op, "grad_y", grad_y, h, h.tokens);
  check_rows(op, "expert_out", expert_out, h, h.rows);
  // grad_y's rows to the experts' ranks, as dispatch sent x's.
  Tensor sent = Tensor::empty({h.sent_token.numel(), h.hidden}, h.dtype);
  index_select_out(sent, grad_y, 0, h.sent_token);
  Tensor grad_received = Tensor::empty({h.received, h.hidden}, h.dtype);
  all_to_all_single(grad_received, sent, h.recv_splits, h.send_splits, h.comm);
  MoeCombineGrads out;
  out.grad_expert_out = gather_scatter(grad_received, h.received_row, h.expert_row, Reduce::Sum, &h.weight, h.rows);
  // d y / d weight of a pair: the dot of its token's gradient and its expert's
  // output; placed at the pair's received slot, sent back, and folded by token
  // (each (token, slot) is nonzero on one row at most).
  Tensor pair_grad = gather_dot(grad_received, h.received_row, expert_out, h.expert_row);
  Tensor slot_grad = Tensor::zeros({h.received, h.k}, h.dtype);
  const auto es = static_cast<size_t>(slot_grad.element_size());
  const auto* slot = h.received_slot.data_as<int64_t>();
  for (int64_t i = 0; i < pair_grad.numel(); ++i)
    std::memcpy(static_cast<char*>(slot_grad.data()) + slot[i] * es,
                static_cast<const char*>(pair_grad.data()) + i * es, es);
  Tensor back = Tensor::empty({h.sent_token.numel(), h.k}, h.dtype);
  all_to_all_single(back, slot_grad, h.send_splits, h.recv_splits, h.comm);
  out.grad_topk_weights = fold_by_token(back, h);
  return out;
}

}  // namespace scatterx::dist

"""Expert-parallel MoE token routing: ``dispatch`` sends each token to the ranks that own its chosen experts,
``combine`` brings the experts' outputs back, weighted by the router. Both are differentiable (in x, in the
experts' outputs and in the router's weights) and deterministic.

Experts are owned contiguously: with E experts over a group of W ranks (E divisible by W), group rank r owns
experts ``r*E/W .. (r+1)*E/W - 1`` (its local experts ``0 .. E/W - 1``).

What moves: a token crosses to a rank once however many of its experts live there (with its k weights and
k local expert ids beside it, a few bytes); the receiving rank copies it into each of its chosen local
experts' groups. On the way back the receiving rank sums the weighted outputs of its local experts for the
token first, so again one row per token and rank crosses. Every step is a scatterx kernel (index_select,
gather_scatter) or an all-to-all, so the gradients are the transposed steps.

Capacity (``capacity_factor``): each expert keeps at most ``ceil(capacity_factor * T * k / E)`` (token,
slot) pairs from each source rank, T being that rank's token count; the pairs are taken in token order
(then slot order) and the later ones are dropped. A dropped pair contributes 0 to the combined output and
receives no gradient. Without ``capacity_factor`` nothing is dropped.

Checks: every rank validates its own arguments, then the ranks exchange a small record (whether each
passed, and num_experts, k, the hidden size, the dtype and the options) before any token moves. A rank
whose own arguments are wrong raises ValueError (or TypeError); the others raise
:class:`scatterx.distributed.MismatchError` naming it, and ranks that disagree about the shared
settings all raise MismatchError: nobody is left waiting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import torch

from .. import _ops
from .. import torch as sx_torch
from . import nn as dnn
from ._collectives import all_gather_into_tensor, all_to_all_single, all_to_all_v
from ._groups import GroupLike, MismatchError, get_world_size

__all__ = ["MoEHandle", "combine", "dispatch"]

_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@dataclass
class MoEHandle:
    """What ``combine`` needs from ``dispatch`` (opaque to users; kept alive by autograd as needed)."""

    group: GroupLike
    tokens: int                      # T on this rank
    hidden: int                      # H
    sent_token: torch.Tensor         # [P] the token of each row sent, rows ordered by destination rank then token
    send_splits: List[int]           # rows sent to each rank
    recv_splits: List[int]           # rows received from each rank
    row_target: torch.Tensor         # [rows of recv_x] the received row each recv_x row copies (padding: recv count)
    row_weight: torch.Tensor         # [rows of recv_x] its router weight (padding: 0), in the autograd graph
    received: int                    # rows received (R)
    tokens_per_expert: torch.Tensor  # [E / W] rows of recv_x per local expert, padding included
    kept_per_expert: torch.Tensor    # [E / W] of them real (token, expert) pairs


def _problem(x, topk_idx, topk_weights, num_experts, world, capacity_factor, pad_to_multiple) -> Optional[Exception]:
    """This rank's argument errors (None when fine): checked before the ranks compare notes."""
    op = "moe.dispatch"
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        return ValueError(f"{op}: expected x to be a 2-d torch tensor [tokens, hidden], got "
                          f"{type(x).__name__} of shape {list(getattr(x, 'shape', []))}")
    if x.dtype not in _DTYPES:
        return TypeError(f"{op}: expected x of a floating dtype, got {x.dtype}")
    if not isinstance(topk_idx, torch.Tensor) or topk_idx.dim() != 2 or topk_idx.shape[0] != x.shape[0]:
        return ValueError(f"{op}: expected topk_idx to be a 2-d tensor [tokens={x.shape[0]}, k], got shape "
                          f"{list(getattr(topk_idx, 'shape', []))}")
    if topk_idx.dtype not in (torch.int32, torch.int64):
        return TypeError(f"{op}: expected topk_idx of dtype int32 or int64, got {topk_idx.dtype}")
    if not isinstance(topk_weights, torch.Tensor) or tuple(topk_weights.shape) != tuple(topk_idx.shape):
        return ValueError(f"{op}: expected topk_weights of topk_idx's shape {list(topk_idx.shape)}, got "
                          f"{list(getattr(topk_weights, 'shape', []))}")
    if not torch.is_floating_point(topk_weights):
        return TypeError(f"{op}: expected topk_weights of a floating dtype, got {topk_weights.dtype}")
    if {x.device, topk_idx.device, topk_weights.device} != {torch.device("cpu")}:
        return ValueError(f"{op}: expected x, topk_idx and topk_weights on the cpu, got {x.device}, "
                          f"{topk_idx.device}, {topk_weights.device}")
    if not isinstance(num_experts, int) or num_experts <= 0 or num_experts % world != 0:
        return ValueError(f"{op}: expected num_experts to be a positive multiple of the group size ({world}), "
                          f"got {num_experts!r}")
    if capacity_factor is not None and not capacity_factor > 0:
        return ValueError(f"{op}: expected capacity_factor to be None or > 0, got {capacity_factor!r}")
    if not isinstance(pad_to_multiple, int) or pad_to_multiple < 1:
        return ValueError(f"{op}: expected pad_to_multiple to be an int >= 1, got {pad_to_multiple!r}")
    if topk_idx.numel() > 0:
        lo, hi = int(topk_idx.min()), int(topk_idx.max())
        if lo < 0 or hi >= num_experts:
            bad = lo if lo < 0 else hi
            where = (topk_idx == bad).nonzero()[0].tolist()
            return IndexError(f"{op}: expected topk_idx values in [0, {num_experts}), got {bad} at topk_idx "
                              f"position {where}")
        ordered = topk_idx.sort(dim=1).values
        repeated = (ordered[:, 1:] == ordered[:, :-1]).any(dim=1).nonzero()
        if repeated.numel() > 0:
            t = int(repeated[0])
            return ValueError(f"{op}: expected distinct experts in each row of topk_idx, got row {t} = "
                              f"{topk_idx[t].tolist()}")
    return None


def _agree(group, problem, fields: List[int]) -> None:
    """Every rank learns whether every rank passed its checks and whether they agree on `fields`."""
    world = get_world_size(group)
    mine = np.array([0 if problem is None else 1] + fields, dtype=np.int64)
    every = np.empty((world, mine.size), dtype=np.int64)
    all_gather_into_tensor(every, mine, group=group)
    if problem is not None:
        raise problem
    failed = [r for r in range(world) if every[r, 0] != 0]
    if failed:
        raise MismatchError(f"moe.dispatch: rank(s) {failed} of the group failed their argument checks "
                            "(their own errors say why)")
    names = ["num_experts", "k", "hidden size", "x dtype", "capacity_factor", "pad_to_multiple"]
    for i, name in enumerate(names, start=1):
        values = every[:, i].tolist()
        if len(set(values)) > 1:
            raise MismatchError(f"moe.dispatch: expected every rank to use the same {name}, got "
                                f"{', '.join(f'rank {r}: {v}' for r, v in enumerate(values))}")


def _kept(expert: torch.Tensor, num_experts: int, capacity_factor: Optional[float]) -> torch.Tensor:
    """[T, k] bool: the (token, slot) pairs each expert keeps, in token-then-slot order up to its capacity."""
    if capacity_factor is None:
        return torch.ones_like(expert, dtype=torch.bool)
    tokens, k = expert.shape
    capacity = math.ceil(capacity_factor * tokens * k / num_experts)
    flat = expert.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=num_experts)
    starts = torch.cumsum(counts, 0) - counts
    rank_in_expert = torch.empty_like(flat)
    rank_in_expert[order] = torch.arange(flat.numel()) - starts[flat[order]]
    return (rank_in_expert < capacity).reshape(tokens, k)


def dispatch(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, num_experts: int, *,
             group: GroupLike = None, capacity_factor: Optional[float] = None,
             pad_to_multiple: int = 1) -> Tuple[torch.Tensor, torch.Tensor, MoEHandle]:
    """Sends the tokens to their experts. Returns ``(recv_x, tokens_per_expert, handle)``:

    - ``recv_x`` [rows, H]: the tokens for this rank's experts, grouped by local expert, and within an expert
      by source rank, then token; each group padded with zero rows to a multiple of ``pad_to_multiple``.
    - ``tokens_per_expert`` [E / W] int64: the rows of each local expert's group (padding included), the group
      sizes a grouped GEMM takes.
    - ``handle``: for :func:`combine`.

    x [T, H] (float16, bfloat16, float32, float64; T may be 0), topk_idx [T, k] int32/int64 expert ids
    (distinct within a row), topk_weights [T, k] floating (cast to x's dtype). CPU torch tensors.
    """
    world = get_world_size(group)
    problem = _problem(x, topk_idx, topk_weights, num_experts, world, capacity_factor, pad_to_multiple)
    fields = [num_experts if isinstance(num_experts, int) else -1,
              topk_idx.shape[1] if problem is None else -1, x.shape[1] if problem is None else -1,
              _DTYPES.index(x.dtype) if problem is None else -1,
              -1 if capacity_factor is None else int(round(float(capacity_factor) * 1e6)),
              pad_to_multiple if isinstance(pad_to_multiple, int) else -1]
    _agree(group, problem, fields)

    local_experts = num_experts // world
    expert = topk_idx.long()
    kept = _kept(expert, num_experts, capacity_factor)
    owner = expert // local_experts                                      # [T, k] destination rank of each slot
    tokens = x.shape[0]
    # One row per (destination rank, token) with at least one kept slot there, ordered rank-major, token-minor.
    goes_to = torch.zeros(world, tokens, dtype=torch.bool)
    goes_to[owner[kept], torch.arange(tokens).unsqueeze(1).expand_as(owner)[kept]] = True
    dest, sent_token = goes_to.nonzero(as_tuple=True)
    send_splits = goes_to.sum(1).tolist()
    on_dest = (owner.index_select(0, sent_token) == dest.unsqueeze(1)) & kept.index_select(0, sent_token)
    local_id = torch.where(on_dest, expert.index_select(0, sent_token) % local_experts, -1)   # [P, k]
    weights = topk_weights.to(x.dtype).index_select(0, sent_token) * on_dest.to(x.dtype)

    k = expert.shape[1]
    received, recv_weights, recv_ids, recv_splits = _exchange(group, sent_token, send_splits, x, weights, local_id)

    # Each received row into each of its local experts' groups: stable by expert, so (source rank, token)
    # order holds within a group.
    row, slot = (recv_ids >= 0).nonzero(as_tuple=True)
    ids = recv_ids[row, slot]
    by_expert = torch.argsort(ids, stable=True)
    row, slot, ids = row[by_expert], slot[by_expert], ids[by_expert]
    kept_per_expert = torch.bincount(ids, minlength=local_experts)
    padded = (kept_per_expert + pad_to_multiple - 1) // pad_to_multiple * pad_to_multiple
    n_received = received.shape[0]
    # recv_x row j copies received row row_target[j]; a padding row copies the zero row appended at
    # n_received (and its weight the zero appended after the weights).
    row_target = torch.full((int(padded.sum()),), n_received, dtype=torch.int64)
    weight_index = torch.full_like(row_target, n_received * k)
    starts = torch.cumsum(padded, 0) - padded
    within = torch.arange(ids.numel()) - (torch.cumsum(kept_per_expert, 0) - kept_per_expert)[ids]
    place = starts[ids] + within
    row_target[place] = row
    weight_index[place] = row * k + slot
    if pad_to_multiple == 1:  # no padding rows: nothing to append
        recv_x = sx_torch.index_select(received, 0, row_target)
        row_weight = sx_torch.index_select(recv_weights.reshape(-1), 0, weight_index)
    else:
        recv_x = sx_torch.index_select(torch.cat([received, received.new_zeros(1, received.shape[1])]), 0,
                                       row_target)
        row_weight = sx_torch.index_select(torch.cat([recv_weights.reshape(-1), recv_weights.new_zeros(1)]), 0,
                                           weight_index)
    handle = MoEHandle(group=group, tokens=tokens, hidden=x.shape[1], sent_token=sent_token,
                       send_splits=send_splits, recv_splits=recv_splits, row_target=row_target,
                       row_weight=row_weight, received=n_received, tokens_per_expert=padded,
                       kept_per_expert=kept_per_expert)
    return recv_x, padded.clone(), handle


def combine(expert_out: torch.Tensor, handle: MoEHandle) -> torch.Tensor:
    """``y`` [T, H]: ``y[t] = sum over t's kept (expert, weight) pairs of weight * expert_out`` row of (t, expert);
    expert_out is recv_x's shape (the experts' outputs row for row; padding rows are ignored). Differentiable
    in expert_out and, through the handle, in dispatch's x and topk_weights. Every rank of the group calls it."""
    op = "moe.combine"
    rows = handle.row_target.shape[0]
    if not isinstance(expert_out, torch.Tensor) or tuple(expert_out.shape) != (rows, handle.hidden):
        raise ValueError(f"{op}: expected expert_out of recv_x's shape [{rows}, {handle.hidden}], got "
                         f"{list(getattr(expert_out, 'shape', []))}")
    # On the expert's rank: each received token's weighted expert outputs folded into one row (padding rows
    # into an extra row that is dropped); back on the token's rank its rows from the ranks folded into y.
    # Both folds are gather_scatter's: each output row written once, summed in float for 16-bit dtypes.
    rows_here = torch.arange(rows)
    partial = sx_torch.gather_scatter(expert_out, rows_here, handle.row_target, "sum",
                                      edge_weight=handle.row_weight.to(expert_out.dtype),
                                      dim_size=handle.received + 1)
    back = dnn.all_to_all_single(expert_out.new_empty(handle.sent_token.shape[0], handle.hidden),
                                 partial[:handle.received], handle.send_splits, handle.recv_splits,
                                 group=handle.group)
    return sx_torch.gather_scatter(back, torch.arange(back.shape[0]), handle.sent_token, "sum",
                                   dim_size=handle.tokens)


class _Exchange(torch.autograd.Function):
    """The tokens' rows, their router weights and their local expert ids to the experts' ranks: one autograd
    node, so the backward pass runs its all-to-alls in one order on every rank (two nodes could be run in
    different orders on different ranks, as autograd sees fit, and cross). Three messages, not one packed
    row: packing the weights and ids beside the rows measured 15-35% slower on the MoE benchmark (rows no
    longer a whole number of cache lines, and strided reads after)."""

    @staticmethod
    def forward(ctx, group, sent_token, send_splits, received_splits, x, weights, local_id):
        rows, recv_splits = all_to_all_v(_ops.index_select(x.detach(), 0, sent_token), send_splits, group=group)
        recv_weights, _ = all_to_all_v(weights, send_splits, group=group)
        recv_ids, _ = all_to_all_v(local_id, send_splits, group=group)
        received_splits.extend(recv_splits)
        ctx.group, ctx.splits, ctx.x_shape = group, (list(send_splits), list(recv_splits)), x.shape
        ctx.save_for_backward(sent_token)
        ctx.mark_non_differentiable(recv_ids)
        return rows, recv_weights, recv_ids

    @staticmethod
    def backward(ctx, grad_rows, grad_weights, _):
        (sent_token,) = ctx.saved_tensors
        send_splits, recv_splits = ctx.splits
        # The transposed exchange, both messages in this order on every rank.
        back_rows = grad_rows.new_empty(sent_token.shape[0], ctx.x_shape[1])
        all_to_all_single(back_rows, grad_rows.contiguous(), send_splits, recv_splits, group=ctx.group)
        back_weights = grad_weights.new_empty(sent_token.shape[0], grad_weights.shape[1])
        all_to_all_single(back_weights, grad_weights.contiguous(), send_splits, recv_splits, group=ctx.group)
        grad_x = _ops.gather_scatter(back_rows, torch.arange(back_rows.shape[0]), sent_token, "sum",
                                     dim_size=ctx.x_shape[0])
        return None, None, None, None, grad_x, back_weights, None


def _exchange(group, sent_token, send_splits, x, weights, local_id):
    received_splits: List[int] = []
    rows, recv_weights, recv_ids = _Exchange.apply(group, sent_token, send_splits, received_splits, x, weights,
                                                   local_id)
    return rows, recv_weights, recv_ids, received_splits

"""Expert-parallel MoE token routing: ``dispatch`` sends each token to the ranks that own its chosen experts,
``combine`` brings the experts' outputs back, weighted by the router. Both are differentiable (in x, in the
experts' outputs and in the router's weights) and deterministic.

Experts are owned contiguously: with E experts over a group of W ranks (E divisible by W), group rank r owns
experts ``r*E/W .. (r+1)*E/W - 1`` (its local experts ``0 .. E/W - 1``).

What moves: a token crosses to a rank once however many of its experts live there (with its k weights and
k local expert ids beside it, a few bytes); the receiving rank copies it into each of its chosen local
experts' groups. On the way back the receiving rank sums the weighted outputs of its local experts for the
token first, so again one row per token and rank crosses. The work is done by the C++ layer (dist/moe.h:
moe_dispatch, moe_combine and their backward functions), whose steps are scatterx kernels (index_select,
gather_scatter, gather_dot) and all-to-alls; the gradients are the transposed steps.

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

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch

from .. import _C
from ._groups import GroupLike, _resolve

__all__ = ["MoEHandle", "combine", "dispatch"]


@dataclass
class MoEHandle:
    """What ``combine`` needs from ``dispatch`` (opaque to users; kept alive by autograd as needed)."""

    group: GroupLike
    native: Any                  # _C.dist.MoeHandle: the C++ routing (dist/moe.h)
    topk_weights: torch.Tensor   # dispatch's router weights: combine's gradient in them flows here

    @property
    def send_splits(self) -> List[int]:
        """Token rows this rank sent to each rank."""
        return list(self.native.send_splits)


def _problem(x, topk_idx, topk_weights, num_experts, capacity_factor, pad_to_multiple) -> Optional[Exception]:
    """What the C++ checks cannot see (non-tensors, devices, Python types); they check the rest."""
    op = "moe.dispatch"
    for name, t in (("x", x), ("topk_idx", topk_idx), ("topk_weights", topk_weights)):
        if not isinstance(t, torch.Tensor):
            return ValueError(f"{op}: expected {name} to be a torch tensor, got {type(t).__name__}")
    if {x.device, topk_idx.device, topk_weights.device} != {torch.device("cpu")}:
        return ValueError(f"{op}: expected x, topk_idx and topk_weights on the cpu, got {x.device}, "
                          f"{topk_idx.device}, {topk_weights.device}")
    if not isinstance(num_experts, int):
        return ValueError(f"{op}: expected num_experts to be a positive multiple of the group size, got "
                          f"{num_experts!r}")
    if capacity_factor is not None and not isinstance(capacity_factor, (int, float)):
        return ValueError(f"{op}: expected capacity_factor to be None or > 0, got {capacity_factor!r}")
    if not isinstance(pad_to_multiple, int):
        return ValueError(f"{op}: expected pad_to_multiple to be an int >= 1, got {pad_to_multiple!r}")
    return None


class _Dispatch(torch.autograd.Function):
    """x's rows to the experts' ranks; backward sends recv_x's gradient back and sums it per token."""

    @staticmethod
    def forward(ctx, x, out, topk_idx, topk_weights, num_experts, comm, capacity_factor, pad_to_multiple):
        recv_x, sizes, native = _C.dist.moe_dispatch(x.detach(), topk_idx, topk_weights.detach(), num_experts, comm,
                                                     capacity_factor, pad_to_multiple, _C.Framework.Torch)
        out.extend([sizes, native])
        ctx.native = native
        return recv_x

    @staticmethod
    def backward(ctx, grad_recv_x):
        grad_x = _C.dist.moe_dispatch_backward(grad_recv_x.contiguous(), ctx.native, _C.Framework.Torch)
        return grad_x, None, None, None, None, None, None, None


class _Combine(torch.autograd.Function):
    """The weighted fold back to the tokens' ranks; backward gives the gradients in the experts' outputs and,
    through the handle, in dispatch's router weights. One node for both, so every rank runs its all-to-alls
    in one order."""

    @staticmethod
    def forward(ctx, expert_out, topk_weights, native):
        ctx.native, ctx.weights_dtype = native, topk_weights.dtype
        ctx.save_for_backward(expert_out)
        return _C.dist.moe_combine(expert_out.detach(), native, _C.Framework.Torch)

    @staticmethod
    def backward(ctx, grad_y):
        (expert_out,) = ctx.saved_tensors
        grad_out, grad_weights = _C.dist.moe_combine_backward(grad_y.contiguous(), expert_out.detach(), ctx.native,
                                                              _C.Framework.Torch)
        return grad_out, grad_weights.to(ctx.weights_dtype), None


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

    In plain torch (Megatron-style): sort the (token, expert) pairs by expert, ``x.index_select`` them and
    :torch_dist:`all_to_all_single` the rows to the experts' ranks; here a token crosses to a rank once however
    many of its experts live there. Deterministic. Collective over ``group``; errors as the module says
    (ValueError / TypeError for this rank's arguments, MismatchError naming the rank that failed).
    """
    op = "moe.dispatch"
    pg = _resolve(group, op)
    if pg is None:
        raise ValueError(f"{op}: expected a group this rank is a member of, got one without it")
    comm = pg._live_comm(op)
    problem = _problem(x, topk_idx, topk_weights, num_experts, capacity_factor, pad_to_multiple)
    if problem is not None:
        _C.dist.moe_failed_checks(comm)  # the peers learn of it and raise MismatchError
        raise problem
    cf = None if capacity_factor is None else float(capacity_factor)
    out: List[Any] = []
    recv_x = _Dispatch.apply(x, out, topk_idx, topk_weights, num_experts, comm, cf, pad_to_multiple)
    sizes, native = out
    return recv_x, sizes, MoEHandle(group=group, native=native, topk_weights=topk_weights)


def combine(expert_out: torch.Tensor, handle: MoEHandle) -> torch.Tensor:
    """``y`` [T, H]: ``y[t] = sum over t's kept (expert, weight) pairs of weight * expert_out`` row of (t, expert);
    expert_out is recv_x's shape (the experts' outputs row for row; padding rows are ignored). Differentiable
    in expert_out and, through the handle, in dispatch's x and topk_weights. Every rank of the group calls it.

    In plain torch: :torch_dist:`all_to_all_single` the rows back, then ``y.index_add_(0, token, weight *
    row)``; here each rank first sums its experts' weighted outputs per token, so one row per (token, rank)
    crosses. Deterministic (fixed folding order). Errors: ValueError (expert_out's shape) or TypeError (its
    dtype)."""
    if not isinstance(expert_out, torch.Tensor):
        raise ValueError(f"moe.combine: expected expert_out of recv_x's shape [{handle.native.rows}, "
                         f"{handle.native.hidden}], got {type(expert_out).__name__}")
    return _Combine.apply(expert_out, handle.topk_weights, handle.native)

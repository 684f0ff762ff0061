"""scatter_softmax, scatter_log_softmax, scatter_logsumexp and scatter_std as torch_scatter 2.1.2 composes
them. The per-position maximum only shifts values for stability (the result does not depend on it), so it
is taken without a gradient; the sums go through the differentiable scatter_sum, so all four have
gradients in src. scatter_softmax and scatter_log_softmax of a 1-d index over the rows of a src on the index's
device (CPU or CUDA) run one fused kernel (scatterx's scatter_softmax) instead, with the same gradients."""

from __future__ import annotations

from typing import Optional

import torch

from .. import _C
from .._plan import IndexPlan
from ._common import _TORCH, arg, broadcast, on_cpu_or_cuda, on_one_device, tensor, wants_grad
from ._scatter import extremum_values, scatter, scatter_max, scatter_sum


def _floating(op: str, src: torch.Tensor) -> None:
    if not torch.is_floating_point(src):
        raise ValueError(f"`{op}` can only be computed over tensors with floating point data types "
                         f"(got {src.dtype})")


class _Positions:
    """An index as torch_scatter broadcasts it, and how to read a per-position tensor back per element: by
    index_select along dim when the index came 1-d (the GNN case; far cheaper than gather through the
    broadcast [E, F] index), else by gather."""

    def __init__(self, index: torch.Tensor, src: torch.Tensor, dim: int):
        self.dim = dim + src.dim() if dim < 0 else dim
        self.flat = index if index.dim() == 1 else None
        self.index = broadcast(index, src, dim)

    def take(self, per_position: torch.Tensor) -> torch.Tensor:
        if self.flat is not None:
            return per_position.index_select(self.dim, self.flat)
        return per_position.gather(self.dim, self.index)


def _shifted(src: torch.Tensor, at: _Positions, dim_size: Optional[int]) -> torch.Tensor:
    """src minus the maximum of its position (taken without a gradient: the results do not depend on it)."""
    with torch.no_grad():
        top = extremum_values(src, at.index, at.dim, dim_size, is_max=True)
    return src - at.take(top)


_FUSED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


class _FusedSoftmax(torch.autograd.Function):
    """The fused kernel's (log-)softmax of the rows of src grouped by an IndexPlan; the backward is the
    composite's math, with S a sum over each destination's rows read back per row:
    softmax: grad = y * (g - S(g * y)); log-softmax: grad = g - exp(y) * S(g). On the CPU one fused kernel
    computes it (scatter_softmax_backward); on CUDA, and where the backward itself is recorded (create_graph,
    for a double backward), torch ops around scatterx's scatter."""

    @staticmethod
    def forward(ctx, src, plan, log, eps):
        op = "scatter_log_softmax" if log else "scatter_softmax"
        out = _C.scatter_softmax(arg(src, op, "src"), plan._plan, log, float(eps), _TORCH)
        ctx.save_for_backward(out)
        ctx.plan, ctx.log = plan, log
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        plan = ctx.plan
        if out.device.type == "cpu" and not torch.is_grad_enabled():  # grad enabled: a double backward's graph
            op = "scatter_log_softmax" if ctx.log else "scatter_softmax"
            grad_src = _C.scatter_softmax_backward(arg(out, op, "out"), arg(grad, op, "grad"), plan._plan, ctx.log,
                                                   _TORCH)
            return grad_src, None, None, None
        index = tensor(plan.index).long()

        def per_row(values):  # S(values)[index]: each row gets its destination's sum
            return scatter(values, plan, 0, reduce="sum").index_select(0, index)

        if ctx.log:
            return grad - out.exp() * per_row(grad), None, None, None
        return out * (grad - per_row(grad * out)), None, None, None


def _fused_plan(op: str, src: torch.Tensor, index, dim: int, dim_size: Optional[int]) -> Optional[IndexPlan]:
    """The IndexPlan the fused kernel takes, or None where the composite must run: the rows of src along dim 0
    grouped by a 1-d index on src's device (or a plan), src of a floating dtype on the CPU or a CUDA device.
    A plan is returned whatever its device: one on another device than src raises the kernel's ValueError,
    which names the plan's device."""
    if isinstance(index, IndexPlan):
        if dim not in (0, -src.dim()):
            raise ValueError(f"{op}: an IndexPlan groups the rows along dim 0, got dim={dim} for src of "
                             f"{src.dim()} dims")
        index.check_dim_size(op, dim_size)
        return index if src.dtype in _FUSED_DTYPES and on_cpu_or_cuda(src) else None
    if (src.dim() == 0 or dim not in (0, -src.dim()) or src.dtype not in _FUSED_DTYPES
            or not on_one_device(src, index)
            or index.dim() != 1 or index.dtype not in (torch.int32, torch.int64) or index.size(0) != src.size(0)):
        return None
    return IndexPlan(index, dim_size)


def _fused(src: torch.Tensor, plan: IndexPlan, log: bool, eps: float) -> torch.Tensor:
    if wants_grad(src):
        return _FusedSoftmax.apply(src, plan, log, eps)
    op = "scatter_log_softmax" if log else "scatter_softmax"
    return _C.scatter_softmax(arg(src, op, "src"), plan._plan, log, float(eps), _TORCH)


def _unplanned(index, dim_size: Optional[int]):
    """A plan that the fused kernel cannot take goes to the composite as its index and dim_size."""
    if isinstance(index, IndexPlan):
        return tensor(index.index), index.dim_size
    return tensor(index), dim_size


def scatter_softmax(src: torch.Tensor, index: torch.Tensor, dim: int = -1,
                    dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`torch_scatter.scatter_softmax <composite>`: softmax over the values that share a position,
    ``exp(src - max) / sum(exp(src - max))``; the result has src's shape.

    index broadcasts as in :func:`scatter_sum`; it may be a :class:`scatterx.IndexPlan` (rows along dim 0).
    A 1-d index (or a plan) over the rows of src, on src's device (CPU or CUDA), takes one fused kernel,
    anything else the composite; both are deterministic (fixed folding order). Floating dtypes only (else
    ValueError); index int32/int64. Differentiable in src. Errors: ValueError (dtype, shapes, a plan on
    another device than src), IndexError (an index out of range)."""
    src = tensor(src)
    index = index if isinstance(index, IndexPlan) else tensor(index)
    _floating("scatter_softmax", src)
    plan = _fused_plan("scatter_softmax", src, index, dim, dim_size)
    if plan is not None:
        return _fused(src, plan, False, 0.0)
    index, dim_size = _unplanned(index, dim_size)
    at = _Positions(index, src, dim)
    if not wants_grad(src):  # nothing to record: one [E, F] temporary, updated in place
        exp = _shifted(src, at, dim_size).exp_()
        return exp.div_(at.take(scatter_sum(exp, at.index, at.dim, dim_size=dim_size)))
    exp = _shifted(src, at, dim_size).exp()
    return exp / at.take(scatter_sum(exp, at.index, at.dim, dim_size=dim_size))


def scatter_log_softmax(src: torch.Tensor, index: torch.Tensor, dim: int = -1, eps: float = 1e-12,
                        dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`torch_scatter.scatter_log_softmax <composite>`: log-softmax over the values that share a
    position, ``(src - max) - log(sum(exp(src - max)) + eps)``; the result has src's shape.

    index may be a :class:`scatterx.IndexPlan`; the fused kernel, dtypes, determinism, gradient and errors
    as :func:`scatter_softmax`."""
    src = tensor(src)
    index = index if isinstance(index, IndexPlan) else tensor(index)
    _floating("scatter_log_softmax", src)
    plan = _fused_plan("scatter_log_softmax", src, index, dim, dim_size)
    if plan is not None:
        return _fused(src, plan, True, eps)
    index, dim_size = _unplanned(index, dim_size)
    at = _Positions(index, src, dim)
    shifted = _shifted(src, at, dim_size)
    total = scatter_sum(shifted.exp(), at.index, at.dim, dim_size=dim_size)
    return shifted - at.take((total + eps).log())


def scatter_logsumexp(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                      dim_size: Optional[int] = None, eps: float = 1e-12) -> torch.Tensor:
    """:torch_scatter:`torch_scatter.scatter_logsumexp <composite>`: ``log(sum(exp(src)) + eps)`` per
    position, computed around the maximum.

    Shapes as :func:`scatter_sum` (``dim_size`` or out's size along dim). Without out an empty position is 0;
    with out, out's value takes part (as one more exp term) and non-finite results keep out's value.
    Floating dtypes only (else ValueError). Deterministic. Differentiable in src. Errors: ValueError
    (dtype, shapes), IndexError (an index out of range)."""
    src, index = tensor(src), tensor(index)
    _floating("scatter_logsumexp", src)
    index = broadcast(index, src, dim)
    if out is not None:
        dim_size = out.size(dim)
    elif dim_size is None:
        dim_size = int(index.max()) + 1 if index.numel() > 0 else 0
    size = list(src.size())
    size[dim] = dim_size
    with torch.no_grad():  # the maximum of the src values; -inf where there are none
        top = torch.full(size, float("-inf"), dtype=src.dtype, device=src.device)
        scatter_max(src.detach(), index, dim, top, dim_size=dim_size)
    shifted = src - top.gather(dim, index)
    shifted = shifted.masked_fill(torch.isnan(shifted), float("-inf"))
    original = None
    start = None
    if out is not None:
        original = out.clone()
        start = (out - top).exp()
    total = scatter_sum(shifted.exp(), index, dim, start, dim_size)
    result = (total + eps).log() + top
    if original is None:
        return result.nan_to_num(neginf=0.0)
    keep = ~result.isfinite()
    result = torch.where(keep, original, result)
    if out.requires_grad or result.requires_grad:
        return result
    return out.copy_(result)


def scatter_std(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None, unbiased: bool = True) -> torch.Tensor:
    """:torch_scatter:`torch_scatter.scatter_std <composite>`: standard deviation of the values that share a position,
    ``sqrt(sum((src - mean)^2) / (count - unbiased))``, the counts clamped to at least 1.

    Shapes as :func:`scatter_sum`; with out, the squared deviations are added to out's values. Meant for
    floating dtypes. Deterministic. Differentiable in src. Errors as :func:`scatter_sum`."""
    src, index = tensor(src), tensor(index)
    if out is not None:
        dim_size = out.size(dim)
    if dim < 0:
        dim = src.dim() + dim
    count_dim = dim if index.dim() > dim else index.dim() - 1
    ones = torch.ones(index.size(), dtype=src.dtype, device=src.device)
    count = scatter_sum(ones, index, count_dim, dim_size=dim_size)
    index = broadcast(index, src, dim)
    total = scatter_sum(src, index, dim, dim_size=dim_size)
    count = broadcast(count, total, dim).clamp(min=1)
    mean = total / count
    deviation = src - mean.gather(dim, index)
    squares = scatter_sum(deviation * deviation, index, dim, out, dim_size)
    if unbiased:
        count = (count - 1).clamp(min=1)
    result = (squares / count).sqrt()
    if out is None or result.requires_grad:
        return result
    return out.copy_(result)

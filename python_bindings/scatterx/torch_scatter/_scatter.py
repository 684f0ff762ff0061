"""scatter and scatter_{sum,add,mul,mean,min,max} with torch_scatter 2.1.2's signatures and semantics."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .. import _C, _ops
from .._plan import IndexPlan
from ._common import (_TORCH, arg, arg_reduce, broadcast, merge_arg_out, on_one_device, output_size, refuse_grad,
                      tensor, linear, wants_grad)


def scatter_sum(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`scatter` with ``reduce="sum"``: sums src into out at index along dim.

    index broadcasts as torch_scatter's (a 1-d index lines up with ``dim`` of src, then expands); without
    ``out`` the result is a new zero-filled tensor, src's shape with ``dim`` of size ``dim_size`` (default
    ``index.max() + 1``), and with ``out`` the sums are added to out. dtypes: any torch dtype (integer sums
    wrap; 16-bit floats accumulate in float and round once); index int32 or int64.
    Deterministic on the CPU (each position sums in index order); on CUDA for a 1-d index over float32/float64
    rows without out or gradient, otherwise with ``scatterx.cuda.set_deterministic(True)``. Differentiable in
    src, and in out when given (the write is recorded, as ``Tensor.scatter_add_``). Errors: IndexError (an index
    out of range), ValueError (shapes), TypeError (dtypes).
    """
    src, index = tensor(src), tensor(index)
    if out is None and not wants_grad(src):
        rows = _by_rows(src, index, dim, dim_size, "sum")  # the index as given: 1-d over the rows
        if rows is not None:
            return rows
    index = broadcast(index, src, dim)
    if out is None:
        zeros = src.new_zeros(output_size(src, index, dim, dim_size))
        # Into the fresh zeros directly unless autograd must record it (the out-of-place form copies them).
        return _ops.scatter_add(zeros, dim, index, src) if wants_grad(src) else _ops.scatter_add_(zeros, dim, index, src)
    return _ops.scatter_add_(out, dim, index, src)


def scatter_add(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`scatter` with ``reduce="add"``: :func:`scatter_sum` under its other name."""
    return scatter_sum(src, index, dim, out, dim_size)


def scatter_mul(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`scatter` with ``reduce="mul"``: multiplies src into out at index along dim.

    Shapes as :func:`scatter_sum`; without out the start is ones (an empty position is 1). Any dtype with a
    product (16-bit floats accumulate in float). Deterministic (index order). Differentiable in src and out
    (torch's prod rule, zeros included). Errors as :func:`scatter_sum`.
    """
    src, index = tensor(src), tensor(index)
    index = broadcast(index, src, dim)
    if out is None:
        ones = src.new_ones(output_size(src, index, dim, dim_size))
        return _ops.scatter_reduce(ones, dim, index, src, "prod")
    return _ops.scatter_reduce_(out, dim, index, src, "prod")


def scatter_mean(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                 dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`scatter` with ``reduce="mean"``: :func:`scatter_sum` divided by the number of values each
    position got, clamped to at least 1 (so a given out's own value counts for nothing and an empty position
    keeps it, 0 without out); integers divide with floor (torch_scatter truncates).

    Shapes, dtypes (not bool), determinism, gradients and errors as :func:`scatter_sum`.
    """
    src, index = tensor(src), tensor(index)
    if out is None and not wants_grad(src) and src.dtype in (torch.float32, torch.float64):
        # One pass, no [E, F] of ones to count with (the same sum over the same count, bit for bit; 16-bit
        # floats would round once instead of twice).
        return _reduce_into_zeros(src, index, dim, dim_size, "mean")
    out = scatter_sum(src, index, dim, out, dim_size)
    index_dim = dim + src.dim() if dim < 0 else dim
    if index.dim() <= index_dim:
        index_dim = index.dim() - 1
    ones = torch.ones(index.size(), dtype=src.dtype, device=src.device)
    count = scatter_sum(ones, index, index_dim, None, out.size(dim)).clamp_(min=1)
    count = broadcast(count, out, dim)
    if out.requires_grad:
        return out / count if out.is_floating_point() else torch.div(out, count, rounding_mode="floor")
    return out.div_(count, rounding_mode=None if out.is_floating_point() else "floor")


def _scatter_arg(op: str, src, index, dim, out, dim_size, is_max: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    src, index = tensor(src), tensor(index)
    index = broadcast(index, src, dim)
    dim = dim + src.dim() if dim < 0 else dim
    reduce = "amax" if is_max else "amin"
    size = out.size(dim) if out is not None else (-1 if dim_size is None else dim_size)

    def compute(s):
        return _C.scatter_arg_reduce(arg(s, op, "src"), dim, arg(index, op, "index"), reduce, size, _TORCH)

    if out is None:
        return arg_reduce(src, dim, compute)
    refuse_grad(op, src, out)
    values, args = compute(src)
    return merge_arg_out(out, values, args, src.size(dim), is_max)


_ROW_DTYPES = (torch.float32, torch.float64)
_INDEX_DTYPES = (torch.int32, torch.int64)


def _by_rows(src: torch.Tensor, index: torch.Tensor, dim: int, dim_size: Optional[int],
             reduce: str) -> Optional[torch.Tensor]:
    """The GNN aggregation's fast path, for a 1-d index of one position per row of a float32/float64 src on the
    index's device, CPU or CUDA (dim 0), without out or gradient: the rows grouped by destination for this
    call (scatterx's scatter_rows; on the CPU the counting sort lays the rows out as it groups them) and each
    destination row folded and written once (no zero fill, no read-modify-write of out). Bit-identical to the
    general path on the CPU; on CUDA deterministic, and the CPU's bits for destinations of up to 64 rows. None
    where it does not apply; then the general path runs (and reports bad arguments in scatter's words)."""
    if (index.dim() != 1 or src.dim() == 0 or dim not in (0, -src.dim()) or index.numel() != src.size(0)
            or not on_one_device(src, index) or src.dtype not in _ROW_DTYPES or index.dtype not in _INDEX_DTYPES):
        return None
    try:  # validation comes before any work: a refusal leaves nothing behind
        return _C.scatter_rows(arg(src, "scatter", "src"), arg(index, "scatter", "index"), reduce,
                               -1 if dim_size is None else int(dim_size), _TORCH)
    except (IndexError, ValueError):
        return None


def _reduce_into_zeros(src, index, dim: int, dim_size: Optional[int], reduce: str) -> torch.Tensor:
    """One scatter_reduce_ of src into a new zero tensor, include_self=False: a position no value reaches keeps
    0, torch_scatter's rule. Records no gradient."""
    src, index = tensor(src), tensor(index)
    if src.requires_grad:  # a new view object costs 0.3 us: only where one is needed
        src = src.detach()
    rows = _by_rows(src, index, dim, dim_size, reduce)
    if rows is not None:
        return rows
    index = broadcast(index, src, dim)
    zeros = src.new_zeros(output_size(src, index, dim, dim_size))
    return _ops.scatter_reduce_(zeros, dim, index, src, reduce, include_self=False)


def extremum_values(src: torch.Tensor, index: torch.Tensor, dim: int, dim_size: Optional[int],
                    is_max: bool) -> torch.Tensor:
    """scatter_max(...)[0] (scatter_min) without the arg, for callers that need no gradient; several times
    faster than computing the arg as well."""
    return _reduce_into_zeros(src, index, dim, dim_size, "amax" if is_max else "amin")


def scatter_min(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:torch_scatter:`torch_scatter.scatter_min <scatter>`: ``(values, arg)``, the minimum sent to each position
    and the position along dim of src it came from (the first in index order; arg is int64).

    Shapes as :func:`scatter_sum`. An empty position gets 0 and arg ``src.size(dim)``; with out, out's value
    competes (replaced only by a smaller one). Real dtypes (not complex); NaN propagates (torch's amin rule;
    torch_scatter's CPU kernel skips NaN). Deterministic, ties included. Without out, differentiable in src: the
    gradient goes to src at arg. Errors as :func:`scatter_sum`; with out, inputs that require grad raise TypeError."""
    return _scatter_arg("scatter_min", src, index, dim, out, dim_size, False)


def scatter_max(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:torch_scatter:`torch_scatter.scatter_max <scatter>`: ``(values, arg)`` as :func:`scatter_min`, for the
    maximum."""
    return _scatter_arg("scatter_max", src, index, dim, out, dim_size, True)


_PLANNED = {"sum": "sum", "add": "sum", "mean": "mean", "min": "amin", "max": "amax"}


def _scatter_planned(src, plan: IndexPlan, dim: int, out, dim_size, reduce: str) -> torch.Tensor:
    """scatter by a scatterx.IndexPlan: the rows of src along dim 0, grouped once by the plan."""
    src = tensor(src)
    if dim not in (0, -src.dim()):
        raise ValueError(f"scatter: an IndexPlan groups the rows along dim 0, got dim={dim} for src of "
                         f"{src.dim()} dims")
    plan.check_dim_size("scatter", dim_size)
    index = tensor(plan.index)
    core = _PLANNED.get(reduce)
    grad = wants_grad(src)
    if (out is not None or core is None or src.dtype not in (torch.float32, torch.float64)
            or (grad and core in ("amin", "amax"))):
        # What the plan does not cover takes the index: out=, mul, other dtypes, and min/max that must record
        # torch_scatter's arg gradient.
        return scatter(src, index, dim, out, plan.dim_size, reduce)

    def apply(s):
        return _C.scatter_by_plan(arg(s, "scatter", "src"), plan._plan, core, _TORCH)

    if not grad or core in ("amin", "amax"):
        return apply(src)
    counts = plan.counts().clamp_(min=1).to(src.dtype) if core == "mean" else None

    def adjoint(g):  # each row's gradient is its destination's (over the destination's count for mean)
        if counts is not None:
            g = g / counts.reshape([-1] + [1] * (g.dim() - 1))
        return g.index_select(0, index.long())

    return linear(src, apply, adjoint)


def scatter(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
            dim_size: Optional[int] = None, reduce: str = "sum") -> torch.Tensor:
    """:torch_scatter:`scatter`: reduces src into out at index along dim; reduce is ``'sum'`` / ``'add'``,
    ``'mul'``, ``'mean'``, ``'min'`` or ``'max'`` (min/max return the values only).

    Shapes, dtypes, determinism, gradients and errors: those of :func:`scatter_sum`, :func:`scatter_mul`,
    :func:`scatter_mean` and :func:`scatter_min` / :func:`scatter_max`; an unknown reduce raises ValueError.
    index may be a :class:`scatterx.IndexPlan` (rows along dim 0): no check and no grouping per call, results
    bit-identical to the call with the index."""
    if isinstance(index, IndexPlan):
        return _scatter_planned(src, index, dim, out, dim_size, reduce)
    if reduce in ("sum", "add"):
        return scatter_sum(src, index, dim, out, dim_size)
    if reduce == "mul":
        return scatter_mul(src, index, dim, out, dim_size)
    if reduce == "mean":
        return scatter_mean(src, index, dim, out, dim_size)
    if reduce in ("min", "max"):
        if out is None and not wants_grad(src):
            return extremum_values(src, index, dim, dim_size, reduce == "max")
        return (scatter_max if reduce == "max" else scatter_min)(src, index, dim, out, dim_size)[0]
    raise ValueError(f"scatter: expected reduce to be one of 'sum', 'add', 'mul', 'mean', 'min', 'max', got {reduce!r}")

"""segment_csr, segment_coo (and their _sum/_add/_mean/_min/_max forms), gather_csr and gather_coo with
torch_scatter 2.1.2's signatures and semantics. The reduced dim is indptr.dim() - 1 (index.dim() - 1).

Without out, all are differentiable in src, with torch_scatter's gradients: a sum spreads the gradient over
its segment (a mean divides it by the segment's length), min/max send it to the arg position, and a gather's
gradient is the segment sum of the gradient."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .. import _C
from ._common import (_TORCH, arg, arg_reduce, check_out, linear, merge_arg_out, refuse_grad, tensor,
                      wants_grad)

_REDUCES = ("sum", "add", "mean", "min", "max")
_CORE_REDUCE = {"sum": "sum", "add": "sum", "mean": "mean", "min": "amin", "max": "amax"}


def _reduce_name(op: str, reduce: str) -> str:
    if reduce not in _REDUCES:
        raise ValueError(f"{op}: expected reduce to be one of {', '.join(map(repr, _REDUCES))}, got {reduce!r}")
    return _CORE_REDUCE[reduce]


def _trailing(t: torch.Tensor, ndim: int) -> torch.Tensor:
    """t with size-1 dims appended up to ndim (per-segment counts against per-element values)."""
    return t.view(tuple(t.shape) + (1,) * (ndim - t.dim()))


def _csr_adjoint(op: str, grad: torch.Tensor, indptr: torch.Tensor, shape, mean: bool) -> torch.Tensor:
    """The gradient of a segment sum (mean) in src: each segment's gradient (over its length) repeated over it.
    One more segment, of gradient 0, runs from each row's last indptr value to src's end, so every row ends
    where src does (gather_csr's contract) and the slices no segment covers get 0."""
    dim = indptr.dim() - 1
    if mean:
        n = indptr.size(-1) - 1
        count = (indptr.narrow(-1, 1, n) - indptr.narrow(-1, 0, n)).clamp(min=1).to(grad.dtype)
        grad = grad / _trailing(count, grad.dim())
    end = indptr.new_full(tuple(indptr.shape[:-1]) + (1,), shape[dim])
    zero = list(grad.shape)
    zero[dim] = 1
    grad = torch.cat([grad, grad.new_zeros(zero)], dim)
    return _C.gather_csr(arg(grad, op, "grad"), arg(torch.cat([indptr, end], -1), op, "indptr"), _TORCH)


def _coo_adjoint(op: str, grad: torch.Tensor, index: torch.Tensor, shape, mean: bool) -> torch.Tensor:
    """The gradient of a segment_coo sum (mean) in src: the gradient of each element's segment (over its
    length)."""
    dim = index.dim() - 1
    index = index.expand(tuple(shape[:dim + 1]))
    if mean:
        count = _C.segment_coo(arg(grad.new_ones(index.shape), op, "grad"), arg(index, op, "index"), "sum",
                               grad.size(dim), False, _TORCH)
        grad = grad / _trailing(count.clamp(min=1), grad.dim())
    return _C.gather_coo(arg(grad, op, "grad"), arg(index, op, "index"), _TORCH)


def _csr(op: str, src, indptr, out, reduce: str, with_arg: bool):
    src, indptr = tensor(src), tensor(indptr)
    core = _reduce_name(op, reduce)

    def compute(s):
        return _C.segment_csr(arg(s, op, "src"), arg(indptr, op, "indptr"), core, with_arg, _TORCH)

    if out is None:
        if with_arg:
            return arg_reduce(src, indptr.dim() - 1, compute)
        return linear(src, compute, lambda grad: _csr_adjoint(op, grad, indptr, src.shape, core == "mean"))
    refuse_grad(op, src, out)
    result = compute(src)
    values = result[0] if with_arg else result
    check_out(op, out, values.shape)
    out.copy_(values)  # torch_scatter overwrites out
    return (out, result[1]) if with_arg else out


def segment_sum_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:torch_scatter:`segment_csr` with ``reduce="sum"``: ``out[..., n, ...]`` sums over ``src[..., indptr[...,
    n]:indptr[..., n + 1], ...]``. Shapes, dtypes, determinism and errors as :func:`segment_csr`."""
    return _csr("segment_sum_csr", src, indptr, out, "sum", False)


def segment_add_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:torch_scatter:`segment_csr` with ``reduce="add"``: ``out[..., n, ...]`` sums (segment_sum_csr under its
    other name) over ``src[..., indptr[..., n]:indptr[..., n + 1], ...]``. Shapes, dtypes, determinism and errors as
    :func:`segment_csr`."""
    return _csr("segment_add_csr", src, indptr, out, "sum", False)


def segment_mean_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:torch_scatter:`segment_csr` with ``reduce="mean"``: ``out[..., n, ...]`` averages (an integer mean floors;
    empty: 0) over ``src[..., indptr[..., n]:indptr[..., n + 1], ...]``. Shapes, dtypes, determinism and errors as
    :func:`segment_csr`."""
    return _csr("segment_mean_csr", src, indptr, out, "mean", False)


def segment_min_csr(src: torch.Tensor, indptr: torch.Tensor,
                    out: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:torch_scatter:`segment_csr` with ``reduce="min"``, returning ``(values, arg)``: the minimum of ``src[...,
    indptr[..., n]:indptr[..., n + 1], ...]`` and the position along dim it came from (the first in position order;
    an empty segment: value 0, arg ``src.size(dim)``). Shapes, dtypes, determinism and errors as
    :func:`segment_csr`."""
    return _csr("segment_min_csr", src, indptr, out, "min", True)


def segment_max_csr(src: torch.Tensor, indptr: torch.Tensor,
                    out: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:torch_scatter:`segment_csr` with ``reduce="max"``, returning ``(values, arg)``: the maximum of ``src[...,
    indptr[..., n]:indptr[..., n + 1], ...]`` and the position along dim it came from (the first in position order;
    an empty segment: value 0, arg ``src.size(dim)``). Shapes, dtypes, determinism and errors as
    :func:`segment_csr`."""
    return _csr("segment_max_csr", src, indptr, out, "max", True)


def segment_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None,
                reduce: str = "sum") -> torch.Tensor:
    """:torch_scatter:`segment_csr`: reduces src over the segments ``[indptr[..., n], indptr[..., n + 1])``.

    The reduced dim is ``indptr.dim() - 1``; indptr's leading dims are src's (size 1 broadcasts). The result
    is src's shape with that dim of size ``indptr.size(-1) - 1``; with ``out`` it is written into out (which
    it overwrites, as torch_scatter). ``reduce`` is ``"sum"``/``"add"``, ``"mean"``, ``"min"`` or ``"max"``
    (values only; the ``segment_min_csr`` forms also return the arg). An empty segment gives 0.
    dtypes: src any torch dtype with that reduce (16-bit floats accumulate in float, integer means floor,
    min/max propagate NaN); indptr int32 or int64, non-decreasing, values in ``[0, src.size(dim)]``.
    Deterministic on CPU and CUDA. Differentiable in src without out. Errors: ValueError (shapes, an
    unsorted indptr, reduce), IndexError (an indptr value out of range), TypeError (dtypes; an input that
    requires grad with out).
    """
    if reduce in ("min", "max"):
        # The arg routes a gradient (no out) or merges with out's values: without either, the values alone.
        with_arg = out is not None or wants_grad(src)
        result = _csr("segment_csr", src, indptr, out, reduce, with_arg)
        return result[0] if with_arg else result
    return _csr("segment_csr", src, indptr, out, reduce, False)


def _coo(op: str, src, index, out, dim_size, reduce: str, with_arg: bool):
    src, index = tensor(src), tensor(index)
    core = _reduce_name(op, reduce)
    dim = index.dim() - 1
    size = out.size(dim) if out is not None else (-1 if dim_size is None else dim_size)

    def compute(s, reduce_as=core):
        return _C.segment_coo(arg(s, op, "src"), arg(index, op, "index"), reduce_as, size, with_arg, _TORCH)

    if out is None:
        if with_arg:
            return arg_reduce(src, dim, compute)
        return linear(src, compute, lambda grad: _coo_adjoint(op, grad, index, src.shape, core == "mean"))
    refuse_grad(op, src, out)
    result = compute(src, "sum" if core == "mean" else core)
    values = result[0] if with_arg else result
    check_out(op, out, values.shape)
    if with_arg:  # out's values take part: a reduced value replaces one only when strictly better
        return merge_arg_out(out, values, result[1], src.size(dim), core == "amax")
    if core == "sum":
        return out.add_(values)
    # mean: rows that got values become (out + sum) / count, the others keep out's value
    ones = torch.ones(index.shape[:dim] + src.shape[dim:dim + 1], dtype=src.dtype, device=src.device)
    count = _C.segment_coo(arg(ones, op, "src"), arg(index, op, "index"), "sum", size, False, _TORCH)
    count = count.view(tuple(count.shape) + (1,) * (src.dim() - count.dim())).expand_as(out)
    total = out + values
    mean = total / count.clamp(min=1) if out.is_floating_point() else torch.div(total, count.clamp(min=1),
                                                                                   rounding_mode="floor")
    return out.copy_(torch.where(count > 0, mean, out))


def segment_sum_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`segment_coo` with ``reduce="sum"``: ``out[..., n, ...]`` sums over the ``src[..., e, ...]``
    whose ``index[..., e] == n``. Shapes, dtypes, determinism and errors as :func:`segment_coo`."""
    return _coo("segment_sum_coo", src, index, out, dim_size, "sum", False)


def segment_add_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`segment_coo` with ``reduce="add"``: ``out[..., n, ...]`` sums (segment_sum_coo under its
    other name) over the ``src[..., e, ...]`` whose ``index[..., e] == n``. Shapes, dtypes, determinism and errors
    as :func:`segment_coo`."""
    return _coo("segment_add_coo", src, index, out, dim_size, "sum", False)


def segment_mean_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                     dim_size: Optional[int] = None) -> torch.Tensor:
    """:torch_scatter:`segment_coo` with ``reduce="mean"``: ``out[..., n, ...]`` averages (an integer mean floors;
    empty: 0) over the ``src[..., e, ...]`` whose ``index[..., e] == n``. Shapes, dtypes, determinism and errors as
    :func:`segment_coo`."""
    return _coo("segment_mean_coo", src, index, out, dim_size, "mean", False)


def segment_min_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:torch_scatter:`segment_coo` with ``reduce="min"``, returning ``(values, arg)``: the minimum of the
    ``src[..., e, ...]`` whose ``index[..., e] == n`` and the position along dim it came from (the first in position
    order; an empty segment: value 0, arg ``src.size(dim)``). Shapes, dtypes, determinism and errors as
    :func:`segment_coo`."""
    return _coo("segment_min_coo", src, index, out, dim_size, "min", True)


def segment_max_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:torch_scatter:`segment_coo` with ``reduce="max"``, returning ``(values, arg)``: the maximum of the
    ``src[..., e, ...]`` whose ``index[..., e] == n`` and the position along dim it came from (the first in position
    order; an empty segment: value 0, arg ``src.size(dim)``). Shapes, dtypes, determinism and errors as
    :func:`segment_coo`."""
    return _coo("segment_max_coo", src, index, out, dim_size, "max", True)


def segment_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None, reduce: str = "sum") -> torch.Tensor:
    """:torch_scatter:`segment_coo`: reduces src over runs of equal values of the sorted index.

    The reduced dim is ``index.dim() - 1``, with ``index.size(dim) == src.size(dim)`` and index's leading dims
    src's (size 1 broadcasts); ``out[..., n, ...]`` reduces the ``src[..., e, ...]`` whose
    ``index[..., e] == n``. The result is src's shape with that dim of size ``dim_size`` (default
    ``index.max() + 1``), or out's; with ``out``, out's values take part (sum adds to it; mean averages out's
    value with the segment's; min/max replace it only by a strictly better value). ``reduce`` as
    :func:`segment_csr`; an empty segment gives 0 (or keeps out's value). dtypes: as :func:`segment_csr`, index
    int32 or int64, non-decreasing along dim (checked; torch_scatter leaves it undefined). Deterministic on
    CPU and CUDA. Differentiable in src without out. Errors: ValueError (shapes, an unsorted index, reduce),
    IndexError (an index value out of range), TypeError (dtypes; an input that requires grad with out).
    """
    if reduce in ("min", "max"):
        with_arg = out is not None or wants_grad(src)  # as segment_csr
        result = _coo("segment_coo", src, index, out, dim_size, reduce, with_arg)
        return result[0] if with_arg else result
    return _coo("segment_coo", src, index, out, dim_size, reduce, False)


def gather_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:torch_scatter:`torch_scatter.gather_csr <segment_csr>`: repeats src's slice n along dim over ``[indptr[...,
    n], indptr[..., n + 1])``.

    The dim is ``indptr.dim() - 1``; ``src.size(dim) == indptr.size(-1) - 1`` and the result's size along dim is
    indptr's last value. Positions no segment covers are 0 (torch_scatter leaves them uninitialized); with ``out``
    they keep out's value. Any dtype; indptr int32/int64, non-decreasing. A copy: deterministic. Differentiable in
    src without out (its gradient is the segment sum). Errors: ValueError (shapes, an unsorted indptr), IndexError
    (indptr out of range), TypeError (dtypes; grad with out).
    """
    op = "gather_csr"
    src, indptr = tensor(src), tensor(indptr)
    if out is None:
        return linear(src, lambda s: _C.gather_csr(arg(s, op, "src"), arg(indptr, op, "indptr"), _TORCH),
                      lambda grad: _C.segment_csr(arg(grad, op, "grad"), arg(indptr, op, "indptr"), "sum", False,
                                                  _TORCH))
    refuse_grad(op, src, out)
    result = _C.gather_csr(arg(src, op, "src"), arg(indptr, op, "indptr"), _TORCH)
    dim = indptr.dim() - 1  # out's length along dim may exceed indptr's last value (the rest is kept)
    length = result.size(dim)
    if out.dim() != result.dim() or length > out.size(dim):
        check_out(op, out, result.shape)
    region = out.narrow(dim, 0, length)
    check_out(op, region, result.shape)
    covered = _C.gather_csr(arg(torch.ones(src.shape, dtype=torch.bool, device=src.device), op, "src"),
                            arg(indptr, op, "indptr"), _TORCH)
    region.copy_(torch.where(covered, result, region))
    return out


def gather_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:torch_scatter:`torch_scatter.gather_coo <segment_coo>`: ``out[..., e, ...] = src[..., index[..., e], ...]``
    along dim ``index.dim() - 1``.

    The result is src's shape with that dim of index's size (or written into ``out`` of that shape); index's leading
    dims are src's, its values in ``[0, src.size(dim))`` (any order). Any dtype; index int32/int64. A copy:
    deterministic. Differentiable in src without out (its gradient is the segment_coo sum). Errors: ValueError
    (shapes), IndexError (an index out of range), TypeError (dtypes; grad with out).
    """
    op = "gather_coo"
    src, index = tensor(src), tensor(index)
    size = src.size(index.dim() - 1)
    if out is None:
        return linear(src, lambda s: _C.gather_coo(arg(s, op, "src"), arg(index, op, "index"), _TORCH),
                      lambda grad: _C.segment_coo(arg(grad, op, "grad"), arg(index, op, "index"), "sum", size, False,
                                                  _TORCH))
    refuse_grad(op, src, out)
    result = _C.gather_coo(arg(src, op, "src"), arg(index, op, "index"), _TORCH)
    check_out(op, out, result.shape)
    return out.copy_(result)

"""segment_csr, segment_coo (and their _sum/_add/_mean/_min/_max forms), gather_csr and gather_coo with
torch_scatter 2.1.2's signatures and semantics. The reduced dim is indptr.dim() - 1 (index.dim() - 1)."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .. import _C
from ._common import _TORCH, check_out, merge_arg_out, raw, refuse_grad, tensor

_REDUCES = ("sum", "add", "mean", "min", "max")
_CORE_REDUCE = {"sum": "sum", "add": "sum", "mean": "mean", "min": "amin", "max": "amax"}


def _reduce_name(op: str, reduce: str) -> str:
    if reduce not in _REDUCES:
        raise ValueError(f"{op}: expected reduce to be one of {', '.join(map(repr, _REDUCES))}, got {reduce!r}")
    return _CORE_REDUCE[reduce]


def _csr(op: str, src, indptr, out, reduce: str, with_arg: bool):
    src, indptr = tensor(src), tensor(indptr)
    refuse_grad(op, src, out)
    result = _C.segment_csr(raw(src, op, "src"), raw(indptr, op, "indptr"), _reduce_name(op, reduce), with_arg,
                            _TORCH)
    if out is None:
        return result
    values = result[0] if with_arg else result
    check_out(op, out, values.shape)
    out.copy_(values)  # torch_scatter overwrites out
    return (out, result[1]) if with_arg else out


def segment_sum_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    return _csr("segment_sum_csr", src, indptr, out, "sum", False)


def segment_add_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    return _csr("segment_add_csr", src, indptr, out, "sum", False)


def segment_mean_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    return _csr("segment_mean_csr", src, indptr, out, "mean", False)


def segment_min_csr(src: torch.Tensor, indptr: torch.Tensor,
                    out: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    return _csr("segment_min_csr", src, indptr, out, "min", True)


def segment_max_csr(src: torch.Tensor, indptr: torch.Tensor,
                    out: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    return _csr("segment_max_csr", src, indptr, out, "max", True)


def segment_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None,
                reduce: str = "sum") -> torch.Tensor:
    """Reduces src over the segments [indptr[n], indptr[n + 1]) along dim indptr.dim() - 1 (empty: 0)."""
    if reduce in ("min", "max"):
        return _csr("segment_csr", src, indptr, out, reduce, True)[0]
    return _csr("segment_csr", src, indptr, out, reduce, False)


def _coo(op: str, src, index, out, dim_size, reduce: str, with_arg: bool):
    src, index = tensor(src), tensor(index)
    refuse_grad(op, src, out)
    core = _reduce_name(op, reduce)
    dim = index.dim() - 1
    size = out.size(dim) if out is not None else (-1 if dim_size is None else dim_size)
    s, i = raw(src, op, "src"), raw(index, op, "index")
    result = _C.segment_coo(s, i, "sum" if core == "mean" and out is not None else core, size, with_arg, _TORCH)
    if out is None:
        return result
    values = result[0] if with_arg else result
    check_out(op, out, values.shape)
    if with_arg:  # out's values take part: a reduced value replaces one only when strictly better
        return merge_arg_out(out, values, result[1], src.size(dim), core == "amax")
    if core == "sum":
        return out.add_(values)
    # mean: rows that got values become (out + sum) / count, the others keep out's value
    ones = torch.ones(index.shape[:dim] + src.shape[dim:dim + 1], dtype=src.dtype, device=src.device)
    count = _C.segment_coo(raw(ones, op, "src"), i, "sum", size, False, _TORCH)
    count = count.view(tuple(count.shape) + (1,) * (src.dim() - count.dim())).expand_as(out)
    total = out + values
    mean = total / count.clamp(min=1) if out.is_floating_point() else torch.div(total, count.clamp(min=1),
                                                                                   rounding_mode="floor")
    return out.copy_(torch.where(count > 0, mean, out))


def segment_sum_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> torch.Tensor:
    return _coo("segment_sum_coo", src, index, out, dim_size, "sum", False)


def segment_add_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> torch.Tensor:
    return _coo("segment_add_coo", src, index, out, dim_size, "sum", False)


def segment_mean_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                     dim_size: Optional[int] = None) -> torch.Tensor:
    return _coo("segment_mean_coo", src, index, out, dim_size, "mean", False)


def segment_min_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    return _coo("segment_min_coo", src, index, out, dim_size, "min", True)


def segment_max_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                    dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    return _coo("segment_max_coo", src, index, out, dim_size, "max", True)


def segment_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None,
                dim_size: Optional[int] = None, reduce: str = "sum") -> torch.Tensor:
    """Reduces src over runs of equal values of the sorted index along dim index.dim() - 1."""
    if reduce in ("min", "max"):
        return _coo("segment_coo", src, index, out, dim_size, reduce, True)[0]
    return _coo("segment_coo", src, index, out, dim_size, reduce, False)


def gather_csr(src: torch.Tensor, indptr: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Repeats src's row n over [indptr[n], indptr[n + 1]); positions no segment covers are 0 (with out: kept)."""
    op = "gather_csr"
    src, indptr = tensor(src), tensor(indptr)
    refuse_grad(op, src, out)
    s, p = raw(src, op, "src"), raw(indptr, op, "indptr")
    result = _C.gather_csr(s, p, _TORCH)
    if out is None:
        return result
    dim = indptr.dim() - 1  # out's length along dim may exceed indptr's last value (the rest is kept)
    length = result.size(dim)
    if out.dim() != result.dim() or length > out.size(dim):
        check_out(op, out, result.shape)
    region = out.narrow(dim, 0, length)
    check_out(op, region, result.shape)
    covered = _C.gather_csr(torch.ones(src.shape, dtype=torch.bool, device=src.device), p, _TORCH)
    region.copy_(torch.where(covered, result, region))
    return out


def gather_coo(src: torch.Tensor, index: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """out[..., e, ...] = src[..., index[..., e], ...] along dim index.dim() - 1."""
    op = "gather_coo"
    src, index = tensor(src), tensor(index)
    refuse_grad(op, src, out)
    result = _C.gather_coo(raw(src, op, "src"), raw(index, op, "index"), _TORCH)
    if out is None:
        return result
    check_out(op, out, result.shape)
    return out.copy_(result)

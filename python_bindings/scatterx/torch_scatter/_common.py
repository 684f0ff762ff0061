"""Shared pieces of scatterx.torch_scatter: argument conversion, torch_scatter's index broadcast, grad refusal."""

from __future__ import annotations

from typing import Optional

import torch

from .. import _C, _ops

_TORCH = _C.Framework.Torch


def tensor(x) -> torch.Tensor:
    """A torch tensor (numpy arrays are wrapped without a copy)."""
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x)


def raw(x: torch.Tensor, op: str, name: str) -> torch.Tensor:
    """What the compiled core reads (detached, on the caller's stream)."""
    return _ops._raw(x, op, name)


def refuse_grad(op: str, *tensors) -> None:
    """scatterx has no gradient for `op`: refuse inputs that need one rather than dropping it."""
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors):
        raise TypeError(
            f"{op}: expected inputs that do not require grad (scatterx.torch_scatter has no gradient for {op}; "
            "scatter_sum, scatter_mean and the composites have one), got one that does; call .detach() on it"
        )


def broadcast(src: torch.Tensor, other: torch.Tensor, dim: int) -> torch.Tensor:
    """torch_scatter's rule: a 1-d src lines up with dim of other; missing trailing dims are added; then expand."""
    if dim < 0:
        dim += other.dim()
    if src.dim() == 1:
        src = src.view((1,) * dim + (-1,))
    if src.dim() < other.dim():
        src = src.view(tuple(src.shape) + (1,) * (other.dim() - src.dim()))
    return src.expand(other.size())


def output_size(src: torch.Tensor, index: torch.Tensor, dim: int, dim_size: Optional[int]) -> list:
    """src's size with dim replaced by dim_size, or index.max() + 1 (0 for an empty index)."""
    size = list(src.size())
    if dim_size is not None:
        size[dim] = dim_size
    elif index.numel() == 0:
        size[dim] = 0
    else:
        size[dim] = int(index.max()) + 1
    return size


def check_out(op: str, out: torch.Tensor, shape) -> None:
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{op}: expected out of shape {list(shape)}, got {list(out.shape)}")


def merge_arg_out(out: torch.Tensor, values: torch.Tensor, args: torch.Tensor, fill: int, is_max: bool):
    """torch_scatter's min/max into a given out: out's value is the start, a reduced value replaces it only
    when strictly better (and its arg then comes along; otherwise the arg is `fill`)."""
    found = args != fill
    better = found & (values > out if is_max else values < out)
    out.copy_(torch.where(better, values, out))
    return out, torch.where(better, args, torch.full_like(args, fill))

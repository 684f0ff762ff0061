"""scatter_softmax, scatter_log_softmax, scatter_logsumexp and scatter_std as torch_scatter 2.1.2 composes
them. The per-position maximum only shifts values for stability (the result does not depend on it), so it
is taken without a gradient; the sums go through the differentiable scatter_sum, so all four have
gradients in src."""

from __future__ import annotations

from typing import Optional

import torch

from ._common import broadcast, tensor, wants_grad
from ._scatter import extremum_values, scatter_max, scatter_sum


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


def scatter_softmax(src: torch.Tensor, index: torch.Tensor, dim: int = -1,
                    dim_size: Optional[int] = None) -> torch.Tensor:
    """Softmax over the values that share a position: exp(src - max) / sum(exp(src - max))."""
    src, index = tensor(src), tensor(index)
    _floating("scatter_softmax", src)
    at = _Positions(index, src, dim)
    if not wants_grad(src):  # nothing to record: one [E, F] temporary, updated in place
        exp = _shifted(src, at, dim_size).exp_()
        return exp.div_(at.take(scatter_sum(exp, at.index, at.dim, dim_size=dim_size)))
    exp = _shifted(src, at, dim_size).exp()
    return exp / at.take(scatter_sum(exp, at.index, at.dim, dim_size=dim_size))


def scatter_log_softmax(src: torch.Tensor, index: torch.Tensor, dim: int = -1, eps: float = 1e-12,
                        dim_size: Optional[int] = None) -> torch.Tensor:
    """Log-softmax over the values that share a position: (src - max) - log(sum(exp(src - max)) + eps)."""
    src, index = tensor(src), tensor(index)
    _floating("scatter_log_softmax", src)
    at = _Positions(index, src, dim)
    shifted = _shifted(src, at, dim_size)
    total = scatter_sum(shifted.exp(), at.index, at.dim, dim_size=dim_size)
    return shifted - at.take((total + eps).log())


def scatter_logsumexp(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None,
                      dim_size: Optional[int] = None, eps: float = 1e-12) -> torch.Tensor:
    """log(sum(exp(src)) + eps) per position, computed around the maximum. Without out an empty position is 0;
    with out, out's value takes part (as one more exp term) and non-finite results keep out's value."""
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
    """Standard deviation of the values that share a position: sqrt(sum((src - mean)^2) / (count - unbiased)),
    the counts clamped to at least 1; with out, the squared deviations are added to out's values."""
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

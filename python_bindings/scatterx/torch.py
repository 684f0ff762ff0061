"""Differentiable scatterx ops for PyTorch training.

``scatterx.gather``, ``index_select``, ``scatter_add``, ``scatter_reduce``
(sum, mean, amax, amin) and ``index_add`` route here by themselves when a
torch input requires grad; these functions can also be called directly.
The gradients follow torch's definitions, including its tie rule for
amax/amin (the gradient is shared evenly among the elements, self included
when ``include_self``, that equal the result). Backward passes run on the
scatterx kernels too.
"""

from __future__ import annotations

import torch

from . import _ops

__all__ = ["gather", "index_select", "scatter_add", "scatter_reduce", "index_add"]

_DIFFERENTIABLE_REDUCES = ("sum", "mean", "amax", "amin")


def _tensor(x, like: torch.Tensor) -> torch.Tensor:
    """An index or source given as a numpy array, as a tensor (zero-copy) on like's device."""
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x, device=like.device)


def _region(t: torch.Tensor, shape) -> torch.Tensor:
    """The leading corner of t with the given shape (an index may be smaller than src)."""
    return t[tuple(slice(0, s) for s in shape)]


def _embed(part: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """part placed in the leading corner of zeros shaped like `like`."""
    if part.shape == like.shape:
        return part
    full = like.new_zeros(like.shape)
    _region(full, part.shape).copy_(part)
    return full


def _hit_mask(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """True where some index value lands."""
    return _ops.scatter(torch.zeros(input.shape, dtype=torch.bool), dim, index, True)


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, dim, index):
        ctx.dim = dim
        ctx.input_shape = input.shape
        ctx.save_for_backward(index)
        return _ops.gather(input, dim, index)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        grad_input = _ops.scatter_add(grad.new_zeros(ctx.input_shape), ctx.dim, index, grad)
        return grad_input, None, None


class _IndexSelect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, dim, index):
        ctx.dim = dim
        ctx.input_shape = input.shape
        ctx.save_for_backward(index)
        return _ops.index_select(input, dim, index)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        grad_input = _ops.index_add(grad.new_zeros(ctx.input_shape), ctx.dim, index, grad)
        return grad_input, None, None


class _IndexAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, dim, index, source, alpha):
        ctx.dim = dim
        ctx.alpha = alpha
        ctx.save_for_backward(index)
        return _ops.index_add(input, dim, index, source, alpha=alpha)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        grad_source = None
        if ctx.needs_input_grad[3]:
            grad_source = _ops.index_select(grad, ctx.dim, index)
            if ctx.alpha != 1:
                grad_source = grad_source * ctx.alpha
        return grad, None, None, grad_source, None


class _ScatterReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, dim, index, src, reduce, include_self):
        out = _ops.scatter_reduce(input, dim, index, src, reduce, include_self=include_self)
        ctx.dim = dim
        ctx.reduce = reduce
        ctx.include_self = include_self
        ctx.save_for_backward(input, index, src, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        input, index, src, out = ctx.saved_tensors
        dim, reduce, include_self = ctx.dim, ctx.reduce, ctx.include_self
        hit = None if include_self else _hit_mask(input, dim, index)
        if reduce == "sum":
            grad_input = grad if include_self else grad.masked_fill(hit, 0)
            grad_src = _ops.gather(grad, dim, index)
        elif reduce == "mean":
            # values folded into each position: self (when included) plus its hits
            start = torch.full(input.shape, 1 if include_self else 0, dtype=grad.dtype)
            count = _ops.scatter_add(start, dim, index, torch.ones(index.shape, dtype=grad.dtype))
            scaled = grad / count.clamp(min=1)
            grad_input = scaled if include_self else grad.masked_fill(hit, 0)
            grad_src = _ops.gather(scaled, dim, index)
        else:  # amax / amin: share the gradient among the elements equal to the result
            src_part = _region(src, index.shape)
            src_wins = src_part == _ops.gather(out, dim, index)
            self_wins = input == out
            if not include_self:
                self_wins = self_wins & ~hit
            winners = _ops.scatter_add(self_wins.to(grad.dtype), dim, index, src_wins.to(grad.dtype))
            shared = grad / winners.clamp(min=1)
            grad_input = shared.masked_fill(~self_wins, 0)
            grad_src = _ops.gather(shared, dim, index).masked_fill(~src_wins, 0)
        return grad_input, None, None, _embed(grad_src, src), None, None


def gather(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """Differentiable torch.gather on the scatterx kernels."""
    return _Gather.apply(input, dim, _tensor(index, input))


def index_select(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """Differentiable torch.index_select on the scatterx kernels."""
    return _IndexSelect.apply(input, dim, _tensor(index, input))


def index_add(input: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, *, alpha=1) -> torch.Tensor:
    """Differentiable torch.index_add on the scatterx kernels."""
    return _IndexAdd.apply(input, dim, _tensor(index, input), _tensor(source, input), alpha)


def scatter_add(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Differentiable torch.scatter_add on the scatterx kernels."""
    return _ScatterReduce.apply(input, dim, _tensor(index, input), _tensor(src, input), "sum", True)


def scatter_reduce(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, reduce: str, *,
                   include_self: bool = True) -> torch.Tensor:
    """Differentiable torch.scatter_reduce on the scatterx kernels (sum, mean, amax, amin)."""
    if reduce not in _DIFFERENTIABLE_REDUCES:
        raise TypeError(
            f"scatter_reduce: expected a reduce scatterx has a gradient for ({', '.join(_DIFFERENTIABLE_REDUCES)}), "
            f"got {reduce!r}; call .detach() on the inputs or use torch.scatter_reduce"
        )
    return _ScatterReduce.apply(input, dim, _tensor(index, input), _tensor(src, input), reduce, include_self)

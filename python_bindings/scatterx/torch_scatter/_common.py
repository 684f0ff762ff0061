"""Shared pieces of scatterx.torch_scatter: argument conversion, torch_scatter's index broadcast, grad refusal."""

from __future__ import annotations

from typing import Optional

import torch

from .. import _C, _ops

_TORCH = _C.Framework.Torch


def tensor(x) -> torch.Tensor:
    """A torch tensor (numpy arrays are wrapped without a copy)."""
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x)


def arg(x: torch.Tensor, op: str, name: str):
    """What the compiled core reads, for one call (detached, on the caller's stream; a CPU tensor as its DLPack
    capsule, which one call consumes: convert per call, never once for several)."""
    return _ops._arg(x, op, name)


def on_cpu_or_cuda(t: torch.Tensor) -> bool:
    """Whether t is on the CPU or a CUDA device (what the fused kernels take)."""
    return t.is_cpu or t.is_cuda


def on_one_device(src: torch.Tensor, index: torch.Tensor) -> bool:
    """Whether src is on the CPU or a CUDA device and index on that same device. is_cpu / is_cuda and
    get_device() read in 0.05 us each what device.type and a comparison of devices take 0.35 us for: on small
    graphs the fast paths' tests were a tenth of the call."""
    if src.is_cpu:
        return index.is_cpu
    return src.is_cuda and index.is_cuda and src.get_device() == index.get_device()


def wants_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def refuse_grad(op: str, *tensors) -> None:
    """Called with out= given: the result is written into out, so refuse inputs that need a gradient rather
    than drop it."""
    if wants_grad(*tensors):
        raise TypeError(
            f"{op}: expected inputs that do not require grad when out is given (scatterx.torch_scatter records "
            "gradients for calls without out), got one that does; call .detach() on it or leave out out"
        )


class _Linear(torch.autograd.Function):
    """src -> apply(src) for a map linear in src; its gradient is adjoint(grad)."""

    @staticmethod
    def forward(ctx, src, apply, adjoint):
        ctx.adjoint = adjoint
        return apply(src)

    @staticmethod
    def backward(ctx, grad):
        return ctx.adjoint(grad), None, None


def linear(src: torch.Tensor, apply, adjoint) -> torch.Tensor:
    """apply(src), recorded for autograd with the given adjoint when src requires grad."""
    return _Linear.apply(src, apply, adjoint) if wants_grad(src) else apply(src)


class _ArgReduce(torch.autograd.Function):
    """(values, arg) of a min/max along dim; torch_scatter's gradient: grad goes to src at arg, and the empty
    positions' arg (src.size(dim)) lands in an extra slice that is dropped."""

    @staticmethod
    def forward(ctx, src, dim, compute):
        values, args = compute(src)
        ctx.mark_non_differentiable(args)
        ctx.save_for_backward(args)
        ctx.dim, ctx.src_shape = dim, src.shape
        return values, args

    @staticmethod
    def backward(ctx, grad, _):
        (args,) = ctx.saved_tensors
        dim, shape = ctx.dim, list(ctx.src_shape)
        length = shape[dim]
        shape[dim] += 1
        spread = _ops.scatter(grad.new_zeros(shape), dim, args, grad)
        return spread.narrow(dim, 0, length), None, None


def arg_reduce(src: torch.Tensor, dim: int, compute):
    """compute(src) = (values, arg), recorded for autograd when src requires grad."""
    return _ArgReduce.apply(src, dim, compute) if wants_grad(src) else compute(src)


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

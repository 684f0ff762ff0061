"""Differentiable scatterx ops for PyTorch training.

``scatterx.gather``, ``index_select``, ``scatter_add``, ``scatter_reduce``,
``index_add``, ``index_add_weighted`` (input, source and weights) and
``index_reduce`` (every reduce) route here by themselves when a torch input
requires grad, and so do their in-place forms (``in_place=True`` here:
the write is recorded, and the backward sees the values from before it);
these functions can also be called directly. The gradients
follow torch's definitions: prod's with zeros (the product of the other
factors), and the tie rule of amax/amin (the gradient is shared evenly
among the elements, self included when ``include_self``, that equal the
result). Backward passes run on the scatterx kernels too, and every tensor
they create is on the input's device.
"""

from __future__ import annotations

import torch

from . import _ops
from ._plan import IndexPlan

__all__ = ["gather", "index_select", "scatter_add", "scatter_reduce", "index_add", "index_add_weighted",
           "index_reduce", "gather_scatter"]


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


class _Along:
    """How one op family reaches the positions it reduces into: scatter_* elementwise through an index shaped
    like src, index_* by whole slices along dim. The backward passes are written once over these four moves."""

    def __init__(self, dim: int, index: torch.Tensor, slices: bool):
        self.dim, self.index, self.slices = dim, index, slices

    def pick(self, t: torch.Tensor) -> torch.Tensor:
        """t's values at the positions each src element reduces into (shaped like src)."""
        return _ops.index_select(t, self.dim, self.index) if self.slices else _ops.gather(t, self.dim, self.index)

    def add(self, base: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """base plus values summed into their positions."""
        if self.slices:
            return _ops.index_add(base, self.dim, self.index, values)
        return _ops.scatter_add(base, self.dim, self.index, values)

    def reduce(self, base: torch.Tensor, values: torch.Tensor, reduce: str, include_self: bool) -> torch.Tensor:
        if self.slices:
            return _ops.index_reduce(base, self.dim, self.index, values, reduce, include_self=include_self)
        return _ops.scatter_reduce(base, self.dim, self.index, values, reduce, include_self=include_self)

    def hit(self, input: torch.Tensor) -> torch.Tensor:
        """True where some index value lands (on input's device)."""
        if not self.slices:
            return _hit_mask(input, self.dim, self.index)
        rows = input.new_zeros(input.shape[self.dim] if input.dim() else 1, dtype=torch.bool)
        rows[self.index.reshape(-1).long()] = True
        shape = [1] * input.dim()
        if shape:
            shape[self.dim] = -1
        return rows.view(shape)


def _hit_mask(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """True where some index value lands (on input's device)."""
    return _ops.scatter(input.new_zeros(input.shape, dtype=torch.bool), dim, index, True)


def _reduce_backward(along: _Along, grad, input, src, out, reduce: str, include_self: bool):
    """(grad of input, grad of src) of a reduce of src into input, torch's rules (src shaped like the index
    for scatter, like the source for index ops). Every helper tensor is made on grad's device."""
    if reduce == "sum":
        grad_input, grad_src = grad, along.pick(grad)
    elif reduce == "mean":  # values folded into each position: self (when included) plus its hits
        count = along.add(grad.new_full(input.shape, 1 if include_self else 0), grad.new_ones(src.shape))
        grad_input = grad / count.clamp(min=1)
        grad_src = along.pick(grad_input)
    elif reduce == "prod":
        # d out / d x is the product of the other factors: out / x where x != 0; where x == 0, the product
        # recomputed with x taken as 1 (zero again when another factor is zero too)
        nonzero_input = input.masked_fill(input == 0, 1)
        grad_input = grad * along.reduce(nonzero_input, src, "prod", include_self) / nonzero_input
        src_zero = src == 0
        zeros_there = along.pick(along.add(grad.new_zeros(input.shape), src_zero.to(grad.dtype)))
        lone_zero = src_zero & (zeros_there == 1)
        others = along.reduce(input, src.masked_fill(lone_zero, 1), "prod", include_self)
        grad_src = torch.where(lone_zero, along.pick(grad * others),
                               along.pick(grad * out) / src.masked_fill(src_zero, 1))
    else:  # amax / amin: share the gradient among the elements equal to the result
        src_wins = src == along.pick(out)
        self_wins = input == out
        if not include_self:
            self_wins = self_wins & ~along.hit(input)
        winners = along.add(self_wins.to(grad.dtype), src_wins.to(grad.dtype))
        shared = grad / winners.clamp(min=1)
        grad_input = shared.masked_fill(~self_wins, 0)
        grad_src = along.pick(shared).masked_fill(~src_wins, 0)
    if not include_self:
        grad_input = grad_input.masked_fill(along.hit(input), 0)
    return grad_input, grad_src


def _write(ctx, op, input, *args, **kwargs):
    """op(input, ...); an in-place op (its result is input) marks input as modified for autograd."""
    out = op(input, *args, **kwargs)
    if out is input:
        ctx.mark_dirty(input)
    return out


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
    def forward(ctx, input, dim, index, source, alpha, in_place):
        ctx.dim = dim
        ctx.alpha = alpha
        ctx.save_for_backward(index)
        return _write(ctx, _ops.index_add_ if in_place else _ops.index_add, input, dim, index, source, alpha=alpha)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        grad_source = None
        if ctx.needs_input_grad[3]:
            grad_source = _ops.index_select(grad, ctx.dim, index)
            if ctx.alpha != 1:
                grad_source = grad_source * ctx.alpha
        return grad, None, None, grad_source, None, None


class _Reduce(torch.autograd.Function):
    """scatter_reduce (slices=False: src reduced elementwise through an index shaped like it) and
    index_reduce (slices=True: source's slices along dim)."""

    @staticmethod
    def forward(ctx, input, dim, index, src, reduce, include_self, slices, in_place):
        original = input.clone() if in_place else input  # the backward needs the values before the write
        op = {(False, False): _ops.scatter_reduce, (False, True): _ops.scatter_reduce_,
              (True, False): _ops.index_reduce, (True, True): _ops.index_reduce_}[slices, in_place]
        out = _write(ctx, op, input, dim, index, src, reduce, include_self=include_self)
        ctx.dim, ctx.reduce, ctx.include_self, ctx.slices = dim, reduce, include_self, slices
        ctx.save_for_backward(original, index, src, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        input, index, src, out = ctx.saved_tensors
        part = src if ctx.slices else _region(src, index.shape)
        grad_input, grad_src = _reduce_backward(_Along(ctx.dim, index, ctx.slices), grad, input, part, out,
                                                ctx.reduce, ctx.include_self)
        return grad_input, None, None, _embed(grad_src, src), None, None, None, None


def _along_dim(weights: torch.Tensor, dim: int, ndim: int) -> torch.Tensor:
    """A 1-d tensor viewed to broadcast along dim of an ndim-d tensor."""
    shape = [1] * ndim
    if ndim:
        shape[dim] = -1
    return weights.reshape(shape)


class _IndexAddWeighted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, dim, index, source, weights, in_place):
        ctx.dim = dim
        ctx.save_for_backward(index, source, weights)
        op = _ops.index_add_weighted_ if in_place else _ops.index_add_weighted
        return _write(ctx, op, input, dim, index, source, weights)

    @staticmethod
    def backward(ctx, grad):
        index, source, weights = ctx.saved_tensors
        dim = ctx.dim
        grad_source = grad_weights = None
        if ctx.needs_input_grad[3] or ctx.needs_input_grad[4]:
            picked = _ops.index_select(grad, dim, index)  # grad of each weighted row
            if ctx.needs_input_grad[3]:
                grad_source = picked * _along_dim(weights, dim, source.dim())
            if ctx.needs_input_grad[4]:  # weights[i] scales the whole slice i: sum its products
                others = [d for d in range(source.dim()) if d != dim]
                grad_weights = (picked * source).sum(others).reshape(weights.shape) if others else \
                    (picked * source).reshape(weights.shape)
        return grad, None, None, grad_source, grad_weights, None


class _GatherScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, src_index, dst, reduce, edge_weight, dim_size):
        out = _ops.gather_scatter(x, src_index, dst, reduce, edge_weight=edge_weight, dim_size=dim_size)
        ctx.reduce = reduce
        # A plan keeps its index tensor: the backward passes read the destinations from it (and mean's
        # counts from the plan itself, on its device).
        ctx.plan = dst if isinstance(dst, IndexPlan) else None
        dst_index = _tensor(dst.index, x) if ctx.plan is not None else dst
        ctx.save_for_backward(x, src_index, dst_index, edge_weight, out if reduce in ("amax", "amin") else None)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, src_index, dst_index, edge_weight, out = ctx.saved_tensors
        if ctx.reduce in ("amax", "amin"):
            return _extremum_backward(ctx, grad, x, src_index, dst_index, edge_weight, out)
        if ctx.reduce == "mean":  # each edge's share of its row: grad / (edges into the row, at least 1)
            if ctx.plan is not None:
                counts = _tensor(ctx.plan.counts(), grad).clamp_(min=1)
            else:
                counts = torch.bincount(dst_index.long(), minlength=grad.shape[0]).clamp_(min=1)
            grad = grad / counts.to(grad.dtype).reshape([-1] + [1] * (grad.dim() - 1))
        grad_x = grad_weight = None
        if ctx.needs_input_grad[0]:  # the transposed graph: rows of grad flow back along the edges
            grad_x = _ops.gather_scatter(grad, dst_index, src_index, "sum", edge_weight=edge_weight,
                                         dim_size=x.shape[0])
        if ctx.needs_input_grad[4]:  # dot(grad[dst[e]], x[src[e]]), one row pair at a time: no E x F products
            grad_weight = _ops.gather_dot(grad.contiguous(), dst_index, x, src_index)
        return grad_x, None, None, None, grad_weight, None


def _extremum_backward(ctx, grad, x, src_index, dst_index, edge_weight, out):
    """torch's amax / amin rule: a destination's gradient is shared evenly by the messages equal to its
    result (ties split it). The tie test reads every message, so this backward forms the E x F messages
    once (the forward never does)."""
    src, dst = src_index.long(), dst_index.long()
    rows = x.index_select(0, src)
    weight = None if edge_weight is None else edge_weight.reshape([-1] + [1] * (x.dim() - 1))
    messages = rows if weight is None else rows * weight
    hit = (messages == out.index_select(0, dst)).to(grad.dtype)
    ties = torch.zeros_like(grad).index_add_(0, dst, hit).clamp_(min=1)
    share = hit.mul_((grad / ties).index_select(0, dst))  # d out / d message, per message
    grad_x = grad_weight = None
    if ctx.needs_input_grad[0]:
        grad_x = torch.zeros_like(x).index_add_(0, src, share if weight is None else share * weight)
    if ctx.needs_input_grad[4]:
        grad_weight = share.mul_(rows).reshape(share.shape[0], -1).sum(1)
    return grad_x, None, None, None, grad_weight, None


def gather_scatter(x: torch.Tensor, src_index: torch.Tensor, dst_index: torch.Tensor, reduce: str = "sum", *,
                   edge_weight: torch.Tensor | None = None, dim_size: int | None = None) -> torch.Tensor:
    """Differentiable :func:`scatterx.gather_scatter`: gradients for x and edge_weight, every reduce (amax / amin
    share a destination's gradient evenly among the messages that tie for its result, as
    :torch:`scatter_reduce`). Shapes, dtypes, determinism and errors as :func:`scatterx.gather_scatter`."""
    weight = None if edge_weight is None else _tensor(edge_weight, x)
    dst = dst_index if isinstance(dst_index, IndexPlan) else _tensor(dst_index, x)
    return _GatherScatter.apply(x, _tensor(src_index, x), dst, reduce, weight, dim_size)


def gather(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """Differentiable :torch:`gather` on the scatterx kernels; shapes, dtypes and errors as
    :func:`scatterx.gather`. The backward is a deterministic scatter_add."""
    return _Gather.apply(input, dim, _tensor(index, input))


def index_select(input: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """Differentiable :torch:`index_select` on the scatterx kernels; shapes, dtypes and errors as
    :func:`scatterx.index_select`. The backward is a deterministic index_add."""
    return _IndexSelect.apply(input, dim, _tensor(index, input))


def index_add(input: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, *, alpha=1,
              in_place: bool = False) -> torch.Tensor:
    """Differentiable :torch:`index_add` (:torch:`Tensor.index_add_` with ``in_place``) on the scatterx kernels;
    shapes, dtypes, determinism and errors as :func:`scatterx.index_add`."""
    return _IndexAdd.apply(input, dim, _tensor(index, input), _tensor(source, input), alpha, in_place)


def index_add_weighted(input: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor,
                       weights: torch.Tensor, *, in_place: bool = False) -> torch.Tensor:
    """Differentiable :func:`scatterx.index_add_weighted` (torch: ``index_add`` of ``source * weights[:, None]``):
    gradients for input, source and weights (the MoE combine trains the router through weights). Shapes,
    dtypes, determinism and errors as :func:`scatterx.index_add_weighted`."""
    return _IndexAddWeighted.apply(input, dim, _tensor(index, input), _tensor(source, input),
                                   _tensor(weights, input), in_place)


def scatter_add(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, *,
                in_place: bool = False) -> torch.Tensor:
    """Differentiable :torch:`scatter_add` (:torch:`Tensor.scatter_add_` with ``in_place``) on the scatterx
    kernels; shapes, dtypes, determinism and errors as :func:`scatterx.scatter_add`."""
    return scatter_reduce(input, dim, index, src, "sum", in_place=in_place)


def scatter_reduce(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, reduce: str, *,
                   include_self: bool = True, in_place: bool = False) -> torch.Tensor:
    """Differentiable :torch:`scatter_reduce` (:torch:`Tensor.scatter_reduce_` with ``in_place``) on the
    scatterx kernels (sum, prod, mean, amax, amin); shapes, dtypes, determinism and errors as
    :func:`scatterx.scatter_reduce`."""
    return _Reduce.apply(input, dim, _tensor(index, input), _tensor(src, input), reduce, include_self, False,
                         in_place)


def index_reduce(input: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, reduce: str, *,
                 include_self: bool = True, in_place: bool = False) -> torch.Tensor:
    """Differentiable :torch:`index_reduce` (:torch:`Tensor.index_reduce_` with ``in_place``) on the scatterx
    kernels (prod, mean, amax, amin); shapes, dtypes, determinism and errors as :func:`scatterx.index_reduce`."""
    return _Reduce.apply(input, dim, _tensor(index, input), _tensor(source, input), reduce, include_self, True,
                         in_place)

"""Differentiable collectives: torch.distributed.nn.functional's set over scatterx's collectives.

Each function returns new tensors (its inputs are left alone, unlike the in-place collectives) and
records a backward that is the transposed collective, so gradients flow across ranks:

==========================  ===================================================================
forward                     backward (of the gradients)
==========================  ===================================================================
all_reduce (SUM, AVG)       the same all_reduce
all_reduce (MAX, MIN)       the summed gradient, shared evenly by the ranks whose value won
broadcast(src)              a sum over the ranks, kept on ``src`` (0 elsewhere)
all_gather                  reduce_scatter (SUM)
reduce_scatter (SUM, AVG)   all_gather (divided by the group size for AVG)
all_to_all(_single)         all_to_all(_single) with the splits swapped
all_to_all_v                all_to_all_single with the splits swapped
gather(dst)                 scatter from ``dst``
scatter(src)                gather to ``src``
reduce(dst) (SUM)           broadcast from ``dst``
==========================  ===================================================================

As in torch every rank of the group must run the backward pass too (it is a collective), and two of these
collectives on independent branches of a graph may have their backward passes run in different orders on
different ranks (autograd picks the order), which crosses them: chain them, or wrap them in one autograd
Function (as scatterx.distributed.moe does with the token rows and the router weights). torch's
``all_reduce`` backward repeats the forward's op whatever it is, which is wrong for MAX, MIN and
PRODUCT; here MAX and MIN get their true gradient and PRODUCT raises (reduce: only SUM has one).
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from torch.autograd import Function

from .._collectives import all_gather as _all_gather
from .._collectives import all_reduce as _all_reduce
from .._collectives import all_to_all as _all_to_all
from .._collectives import all_to_all_single as _all_to_all_single
from .._collectives import all_to_all_v as _all_to_all_v
from .._collectives import broadcast as _broadcast
from .._collectives import reduce_scatter as _reduce_scatter
from .._groups import GroupLike, ReduceOp, _reduce_op, get_rank, get_world_size
from .._rooted import gather as _gather
from .._rooted import reduce as _reduce
from .._rooted import scatter as _scatter

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_single", "all_to_all_v", "broadcast", "gather",
           "reduce", "reduce_scatter", "scatter"]


def _op_name(op, name: str) -> str:
    """"sum", "avg", "max", ... for any spelling of a ReduceOp (ValueError for others)."""
    from .._groups import _dist

    return _dist.reduce_op_name(_reduce_op(op, name))


def _require_differentiable(op_name: str, allowed: Sequence[str], name: str) -> None:
    if op_name not in allowed:
        raise RuntimeError(f"{name}: gradients are defined for op {' or '.join(a.upper() for a in allowed)}, "
                           f"got ReduceOp.{op_name.upper()}")


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        ctx.op, ctx.group = _op_name(op, "all_reduce"), group
        out = tensor.clone(memory_format=torch.contiguous_format)
        _all_reduce(out, op=op, group=group)
        if ctx.op in ("max", "min"):
            ctx.save_for_backward(tensor, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        name = "scatterx.distributed.nn.all_reduce"
        _require_differentiable(ctx.op, ("sum", "avg", "max", "min"), name)
        if ctx.op in ("sum", "avg"):  # out = sum (mean) of the inputs on every rank: d/dx_r = sum (mean) of grads
            return None, None, _AllReduce.apply(ctx.op, ctx.group, grad)
        tensor, out = ctx.saved_tensors
        # The ranks whose value equals the result share the summed gradient evenly (torch's amax rule).
        won = (tensor == out).to(grad.dtype)
        total = grad.contiguous().clone()
        winners = won.clone()
        _all_reduce(total, op=ReduceOp.SUM, group=ctx.group)
        _all_reduce(winners, op=ReduceOp.SUM, group=ctx.group)
        return None, None, won * total / winners.clamp(min=1)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, group, tensor):
        ctx.src, ctx.group = src, group
        out = tensor.clone(memory_format=torch.contiguous_format)
        _broadcast(out, src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        # Every rank's output is src's input: its gradient is the sum of all of them, on src only.
        total = _AllReduce.apply(ReduceOp.SUM, ctx.group, grad)
        if get_rank() != ctx.src:
            total = torch.zeros_like(total)
        return None, None, total


class _AllGather(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        tensor = tensor.contiguous()
        outs = [torch.empty_like(tensor) for _ in range(get_world_size(group))]
        _all_gather(outs, tensor, group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        # Rank s's output r is rank r's input: rank r's gradient sums every rank's gradient number r.
        grads = [g.contiguous() for g in grads]
        out = torch.empty_like(grads[0])
        _reduce_scatter(out, grads, op=ReduceOp.SUM, group=ctx.group)
        return None, out


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, op, group, output, *inputs):
        ctx.op, ctx.group = _op_name(op, "reduce_scatter"), group
        out = torch.empty_like(output, memory_format=torch.contiguous_format)
        _reduce_scatter(out, [t.contiguous() for t in inputs], op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        _require_differentiable(ctx.op, ("sum", "avg"), "scatterx.distributed.nn.reduce_scatter")
        grads = _AllGather.apply(ctx.group, grad)
        if ctx.op == "avg":
            grads = tuple(g / len(grads) for g in grads)
        return (None, None, None) + tuple(grads)


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, group, output_list, *inputs):
        ctx.group = group
        ctx.input_shapes = [t.shape for t in inputs]
        outs = [torch.empty_like(o, memory_format=torch.contiguous_format) for o in output_list]
        _all_to_all(outs, [t.contiguous() for t in inputs], group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        # Transposed: gradient r goes back to rank r, into the slot of the input it came from.
        like = [grads[0].new_empty(shape) for shape in ctx.input_shapes]
        return (None, None) + _AllToAll.apply(ctx.group, like, *[g.contiguous() for g in grads])


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, group, output, output_split_sizes, input_split_sizes, input):
        ctx.group = group
        ctx.input_shape = input.shape
        ctx.splits = (output_split_sizes, input_split_sizes)
        out = torch.empty_like(output, memory_format=torch.contiguous_format)
        _all_to_all_single(out, input.contiguous(), output_split_sizes, input_split_sizes, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        output_split_sizes, input_split_sizes = ctx.splits
        back = grad.new_empty(ctx.input_shape)
        return (None, None, None, None,
                _AllToAllSingle.apply(ctx.group, back, input_split_sizes, output_split_sizes, grad.contiguous()))


class _AllToAllV(Function):
    @staticmethod
    def forward(ctx, group, send_splits, received, input):
        ctx.group, ctx.send_splits, ctx.input_shape = group, list(send_splits), input.shape
        out, recv_splits = _all_to_all_v(input.contiguous(), ctx.send_splits, group=group)
        ctx.recv_splits = recv_splits
        received.extend(recv_splits)  # the non-tensor result, handed out beside the tensor
        return out

    @staticmethod
    def backward(ctx, grad):
        back = grad.new_empty(ctx.input_shape)
        return (None, None, None,
                _AllToAllSingle.apply(ctx.group, back, ctx.send_splits, ctx.recv_splits, grad.contiguous()))


class _Gather(Function):
    @staticmethod
    def forward(ctx, dst, group, tensor):
        ctx.dst, ctx.group = dst, group
        outs = [torch.zeros_like(tensor, memory_format=torch.contiguous_format) for _ in range(get_world_size(group))]
        _gather(tensor.contiguous(), outs if get_rank() == dst else None, dst=dst, group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        # Rank r's tensor is dst's output r: its gradient is dst's gradient number r.
        return None, None, _Scatter.apply(ctx.dst, ctx.group, *grads)


class _Scatter(Function):
    @staticmethod
    def forward(ctx, src, group, *tensors):
        ctx.src, ctx.group = src, group
        out = torch.empty_like(tensors[0], memory_format=torch.contiguous_format)
        _scatter(out, [t.contiguous() for t in tensors] if get_rank() == src else None, src=src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        # src's tensor r went to rank r: its gradient is rank r's (0 for the others' ignored tensors).
        return (None, None) + _Gather.apply(ctx.src, ctx.group, grad)


class _Reduce(Function):
    @staticmethod
    def forward(ctx, dst, op, group, tensor):
        ctx.dst, ctx.op, ctx.group = dst, _op_name(op, "reduce"), group
        out = tensor.clone(memory_format=torch.contiguous_format)
        _reduce(out, dst=dst, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        _require_differentiable(ctx.op, ("sum",), "scatterx.distributed.nn.reduce")
        # Every rank's tensor adds into dst's result; the other ranks' outputs carry no gradient (torch's rule).
        return None, None, None, _Broadcast.apply(ctx.dst, ctx.group, grad)


def gather(tensor: torch.Tensor, dst: int = 0, group: GroupLike = None) -> Tuple[torch.Tensor, ...]:
    """:torch_dist:`nn.functional.gather`: a tuple of every rank's ``tensor`` on global rank ``dst`` (zeros
    elsewhere); the gradient is scattered back from ``dst``."""
    return _Gather.apply(dst, group, tensor)


def scatter(tensors: List[torch.Tensor], src: int = 0, group: GroupLike = None) -> torch.Tensor:
    """:torch_dist:`nn.functional.scatter`: global rank ``src``'s ``tensors[rank]`` on every rank (every rank passes
    a list of tensors of one shape, as torch requires; only src's values are read); the gradient is gathered back to
    ``src``."""
    return _Scatter.apply(src, group, *tensors)


def reduce(tensor: torch.Tensor, dst: int, op=ReduceOp.SUM, group: GroupLike = None) -> torch.Tensor:
    """:torch_dist:`nn.functional.reduce`: a new tensor: op over the ranks of their ``tensor`` on global rank
    ``dst``, this rank's ``tensor`` elsewhere (a copy, through which no gradient flows, as in torch); differentiable
    for SUM."""
    return _Reduce.apply(dst, op, group, tensor)


def all_reduce(tensor: torch.Tensor, op=ReduceOp.SUM, group: GroupLike = None) -> torch.Tensor:
    """:torch_dist:`nn.functional.all_reduce`: a new tensor holding op over the ranks of their ``tensor``;
    differentiable for SUM, AVG, MAX, MIN."""
    return _AllReduce.apply(op, group, tensor)


def broadcast(tensor: torch.Tensor, src: int, group: GroupLike = None) -> torch.Tensor:
    """:torch_dist:`nn.functional.broadcast`: a new tensor holding global rank ``src``'s ``tensor``; the gradient
    sums on ``src``."""
    return _Broadcast.apply(src, group, tensor)


def all_gather(tensor: torch.Tensor, group: GroupLike = None) -> Tuple[torch.Tensor, ...]:
    """:torch_dist:`nn.functional.all_gather`: a tuple of every rank's ``tensor``, in rank order; the gradient is
    reduce_scatter'ed back."""
    return _AllGather.apply(group, tensor)


def reduce_scatter(output: torch.Tensor, input_list: List[torch.Tensor], op=ReduceOp.SUM,
                   group: GroupLike = None) -> torch.Tensor:
    """:torch_dist:`nn.functional.reduce_scatter`: a new tensor of ``output``'s shape holding op over the ranks of
    their ``input_list[rank]`` (``output`` only gives the shape and is not written, unlike torch which writes it as
    well); differentiable for SUM and AVG."""
    return _ReduceScatter.apply(op, group, output, *input_list)


def all_to_all(output_tensor_list: List[torch.Tensor], input_tensor_list: List[torch.Tensor],
               group: GroupLike = None) -> Tuple[torch.Tensor, ...]:
    """:torch_dist:`nn.functional.all_to_all`: a tuple of new tensors shaped as ``output_tensor_list``: entry i is
    rank i's ``input_tensor_list[rank]``."""
    return _AllToAll.apply(group, output_tensor_list, *input_tensor_list)


def all_to_all_single(output: torch.Tensor, input: torch.Tensor, output_split_sizes: Optional[List[int]] = None,
                      input_split_sizes: Optional[List[int]] = None, group: GroupLike = None) -> torch.Tensor:
    """:torch_dist:`nn.functional.all_to_all_single`: a new tensor shaped as ``output``: ``output_split_sizes[i]``
    rows from rank i (see scatterx.distributed.all_to_all_single); the gradient travels back with the splits
    swapped."""
    return _AllToAllSingle.apply(group, output, output_split_sizes, input_split_sizes, input)


def all_to_all_v(input: torch.Tensor, send_splits: Sequence[int],
                 group: GroupLike = None) -> Tuple[torch.Tensor, List[int]]:
    """``(output, recv_splits)``: ``send_splits[i]`` rows of ``input`` go to rank i and the rows received
    come back in rank order with how many came from each rank (not in torch); differentiable in ``input``."""
    received: List[int] = []
    out = _AllToAllV.apply(group, send_splits, received, input)
    return out, received

"""torch.distributed's rooted collectives: gather (and gather_single into one tensor), scatter, reduce.

They are the C++ layer's (dist/rooted.cpp, dist.h): one variable-split all-to-all in which only the root
receives (sends), and an all_reduce into a copy off the root. A bad list on the root raises ValueError
there and MismatchError on the other ranks before any data moves, so nobody is left waiting. The
operations run synchronously; with ``async_op=True`` they return a completed :class:`Work`. (The object
collectives are in _objects.py.)
"""

from __future__ import annotations

from typing import Any, List, Optional

from .._ops import _is_torch
from ._collectives import Work, _Call, _copy_into, _finished, _premul_factor, _scaled
from ._groups import Array, GroupLike, ReduceOp, _dist


def _root(call: _Call, rank: Optional[int], group_rank: Optional[int], name: str) -> int:
    """The root as a rank of the group, from torch's global ``dst``/``src`` or ``group_dst``/``group_src``."""
    if rank is None and group_rank is None:
        rank = 0  # torch's default: global rank 0
    elif rank is not None and group_rank is not None:
        raise ValueError(f"{call.op}: expected exactly one of {name} (a global rank) and group_{name}, got "
                         f"{name}={rank!r}, group_{name}={group_rank!r}")
    if group_rank is not None:
        return int(group_rank)
    if rank not in call.pg._group_rank:
        raise ValueError(f"Global rank {rank} is not part of group {call.pg}")  # torch's message
    return call.pg._group_rank[int(rank)]


def _list_or_empty(xs: Any) -> Any:
    """A list argument as the extension takes it: None (what the non-root ranks pass) is an empty list."""
    return [] if xs is None else xs


def gather(tensor: Array, gather_list: Optional[List[Array]] = None, dst: Optional[int] = None,
           group: GroupLike = None, async_op: bool = False, group_dst: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`gather`: on the root (global rank ``dst``, or ``group_dst``; default global rank 0):
    ``gather_list[i]`` = rank i's ``tensor`` (one array per rank, each of tensor's element count and dtype); the
    others pass no list."""
    call = _Call("gather", group)
    if call.comm is None:
        return None
    root = _root(call, dst, group_dst, "dst")
    outs = call.outputs(_list_or_empty(gather_list), "gather_list")
    call.run((outs, call.input(tensor, "tensor"), root), (), False)
    return _finished(async_op, list(gather_list or []))


def _rows_of(gather_tensor: Any, tensor: Any, ws: int) -> Optional[List[Array]]:
    """gather_tensor as ws views of tensor's shape over its contiguous memory, or None when it cannot be."""
    if _is_torch(gather_tensor) != _is_torch(tensor) or not hasattr(gather_tensor, "reshape"):
        return None
    if _is_torch(gather_tensor):
        if not gather_tensor.is_contiguous() or gather_tensor.numel() != ws * tensor.numel():
            return None
        flat = gather_tensor.view(-1)
        return [flat[i * tensor.numel():(i + 1) * tensor.numel()].view(tensor.shape) for i in range(ws)]
    if not gather_tensor.flags.c_contiguous or gather_tensor.size != ws * tensor.size:
        return None
    flat = gather_tensor.reshape(-1)
    return [flat[i * tensor.size:(i + 1) * tensor.size].reshape(tensor.shape) for i in range(ws)]


def gather_single(tensor: Array, gather_tensor: Optional[Array] = None, dst: Optional[int] = None,
                  group: GroupLike = None, async_op: bool = False, group_dst: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`gather_single`: on the root (global rank ``dst``, or ``group_dst``; default global rank 0):
    rank i's ``tensor`` lands in block i of ``gather_tensor`` (contiguous, ``world_size`` times tensor's element
    count, any shape: ``[ws * n, ...]`` or ``[ws, n, ...]``, as :func:`gather` into one tensor); the others pass
    none."""
    return _gather_single("gather_single", tensor, gather_tensor, dst, group, async_op, group_dst)


def gather_into_tensor(tensor: Array, gather_tensor: Optional[Array] = None, dst: Optional[int] = None,
                       group: GroupLike = None, async_op: bool = False,
                       group_dst: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`gather_into_tensor`: torch's older name of :func:`gather_single`, the same call."""
    return _gather_single("gather_into_tensor", tensor, gather_tensor, dst, group, async_op, group_dst)


def _gather_single(op: str, tensor: Array, gather_tensor: Optional[Array], dst: Optional[int], group: GroupLike,
                   async_op: bool, group_dst: Optional[int]) -> Optional[Work]:
    call = _Call(op, group)
    if call.comm is None:
        return None
    root = _root(call, dst, group_dst, "dst")
    rows: Optional[List[Array]] = []
    if call.pg.rank() == root:
        rows = None if gather_tensor is None else _rows_of(gather_tensor, tensor, call.pg.size())
    # A bad gather_tensor still enters the gather, with no list: the C++ layer then refuses it on every
    # rank before any data moves (MismatchError on the others), and the root raises its own error.
    try:
        call.run((call.outputs(rows or [], "gather_tensor"), call.input(tensor, "tensor"), root), (), False,
                 fn="gather")
    except ValueError:
        if rows is not None:
            raise
    if rows is None:
        got = "None" if gather_tensor is None else (f"{type(gather_tensor).__name__} of shape "
                                                      f"{tuple(getattr(gather_tensor, 'shape', ()))}")
        raise ValueError(f"{op}: expected gather_tensor to be a contiguous array of the tensor's kind with "
                         f"{call.pg.size()} x tensor's elements on the destination rank, got {got}")
    return _finished(async_op, [gather_tensor] if gather_tensor is not None else [])


def scatter(tensor: Array, scatter_list: Optional[List[Array]] = None, src: Optional[int] = None,
            group: GroupLike = None, async_op: bool = False, group_src: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`scatter`: every rank's ``tensor`` = the root's ``scatter_list[rank]`` (the root: global rank
    ``src``, or ``group_src``; default global rank 0); the others pass no list."""
    call = _Call("scatter", group)
    if call.comm is None:
        return None
    root = _root(call, src, group_src, "src")
    ins = call.inputs(_list_or_empty(scatter_list), "scatter_list")
    call.run((call.output(tensor, "tensor"), ins, root), (), False)
    return _finished(async_op, [tensor])


def reduce(tensor: Array, dst: Optional[int] = None, op: Any = ReduceOp.SUM, group: GroupLike = None,
           async_op: bool = False, group_dst: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`reduce`: on the root (global rank ``dst``, or ``group_dst``; default global rank 0): ``tensor``
    = op over the ranks of their ``tensor``; the other ranks' tensors are left as they were."""
    call = _Call("reduce", group)
    if call.comm is None:
        return None
    root = _root(call, dst, group_dst, "dst")
    factor = _premul_factor(op, call.op, [tensor])
    if factor is None:
        call.run((call.output(tensor, "tensor"), root, call.reduce_op(op)), (), False)
        return _finished(async_op, [tensor])
    # PREMUL_SUM: a scaled copy, summed; the root's tensor takes the sum
    total = _scaled(call.output(tensor, "tensor"), factor)
    call.run((total, root, _dist.ReduceOp.Sum), (), False)
    if call.pg.rank() == root:
        _copy_into(tensor, total)
    return _finished(async_op, [tensor])


__all__ = ["gather", "gather_into_tensor", "gather_single", "reduce", "scatter"]

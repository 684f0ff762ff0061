"""torch.distributed's rooted collectives (gather, scatter, reduce) and object collectives
(all_gather_object, broadcast_object_list, gather_object).

gather, scatter and reduce are the C++ layer's (dist/rooted.cpp, dist.h): one variable-split all-to-all in
which only the root receives (sends), and an all_reduce into a copy off the root. A bad list on the root
raises ValueError there and MismatchError on the other ranks before any data moves, so nobody is left
waiting. The object collectives pickle, exchange the sizes, then the bytes. The operations run
synchronously; with ``async_op=True`` they return a completed :class:`Work`.
"""

from __future__ import annotations

import pickle
from typing import Any, List, Optional

import numpy as np

from ._collectives import (Work, _Call, _copy_into, _finished, _premul_factor, _scaled, all_gather_into_tensor,
                           broadcast)
from ._groups import Array, GroupLike, ReduceOp, _dist, _resolve


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


def _pickled(obj: Any) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def all_gather_object(object_list: List[Any], obj: Any, group: GroupLike = None) -> None:
    """:torch_dist:`all_gather_object`: ``object_list[i]`` = rank i's ``obj`` (picklable; object_list has one slot
    per rank)."""
    pg = _resolve(group, "all_gather_object")
    if pg is None:
        return
    ws = pg.size()
    data = _pickled(obj)
    sizes = np.empty((ws, 1), dtype=np.int64)
    all_gather_into_tensor(sizes, np.array([data.size], dtype=np.int64), group=group)
    longest = int(sizes.max())
    padded = np.zeros(longest, dtype=np.uint8)
    padded[:data.size] = data
    every = np.empty((ws, longest), dtype=np.uint8)
    all_gather_into_tensor(every, padded, group=group)
    if len(object_list) != ws:
        raise ValueError(f"all_gather_object: expected object_list of length {ws} (the group size), got "
                         f"{len(object_list)}")
    for r in range(ws):
        object_list[r] = pickle.loads(every[r, :int(sizes[r, 0])].tobytes())


def gather_object(obj: Any, object_gather_list: Optional[List[Any]] = None, dst: Optional[int] = None,
                  group: GroupLike = None, group_dst: Optional[int] = None) -> None:
    """:torch_dist:`gather_object`: on the root: ``object_gather_list[i]`` = rank i's ``obj``; the other ranks pass
    None."""
    call = _Call("gather_object", group)
    if call.comm is None:
        return
    root = _root(call, dst, group_dst, "dst")
    every: List[Any] = [None] * call.pg.size()
    all_gather_object(every, obj, group=group)
    if call.pg.rank() == root:
        if object_gather_list is None or len(object_gather_list) != len(every):
            raise ValueError(f"gather_object: expected object_gather_list of length {len(every)} on the destination "
                             f"rank, got {None if object_gather_list is None else len(object_gather_list)}")
        object_gather_list[:] = every


def broadcast_object_list(object_list: List[Any], src: Optional[int] = None, group: GroupLike = None,
                          device: Any = None, group_src: Optional[int] = None) -> None:
    """:torch_dist:`broadcast_object_list`: every rank's ``object_list`` (of one length everywhere) = the source
    rank's, element by element (source: global rank ``src``, or ``group_src``; default global rank 0)."""
    del device
    call = _Call("broadcast_object_list", group)
    if call.comm is None:
        return
    root = _root(call, src, group_src, "src")
    pieces = [_pickled(o) for o in object_list] if call.pg.rank() == root else []
    sizes = np.array([p.size for p in pieces] if pieces else [0] * len(object_list), dtype=np.int64)
    broadcast(sizes, group=group, group_src=root)
    data = np.concatenate(pieces) if pieces else np.empty(int(sizes.sum()), dtype=np.uint8)
    if data.size:
        broadcast(data, group=group, group_src=root)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for i in range(len(object_list)):
        object_list[i] = pickle.loads(data[offsets[i]:offsets[i + 1]].tobytes())


__all__ = ["all_gather_object", "broadcast_object_list", "gather", "gather_object", "reduce", "scatter"]

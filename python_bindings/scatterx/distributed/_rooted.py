"""torch.distributed's rooted collectives (gather, scatter, reduce) and object collectives
(all_gather_object, broadcast_object_list, gather_object), composed from scatterx's collectives.

gather and scatter are one variable-split all-to-all in which only the root receives (sends): each rank's
tensor crosses once. reduce is an all_reduce into a copy on the other ranks (the root's tensor takes the
result; the others keep theirs): twice the bytes of a tree, with the layer's reduce functors. The object
collectives pickle, exchange the sizes, then the bytes.

A rank whose own arguments are wrong (a gather_list of the wrong length on the root, say) still takes part
in the exchange with arguments the layer rejects, so every rank raises (the others MismatchError) and
none is left waiting; then it raises its own error. The operations run synchronously; with
``async_op=True`` they return a completed :class:`Work`.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any, List, Optional

import numpy as np

from .._ops import _is_torch
from ._collectives import Work, _Call, _copy_into, _finished, all_gather_into_tensor, all_reduce, broadcast
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


def _rows(x: Array, rows: int, n: int) -> Array:
    """A new [rows, n] array of x's kind, dtype and device."""
    if _is_torch(x):
        return x.new_empty((rows, n))
    if isinstance(x, np.ndarray):
        return np.empty((rows, n), dtype=x.dtype)
    return sys.modules["cupy"].empty((rows, n), dtype=x.dtype)


def _flat(x: Array) -> Array:
    return x.reshape(1, -1)


def _exchange(call: _Call, send: Array, out: Array, send_splits: List[int], recv_splits: List[int],
              problem: Optional[Exception]) -> None:
    """One all_to_all_single; a rank with a `problem` enters with an output one row too long, which the layer
    rejects on every rank before any data moves, and raises its problem."""
    if problem is not None:
        out = _rows(send, out.shape[0] + 1, out.shape[1])
        try:
            _dist.all_to_all_single(call.output(out, "output"), call.input(send, "input"), recv_splits, send_splits,
                                    call.comm)
        except Exception:  # noqa: BLE001 (the layer's rejection: this rank raises its own error instead)
            pass
        raise problem
    _dist.all_to_all_single(call.output(out, "output"), call.input(send, "input"), recv_splits, send_splits,
                            call.comm)


def gather(tensor: Array, gather_list: Optional[List[Array]] = None, dst: Optional[int] = None,
           group: GroupLike = None, async_op: bool = False, group_dst: Optional[int] = None) -> Optional[Work]:
    """On the root (global rank ``dst``, or ``group_dst``; default global rank 0): ``gather_list[i]`` = rank
    i's ``tensor`` (one array per rank, each of tensor's shape and dtype); the others pass no list."""
    call = _Call("gather", group)
    if call.comm is None:
        return None
    root = _root(call, dst, group_dst, "dst")
    ws, me = call.pg.size(), call.pg.rank()
    problem = None
    if me == root and (not isinstance(gather_list, (list, tuple)) or len(gather_list) != ws):
        problem = ValueError(f"gather: expected gather_list to be a list of {ws} arrays on the destination rank, got "
                             f"{type(gather_list).__name__} of length {len(gather_list or [])}")
    elif me == root and any(tuple(t.shape) != tuple(tensor.shape) for t in gather_list):
        problem = ValueError(f"gather: expected every gather_list array of tensor's shape {list(tensor.shape)}, got "
                             f"{[list(t.shape) for t in gather_list]}")
    elif me != root and gather_list:
        problem = ValueError("gather: expected gather_list to be None or empty on a rank other than the destination, "
                             f"got a list of {len(gather_list)}")
    send = _flat(tensor)
    n = send.shape[1]
    out = _rows(send, ws if me == root else 0, n)
    _exchange(call, send, out, [1 if r == root else 0 for r in range(ws)], [1 if me == root else 0] * ws, problem)
    if me == root:
        for r in range(ws):
            _copy_into(gather_list[r], out[r])
    return _finished(async_op, list(gather_list or []))


def scatter(tensor: Array, scatter_list: Optional[List[Array]] = None, src: Optional[int] = None,
            group: GroupLike = None, async_op: bool = False, group_src: Optional[int] = None) -> Optional[Work]:
    """Every rank's ``tensor`` = the root's ``scatter_list[rank]`` (the root: global rank ``src``, or
    ``group_src``; default global rank 0); the others pass no list."""
    call = _Call("scatter", group)
    if call.comm is None:
        return None
    root = _root(call, src, group_src, "src")
    ws, me = call.pg.size(), call.pg.rank()
    n = int(np.prod(tensor.shape, dtype=np.int64))
    problem = None
    if me == root and (not isinstance(scatter_list, (list, tuple)) or len(scatter_list) != ws):
        problem = ValueError(f"scatter: expected scatter_list to be a list of {ws} arrays on the source rank, got "
                             f"{type(scatter_list).__name__} of length {len(scatter_list or [])}")
    elif me == root and any(int(np.prod(t.shape, dtype=np.int64)) != n for t in scatter_list):
        problem = ValueError(f"scatter: expected every scatter_list array to have tensor's {n} elements, got "
                             f"{[int(np.prod(t.shape, dtype=np.int64)) for t in scatter_list]}")
    send = _rows(tensor, ws if me == root and problem is None else 0, n)
    if me == root and problem is None:
        for r in range(ws):
            _copy_into(send[r], _flat(scatter_list[r]))
    out = _rows(tensor, 1, n)
    _exchange(call, send, out, [1] * ws if me == root and problem is None else [0] * ws,
              [1 if r == root else 0 for r in range(ws)], problem)
    _copy_into(tensor, out[0])
    return _finished(async_op, [tensor])


def reduce(tensor: Array, dst: Optional[int] = None, op: Any = ReduceOp.SUM, group: GroupLike = None,
           async_op: bool = False, group_dst: Optional[int] = None) -> Optional[Work]:
    """On the root (global rank ``dst``, or ``group_dst``; default global rank 0): ``tensor`` = op over the
    ranks of their ``tensor``; the other ranks' tensors are left as they were."""
    call = _Call("reduce", group)
    if call.comm is None:
        return None
    root = _root(call, dst, group_dst, "dst")
    target = tensor if call.pg.rank() == root else (tensor.clone() if _is_torch(tensor) else tensor.copy())
    all_reduce(target, op=op, group=group)
    return _finished(async_op, [tensor])


def _pickled(obj: Any) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def all_gather_object(object_list: List[Any], obj: Any, group: GroupLike = None) -> None:
    """``object_list[i]`` = rank i's ``obj`` (picklable; object_list has one slot per rank)."""
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
    """On the root: ``object_gather_list[i]`` = rank i's ``obj``; the other ranks pass None."""
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
    """Every rank's ``object_list`` (of one length everywhere) = the source rank's, element by element
    (source: global rank ``src``, or ``group_src``; default global rank 0)."""
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

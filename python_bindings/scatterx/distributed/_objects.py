"""torch.distributed's object collectives and point-to-point (all_gather_object, gather_object,
broadcast_object_list, scatter_object_list, send_object_list, recv_object_list): pickled objects as uint8
arrays over the array collectives.

No rank is left waiting on another rank's bad argument. A rank whose object does not pickle, or a source
whose list is wrong, says so in the first message every rank receives (a size of -1, or a status), and
then every rank raises: that rank the original error, the others MismatchError naming it. A receiving
rank's own bad list is reported after the messages it was due have all arrived, so that no message is
left behind to be matched by a later call.
"""

from __future__ import annotations

import pickle
from typing import Any, List, Optional, Tuple

import numpy as np

from ._collectives import _Call, all_gather_into_tensor, broadcast
from ._groups import GroupLike, MismatchError, _resolve
from ._p2p import recv, send
from ._rooted import _root, scatter


def _pickled(obj: Any) -> Tuple[Optional[np.ndarray], Optional[BaseException]]:
    """obj pickled as uint8, or the error pickling it raised."""
    try:
        return np.frombuffer(pickle.dumps(obj), dtype=np.uint8), None
    except Exception as e:  # noqa: BLE001 (any pickling failure is reported to the peers, then re-raised)
        return None, e


def _pickled_each(objects: List[Any]) -> Tuple[List[np.ndarray], Optional[BaseException]]:
    """Each object pickled, or the first one's error (with the pieces before it)."""
    pieces = []
    for o in objects:
        data, problem = _pickled(o)
        if problem is not None:
            return pieces, problem
        pieces.append(data)
    return pieces, None


def _unpickled(data: np.ndarray) -> Any:
    return pickle.loads(data.tobytes())


def _unpickle_into(object_list: List[Any], data: np.ndarray, sizes: np.ndarray) -> None:
    """object_list[i] = the object pickled in the i-th run of ``sizes`` bytes of ``data``."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for i in range(len(sizes)):
        object_list[i] = _unpickled(data[offsets[i]:offsets[i + 1]])


def _raise_for(problem: Optional[BaseException], op: str, who: str) -> None:
    """Raises this rank's own problem, or MismatchError saying that `who` had one."""
    if problem is not None:
        raise problem
    raise MismatchError(f"{op}: {who} could not send its objects (its error is raised there)")


def _check_slots(op: str, name: str, got: Any, want: int, at_least: bool = False) -> None:
    length = len(got) if isinstance(got, list) else None
    if length is None or length < want or (length != want and not at_least):
        expected = f"a list of {'at least ' if at_least else ''}{want} slot{'s' if want != 1 else ''}"
        got_text = f"{type(got).__name__} of length {length}" if length is not None else type(got).__name__
        raise ValueError(f"{op}: expected {name} to be {expected}, got {got_text}")


def all_gather_object(object_list: List[Any], obj: Any, group: GroupLike = None) -> None:
    """:torch_dist:`all_gather_object`: ``object_list[i]`` = rank i's ``obj`` (picklable; object_list has one slot
    per rank)."""
    pg = _resolve(group, "all_gather_object")
    if pg is None:
        return
    ws = pg.size()
    data, problem = _pickled(obj)
    sizes = np.empty((ws, 1), dtype=np.int64)
    all_gather_into_tensor(sizes, np.array([-1 if data is None else data.size], dtype=np.int64), group=group)
    failed = [r for r in range(ws) if sizes[r, 0] < 0]
    if failed:
        _raise_for(problem, "all_gather_object", f"rank {failed[0]} of the group")
    longest = int(sizes.max())
    padded = np.zeros(longest, dtype=np.uint8)
    padded[:data.size] = data
    every = np.empty((ws, longest), dtype=np.uint8)
    all_gather_into_tensor(every, padded, group=group)
    _check_slots("all_gather_object", "object_list", object_list, ws)
    for r in range(ws):
        object_list[r] = _unpickled(every[r, :int(sizes[r, 0])])


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
        _check_slots("gather_object", "object_gather_list", object_gather_list, len(every))
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
    problem = None
    pieces: List[np.ndarray] = []
    if call.pg.rank() == root:
        if not isinstance(object_list, list):
            problem = TypeError(f"broadcast_object_list: expected object_list to be a list, got "
                                f"{type(object_list).__name__}")
        else:
            pieces, problem = _pickled_each(object_list)
    # The source's status and object count first: the other ranks learn of its failure, and the count
    # their lists must have.
    header = np.array([0 if problem else 1, len(pieces)], dtype=np.int64)
    broadcast(header, group=group, group_src=root)
    if header[0] == 0:
        _raise_for(problem, "broadcast_object_list", f"the source (rank {root} of the group)")
    count = int(header[1])
    sizes = np.array([p.size for p in pieces] if pieces else [0] * count, dtype=np.int64)
    broadcast(sizes, group=group, group_src=root)
    data = np.concatenate(pieces) if pieces else np.empty(int(sizes.sum()), dtype=np.uint8)
    if data.size:
        broadcast(data, group=group, group_src=root)
    _check_slots("broadcast_object_list", "object_list", object_list, count)
    _unpickle_into(object_list, data, sizes)


def scatter_object_list(scatter_object_output_list: List[Any], scatter_object_input_list: Optional[List[Any]] = None,
                        src: Optional[int] = None, group: GroupLike = None, group_src: Optional[int] = None) -> None:
    """:torch_dist:`scatter_object_list`: ``scatter_object_output_list[0]`` = the source rank's
    ``scatter_object_input_list[rank]`` (the source: global rank ``src``, or ``group_src``; default global rank 0;
    its list has one picklable object per rank, the others pass None)."""
    op = "scatter_object_list"
    call = _Call(op, group)
    if call.comm is None:
        return
    root = _root(call, src, group_src, "src")
    ws = call.pg.size()
    problem = None
    pieces: List[np.ndarray] = []
    if call.pg.rank() == root:
        try:
            _check_slots(op, "scatter_object_input_list", scatter_object_input_list, ws)
        except ValueError as e:
            problem = e
        if problem is None:
            pieces, problem = _pickled_each(scatter_object_input_list)
    # The source's status, then every rank's size: a failed source stops everyone here.
    header = np.zeros(ws + 1, dtype=np.int64)
    if problem is None and pieces:
        header[0] = 1
        header[1:] = [p.size for p in pieces]
    broadcast(header, group=group, group_src=root)
    if header[0] == 0:
        _raise_for(problem, op, f"the source (rank {root} of the group)")
    sizes = header[1:]
    longest = int(sizes.max())
    rows = None
    if pieces:
        padded = np.zeros((ws, longest), dtype=np.uint8)
        for r, p in enumerate(pieces):
            padded[r, :p.size] = p
        rows = list(padded)
    mine = np.empty(longest, dtype=np.uint8)
    scatter(mine, rows, group=group, group_src=root)
    _check_slots(op, "scatter_object_output_list", scatter_object_output_list, 1, at_least=True)
    scatter_object_output_list[0] = _unpickled(mine[:int(sizes[call.pg.rank()])])


def send_object_list(object_list: List[Any], dst: Optional[int] = None, group: GroupLike = None, device: Any = None,
                     group_dst: Optional[int] = None, use_batch: bool = False) -> None:
    """:torch_dist:`send_object_list`: sends the picklable objects of ``object_list`` to global rank ``dst`` (or
    ``group_dst``), whose :func:`recv_object_list` takes them; returns once they left. Three messages: the
    count, the sizes, the bytes (``use_batch`` changes nothing here)."""
    del device, use_batch
    op = "send_object_list"
    if not isinstance(object_list, list):
        raise TypeError(f"{op}: expected object_list to be a list, got {type(object_list).__name__}")
    pieces, problem = _pickled_each(object_list)
    if problem is not None:
        raise problem  # before any message: the receiver waits for one that never comes, as in torch
    sizes = np.array([p.size for p in pieces], dtype=np.int64)
    send(np.array([len(pieces)], dtype=np.int64), dst, group=group, group_dst=group_dst)
    send(sizes, dst, group=group, group_dst=group_dst)
    send(np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint8), dst, group=group, group_dst=group_dst)


def recv_object_list(object_list: List[Any], src: Optional[int] = None, group: GroupLike = None, device: Any = None,
                     group_src: Optional[int] = None, use_batch: bool = False) -> int:
    """:torch_dist:`recv_object_list`: fills ``object_list`` (one slot per object sent) with the objects a
    :func:`send_object_list` sent from global rank ``src`` (or ``group_src``; neither: any rank) and returns the
    sender's global rank (-1 on a rank outside ``group``)."""
    del device, use_batch
    op = "recv_object_list"
    count = np.empty(1, dtype=np.int64)
    sender = recv(count, src, group=group, group_src=group_src)
    if sender < 0:
        return sender
    sizes = np.empty(int(count[0]), dtype=np.int64)
    recv(sizes, sender, group=group)
    data = np.empty(int(sizes.sum()), dtype=np.uint8)
    recv(data, sender, group=group)
    _check_slots(op, "object_list", object_list, int(count[0]))
    _unpickle_into(object_list, data, sizes)
    return sender


__all__ = ["all_gather_object", "broadcast_object_list", "gather_object", "recv_object_list", "scatter_object_list",
           "send_object_list"]

"""torch.distributed's point-to-point messages (send, recv, isend, irecv, P2POp, batch_isend_irecv) and
monitored_barrier, over the compiled layer's (dist/dist.h).

Ranks follow torch: ``dst``/``src``/``peer`` are global ranks, ``group_dst``/``group_src``/``group_peer``
ranks of ``group``; ``recv`` returns the sender's global rank. Messages travel apart from the collectives
(they never match a collective's), match by (sender, tag) in posting order, and are posted when
isend/irecv are called. A rank outside ``group`` gets None (recv: -1) after torch's warning.
"""

from __future__ import annotations

import datetime
from typing import Callable, List, Optional, Union

from ._collectives import Work, _Call
from ._groups import Array, GroupLike, ProcessGroup, _dist, _resolve, _seconds


def _group_rank(pg: ProcessGroup, rank: Optional[int], group_rank: Optional[int], any_source: bool = False) -> int:
    """The peer as a rank of ``pg``, from torch's global ``rank`` or ``group_rank`` (torch's
    messages); neither: any source where ``any_source`` allows it."""
    if group_rank is not None:
        if rank is not None:
            raise ValueError("Can't specify both group_rank and global_rank")
        return int(group_rank)
    if rank is None:
        if any_source:
            return _dist.ANY_SOURCE
        raise ValueError("Must specify global_rank or group_rank")
    if rank not in pg._group_rank:
        raise ValueError(f"Global rank {rank} is not part of group {pg}")
    return pg._group_rank[int(rank)]


def _not_self(call: _Call, group_rank: int, kind: str) -> None:
    if group_rank == call.pg.rank():
        raise ValueError(f"Invalid {kind} rank: {kind} rank should not be the same as the rank of the current "
                         "process.")  # torch's message


def isend(tensor: Array, dst: Optional[int] = None, group: GroupLike = None, tag: int = 0,
          group_dst: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`isend`: posts the send of ``tensor`` to global rank ``dst`` (or ``group_dst``) and returns its
    :class:`Work`; ``tensor`` must not be written until ``wait()`` returned. Sending to this rank is allowed (as
    torch)."""
    call = _Call("isend", group)
    if call.comm is None:
        return None
    peer = _group_rank(call.pg, dst, group_dst)
    return Work(_dist.isend(call.input(tensor, "tensor"), peer, call.comm, int(tag)), [])


def irecv(tensor: Array, src: Optional[int] = None, group: GroupLike = None, tag: int = 0,
          group_src: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`irecv`: posts the receive into ``tensor`` from global rank ``src`` (or ``group_src``; neither:
    any rank) and returns its :class:`Work`; ``tensor`` holds the message once ``wait()`` returned."""
    call = _Call("irecv", group)
    if call.comm is None:
        return None
    peer = _group_rank(call.pg, src, group_src, any_source=True)
    return Work(_dist.irecv(call.output(tensor, "tensor"), peer, call.comm, int(tag)), [tensor])


def send(tensor: Array, dst: Optional[int] = None, group: GroupLike = None, tag: int = 0,
         group_dst: Optional[int] = None) -> None:
    """:torch_dist:`send`: sends ``tensor`` to global rank ``dst`` (or ``group_dst``; not this rank) and returns
    once it left."""
    call = _Call("send", group)
    if call.comm is None:
        return None
    peer = _group_rank(call.pg, dst, group_dst)
    _not_self(call, peer, "destination")
    _dist.send(call.input(tensor, "tensor"), peer, call.comm, int(tag))
    return None


def recv(tensor: Array, src: Optional[int] = None, group: GroupLike = None, tag: int = 0,
         group_src: Optional[int] = None) -> int:
    """:torch_dist:`recv`: receives into ``tensor`` from global rank ``src`` (or ``group_src``; neither: any rank)
    and returns the sender's global rank (-1 on a rank outside ``group``)."""
    call = _Call("recv", group)
    if call.comm is None:
        return -1
    peer = _group_rank(call.pg, src, group_src, any_source=True)
    sender = _dist.recv(call.output(tensor, "tensor"), peer, call.comm, int(tag))
    if src is None and group_src is None:
        _not_self(call, sender, "source")  # as torch, for a message this rank sent itself
    return call.pg._ranks[sender]


class P2POp:
    """One operation of :func:`batch_isend_irecv` (as torch.distributed.P2POp): ``op`` is :func:`isend` or
    :func:`irecv`, ``peer`` a global rank (or ``group_peer`` a rank of ``group``)."""

    def __new__(cls, op: Callable[..., Optional[Work]], tensor: Array, peer: Optional[int] = None,
                group: GroupLike = None, tag: int = 0, group_peer: Optional[int] = None) -> "P2POp":
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``scatterx.distributed.isend`` or "
                             "``scatterx.distributed.irecv``.")
        return object.__new__(cls)

    def __init__(self, op: Callable[..., Optional[Work]], tensor: Array, peer: Optional[int] = None,
                 group: GroupLike = None, tag: int = 0, group_peer: Optional[int] = None) -> None:
        self.op = op
        self.tensor = tensor
        self.group = group
        self.tag = tag
        pg = _resolve(group, "P2POp")
        self.group_peer: Optional[int] = None
        self.peer: Optional[int] = peer
        if pg is not None:  # a member: both spellings of the peer, checked as torch does
            self.group_peer = _group_rank(pg, peer, group_peer)
            self.peer = pg._ranks[self.group_peer] if 0 <= self.group_peer < pg.size() else peer

    def __repr__(self) -> str:
        return (f"P2POp({self.op.__name__}, peer={self.peer}, group_peer={self.group_peer}, tag={self.tag}, "
                f"shape={list(self.tensor.shape)}, dtype={self.tensor.dtype})")


def batch_isend_irecv(p2p_op_list: List[P2POp]) -> List[Work]:
    """:torch_dist:`batch_isend_irecv`: posts every op of the list, in order, and returns their :class:`Work` (same
    order). The ops are checked before the first is posted, so one bad op posts none; sends and receives may come in
    any order in the list (nothing waits until ``wait()``)."""
    if (not isinstance(p2p_op_list, list) or not p2p_op_list
            or not all(isinstance(p, P2POp) for p in p2p_op_list)):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``scatterx.distributed.P2POp``.")  # torch's message (a non-empty list, here)
    group = p2p_op_list[0].group
    if not all(group == p.group for p in p2p_op_list):
        raise ValueError("All ops need to use the same group.")
    call = _Call("batch_isend_irecv", group)
    if call.comm is None:
        return []
    ops, outputs = [], []
    for p in p2p_op_list:
        is_send = p.op is isend
        arr = call.input(p.tensor, "tensor") if is_send else call.output(p.tensor, "tensor")
        ops.append((is_send, arr, p.group_peer, int(p.tag)))
        outputs.append([] if is_send else [p.tensor])
    works = _dist.batch_isend_irecv(ops, call.comm)
    return [Work(w, out) for w, out in zip(works, outputs)]


def monitored_barrier(group: GroupLike = None, timeout: Union[datetime.timedelta, float, None] = None,
                      wait_all_ranks: bool = False) -> None:
    """A barrier that names the ranks that did not arrive (torch's, of the gloo backend): rank 0 waits up
    to ``timeout`` (default: the group's timeout) for every rank; when one is missing every rank that
    arrived raises :class:`DistTimeoutError`, rank 0 with "Rank 2 failed to pass monitoredBarrier in 2000
    ms" (with ``wait_all_ranks``: "Ranks 1, 2 ..."), and the group is unusable afterwards."""
    call = _Call("monitored_barrier", group)
    if call.comm is None:
        return None
    seconds = _seconds(timeout, "monitored_barrier")
    _dist.monitored_barrier(call.comm, call.comm.timeout() if seconds is None else seconds, bool(wait_all_ranks))
    return None


__all__ = ["P2POp", "batch_isend_irecv", "irecv", "isend", "monitored_barrier", "recv", "send"]

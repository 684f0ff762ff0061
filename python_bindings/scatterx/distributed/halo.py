"""Halo exchange for message passing on a graph whose nodes are partitioned over the ranks of a group:
``halo = build_halo(edge_index, node_owner)`` works out once which of its node rows every other rank needs;
``x_ext = halo(x_local)`` then returns this rank's rows followed by the rows it needs from the others, and
``halo.local_edge_index`` indexes that layout, so a local scatter over it aggregates every neighbour::

    halo = build_halo(edge_index, node_owner)
    x_ext = halo(x_local)                                    # [num_local + num_halo, F]
    src, dst = halo.local_edge_index
    h = scatterx.gather_scatter(x_ext, src, dst, "mean", dim_size=halo.num_local)

Contract

- ``node_owner`` [N] int tensor (any integer dtype): the group rank owning each global node, values in
  [0, group size), the same tensor on every rank (checked: a digest of it is compared across ranks).
- ``edge_index`` [2, E_local] int32/int64 tensor of this rank's edges in global node ids: row 0 the
  sources, row 1 the destinations, every destination owned by this rank (edges live with their
  destination's owner); E_local may be 0.
- Local order: this rank's owned nodes in increasing global id (``halo.local_nodes``); ``x_local`` row i
  is node ``local_nodes[i]``.
- Halo order: the nodes of other ranks that are a source of a local edge, each once however many edges
  use it, ordered by owner rank, then global id (``halo.halo_nodes``); deterministic.
- ``halo.local_edge_index`` [2, E_local] (edge_index's dtype, edges in edge_index's order): row 0 indexes
  ``x_ext`` rows (an owned source is its local row, a halo source ``num_local +`` its halo position),
  row 1 the local rows of the destinations.
- A call: ``x_local`` [num_local, ...] CPU torch tensor, any dtype scatterx's index_select takes
  (float16, bfloat16, float32, float64, integers), any trailing shape (1-d too); every rank passes the
  same dtype and trailing shape. One variable-split all-to-all per call: the rows each rank asked for,
  gathered by scatterx's index_select. Returns a new tensor; x_local is left alone.
- Backward: the halo rows' gradients go back to their owners by the reverse all-to-all and are added into
  the owned rows' own gradient with scatterx's ``index_add_`` (in arrival order: by rank, then request order),
  so the gradient is deterministic. As with every differentiable collective, every rank of the group must
  run the backward pass.
- Memory: build_halo keeps a few [N] index tensors while it works (node_owner itself is [N] on every
  rank); the HaloExchange keeps only the per-rank index lists and local_edge_index.
- Errors: a rank whose own arguments are wrong raises ValueError / TypeError / IndexError naming the
  function and argument (``build_halo: expected ... (got ...)``), and its peers raise
  :class:`MismatchError` naming it; ranks that disagree (node_owner's length or values, the rows' dtype or
  trailing shape at a call) all raise MismatchError. Nobody is left waiting.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, List, Optional, Tuple

import torch

from .. import _ops
from .._ops import _framework
from ._collectives import all_to_all_v
from ._groups import GroupLike, MismatchError, ProcessGroup, _dist, _resolve

__all__ = ["HaloExchange", "build_halo"]

_INDEX_DTYPES = (torch.int32, torch.int64)


def _member(group: GroupLike, op: str) -> ProcessGroup:
    pg = _resolve(group, op)
    if pg is None:
        raise ValueError(f"{op}: expected a group this rank is a member of, got one without it")
    return pg


def _refuse_exchange(pg: ProcessGroup, op: str) -> None:
    """Takes part in the all-to-all the peers have started, with arguments its local checks reject, so
    the peers raise MismatchError naming this rank instead of waiting for rows that never come."""
    dummy = torch.zeros(1)
    try:
        _dist.all_to_all_v(dummy, [1] * (pg.size() + 1), pg._live_comm(op), _framework(dummy))
    except ValueError:
        pass  # this rank raises its own error instead


def _graph_problem(edge_index: Any, node_owner: Any, size: int, rank: int) -> Optional[Exception]:
    op = "build_halo"
    if not isinstance(node_owner, torch.Tensor):
        return TypeError(f"{op}: expected node_owner to be a torch tensor, got {type(node_owner).__name__}")
    if not isinstance(edge_index, torch.Tensor):
        return TypeError(f"{op}: expected edge_index to be a torch tensor, got {type(edge_index).__name__}")
    if node_owner.device.type != "cpu" or edge_index.device.type != "cpu":
        return ValueError(f"{op}: expected node_owner and edge_index on the cpu, got {node_owner.device} and "
                          f"{edge_index.device}")
    if node_owner.dim() != 1 or node_owner.is_floating_point() or node_owner.is_complex() \
            or node_owner.dtype == torch.bool:
        return TypeError(f"{op}: expected node_owner to be a 1-d integer tensor [N], got {node_owner.dtype} "
                         f"{list(node_owner.shape)}")
    if edge_index.dtype not in _INDEX_DTYPES:
        return TypeError(f"{op}: expected edge_index to be int32 or int64, got {edge_index.dtype}")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        return ValueError(f"{op}: expected edge_index of shape [2, E_local], got {list(edge_index.shape)}")
    n = node_owner.shape[0]
    if n and (node_owner.min() < 0 or node_owner.max() >= size):
        bad = node_owner[(node_owner < 0) | (node_owner >= size)][0].item()
        return IndexError(f"{op}: expected node_owner values in [0, {size}) (the group's ranks), got {bad}")
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= n):
        bad = edge_index[(edge_index < 0) | (edge_index >= n)][0].item()
        return IndexError(f"{op}: expected edge_index values in [0, {n}) (node_owner's nodes), got {bad}")
    foreign = node_owner[edge_index[1].long()] != rank
    if foreign.any():
        e = int(foreign.nonzero()[0])
        dst = int(edge_index[1, e])
        return ValueError(f"{op}: expected every destination in edge_index[1] to be owned by this rank ({rank}), "
                          f"got node {dst} (edge {e}) owned by rank {int(node_owner[dst])}")
    return None


def _digest(node_owner: torch.Tensor) -> int:
    """63 bits of a hash of node_owner's values (not of their dtype, which may differ between ranks)."""
    data = node_owner.to(torch.int64).contiguous().numpy().tobytes()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") >> 1


def _agree_on_owner(pg: ProcessGroup, group: GroupLike, problem: Optional[Exception], node_owner: Any) -> None:
    """Every rank sends every rank (passed its own checks, N, digest of node_owner); each then knows what
    all the others hold and raises the same error, or none."""
    op = "build_halo"
    size = pg.size()
    if problem is None:
        mine = [1, node_owner.shape[0], _digest(node_owner)]
    else:
        mine = [0, 0, 0]
    records, _ = all_to_all_v(torch.tensor([mine] * size, dtype=torch.int64), [1] * size, group)
    if problem is not None:
        raise problem
    failed = [r for r in range(size) if records[r, 0] == 0]
    if failed:
        raise MismatchError(f"{op}: rank(s) {failed} of the group rejected their arguments (see the error raised "
                            "there); nothing was exchanged")
    for r in range(1, size):
        if records[r, 1] != records[0, 1]:
            raise MismatchError(f"{op}: expected node_owner of one length on every rank, got {int(records[0, 1])} "
                                f"nodes on rank 0 and {int(records[r, 1])} on rank {r}")
        if records[r, 2] != records[0, 2]:
            raise MismatchError(f"{op}: expected the same node_owner on every rank, got different values on "
                                f"rank 0 and rank {r}")


class HaloExchange:
    """The exchange plan of one partitioned graph (see the module's contract); made by :func:`build_halo`.

    Attributes: ``group``; ``num_local`` and ``num_halo`` (rows); ``local_nodes`` and ``halo_nodes`` (int64
    global ids of the x_local and halo rows); ``local_edge_index``; ``send_counts[r]`` / ``recv_counts[r]``
    (rows sent to / received from group rank r per forward call; the backward reverses them);
    ``send_index`` (the local rows sent, in send order).
    """

    def __init__(self, group: GroupLike, local_nodes: torch.Tensor, halo_nodes: torch.Tensor,
                 local_edge_index: torch.Tensor, send_index: torch.Tensor, send_counts: List[int],
                 recv_counts: List[int]) -> None:
        self.group = group
        self.local_nodes = local_nodes
        self.halo_nodes = halo_nodes
        self.local_edge_index = local_edge_index
        self.send_index = send_index
        self.send_counts = send_counts
        self.recv_counts = recv_counts

    @property
    def num_local(self) -> int:
        return self.local_nodes.shape[0]

    @property
    def num_halo(self) -> int:
        return self.halo_nodes.shape[0]

    def bytes_per_call(self, x_local: torch.Tensor) -> Tuple[int, int]:
        """(sent, received) bytes of this rank in one forward call on rows like x_local's (the backward moves
        the same amounts the other way); rows this rank keeps are not counted."""
        row = x_local.element_size() * math.prod(x_local.shape[1:])
        return sum(self.send_counts) * row, sum(self.recv_counts) * row

    def __call__(self, x_local: torch.Tensor) -> torch.Tensor:
        """``x_ext`` [num_local + num_halo, ...]: x_local's rows, then the halo rows. Differentiable in x_local.
        Every rank of the group calls it."""
        op = "HaloExchange"
        pg = _member(self.group, op)
        problem = None
        if not isinstance(x_local, torch.Tensor):
            problem = TypeError(f"{op}: expected x_local to be a torch tensor, got {type(x_local).__name__}")
        elif x_local.device.type != "cpu":
            problem = ValueError(f"{op}: expected x_local on the cpu, got {x_local.device}")
        elif x_local.dim() == 0 or x_local.shape[0] != self.num_local:
            problem = ValueError(f"{op}: expected x_local with num_local = {self.num_local} rows (one per owned "
                                 f"node), got shape {list(x_local.shape)}")
        if problem is not None:
            _refuse_exchange(pg, op)
            raise problem
        return _Exchange.apply(x_local, self)


def _exchange_rows(rows: torch.Tensor, send_counts: List[int], group: GroupLike) -> torch.Tensor:
    try:
        received, _ = all_to_all_v(rows, send_counts, group)
    except MismatchError as e:
        raise MismatchError(f"HaloExchange: {e}") from None
    return received


class _Exchange(torch.autograd.Function):
    """x_local -> [x_local; halo rows]; backward adds the halo rows' gradients, sent back to their owners,
    into the owned rows' gradients."""

    @staticmethod
    def forward(ctx, x_local, halo):
        ctx.halo = halo
        x = x_local.detach()
        received = _exchange_rows(_ops.index_select(x, 0, halo.send_index), halo.send_counts, halo.group)
        return torch.cat([x, received])

    @staticmethod
    def backward(ctx, grad_ext):
        halo = ctx.halo
        grad_ext = grad_ext.contiguous()
        grad_local = grad_ext[:halo.num_local].clone()
        returned = _exchange_rows(grad_ext[halo.num_local:], halo.recv_counts, halo.group)
        _ops.index_add_(grad_local, 0, halo.send_index, returned)
        return grad_local, None


def build_halo(edge_index: torch.Tensor, node_owner: torch.Tensor, group: GroupLike = None) -> HaloExchange:
    """The :class:`HaloExchange` of this rank's edges (see the module's contract). Collective: every rank of
    ``group`` calls it, with the same node_owner. Two all-to-alls: a record to agree on node_owner, then the
    global ids each rank asks its owners for."""
    op = "build_halo"
    pg = _member(group, op)
    size, rank = pg.size(), pg.rank()
    problem = _graph_problem(edge_index, node_owner, size, rank)
    _agree_on_owner(pg, group, problem, node_owner)

    owner = node_owner.to(torch.int64)
    n = owner.shape[0]
    # Each node's row on its owner: its position among the owner's nodes in global id order.
    by_owner = torch.argsort(owner, stable=True)
    counts = torch.bincount(owner, minlength=size)
    starts = torch.cumsum(counts, 0) - counts
    row_on_owner = torch.empty(n, dtype=torch.int64)
    row_on_owner[by_owner] = torch.arange(n) - starts[owner[by_owner]]

    local_nodes = by_owner[starts[rank]:starts[rank] + counts[rank]]
    src = edge_index[0].long()
    halo_nodes = torch.unique(src[owner[src] != rank])  # sorted global ids
    halo_nodes = halo_nodes[torch.argsort(owner[halo_nodes], stable=True)]
    recv_counts = torch.bincount(owner[halo_nodes], minlength=size).tolist()
    requested, send_counts = all_to_all_v(halo_nodes, recv_counts, group)
    send_index = row_on_owner[requested]

    ext_row = row_on_owner.clone()  # right for the owned nodes; the halo nodes follow them
    ext_row[halo_nodes] = local_nodes.shape[0] + torch.arange(halo_nodes.shape[0])
    local_edge_index = ext_row[edge_index.long()].to(edge_index.dtype)
    return HaloExchange(group, local_nodes, halo_nodes, local_edge_index, send_index, send_counts, recv_counts)

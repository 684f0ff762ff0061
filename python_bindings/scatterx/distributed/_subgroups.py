"""torch.distributed's subgroup helpers: new_subgroups and new_subgroups_by_enumeration over
:func:`new_group`, split_group (one split of a parent group), and the node-local rank (get_node_local_rank).

new_subgroups and new_subgroups_by_enumeration are collective over the default group, split_group over its
parent: every rank of it calls them with the same arguments, members or not, and an argument that is wrong
is wrong on every rank, so every rank raises the same ValueError before any group is made.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._groups import (GroupLike, GroupMember, ProcessGroup, _check_backend, _default_group, _option_kwargs, _resolve,
                      _seconds, _split_off, new_group)
from ._objects import all_gather_object

Subgroup = Union[ProcessGroup, int]  # a group, or GroupMember.NON_GROUP_MEMBER on a rank outside it

# Where launchers put a process's rank among those of its host: torchrun, then Open MPI, MPICH / Intel MPI,
# MVAPICH2, Slurm.
_LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                         "SLURM_LOCALID")


def get_node_local_rank(fallback_rank: Optional[int] = None) -> int:
    """:torch_dist:`get_node_local_rank`: this process's rank among those of its host, from the launcher's
    environment: ``LOCAL_RANK`` (torchrun), else Open MPI's, MPICH's, MVAPICH2's or Slurm's variable; else
    ``fallback_rank``; else RuntimeError."""
    for name in _LOCAL_RANK_VARIABLES:
        value = os.environ.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise RuntimeError(f"get_node_local_rank: expected {name} to be an integer, got {value!r}") from None
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("get_node_local_rank: none of " + ", ".join(_LOCAL_RANK_VARIABLES) + " is set (the "
                       "launcher sets one: torchrun, mpirun, srun) and no fallback_rank was given")


def _ranks_per_host(op: str) -> int:
    """The number of ranks on each host, the same on every host (collective over the default group)."""
    hosts: List[Any] = [None] * _default_group().size()
    all_gather_object(hosts, socket.gethostname())
    counts = {h: hosts.count(h) for h in hosts}
    if len(set(counts.values())) != 1:
        raise ValueError(f"{op}: expected the same number of ranks on every host for group_size=None, got "
                         + ", ".join(f"{n} on {h}" for h, n in sorted(counts.items())) + " (pass group_size)")
    return next(iter(counts.values()))


def new_subgroups(group_size: Optional[int] = None, group: GroupLike = None, timeout: Any = None,
                  backend: Optional[str] = None, pg_options: Any = None,
                  group_desc: Optional[str] = None) -> Tuple[Subgroup, List[Subgroup]]:
    """:torch_dist:`new_subgroups`: ``group``'s ranks (default: the world's) cut into consecutive subgroups of
    ``group_size`` (default: the ranks on each host, which must be the same number everywhere); returns this
    rank's subgroup and the list of all of them (``GroupMember.NON_GROUP_MEMBER`` where this rank is not a
    member). Every rank calls it, as :func:`new_group`."""
    op = "new_subgroups"
    world = _default_group()
    if group is None:
        ranks = list(range(world.size()))
    else:
        # Every rank must learn the group's ranks, members or not: each passes the same group object, or
        # its own handle, so only the members can read them; take them from the members.
        pg = _resolve(group, op)
        mine = list(pg._ranks) if pg is not None else None
        every: List[Any] = [None] * world.size()
        all_gather_object(every, mine)
        ranks = next(r for r in every if r is not None)
    size = _ranks_per_host(op) if group_size is None else group_size
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"{op}: expected group_size to be a positive int, got {size!r}")
    if len(ranks) % size:
        raise ValueError(f"{op}: expected group_size to divide the group's {len(ranks)} ranks, got {size}")
    cuts = [ranks[i:i + size] for i in range(0, len(ranks), size)]
    return _make(op, cuts, timeout, backend, pg_options, group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list: Sequence[Sequence[int]], timeout: Any = None,
                                 backend: Optional[str] = None, pg_options: Any = None,
                                 group_desc: Optional[str] = None) -> Tuple[Optional[Subgroup], List[Subgroup]]:
    """:torch_dist:`new_subgroups_by_enumeration`: one subgroup per list of global ranks (no rank in two);
    returns this rank's subgroup (None if it is in none) and the list of all of them
    (``GroupMember.NON_GROUP_MEMBER`` where this rank is not a member). Every rank calls it, as
    :func:`new_group`."""
    op = "new_subgroups_by_enumeration"
    if ranks_per_subgroup_list is None or len(ranks_per_subgroup_list) == 0:
        raise ValueError(f"{op}: expected a non-empty ranks_per_subgroup_list, got {ranks_per_subgroup_list!r}")
    cuts = [[int(r) for r in ranks] for ranks in ranks_per_subgroup_list]
    _list_of_each_rank(op, cuts, "subgroup")  # the ranks and their order: new_group checks them
    mine, groups = _make(op, cuts, timeout, backend, pg_options, group_desc)
    return (mine if isinstance(mine, ProcessGroup) else None), groups


def split_group(parent_pg: GroupLike = None, split_ranks: Optional[Sequence[Sequence[int]]] = None,
                timeout: Any = None, pg_options: Any = None, group_desc: Optional[str] = None,
                backend: Optional[str] = None) -> Subgroup:
    """:torch_dist:`split_group`: splits ``parent_pg`` (default: the world) by ``split_ranks``, lists of its group
    ranks (no rank in two), in one collective over the parent; returns this rank's new group, whose group ranks
    follow the order of its list, or ``GroupMember.NON_GROUP_MEMBER`` when no list holds this rank. Every rank of
    the parent calls it with the same lists."""
    op = "split_group"
    parent = _default_group() if parent_pg is None else _resolve(parent_pg, op)
    if parent is None:
        raise ValueError(f"{op}: expected parent_pg to be a group this rank is a member of (only its members "
                         f"call split_group), got {parent_pg!r}")
    _check_backend(backend, op)
    seconds = _seconds(timeout, op)
    settings = _option_kwargs(pg_options, op)
    if not split_ranks:
        raise ValueError(f"{op}: expected split_ranks to be a non-empty list of lists of ranks, got {split_ranks!r}")
    lists = [[int(r) for r in ranks] for ranks in split_ranks]
    for ranks in lists:
        for r in ranks:
            if not 0 <= r < parent.size():
                raise ValueError(f"{op}: expected the ranks of split_ranks within the parent group's size "
                                 f"{parent.size()}, got {r}")
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"{op}: expected distinct ranks in each split, got {ranks}")
    me = parent.rank()
    color = _list_of_each_rank(op, lists, "split").get(me, -1)
    key = lists[color].index(me) if color >= 0 else me
    members = [parent._ranks[r] for r in lists[color]] if color >= 0 else []
    return _split_off(parent, op, color, key, members, seconds, settings, group_desc)


def _list_of_each_rank(op: str, lists: List[List[int]], what: str) -> Dict[int, int]:
    """rank -> the index of the list holding it; ValueError when two lists hold one rank."""
    holder: Dict[int, int] = {}
    for k, ranks in enumerate(lists):
        for r in ranks:
            if holder.setdefault(r, k) != k:
                raise ValueError(f"{op}: expected every rank in one {what} at most, got rank {r} in {what}s "
                                 f"{holder[r]} and {k}")
    return holder


def _make(op: str, cuts: List[List[int]], timeout: Any, backend: Optional[str], pg_options: Any,
          group_desc: Optional[str]) -> Tuple[Subgroup, List[Subgroup]]:
    groups = [new_group(ranks, timeout=timeout, backend=backend, pg_options=pg_options,
                        group_desc=f"{group_desc or op}_{k}") for k, ranks in enumerate(cuts)]
    mine = next((g for g in groups if isinstance(g, ProcessGroup)), GroupMember.NON_GROUP_MEMBER)
    return mine, groups


__all__ = ["get_node_local_rank", "new_subgroups", "new_subgroups_by_enumeration", "split_group"]

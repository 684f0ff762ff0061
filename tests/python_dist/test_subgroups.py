"""new_subgroups, new_subgroups_by_enumeration, split_group, get_node_local_rank, supports_complex and the single-tensor
aliases (all_gather_single, reduce_scatter_single) of scatterx.distributed on every rank of `mpirun -n N`:
each subgroup's all_reduce against the sum of its members' ranks; a bad argument raises the same error on
every rank before any group is made."""

import os

import numpy as np
import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips


def rank_sum(group):
    """all_reduce of the global ranks over `group`."""
    x = np.array([float(RANK)])
    dist.all_reduce(x, group=group)
    return x[0]


@pytest.mark.parametrize("size", sorted({1, 2, WS}))
def test_new_subgroups_of_consecutive_ranks(size):
    if WS % size:
        pytest.skip(f"{size} does not divide {WS} ranks")
    mine, groups = dist.new_subgroups(group_size=size)
    assert len(groups) == WS // size
    first = RANK - RANK % size
    assert dist.get_process_group_ranks(mine) == list(range(first, first + size))
    assert [isinstance(g, dist.ProcessGroup) for g in groups] == [k == RANK // size for k in range(WS // size)]
    assert rank_sum(mine) == sum(range(first, first + size))


def test_new_subgroups_default_is_the_ranks_of_each_host():
    hosts = int(os.environ.get("SCATTERX_TEST_HOSTS", "1"))  # scripts/multihost.sh: ranks placed host by host
    per_host = WS // hosts
    mine, groups = dist.new_subgroups()
    assert len(groups) == hosts and groups[RANK // per_host] is mine
    first = RANK - RANK % per_host
    assert dist.get_process_group_ranks(mine) == list(range(first, first + per_host))


def test_new_subgroups_of_a_group():
    evens = dist.new_group([r for r in range(WS) if r % 2 == 0])
    mine, groups = dist.new_subgroups(group_size=1, group=evens)
    assert len(groups) == (WS + 1) // 2
    if RANK % 2 == 0:
        assert dist.get_process_group_ranks(mine) == [RANK]
    else:
        assert mine == dist.GroupMember.NON_GROUP_MEMBER
        assert groups == [dist.GroupMember.NON_GROUP_MEMBER] * len(groups)


@pytest.mark.parametrize("size", [0, -1, WS + 1, 1.5])
def test_new_subgroups_bad_size_raises_on_every_rank(size):
    with pytest.raises(ValueError, match="new_subgroups: expected group_size"):
        dist.new_subgroups(group_size=size)


def test_new_subgroups_by_enumeration():
    lists = [[0], list(range(1, WS))] if WS > 1 else [[0]]
    mine, groups = dist.new_subgroups_by_enumeration(lists)
    assert len(groups) == len(lists)
    members = lists[0] if RANK == 0 else lists[1]
    assert dist.get_process_group_ranks(mine) == members
    assert rank_sum(mine) == sum(members)


@pytest.mark.skipif(WS < 2, reason="needs 2 ranks")
def test_new_subgroups_by_enumeration_leaves_out_ranks():
    mine, groups = dist.new_subgroups_by_enumeration([[WS - 1]])
    if RANK == WS - 1:
        assert dist.get_process_group_ranks(mine) == [WS - 1]
    else:
        assert mine is None and groups == [dist.GroupMember.NON_GROUP_MEMBER]


def test_new_subgroups_by_enumeration_bad_lists_raise_on_every_rank():
    with pytest.raises(ValueError, match="every rank in one subgroup at most, got rank 0 in subgroups 0 and 1"):
        dist.new_subgroups_by_enumeration([[0], [0]])
    with pytest.raises(ValueError, match="expected a non-empty ranks_per_subgroup_list"):
        dist.new_subgroups_by_enumeration([])
    assert rank_sum(None) == sum(range(WS))


def test_get_node_local_rank(monkeypatch):
    if "OMPI_COMM_WORLD_LOCAL_RANK" in os.environ and "LOCAL_RANK" not in os.environ:
        assert dist.get_node_local_rank() == int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
    for name in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                 "SLURM_LOCALID"):
        monkeypatch.delenv(name, raising=False)
    assert dist.get_node_local_rank(fallback_rank=7) == 7
    with pytest.raises(RuntimeError, match="get_node_local_rank: none of LOCAL_RANK"):
        dist.get_node_local_rank()
    monkeypatch.setenv("SLURM_LOCALID", "2")
    assert dist.get_node_local_rank() == 2
    monkeypatch.setenv("LOCAL_RANK", "5")  # torchrun's comes first
    assert dist.get_node_local_rank(fallback_rank=7) == 5
    monkeypatch.setenv("LOCAL_RANK", "five")
    with pytest.raises(RuntimeError, match="expected LOCAL_RANK to be an integer, got 'five'"):
        dist.get_node_local_rank()


def test_supports_complex_matches_what_all_reduce_takes():
    for op in dist.ReduceOp:
        if op is dist.ReduceOp.PREMUL_SUM:
            continue
        x = np.array([1 + 2j, 3 - 1j])
        try:
            dist.all_reduce(x, op=op)
            took = True
        except TypeError:
            took = False
        assert dist.supports_complex(op) == took, op
    assert dist.supports_complex(dist._make_nccl_premul_sum(0.5))
    assert dist.supports_complex("sum") and not dist.supports_complex("max")
    with pytest.raises(ValueError, match="supports_complex: expected reduceOp to be one of ReduceOp.SUM"):
        dist.supports_complex("median")


def test_single_tensor_aliases():
    out = np.zeros((WS, 2))
    assert dist.all_gather_single(out, np.array([RANK, -RANK], dtype=np.float64)) is None
    assert np.array_equal(out, np.stack([[q, -q] for q in range(WS)]).astype(np.float64))
    got = np.zeros(3)
    work = dist.reduce_scatter_single(got, np.arange(3.0 * WS) + RANK, op=dist.ReduceOp.SUM, async_op=True)
    assert work.wait()
    want = sum(np.arange(3.0 * WS) + q for q in range(WS))[3 * RANK:3 * RANK + 3]
    assert np.array_equal(got, want)


def test_split_group_keeps_the_order_of_its_lists():
    group = dist.split_group(split_ranks=[list(reversed(range(WS)))])
    assert dist.get_process_group_ranks(group) == list(reversed(range(WS)))
    assert dist.get_rank(group) == WS - 1 - RANK
    x = np.array([float(RANK)])
    dist.broadcast(x, group=group, group_src=0)  # group rank 0 is the last global rank
    assert x[0] == WS - 1
    assert rank_sum(group) == sum(range(WS))


def test_split_group_of_a_parent_group():
    evens = dist.new_group([r for r in range(WS) if r % 2 == 0])
    if RANK % 2:
        with pytest.raises(ValueError, match="split_group: expected parent_pg to be a group this rank is a member"):
            dist.split_group(evens, [[0]])
        return
    group = dist.split_group(evens, [[0]], group_desc="first even")
    if RANK == 0:
        assert dist.get_process_group_ranks(group) == [0] and group.name() == "first even"
        assert rank_sum(group) == 0
    else:
        assert group == dist.GroupMember.NON_GROUP_MEMBER


def test_split_group_bad_lists_raise_on_every_rank():
    with pytest.raises(ValueError, match="expected every rank in one split at most, got rank 0 in splits 0 and 1"):
        dist.split_group(split_ranks=[[0], [0]])
    with pytest.raises(ValueError, match=f"within the parent group's size {WS}, got {WS}"):
        dist.split_group(split_ranks=[[WS]])
    with pytest.raises(ValueError, match="expected split_ranks to be a non-empty list"):
        dist.split_group()
    assert rank_sum(None) == sum(range(WS))

"""The object collectives and point-to-point of scatterx.distributed (all_gather_object, gather_object,
broadcast_object_list, scatter_object_list, send_object_list, recv_object_list) on every rank of
`mpirun -n N`, against objects every rank can rebuild from the ranks; an object that does not pickle, or a
bad list, raises on every rank (nobody waits) and leaves the group usable."""

import pickle

import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

ROOTS = [pytest.param(0, id="root0"), pytest.param(-1, id="root-last")]
PICKLE_ERRORS = (pickle.PicklingError, AttributeError, TypeError)


def thing(q, salt=0):
    """A picklable object of rank q's, of a size that grows with q (the empty string on rank 0)."""
    return {"rank": q, "salt": salt, "text": "x" * (q * 37), "items": list(range(q * 5)), "none": None}


def group_still_works():
    check = [None] * WS
    dist.all_gather_object(check, RANK)
    assert check == list(range(WS))


def test_all_gather_broadcast_gather_object():
    objects = [None] * WS
    dist.all_gather_object(objects, thing(RANK))
    assert objects == [thing(q) for q in range(WS)]

    listed = [("from root", 1.5, list(range(50)))] * 2 if RANK == WS - 1 else [None, None]
    dist.broadcast_object_list(listed, src=WS - 1)
    assert listed == [("from root", 1.5, list(range(50)))] * 2

    gathered = [None] * WS if RANK == 0 else None
    dist.gather_object(RANK * RANK, gathered, dst=0)
    if RANK == 0:
        assert gathered == [q * q for q in range(WS)]


@pytest.mark.parametrize("which", ROOTS)
def test_scatter_object_list(which):
    root = which % WS
    out = ["untouched", "second slot"]
    pieces = [thing(q, salt=3) for q in range(WS)] if RANK == root else None
    assert dist.scatter_object_list(out, pieces, src=root) is None
    assert out == [thing(RANK, salt=3), "second slot"]
    if RANK == root:
        assert pieces == [thing(q, salt=3) for q in range(WS)]  # the source's list is left as it was


def test_scatter_object_list_group_src_and_empty_objects():
    out = [None]
    dist.scatter_object_list(out, [""] * WS if RANK == 0 else None, group_src=0)
    assert out == [""]


@pytest.mark.parametrize("bad", ["length", "none", "unpicklable"])
def test_scatter_object_list_bad_source_raises_on_every_rank(bad):
    root = WS - 1
    out = [None]
    if RANK == root:
        pieces = {"length": [1] * (WS + 1), "none": None, "unpicklable": [lambda: q for q in range(WS)]}[bad]
        expected = PICKLE_ERRORS if bad == "unpicklable" else ValueError
        with pytest.raises(expected):
            dist.scatter_object_list(out, pieces, src=root)
    else:
        with pytest.raises(dist.MismatchError, match=f"scatter_object_list: the source \\(rank {root} of the group"):
            dist.scatter_object_list(out, None, src=root)
    assert out == [None]
    group_still_works()


def test_scatter_object_list_needs_an_output_slot():
    with pytest.raises(ValueError, match="expected scatter_object_output_list to be a list of at least 1 slot"):
        dist.scatter_object_list([], list(range(WS)) if RANK == 0 else None, src=0)
    group_still_works()


def test_an_unpicklable_object_raises_on_every_rank():
    bad_rank = WS - 1
    objects = [None] * WS
    if RANK == bad_rank:
        with pytest.raises(PICKLE_ERRORS):
            dist.all_gather_object(objects, lambda: RANK)
    else:
        with pytest.raises(dist.MismatchError, match=f"all_gather_object: rank {bad_rank} of the group"):
            dist.all_gather_object(objects, thing(RANK))
    assert objects == [None] * WS
    group_still_works()


def test_broadcast_object_list_unpicklable_source_raises_on_every_rank():
    listed = [1, lambda: 0] if RANK == 0 else [None, None]
    if RANK == 0:
        with pytest.raises(PICKLE_ERRORS):
            dist.broadcast_object_list(listed, src=0)
    else:
        with pytest.raises(dist.MismatchError, match="broadcast_object_list: the source \\(rank 0 of the group"):
            dist.broadcast_object_list(listed, src=0)
        assert listed == [None, None]
    group_still_works()


def test_broadcast_object_list_short_list_raises_only_there():
    short = WS - 1
    listed = [None] * (1 if RANK == short and RANK != 0 else 3)
    if RANK == 0:
        listed = ["a", "b", "c"]
    if RANK == short and RANK != 0:
        with pytest.raises(ValueError, match="broadcast_object_list: expected object_list to be a list of 3 slots"):
            dist.broadcast_object_list(listed, src=0)
    else:
        dist.broadcast_object_list(listed, src=0)
        assert listed == ["a", "b", "c"]
    group_still_works()


@pytest.mark.skipif(WS < 2, reason="needs 2 ranks")
def test_send_recv_object_list_both_ways():
    if RANK == 0:
        for q in range(1, WS):
            dist.send_object_list([thing(q), "to", q], dst=q)
        for q in range(1, WS):
            back = [None, None]
            assert dist.recv_object_list(back, src=q) == q
            assert back == [q, thing(q, salt=1)]
    else:
        got = [None] * 3
        assert dist.recv_object_list(got) == 0  # from any rank
        assert got == [thing(RANK), "to", RANK]
        dist.send_object_list([RANK, thing(RANK, salt=1)], group_dst=0)


@pytest.mark.skipif(WS < 2, reason="needs 2 ranks")
def test_recv_object_list_of_the_wrong_length_leaves_no_message_behind():
    if RANK == 0:
        dist.send_object_list([1, 2, 3], dst=1)
        dist.send_object_list(["next"], dst=1)
        dist.send_object_list([], dst=1)
    elif RANK == 1:
        with pytest.raises(ValueError, match="recv_object_list: expected object_list to be a list of 3 slots, got "
                                             "list of length 2"):
            dist.recv_object_list([None, None], src=0)
        nxt = [None]
        assert dist.recv_object_list(nxt, src=0) == 0
        assert nxt == ["next"]
        assert dist.recv_object_list([], src=0) == 0
    group_still_works()


def test_send_object_list_refuses_an_unpicklable_object_before_sending():
    with pytest.raises(PICKLE_ERRORS):
        dist.send_object_list([lambda: 0], dst=(RANK + 1) % WS)
    with pytest.raises(TypeError, match="send_object_list: expected object_list to be a list, got tuple"):
        dist.send_object_list((1, 2), dst=(RANK + 1) % WS)
    group_still_works()

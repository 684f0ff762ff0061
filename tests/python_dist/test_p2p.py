"""send, recv, isend, irecv, P2POp + batch_isend_irecv and monitored_barrier of scatterx.distributed, on
every rank of `mpirun -n N`: each message holds value(sender, ...), so the receiver knows exactly what it
must hold. At one rank the rings go to this rank itself through isend/irecv (which torch allows); tests
that need a second rank skip. numpy and torch arrays, every dtype, non-contiguous views, groups with
global and group ranks, tags, any-source receives, errors, and torch's signatures."""

import datetime
import inspect
import time
import warnings

import numpy as np
import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

NEXT, PREV = (RANK + 1) % WS, (RANK - 1) % WS
needs_two = pytest.mark.skipif(WS < 2, reason="needs at least two ranks")

NUMPY_DTYPES = ["float16", "float32", "float64", "complex64", "complex128", "int8", "uint8", "int16", "int32",
                "int64", "bool"]


def value(sender, shape, dtype="float64", salt=0):
    """The message `sender` sends: small distinct integers (exact in every dtype; bool alternates)."""
    n = int(np.prod(shape))
    base = (np.arange(n) * 3 + sender * 50 + salt) % 120
    if dtype == "bool":
        return ((base + sender) % 2 == 1).reshape(shape)
    out = base.astype(dtype).reshape(shape)
    if np.dtype(dtype).kind == "c":
        out = out + 1j * (sender + 1)
    return out.astype(dtype)


def ring(send_buf, recv_buf, tag=0):
    """isend to the next rank, irecv from the previous one; returns the receive's Work."""
    r = dist.irecv(recv_buf, src=PREV, tag=tag)
    s = dist.isend(send_buf, dst=NEXT, tag=tag)
    assert s.wait() is True
    assert r.wait() is True
    return r


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_ring_numpy(dtype):
    got = np.zeros((3, 4), dtype=dtype)
    work = ring(value(RANK, (3, 4), dtype), got)
    assert np.array_equal(got, value(PREV, (3, 4), dtype))
    assert work.is_completed()
    assert work._source_rank() == PREV


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "complex64", "bool", "int64"])
def test_ring_torch(torch, dtype):
    dt = getattr(torch, dtype)

    def tensor(sender):
        if dtype == "bfloat16":
            return torch.from_numpy(value(sender, (5, 2), "float32")).to(dt)
        return torch.from_numpy(value(sender, (5, 2), "complex64" if dtype == "complex64" else dtype))

    got = torch.zeros((5, 2), dtype=dt)
    ring(tensor(RANK), got)
    assert torch.equal(got, tensor(PREV))


@needs_two
def test_blocking_send_recv_returns_global_sender():
    mine = value(RANK, (7,))
    got = np.zeros(7)
    # Even ranks send first, odd ranks receive first (no cycle of waits).
    if RANK % 2 == 0:
        assert dist.send(mine, dst=NEXT) is None
        assert dist.recv(got, src=PREV) == PREV
    else:
        assert dist.recv(got, src=PREV) == PREV
        dist.send(mine, dst=NEXT)
    assert np.array_equal(got, value(PREV, (7,)))


def test_non_contiguous_views(torch):
    src = np.zeros((8, 6))
    src[::2, 1:4] = value(RANK, (4, 3))
    got = np.full((3, 4), -1.0).T  # transposed, written in place
    ring(src[::2, 1:4], got, tag=3)
    assert np.array_equal(got, value(PREV, (4, 3)))
    t_src = torch.from_numpy(value(RANK, (3, 5))).t()
    base = torch.full((10, 3), -1.0, dtype=torch.float64)
    t_got = base[::2]
    ring(t_src, t_got, tag=4)
    assert torch.equal(t_got, torch.from_numpy(value(PREV, (3, 5))).t())
    assert torch.equal(base[1::2], torch.full((5, 3), -1.0, dtype=torch.float64))


def test_empty_message():
    got = np.zeros((0, 3))
    work = ring(np.zeros((0, 3)), got, tag=5)
    assert work._source_rank() == PREV


def test_tags_match_out_of_order():
    s1 = dist.isend(value(RANK, (4,), salt=1), dst=NEXT, tag=1)
    s2 = dist.isend(value(RANK, (4,), salt=2), dst=NEXT, tag=2)
    got2, got1 = np.zeros(4), np.zeros(4)
    r2 = dist.irecv(got2, src=PREV, tag=2)
    r1 = dist.irecv(got1, src=PREV, tag=1)
    for w in (r2, r1, s1, s2):
        w.wait()
    assert np.array_equal(got2, value(PREV, (4,), salt=2))
    assert np.array_equal(got1, value(PREV, (4,), salt=1))


@needs_two
def test_any_source_recv():
    if RANK == 0:
        senders = set()
        for k in range(1, WS):
            got = np.zeros(6)
            if k % 2:
                sender = dist.recv(got, tag=8)
            else:
                work = dist.irecv(got, tag=8)
                sender = work._source_rank()
            assert np.array_equal(got, value(sender, (6,)))
            senders.add(sender)
        assert senders == set(range(1, WS))
    else:
        dist.send(value(RANK, (6,)), dst=0, tag=8)


def test_group_ranks_and_non_members():
    # The ranks from 1 up (at one rank: the world), in a group of their own.
    members = list(range(1, WS)) or [0]
    pg = dist.new_group(members)
    if RANK not in members:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert dist.isend(np.zeros(2), dst=1, group=pg) is None
            assert dist.recv(np.zeros(2), group=pg) == -1
            assert dist.irecv(np.zeros(2), group=pg) is None
            assert dist.monitored_barrier(group=pg) is None
        assert any("does not belong to the given group" in str(w.message) for w in caught)
        return
    me = members.index(RANK)
    n = len(members)
    to, frm = members[(me + 1) % n], members[(me - 1) % n]
    got_a, got_b = np.zeros(3), np.zeros(3)
    # global ranks (dst/src), then group ranks (group_dst/group_src)
    r = dist.irecv(got_a, src=frm, group=pg)
    dist.isend(value(RANK, (3,)), dst=to, group=pg).wait()
    r.wait()
    assert r._source_rank() == (me - 1) % n  # torch's: a group rank
    r = dist.irecv(got_b, group_src=(me - 1) % n, group=pg, tag=2)
    dist.isend(value(RANK, (3,), salt=9), group_dst=(me + 1) % n, group=pg, tag=2).wait()
    r.wait()
    assert np.array_equal(got_a, value(frm, (3,)))
    assert np.array_equal(got_b, value(frm, (3,), salt=9))
    if n >= 2:
        got = np.zeros(3)
        if me % 2 == 0:
            dist.send(value(RANK, (3,)), group_dst=(me + 1) % n, group=pg)
            assert dist.recv(got, group_src=(me - 1) % n, group=pg) == frm  # the global rank
        else:
            assert dist.recv(got, group=pg) == frm
            dist.send(value(RANK, (3,)), dst=to, group=pg)
        assert np.array_equal(got, value(frm, (3,)))
    dist.monitored_barrier(group=pg, timeout=datetime.timedelta(seconds=30))


def test_batch_isend_irecv_ring_both_ways():
    to_next, to_prev = value(RANK, (4,), salt=1), value(RANK, (4,), salt=2)
    from_prev, from_next = np.zeros(4), np.zeros(4)
    ops = [dist.P2POp(dist.irecv, from_prev, PREV), dist.P2POp(dist.irecv, from_next, NEXT),
           dist.P2POp(dist.isend, to_next, NEXT), dist.P2POp(dist.isend, to_prev, PREV)]
    works = dist.batch_isend_irecv(ops)
    assert len(works) == 4
    for w in works:
        w.wait()
    assert np.array_equal(from_prev, value(PREV, (4,), salt=1))
    assert np.array_equal(from_next, value(NEXT, (4,), salt=2))


def test_torch_docs_batch_isend_irecv_example(torch):
    # torch.distributed.batch_isend_irecv's docstring example, unchanged but for the import.
    rank, world_size = dist.get_rank(), dist.get_world_size()
    send_tensor = torch.arange(2, dtype=torch.float32) + 2 * rank
    recv_tensor = torch.randn(2, dtype=torch.float32)
    send_op = dist.P2POp(dist.isend, send_tensor, (rank + 1) % world_size)
    recv_op = dist.P2POp(dist.irecv, recv_tensor, (rank - 1 + world_size) % world_size)
    reqs = dist.batch_isend_irecv([send_op, recv_op])
    for req in reqs:
        req.wait()
    assert torch.equal(recv_tensor, torch.arange(2, dtype=torch.float32) + 2 * PREV)


def test_errors_are_value_errors_and_post_nothing():
    x = np.zeros(4)
    with pytest.raises(ValueError, match="destination rank should not be the same"):
        dist.send(x, dst=RANK)
    with pytest.raises(ValueError, match=f"Global rank {WS} is not part of group"):
        dist.isend(x, dst=WS)
    with pytest.raises(ValueError, match="Can't specify both"):
        dist.irecv(x, src=0, group_src=0)
    with pytest.raises(ValueError, match="Must specify global_rank or group_rank"):
        dist.isend(x)
    with pytest.raises(ValueError, match="isend: tag expected"):
        dist.isend(x, dst=NEXT, tag=-1)
    with pytest.raises(ValueError, match="src expected a rank"):
        dist.irecv(x, group_src=WS + 2)
    with pytest.raises(ValueError, match="Invalid ``op``"):
        dist.P2POp(dist.send, x, NEXT)
    with pytest.raises(ValueError, match="Invalid ``p2p_op_list``"):
        dist.batch_isend_irecv([])
    with pytest.raises(ValueError, match="Invalid ``p2p_op_list``"):
        dist.batch_isend_irecv([dist.P2POp(dist.isend, x, NEXT), "op"])
    with pytest.raises(ValueError, match="same group"):
        dist.batch_isend_irecv([dist.P2POp(dist.isend, x, NEXT), dist.P2POp(dist.irecv, x, PREV, group=dist.new_group())])
    # One bad op (a negative tag) posts none: had the good send gone out, the receive below would get it.
    bad = [dist.P2POp(dist.isend, value(RANK, (4,), salt=1), NEXT, tag=6),
           dist.P2POp(dist.isend, value(RANK, (4,)), NEXT, tag=-3)]
    with pytest.raises(ValueError, match=r"batch_isend_irecv: ops\[1\].*tag"):
        dist.batch_isend_irecv(bad)
    got = np.zeros(4)
    ring(value(RANK, (4,), salt=2), got, tag=6)
    assert np.array_equal(got, value(PREV, (4,), salt=2))


def test_size_mismatch_raises_and_group_stays_usable():
    r = dist.irecv(np.zeros(5), src=PREV, tag=7)
    s = dist.isend(np.zeros(4), dst=NEXT, tag=7)
    with pytest.raises(dist.MismatchError, match="40 bytes, got 32 bytes"):
        r.wait()
    s.wait()
    got = np.zeros(4)
    ring(value(RANK, (4,)), got, tag=7)
    assert np.array_equal(got, value(PREV, (4,)))


def test_monitored_barrier_passes():
    dist.monitored_barrier()
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    dist.monitored_barrier(dist.group.WORLD, 30.0)
    with pytest.raises(ValueError, match="positive timeout"):
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=0))


def _late_ranks():
    return [1, WS - 1] if WS >= 3 else [WS - 1]


@needs_two
@pytest.mark.parametrize("wait_all_ranks", [False, True], ids=["first", "all"])
def test_monitored_barrier_names_the_late_ranks(wait_all_ranks):
    pg = dist.new_group()  # a fresh group: a failed barrier leaves it unusable
    late = _late_ranks()
    named = late if wait_all_ranks else late[:1]
    text = ("Rank " if len(named) == 1 else "Ranks ") + ", ".join(map(str, named))
    text += " failed to pass monitoredBarrier in 1000 ms"
    if RANK in late:
        time.sleep(2.5)
    with pytest.raises(dist.DistTimeoutError) as caught:
        dist.monitored_barrier(group=pg, timeout=datetime.timedelta(seconds=1), wait_all_ranks=wait_all_ranks)
    assert text in str(caught.value)
    if RANK == 0:
        assert "[Rank 0]" in str(caught.value)
    if RANK in late:
        assert "arrived after rank 0 stopped waiting" in str(caught.value)
    with pytest.raises(RuntimeError, match="unusable"):
        dist.monitored_barrier(group=pg, timeout=1.0)


def test_signatures_match_torch(torch):
    tdist = pytest.importorskip("torch.distributed")
    for name in ["send", "recv", "isend", "irecv", "batch_isend_irecv", "monitored_barrier"]:
        ours = inspect.signature(getattr(dist, name)).parameters
        theirs = inspect.signature(getattr(tdist, name)).parameters
        assert list(ours) == list(theirs), name
        for p in ours:
            assert ours[p].default == theirs[p].default, (name, p)
    ours = inspect.signature(dist.P2POp.__init__).parameters
    theirs = inspect.signature(tdist.P2POp.__init__).parameters
    assert list(ours) == list(theirs)
    assert [v.default for v in ours.values()] == [v.default for v in theirs.values()]

"""gather, gather_single, scatter and reduce of scatterx.distributed, on every rank of
`mpirun -n N`, against exact rank formulas; numpy and torch arrays; roots at both ends; a bad argument on
the root raises there and MismatchError on the other ranks (nobody waits)."""

import numpy as np
import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

ROOTS = [pytest.param(0, id="root0"), pytest.param(-1, id="root-last")]


def value(q, shape, salt=0):
    return (np.arange(int(np.prod(shape))).reshape(shape) * 3 + q * 100 + salt).astype(np.float64)


def root_of(which):
    return which % WS


@pytest.mark.parametrize("which", ROOTS)
def test_gather_numpy(which):
    root = root_of(which)
    mine = value(RANK, (2, 3))
    got = [np.full((2, 3), -1.0) for _ in range(WS)] if RANK == root else None
    dist.gather(mine, got, dst=root)
    assert np.array_equal(mine, value(RANK, (2, 3)))
    if RANK == root:
        for q in range(WS):
            assert np.array_equal(got[q], value(q, (2, 3)))


@pytest.mark.parametrize("which", ROOTS)
def test_scatter_numpy(which):
    root = root_of(which)
    pieces = [value(q, (4,), salt=7) for q in range(WS)] if RANK == root else None
    mine = np.full(4, -1.0)
    dist.scatter(mine, pieces, src=root)
    assert np.array_equal(mine, value(RANK, (4,), salt=7))


@pytest.mark.parametrize("which", ROOTS)
@pytest.mark.parametrize("op", ["SUM", "MAX"])
def test_reduce_numpy(which, op):
    root = root_of(which)
    mine = value(RANK, (5,))
    dist.reduce(mine, dst=root, op=getattr(dist.ReduceOp, op))
    every = np.stack([value(q, (5,)) for q in range(WS)])
    want = every.sum(0) if op == "SUM" else every.max(0)
    assert np.array_equal(mine, want if RANK == root else value(RANK, (5,)))


def test_torch_tensors_and_async():
    torch = pytest.importorskip("torch", reason="torch not installed")
    root = WS - 1
    mine = torch.arange(6, dtype=torch.int64).reshape(2, 3) + RANK
    got = [torch.empty(3, 2, dtype=torch.int64) for _ in range(WS)] if RANK == root else None
    work = dist.gather(mine.t(), got, dst=root, async_op=True)  # a strided view
    assert work.wait()
    if RANK == root:
        for q in range(WS):
            assert torch.equal(got[q], (torch.arange(6).reshape(2, 3) + q).t())
    out = torch.empty(3, dtype=torch.float32)
    dist.scatter(out, [torch.full((3,), float(q)) for q in range(WS)] if RANK == 0 else None)
    assert torch.equal(out, torch.full((3,), float(RANK)))


@pytest.mark.parametrize("which", ROOTS)
@pytest.mark.parametrize("layout", ["concat", "stack"])
def test_gather_single_numpy(which, layout):
    root = root_of(which)
    mine = value(RANK, (2, 3))
    out = np.full((WS * 2, 3) if layout == "concat" else (WS, 2, 3), -1.0) if RANK == root else None
    assert dist.gather_single(mine, out, dst=root) is None
    if RANK == root:
        assert np.array_equal(out.reshape(WS, 2, 3), np.stack([value(q, (2, 3)) for q in range(WS)]))


def test_gather_into_tensor_torch_async():
    torch = pytest.importorskip("torch", reason="torch not installed")
    mine = torch.arange(4, dtype=torch.int32) + 10 * RANK
    out = torch.full((WS, 4), -1, dtype=torch.int32) if RANK == 0 else None
    work = dist.gather_into_tensor(mine, out, group_dst=0, async_op=True)
    assert work.wait()
    if RANK == 0:
        assert torch.equal(out, torch.arange(4, dtype=torch.int32) + 10 * torch.arange(WS, dtype=torch.int32)[:, None])


def raises_on_every_rank(root, on_root, on_others, root_error):
    """on_root() raises ValueError matching root_error on the root, and on_others() MismatchError naming the root
    on every other rank; the group works afterwards."""
    if RANK == root:
        with pytest.raises(ValueError, match=root_error):
            on_root()
    else:
        with pytest.raises(dist.MismatchError, match=f"rank {root} of {WS} rejected its arguments"):
            on_others()
    check = np.array([1.0])
    dist.all_reduce(check)
    assert check[0] == WS


@pytest.mark.parametrize("bad", ["none", "size", "strided"])
def test_gather_single_bad_output_raises_on_every_rank(bad):
    root = WS - 1
    mine = value(RANK, (3,))
    out = {"none": None, "size": np.empty(3 * WS + 1), "strided": np.empty((3 * WS, 2))[:, 0]}[bad]
    raises_on_every_rank(root, lambda: dist.gather_single(mine, out, dst=root),
                         lambda: dist.gather_single(mine, None, dst=root),
                         "gather_single: expected gather_tensor to be a contiguous array")


def test_bad_gather_list_raises_on_every_rank():
    root = WS - 1
    mine = value(RANK, (3,))
    raises_on_every_rank(root, lambda: dist.gather(mine, [np.empty(3)] * (WS + 1), dst=root),
                         lambda: dist.gather(mine, None, dst=root),
                         f"gather: expected gather_list to hold one tensor per rank \\({WS}\\), got {WS + 1}")


def test_bad_scatter_list_raises_on_every_rank():
    mine = np.empty(2)
    raises_on_every_rank(0, lambda: dist.scatter(mine, [np.zeros(3)] * WS, src=0),
                         lambda: dist.scatter(mine, None, src=0),
                         r"scatter: expected scatter_list\[0\] of 2 float64 elements \(tensor's\), got 3")


def test_root_outside_the_group_is_refused():
    with pytest.raises(ValueError, match=f"Global rank {WS} is not part of group"):
        dist.reduce(np.zeros(1), dst=WS)

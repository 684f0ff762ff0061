"""scatterx.distributed against exact answers, on every rank of `mpirun -n N`.

Every input is a formula of (source rank, destination rank, position), so
each rank computes what it must receive. Tests run the collectives first
and assert afterwards, so that a wrong answer on one rank fails there
without leaving its peers waiting in a later collective.
"""

import datetime
import os
import time
import warnings

import numpy as np
import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

NP_DTYPES = [np.float32, np.float64, np.int64, np.complex128, np.bool_]
ARITHMETIC_OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG"]
BITWISE_OPS = ["BAND", "BOR", "BXOR"]
OPS = ARITHMETIC_OPS + BITWISE_OPS  # PREMUL_SUM, which carries a factor: test_reduce_ops.py
ASYNC = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


def supported(dtype, op):
    dtype = np.dtype(dtype)
    if op in BITWISE_OPS:
        return dtype.kind in "iub"
    if dtype.kind == "c":
        return op in ("SUM", "PRODUCT", "AVG")
    if dtype.kind == "b":
        return op != "AVG"
    return True


# every (dtype, op) the layer defines; the others must raise (test_unsupported_reduce_raises)
REDUCE_CASES = [pytest.param(d, op, id=f"{np.dtype(d).name}-{op}") for d in NP_DTYPES for op in OPS if supported(d, op)]


def values(q, shape, dtype, op="SUM", salt=0):
    """Rank q's input: small exact values (products of up to 3 ranks stay exact)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    k = np.arange(n, dtype=np.int64).reshape(shape) + salt
    if dtype.kind == "b":
        return ((k + q) % 3 != 0) if op in ("PRODUCT", "MIN", "BAND") else ((k * (q + 1)) % 4 == 1)
    if op in BITWISE_OPS:  # every bit of a byte, the sign bit included, differing per rank
        return ((k * 37 + q * 101 + 3) % 256 - 128).astype(dtype)
    if op == "PRODUCT":
        v = (k + q) % 3 + 1
    else:
        v = (k * 7 + q * 5) % 11 - 5
    if dtype.kind == "c":
        return (v + 1j * ((k + 2 * q) % 5 - 2)).astype(dtype)
    return v.astype(dtype)


def reduce_ref(arrays, op, dtype):
    dtype = np.dtype(dtype)
    st = np.stack(arrays)
    if op in BITWISE_OPS:
        return {"BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[op].reduce(st, 0)
    if dtype.kind == "b":
        return {"SUM": st.any(0), "MAX": st.any(0), "PRODUCT": st.all(0), "MIN": st.all(0)}[op]
    if op == "SUM":
        return st.sum(0, dtype=dtype)
    if op == "PRODUCT":
        return st.prod(0, dtype=dtype)
    if op == "MIN":
        return st.min(0)
    if op == "MAX":
        return st.max(0)
    total = st.sum(0, dtype=dtype)
    n = len(arrays)
    if dtype.kind in "iu":
        return np.floor_divide(total, n).astype(dtype)
    if dtype.kind == "c":  # divided by a real count, as the C++ does
        real = np.dtype(f"f{dtype.itemsize // 2}").type
        return (total.real / real(n) + 1j * (total.imag / real(n))).astype(dtype)
    return (total / dtype.type(n)).astype(dtype)


def block(src, dst, rows, cols, dtype):
    """The rows rank src sends rank dst: 1000 src + 100 dst + 10 row + col."""
    v = 1000 * src + 100 * dst + 10 * np.arange(rows)[:, None] + np.arange(cols)[None, :]
    if np.dtype(dtype).kind == "b":
        return (v % 3 == 0)
    return v.astype(dtype)


def finish(work, async_op):
    """Checks what a collective returned: None when synchronous, a Work that completes when async."""
    if not async_op:
        assert work is None
        return
    assert isinstance(work, dist.Work)
    assert work.wait() is True
    assert work.is_completed()


def assert_equal(got, expected):
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, expected)


# ---- setup, groups, API -----------------------------------------------------------------------------------


def test_world_matches_mpi():
    assert dist.is_available() and dist.is_mpi_available()
    assert dist.is_initialized()
    env_size = os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMI_SIZE")
    env_rank = os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK")
    if env_size is not None:
        assert WS == int(env_size) and RANK == int(env_rank)
    assert 0 <= RANK < WS
    assert dist.get_backend() == "mpi" == dist.Backend.MPI
    assert isinstance(dist.GroupMember.WORLD, dist.ProcessGroup)
    assert dist.group.WORLD is dist.GroupMember.WORLD
    assert dist.GroupMember.WORLD.rank() == RANK and dist.GroupMember.WORLD.size() == WS
    assert dist.get_rank(dist.GroupMember.WORLD) == RANK
    assert dist.get_process_group_ranks(dist.GroupMember.WORLD) == list(range(WS))


def test_init_twice_is_an_error():
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("mpi")


def test_reduce_op_names():
    assert {op.name for op in dist.ReduceOp} == set(OPS) | {"PREMUL_SUM"}
    assert dist.ReduceOp.SUM is dist.ReduceOp["SUM"]
    x = np.array([RANK + 1], np.int64)
    dist.all_reduce(x, op="sum")  # strings are accepted too
    assert x[0] == WS * (WS + 1) // 2
    dist.all_reduce(x, op="bxor")
    assert x[0] == (WS * (WS + 1) // 2 if WS % 2 else 0)
    with pytest.raises(ValueError, match="all_reduce: expected op to be one of ReduceOp.SUM"):
        dist.all_reduce(x, op="nand")


def test_exception_types():
    assert issubclass(dist.MismatchError, RuntimeError) and issubclass(dist.MismatchError, dist.DistError)
    assert issubclass(dist.DistTimeoutError, TimeoutError) and issubclass(dist.DistTimeoutError, dist.DistError)


def test_new_group_even_ranks():
    evens = list(range(0, WS, 2))
    g = dist.new_group(evens)
    member = RANK % 2 == 0
    x = np.array([RANK + 1.0, 10.0 * RANK], np.float64)
    if member:
        assert isinstance(g, dist.ProcessGroup)
        assert dist.get_rank(g) == RANK // 2 and dist.get_world_size(g) == len(evens)
        assert dist.get_process_group_ranks(g) == evens
        assert dist.get_global_rank(g, dist.get_rank(g)) == RANK
        assert dist.get_group_rank(g, RANK) == RANK // 2
        assert dist.all_reduce(x, group=g) is None
        y = np.full(3, RANK, np.int64)
        dist.broadcast(y, src=evens[-1], group=g)  # a global rank: group rank len(evens) - 1
        assert_equal(x, np.array([sum(r + 1.0 for r in evens), sum(10.0 * r for r in evens)]))
        assert_equal(y, np.full(3, evens[-1], np.int64))
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(g) == -1 and dist.get_world_size(g) == -1
        with pytest.warns(UserWarning, match="does not belong"):
            assert dist.all_reduce(x, group=g) is None
        with pytest.warns(UserWarning, match="does not belong"):
            assert dist.all_reduce(x, group=g, async_op=True) is None
        assert_equal(x, np.array([RANK + 1.0, 10.0 * RANK]))  # untouched
    dist.destroy_process_group(g)


def test_new_group_sorts_ranks_and_defaults_to_all():
    g = dist.new_group(list(reversed(range(WS))))
    everyone = dist.new_group()
    ranks = (dist.get_process_group_ranks(g), dist.get_rank(g), dist.get_rank(everyone), dist.get_world_size(everyone))
    assert ranks == (list(range(WS)), RANK, RANK, WS)


def test_new_group_of_the_last_rank():
    g = dist.new_group([WS - 1])
    x = np.array([RANK], np.int64)
    if RANK == WS - 1:
        dist.all_reduce(x, group=g)
        assert dist.get_world_size(g) == 1 and x[0] == RANK
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER


def test_new_group_bad_ranks():
    with pytest.raises(ValueError, match="world size"):
        dist.new_group([0, WS])
    with pytest.raises(ValueError, match="distinct"):
        dist.new_group([0, 0])
    with pytest.raises(ValueError, match="expected backend to be None or a torch backend name"):
        dist.new_group(backend="mpl")


def test_torch_backend_names_are_served_by_mpi():
    with pytest.warns(UserWarning, match="new_group: backend 'nccl' is served by MPI"):
        g = dist.new_group(backend="nccl")
    with pytest.warns(UserWarning, match="'cpu:gloo,cuda:nccl' is served by MPI"):
        h = dist.new_group(backend="cpu:gloo,cuda:nccl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = dist.new_group(backend=dist.Backend.MPI)
        m2 = dist.new_group(backend="cpu:mpi")
    for group in (g, h, m, m2):
        assert dist.get_backend(group) == "mpi"
        x = np.array([float(RANK)])
        dist.all_reduce(x, group=group)
        assert x[0] == WS * (WS - 1) / 2


def test_new_group_options_set_the_group_and_inherit_the_rest():
    world = dist.group.WORLD._comm.options()
    g = dist.new_group(pg_options=dist.Options(chunk_bytes=1000, shared_memory=False),
                       timeout=datetime.timedelta(seconds=77))
    got = g._comm.options()
    assert got == {"timeout": 77.0, "checks": world["checks"], "chunk_bytes": 1000, "shared_memory": False}
    # the settings change the path, not the result: 3000 elements in 1000-byte ring chunks
    x = np.arange(3000, dtype=np.float32) + RANK
    dist.all_reduce(x, group=g)
    assert_equal(x, WS * np.arange(3000, dtype=np.float32) + sum(range(WS)))
    inherited = dist.new_group(pg_options=dist.Options(checks=True))._comm.options()
    assert inherited["checks"] is True and inherited["chunk_bytes"] == world["chunk_bytes"]
    dist.destroy_process_group(g)


def test_options_disagreeing_across_ranks_raise_on_every_rank():
    if WS < 2:
        pytest.skip("needs two ranks")
    with pytest.raises(dist.MismatchError, match="chunk_bytes"):
        dist.new_group(pg_options=dist.Options(chunk_bytes=4096 + RANK))
    with pytest.raises(dist.MismatchError, match="shared_memory"):
        dist.new_group(pg_options=dist.Options(shared_memory=RANK == 0))


def test_bad_options_raise():
    with pytest.raises(TypeError, match="new_group: expected pg_options to be a scatterx.distributed.Options"):
        dist.new_group(pg_options={"chunk_bytes": 10})
    with pytest.raises(ValueError, match="options.chunk_bytes expected .* got 0"):
        dist.new_group(pg_options=dist.Options(chunk_bytes=0))


def test_bad_arguments_before_any_collective():
    with pytest.raises(TypeError, match="timedelta"):
        dist.new_group(timeout="soon")
    with pytest.raises(TypeError, match="group"):
        dist.all_reduce(np.zeros(1), group="world")
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="writable"):
        ro = np.zeros(3)
        ro.flags.writeable = False
        dist.all_reduce(ro)


# ---- all_reduce -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype,op", REDUCE_CASES)
def test_all_reduce(dtype, op, async_op):
    shape = (5, 3)
    x = values(RANK, shape, dtype, op)
    finish(dist.all_reduce(x, op=getattr(dist.ReduceOp, op), async_op=async_op), async_op)
    assert_equal(x, reduce_ref([values(q, shape, dtype, op) for q in range(WS)], op, dtype))


@pytest.mark.parametrize("dtype,op", [pytest.param(d, op, id=f"{np.dtype(d).name}-{op}")
                                      for d in NP_DTYPES for op in OPS if not supported(d, op)])
def test_unsupported_reduce_raises(dtype, op):
    x = values(RANK, (4,), dtype)
    with pytest.raises(TypeError):
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
    with pytest.raises(TypeError):
        dist.reduce_scatter_tensor(x[:1], np.concatenate([x[:1]] * WS), op=getattr(dist.ReduceOp, op))


@pytest.mark.parametrize("op", ["MIN", "MAX"])
def test_all_reduce_min_max_propagate_nan(op):
    x = np.array([1.0, 2.0, 3.0]) + RANK
    if RANK == WS - 1:
        x[1] = np.nan
    dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
    expected = np.array([1.0, np.nan, 3.0]) + ((WS - 1) if op == "MAX" else 0)
    np.testing.assert_array_equal(x, expected)


def test_all_reduce_avg_integers_floor():
    x = np.array([-RANK - 1, RANK, 2 * RANK + 1, -7], np.int64)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    st = np.array([[-q - 1, q, 2 * q + 1, -7] for q in range(WS)], np.int64)
    assert_equal(x, np.floor_divide(st.sum(0), WS))


def test_all_reduce_in_place_on_a_strided_view():
    base = np.zeros((4, 6), np.float32)
    base[:, 1::2] = -1.0
    view = base[::-1, ::2]  # negative and non-unit strides: written in place, zero copy
    view[...] = values(RANK, (4, 3), np.float32)
    dist.all_reduce(view)
    expected = reduce_ref([values(q, (4, 3), np.float32) for q in range(WS)], "SUM", np.float32)
    assert_equal(base[::-1, ::2], expected)
    assert (base[:, 1::2] == -1.0).all()


def test_all_reduce_0d_and_empty():
    x = np.array(RANK + 1.5)
    e = np.zeros((0, 3), np.int64)
    dist.all_reduce(x)
    dist.all_reduce(e)
    assert x.shape == () and x == sum(q + 1.5 for q in range(WS))
    assert e.shape == (0, 3)


def test_all_reduce_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError):
        dist.all_reduce(np.zeros(3, np.uint16))


def test_barrier():
    assert dist.barrier() is None
    work = dist.barrier(async_op=True)
    assert work.wait() is True


# ---- broadcast ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_broadcast_from_every_rank(dtype, async_op):
    results = []
    for src in range(WS):
        x = values(RANK, (3, 4), dtype)
        finish(dist.broadcast(x, src=src, async_op=async_op), async_op)
        results.append(x)
    for src, x in enumerate(results):
        assert_equal(x, values(src, (3, 4), dtype))


def test_broadcast_in_a_group_takes_a_global_src():
    odds = list(range(1, WS, 2)) or [0]
    g = dist.new_group(odds)
    x = np.full(3, RANK, np.int64)
    y = np.full(3, RANK, np.int64)
    if RANK in odds:
        dist.broadcast(x, src=odds[-1], group=g)  # global rank
        dist.broadcast(y, group=g, group_src=0)  # group rank
        bad = pytest.raises(ValueError, match="not part of group")
        with bad:
            dist.broadcast(np.zeros(1), src=WS, group=g)
        assert_equal(x, np.full(3, odds[-1], np.int64))
        assert_equal(y, np.full(3, odds[0], np.int64))
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER


def test_broadcast_needs_exactly_one_source():
    with pytest.raises(ValueError, match="exactly one"):
        dist.broadcast(np.zeros(1))
    with pytest.raises(ValueError, match="exactly one"):
        dist.broadcast(np.zeros(1), src=0, group_src=0)


# ---- all_gather ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_all_gather(dtype, async_op):
    outs = [np.zeros((2, 3), dtype) for _ in range(WS)]
    finish(dist.all_gather(outs, values(RANK, (2, 3), dtype), async_op=async_op), async_op)
    for q in range(WS):
        assert_equal(outs[q], values(q, (2, 3), dtype))


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("layout", ["concat", "stack"])
@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_all_gather_into_tensor(dtype, layout, async_op):
    out = np.zeros((WS * 2, 3) if layout == "concat" else (WS, 2, 3), dtype)
    finish(dist.all_gather_into_tensor(out, values(RANK, (2, 3), dtype), async_op=async_op), async_op)
    expected = np.stack([values(q, (2, 3), dtype) for q in range(WS)])
    assert_equal(out, expected.reshape(out.shape))


def test_all_gather_into_tensor_0d_and_strided():
    out = np.zeros(WS, np.int64)
    dist.all_gather_into_tensor(out, np.array(RANK * 3, np.int64))
    big = np.full((WS * 2, 4), -1.0)
    dist.all_gather_into_tensor(big[:, ::2], np.asfortranarray(values(RANK, (2, 2), np.float64)))
    assert_equal(out, np.arange(WS, dtype=np.int64) * 3)
    assert_equal(big[:, ::2], np.concatenate([values(q, (2, 2), np.float64) for q in range(WS)]))
    assert (big[:, 1::2] == -1.0).all()


# ---- reduce_scatter ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype,op", REDUCE_CASES)
def test_reduce_scatter(dtype, op, async_op):
    out = np.zeros((3, 2), dtype)
    inputs = [values(RANK, (3, 2), dtype, op, salt=7 * i) for i in range(WS)]
    finish(dist.reduce_scatter(out, inputs, op=getattr(dist.ReduceOp, op), async_op=async_op), async_op)
    assert_equal(out, reduce_ref([values(q, (3, 2), dtype, op, salt=7 * RANK) for q in range(WS)], op, dtype))


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype,op", REDUCE_CASES)
def test_reduce_scatter_tensor(dtype, op, async_op):
    n = 5  # rows per rank, odd so that the ring's chunks are uneven

    def full_input(q):
        return values(q, (WS * n, 2), dtype, op)

    out = np.zeros((n, 2), dtype)
    finish(dist.reduce_scatter_tensor(out, full_input(RANK), op=getattr(dist.ReduceOp, op), async_op=async_op),
           async_op)
    expected = reduce_ref([full_input(q)[RANK * n:(RANK + 1) * n] for q in range(WS)], op, dtype)
    assert_equal(out, expected)


def test_reduce_scatter_tensor_stacked_and_large():
    # stacked input [ws, n, ...]; large enough for several pipeline chunks of the ring
    n = 300_000
    inp = np.empty((WS, n), np.float32)
    for i in range(WS):
        inp[i] = (np.arange(n) % 97) + RANK + 100 * i
    out = np.zeros(n, np.float32)
    dist.reduce_scatter_tensor(out, inp)
    expected = sum(((np.arange(n) % 97) + q + 100 * RANK).astype(np.float32) for q in range(WS))
    assert_equal(out, expected.astype(np.float32))


def test_all_reduce_large():
    n = 1_000_003
    x = (np.arange(n) % 1000 + RANK).astype(np.float64)
    dist.all_reduce(x)
    assert_equal(x, (np.arange(n) % 1000 * WS + WS * (WS - 1) // 2).astype(np.float64))


# ---- scatterx.empty's buffers, shared between the ranks --------------------------------------------------------


@pytest.mark.parametrize("numpy_on_last_rank", [False, True], ids=["all_shareable", "last_rank_numpy"])
def test_collectives_on_shareable_buffers(numpy_on_last_rank):
    """The single copies and the all-reduce read scatterx.empty's buffers straight out of the peers' mappings;
    a rank whose buffer is numpy's own sends its pairs back to the kernel's copy and the all-reduce to the
    segment's path. The results are the same either way. Blocks of 64 KiB and more (the single-copy switch)."""
    import scatterx

    sharing = os.environ.get("SCATTERX_SHAREABLE_HOST_BYTES", "") != "0"

    def buffer(shape, dtype):
        if numpy_on_last_rank and RANK == WS - 1:
            return np.empty(shape, dtype)
        b = scatterx.empty(shape, dtype=dtype)
        assert scatterx.is_shareable(b) == sharing
        return b

    n = 100_003  # float32: 400 KB, uneven blocks
    x = buffer(n, np.float32)
    x[:] = np.arange(n) % 1000 + RANK
    dist.all_reduce(x)
    assert_equal(x, (np.arange(n) % 1000 * WS + WS * (WS - 1) // 2).astype(np.float32))

    inp = buffer(n, np.float32)
    inp[:] = np.arange(n) + 1000 * RANK
    out = buffer((WS, n), np.float32)
    dist.all_gather_into_tensor(out, inp)
    for q in range(WS):
        assert_equal(out[q], (np.arange(n) + 1000 * q).astype(np.float32))

    rows = 300  # 300 x 64 int64: 150 KiB per pair
    inp = buffer((WS * rows, 64), np.int64)
    inp[:] = np.concatenate([block(RANK, d, rows, 64, np.int64) for d in range(WS)])
    out = buffer((WS * rows, 64), np.int64)
    dist.all_to_all_single(out, inp)
    assert_equal(out, np.concatenate([block(q, RANK, rows, 64, np.int64) for q in range(WS)]))

    b = buffer(n, np.float64)
    b[:] = np.arange(n) * (1 + RANK)
    dist.broadcast(b, src=WS - 1)
    assert_equal(b, (np.arange(n) * WS).astype(np.float64))


# ---- all_to_all ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_all_to_all_lists_with_per_pair_shapes(dtype, async_op):
    inputs = [block(RANK, d, RANK + d + 1, 2, dtype) for d in range(WS)]
    outputs = [np.zeros((s + RANK + 1, 2), dtype) for s in range(WS)]
    finish(dist.all_to_all(outputs, inputs, async_op=async_op), async_op)
    for s in range(WS):
        assert_equal(outputs[s], block(s, RANK, s + RANK + 1, 2, dtype))


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_all_to_all_single_equal_splits(dtype, async_op):
    k = 2
    inp = np.concatenate([block(RANK, d, k, 3, dtype) for d in range(WS)])
    out = np.zeros_like(inp)
    finish(dist.all_to_all_single(out, inp, async_op=async_op), async_op)
    assert_equal(out, np.concatenate([block(s, RANK, k, 3, dtype) for s in range(WS)]))


SPLITS = {
    "uneven": lambda s, d: (s + 2 * d + 1) % 3,  # 0, 1 or 2 rows per pair
    "to_rank0_only": lambda s, d: 3 if d == 0 else 0,
    "all_zero": lambda s, d: 0,
    "self_only": lambda s, d: 4 if s == d else 0,
}


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("splits", list(SPLITS))
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.complex128, np.bool_], ids=lambda d: np.dtype(d).name)
def test_all_to_all_single_uneven_splits(dtype, splits, async_op):
    f = SPLITS[splits]
    send = [f(RANK, d) for d in range(WS)]
    recv = [f(s, RANK) for s in range(WS)]
    inp = np.concatenate([block(RANK, d, send[d], 3, dtype) for d in range(WS)])
    out_full = np.zeros((sum(recv), 6), dtype)
    out = out_full[:, 1::2]  # strided output, written in place
    finish(dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send, async_op=async_op),
           async_op)
    assert_equal(out, np.concatenate([block(s, RANK, recv[s], 3, dtype) for s in range(WS)]))
    assert not out_full[:, 0::2].any()


def test_all_to_all_single_1d_and_numpy_splits():
    send = np.array([(RANK + d) % 2 + 1 for d in range(WS)])
    recv = [(s + RANK) % 2 + 1 for s in range(WS)]
    inp = np.concatenate([np.full(send[d], 10 * RANK + d, np.int64) for d in range(WS)])
    out = np.zeros(sum(recv), np.int64)
    dist.all_to_all_single(out, inp, recv, send)
    assert_equal(out, np.concatenate([np.full(recv[s], 10 * s + RANK, np.int64) for s in range(WS)]))


@pytest.mark.parametrize("splits", list(SPLITS))
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_all_to_all_v(dtype, splits):
    f = SPLITS[splits]
    send = [f(RANK, d) for d in range(WS)]
    inp = np.concatenate([block(RANK, d, send[d], 2, dtype) for d in range(WS)])
    out, recv = dist.all_to_all_v(inp, send)
    assert isinstance(out, np.ndarray)
    assert recv == [f(s, RANK) for s in range(WS)]
    assert_equal(out, np.concatenate([block(s, RANK, f(s, RANK), 2, dtype) for s in range(WS)]))


def test_all_to_all_v_3d_rows():
    send = [d + 1 for d in range(WS)]
    inp = np.concatenate([np.full((d + 1, 2, 2), 100 * RANK + d, np.float64) for d in range(WS)])
    out, recv = dist.all_to_all_v(inp, send)
    assert recv == [RANK + 1] * WS
    assert out.shape == (WS * (RANK + 1), 2, 2)
    assert_equal(out, np.concatenate([np.full((RANK + 1, 2, 2), 100 * s + RANK, np.float64) for s in range(WS)]))


# ---- several async collectives in flight -----------------------------------------------------------------------


def test_async_collectives_run_in_call_order():
    a = np.full(1000, RANK + 1, np.int64)
    b = np.zeros(WS * 1000, np.int64)
    c = np.arange(10, dtype=np.float64) + RANK
    works = [dist.all_reduce(a, async_op=True),
             dist.all_gather_into_tensor(b, np.full(1000, RANK, np.int64), async_op=True),
             dist.broadcast(c, src=WS - 1, async_op=True),
             dist.all_reduce(a, op=dist.ReduceOp.MAX, async_op=True)]
    done = [w.wait() for w in reversed(works)]
    assert done == [True] * 4 and all(w.is_completed() for w in works)
    assert_equal(a, np.full(1000, WS * (WS + 1) // 2, np.int64))
    assert_equal(b, np.repeat(np.arange(WS, dtype=np.int64), 1000))
    assert_equal(c, np.arange(10, dtype=np.float64) + WS - 1)


def test_async_work_keeps_its_arrays_alive():
    works = []
    for i in range(4):
        works.append(dist.all_reduce(np.full(10_000, RANK + i, np.float64), async_op=True))  # no other reference
    for w in works:
        assert w.wait() is True
    dist.all_reduce(np.ones(10_000), async_op=True)  # dropped at once: its Work waits before letting go
    y = np.ones(2)
    dist.all_reduce(y)
    assert works[0].result()[0][0] == sum(range(WS))
    assert_equal(y, np.full(2, float(WS)))


def test_work_wait_with_a_timeout():
    if WS == 1:
        pytest.skip("needs 2 ranks: a peer that arrives late")
    x = np.ones(4)
    if RANK == 0:
        work = dist.all_reduce(x, async_op=True)
        with pytest.raises(dist.DistTimeoutError):
            work.wait(timeout=datetime.timedelta(milliseconds=50))
        early = work.is_completed()
        ok = work.wait(timeout=datetime.timedelta(seconds=60))
    else:
        time.sleep(1.0)
        early = False
        ok = dist.all_reduce(x, async_op=True).wait()
    assert not early and ok is True
    assert_equal(x, np.full(4, float(WS)))


def test_work_get_future(torch):
    x = torch.full((3,), float(RANK))
    future = dist.all_reduce(x, async_op=True).get_future()
    doubled = future.then(lambda f: f.value()[0] * 2)
    assert future.wait()[0] is x
    assert torch.equal(doubled.wait(), torch.full((3,), float(WS * (WS - 1))))


def test_work_get_future_carries_the_error(torch):
    class Failing:  # a collective that fails, as the extension's Work reports it: at wait()
        def __init__(self):
            self.waits = 0

        def is_completed(self):
            return False

        def wait(self):
            self.waits += 1
            raise dist.MismatchError("all_to_all_v: rank 1 sent 3 rows, rank 0 expected 2")

    failing = Failing()
    future = dist.Work(failing, []).get_future()
    with pytest.raises(dist.MismatchError, match="rank 1 sent 3 rows"):
        future.wait()
    assert failing.waits == 1


# ---- errors --------------------------------------------------------------------------------------------------


def test_wrong_list_length_is_a_value_error_on_every_rank():
    with pytest.raises(ValueError):
        dist.all_gather([np.zeros(2) for _ in range(WS + 1)], np.zeros(2))
    with pytest.raises(ValueError):
        dist.reduce_scatter(np.zeros(2), [np.zeros(2) for _ in range(WS + 1)])
    with pytest.raises(ValueError):
        dist.all_to_all([np.zeros(2)] * (WS + 1), [np.zeros(2)] * (WS + 1))
    with pytest.raises(ValueError):  # async: raised by the call or by wait()
        dist.all_gather([np.zeros(2) for _ in range(WS + 1)], np.zeros(2), async_op=True).wait()
    x = np.ones(2)
    dist.all_reduce(x)  # the communicator still works
    assert_equal(x, np.full(2, float(WS)))


def test_wrong_shapes_and_dtypes_locally():
    with pytest.raises(ValueError):
        dist.all_gather_into_tensor(np.zeros(WS * 2 + 1), np.zeros(2))
    with pytest.raises(ValueError):
        dist.reduce_scatter_tensor(np.zeros(2), np.zeros(WS * 2 + 1))
    with pytest.raises(TypeError):
        dist.all_gather_into_tensor(np.zeros(WS * 2, np.float32), np.zeros(2, np.float64))
    with pytest.raises(ValueError):
        dist.broadcast(np.zeros(2), group_src=WS)


def test_split_sum_mismatch_is_a_value_error_on_every_rank():
    inp = np.zeros((WS + 1, 2))
    out = np.zeros((WS, 2))
    with pytest.raises(ValueError):  # input splits add up to WS rows, input has WS + 1
        dist.all_to_all_single(out, inp, [1] * WS, [1] * WS)
    with pytest.raises(ValueError):  # split lists of the wrong length
        dist.all_to_all_single(out, out.copy(), [1] * (WS + 1), [1] * WS)
    with pytest.raises(ValueError):
        dist.all_to_all_v(inp, [1] * WS)
    if WS > 1:
        with pytest.raises(ValueError):  # equal splits need dim 0 divisible by the world size
            dist.all_to_all_single(np.zeros(WS * 2 + 1), np.zeros(WS * 2 + 1))
    x = np.ones(2)
    dist.all_reduce(x)
    assert_equal(x, np.full(2, float(WS)))


def lying_splits():
    """Consistent on each rank, but rank 0 expects one more row from the last rank than it sends."""
    send = [1] * WS
    recv = [1] * WS
    if RANK == 0:
        recv[WS - 1] += 1
    return send, recv


@pytest.mark.parametrize("async_op", ASYNC)
def test_cross_rank_split_mismatch_raises_on_every_rank(async_op):
    send, recv = lying_splits()
    inp = np.zeros((sum(send), 3))
    out = np.zeros((sum(recv), 3))
    with pytest.raises(dist.MismatchError) as info:
        work = dist.all_to_all_single(out, inp, recv, send, async_op=async_op)
        if async_op:
            work.wait()
    assert "rank" in str(info.value)
    # the communicator is still usable afterwards
    x = np.full(2, RANK, np.int64)
    dist.all_reduce(x)
    assert_equal(x, np.full(2, WS * (WS - 1) // 2, np.int64))


def test_cross_rank_dtype_and_shape_mismatch_with_checks():
    if WS == 1:
        pytest.skip("a single rank cannot disagree with itself about a dense collective")
    g = dist.new_group()
    g._comm.set_checks(True)
    assert g._comm.checks()
    caught = []
    for x in (np.zeros(4, np.float64 if RANK == 0 else np.float32), np.zeros(4 if RANK == 0 else 5)):
        try:
            dist.all_reduce(x, group=g)
        except dist.MismatchError as e:
            caught.append(str(e))
    x = np.ones(3)
    dist.all_reduce(x, group=g)
    assert len(caught) == 2, caught
    assert_equal(x, np.full(3, float(WS)))


def test_timeout_raises_and_leaves_the_world_usable():
    if WS == 1:
        pytest.skip("needs 2 ranks: a peer that never joins")
    g = dist.new_group(timeout=datetime.timedelta(seconds=1))
    assert abs(g._comm.timeout() - 1.0) < 1e-9
    raised = None
    if RANK == 0:
        start = time.monotonic()
        try:
            dist.all_reduce(np.ones(4), group=g)
        except TimeoutError as e:  # DistTimeoutError is a builtin TimeoutError
            raised = (type(e), time.monotonic() - start)
    dist.barrier()  # on the world: unaffected
    dist.destroy_process_group(g)
    if RANK == 0:
        assert raised is not None and raised[0] is dist.DistTimeoutError
        assert 0.9 <= raised[1] < 30, raised


# ---- torch ---------------------------------------------------------------------------------------------------

TORCH_DTYPES = ["float32", "bfloat16", "int64"]


def t_values(torch, q, shape, dtype, op="SUM"):
    np_dtype = np.int64 if dtype == "int64" else np.float32
    return torch.from_numpy(values(q, shape, np_dtype, op)).to(getattr(torch, dtype))


def t_reduce_ref(torch, tensors, op, dtype):
    # float dtypes reduce in float32 (exact here) and divide once, as the C++ accumulates 16-bit floats in float
    st = torch.stack([t.double() if dtype == "int64" else t.float() for t in tensors])
    if op == "SUM":
        r = st.sum(0)
    elif op == "PRODUCT":
        r = st.prod(0)
    elif op == "MIN":
        r = st.amin(0)
    elif op == "MAX":
        r = st.amax(0)
    elif dtype == "int64":
        r = torch.div(st.sum(0), len(tensors), rounding_mode="floor")
    else:
        r = st.sum(0) / len(tensors)
    return r.to(getattr(torch, dtype))


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("op", ARITHMETIC_OPS)
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_all_reduce(torch, dtype, op, async_op):
    x = t_values(torch, RANK, (4, 3), dtype, op)
    finish(dist.all_reduce(x, op=getattr(dist.ReduceOp, op), async_op=async_op), async_op)
    expected = t_reduce_ref(torch, [t_values(torch, q, (4, 3), dtype, op) for q in range(WS)], op, dtype)
    assert x.dtype == getattr(torch, dtype)
    assert torch.equal(x, expected), (x, expected)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_collectives(torch, dtype):
    td = getattr(torch, dtype)
    # broadcast from the last rank, on a transposed (non-contiguous) tensor
    b = t_values(torch, RANK, (3, 4), dtype).t()
    dist.broadcast(b, src=WS - 1)
    # all_gather (list) and all_gather_into_tensor
    gl = [torch.zeros(2, 3, dtype=td) for _ in range(WS)]
    dist.all_gather(gl, t_values(torch, RANK, (2, 3), dtype))
    gt = torch.zeros(WS * 2, 3, dtype=td)
    dist.all_gather_into_tensor(gt, t_values(torch, RANK, (2, 3), dtype))
    # reduce_scatter_tensor (sum) and reduce_scatter (max)
    rs = torch.zeros(2, 3, dtype=td)
    dist.reduce_scatter_tensor(rs, t_values(torch, RANK, (WS * 2, 3), dtype))
    rl = torch.zeros(2, 3, dtype=td)
    dist.reduce_scatter(rl, [t_values(torch, RANK + 10 * i, (2, 3), dtype) for i in range(WS)], op=dist.ReduceOp.MAX)
    # all_to_all_single with uneven splits, and all_to_all_v
    f = SPLITS["uneven"]
    send = [f(RANK, d) for d in range(WS)]
    recv = [f(s, RANK) for s in range(WS)]
    inp = torch.from_numpy(np.concatenate([block(RANK, d, send[d], 2, np.float32) % 256 for d in range(WS)])).to(td)
    out = torch.zeros(sum(recv), 2, dtype=td)
    work = dist.all_to_all_single(out, inp, recv, send, async_op=True)
    work.wait()
    v_out, v_recv = dist.all_to_all_v(inp, torch.tensor(send))

    assert torch.equal(b, t_values(torch, WS - 1, (3, 4), dtype).t())
    for q in range(WS):
        assert torch.equal(gl[q], t_values(torch, q, (2, 3), dtype))
    assert torch.equal(gt, torch.cat([t_values(torch, q, (2, 3), dtype) for q in range(WS)]))
    expected_rs = sum(t_values(torch, q, (WS * 2, 3), dtype)[2 * RANK:2 * RANK + 2].double() for q in range(WS))
    assert torch.equal(rs, expected_rs.to(td))
    expected_rl = torch.stack([t_values(torch, q + 10 * RANK, (2, 3), dtype) for q in range(WS)]).amax(0)
    assert torch.equal(rl, expected_rl)
    expected_a2a = torch.from_numpy(np.concatenate([block(s, RANK, recv[s], 2, np.float32) % 256
                                                    for s in range(WS)])).to(td)
    assert torch.equal(out, expected_a2a)
    assert isinstance(v_out, torch.Tensor) and v_out.dtype == td and v_recv == recv
    assert torch.equal(v_out, expected_a2a)


def test_torch_tensor_requiring_grad_and_views(torch):
    w = torch.full((4,), float(RANK), requires_grad=True)
    with torch.no_grad():
        dist.all_reduce(w)
    big = torch.zeros(3, 8)
    dist.all_reduce(big[:, 1::2].fill_(RANK + 1.0))
    assert torch.equal(w.detach(), torch.full((4,), float(sum(range(WS)))))
    assert torch.equal(big[:, 1::2], torch.full((3, 4), WS * (WS + 1) / 2))
    assert not big[:, 0::2].any()


def test_torch_mixed_with_numpy(torch):
    outs = [np.zeros(3, np.float32) if q % 2 == 0 else torch.zeros(3) for q in range(WS)]
    dist.all_gather(outs, torch.full((3,), float(RANK)))
    for q in range(WS):
        assert (np.asarray(outs[q]) == q).all()


# ---- mpi4py communicators as groups --------------------------------------------------------------------------


def test_mpi4py_world(MPI):
    comm = MPI.COMM_WORLD
    x = np.full(3, RANK + 1, np.int64)
    dist.all_reduce(x, group=comm)
    ranks = (dist.get_rank(comm), dist.get_world_size(comm), dist.get_process_group_ranks(comm))
    assert ranks == (RANK, WS, list(range(WS)))
    assert_equal(x, np.full(3, WS * (WS + 1) // 2, np.int64))


def test_mpi4py_split_communicator(MPI):
    # groups by parity, each ordered by descending global rank
    comm = MPI.COMM_WORLD.Split(color=RANK % 2, key=-RANK)
    members = sorted((r for r in range(WS) if r % 2 == RANK % 2), reverse=True)
    x = np.full(2, float(RANK))
    dist.all_reduce(x, group=comm)
    y = np.full(2, float(RANK))
    dist.broadcast(y, src=min(members), group=comm)  # a global rank; its group rank is len(members) - 1
    out, recv = dist.all_to_all_v(np.full(len(members), float(RANK)), [1] * len(members), group=comm)
    info = (dist.get_rank(comm), dist.get_world_size(comm), dist.get_process_group_ranks(comm))
    comm.Free()
    assert info == (members.index(RANK), len(members), members), info
    assert_equal(x, np.full(2, float(sum(members))))
    assert_equal(y, np.full(2, float(min(members))))
    assert_equal(out, np.array(members, np.float64))
    assert recv == [1] * len(members)


def test_mpi4py_group_is_cached(MPI):
    from scatterx.distributed import _groups

    comm = MPI.COMM_WORLD.Dup()
    a = _groups._foreign_group(comm)
    b = _groups._foreign_group(comm)
    x = np.ones(1)
    dist.all_reduce(x, group=comm)
    same = a is b
    dist.destroy_process_group(comm)
    comm.Free()
    assert same and x[0] == WS


def test_mpi4py_comm_null_is_not_a_member(MPI):
    comm = MPI.COMM_WORLD.Split(color=0 if RANK == 0 else MPI.UNDEFINED, key=RANK)
    x = np.ones(1)
    if RANK == 0:
        dist.all_reduce(x, group=comm)
        assert dist.get_rank(comm) == 0
        comm.Free()
    else:
        assert comm == MPI.COMM_NULL
        assert dist.get_rank(comm) == -1
        with pytest.warns(UserWarning, match="does not belong"):
            assert dist.all_reduce(x, group=comm) is None
    assert x[0] == 1.0


# ---- lifecycle (last: it re-creates the default group) -----------------------------------------------------------


def test_zz_destroy_and_reinit(monkeypatch):
    g = dist.new_group()
    dist.destroy_process_group()
    after_destroy = (dist.is_initialized(), dist.GroupMember.WORLD, dist.get_pg_count())
    with pytest.raises(ValueError, match="not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="destroyed"):
        dist.all_reduce(np.zeros(1), group=g)
    with pytest.raises(ValueError, match="world_size"):
        dist.init_process_group("mpi", world_size=WS + 1)
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="expected backend to be None or a torch backend name"):
        dist.init_process_group("glo")
    assert not dist.is_initialized()
    # TORCH_DISTRIBUTED_DEBUG=DETAIL, read when no SCATTERX_DIST_CHECKS says otherwise, turns the checks on
    monkeypatch.delenv("SCATTERX_DIST_CHECKS", raising=False)
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    level = dist.get_debug_level()
    dist.set_debug_level_from_env()
    with pytest.warns(UserWarning, match="init_process_group: backend 'gloo' is served by MPI"):
        dist.init_process_group(backend="gloo", init_method="env://", world_size=WS, rank=RANK,
                                timeout=datetime.timedelta(seconds=120))
    assert dist.group.WORLD._comm.checks()
    dist.set_debug_level(level)
    x = np.full(2, RANK, np.int64)
    dist.all_reduce(x)
    assert after_destroy == (False, None, 0)
    assert dist.is_initialized() and dist.get_rank() == RANK
    assert_equal(x, np.full(2, WS * (WS - 1) // 2, np.int64))


def test_no_warnings_from_member_calls():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist.all_reduce(np.zeros(1))


# ---- torch's small queries and switches ----------------------------------------------------------------------


def test_debug_level_detail_turns_the_cross_rank_checks_on(monkeypatch):
    world = dist.group.WORLD
    checks_before, level_before = world._comm.checks(), dist.get_debug_level()
    try:
        dist.set_debug_level(dist.DebugLevel.DETAIL)
        assert dist.get_debug_level() is dist.DebugLevel.DETAIL and world._comm.checks()
        group = dist.new_group()
        assert group._comm.checks()  # groups made later inherit it
        if WS > 1:  # ranks that disagree about the size raise instead of waiting
            with pytest.raises(dist.MismatchError):
                dist.all_reduce(np.ones(3 + (RANK == 0)), group=group)
        dist.set_debug_level(dist.DebugLevel.OFF)
        assert not world._comm.checks() and not group._comm.checks()
        monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "detail")
        dist.set_debug_level_from_env()
        assert dist.get_debug_level() is dist.DebugLevel.DETAIL and world._comm.checks()
        monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "LOUD")
        with pytest.raises(ValueError, match="TORCH_DISTRIBUTED_DEBUG: expected one of OFF, INFO, DETAIL, got 'LOUD'"):
            dist.set_debug_level_from_env()
        with pytest.raises(TypeError, match="set_debug_level: expected a DebugLevel, got str"):
            dist.set_debug_level("DETAIL")
    finally:
        dist.set_debug_level(level_before)
        world._comm.set_checks(checks_before)


def test_backend_and_launcher_queries(monkeypatch):
    assert all(dist.is_backend_available(b) for b in ("mpi", "gloo", "nccl", "ucc", "xccl", "GLOO"))
    assert not dist.is_backend_available("mpl") and not dist.is_backend_available(None)
    assert dist.get_default_backend_for_device("cpu") == dist.get_default_backend_for_device("cuda") == "mpi"
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert not dist.is_torchelastic_launched()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "abc")
    assert dist.is_torchelastic_launched()


def test_set_timeout():
    group = dist.new_group()
    dist.set_timeout(datetime.timedelta(seconds=7.5), group=group)
    assert group._comm.timeout() == 7.5
    assert dist.group.WORLD._comm.timeout() != 7.5  # only that group
    x = np.ones(2)
    dist.all_reduce(x, group=group)
    assert_equal(x, np.full(2, float(WS)))
    with pytest.raises(ValueError, match="set_timeout: expected a positive timeout"):
        dist.set_timeout(datetime.timedelta(seconds=0), group=group)
    assert not dist.is_ucc_available() and not dist.is_xccl_available()


def test_pg_count_and_the_backend_error_alias():
    before = dist.get_pg_count()
    assert before >= 1  # the default group
    dist.new_group([0])  # counted on members and non-members alike
    assert dist.get_pg_count() == before + 1
    assert issubclass(dist.MismatchError, dist.DistBackendError)
    assert issubclass(dist.DistTimeoutError, dist.DistBackendError)

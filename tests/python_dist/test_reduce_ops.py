"""torch.distributed's bitwise reductions (BAND, BOR, BXOR) on torch tensors of every integer dtype and bool,
and PREMUL_SUM with its per-rank factor (``_make_nccl_premul_sum``) through all_reduce, reduce,
reduce_scatter and reduce_scatter_tensor, on every rank of `mpirun -n N`, against torch's own operators and
exact rank formulas. (The numpy bitwise cases run with the other reductions in test_distributed.py.)"""

import functools

import numpy as np
import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

BITWISE = {"BAND": "bitwise_and", "BOR": "bitwise_or", "BXOR": "bitwise_xor"}
INTEGER_DTYPES = ["int8", "uint8", "int16", "int32", "int64", "bool"]
ASYNC = [pytest.param(False, id="sync"), pytest.param(True, id="async")]


def finish(work, async_op):
    if async_op:
        assert work.wait()
    else:
        assert work is None


def bits(torch, q, shape, dtype, salt=0):
    """Rank q's input: every bit of a byte (sign bit included), differing per rank; bool: a per-rank pattern."""
    k = torch.arange(int(np.prod(shape)), dtype=torch.int64).reshape(shape) + salt
    if dtype == "bool":
        return (k * (q + 1) + q) % 3 != 0
    return ((k * 37 + q * 101 + 3) % 256 - 128).to(getattr(torch, dtype))


def bitwise_ref(torch, tensors, op):
    return functools.reduce(getattr(torch, BITWISE[op]), tensors)


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("op", list(BITWISE))
@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_bitwise_all_reduce(torch, dtype, op, async_op):
    x = bits(torch, RANK, (7, 5), dtype)
    finish(dist.all_reduce(x, op=getattr(dist.ReduceOp, op), async_op=async_op), async_op)
    assert torch.equal(x, bitwise_ref(torch, [bits(torch, q, (7, 5), dtype) for q in range(WS)], op))


@pytest.mark.parametrize("op", list(BITWISE))
@pytest.mark.parametrize("dtype", ["uint8", "int32"])
def test_bitwise_reduce_scatter_and_reduce(torch, dtype, op):
    n = 3
    out = torch.zeros(n, 2, dtype=getattr(torch, dtype))
    dist.reduce_scatter_tensor(out, bits(torch, RANK, (WS * n, 2), dtype), op=getattr(dist.ReduceOp, op))
    blocks = [bits(torch, q, (WS * n, 2), dtype)[RANK * n:(RANK + 1) * n] for q in range(WS)]
    assert torch.equal(out, bitwise_ref(torch, blocks, op))
    x = bits(torch, RANK, (4,), dtype, salt=9)
    dist.reduce(x, dst=WS - 1, op=op.lower())  # the lower-case spelling, as torch accepts
    want = bitwise_ref(torch, [bits(torch, q, (4,), dtype, salt=9) for q in range(WS)], op)
    assert torch.equal(x, want if RANK == WS - 1 else bits(torch, RANK, (4,), dtype, salt=9))


@pytest.mark.parametrize("op", list(BITWISE))
def test_bitwise_rejects_floats(torch, op):
    x = torch.ones(3)
    with pytest.raises(TypeError, match=f"all_reduce.*{op.lower()}.*float32.*integers and bool"):
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
    assert torch.equal(x, torch.ones(3))


# ---- PREMUL_SUM ------------------------------------------------------------------------------------------


def factor_of(q):
    return 0.5 * (q + 1)  # halves: the products and their sums stay exact in every float dtype here


def small(torch, q, shape, dtype, salt=0):
    k = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape) + salt
    return ((k * 3 + q * 5) % 9 - 4).to(getattr(torch, dtype))


def premul_ref(torch, tensors):
    return sum(t.double() * factor_of(q) for q, t in enumerate(tensors))


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16", "complex64"])
def test_premul_sum_all_reduce(torch, dtype, async_op):
    x = small(torch, RANK, (6, 4), dtype)
    if dtype == "complex64":
        x = x + 1j * small(torch, RANK, (6, 4), "float32", salt=2)
    op = dist._make_nccl_premul_sum(factor_of(RANK))
    finish(dist.all_reduce(x, op=op, async_op=async_op), async_op)
    inputs = [small(torch, q, (6, 4), dtype) for q in range(WS)]
    if dtype == "complex64":
        inputs = [t + 1j * small(torch, q, (6, 4), "float32", salt=2) for q, t in enumerate(inputs)]
        assert torch.equal(x, sum(t * factor_of(q) for q, t in enumerate(inputs)))
    else:
        assert x.dtype == getattr(torch, dtype)
        assert torch.equal(x.double(), premul_ref(torch, inputs))


def test_premul_sum_reduce_scatter_reduce_and_numpy(torch):
    op = dist._make_nccl_premul_sum(torch.tensor(factor_of(RANK)))  # a one-element tensor factor, as torch's
    out = torch.zeros(2, 3, dtype=torch.float64)
    dist.reduce_scatter(out, [small(torch, RANK, (2, 3), "float64", salt=10 * i) for i in range(WS)], op=op)
    assert torch.equal(out, premul_ref(torch, [small(torch, q, (2, 3), "float64", salt=10 * RANK)
                                               for q in range(WS)]))
    full = np.arange(WS * 6, dtype=np.float32).reshape(WS * 2, 3) + RANK
    got = np.zeros((2, 3), np.float32)
    assert dist.reduce_scatter_tensor(got, full, op=op, async_op=True).wait()
    want = sum(factor_of(q) * (np.arange(WS * 6).reshape(WS * 2, 3) + q)[2 * RANK:2 * RANK + 2] for q in range(WS))
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(full, np.arange(WS * 6, dtype=np.float32).reshape(WS * 2, 3) + RANK)  # input kept
    x = small(torch, RANK, (5,), "float32")
    dist.reduce(x, dst=0, op=op)
    mine = small(torch, RANK, (5,), "float32")
    assert torch.equal(x.double(), premul_ref(torch, [small(torch, q, (5,), "float32") for q in range(WS)])
                       if RANK == 0 else mine.double())


def test_premul_sum_needs_floats_and_a_factor(torch):
    op = dist._make_nccl_premul_sum(2.0)
    assert op == dist.ReduceOp.PREMUL_SUM and "factor=2.0" in repr(op)
    x = torch.arange(4)
    with pytest.raises(TypeError, match="all_reduce: ReduceOp.PREMUL_SUM expected a floating or complex dtype, "
                                        "got torch.int64"):
        dist.all_reduce(x, op=op)
    assert torch.equal(x, torch.arange(4))
    with pytest.raises(ValueError, match="reduce_scatter_tensor: expected ReduceOp.PREMUL_SUM with its factor"):
        dist.reduce_scatter_tensor(torch.zeros(1), torch.zeros(WS), op=dist.ReduceOp.PREMUL_SUM)
    with pytest.raises(ValueError, match="all_reduce: expected ReduceOp.PREMUL_SUM with its factor"):
        dist.all_reduce(torch.zeros(1), op="premul_sum")
    with pytest.raises(TypeError, match="_make_nccl_premul_sum: expected factor to be a real number"):
        dist._make_nccl_premul_sum(1j)
    with pytest.raises(TypeError, match="_make_nccl_premul_sum"):
        dist._make_nccl_premul_sum(torch.ones(2))
    # the group is still in step: every rank raised before entering a collective
    y = torch.ones(2)
    dist.all_reduce(y, op=dist._make_nccl_premul_sum(3.0))
    assert torch.equal(y, torch.full((2,), 3.0 * WS))


def test_premul_sum_is_not_differentiable_here(torch):
    from scatterx.distributed.nn import functional as F

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="all_reduce: expected op to be a reduction without a factor"):
        F.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))

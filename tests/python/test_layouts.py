"""Memory layouts and shapes at the edges: read-only and broadcast inputs, 0-d and empty arrays,
views written in place, out= targets."""

import numpy as np
import pytest

import scatterx as sx
from sx_reference import (
    assert_same, random_values, ref_gather, ref_index_op, ref_index_select, ref_scatter, scatter_value,
)

I = np.int64

# (id, out-of-place call, reference) on (self, dim, index, src); "vector" ops take a 1-d index.
OUT_OF_PLACE = [
    ("gather", False, lambda s, d, i, x: sx.gather(s, d, i), lambda s, d, i, x: ref_gather(s, d, i)),
    ("index_select", True, lambda s, d, i, x: sx.index_select(s, d, i), lambda s, d, i, x: ref_index_select(s, d, i)),
    ("scatter-src", False, lambda s, d, i, x: sx.scatter(s, d, i, x), lambda s, d, i, x: ref_scatter(s, d, i, x)),
    ("scatter-value", False, lambda s, d, i, x: sx.scatter(s, d, i, value=2.5, reduce="add"),
     lambda s, d, i, x: ref_scatter(s, d, i, value=2.5, reduce="add")),
    ("scatter_add", False, lambda s, d, i, x: sx.scatter_add(s, d, i, x),
     lambda s, d, i, x: ref_scatter(s, d, i, x, reduce="sum")),
    ("scatter_reduce", False, lambda s, d, i, x: sx.scatter_reduce(s, d, i, x, "amax", include_self=False),
     lambda s, d, i, x: ref_scatter(s, d, i, x, reduce="amax", include_self=False)),
    ("index_add", True, lambda s, d, i, x: sx.index_add(s, d, i, x, alpha=2),
     lambda s, d, i, x: ref_index_op(s, d, i, x, "sum", alpha=2)),
    ("index_reduce", True, lambda s, d, i, x: sx.index_reduce(s, d, i, x, "mean"),
     lambda s, d, i, x: ref_index_op(s, d, i, x, "mean")),
]
OP_IDS = [o[0] for o in OUT_OF_PLACE]


def _inputs(rng, vector):
    self_ = random_values(rng, (3, 4), np.float32)
    if vector:
        return self_, 0, np.array([2, 0, 2], I), random_values(rng, (3, 4), np.float32)
    return self_, 1, np.array([[3, 0, 3, 1, 0], [2, 2, 1, 0, 3]], I), random_values(rng, (2, 5), np.float32)


@pytest.mark.parametrize("how", ["flag", "broadcast"])
@pytest.mark.parametrize("op", OUT_OF_PLACE, ids=OP_IDS)
def test_read_only_self_out_of_place(op, how, rng):
    """The out-of-place forms only read self: a read-only or broadcast (stride 0) self must work."""
    _, vector, call, ref = op
    self_, dim, index, src = _inputs(rng, vector)
    if how == "flag":
        self_.flags.writeable = False
    else:
        self_ = np.broadcast_to(self_[:1], self_.shape)
    assert_same(call(self_, dim, index, src), ref(self_, dim, index, src))


@pytest.mark.parametrize("op", OUT_OF_PLACE, ids=OP_IDS)
def test_read_only_index_and_src(op, rng):
    _, vector, call, ref = op
    self_, dim, index, src = _inputs(rng, vector)
    index.flags.writeable = False
    src.flags.writeable = False
    assert_same(call(self_, dim, index, src), ref(self_, dim, index, src))


@pytest.mark.parametrize("op", OUT_OF_PLACE, ids=OP_IDS)
def test_zero_dim_arrays(op, rng):
    """0-d arrays act as 1-d of size 1 (dim 0 or -1); results keep the 0-d shape."""
    name, vector, call, ref = op
    self_ = np.array(random_values(rng, (), np.float64))
    src = np.array(random_values(rng, (), np.float64))
    index = np.array(0, I)
    for dim in (0, -1):
        result = call(self_, dim, index, src)
        expected = ref(self_, dim, index, src)
        assert expected.shape == ()
        assert_same(result, expected, f"{name} dim={dim}")


def test_zero_dim_in_place_and_values():
    x = np.array(5.0)
    assert sx.scatter_add_(x, 0, np.array(0, I), np.array(2.0)) is x
    assert x == 7.0
    assert sx.index_add_(x, -1, np.array(0, I), np.array(1.0), alpha=3) is x
    assert x == 10.0
    assert sx.scatter_(x, 0, np.array(0, I), 1.5) is x
    assert x == 1.5
    # a 1-d index of one element selecting from a 0-d input
    assert_same(sx.index_select(np.array(4.0), 0, np.array([0], I)), np.array(4.0))
    # gather of a 1-d input with a 0-d index: torch's nonempty-dim rule, result has the index's shape
    assert_same(sx.gather(np.arange(3.0), 0, np.array(2, I)), np.array(2.0))
    assert_same(sx.index_select(np.arange(3.0), 0, np.array(2, I)), np.array([2.0]))


@pytest.mark.parametrize("op", OUT_OF_PLACE, ids=OP_IDS)
def test_empty_index_is_a_no_op(op, rng):
    name, vector, call, _ = op
    self_ = random_values(rng, (3, 4), np.float32)
    if vector:
        index = np.zeros(0, I)
        src = np.zeros((0, 4), np.float32)
    else:
        index = np.zeros((0, 4), I)
        src = np.zeros((0, 4), np.float32)
    result = call(self_, 0, index, src)
    if name == "gather":
        assert_same(result, np.zeros((0, 4), np.float32))
    elif name == "index_select":
        assert_same(result, np.zeros((0, 4), np.float32))
    else:
        assert_same(result, self_)
        assert not np.may_share_memory(result, self_)


def test_empty_index_skips_shape_checks_as_torch():
    self_ = np.ones((3, 4), np.float32)
    # rank 1 index for a rank 2 self, and a src of another rank: nothing to do
    assert_same(sx.scatter_add(self_, 0, np.zeros(0, I), np.zeros(5, np.float32)), self_)
    target = self_.copy()
    assert sx.scatter_reduce_(target, 1, np.zeros((0,), I), np.zeros(2, np.float32), "prod") is target
    assert_same(target, self_)


def test_empty_self():
    empty = np.zeros((0, 3), np.float32)
    assert_same(sx.scatter_add(empty, 1, np.zeros((0, 2), I), np.zeros((0, 2), np.float32)), empty)
    assert_same(sx.gather(empty, 0, np.zeros((0, 3), I)), empty)
    assert_same(sx.index_select(empty, 1, np.array([2, 0], I)), np.zeros((0, 2), np.float32))
    assert_same(sx.index_add(empty, 1, np.array([1], I), np.zeros((0, 1), np.float32)), empty)
    assert_same(sx.index_reduce(np.zeros((2, 0)), 0, np.array([1, 1, 0], I), np.zeros((3, 0)), "amax"),
                np.zeros((2, 0)))


def test_in_place_on_a_column_view_writes_the_base():
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    before = base.copy()
    column = base[:, 1]
    assert sx.scatter_add_(column, 0, np.array([0, 2, 2], I), np.array([10.0, 20.0, 30.0])) is column
    expected = before.copy()
    expected[:, 1] += [10, 0, 50]
    assert_same(base, expected)


def test_in_place_on_reversed_and_transposed_views():
    base = np.arange(6, dtype=np.int32)
    rev = base[::-1]  # logical [5, 4, 3, 2, 1, 0]
    assert sx.index_add_(rev, 0, np.array([0, 5], I), np.array([100, 200], np.int32)) is rev
    assert_same(base, np.array([200, 1, 2, 3, 4, 105], np.int32))
    m = np.zeros((2, 3), np.float32)
    t = m.T  # (3, 2), strides swapped
    sx.scatter_(t, 0, np.array([[2, 0]], I), np.array([[1.0, 2.0]], np.float32))
    assert_same(m, np.array([[0, 0, 1], [2, 0, 0]], np.float32))
    # every other element of a buffer, stepping backwards
    buf = np.zeros(9, np.float64)
    view = buf[7::-3]  # elements 7, 4, 1
    sx.scatter_reduce_(view, 0, np.array([1, 1, 2], I), np.array([3.0, 5.0, 7.0]), "sum")
    assert_same(buf, np.array([0, 7, 0, 0, 8, 0, 0, 0, 0], np.float64))


def test_out_argument_writes_through_a_view():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[2, 0], [1, 1]], I)
    big = np.full((5, 5), -1, np.float32)
    out = big[1:5:2, 3:0:-2]  # (2, 2), strided and reversed columns
    assert sx.gather(x, 0, idx, out=out) is out
    assert_same(np.array(out), ref_gather(x, 0, idx))
    untouched = np.ones((5, 5), bool)
    untouched[1:5:2, 3:0:-2] = False
    assert (big[untouched] == -1).all()
    out2 = np.empty((2, 3), np.float32)
    view = out2.T  # (3, 2), column-major
    assert sx.index_select(x, 1, np.array([3, 0], np.int32), out=view) is view
    assert_same(out2.T, ref_index_select(x, 1, np.array([3, 0], np.int32)))


def test_mixed_index_dtypes_and_layouts_in_one_call():
    rng = np.random.default_rng(2)
    self_ = random_values(rng, (4, 6), np.float64)
    idx = np.asfortranarray(rng.integers(0, 4, size=(5, 6)).astype(np.int32))
    src = random_values(rng, (7, 8), np.float64)[::-1, 1::1]
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "mean"), ref_scatter(self_, 0, idx, src, reduce="mean"))


def test_numpy_scalar_in_src_position_is_the_value():
    self_ = np.zeros(3, np.float32)
    out = sx.scatter(self_, 0, np.array([0, 2], I), np.float64(2.5))
    assert_same(out, np.array([2.5, 0, 2.5], np.float32))
    assert_same(sx.scatter(self_, 0, np.array([1], I), scatter_value(np.float32)),
                np.array([0, np.float32(0.1), 0], np.float32))


def test_unaligned_arrays():
    """Arrays whose data is not aligned to their element size (a byte offset into a buffer) work too."""
    buf = np.zeros(8 * 6 + 1, np.uint8)
    x = buf[1:49].view(np.float64)
    assert not x.flags.aligned
    x[:] = np.arange(6.0)
    assert_same(sx.gather(x, 0, np.array([5, 0, 5], I)), np.array([5.0, 0.0, 5.0]))
    assert sx.scatter_reduce_(x, 0, np.array([1, 1], I), np.array([10.0, 20.0]), "sum") is x
    assert_same(x, np.array([0, 31, 2, 3, 4, 5], np.float64))
    assert buf[0] == 0

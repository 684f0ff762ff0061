"""Error paths: exception type (IndexError / TypeError / ValueError) and the core's message
"<op>: <argument> <expected>, got <received>"; a failed in-place call leaves its target unchanged;
bad arguments never crash the interpreter."""

import numpy as np
import pytest

import scatterx as sx
from sx_reference import assert_same, ref_index_op, ref_scatter

I = np.int64


def expect_error(exc, call, *pieces, target=None):
    """call() raises exc whose message contains every piece; target (if given) is unchanged."""
    before = None if target is None else np.array(target, copy=True)
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    for piece in pieces:
        assert piece in message, f"{piece!r} not in the message {message!r}"
    if target is not None:
        assert_same(np.array(target), before, "a failed in-place call changed its target")
    return message


# Every op form on (self, dim, index, src); slice_wise forms take a 1-d index with src.size(dim) entries.
# Returns the array an in-place form writes, for the unchanged check.
def _op_calls():
    def out_like(shape):
        return np.zeros(shape, np.float32)

    def index_select_out(s, d, i, x):
        shape = list(s.shape)
        if -len(shape) <= d < len(shape):
            shape[d] = np.size(i)
        out = out_like(shape)
        sx.index_select(s, d, i, out=out)
        return out

    def gather_out(s, d, i, x):
        out = out_like(np.shape(i))
        sx.gather(s, d, i, out=out)
        return out

    return [
        ("scatter_", False, True, lambda s, d, i, x: sx.scatter_(s, d, i, x)),
        ("scatter_", False, True, lambda s, d, i, x: sx.scatter_(s, d, i, 1.5, reduce="add")),
        ("scatter", False, False, lambda s, d, i, x: sx.scatter(s, d, i, x, reduce="multiply")),
        ("scatter", False, False, lambda s, d, i, x: sx.scatter(s, d, i, value=2)),
        ("scatter_add_", False, True, lambda s, d, i, x: sx.scatter_add_(s, d, i, x)),
        ("scatter_add", False, False, lambda s, d, i, x: sx.scatter_add(s, d, i, x)),
        ("scatter_reduce_", False, True, lambda s, d, i, x: sx.scatter_reduce_(s, d, i, x, "mean", include_self=False)),
        ("scatter_reduce", False, False, lambda s, d, i, x: sx.scatter_reduce(s, d, i, x, "amax")),
        ("gather", False, False, lambda s, d, i, x: sx.gather(s, d, i)),
        ("gather_out", False, False, gather_out),
        ("index_add_", True, True, lambda s, d, i, x: sx.index_add_(s, d, i, x, alpha=2)),
        ("index_add", True, False, lambda s, d, i, x: sx.index_add(s, d, i, x)),
        ("index_reduce_", True, True, lambda s, d, i, x: sx.index_reduce_(s, d, i, x, "amin", include_self=False)),
        ("index_reduce", True, False, lambda s, d, i, x: sx.index_reduce(s, d, i, x, "prod")),
        ("index_select", True, False, lambda s, d, i, x: sx.index_select(s, d, i)),
        ("index_select_out", True, False, index_select_out),
    ]


OP_CALLS = _op_calls()
OP_IDS = [f"{name}-{n}" for n, (name, *_rest) in enumerate(OP_CALLS)]


@pytest.fixture
def self_and_src():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("op", OP_CALLS, ids=OP_IDS)
def test_index_out_of_bounds_names_value_and_position(op, index_dtype, self_and_src):
    name, slice_wise, _, call = op
    s, x = self_and_src
    # valid values come first, so a kernel that wrote before checking would show
    index = np.array([0, 1, 7] if slice_wise else [[0, 1], [2, 0], [1, 7]], index_dtype)
    position = "[2]" if slice_wise else "[2, 1]"
    msg = f"{name}: index 7 is out of bounds for dimension 0 with size 3 (index position {position})"
    assert expect_error(IndexError, lambda: call(s, 0, index, x), target=s) == msg


@pytest.mark.parametrize("op", OP_CALLS, ids=OP_IDS)
def test_negative_index_is_an_error(op, self_and_src):
    name, slice_wise, _, call = op
    s, x = self_and_src
    index = np.array([2, -1, 0] if slice_wise else [[0, 1], [-1, 0]], np.int32)
    position = "[1]" if slice_wise else "[1, 0]"
    expect_error(IndexError, lambda: call(s, 0, index, x),
                 f"{name}: index -1 is out of bounds for dimension 0 with size 3 (index position {position})",
                 target=s)


def test_index_error_position_follows_logical_order(self_and_src):
    s, x = self_and_src
    # logical [[0, 9], [1, 1], [-4, 0]], stored column-major
    index = np.asfortranarray(np.array([[0, 9], [1, 1], [-4, 0]], I))
    expect_error(IndexError, lambda: sx.scatter_(s, 0, index, x),
                 "scatter_: index 9 is out of bounds for dimension 0 with size 3 (index position [0, 1])", target=s)
    expect_error(IndexError, lambda: sx.gather(s, 0, index[::-1]),
                 "gather: index -4 is out of bounds for dimension 0 with size 3 (index position [0, 0])")
    expect_error(IndexError, lambda: sx.scatter_add_(s, 0, np.broadcast_to(np.array([[0], [3], [1]], np.int32), (3, 4)), x),
                 "scatter_add_: index 3 is out of bounds for dimension 0 with size 3 (index position [1, 0])", target=s)
    expect_error(IndexError, lambda: sx.scatter_reduce_(s, -1, np.array([[0, 1, 2, 3], [3, 4, 0, 1]]), x, "prod"),
                 "scatter_reduce_: index 4 is out of bounds for dimension 1 with size 4 (index position [1, 1])",
                 target=s)
    expect_error(IndexError, lambda: sx.index_select(s, 1, np.array([2**40])), "index 1099511627776", "size 4")


def test_bad_index_deep_in_a_large_index_leaves_self_untouched():
    rng = np.random.default_rng(1)
    s = rng.standard_normal((64, 300)).astype(np.float32)
    index = rng.integers(0, 64, size=(5000, 300))
    index[4321, 17] = 64
    src = rng.standard_normal((5000, 300)).astype(np.float32)
    for reduce in ("sum", "mean", "amax"):
        expect_error(IndexError, lambda: sx.scatter_reduce_(s, 0, index, src, reduce, include_self=False),
                     "scatter_reduce_: index 64 is out of bounds for dimension 0 with size 64 "
                     "(index position [4321, 17])", target=s)


@pytest.mark.parametrize("op", OP_CALLS, ids=OP_IDS)
def test_dim_out_of_range(op):
    name, slice_wise, _, call = op
    s = np.zeros((1, 1), np.float32)
    x = np.ones((1, 1), np.float32)
    index = np.array([0] if slice_wise else [[0]], I)
    for dim in (2, -3, 100):
        expect_error(ValueError, lambda: call(s, dim, index, x),
                     f"{name}: dim {dim} is out of range for a tensor of 2 dimensions (expected a value in [-2, 1])",
                     target=s)


def test_dim_of_a_zero_dim_array():
    s = np.array(1.0, np.float32)
    expect_error(ValueError, lambda: sx.scatter_(s, 1, np.array(0, I), s.copy()),
                 "scatter_: dim 1 is out of range for a tensor of 0 dimensions (expected a value in [-1, 0])", target=s)
    expect_error(ValueError, lambda: sx.gather(s, -2, np.array(0, I)), "gather: dim -2 is out of range")


@pytest.mark.parametrize("bad", [np.float32, np.float64, np.int16, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OP_CALLS, ids=OP_IDS)
def test_index_dtype_must_be_int32_or_int64(op, bad, self_and_src):
    name, slice_wise, _, call = op
    s, x = self_and_src
    index = np.zeros(3 if slice_wise else (3, 2), bad)
    expect_error(TypeError, lambda: call(s, 0, index, x),
                 f"{name}: expected index of dtype int32 or int64, got {np.dtype(bad).name}", target=s)


def test_src_dtype_must_match_self(self_and_src):
    s, _ = self_and_src
    i2 = np.array([[0, 1], [2, 0]], I)
    i1 = np.array([0, 1, 2], I)
    f64 = np.zeros((3, 4))
    i32 = np.zeros((3, 4), np.int32)
    expect_error(TypeError, lambda: sx.scatter_(s, 0, i2, f64),
                 "scatter_: expected src to have the dtype of self (float32), got float64", target=s)
    expect_error(TypeError, lambda: sx.scatter_add(s, 0, i2, i32),
                 "scatter_add: expected src to have the dtype of self (float32), got int32")
    expect_error(TypeError, lambda: sx.scatter_reduce_(s, 0, i2, f64, "sum"),
                 "scatter_reduce_: expected src to have the dtype of self (float32), got float64", target=s)
    expect_error(TypeError, lambda: sx.index_add_(s, 0, i1, i32),
                 "index_add_: expected source to have the dtype of self (float32), got int32", target=s)
    expect_error(TypeError, lambda: sx.index_reduce(s, 0, i1, f64, "mean"),
                 "index_reduce: expected source to have the dtype of self (float32), got float64")
    expect_error(TypeError, lambda: sx.gather(s, 0, i2, out=np.zeros((2, 2))),
                 "gather_out: expected out to have the dtype of input (float32), got float64")


def test_shapes(self_and_src):
    s, x = self_and_src
    expect_error(ValueError, lambda: sx.scatter_(s, 0, np.array([0, 1, 2, 0], I), x),
                 "scatter_: expected index to have as many dimensions as self (2), got 1 (index shape [4])", target=s)
    expect_error(ValueError, lambda: sx.scatter_add_(s, 0, np.array([[0, 1, 2, 0]], I), np.zeros(4, np.float32)),
                 "scatter_add_: expected src to have as many dimensions as index (2), got 1 (src shape [4])", target=s)
    expect_error(ValueError, lambda: sx.gather(s, 0, np.zeros((1, 1, 1), np.int32)),
                 "gather: expected index to have as many dimensions as input (2), got 3 (index shape [1, 1, 1])")
    wide = np.zeros((2, 5), I)
    expect_error(ValueError, lambda: sx.scatter_(s, 0, wide, np.zeros((2, 5), np.float32)),
                 "scatter_: expected index [2, 5] to be no larger than self [3, 4] outside dimension 0, "
                 "got size 5 > 4 in dimension 1", target=s)
    expect_error(ValueError, lambda: sx.gather(s, 0, wide),
                 "gather: expected index [2, 5] to be no larger than input [3, 4] outside dimension 0, "
                 "got size 5 > 4 in dimension 1")
    tall = np.zeros((5, 2), I)
    expect_error(ValueError, lambda: sx.scatter_reduce_(s, 0, tall, np.zeros((5, 1), np.float32), "sum"),
                 "scatter_reduce_: expected index [5, 2] to be no larger than src [5, 1] in every dimension, "
                 "got size 2 > 1 in dimension 1", target=s)
    # longer than self along dim is fine
    assert sx.scatter_add(s, 0, tall, np.zeros((5, 2), np.float32)).shape == (3, 4)
    i3 = np.array([0, 1, 2], I)
    expect_error(ValueError, lambda: sx.index_add_(s, 0, i3, np.zeros((2, 4), np.float32)),
                 "index_add_: expected source.size(0) to equal the number of indices (3), got 2", target=s)
    expect_error(ValueError, lambda: sx.index_reduce_(s, -2, i3, np.zeros((2, 4), np.float32), "prod"),
                 "index_reduce_: expected source.size(0) to equal the number of indices (3), got 2", target=s)
    expect_error(ValueError, lambda: sx.index_add_(s, 0, i3, np.zeros((3, 5), np.float32)),
                 "index_add_: expected source [3, 5] to match self [3, 4] outside dimension 0, got size 5 != 4 "
                 "in dimension 1", target=s)
    expect_error(ValueError, lambda: sx.index_add_(s, 0, i3, np.zeros(3, np.float32)),
                 "index_add_: expected source to have as many dimensions as self (2), got 1", target=s)
    for call, op in ((lambda: sx.index_add_(s, 0, i3.reshape(3, 1), x), "index_add_"),
                     (lambda: sx.index_reduce(s, 0, i3.reshape(3, 1), x, "amax"), "index_reduce"),
                     (lambda: sx.index_select(s, 0, i3.reshape(3, 1)), "index_select")):
        expect_error(ValueError, call, f"{op}: expected index to be a vector (1-d or 0-d), got 2 dimensions "
                                       "(shape [3, 1])", target=s)
    expect_error(ValueError, lambda: sx.index_select(np.array(1.0), 0, np.array([0, 0], I)),
                 "index_select: expected exactly one index for a 0-d input, got 2")
    expect_error(ValueError, lambda: sx.gather(s, 0, np.array([[0, 1]], I), out=np.zeros((2, 3), np.float32)),
                 "gather_out: expected out of shape [1, 2], got [2, 3]")
    expect_error(ValueError, lambda: sx.index_select(s, 0, np.array([0, 2], np.int32), out=np.zeros((2, 3), np.float32)),
                 "index_select_out: expected out of shape [2, 4], got [2, 3]")
    expect_error(ValueError, lambda: sx.gather(np.zeros((1,) * 17), 0, np.zeros((1,) * 17, I)),
                 "gather: expected input with at most 16 dimensions, got 17")


def test_reduce_names(self_and_src):
    s, x = self_and_src
    i2 = np.array([[0, 1], [2, 0]], I)
    i1 = np.array([0, 1, 2], I)
    expect_error(ValueError, lambda: sx.scatter_reduce_(s, 0, i2, x, "max"), "scatter_reduce_: ", "'max'", target=s)
    expect_error(ValueError, lambda: sx.scatter_reduce(s, 0, i2, x, "none"),
                 "scatter_reduce: expected reduce to be one of sum, prod, mean, amax, amin, got 'none'")
    expect_error(ValueError, lambda: sx.scatter_reduce(s, 0, i2, x, "SUM"), "scatter_reduce: ", "'SUM'")
    for r in ("sum", "none"):
        expect_error(ValueError, lambda: sx.index_reduce_(s, 0, i1, x, r),
                     f"index_reduce_: expected reduce to be one of prod, mean, amax, amin, got '{r}'", target=s)
    expect_error(ValueError, lambda: sx.index_reduce(s, 0, i1, x, "add"), "index_reduce: ", "got 'sum'")
    for r in ("mean", "amax", "amin"):
        tail = f"expected reduce to be none, 'add' or 'multiply', got '{r}' (scatter_reduce_ has mean, amax and amin)"
        expect_error(ValueError, lambda: sx.scatter_(s, 0, i2, x, reduce=r), "scatter_: " + tail, target=s)
        expect_error(ValueError, lambda: sx.scatter_(s, 0, i2, 1.0, reduce=r), "scatter_: " + tail, target=s)
        expect_error(ValueError, lambda: sx.scatter(s, 0, i2, x, reduce=r), "scatter: " + tail)
    expect_error(ValueError, lambda: sx.scatter(s, 0, i2, x, reduce="divide"), "scatter: ", "'divide'")
    expect_error(TypeError, lambda: sx.scatter(s, 0, i2, x, reduce=3), "scatter: expected reduce")
    expect_error(TypeError, lambda: sx.scatter_reduce(s, 0, i2, x, None), "scatter_reduce: expected reduce to be a string")
    expect_error(TypeError, lambda: sx.index_reduce_(s, 0, i1, x, None), "index_reduce_: expected reduce", target=s)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_has_no_order(dtype):
    s = np.ones((3, 4), dtype)
    x = np.ones((3, 4), dtype)
    i2 = np.array([[0, 1], [2, 0]], I)
    i1 = np.array([0, 1, 2], np.int32)
    name = np.dtype(dtype).name
    for r in ("amax", "amin"):
        what = f"reduce '{r}' is not supported for {name} tensors (complex numbers have no order; use sum, prod or mean)"
        expect_error(TypeError, lambda: sx.scatter_reduce_(s, 0, i2, x, r), "scatter_reduce_: " + what, target=s)
        expect_error(TypeError, lambda: sx.scatter_reduce(s, 0, i2, x, r, include_self=False), "scatter_reduce: " + what)
        expect_error(TypeError, lambda: sx.index_reduce_(s, 0, i1, x, r), "index_reduce_: " + what, target=s)


def test_bool_has_no_mean():
    s = np.zeros((3, 4), np.bool_)
    what = "reduce 'mean' is not supported for bool tensors (the mean of booleans is undefined)"
    expect_error(TypeError, lambda: sx.scatter_reduce_(s, 0, np.array([[0, 1]], I), s.copy(), "mean"),
                 "scatter_reduce_: " + what, target=s)
    expect_error(TypeError, lambda: sx.index_reduce(s, 0, np.array([0, 1, 2], I), s.copy(), "mean"),
                 "index_reduce: " + what)


def test_alpha_and_value_kinds(self_and_src):
    s, x = self_and_src
    i1 = np.array([0, 1, 2], I)
    i2 = np.array([[0, 1], [2, 0]], I)
    si = np.zeros((3, 4), np.int32)
    expect_error(TypeError, lambda: sx.index_add_(si, 0, i1, si.copy(), alpha=2.5),
                 "index_add_: expected an integral alpha for int32 tensors, got 2.5", target=si)
    sb = np.zeros((3, 4), np.bool_)
    expect_error(TypeError, lambda: sx.index_add(sb, 0, i1, sb, alpha=0.5),
                 "index_add: expected an integral alpha for bool tensors, got 0.5")
    expect_error(TypeError, lambda: sx.index_add(s, 0, i1, x, alpha=True),
                 "index_add: expected a non-bool alpha for float32 tensors (a bool alpha is for bool tensors), got true")
    expect_error(TypeError, lambda: sx.index_add_(s, 0, i1, x, alpha=1 + 2j),
                 "index_add_: expected a real alpha for float32 tensors, got (1+2j)", target=s)
    expect_error(TypeError, lambda: sx.index_add(s, 0, i1, x, alpha=np.ones(1)),
                 "index_add: expected alpha to be a Python number, got ndarray")
    expect_error(ValueError, lambda: sx.scatter_(s, 0, i2, 1 + 2j),
                 "scatter_: value must be real for float32 tensors, got (1+2j)", target=s)
    expect_error(ValueError, lambda: sx.scatter(s, 0, i2, value=complex(1, -2)),
                 "scatter: value must be real for float32 tensors, got (1-2j)")
    expect_error(TypeError, lambda: sx.scatter(s, 0, i2, x, value=1), "scatter: expected either src or value, got both")
    expect_error(TypeError, lambda: sx.scatter_(s, 0, i2), "scatter_: expected src (an array) or value", target=s)
    expect_error(TypeError, lambda: sx.scatter(s, 0, i2, value="1"), "scatter: expected value to be a Python number")


@pytest.mark.parametrize("value", [10**30, 2**63, -(2**64)], ids=["1e30", "2**63", "-2**64"])
def test_python_int_beyond_int64_as_value_or_alpha(value):
    """torch converts such a number to a float tensor's dtype; scatterx must do that too, or refuse it with
    its own TypeError/ValueError naming the op (never a bare RuntimeError)."""
    s = np.zeros(3)
    for name, call in (("scatter", lambda: sx.scatter(s, 0, np.array([1], I), value)),
                       ("index_add", lambda: sx.index_add(s, 0, np.array([1], I), np.ones(1), alpha=value))):
        try:
            out = call()
        except (TypeError, ValueError) as e:
            assert name in str(e), str(e)
        else:
            assert out[1] == float(value), out


def test_in_place_into_read_only_arrays(self_and_src):
    s, x = self_and_src
    ro = s.copy()
    ro.flags.writeable = False
    i2 = np.array([[0, 1], [2, 0]], I)
    i1 = np.array([0, 1, 2], I)
    for op, call in [
        ("scatter_", lambda t: sx.scatter_(t, 0, i2, x)),
        ("scatter_", lambda t: sx.scatter_(t, 0, i2, 2.0)),
        ("scatter_add_", lambda t: sx.scatter_add_(t, 0, i2, x)),
        ("scatter_reduce_", lambda t: sx.scatter_reduce_(t, 0, i2, x, "sum")),
        ("index_add_", lambda t: sx.index_add_(t, 0, i1, x)),
        ("index_reduce_", lambda t: sx.index_reduce_(t, 0, i1, x, "amax")),
        ("gather", lambda t: sx.gather(x, 0, i2[:, :2], out=t[:2, :2])),
        ("index_select", lambda t: sx.index_select(x, 0, i1, out=t)),
    ]:
        expect_error(ValueError, lambda: call(ro), f"{op}: expected ", "writable", target=ro)
        expect_error(ValueError, lambda: call(np.broadcast_to(s[:1], s.shape)), "writable")


def test_in_place_overlap(self_and_src):
    s, x = self_and_src
    i2 = np.array([[0, 1], [2, 0]], I)
    expect_error(ValueError, lambda: sx.scatter_(s, 0, i2, s),
                 "scatter_: expected self (written in place) not to overlap src in memory", "(clone one of them first)",
                 target=s)
    expect_error(ValueError, lambda: sx.scatter_add_(s, 1, i2, s[1:3].T), "scatter_add_: ", "not to overlap src", target=s)
    expect_error(ValueError, lambda: sx.scatter_reduce_(s, 0, i2, s[::-1], "amax"), "scatter_reduce_: ",
                 "not to overlap src", target=s)
    si = np.array([[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]], I)
    expect_error(ValueError, lambda: sx.scatter_(si, 0, si[:2], 5), "scatter_: ", "not to overlap index", target=si)
    expect_error(ValueError, lambda: sx.index_add_(si, 1, si[2, :3], np.zeros((3, 3), I)), "index_add_: ",
                 "not to overlap index", target=si)
    i1 = np.array([0, 2], I)
    expect_error(ValueError, lambda: sx.index_add_(s, 0, i1, s[1:3]), "index_add_: ", "not to overlap source", target=s)
    expect_error(ValueError, lambda: sx.index_reduce_(s, 0, i1, s[:2], "mean"), "not to overlap source", target=s)
    # interleaved but disjoint views are fine: even columns from odd columns
    buf = np.arange(8, dtype=np.float64).reshape(2, 4)
    sx.scatter_add_(buf[:, ::2], 1, np.array([[0, 0]], I), buf[:1, 1::2])
    assert_same(buf, np.array([[0 + 1 + 3, 1, 2, 3], [4, 5, 6, 7]], np.float64))
    # a writable array whose elements repeat (stride 0): written in place, it is refused
    rep = np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (3, 4), (0, 4), writeable=True)
    expect_error(ValueError, lambda: sx.scatter_add_(rep, 0, np.array([[0, 1, 2, 0]], I), np.ones((1, 4), np.float32)),
                 "scatter_add_: expected self to have no internal overlap", target=rep)
    # out= overlapping the input or the index
    expect_error(ValueError, lambda: sx.gather(s, 0, i2, out=s[:2, :2]), "gather_out: ", "not to overlap input")
    iv = np.array([[5, 6], [7, 8], [9, 10]], I)
    ii = np.array([[0, 1], [0, 1]], I)
    expect_error(ValueError, lambda: sx.gather(iv, 0, ii, out=ii), "gather_out: ", "not to overlap index", target=ii)
    expect_error(ValueError, lambda: sx.index_select(s, 0, np.array([0, 2], np.int32), out=s[1:3]),
                 "index_select_out: ", "not to overlap input")
    # the out-of-place forms accept aliasing
    assert_same(sx.scatter_add(s, 0, i2, s), ref_scatter(s, 0, i2, s, reduce="sum"))
    assert_same(sx.index_add(s, 0, i1, s[1:3]), ref_index_op(s, 0, i1, s[1:3], "sum"))


JUNK = [
    ("list", [0, 1]), ("tuple", (0,)), ("None", None), ("str", "abc"), ("float", 1.5), ("object", object()),
    ("str-array", np.array(["a", "b"])), ("object-array", np.zeros(2, dtype=object)),
    ("struct-array", np.zeros(2, dtype=[("a", np.int32)])), ("uint16-array", np.zeros(2, dtype=np.uint16)),
    ("longdouble-array", np.zeros(2, dtype=np.longdouble)), ("big-endian-array", np.zeros(2, dtype=">f8")),
]


# None is no src and no out=, and a float in src's place is scatter's value: not junk there
@pytest.mark.parametrize("where,junk", [
    pytest.param(where, junk, id=f"{where}-{jid}") for where in ("input", "index", "src") for jid, junk in JUNK
    if not (where == "src" and jid in ("None", "float"))
])
def test_junk_arguments_raise_type_errors(where, junk):
    """Not an array, or an array of a dtype scatterx has no kernel for: a TypeError, never a crash."""
    s = np.zeros(3)
    i = np.array([0, 1])
    x = np.ones(2)
    args = {"input": s, "index": i, "src": x}
    args[where] = junk
    calls = [
        lambda a: sx.scatter_add(a["input"], 0, a["index"], a["src"]),
        lambda a: sx.scatter_reduce_(a["input"], 0, a["index"], a["src"], "amax"),
        lambda a: sx.index_add(a["input"], 0, a["index"], a["src"], alpha=2),
        lambda a: sx.index_reduce_(a["input"], 0, a["index"], a["src"], "mean"),
        lambda a: sx.gather(a["input"], 0, a["index"]) if where != "src" else sx.gather(s, 0, i, out=junk),
        lambda a: sx.index_select(a["input"], 0, a["index"]) if where != "src" else sx.index_select(s, 0, i, out=junk),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call(args)
    assert_same(s, np.zeros(3))


def test_list_input_message():
    expect_error(TypeError, lambda: sx.gather([1.0, 2.0], 0, np.array([0])),
                 "gather: expected input to be a numpy array or a torch tensor, got list")
    expect_error(TypeError, lambda: sx.scatter_add(np.zeros(2), 0, [0], np.ones(1)),
                 "scatter_add: expected index to be a numpy array or a torch tensor, got list")
    expect_error(TypeError, lambda: sx.index_add_(np.zeros(2), 0, np.array([0]), [1.0]),
                 "index_add_: expected source to be a numpy array or a torch tensor, got list")
    expect_error(TypeError, lambda: sx.scatter(np.zeros(2), 0, np.array([0]), [1.0]),
                 "scatter: expected src to be a numpy array or a torch tensor, got list")


@pytest.mark.parametrize("dim", ["0", None, 1.0, 2**70], ids=["str", "None", "float", "huge"])
def test_dim_of_the_wrong_kind(dim):
    with pytest.raises((TypeError, ValueError)):
        sx.scatter_add(np.zeros(3), dim, np.array([0]), np.ones(1))


# ---- torch-specific errors -----------------------------------------------------------------------------


def test_torch_errors_keep_the_target(torch):
    s = torch.zeros(3, 4)
    before = s.clone()
    with pytest.raises(IndexError, match=r"scatter_add_: index 5 is out of bounds for dimension 0 with size 3"):
        sx.scatter_add_(s, 0, torch.tensor([[0, 5]]), torch.ones(1, 2))
    with pytest.raises(TypeError, match=r"expected src to have the dtype of self \(float32\), got float64"):
        sx.scatter_add_(s, 0, torch.tensor([[0, 1]]), torch.ones(1, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="not to overlap src"):
        sx.scatter_add_(s, 1, torch.tensor([[0, 1]]), s[1:])
    with pytest.raises(ValueError, match="no internal overlap"):
        sx.scatter_add_(torch.zeros(1, 4).expand(3, 4), 0, torch.tensor([[0, 1]]), torch.ones(1, 2))
    with pytest.raises(TypeError, match="got DLPack code 1 with 16 bits"):
        sx.gather(torch.zeros(3, dtype=torch.uint16), 0, torch.tensor([0]))
    assert torch.equal(s, before)


def test_torch_conjugate_and_negative_views_are_read_as_torch_reads_them(torch):
    """A conj() / neg view's memory holds the unconjugated values: reading it raw gives wrong numbers.
    scatterx must honour the bit (or refuse the tensor with a TypeError/ValueError)."""
    c = torch.tensor([1 + 2j, 3 - 1j]).conj()
    n = torch.tensor([1.0, 2.0])._neg_view()
    idx = torch.tensor([1, 0])
    for view in (c, n):
        try:
            got = sx.gather(view, 0, idx)
        except (TypeError, ValueError):
            continue
        torch.testing.assert_close(got, torch.gather(view, 0, idx), rtol=0, atol=0)


def test_torch_cuda_tensors_are_refused(torch):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if sx.cuda.is_built():
        pytest.skip("this build has the CUDA backend (tests/python/test_cuda.py runs on the GPU)")
    s = torch.zeros(3, 4, device="cuda")
    before = s.cpu()
    i = torch.tensor([[0, 1]], device="cuda")
    with pytest.raises(ValueError, match=r"scatter_add_: expected cpu tensors \(this build of scatterx has no CUDA "
                                         r"backend\), got self on cuda:0"):
        sx.scatter_add_(s, 0, i, torch.ones(1, 2, device="cuda"))
    with pytest.raises(ValueError, match="gather: expected cpu tensors"):
        sx.gather(s, 0, i)
    with pytest.raises(ValueError, match="index_select: expected cpu tensors"):
        sx.index_select(s, 0, torch.tensor([0], device="cuda"))
    with pytest.raises(ValueError, match="on self's device cpu, got cuda:0"):
        sx.scatter_add_(torch.zeros(3, 4), 0, i, torch.ones(1, 2))
    assert torch.equal(s.cpu(), before)

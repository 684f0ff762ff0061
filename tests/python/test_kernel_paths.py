"""Larger inputs shaped to reach each CPU scatter strategy (direct, grouped, shadow, sorted lines; see
ops/scatter/scatter_cpu_impl.h) and more than one thread, against a vectorized numpy reference.

The vectorized reference uses numpy's unbuffered ufunc.at, which applies the
values one by one in index order (row-major), so float sums fold in the same
order as scatterx's; it is checked against the serial reference on small
inputs first.
"""

import numpy as np
import pytest

import scatterx as sx
from sx_reference import Arith, acc_dtype, assert_same, random_values, ref_index_op, ref_scatter, scatter_case, seed_for

_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
_BOOL_UFUNC = {"sum": np.logical_or, "prod": np.logical_and, "amax": np.logical_or, "amin": np.logical_and}


def fast_scatter(self_, dim, index, src, reduce, include_self=True, alpha=None):
    """scatter_reduce (reduce 'none' = plain write) with index of self's rank, vectorized."""
    self_ = np.asarray(self_)
    d = dim % self_.ndim
    target = list(np.indices(index.shape, sparse=True))
    target[d] = np.asarray(index)
    target = tuple(np.broadcast_arrays(*target))
    values = np.asarray(src)[tuple(slice(0, s) for s in index.shape)]
    out = np.array(self_, copy=True)
    if reduce == "none":
        out[target] = values  # numpy assigns repeated positions in order: the last one stays
        return out
    ar = Arith(self_.dtype)
    acc = self_.astype(acc_dtype(self_.dtype))
    count = np.zeros(self_.shape, np.int64)
    np.add.at(count, target, 1)
    hit = count > 0
    if not include_self:
        acc[hit] = ar.identity(reduce)
    vals = values.astype(acc.dtype)
    if alpha is not None:
        vals = vals * ar.convert(alpha)
    ufunc = _BOOL_UFUNC[reduce] if acc.dtype.kind == "b" else _UFUNC[reduce]
    with np.errstate(all="ignore"):
        ufunc.at(acc, target, vals)
        if reduce == "mean":
            n = count + (1 if include_self else 0)
            if acc.dtype.kind in "iu":
                acc[hit] = np.floor_divide(acc[hit].astype(np.int64), n[hit]).astype(acc.dtype)
            else:
                acc[hit] = acc[hit] / n[hit].astype(acc.dtype)
        out[hit] = acc[hit].astype(self_.dtype)
    return out


def fast_index_op(self_, dim, index, source, reduce, include_self=True, alpha=None):
    d = dim % self_.ndim
    shape = [1] * source.ndim
    shape[d] = -1
    full = np.broadcast_to(np.asarray(index).reshape(shape), source.shape)
    return fast_scatter(self_, dim, full, source, reduce, include_self, alpha)


REAL_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64, np.bool_]
REDUCES = ["sum", "prod", "mean", "amax", "amin"]


def _values(rng, shape, dtype):
    v = random_values(rng, shape, dtype, special=False)
    if v.dtype.kind == "f":  # no zeros: ties of -0.0 and 0.0 are the one place ufunc.at may pick other bits
        v[v == 0] = 1
    return v


@pytest.mark.parametrize("dtype", REAL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_fast_reference_agrees_with_serial_reference(dtype):
    rng = np.random.default_rng(seed_for("fast", np.dtype(dtype).name))
    for n in range(8):
        case = scatter_case(rng, dtype, np.int64, "contiguous")
        for reduce in REDUCES:
            if reduce == "mean" and dtype == np.bool_:
                continue
            for inc in (True, False):
                fast = fast_scatter(case.self, case.dim, case.index, case.src, reduce, inc)
                slow = ref_scatter(case.self, case.dim, case.index, case.src, reduce=reduce, include_self=inc)
                assert_same(fast, slow, f"case {n} {reduce} include_self={inc}: {case.desc()}")


# (id, self shape, dim, index shape along dim, slice-wise index?) chosen from the strategy rules:
# slice-wise with rows >= 16 -> grouped (also rows > 256, cut in chunks); a general index whose fold
# needs an accumulator (float16, mean) -> shadow when self.size(dim) <= 8 * index.size(dim), else sorted
# lines; otherwise direct. Sizes give ~20k-60k folds so that work is split among threads (1.1M for the
# many-targets case, whose threshold is a target count).
SHAPES = [
    ("general-many-hits", (40, 64), 0, 1000, False),  # direct / shadow
    ("general-few-hits", (400, 2000), 0, 10, False),  # direct / sorted lines (400 > 8 * 10)
    ("general-dim-last", (5000, 100), 1, 5, False),  # sorted lines along strided lines
    ("slice-long-rows", (30, 300), 0, 150, True),  # grouped, rows cut in chunks of 256
    ("slice-short-rows", (50, 4, 3), 0, 2000, True),  # short rows: direct or grouped
    ("slice-many-targets", (1 << 18, 16), 0, 70000, True),  # grouped in two levels (>= 2^18 targets)
]


def _path_case(rng, dtype, shape_spec, index_dtype=np.int64):
    _, self_shape, dim, k, slice_wise = shape_spec
    self_ = _values(rng, self_shape, dtype)
    idx_shape = list(self_shape)
    idx_shape[dim] = k
    if slice_wise:  # one index value per slice: an expanded 1-d index
        line = rng.integers(0, self_shape[dim], size=k).astype(index_dtype)
        shape = [1] * len(self_shape)
        shape[dim] = k
        index = np.broadcast_to(line.reshape(shape), idx_shape)
    else:
        index = rng.integers(0, self_shape[dim], size=idx_shape).astype(index_dtype)
    src = _values(rng, idx_shape, dtype)
    return self_, dim, index, src


@pytest.mark.parametrize("dtype,reduce", [
    pytest.param(dt, r, id=f"{np.dtype(dt).name}-{r}")
    for dt in REAL_DTYPES for r in REDUCES + ["none"] if not (r == "mean" and dt == np.bool_)
])
@pytest.mark.parametrize("shape_spec", SHAPES, ids=lambda s: s[0])
def test_scatter_strategies(shape_spec, dtype, reduce):
    rng = np.random.default_rng(seed_for(shape_spec[0], np.dtype(dtype).name, reduce))
    self_, dim, index, src = _path_case(rng, dtype, shape_spec, np.int32 if reduce in ("sum", "amin") else np.int64)
    if reduce == "none":
        expected = fast_scatter(self_, dim, index, src, "none")
        assert_same(sx.scatter(self_, dim, index, src), expected)
        return
    for inc in (True, False):
        expected = fast_scatter(self_, dim, index, src, reduce, inc)
        assert_same(sx.scatter_reduce(self_, dim, index, src, reduce, include_self=inc), expected, f"include_self={inc}")
    target = self_.copy()
    sx.scatter_reduce_(target, dim, index, src, reduce, include_self=False)
    assert_same(target, fast_scatter(self_, dim, index, src, reduce, False), "in place")


@pytest.mark.parametrize("dtype", REAL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(40, 300), (300, 7), (5, 64, 9)], ids=lambda s: "x".join(map(str, s)))
def test_index_ops_strategies(shape, dtype):
    rng = np.random.default_rng(seed_for("index-ops", shape, np.dtype(dtype).name))
    dim = -1 if len(shape) == 2 and shape[1] == 7 else 0
    n = 3 * shape[dim]
    index = rng.integers(0, shape[dim], size=n)
    self_ = _values(rng, shape, dtype)
    src_shape = list(shape)
    src_shape[dim] = n
    source = _values(rng, src_shape, dtype)
    alpha = {"f": 0.75, "i": 3, "u": 3, "b": True}[np.dtype(dtype).kind]
    assert_same(sx.index_add(self_, dim, index, source), fast_index_op(self_, dim, index, source, "sum"))
    assert_same(sx.index_add(self_, dim, index, source, alpha=alpha),
                fast_index_op(self_, dim, index, source, "sum", alpha=alpha), f"alpha={alpha}")
    for reduce in ("prod", "mean", "amax", "amin"):
        if reduce == "mean" and dtype == np.bool_:
            continue
        for inc in (True, False):
            assert_same(sx.index_reduce(self_, dim, index, source, reduce, include_self=inc),
                        fast_index_op(self_, dim, index, source, reduce, inc), f"{reduce} include_self={inc}")
    selected = sx.index_select(self_, dim, index)
    assert_same(selected, np.take(self_, index, axis=dim))


def test_gather_large_strided():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((300, 200))[::-1, ::2]
    idx = rng.integers(0, 300, size=(500, 100)).astype(np.int32).T.copy().T
    assert_same(sx.gather(x, 0, idx), np.take_along_axis(x, idx.astype(np.int64), axis=0))
    idx1 = rng.integers(0, 100, size=(300, 400))
    assert_same(sx.gather(x, 1, idx1), np.take_along_axis(x, idx1, axis=1))


def test_complex_index_add_large_matches_serial_reference():
    rng = np.random.default_rng(12)
    self_ = random_values(rng, (20, 40), np.complex64)
    source = random_values(rng, (60, 40), np.complex64)
    index = rng.integers(0, 20, size=60)
    for alpha in (1, 2 - 1j):
        assert_same(sx.index_add(self_, 0, index, source, alpha=alpha),
                    ref_index_op(self_, 0, index, source, "sum", alpha=alpha))
    assert_same(sx.index_reduce(self_, 0, index, source, "prod"), ref_index_op(self_, 0, index, source, "prod"))

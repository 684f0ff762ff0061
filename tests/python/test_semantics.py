"""Hand-computed examples of the semantics the headers define (independent of sx_reference)."""

import numpy as np
import pytest

import scatterx as sx
from sx_reference import assert_same


def a(values, dtype):
    return np.array(values, dtype=dtype)


I = np.int64


def test_gather_and_index_select_pick_values():
    x = a([[1, 2, 3], [4, 5, 6]], np.float32)
    assert_same(sx.gather(x, 1, a([[2, 0, 2, 2], [1, 1, 0, 0]], I)), a([[3, 1, 3, 3], [5, 5, 4, 4]], np.float32))
    assert_same(sx.gather(x, -2, a([[1, 0, 1]], I)), a([[4, 2, 6]], np.float32))
    assert_same(sx.index_select(x, 1, a([2, 2, 0], np.int32)), a([[3, 3, 1], [6, 6, 4]], np.float32))
    assert_same(sx.index_select(x, 0, a([1], I)), a([[4, 5, 6]], np.float32))


def test_scatter_none_last_in_index_order_wins():
    out = sx.scatter(a([0, 0, 0, 9], np.float64), 0, a([1, 1, 0, 1, 0], I), a([1, 2, 3, 4, 5], np.float64))
    assert_same(out, a([5, 4, 0, 9], np.float64))  # position 3 is not hit and keeps 9
    # 2-d, dim 0: index positions are walked row-major, so row 2 is the last writer of column 0
    out = sx.scatter(np.zeros((2, 2), np.int32), 0, a([[0, 1], [0, 1], [0, 0]], I), a([[1, 2], [3, 4], [5, 6]], np.int32))
    assert_same(out, a([[5, 6], [0, 4]], np.int32))


def test_scatter_add_and_multiply():
    self_ = a([1, 2, 3], np.int32)
    idx = a([0, 0, 2], I)
    src = a([10, 20, 30], np.int32)
    assert_same(sx.scatter(self_, 0, idx, src, reduce="add"), a([31, 2, 33], np.int32))
    assert_same(sx.scatter(self_, 0, idx, src, reduce="multiply"), a([200, 2, 90], np.int32))
    assert_same(sx.scatter(self_, 0, idx, 5, reduce="add"), a([11, 2, 8], np.int32))
    assert_same(sx.scatter(self_, 0, idx, value=5, reduce="multiply"), a([25, 2, 15], np.int32))
    assert_same(sx.scatter_add(self_, 0, idx, src), a([31, 2, 33], np.int32))


@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
def test_scatter_reduce_each_mode(include_self):
    self_ = a([5, -1, 7, 100], np.float64)
    idx = a([0, 1, 0, 1, 2], I)
    src = a([1, 2, 3, 4, 6], np.float64)
    s = include_self
    expected = {
        "sum": [5 * s + 4, -1 * s + 6, 7 * s + 6, 100],
        "prod": [(5 if s else 1) * 3, (-1 if s else 1) * 8, (7 if s else 1) * 6, 100],
        "mean": [(5 * s + 4) / (2 + s), (-1 * s + 6) / (2 + s), (7 * s + 6) / (1 + s), 100],
        "amax": [5 if s else 3, 4, 7 if s else 6, 100],
        "amin": [1, -1 if s else 2, 6, 100],
    }
    for reduce, values in expected.items():
        out = sx.scatter_reduce(self_, 0, idx, src, reduce, include_self=include_self)
        assert_same(out, a(values, np.float64), reduce)


def test_float16_accumulates_in_float32_and_rounds_once():
    # 2048 + 1 + 1: stepwise in half, 2049 rounds (to even) back to 2048 twice; in float32 it is 2050.
    h = np.float16
    out = sx.scatter_add(a([2048], h), 0, a([0, 0], I), a([1, 1], h))
    assert_same(out, a([2050], h))
    out = sx.scatter_reduce(a([2048], h), 0, a([0, 0], I), a([1, 1], h), "sum")
    assert_same(out, a([2050], h))
    out = sx.index_add(a([2048], h), 0, a([0, 0], I), a([1, 1], h))
    assert_same(out, a([2050], h))
    # mean of 2048, 1, 2 in float32 is 683.666..., rounded once to half: 683.5
    out = sx.scatter_reduce(a([2048], h), 0, a([0, 0], I), a([1, 2], h), "mean")
    assert_same(out, a([683.5], h))
    assert_same(out, a([np.float16(np.float32(2051) / np.float32(3))], h))
    # alpha is applied in float32: 0.1 * 3 (in float) then one rounding
    out = sx.index_add(a([0], h), 0, a([0], I), a([3], h), alpha=0.1)
    assert_same(out, a([np.float16(np.float32(3) * np.float32(0.1))], h))


def test_integer_sums_and_products_wrap():
    assert_same(sx.scatter_add(a([127], np.int8), 0, a([0], I), a([1], np.int8)), a([-128], np.int8))
    assert_same(sx.scatter_add(a([250], np.uint8), 0, a([0, 0], I), a([3, 4], np.uint8)), a([1], np.uint8))
    assert_same(sx.scatter_reduce(a([16], np.int8), 0, a([0], I), a([16], np.int8), "prod"), a([0], np.int8))
    big = np.iinfo(np.int64).max
    assert_same(sx.scatter_add(a([big], np.int64), 0, a([0], I), a([1], np.int64)), a([np.iinfo(np.int64).min], np.int64))
    assert_same(sx.index_add(a([100], np.int8), 0, a([0], I), a([50], np.int8), alpha=2), a([-56], np.int8))


def test_integer_mean_floors_toward_minus_infinity():
    out = sx.scatter_reduce(a([0, 0], np.int32), 0, a([0, 0, 1, 1], I), a([-3, -4, 3, 4], np.int32), "mean",
                            include_self=False)
    assert_same(out, a([-4, 3], np.int32))  # -3.5 floors to -4, 3.5 to 3
    # with include_self the count includes self: (1 + 2 + 2) / 3 = 1.67 -> 1 ; (-1 - 2 - 2) / 3 -> -2
    out = sx.scatter_reduce(a([1, -1], np.int64), 0, a([0, 0, 1, 1], I), a([2, 2, -2, -2], np.int64), "mean")
    assert_same(out, a([1, -2], np.int64))
    out = sx.index_reduce(a([7], np.uint8), 0, a([0, 0], I), a([1, 2], np.uint8), "mean")
    assert_same(out, a([3], np.uint8))  # 10 / 3


def test_mean_counts_self_only_when_included():
    self_ = a([10.0, 10.0], np.float32)
    out = sx.scatter_reduce(self_, 0, a([0, 0], I), a([1.0, 4.0], np.float32), "mean", include_self=True)
    assert_same(out, a([5.0, 10.0], np.float32))
    out = sx.scatter_reduce(self_, 0, a([0, 0], I), a([1.0, 4.0], np.float32), "mean", include_self=False)
    assert_same(out, a([2.5, 10.0], np.float32))


def test_bool_reductions_are_logical():
    t, f = True, False
    self_ = a([f, t, f, t], np.bool_)
    idx = a([0, 0, 1, 2, 3], I)
    src = a([t, f, f, f, f], np.bool_)
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "sum"), a([t, t, f, t], np.bool_))  # or
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "prod"), a([f, f, f, f], np.bool_))  # and
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "amax"), a([t, t, f, t], np.bool_))
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "amin", include_self=False), a([f, f, f, f], np.bool_))
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "prod", include_self=False), a([f, f, f, f], np.bool_))
    assert_same(sx.scatter_reduce(a([f], np.bool_), 0, a([0, 0], I), a([t, t], np.bool_), "amin", include_self=False),
                a([t], np.bool_))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_amax_amin_propagate_nan(dtype):
    nan = np.nan
    self_ = a([1, nan, 1, 1], dtype)
    idx = a([0, 0, 1, 2, 3, 3], I)
    src = a([nan, 5, 2, 3, 0, nan], dtype)
    for reduce in ("amax", "amin"):
        out = sx.scatter_reduce(self_, 0, idx, src, reduce)
        np.testing.assert_array_equal(np.isnan(out), [True, True, False, True], err_msg=reduce)
        assert out[2] == (3 if reduce == "amax" else 1)
        out = sx.index_reduce(self_, 0, idx, src, reduce, include_self=False)
        np.testing.assert_array_equal(np.isnan(out), [True, False, False, True], err_msg=reduce)


def test_complex_sum_prod_mean():
    c = np.complex128
    self_ = a([1 + 1j, 2], c)
    idx = a([0, 0], I)
    src = a([2j, 1 - 1j], c)
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "sum"), a([2 + 2j, 2], c))
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "prod"), a([(1 + 1j) * 2j * (1 - 1j), 2], c))
    assert_same(sx.scatter_reduce(self_, 0, idx, src, "mean"), a([(2 + 2j) / 3, 2], c))
    assert_same(sx.index_add(self_, 0, idx, src, alpha=1j), a([1 + 1j + 2j * 1j + (1 - 1j) * 1j, 2], c))


def test_index_add_alpha_and_index_reduce():
    self_ = a([[1, 2], [3, 4], [5, 6]], np.float64)
    src = a([[1, 1], [2, 2], [4, 4]], np.float64)
    idx = a([2, 0, 2], I)
    assert_same(sx.index_add(self_, 0, idx, src), a([[3, 4], [3, 4], [10, 11]], np.float64))
    assert_same(sx.index_add(self_, 0, idx, src, alpha=2.5), a([[6, 7], [3, 4], [17.5, 18.5]], np.float64))
    assert_same(sx.index_reduce(self_, 0, idx, src, "prod"), a([[2, 4], [3, 4], [20, 24]], np.float64))
    assert_same(sx.index_reduce(self_, 0, idx, src, "amax", include_self=False), a([[2, 2], [3, 4], [4, 4]], np.float64))
    assert_same(sx.index_reduce(self_, 0, idx, src, "mean"), a([[1.5, 2], [3, 4], [10 / 3, 11 / 3]], np.float64))
    # dim 1: the index selects columns
    assert_same(sx.index_add(self_, 1, a([1], I), a([[1], [1], [1]], np.float64)), a([[1, 3], [3, 5], [5, 7]], np.float64))


@pytest.mark.parametrize("value,dtype,expected", [
    (2.7, np.int32, 2), (-2.7, np.int32, -2), (-3, np.uint8, 253), (True, np.float32, 1.0),
    (2, np.bool_, True), (0.0, np.bool_, False), (0.1, np.float16, np.float16(np.float32(0.1))),
    (np.float32(1.5), np.float64, 1.5), (np.int8(-1), np.int16, -1), (1 + 2j, np.complex64, 1 + 2j),
], ids=["float-to-int-trunc", "neg-float-to-int-trunc", "neg-int-wraps-uint8", "bool-to-float",
        "int-to-bool", "zero-to-bool", "float-to-half", "numpy-float32-scalar", "numpy-int8-scalar", "complex"])
def test_scatter_value_conversion(value, dtype, expected):
    out = sx.scatter(np.zeros(3, dtype), 0, a([1], I), value)
    assert_same(out, a([0, expected, 0], dtype))
    target = np.zeros(3, dtype)
    assert sx.scatter_(target, 0, a([2], I), value=value) is target
    assert_same(target, a([0, 0, expected], dtype))


@pytest.mark.parametrize("value,dtype", [
    (300, np.uint8), (-256, np.uint8), (200, np.int8), (1e6, np.float16), (1e300, np.float32), (1e30, np.int32),
    (2**70, np.int64), (float("nan"), np.int32),
], ids=["uint8-300", "uint8-minus-256", "int8-200", "half-1e6", "float-1e300", "int32-1e30", "int64-2pow70", "nan-int"])
def test_scatter_value_out_of_range_is_refused_as_torch_does(value, dtype):
    target = np.zeros(3, dtype)
    with pytest.raises(ValueError, match="cannot be converted to .* without overflow"):
        sx.scatter_(target, 0, a([1], I), value)
    assert_same(target, np.zeros(3, dtype))
    # a float alpha for an integer tensor is refused first by torch's type rule (TypeError)
    with pytest.raises(ValueError if np.issubdtype(dtype, np.floating) else (ValueError, TypeError)):
        sx.index_add(np.zeros(3, dtype), 0, a([1], I), np.ones(1, dtype), alpha=value)


def test_unhit_positions_keep_their_value_for_every_reduce():
    self_ = a([[np.nan, -0.0, 3.5], [1, 2, 3]], np.float32)
    idx = a([[1, 1, 1]], I)
    src = a([[7, 8, 9]], np.float32)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            out = sx.scatter_reduce(self_, 0, idx, src, reduce, include_self=inc)
            assert_same(out[0], self_[0], f"{reduce} include_self={inc}")
    out = sx.index_reduce(self_, 1, a([0], I), a([[5], [6]], np.float32), "amin", include_self=False)
    assert_same(out[:, 1:], self_[:, 1:])
    assert_same(out[:, 0], a([5, 6], np.float32))


def test_index_smaller_than_src_uses_the_leading_corner():
    src = np.arange(12, dtype=np.float64).reshape(3, 4)
    out = sx.scatter_add(np.zeros((2, 3)), 0, a([[1, 0], [1, 1]], I), src)
    assert_same(out, a([[0, 1, 0], [0 + 4, 5, 0]], np.float64))


def test_results_are_deterministic():
    rng = np.random.default_rng(5)
    self_ = rng.standard_normal((64, 50)).astype(np.float32)
    idx = rng.integers(0, 64, size=(4000, 50))
    src = rng.standard_normal((4000, 50)).astype(np.float32)
    for reduce in ("sum", "mean"):
        first = sx.scatter_reduce(self_, 0, idx, src, reduce)
        for _ in range(3):
            assert_same(sx.scatter_reduce(self_, 0, idx, src, reduce), first, reduce)

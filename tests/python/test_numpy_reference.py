"""Every op x dtype x reduce on numpy inputs against the serial numpy reference (bit for bit).

Each test runs one random case per memory layout (contiguous, transposed,
strided, reversed, broadcast i.e. stride 0, read-only) with random rank 1-3,
negative dims and duplicate indices; checks the result type, dtype, shape
and bits, that the inputs are unchanged, and the in-place (or out=) form on
a strided / transposed / reversed view of a larger buffer: it returns the
very object, writes the caller's memory, and touches nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pytest

import scatterx as sx
from sx_reference import (
    DTYPES, INDEX_DTYPES, LAYOUTS, Case, alpha_value, assert_same, dtype_id, ref_gather, ref_index_op,
    random_values, ref_index_select, ref_scatter, reduce_supported, scatter_case, scatter_value, seed_for, vector_case,
    writable_target,
)


@dataclass
class Spec:
    id: str
    family: str  # "scatter" (index has self's rank) or "vector" (1-d index)
    out_of_place: Callable[[Case], np.ndarray]
    in_place: Optional[Callable[[np.ndarray, Case], object]]  # (target, case) -> returned object
    reference: Callable[[Case], np.ndarray]
    reduce: Optional[str] = None
    out_form: bool = False  # in_place writes `target` as out=, not as self
    unique: bool = False

    def supported(self, dtype) -> bool:
        return self.reduce is None or reduce_supported(self.reduce, dtype)


def _specs():
    specs = [
        Spec("gather", "scatter", lambda c: sx.gather(c.self, c.dim, c.index), None,
             lambda c: ref_gather(c.self, c.dim, c.index)),
        Spec("gather-out", "scatter", None, lambda t, c: sx.gather(c.self, c.dim, c.index, out=t),
             lambda c: ref_gather(c.self, c.dim, c.index), out_form=True),
        Spec("index_select", "vector", lambda c: sx.index_select(c.self, c.dim, c.index), None,
             lambda c: ref_index_select(c.self, c.dim, c.index)),
        Spec("index_select-out", "vector", None, lambda t, c: sx.index_select(c.self, c.dim, c.index, out=t),
             lambda c: ref_index_select(c.self, c.dim, c.index), out_form=True),
        Spec("scatter_add", "scatter", lambda c: sx.scatter_add(c.self, c.dim, c.index, c.src),
             lambda t, c: sx.scatter_add_(t, c.dim, c.index, c.src),
             lambda c: ref_scatter(c.self, c.dim, c.index, c.src, reduce="sum"), reduce="sum"),
    ]
    for r in (None, "add", "multiply"):
        rid = r or "none"
        specs.append(Spec(
            f"scatter-src-{rid}", "scatter",
            lambda c, r=r: sx.scatter(c.self, c.dim, c.index, c.src, reduce=r),
            lambda t, c, r=r: sx.scatter_(t, c.dim, c.index, c.src, reduce=r),
            lambda c, r=r: ref_scatter(c.self, c.dim, c.index, c.src, reduce=r), reduce=r))
        # a Python number in src's place is the value, as in torch
        specs.append(Spec(
            f"scatter-scalar_src-{rid}", "scatter",
            lambda c, r=r: sx.scatter(c.self, c.dim, c.index, scatter_value(c.self.dtype), reduce=r),
            lambda t, c, r=r: sx.scatter_(t, c.dim, c.index, scatter_value(c.self.dtype), reduce=r),
            lambda c, r=r: ref_scatter(c.self, c.dim, c.index, value=scatter_value(c.self.dtype), reduce=r),
            reduce=r))
        specs.append(Spec(
            f"scatter-value_kw-{rid}", "scatter",
            lambda c, r=r: sx.scatter(c.self, c.dim, c.index, value=scatter_value(c.self.dtype), reduce=r),
            lambda t, c, r=r: sx.scatter_(t, c.dim, c.index, value=scatter_value(c.self.dtype), reduce=r),
            lambda c, r=r: ref_scatter(c.self, c.dim, c.index, value=scatter_value(c.self.dtype), reduce=r),
            reduce=r))
    for r in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            specs.append(Spec(
                f"scatter_reduce-{r}-{'self' if inc else 'noself'}", "scatter",
                lambda c, r=r, inc=inc: sx.scatter_reduce(c.self, c.dim, c.index, c.src, r, include_self=inc),
                lambda t, c, r=r, inc=inc: sx.scatter_reduce_(t, c.dim, c.index, c.src, r, include_self=inc),
                lambda c, r=r, inc=inc: ref_scatter(c.self, c.dim, c.index, c.src, reduce=r, include_self=inc),
                reduce=r))
    for which in ("1", "x"):
        def alpha(dtype, which=which):
            return 1 if which == "1" else alpha_value(dtype)
        specs.append(Spec(
            f"index_add-alpha_{which}", "vector",
            lambda c, alpha=alpha: sx.index_add(c.self, c.dim, c.index, c.src, alpha=alpha(c.self.dtype)),
            lambda t, c, alpha=alpha: sx.index_add_(t, c.dim, c.index, c.src, alpha=alpha(c.self.dtype)),
            lambda c, alpha=alpha: ref_index_op(c.self, c.dim, c.index, c.src, "sum", alpha=alpha(c.self.dtype)),
            reduce="sum"))
    for r in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            specs.append(Spec(
                f"index_reduce-{r}-{'self' if inc else 'noself'}", "vector",
                lambda c, r=r, inc=inc: sx.index_reduce(c.self, c.dim, c.index, c.src, r, include_self=inc),
                lambda t, c, r=r, inc=inc: sx.index_reduce_(t, c.dim, c.index, c.src, r, include_self=inc),
                lambda c, r=r, inc=inc: ref_index_op(c.self, c.dim, c.index, c.src, r, include_self=inc),
                reduce=r))
    return specs


SPECS = _specs()


def _make_case(spec: Spec, rng, dtype, index_dtype, layout) -> Case:
    writable_self = False
    if spec.family == "vector":
        return vector_case(rng, dtype, index_dtype, layout, writable_self=writable_self)
    return scatter_case(rng, dtype, index_dtype, layout, writable_self=writable_self)


def _snapshot(case: Case):
    return [np.array(a, copy=True) for a in (case.self, case.index, case.src) if a is not None]


def _check_unchanged(case: Case, before, context):
    for a, b in zip([a for a in (case.self, case.index, case.src) if a is not None], before):
        assert_same(np.array(a), b, f"{context}: an input was modified")


def check_spec_case(spec: Spec, case: Case, rng, context: str) -> None:
    expected = spec.reference(case)
    before = _snapshot(case)
    if spec.out_of_place is not None:
        result = spec.out_of_place(case)
        assert_same(result, expected, context)
        assert not np.may_share_memory(result, case.self), f"{context}: the result aliases the input"
        _check_unchanged(case, before, context)
    if spec.in_place is not None:
        if spec.out_form:
            target = writable_target(rng, np.zeros(expected.shape, expected.dtype), case.layout)
        else:
            target = writable_target(rng, case.self, case.layout)
        base_before = target.base.copy()
        returned = spec.in_place(target.view, case)
        assert returned is target.view, f"{context}: the in-place form returned {type(returned).__name__}, not self"
        assert_same(np.array(target.view), expected, f"{context} (in place, target {target.view.strides})")
        outside = target.outside_mask()
        assert_same(target.base[outside], base_before[outside], f"{context}: memory outside the target changed")
        _check_unchanged(case, before, f"{context} (in place)")


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_op_matches_reference(spec, dtype, index_dtype):
    rng = np.random.default_rng(seed_for(spec.id, dtype_id(dtype), dtype_id(index_dtype)))
    if not spec.supported(dtype):
        case = _make_case(spec, rng, dtype, index_dtype, "contiguous")
        kind = "complex numbers have no order" if np.dtype(dtype).kind == "c" else "mean of booleans"
        with pytest.raises(TypeError, match=f"reduce '{spec.reduce}' is not supported for {dtype_id(dtype)} tensors"):
            spec.out_of_place(case)
        target = case.self.copy()
        with pytest.raises(TypeError, match=kind):
            spec.in_place(target, case)
        assert_same(target, case.self, "a failed in-place call changed self")
        return
    for n, layout in enumerate(LAYOUTS * 2):
        case = _make_case(spec, rng, dtype, index_dtype, layout)
        check_spec_case(spec, case, rng, f"{spec.id} {dtype_id(dtype)} case {n}: {case.desc()}")
    for n, case in enumerate(_edge_cases(spec, rng, dtype, index_dtype)):
        check_spec_case(spec, case, rng, f"{spec.id} {dtype_id(dtype)} edge case {n}: {case.desc()}")


def _edge_cases(spec, rng, dtype, index_dtype):
    """0-d arrays (dims 0 and -1), an empty index, and an empty self."""
    def values(shape):
        return random_values(rng, shape, dtype)

    zero = np.array(0, index_dtype)
    for dim in (0, -1):
        yield Case(np.asarray(values(())), dim, zero, np.asarray(values(())), "zero-dim")
    if spec.family == "vector":
        yield Case(values((3, 2)), 1, np.zeros(0, index_dtype), values((3, 0)), "empty-index")
        yield Case(values((0, 2)), -1, np.array([1, 1, 0], index_dtype), values((0, 3)), "empty-self")
    else:
        yield Case(values((3, 2)), 1, np.zeros((2, 0), index_dtype), values((2, 1)), "empty-index")
        yield Case(values((0, 2)), 1, np.zeros((0, 2), index_dtype), values((0, 3)), "empty-self")

"""A serial numpy reference of scatterx's ops, and helpers the tests share.

The reference walks index positions one by one in row-major order with
plain Python loops, so it is slow and only meant for small arrays. It
implements the contract of ops/reduce_ops.h literally: a destination hit by
values v1..vn becomes finalize(combine(...combine(start, v1)..., vn),
n + include_self) with start = self if include_self else identity, folded in
float32 for float16 and rounded once; integer sums and products wrap; bool
sum/amax are "or", prod/amin are "and"; amax/amin propagate NaN; integer
means floor; reduce "none" writes, the last value in index order winning.
Complex products use the textbook formula, as the library does.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

DTYPES = (
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
    np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_,
)
INDEX_DTYPES = (np.int32, np.int64)

# scatter_'s spellings map onto scatter_reduce's.
_REDUCE_NAMES = {
    None: "none", "none": "none", "add": "sum", "sum": "sum", "multiply": "prod", "prod": "prod",
    "mean": "mean", "amax": "amax", "amin": "amin",
}


def dtype_id(dt) -> str:
    return np.dtype(dt).name


def seed_for(*parts) -> int:
    """A fixed seed per test case, stable across runs and test orderings."""
    return zlib.crc32("/".join(str(p) for p in parts).encode())


def reduce_supported(reduce: Optional[str], dtype) -> bool:
    """Complex has no amax/amin, bool has no mean."""
    r = _REDUCE_NAMES[reduce]
    kind = np.dtype(dtype).kind
    if kind == "c":
        return r not in ("amax", "amin")
    if kind == "b":
        return r != "mean"
    return True


def acc_dtype(dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


def wrap_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    assert -n <= dim < n, f"reference: dim {dim} out of range for {ndim} dims"
    return dim + n if dim < 0 else dim


def _at_least_1d(a: np.ndarray) -> np.ndarray:
    return a.reshape(1) if a.ndim == 0 else a


# ---- scalar arithmetic in the accumulation type ------------------------------------------------------


class Arith:
    """Arithmetic of one dtype's accumulator, element by element."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.acc = acc_dtype(dtype)
        self.kind = self.dtype.kind
        if self.kind in "iu":
            info = np.iinfo(self.dtype)
            self.lo, self.hi, self.bits = int(info.min), int(info.max), info.bits

    # element (numpy scalar of dtype) -> accumulator value
    def load(self, x):
        if self.kind == "b":
            return bool(x)
        if self.kind in "iu":
            return int(x)
        return self.acc.type(x)

    def wrap(self, v: int) -> int:
        v &= (1 << self.bits) - 1
        if self.kind == "i" and v >= 1 << (self.bits - 1):
            v -= 1 << self.bits
        return v

    def convert(self, value, target: Optional[np.dtype] = None):
        """A Python number converted as scatterx's Scalar::to converts it (to the accumulator type by default)."""
        t = np.dtype(target) if target is not None else self.acc
        if t.kind == "c":
            c = complex(value)
            return t.type(complex(float(t.type(c).real), float(t.type(c).imag)))
        assert complex(value).imag == 0, "reference: complex value for a real dtype"
        if t.kind == "b":
            return bool(value != 0)
        if t.kind in "iu":
            return self.wrap(int(value))  # floats truncate toward zero, integers wrap
        if t == np.float16:
            return np.float16(np.float32(value))  # Half(float(value)), as the library converts
        return t.type(value)

    def identity(self, reduce: str):
        if reduce in ("none", "sum", "mean"):
            return False if self.kind == "b" else (0 if self.kind in "iu" else self.acc.type(0))
        if reduce == "prod":
            return True if self.kind == "b" else (1 if self.kind in "iu" else self.acc.type(1))
        assert self.kind != "c", "reference: complex amax/amin"
        if self.kind == "b":
            return reduce == "amin"
        if self.kind in "iu":
            return self.lo if reduce == "amax" else self.hi
        return self.acc.type(-np.inf if reduce == "amax" else np.inf)

    def add(self, a, b):
        if self.kind == "b":
            return a or b
        if self.kind in "iu":
            return self.wrap(a + b)
        return a + b  # numpy scalars: float32 + float32 rounds to float32; complex adds parts

    def mul(self, a, b):
        if self.kind == "b":
            return a and b
        if self.kind in "iu":
            return self.wrap(a * b)
        if self.kind == "c":  # textbook formula, each operation rounded in the part type
            re = a.real * b.real - a.imag * b.imag
            im = a.real * b.imag + a.imag * b.real
            return self.acc.type(complex(float(re), float(im)))
        return a * b

    @staticmethod
    def _isnan(x) -> bool:
        return isinstance(x, np.floating) and bool(np.isnan(x))

    def combine(self, reduce: str, acc, v):
        if reduce in ("sum", "mean"):
            return self.add(acc, v)
        if reduce == "prod":
            return self.mul(acc, v)
        if self.kind == "b":
            return (acc or v) if reduce == "amax" else (acc and v)
        if self._isnan(v):  # an incoming NaN wins; a NaN accumulator stays (no comparison is true)
            return v
        if reduce == "amax":
            return v if acc < v else acc
        if reduce == "amin":
            return v if v < acc else acc
        raise AssertionError(f"reference: unknown reduce {reduce}")

    def finalize(self, reduce: str, acc, count: int):
        if reduce != "mean":
            return acc
        assert self.kind != "b", "reference: bool mean"
        if self.kind in "iu":
            return acc // count  # Python's // floors; acc is the wrapped sum
        if self.kind == "c":
            part = acc.real.dtype.type
            return self.acc.type(complex(float(acc.real / part(count)), float(acc.imag / part(count))))
        return acc / self.acc.type(count)


def _fold(out: np.ndarray, hits, reduce: str, include_self: bool, ar: Arith) -> None:
    """Folds (target, value) pairs, in the order given, into `out` (contiguous, written in place)."""
    if reduce == "none":
        for target, value in hits:
            out[target] = value
        return
    state = {}
    for target, value in hits:
        entry = state.get(target)
        if entry is None:
            start = ar.load(out[target]) if include_self else ar.identity(reduce)
            entry = state[target] = [start, 0]
        entry[0] = ar.combine(reduce, entry[0], value)
        entry[1] += 1
    for target, (acc, count) in state.items():
        out[target] = ar.finalize(reduce, acc, count + (1 if include_self else 0))


def _checked(i, bound: int) -> int:
    i = int(i)
    assert 0 <= i < bound, f"reference: index {i} outside [0, {bound})"
    return i


# ---- the ops ---------------------------------------------------------------------------------------------


def ref_gather(input, dim: int, index) -> np.ndarray:
    input, index = np.asarray(input), np.asarray(index)
    d = wrap_dim(dim, input.ndim)
    inp, idx = _at_least_1d(input), _at_least_1d(index)
    out = np.empty(idx.shape, input.dtype)
    for pos in np.ndindex(*idx.shape):
        source = list(pos)
        source[d] = _checked(idx[pos], inp.shape[d])
        out[pos] = inp[tuple(source)]
    return out.reshape(index.shape)


def ref_index_select(input, dim: int, index) -> np.ndarray:
    input, index = np.asarray(input), np.asarray(index)
    d = wrap_dim(dim, input.ndim)
    inp, idx = _at_least_1d(input), index.reshape(-1)
    shape = list(inp.shape)
    shape[d] = idx.size
    out = np.empty(shape, input.dtype)
    for pos in np.ndindex(*shape):
        source = list(pos)
        source[d] = _checked(idx[pos[d]], inp.shape[d])
        out[pos] = inp[tuple(source)]
    return out.reshape(()) if input.ndim == 0 else out


@np.errstate(all="ignore")  # inf - inf, 0 * inf: NaN is the answer, not a problem
def ref_scatter(self, dim: int, index, src=None, *, value=None, reduce: Optional[str] = None,
                include_self: bool = True) -> np.ndarray:
    """scatter (src or value; reduce None/'add'/'multiply'), scatter_add and scatter_reduce."""
    self, index = np.asarray(self), np.asarray(index)
    r = _REDUCE_NAMES[reduce]
    ar = Arith(self.dtype)
    out = np.array(_at_least_1d(self), order="C", copy=True)
    d = wrap_dim(dim, self.ndim)
    idx = _at_least_1d(index)
    if src is not None:
        s = _at_least_1d(np.asarray(src))
        assert s.dtype == self.dtype
    else:
        v = ar.convert(value, self.dtype)  # converted to self's dtype first, as the library does
        v = v if r == "none" else ar.load(np.asarray(v, dtype=self.dtype)[()])
    hits = []
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[d] = _checked(idx[pos], out.shape[d])
        if src is not None:
            val = s[pos] if r == "none" else ar.load(s[pos])
        else:
            val = v
        hits.append((tuple(target), val))
    _fold(out, hits, r, include_self, ar)
    return out.reshape(self.shape)


@np.errstate(all="ignore")
def ref_index_op(self, dim: int, index, source, reduce: str, *, include_self: bool = True,
                 alpha: Any = 1) -> np.ndarray:
    """index_add (reduce 'sum', alpha) and index_reduce."""
    self, index, source = np.asarray(self), np.asarray(index), np.asarray(source)
    assert source.dtype == self.dtype
    r = _REDUCE_NAMES[reduce]
    ar = Arith(self.dtype)
    out = np.array(_at_least_1d(self), order="C", copy=True)
    d = wrap_dim(dim, self.ndim)
    idx = index.reshape(-1)
    src = _at_least_1d(source)
    scaled = r == "sum" and complex(alpha) != 1
    a = ar.convert(alpha) if scaled else None
    hits = []
    for pos in np.ndindex(*src.shape):
        target = list(pos)
        target[d] = _checked(idx[pos[d]], out.shape[d])
        v = ar.load(src[pos])
        if scaled:
            v = ar.mul(v, a)
        hits.append((tuple(target), v))
    _fold(out, hits, r, include_self, ar)
    return out.reshape(self.shape)


# ---- comparing -----------------------------------------------------------------------------------------


def mismatches(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Mask of elements whose bits differ (any NaN matches any NaN; -0.0 differs from 0.0)."""
    a, e = np.ascontiguousarray(actual), np.ascontiguousarray(expected)
    if a.dtype.kind == "c":
        return mismatches(a.real, e.real) | mismatches(a.imag, e.imag)
    if a.dtype.kind == "f":
        an, en = np.isnan(a), np.isnan(e)
        uint = np.dtype(f"u{a.dtype.itemsize}")
        return (an != en) | ((a.view(uint) != e.view(uint)) & ~(an & en))
    return a != e


def assert_same(actual, expected: np.ndarray, context: str = "") -> None:
    """actual is a numpy array of expected's dtype and shape with bit-identical elements."""
    prefix = f"{context}: " if context else ""
    assert type(actual) is np.ndarray, f"{prefix}expected a numpy.ndarray, got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"{prefix}dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"{prefix}shape {actual.shape}, expected {expected.shape}"
    bad = mismatches(actual, expected)
    if bad.any():
        where = [tuple(int(i) for i in p) for p in np.argwhere(bad)[:5]]
        first = where[0] if actual.ndim else ()
        raise AssertionError(
            f"{prefix}{int(bad.sum())} of {actual.size} elements differ (first at {where}); "
            f"at {first}: got {actual[first]!r}, expected {expected[first]!r}\n"
            f"got:\n{actual}\nexpected:\n{expected}"
        )


# ---- random inputs ---------------------------------------------------------------------------------------


def random_values(rng: np.random.Generator, shape, dtype, *, special: bool = True) -> np.ndarray:
    """Random values of dtype; floats sometimes hold NaN, +-inf, -0.0, 0.0 and repeated values (ties)."""
    dt = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if rng.random() < 0.5:  # full range: sums and products wrap
            return rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=dt)
        return rng.integers(max(int(info.min), -9), 10, size=shape, dtype=dt)  # small: floors and ties
    part = {"c": np.float32 if dt == np.complex64 else np.float64}.get(dt.kind, dt)

    def real():
        v = np.asarray(rng.standard_normal(shape) * 3).astype(part)
        if special and v.size and rng.random() < 0.5:
            pick = rng.random(shape) < 0.15
            v[pick] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5], part), size=int(pick.sum()))
        return v

    if dt.kind == "c":
        out = np.empty(shape, dt)
        out.real, out.imag = real(), real()
        return out
    return real()


LAYOUTS = ("contiguous", "transposed", "strided", "reversed", "broadcast", "readonly")


@dataclass
class View:
    """An array with a chosen memory layout: `view` over the buffer `base`; slicer(base-shaped) -> view-shaped."""
    view: np.ndarray
    base: np.ndarray
    slicer: Callable[[np.ndarray], np.ndarray]

    def outside_mask(self) -> np.ndarray:
        """True for the elements of base that view does not cover."""
        mask = np.ones(self.base.shape, bool)
        self.slicer(mask)[...] = False
        return mask


def with_layout(arr: np.ndarray, layout: str, rng: np.random.Generator) -> View:
    """A copy of arr's values laid out in memory as `layout` says ('broadcast' is handled by the generators)."""
    arr = np.asarray(arr)
    r = arr.ndim
    if layout == "transposed" and r >= 2:
        perm = tuple(int(p) for p in rng.permutation(r))
        while perm == tuple(range(r)):
            perm = tuple(int(p) for p in rng.permutation(r))
        inv = tuple(int(p) for p in np.argsort(perm))
        base = np.array(arr.transpose(perm), order="C", copy=True)
        return View(base.transpose(inv), base, lambda b: b.transpose(inv))
    if layout in ("strided", "transposed") and r >= 1:
        steps = tuple(int(rng.integers(2, 4)) for _ in range(r))
        sl = tuple(slice(1, 1 + st * s, st) for st, s in zip(steps, arr.shape))
        base = random_values(rng, [st * s + 1 for st, s in zip(steps, arr.shape)], arr.dtype)
        view = base[sl]
        view[...] = arr
        return View(view, base, lambda b: b[sl])
    if layout == "reversed" and r >= 1:
        sl = (slice(None, None, -1),) * r
        base = np.array(arr[sl], order="C", copy=True)
        return View(base[sl], base, lambda b: b[sl])
    base = np.array(arr, order="C", copy=True)
    if layout == "readonly":
        base.flags.writeable = False
    return View(base, base, lambda b: b)


def layout_desc(a: np.ndarray) -> str:
    return f"{a.dtype}{list(a.shape)} strides={list(a.strides)}{'' if a.flags.writeable else ' ro'}"


@dataclass
class Case:
    """Inputs of one call: self (or input), dim, index, src (or source; None for gather/index_select)."""
    self: np.ndarray
    dim: int
    index: np.ndarray
    src: Optional[np.ndarray]
    layout: str
    extra: dict = field(default_factory=dict)

    def desc(self) -> str:
        parts = [f"layout={self.layout}", f"dim={self.dim}", f"self={layout_desc(self.self)}",
                 f"index={layout_desc(self.index)} {self.index.tolist()}"]
        if self.src is not None:
            parts.append(f"src={layout_desc(self.src)}")
        return " ".join(parts)


def _random_rank_and_shape(rng, max_size=4):
    r = int(rng.integers(1, 4))
    return r, tuple(int(s) for s in rng.integers(1, max_size + 1, size=r))


def _broadcast_from(rng, values_fn, shape):
    """An array of `shape` viewed from a smaller one (stride 0 in one or more dims)."""
    small = list(shape)
    dims = [d for d in range(len(shape)) if shape[d] > 1] or list(range(len(shape)))
    for d in rng.choice(dims, size=int(rng.integers(1, len(dims) + 1)), replace=False):
        small[int(d)] = 1
    return np.broadcast_to(values_fn(small), shape)


def _apply_layout(arr, layout, rng, *, broadcast_ok=False):
    if layout == "broadcast":
        return arr  # generated broadcast already, or kept contiguous
    return with_layout(arr, layout, rng).view


def _unique_along(rng, shape, d, bound, dtype):
    """An index whose values along dim d are distinct on every line (needs shape[d] <= bound)."""
    idx = np.empty(shape, dtype)
    lines = np.moveaxis(idx, d, -1)
    for line in np.ndindex(*lines.shape[:-1]):
        lines[line] = rng.permutation(bound)[: shape[d]]
    return idx


def _self_layout(self_: np.ndarray, layout: str, rng, writable_self: bool) -> np.ndarray:
    if writable_self and layout in ("readonly", "broadcast"):
        return np.array(self_, order="C", copy=True)
    return _apply_layout(self_, layout, rng)


def scatter_case(rng, dtype, index_dtype, layout: str, *, unique: bool = False, src_extra: bool = True,
                 writable_self: bool = False, special: bool = True) -> Case:
    """Inputs for gather / scatter / scatter_add / scatter_reduce: index has self's rank, is no larger
    than self outside dim (any length along dim), and no larger than src anywhere. With writable_self,
    the 'readonly' and 'broadcast' layouts apply to index and src only."""
    r, self_shape = _random_rank_and_shape(rng)
    dim = int(rng.integers(-r, r))
    d = dim % r
    bound = self_shape[d]
    idx_shape = []
    for k in range(r):
        if k == d:
            idx_shape.append(int(rng.integers(1, bound + 1)) if unique else int(rng.integers(1, 2 * bound + 2)))
        else:
            idx_shape.append(int(rng.integers(1, self_shape[k] + 1)))
    idx_shape = tuple(idx_shape)
    src_shape = tuple(s + (int(rng.integers(0, 2)) if src_extra else 0) for s in idx_shape)
    if unique:
        index = _unique_along(rng, idx_shape, d, bound, index_dtype)
    elif layout == "broadcast":
        index = _broadcast_from(rng, lambda s: rng.integers(0, bound, size=s).astype(index_dtype), idx_shape)
    else:
        index = rng.integers(0, bound, size=idx_shape).astype(index_dtype)
    self_ = random_values(rng, self_shape, dtype, special=special)
    src = random_values(rng, src_shape, dtype, special=special)
    if layout == "broadcast":
        self_ = _broadcast_from(rng, lambda s: random_values(rng, s, dtype, special=special), self_shape)
        src = _broadcast_from(rng, lambda s: random_values(rng, s, dtype, special=special), src_shape)
    return Case(_self_layout(self_, layout, rng, writable_self), dim, _apply_layout(index, layout, rng),
                _apply_layout(src, layout, rng), layout)


def vector_case(rng, dtype, index_dtype, layout: str, *, unique: bool = False, writable_self: bool = False,
                special: bool = True) -> Case:
    """Inputs for index_select / index_add / index_reduce: a 1-d index, source = self with size(dim) = len(index)."""
    r, self_shape = _random_rank_and_shape(rng)
    dim = int(rng.integers(-r, r))
    d = dim % r
    bound = self_shape[d]
    if unique:
        n = int(rng.integers(1, bound + 1))
        index = rng.permutation(bound)[:n].astype(index_dtype)
    else:
        n = int(rng.integers(1, 2 * bound + 2))
        if layout == "broadcast":
            index = np.broadcast_to(np.array(rng.integers(0, bound), index_dtype), (n,))
        else:
            index = rng.integers(0, bound, size=n).astype(index_dtype)
    src_shape = tuple(n if k == d else s for k, s in enumerate(self_shape))
    self_ = random_values(rng, self_shape, dtype, special=special)
    src = random_values(rng, src_shape, dtype, special=special)
    if layout == "broadcast":
        self_ = _broadcast_from(rng, lambda s: random_values(rng, s, dtype, special=special), self_shape)
        src = _broadcast_from(rng, lambda s: random_values(rng, s, dtype, special=special), src_shape)
    return Case(_self_layout(self_, layout, rng, writable_self), dim, _apply_layout(index, layout, rng),
                _apply_layout(src, layout, rng), layout)


def writable_target(rng, values: np.ndarray, layout: str) -> View:
    """A writable array holding `values` for an in-place call, laid out like the case's inputs."""
    if layout in ("readonly", "broadcast"):
        layout = "strided"
    return with_layout(values, layout, rng)


# Numbers used as scatter's value and index_add's alpha, per dtype kind.
def scatter_value(dtype):
    kind = np.dtype(dtype).kind
    return {"b": True, "i": -3, "u": -3, "c": complex(0.5, -2.25), "f": 0.1}[kind]


def alpha_value(dtype):
    kind = np.dtype(dtype).kind
    return {"b": False, "i": -3, "u": -3, "c": complex(1.5, -0.5), "f": -0.7}[kind]

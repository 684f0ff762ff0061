"""The local ops with torch's names, argument order and keywords.

Arrays travel to the compiled core through DLPack, without copies: numpy
arrays, torch tensors and, with a CUDA build (see ``scatterx.cuda``), torch
CUDA tensors and CuPy arrays (any strides, read-only inputs too). The result
is the same kind of array as the main input (torch in, torch out; numpy in,
numpy out; CuPy in, CuPy out) on the same device; in-place forms write into
the caller's array and return it. CUDA ops run on the caller's current torch
or CuPy stream and do not wait for it.

dtypes: float16, bfloat16 (torch), float32, float64, complex64, complex128,
int8, uint8, int16, int32, int64 and bool; an op's arrays share one dtype,
and indices are int32 or int64, used as given (no upcast). Complex has no
amax/amin and bool no mean.

Determinism: every op, including float sums and means, gives bit-identical
results across runs and thread counts (each destination is folded by one
thread in index order; on a GPU see ``scatterx.cuda.set_deterministic``).
float16/bfloat16 accumulate in float and round once.

Errors raise IndexError (an index out of range; nothing is written), TypeError
(a dtype) or ValueError (any other bad argument: shapes, dims, overlap), with
the core's message: ``"<op>: <argument> <expected>, got <received>"``.

Gradients: when a torch input requires grad (and grad mode is on), gather,
index_select, scatter_add, scatter_reduce, index_add, index_add_weighted and
index_reduce, and their in-place forms, are recorded through the autograd
Functions of ``scatterx.torch`` (an in-place write into a leaf that requires
grad raises torch's RuntimeError, as torch's own in-place ops do); ``scatter`` /
``scatter_`` and the ``out=`` forms refuse such inputs rather than silently
dropping the gradient.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any, Optional

import numpy as np

from . import _C
from ._plan import IndexPlan

__all__ = [
    "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
    "index_select", "index_add", "index_add_", "index_add_weighted", "index_add_weighted_", "index_reduce",
    "index_reduce_", "gather_scatter", "gather_dot",
]

Array = Any  # numpy.ndarray or torch.Tensor


def _torch():
    """torch if the caller has imported it (scatterx never imports it itself)."""
    return sys.modules.get("torch")


def _is_torch(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


_torch_export_cache = None


def _torch_export():
    """(torch.Tensor, torch.utils.dlpack.to_dlpack) once the caller has imported torch, else None; looked up
    once, since on a small tensor each attribute lookup is a visible share of the call."""
    global _torch_export_cache
    if _torch_export_cache is None:
        torch = _torch()
        if torch is None:
            return None
        _torch_export_cache = (torch.Tensor, torch.utils.dlpack.to_dlpack)
    return _torch_export_cache


def _exported(x):
    """What the extension is handed for ``x``: a CPU torch tensor as the DLPack capsule of
    ``torch.utils.dlpack.to_dlpack`` (0.3 us, where ``Tensor.__dlpack__``'s Python-level checks take 2.2 us in
    torch 2.15: most of a small collective's time), a list element by element, anything else as it is. CUDA
    tensors keep ``__dlpack__``, whose stream argument orders them. ``x`` is what ``_raw`` returned (detached,
    values as stored); the capsule holds the tensor alive until the extension takes it."""
    exported = _torch_export_cache or _torch_export()
    if exported is None:
        return x
    if isinstance(x, exported[0]):
        return exported[1](x) if x.is_cpu else x
    if isinstance(x, list):
        return [_exported(e) for e in x]
    return x


def _is_cupy(x) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def _framework(x):
    exported = _torch_export_cache or _torch_export()
    if exported is not None and isinstance(x, exported[0]):
        return _C.Framework.Torch
    return _C.Framework.CuPy if _is_cupy(x) else _C.Framework.NumPy


def _use_stream_of(x) -> None:
    """Makes the array's current CUDA stream (torch's or CuPy's) the one the core enqueues on."""
    if _is_torch(x):
        if x.is_cuda:
            _C.cuda_set_current_stream(_torch().cuda.current_stream(x.device).cuda_stream)
    elif _is_cupy(x):
        _C.cuda_set_current_stream(sys.modules["cupy"].cuda.get_current_stream().ptr)


def _needs_grad(*arrays) -> bool:
    torch = _torch()
    if torch is None:
        return False
    tensor = torch.Tensor
    for a in arrays:
        if isinstance(a, tensor) and a.requires_grad:
            return torch.is_grad_enabled()
    return False


def _raw(x, op: str, name: str):
    """What the core reads: the array itself (a tensor detached, as it never records grad).

    A torch conjugate or negative view stores values that differ from what it
    means; it is materialized first (a copy only in that case).
    """
    if _is_torch(x):
        if x.requires_grad:
            x = x.detach()
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        _use_stream_of(x)
        return x
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        _use_stream_of(x)
        return x
    raise TypeError(f"{op}: expected {name} to be a numpy array or a torch tensor, got {type(x).__name__}")


def _writable(x, op: str, name: str):
    """The array an in-place op writes into; refuses read-only numpy arrays with a clear message."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{op}: expected {name} to be writable (it is written in place), got a read-only array")
    if _is_torch(x) and (x.is_conj() or x.is_neg()):
        raise ValueError(f"{op}: expected {name} to hold its values as stored (it is written in place), got a "
                         f"torch {'conjugate' if x.is_conj() else 'negative'} view; call resolve_conj() / resolve_neg()")
    return _raw(x, op, name)


def _is_plain_cpu(x, tensor) -> bool:
    """Whether ``x`` is a CPU torch tensor (exactly ``tensor``, torch.Tensor) that records no grad and stores its
    values as it means them: ``_raw`` and ``_writable`` would hand it on unchanged."""
    return type(x) is tensor and x.is_cpu and not x.requires_grad and not x.is_conj() and not x.is_neg()


def _plain_cpu_capsule(x):
    """The DLPack capsule of ``x`` when ``_is_plain_cpu``, else None: ``_arg`` / ``_out`` then skip ``_raw`` and
    ``_writable``, whose checks cost more than the kernel on a tensor of a few hundred elements."""
    exported = _torch_export_cache or _torch_export()
    return exported[1](x) if exported is not None and _is_plain_cpu(x, exported[0]) else None


def _plain_cpu_capsules(*arrays):
    """The DLPack capsules of ``arrays`` when every one is ``_is_plain_cpu``, else None. Such arrays need no
    gradient routing (``_needs_grad``) and no ``_framework`` test either: an op whose arrays all pass calls the
    core at once (0.2 us a tensor, where ``_needs_grad``, ``_arg`` and ``_framework`` took 0.7)."""
    exported = _torch_export_cache or _torch_export()
    if exported is None:
        return None
    tensor, to_dlpack = exported
    capsules = []
    for x in arrays:
        if not _is_plain_cpu(x, tensor):
            return None
        capsules.append(to_dlpack(x))
    return capsules


def _arg(x, op: str, name: str):
    """An array argument as the extension takes it, for one call: ``_raw``, then ``_exported``."""
    capsule = _plain_cpu_capsule(x)
    return capsule if capsule is not None else _exported(_raw(x, op, name))


def _out(x, op: str, name: str):
    """An array the extension writes into, for one call: ``_writable``, then ``_exported``."""
    capsule = _plain_cpu_capsule(x)
    return capsule if capsule is not None else _exported(_writable(x, op, name))


def _converted(op: str, in_place: bool, input, *named):
    """The general conversion of an op's arrays: ``input`` by ``_out`` when the op writes it in place, else by
    ``_arg``, then each ``(array, name)`` of ``named`` by ``_arg``."""
    return [_out(input, op, "input") if in_place else _arg(input, op, "input")] + [_arg(a, op, n) for a, n in named]


def _no_grad_support(op: str, *arrays) -> None:
    if _needs_grad(*arrays):
        raise TypeError(
            f"{op}: expected inputs that do not require grad (scatterx has no gradient for this call), got one "
            "that does; call .detach() on it, or use the differentiable ops listed in scatterx.torch"
        )


def _is_scalar(x) -> bool:
    if type(x) in (int, float, bool):  # the common case, before the slower abstract-class check
        return True
    return isinstance(x, (bool, numbers.Number, np.generic)) and not isinstance(x, np.ndarray)


_INT64 = (-(2**63), 2**63 - 1)


def _scalar(x):
    """A Python number for the core; integers beyond int64 travel as floats (as torch takes them)."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, int) and not isinstance(x, bool) and not _INT64[0] <= x <= _INT64[1]:
        return float(x)
    return x


# ---- gather ---------------------------------------------------------------------------------------------


def _select(op: str, new, into, input, dim, index, out):
    """gather and index_select: ``new`` makes the result, ``into`` writes ``out``; differentiable in ``input``
    (through ``scatterx.torch``'s function of the op's name) only without ``out``."""
    if out is not None:
        arrays = _plain_cpu_capsules(out, input, index)
        if arrays is None:
            _no_grad_support(op, input, out)
            arrays = [_out(out, op, "out"), _arg(input, op, "input"), _arg(index, op, "index")]
        into(arrays[0], arrays[1], dim, arrays[2])
        return out
    arrays = _plain_cpu_capsules(input, index)
    if arrays is None:
        if _needs_grad(input):
            from . import torch as sx_torch
            return getattr(sx_torch, op)(input, dim, index)
        arrays = [_arg(input, op, "input"), _arg(index, op, "index")]
    return new(arrays[0], dim, arrays[1], _framework(input))


def gather(input: Array, dim: int, index: Array, *, sparse_grad: bool = False, out: Optional[Array] = None) -> Array:
    """:torch:`gather`: ``out[i][j][k] = input[index[i][j][k]][j][k]`` (dim 0).

    ``index`` (int32 or int64) has input's rank and is no larger than input
    outside ``dim``; the result has index's shape and input's dtype (any).
    ``out=`` writes into a given array of that shape. ``sparse_grad`` is
    accepted for torch compatibility and ignored. A copy: deterministic.
    Errors: IndexError for an index outside ``[0, input.size(dim))``,
    ValueError for ranks, sizes or ``dim``, TypeError for dtypes.
    """
    return _select("gather", _C.gather, _C.gather_out, input, dim, index, out)


def index_select(input: Array, dim: int, index: Array, *, out: Optional[Array] = None) -> Array:
    """:torch:`index_select`: the slices ``input[..., index[i], ...]`` along ``dim``.

    ``index`` is 1-d (or 0-d), int32 or int64; the result is input's shape with
    ``dim`` of index's length, in input's dtype (any). ``out=`` writes into a
    given array of that shape. A copy: deterministic. Errors: IndexError for an
    index outside ``[0, input.size(dim))``, ValueError for shapes or ``dim``,
    TypeError for dtypes.
    """
    return _select("index_select", _C.index_select, _C.index_select_out, input, dim, index, out)


# ---- scatter --------------------------------------------------------------------------------------------


def _scatter(in_place: bool, input, dim, index, src, value, reduce):
    op = "scatter_" if in_place else "scatter"
    if src is not None and value is not None:
        raise TypeError(f"{op}: expected either src or value, got both")
    if src is not None and _is_scalar(src):  # torch takes a Python number in src's place as the value
        src, value = None, src
    if src is None and value is None:
        raise TypeError(f"{op}: expected src (an array) or value (a number), got neither")
    if reduce is not None and not isinstance(reduce, str):
        raise TypeError(f"{op}: expected reduce to be None, 'add' or 'multiply', got {reduce!r}")
    reduce_name = "none" if reduce is None else reduce
    arrays = None if src is None else _plain_cpu_capsules(input, index, src)
    if arrays is None:
        _no_grad_support(op, input, src)
        self_ = _out(input, op, "input") if in_place else _arg(input, op, "input")
        if src is None:
            if not _is_scalar(value):
                raise TypeError(f"{op}: expected value to be a Python number, got {type(value).__name__}")
            result = _C.scatter_value(self_, dim, _arg(index, op, "index"), _scalar(value), reduce_name, in_place,
                                      _framework(input))
            return input if in_place else result
        arrays = [self_, _arg(index, op, "index"), _arg(src, op, "src")]
    result = _C.scatter("scatter", arrays[0], dim, arrays[1], arrays[2], reduce_name, True, in_place,
                        _framework(input))
    return input if in_place else result


def scatter(input: Array, dim: int, index: Array, src: Any = None, *, value: Any = None,
            reduce: Optional[str] = None) -> Array:
    """:torch:`scatter`: a copy of input with ``out[index[i][j]][j] = src[i][j]`` (dim 0).

    ``src`` may be an array or a number (taken as ``value``, as torch does).
    ``reduce`` is None (plain write; with duplicate indices the last in index
    order wins, deterministically, where torch leaves it undefined), ``'add'``
    or ``'multiply'``. ``index`` (int32/int64) has input's rank, is no larger
    than ``src`` in any dim nor than input outside ``dim``; ``src`` has input's
    dtype (any). Not differentiable: inputs that require grad raise TypeError.
    Errors: IndexError for an index outside ``[0, input.size(dim))``,
    ValueError for shapes, ``dim`` or an unknown ``reduce``, TypeError for
    dtypes or a ``reduce`` that is not a string.
    """
    return _scatter(False, input, dim, index, src, value, reduce)


def scatter_(input: Array, dim: int, index: Array, src: Any = None, *, value: Any = None,
             reduce: Optional[str] = None) -> Array:
    """:torch:`Tensor.scatter_`: :func:`scatter` into ``input`` in place; returns ``input``.

    Also refuses an ``input`` that overlaps itself (a zero stride), ``index`` or
    ``src`` (ValueError), and a read-only array; on any error input is unchanged.
    """
    return _scatter(True, input, dim, index, src, value, reduce)


def _scatter_reduce(kind, in_place, input, dim, index, src, reduce, include_self):
    op = kind + ("_" if in_place else "")
    if not isinstance(reduce, str):
        raise TypeError(f"{op}: expected reduce to be a string, got {reduce!r}")
    arrays = _plain_cpu_capsules(input, index, src)
    if arrays is None:
        if _needs_grad(input, src):
            from . import torch as sx_torch
            return sx_torch.scatter_reduce(input, dim, index, src, reduce, include_self=include_self,
                                           in_place=in_place)
        arrays = _converted(op, in_place, input, (index, "index"), (src, "src"))
    result = _C.scatter(kind, arrays[0], dim, arrays[1], arrays[2], reduce, include_self, in_place,
                        _framework(input))
    return input if in_place else result


def scatter_add(input: Array, dim: int, index: Array, src: Array) -> Array:
    """:torch:`scatter_add`: a copy of input with ``out[index[i][j]][j] += src[i][j]`` (dim 0).

    Shapes and dtypes as :func:`scatter` (integer sums wrap). Deterministic:
    each position sums its values in index order. Differentiable in input and
    src. Errors: IndexError, ValueError (shapes, ``dim``), TypeError (dtypes).
    """
    return _scatter_reduce("scatter_add", False, input, dim, index, src, "sum", True)


def scatter_add_(input: Array, dim: int, index: Array, src: Array) -> Array:
    """:torch:`Tensor.scatter_add_`: :func:`scatter_add` in place; returns ``input``.

    Refuses an ``input`` that overlaps itself, ``index`` or ``src`` (ValueError);
    on any error input is unchanged.
    """
    return _scatter_reduce("scatter_add", True, input, dim, index, src, "sum", True)


def scatter_reduce(input: Array, dim: int, index: Array, src: Array, reduce: str, *,
                   include_self: bool = True) -> Array:
    """:torch:`scatter_reduce` with reduce ``'sum' | 'prod' | 'mean' | 'amax' | 'amin'``.

    Every position of input hit by values v1..vn (in index order) becomes the
    reduction of (input if include_self) and v1..vn; float16/bfloat16
    accumulate in float and round once; integer means floor; amax/amin
    propagate NaN; positions no index hits keep their value. Shapes as
    :func:`scatter`; complex has no amax/amin and bool no mean (TypeError).
    Results are bit-identical across runs and thread counts. Differentiable in
    input and src with torch's rules. Errors: IndexError, ValueError (shapes,
    ``dim``, an unknown reduce), TypeError (dtypes).
    """
    return _scatter_reduce("scatter_reduce", False, input, dim, index, src, reduce, include_self)


def scatter_reduce_(input: Array, dim: int, index: Array, src: Array, reduce: str, *,
                    include_self: bool = True) -> Array:
    """:torch:`Tensor.scatter_reduce_`: :func:`scatter_reduce` in place; returns ``input``.

    Refuses an ``input`` that overlaps itself, ``index`` or ``src`` (ValueError);
    on any error input is unchanged.
    """
    return _scatter_reduce("scatter_reduce", True, input, dim, index, src, reduce, include_self)


# ---- index_add / index_reduce ---------------------------------------------------------------------------


def _index_add(in_place, input, dim, index, source, alpha):
    op = "index_add_" if in_place else "index_add"
    if not _is_scalar(alpha):
        raise TypeError(f"{op}: expected alpha to be a Python number, got {type(alpha).__name__}")
    arrays = _plain_cpu_capsules(input, index, source)
    if arrays is None:
        if _needs_grad(input, source):
            from . import torch as sx_torch
            return sx_torch.index_add(input, dim, index, source, alpha=alpha, in_place=in_place)
        arrays = _converted(op, in_place, input, (index, "index"), (source, "source"))
    result = _C.index_add(arrays[0], dim, arrays[1], arrays[2], _scalar(alpha), in_place, _framework(input))
    return input if in_place else result


def index_add(input: Array, dim: int, index: Array, source: Array, *, alpha: Any = 1) -> Array:
    """:torch:`index_add`: a copy of input with ``out[..., index[i], ...] += alpha * source[..., i, ...]``.

    ``index`` is 1-d (or 0-d, int32/int64) with ``source.size(dim)`` entries;
    ``source`` matches input in every other dim and has its dtype (any).
    ``alpha`` must be integral for integer arrays and bool for bool ones.
    Deterministic (each row sums in index order). Differentiable in input and
    source. Errors: IndexError, ValueError (shapes, ``dim``), TypeError (dtypes, an
    ``alpha`` the dtype cannot take).
    """
    return _index_add(False, input, dim, index, source, alpha)


def index_add_(input: Array, dim: int, index: Array, source: Array, *, alpha: Any = 1) -> Array:
    """:torch:`Tensor.index_add_`: :func:`index_add` in place; returns ``input``.

    Refuses an ``input`` that overlaps itself, ``index`` or ``source``
    (ValueError); on any error input is unchanged.
    """
    return _index_add(True, input, dim, index, source, alpha)


def _index_add_weighted(in_place, input, dim, index, source, weights):
    op = "index_add_weighted_" if in_place else "index_add_weighted"
    arrays = _plain_cpu_capsules(input, index, source, weights)
    if arrays is None:
        if _needs_grad(input, source, weights):
            from . import torch as sx_torch
            return sx_torch.index_add_weighted(input, dim, index, source, weights, in_place=in_place)
        arrays = _converted(op, in_place, input, (index, "index"), (source, "source"), (weights, "weights"))
    result = _C.index_add_weighted(arrays[0], dim, arrays[1], arrays[2], arrays[3], in_place, _framework(input))
    return input if in_place else result


def index_add_weighted(input: Array, dim: int, index: Array, source: Array, weights: Array) -> Array:
    """A copy of input with ``out[..., index[i], ...] += weights[i] * source[..., i, ...]``, in one pass.

    torch: ``input.index_add(dim, index, source * weights[:, None])`` (:torch:`index_add`) without
    the product's temporary. MoE combine:
    ``index_add_weighted(zeros(tokens, h), 0, token_of_row, expert_out, prob_of_row)``.
    Shapes as :func:`index_add`; ``weights`` is 1-d with one entry per index entry and input's dtype;
    each product is formed in the accumulation type (float for float16/bfloat16) and not rounded
    before the sum, so it can differ from torch's by that rounding. Deterministic. Differentiable in
    input, source and weights. Errors: IndexError, ValueError (shapes), TypeError (dtypes).
    """
    return _index_add_weighted(False, input, dim, index, source, weights)


def index_add_weighted_(input: Array, dim: int, index: Array, source: Array, weights: Array) -> Array:
    """:func:`index_add_weighted` in place (torch: ``input.index_add_(dim, index, source * weights[:, None])``);
    returns ``input``. Refuses an ``input`` that overlaps itself or another argument (ValueError)."""
    return _index_add_weighted(True, input, dim, index, source, weights)


def _index_reduce(in_place, input, dim, index, source, reduce, include_self):
    op = "index_reduce_" if in_place else "index_reduce"
    if not isinstance(reduce, str):
        raise TypeError(f"{op}: expected reduce to be a string, got {reduce!r}")
    arrays = _plain_cpu_capsules(input, index, source)
    if arrays is None:
        if _needs_grad(input, source):
            from . import torch as sx_torch
            return sx_torch.index_reduce(input, dim, index, source, reduce, include_self=include_self,
                                         in_place=in_place)
        arrays = _converted(op, in_place, input, (index, "index"), (source, "source"))
    result = _C.index_reduce(arrays[0], dim, arrays[1], arrays[2], reduce, include_self, in_place,
                             _framework(input))
    return input if in_place else result


def index_reduce(input: Array, dim: int, index: Array, source: Array, reduce: str, *,
                 include_self: bool = True) -> Array:
    """:torch:`index_reduce` with reduce ``'prod' | 'mean' | 'amax' | 'amin'``.

    Shapes as :func:`index_add`; ``include_self`` as :func:`scatter_reduce`
    (integer means floor, amax/amin propagate NaN, complex has no amax/amin
    and bool no mean). Deterministic. Differentiable in input and source.
    Errors: IndexError, ValueError (shapes, ``dim``, reduce), TypeError (dtypes).
    """
    return _index_reduce(False, input, dim, index, source, reduce, include_self)


def index_reduce_(input: Array, dim: int, index: Array, source: Array, reduce: str, *,
                  include_self: bool = True) -> Array:
    """:torch:`Tensor.index_reduce_`: :func:`index_reduce` in place; returns ``input``.

    Refuses an ``input`` that overlaps itself, ``index`` or ``source``
    (ValueError); on any error input is unchanged.
    """
    return _index_reduce(True, input, dim, index, source, reduce, include_self)


def gather_scatter(x: Array, src_index: Array, dst_index: Array, reduce: str = "sum", *,
                   edge_weight: Optional[Array] = None, dim_size: Optional[int] = None) -> Array:
    """Fused message passing: ``out[n]`` reduces ``x[src_index[e]] * edge_weight[e]`` over the edges
    ``e`` with ``dst_index[e] == n``, i.e. ``scatter(x[src_index] * edge_weight[:, None], dst_index)``,
    without forming the E x F messages (torch: :torch:`Tensor.scatter_reduce_` of
    ``x[src_index] * edge_weight[:, None]``).

    ``x`` is [N, F...] (floating), ``src_index`` and ``dst_index`` 1-d int32/int64 of one length E,
    ``edge_weight`` 1-d of length E in x's dtype; the result is [dim_size, F...].
    ``dst_index`` may be a :class:`IndexPlan` built from it once (no check and no grouping per call).
    ``reduce`` is ``'sum' | 'mean' | 'amax' | 'amin'`` (a destination no edge reaches is 0);
    ``dim_size`` defaults to ``max(dst_index) + 1``. Each destination row folds its edges in edge
    order in the accumulation type (float for float16/bfloat16), so results are deterministic, on CPU
    and CUDA alike (a CUDA call takes CUDA arrays and a plan built on their device; without edge_weight,
    float32/float64 results equal the CPU's bit for bit). Differentiable in x and edge_weight for every
    reduce (``scatterx.torch``). Errors: IndexError (an index out of range), ValueError (shapes, devices,
    a plan on another device, reduce), TypeError.
    """
    op = "gather_scatter"
    if not isinstance(reduce, str):
        raise TypeError(f"{op}: expected reduce to be a string, got {reduce!r}")
    if _needs_grad(x, edge_weight):
        from . import torch as sx_torch
        return sx_torch.gather_scatter(x, src_index, dst_index, reduce, edge_weight=edge_weight, dim_size=dim_size)
    weight = None if edge_weight is None else _arg(edge_weight, op, "edge_weight")
    if isinstance(dst_index, IndexPlan):
        dst_index.check_dim_size(op, dim_size)
        return _C.gather_scatter_planned(_arg(x, op, "x"), _arg(src_index, op, "src_index"), dst_index._plan,
                                         reduce, weight, _framework(x))
    return _C.gather_scatter(_arg(x, op, "x"), _arg(src_index, op, "src_index"), _arg(dst_index, op, "dst_index"),
                             reduce, weight, -1 if dim_size is None else int(dim_size), _framework(x))


def gather_dot(a: Array, a_index: Array, b: Array, b_index: Array) -> Array:
    """Per-edge dot products of gathered rows: ``out[e] = (a[a_index[e]] * b[b_index[e]]).sum()`` over the
    features (the sizes after dim 0, which a and b share), i.e. the SDDMM of a graph network (attention
    scores, the gradient of gather_scatter in edge_weight), without forming the two E x F gathers
    (torch: ``(a[a_index] * b[b_index]).sum(-1)`` with :torch:`index_select`).

    ``a`` and ``b`` share a floating dtype; the indices are 1-d int32/int64 of one length E. Each dot is
    summed in the accumulation type (float for float16/bfloat16) in a fixed order: deterministic, on CPU
    and CUDA arrays alike (all on one device). Not differentiable (call it on detached tensors). The result
    is 1-d of length E in a's dtype. Errors: IndexError (an index out of range), ValueError (shapes,
    devices), TypeError (dtypes).
    """
    op = "gather_dot"
    return _C.gather_dot(_arg(a, op, "a"), _arg(a_index, op, "a_index"), _arg(b, op, "b"),
                         _arg(b_index, op, "b_index"), _framework(a))

"""scatterx.distributed's collectives and their async handle, :class:`Work`.

Every collective opens the same way (:class:`_Call`): the group's
communicator, or None on a rank outside the group (torch's warning, and the
collective returns None); then its arguments are converted under the
collective's name and it runs through the extension's ``name`` or
``name_async``.
"""

from __future__ import annotations

import datetime
import threading
import time
import warnings
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from .._ops import _exported, _framework, _is_torch, _raw, _writable
from ._groups import (
    Array,
    DistTimeoutError,
    GroupLike,
    ReduceOp,
    _dist,
    _premul_factor,
    _reduce_op,
    _resolve,
    _seconds,
    _state,
)


class Work:
    """The handle an ``async_op=True`` collective returns (as torch's Work)."""

    def __init__(self, work: Any, outputs: Sequence[Array] = ()) -> None:
        self._work = work
        self._outputs = list(outputs)

    def wait(self, timeout: Optional[datetime.timedelta] = None) -> bool:
        """Blocks until the collective finished (GIL released) and raises its error, if any; returns True.

        With ``timeout``, raises :class:`DistTimeoutError` when it has not
        finished by then (it keeps running; the arrays stay in use).
        """
        seconds = _seconds(timeout, "Work.wait")
        if seconds is not None:
            deadline = time.monotonic() + seconds
            delay = 1e-5
            while not self._work.is_completed():
                if time.monotonic() >= deadline:
                    raise DistTimeoutError(f"Work.wait: timed out after {seconds} s (the collective keeps running "
                                           "and its arrays stay in use)")
                time.sleep(delay)
                delay = min(delay * 2, 1e-2)
        return self._work.wait()

    def is_completed(self) -> bool:
        """True once the collective finished (successfully or not); never blocks."""
        return self._work.is_completed()

    def is_success(self) -> bool:
        """True once the collective finished without an error."""
        if not self._work.is_completed():
            return False
        try:
            self._work.wait()
        except Exception:  # noqa: BLE001
            return False
        return True

    def _source_rank(self) -> int:
        """The Work of a receive (irecv): waits, then returns the sender's rank in the group (as torch's)."""
        if not hasattr(self._work, "source_rank"):
            raise ValueError("Work._source_rank: expected the Work of a receive (irecv), got another op's")
        return self._work.source_rank()

    def result(self) -> List[Array]:
        """The collective's output arrays (after :meth:`wait`)."""
        return list(self._outputs)

    def get_future(self) -> Any:
        """As torch's ``Work.get_future()``: a ``torch.futures.Future`` (needs torch) completed with
        :meth:`result` when the collective finishes, or with its error. A helper thread waits for it (GIL
        released), so ``then`` callbacks run there, as on torch's backend threads."""
        try:
            import torch.futures
        except ImportError:
            raise ImportError("Work.get_future: needs torch (torch.futures.Future); without torch, wait() and "
                              "result() give the same") from None
        future = torch.futures.Future()

        def settle() -> None:
            try:
                self._work.wait()
            except Exception as e:  # noqa: BLE001 (the collective's error goes to the future's waiters)
                future.set_exception(e)
            else:
                future.set_result(self.result())

        if self._work.is_completed():
            settle()
        else:
            threading.Thread(target=settle, name="scatterx-work-future", daemon=True).start()
        return future


class _Done:
    def wait(self) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _finished(async_op: bool, outputs=()) -> Optional[Work]:
    """What an operation that ran synchronously returns: None, or with ``async_op`` a completed Work."""
    return Work(_Done(), outputs) if async_op else None


def _copy_into(dst: Array, src: Array) -> None:
    if _is_torch(dst):
        dst.copy_(src.reshape(dst.shape))
    else:
        dst[...] = src.reshape(dst.shape)


def _scaled(x: Array, factor: float) -> Array:
    """A new array: x * factor in x's dtype (PREMUL_SUM's input)."""
    if _is_torch(x):
        return x.mul(factor)
    return (x * factor).astype(x.dtype, copy=False)


def _list(xs: Any, op: str, name: str, convert: Callable[[Any, str, str], Array]) -> List[Array]:
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: expected {name} to be a list of arrays, got {type(xs).__name__}")
    return [convert(x, op, f"{name}[{i}]") for i, x in enumerate(xs)]


def _splits(sizes: Any, op: str, name: str) -> List[int]:
    if sizes is None:
        return []
    if _is_torch(sizes) or isinstance(sizes, np.ndarray):
        sizes = sizes.tolist()
    try:
        return [int(s) for s in sizes]
    except TypeError:
        raise TypeError(f"{op}: expected {name} to be a list of ints, got {type(sizes).__name__}") from None


class _Call:
    """The opening every collective shares: ``group``'s communicator (``comm``; None, after torch's
    warning, on a rank outside the group, where the collective returns None), the conversions of its
    arguments under its name ``op``, and the call into the extension."""

    def __init__(self, op: str, group: GroupLike) -> None:
        self.op = op
        self.pg = _resolve(group, op)
        self.comm = None
        if self.pg is None:
            world = _state.world
            warnings.warn(f"Running {op} on global rank {-1 if world is None else world.rank()} which does not "
                          "belong to the given group.", stacklevel=3)  # points at the collective's caller
        else:
            self.comm = self.pg._live_comm(op)

    def output(self, x: Array, name: str) -> Array:
        return _writable(x, self.op, name)

    def input(self, x: Array, name: str) -> Array:
        return _raw(x, self.op, name)

    def outputs(self, xs: Any, name: str) -> List[Array]:
        return _list(xs, self.op, name, _writable)

    def inputs(self, xs: Any, name: str) -> List[Array]:
        return _list(xs, self.op, name, _raw)

    def reduce_op(self, op: Any) -> Any:
        return _reduce_op(op, self.op)

    def splits(self, sizes: Any, name: str) -> List[int]:
        return _splits(sizes, self.op, name)

    def run(self, args: tuple, keep: Sequence[Array], async_op: bool, fn: Optional[str] = None) -> Optional[Work]:
        """Calls the extension's collective ``fn`` (default: ``op``) on ``args`` and the communicator: at
        once, or as ``fn_async`` whose Work holds ``keep`` (the caller's arrays) alive until it completes."""
        fn = fn or self.op
        args = tuple(_exported(a) for a in args)
        if async_op:
            return Work(getattr(_dist, fn + "_async")(*args, self.comm), keep)
        getattr(_dist, fn)(*args, self.comm)
        return None


def barrier(group: GroupLike = None, async_op: bool = False, device_ids: Any = None) -> Optional[Work]:
    """:torch_dist:`barrier`: returns once every rank of ``group`` has entered it."""
    del device_ids
    call = _Call("barrier", group)
    if call.comm is None:
        return None
    return call.run((np.zeros(1, np.int64), _dist.ReduceOp.Sum), (), async_op, fn="all_reduce")


def all_reduce(tensor: Array, op: Any = ReduceOp.SUM, group: GroupLike = None,
               async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`all_reduce`: ``tensor`` = op over the ranks of their ``tensor`` (in place)."""
    call = _Call("all_reduce", group)
    if call.comm is None:
        return None
    factor = _premul_factor(op, call.op, [tensor])
    if factor is not None:  # a scaled copy, summed: the caller's tensor is untouched if the sum raises
        total = _scaled(call.output(tensor, "tensor"), factor)
        call.run((total, _dist.ReduceOp.Sum), (), False)
        _copy_into(tensor, total)
        return _finished(async_op, [tensor])
    return call.run((call.output(tensor, "tensor"), call.reduce_op(op)), [tensor], async_op)


def broadcast(tensor: Array, src: Optional[int] = None, group: GroupLike = None, async_op: bool = False,
              group_src: Optional[int] = None) -> Optional[Work]:
    """:torch_dist:`broadcast`: ``tensor`` = the tensor of global rank ``src`` (or of ``group_src``, a rank in
    ``group``)."""
    call = _Call("broadcast", group)
    if call.comm is None:
        return None
    if (src is None) == (group_src is None):
        raise ValueError(f"broadcast: expected exactly one of src (a global rank) and group_src, got "
                         f"src={src!r}, group_src={group_src!r}")
    if group_src is None:
        if src not in call.pg._group_rank:
            raise ValueError(f"Global rank {src} is not part of group {call.pg}")  # torch's message
        root = call.pg._group_rank[int(src)]
    else:
        root = int(group_src)
    return call.run((call.output(tensor, "tensor"), root), [tensor], async_op)


def all_gather(tensor_list: List[Array], tensor: Array, group: GroupLike = None,
               async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`all_gather`: ``tensor_list[i]`` = rank i's ``tensor``; one array per rank of ``group``, each of
    tensor's shape."""
    call = _Call("all_gather", group)
    if call.comm is None:
        return None
    return call.run((call.outputs(tensor_list, "tensor_list"), call.input(tensor, "tensor")), tensor_list, async_op)


def all_gather_into_tensor(output_tensor: Array, input_tensor: Array, group: GroupLike = None,
                           async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`all_gather_into_tensor`: ``output_tensor`` = the ranks' ``input_tensor`` concatenated along dim
    0 (``[ws * n, ...]``) or stacked (``[ws, n, ...]``)."""
    call = _Call("all_gather_into_tensor", group)
    if call.comm is None:
        return None
    args = (call.output(output_tensor, "output_tensor"), call.input(input_tensor, "input_tensor"))
    return call.run(args, [output_tensor], async_op)


def all_gather_single(output_tensor: Array, input_tensor: Array, group: GroupLike = None,
                      async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`all_gather_single`: torch's newer name of :func:`all_gather_into_tensor`, the same call (its
    errors name all_gather_into_tensor)."""
    return all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=async_op)


def reduce_scatter(output: Array, input_list: List[Array], op: Any = ReduceOp.SUM, group: GroupLike = None,
                   async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`reduce_scatter`: ``output`` = op over ranks r of rank r's ``input_list[rank]``; one input per
    rank, each of output's shape."""
    call = _Call("reduce_scatter", group)
    if call.comm is None:
        return None
    factor = _premul_factor(op, call.op, input_list)
    if factor is not None:
        scaled = [_scaled(x, factor) for x in call.inputs(input_list, "input_list")]
        call.run((call.output(output, "output"), scaled, _dist.ReduceOp.Sum), (), False)
        return _finished(async_op, [output])
    args = (call.output(output, "output"), call.inputs(input_list, "input_list"), call.reduce_op(op))
    return call.run(args, [output], async_op)


def reduce_scatter_tensor(output: Array, input: Array, op: Any = ReduceOp.SUM, group: GroupLike = None,
                          async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`reduce_scatter_tensor`: ``output`` = op over ranks of their block ``rank`` of ``input``
    (``[ws * n, ...]`` or ``[ws, n, ...]``)."""
    call = _Call("reduce_scatter_tensor", group)
    if call.comm is None:
        return None
    factor = _premul_factor(op, call.op, [input])
    if factor is not None:
        scaled = _scaled(call.input(input, "input"), factor)
        call.run((call.output(output, "output"), scaled, _dist.ReduceOp.Sum), (), False)
        return _finished(async_op, [output])
    args = (call.output(output, "output"), call.input(input, "input"), call.reduce_op(op))
    return call.run(args, [output], async_op)


def reduce_scatter_single(output: Array, input: Array, op: Any = ReduceOp.SUM, group: GroupLike = None,
                          async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`reduce_scatter_single`: torch's newer name of :func:`reduce_scatter_tensor`, the same call (its
    errors name reduce_scatter_tensor)."""
    return reduce_scatter_tensor(output, input, op=op, group=group, async_op=async_op)


def all_to_all(output_tensor_list: List[Array], input_tensor_list: List[Array], group: GroupLike = None,
               async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`all_to_all`: ``output_tensor_list[i]`` = rank i's ``input_tensor_list[rank]``; one array per
    rank in each list."""
    call = _Call("all_to_all", group)
    if call.comm is None:
        return None
    args = (call.outputs(output_tensor_list, "output_tensor_list"), call.inputs(input_tensor_list, "input_tensor_list"))
    return call.run(args, output_tensor_list, async_op)


def all_to_all_single(output: Array, input: Array, output_split_sizes: Optional[List[int]] = None,
                      input_split_sizes: Optional[List[int]] = None, group: GroupLike = None,
                      async_op: bool = False) -> Optional[Work]:
    """:torch_dist:`all_to_all_single`: rows (dim 0) of ``input`` go to the ranks in order, ``input_split_sizes[i]``
    to rank i; ``output`` receives ``output_split_sizes[i]`` rows from rank i. None means equal splits (dim 0
    divisible by the group size). Splits that disagree across ranks raise :class:`MismatchError` on every rank."""
    call = _Call("all_to_all_single", group)
    if call.comm is None:
        return None
    args = (call.output(output, "output"), call.input(input, "input"),
            call.splits(output_split_sizes, "output_split_sizes"), call.splits(input_split_sizes, "input_split_sizes"))
    return call.run(args, [output], async_op)


def all_to_all_v(input: Array, send_splits: Sequence[int], group: GroupLike = None) -> Tuple[Array, List[int]]:
    """all_to_all_single that works out the receive splits: ``send_splits[i]`` rows of ``input`` go to
    rank i. Returns ``(output, recv_splits)``: the received rows in rank order (a new array of input's
    kind: numpy, torch or CuPy, on input's device) and how many rows came from each rank. Not in
    torch.distributed.

    Raises ValueError on a rank outside ``group``.
    """
    name = "all_to_all_v"
    pg = _resolve(group, name)
    if pg is None:
        raise ValueError(f"{name}: expected a group this rank is a member of, got one without it")
    inp = _raw(input, name, "input")
    splits = _splits(send_splits, name, "send_splits")
    output, recv_splits = _dist.all_to_all_v(_exported(inp), splits, pg._live_comm(name), _framework(input))
    return output, list(recv_splits)

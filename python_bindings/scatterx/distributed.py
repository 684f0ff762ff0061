"""torch.distributed's collectives over MPI, for numpy arrays and torch CPU tensors.

The names, arguments and semantics are torch.distributed's, so torch's
example code runs after changing the import::

    import numpy as np
    import scatterx.distributed as dist      # instead of: import torch.distributed as dist

    dist.init_process_group("mpi")
    x = np.full(4, dist.get_rank(), np.float32)
    dist.all_reduce(x, op=dist.ReduceOp.SUM)   # in place: every rank holds 0 + 1 + ... + (ws - 1)

launched with ``mpirun -n 4 python script.py`` (as root add
``--allow-run-as-root``; more ranks than cores: ``--oversubscribe``).

- Arrays travel to the compiled layer through DLPack without copies, any
  strides; outputs are written in place. dtypes: float16, bfloat16 (torch),
  float32, float64, complex64, complex128, int8, uint8, int16, int32, int64,
  bool. Only CPU arrays.
- The GIL is released while a collective runs. ``async_op=True`` queues it on
  the communicator's progress thread and returns a :class:`Work`; the arrays
  must not be touched until ``wait()`` returned (the Work keeps them alive).
- Ranks: ``src`` of :func:`broadcast` is a global rank, as in torch
  (``group_src`` takes a group rank). A rank outside ``group`` gets ``None``
  back from a collective (and a warning), -1 from :func:`get_rank` and
  :func:`get_world_size`.
- ``group`` may also be an mpi4py communicator (anything with ``py2f()``).
- Errors: :class:`ValueError` (a local argument, e.g. a list of the wrong
  length), :class:`TypeError` (a dtype), :class:`MismatchError` (ranks
  disagree about split sizes, dtypes or shapes; raised on every rank),
  :class:`DistTimeoutError` (a :class:`TimeoutError`: a collective waited
  longer than the timeout; the group is unusable afterwards).
- Environment: ``SCATTERX_DIST_TIMEOUT`` (seconds, default 600) and
  ``SCATTERX_DIST_CHECKS=1`` (cross-rank checks of the dense collectives'
  arguments; the variable-split all-to-alls always check).
"""

from __future__ import annotations

import datetime
import enum
import sys
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _C
from ._ops import _is_torch, _raw, _writable

try:
    _dist = _C.dist
except AttributeError:
    raise ImportError(
        "scatterx.distributed: this scatterx was built without MPI (the extension has no _C.dist). "
        "Install an MPI implementation with its development files (e.g. Debian/Ubuntu: "
        "apt install openmpi-bin libopenmpi-dev) and rebuild: pip install --force-reinstall --no-cache-dir . "
        "(from the scatterx checkout; -Ccmake.define.SCATTERX_WITH_MPI=ON makes a missing MPI an error)"
    ) from None

__all__ = [
    "Backend", "DistError", "DistTimeoutError", "GroupMember", "MismatchError", "ProcessGroup", "ReduceOp", "Work",
    "all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all", "all_to_all_single", "all_to_all_v",
    "barrier", "broadcast", "destroy_process_group", "get_backend", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group", "is_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available", "new_group", "reduce_scatter",
    "reduce_scatter_tensor",
]

Array = Any  # numpy.ndarray or torch.Tensor (CPU)

DistError = _dist.DistError
MismatchError = _dist.MismatchError
DistTimeoutError = _dist.DistTimeoutError


# ---- reductions, backend --------------------------------------------------------------------------------


class ReduceOp(enum.Enum):
    """The reductions, as torch.distributed.ReduceOp: ``ReduceOp.SUM``, ``PRODUCT``, ``MIN``, ``MAX``, ``AVG``.

    MIN/MAX propagate NaN; AVG is the sum divided by the group size (integer
    dtypes round as scatter_reduce's mean); complex supports SUM, PRODUCT
    and AVG; bool supports SUM (or), PRODUCT (and), MIN and MAX. torch's
    bitwise BAND/BOR/BXOR and PREMUL_SUM are not provided.
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name}>"


_REDUCE_OPS = {
    ReduceOp.SUM: _dist.ReduceOp.Sum,
    ReduceOp.PRODUCT: _dist.ReduceOp.Prod,
    ReduceOp.MIN: _dist.ReduceOp.Min,
    ReduceOp.MAX: _dist.ReduceOp.Max,
    ReduceOp.AVG: _dist.ReduceOp.Avg,
}


def _reduce_op(op: Any, name: str) -> Any:
    if isinstance(op, _dist.ReduceOp):
        return op
    if isinstance(op, str):  # also "sum", "prod", ...
        op = ReduceOp.__members__.get({"PROD": "PRODUCT"}.get(op.upper(), op.upper()), op)
    if isinstance(op, ReduceOp):
        return _REDUCE_OPS[op]
    raise ValueError(f"{name}: expected op to be one of ReduceOp.SUM, PRODUCT, MIN, MAX, AVG, got {op!r}")


class Backend:
    """Backend names, as torch.distributed.Backend; scatterx has one: ``Backend.MPI == "mpi"``."""

    MPI = "mpi"
    UNDEFINED = "undefined"


def is_available() -> bool:
    """True: this scatterx was built with its distributed layer (else importing this module failed)."""
    return True


def is_mpi_available() -> bool:
    """True (the only backend)."""
    return True


def is_nccl_available() -> bool:
    """False: scatterx.distributed runs over MPI only."""
    return False


def is_gloo_available() -> bool:
    """False: scatterx.distributed runs over MPI only."""
    return False


# ---- process groups -------------------------------------------------------------------------------------


class ProcessGroup:
    """A group of ranks with its own MPI communicator (as torch's ProcessGroup: ``rank()``, ``size()``).

    Made by :func:`init_process_group` (the world), :func:`new_group`, or from
    an mpi4py communicator passed as ``group``.
    """

    def __init__(self, comm: Any, global_ranks: Sequence[int], desc: str = "") -> None:
        self._comm = comm
        self._ranks: List[int] = list(global_ranks)
        self._group_rank: Dict[int, int] = {g: i for i, g in enumerate(self._ranks)}
        self._desc = desc

    def rank(self) -> int:
        """This process's rank in the group."""
        return self._live_comm().rank()

    def size(self) -> int:
        """Number of ranks in the group."""
        return len(self._ranks)

    def name(self) -> str:
        return self._desc

    def _live_comm(self) -> Any:
        if self._comm is None:
            raise ValueError(f"process group {self._desc or 'group'} was destroyed (destroy_process_group)")
        return self._comm

    def __repr__(self) -> str:
        return f"ProcessGroup({self._desc}, ranks={self._ranks})"


class _WorldMeta(type):
    """Gives GroupMember.WORLD / group.WORLD: the default group (None before init_process_group)."""

    @property
    def WORLD(cls) -> Optional[ProcessGroup]:  # noqa: N802 (torch's name)
        return _state.world


class GroupMember(metaclass=_WorldMeta):
    """As torch's: ``GroupMember.WORLD`` is the default group, ``NON_GROUP_MEMBER`` what
    :func:`new_group` returns on ranks outside the new group."""

    NON_GROUP_MEMBER = -100


class group(metaclass=_WorldMeta):  # noqa: N801 (torch's name)
    """``group.WORLD``, as torch.distributed.group."""


GroupLike = Union[ProcessGroup, int, Any, None]  # ProcessGroup, NON_GROUP_MEMBER, an mpi4py communicator, None


class _State:
    def __init__(self) -> None:
        self.world: Optional[ProcessGroup] = None
        self.groups: List[ProcessGroup] = []
        self.timeout: Optional[float] = None
        # mpi4py communicators passed as group: id -> (the communicator, its handle, the group)
        self.foreign: Dict[int, Tuple[Any, int, ProcessGroup]] = {}
        self.group_count = 0


_state = _State()


def _seconds(timeout: Any, name: str) -> Optional[float]:
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"{name}: expected timeout to be a datetime.timedelta, got {type(timeout).__name__}")
    if not seconds > 0:
        raise ValueError(f"{name}: expected a positive timeout, got {timeout!r}")
    return seconds


def _check_backend(backend: Optional[str], name: str) -> None:
    if backend is None:
        return
    if not isinstance(backend, str) or backend.lower() not in ("mpi", "cpu:mpi"):
        raise ValueError(f"{name}: scatterx.distributed runs over MPI: expected backend 'mpi' (or None), "
                         f"got {backend!r}")


def is_initialized() -> bool:
    """True between :func:`init_process_group` and :func:`destroy_process_group`."""
    return _state.world is not None


def _default_group() -> ProcessGroup:
    if _state.world is None:
        raise ValueError("Default process group has not been initialized, "
                         "please make sure to call init_process_group.")
    return _state.world


def init_process_group(
    backend: Optional[str] = None,
    init_method: Optional[str] = None,
    timeout: Optional[datetime.timedelta] = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Initializes the default group: every process of ``MPI_COMM_WORLD`` (collective).

    Initializes MPI (MPI_THREAD_MULTIPLE) unless the application (e.g.
    mpi4py) already did. ``backend`` must be ``"mpi"`` or None. The launcher
    (mpirun) does the rendezvous, so ``init_method`` and ``store`` are not
    used; ``world_size`` and ``rank``, when given, must be MPI's. ``timeout``
    (a timedelta) bounds every collective of the default group and of groups
    made later without their own timeout (default: ``SCATTERX_DIST_TIMEOUT``
    seconds, else 600). ``group_name``, ``pg_options`` and ``device_id`` are
    accepted for torch compatibility and ignored.
    """
    del init_method, store, pg_options, device_id
    if _state.world is not None:
        raise ValueError("trying to initialize the default process group twice!")
    _check_backend(backend, "init_process_group")
    seconds = _seconds(timeout, "init_process_group")
    comm = _dist.Communicator.world()
    if world_size not in (-1, None) and world_size != comm.size():
        raise ValueError(f"init_process_group: world_size={world_size} but MPI runs {comm.size()} processes "
                         "(scatterx takes the world from the MPI launcher)")
    if rank not in (-1, None) and rank != comm.rank():
        raise ValueError(f"init_process_group: rank={rank} but this process is MPI rank {comm.rank()}")
    if seconds is not None:
        comm.set_timeout(seconds)
    _state.timeout = seconds
    _state.world = ProcessGroup(comm, range(comm.size()), group_name or "WORLD")


def destroy_process_group(group: Optional[ProcessGroup] = None) -> None:
    """Frees ``group``'s communicator; with None, every group and the default group (then
    :func:`is_initialized` is False again and :func:`init_process_group` may be called anew)."""
    if group is None or group is _state.world:
        for pg in [_state.world, *_state.groups, *(entry[2] for entry in _state.foreign.values())]:
            if pg is not None:
                pg._comm = None
        _state.world, _state.groups, _state.foreign, _state.timeout = None, [], {}, None
        return
    if group == GroupMember.NON_GROUP_MEMBER:
        return
    if not isinstance(group, ProcessGroup):
        pg = _foreign_group(group)
        if pg is None:
            return
        _state.foreign = {k: v for k, v in _state.foreign.items() if v[2] is not pg}
        group = pg
    group._comm = None
    _state.groups = [g for g in _state.groups if g is not group]


def _foreign_group(comm: Any) -> Optional[ProcessGroup]:
    """The group of an mpi4py communicator (made once per communicator; collective the first time)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and comm == mpi.COMM_NULL:
        return None  # this rank is not in it
    handle = int(comm.py2f())
    cached = _state.foreign.get(id(comm))
    if cached is not None and cached[0] is comm and cached[1] == handle and cached[2]._comm is not None:
        return cached[2]
    world = _default_group()
    dup = _dist.Communicator.from_fortran_handle(handle)
    if _state.timeout is not None:
        dup.set_timeout(_state.timeout)
    # The group's members as global ranks, in group-rank order.
    ranks = np.zeros(dup.size(), np.int64)
    _dist.all_gather_into_tensor(ranks, np.array([world.rank()], np.int64), dup)
    pg = ProcessGroup(dup, [int(r) for r in ranks], f"mpi4py:{type(comm).__name__}")
    _state.foreign[id(comm)] = (comm, handle, pg)  # holds comm, so that its id is not reused
    return pg


def _resolve(group: GroupLike) -> Optional[ProcessGroup]:
    """The ProcessGroup ``group`` means, or None when this rank is not a member."""
    if group is None:
        return _default_group()
    if isinstance(group, ProcessGroup):
        return group
    if isinstance(group, int) and not isinstance(group, bool) and group == GroupMember.NON_GROUP_MEMBER:
        _default_group()
        return None
    if hasattr(group, "py2f"):
        return _foreign_group(group)
    raise TypeError(f"expected group to be a ProcessGroup, GroupMember.NON_GROUP_MEMBER, an mpi4py communicator or "
                    f"None, got {type(group).__name__}")


def _member(group: GroupLike, op: str) -> Optional[ProcessGroup]:
    """``group``'s ProcessGroup, or None (with torch's warning) when this rank is not a member."""
    pg = _resolve(group)
    if pg is None:
        world = _state.world
        warnings.warn(f"Running {op} on global rank {-1 if world is None else world.rank()} which does not "
                      "belong to the given group.", stacklevel=3)
    return pg


def new_group(
    ranks: Optional[Sequence[int]] = None,
    timeout: Optional[datetime.timedelta] = None,
    backend: Optional[str] = None,
    pg_options: Any = None,
    use_local_synchronization: bool = False,
    group_desc: Optional[str] = None,
    device_id: Any = None,
) -> Union[ProcessGroup, int]:
    """A group of the global ``ranks`` (None: all), collective over the default group:
    every rank calls it, members or not, with the same ranks.

    Group ranks follow the sorted global ranks. On a rank outside ``ranks``
    it returns ``GroupMember.NON_GROUP_MEMBER``. ``timeout`` defaults to
    init_process_group's. ``use_local_synchronization`` is not supported
    (the split is collective over the world).
    """
    del pg_options, device_id
    world = _default_group()
    _check_backend(backend, "new_group")
    if use_local_synchronization:
        raise ValueError("new_group: use_local_synchronization=True is not supported (every rank calls new_group)")
    seconds = _seconds(timeout, "new_group")
    ws = world.size()
    if ranks is None:
        members = list(range(ws))
    else:
        members = sorted(int(r) for r in ranks)
        for r in members:
            if not 0 <= r < ws:
                raise ValueError(f"new_group: the new group's rank {r} should be within the world size {ws}")
        if len(set(members)) != len(members):
            raise ValueError(f"new_group: expected distinct ranks, got {list(ranks)}")
    me = world.rank()
    member = me in members
    comm = world._live_comm().split(0 if member else -1, me)
    _state.group_count += 1
    if not member:
        return GroupMember.NON_GROUP_MEMBER
    seconds = seconds if seconds is not None else _state.timeout
    if seconds is not None:
        comm.set_timeout(seconds)
    pg = ProcessGroup(comm, members, group_desc or f"group{_state.group_count}")
    _state.groups.append(pg)
    return pg


def get_rank(group: GroupLike = None) -> int:
    """This process's rank in ``group`` (default: the world); -1 if it is not a member."""
    pg = _resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group: GroupLike = None) -> int:
    """The number of ranks in ``group`` (default: the world); -1 if this process is not a member."""
    pg = _resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group: GroupLike = None) -> str:
    """``"mpi"``."""
    if _resolve(group) is None:
        raise ValueError("Invalid process group specified")
    return Backend.MPI


def get_process_group_ranks(group: GroupLike) -> List[int]:
    """The global ranks of ``group``'s members, in group-rank order."""
    pg = _resolve(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return list(pg._ranks)


def get_group_rank(group: GroupLike, global_rank: int) -> int:
    """The rank in ``group`` of global rank ``global_rank``; ValueError if it is not a member."""
    pg = _resolve(group)
    if pg is None or global_rank not in pg._group_rank:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return pg._group_rank[global_rank]


def get_global_rank(group: GroupLike, group_rank: int) -> int:
    """The global rank of ``group``'s rank ``group_rank``."""
    pg = _resolve(group)
    if pg is None or not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return pg._ranks[group_rank]


# ---- async handles --------------------------------------------------------------------------------------


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
                    raise DistTimeoutError(f"Work.wait: the collective did not finish within {seconds} s")
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

    def result(self) -> List[Array]:
        """The collective's output arrays (after :meth:`wait`)."""
        return list(self._outputs)


def _finish(work: Any, async_op: bool, outputs: Sequence[Array]) -> Optional[Work]:
    return Work(work, outputs) if async_op else None


def _list(xs: Any, op: str, name: str, writable: bool) -> List[Array]:
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: expected {name} to be a list of arrays, got {type(xs).__name__}")
    conv = _writable if writable else _raw
    return [conv(x, op, f"{name}[{i}]") for i, x in enumerate(xs)]


def _splits(sizes: Any, op: str, name: str) -> List[int]:
    if sizes is None:
        return []
    if _is_torch(sizes) or isinstance(sizes, np.ndarray):
        sizes = sizes.tolist()
    try:
        return [int(s) for s in sizes]
    except TypeError:
        raise TypeError(f"{op}: expected {name} to be a list of ints, got {type(sizes).__name__}") from None


# ---- collectives ----------------------------------------------------------------------------------------



def _run(fn: str, args: tuple, keep: Sequence[Array], async_op: bool) -> Optional[Work]:
    """Calls the extension's collective ``fn``: at once, or as ``fn_async`` whose
    Work holds ``keep`` (the caller's arrays) alive until it completes."""
    if async_op:
        return Work(getattr(_dist, fn + "_async")(*args), keep)
    getattr(_dist, fn)(*args)
    return None

def barrier(group: GroupLike = None, async_op: bool = False, device_ids: Any = None) -> Optional[Work]:
    """Returns once every rank of ``group`` has entered it."""
    del device_ids
    pg = _member(group, "barrier")
    if pg is None:
        return None
    comm = pg._live_comm()
    token = np.zeros(1, np.int64)
    return _run("all_reduce", (token, _dist.ReduceOp.Sum, comm), (), async_op)


def all_reduce(tensor: Array, op: Any = ReduceOp.SUM, group: GroupLike = None,
               async_op: bool = False) -> Optional[Work]:
    """``tensor`` = op over the ranks of their ``tensor`` (in place)."""
    name = "all_reduce"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    t = _writable(tensor, name, "tensor")
    rop = _reduce_op(op, name)
    return _run("all_reduce", (t, rop, comm), [tensor], async_op)


def broadcast(tensor: Array, src: Optional[int] = None, group: GroupLike = None, async_op: bool = False,
              group_src: Optional[int] = None) -> Optional[Work]:
    """``tensor`` = the tensor of global rank ``src`` (or of ``group_src``, a rank in ``group``)."""
    name = "broadcast"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    if (src is None) == (group_src is None):
        raise ValueError(f"{name}: expected exactly one of src (a global rank) and group_src, got "
                         f"src={src!r}, group_src={group_src!r}")
    if group_src is None:
        if src not in pg._group_rank:
            raise ValueError(f"Global rank {src} is not part of group {pg}")
        root = pg._group_rank[int(src)]
    else:
        root = int(group_src)
    t = _writable(tensor, name, "tensor")
    return _run("broadcast", (t, root, comm), [tensor], async_op)


def all_gather(tensor_list: List[Array], tensor: Array, group: GroupLike = None,
               async_op: bool = False) -> Optional[Work]:
    """``tensor_list[i]`` = rank i's ``tensor``; one array per rank of ``group``, each of tensor's shape."""
    name = "all_gather"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    outs = _list(tensor_list, name, "tensor_list", True)
    t = _raw(tensor, name, "tensor")
    return _run("all_gather", (outs, t, comm), tensor_list, async_op)


def all_gather_into_tensor(output_tensor: Array, input_tensor: Array, group: GroupLike = None,
                           async_op: bool = False) -> Optional[Work]:
    """``output_tensor`` = the ranks' ``input_tensor`` concatenated along dim 0 (``[ws * n, ...]``)
    or stacked (``[ws, n, ...]``)."""
    name = "all_gather_into_tensor"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    out = _writable(output_tensor, name, "output_tensor")
    inp = _raw(input_tensor, name, "input_tensor")
    return _run("all_gather_into_tensor", (out, inp, comm), [output_tensor], async_op)


def reduce_scatter(output: Array, input_list: List[Array], op: Any = ReduceOp.SUM, group: GroupLike = None,
                   async_op: bool = False) -> Optional[Work]:
    """``output`` = op over ranks r of rank r's ``input_list[rank]``; one input per rank, each of output's shape."""
    name = "reduce_scatter"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    out = _writable(output, name, "output")
    ins = _list(input_list, name, "input_list", False)
    rop = _reduce_op(op, name)
    return _run("reduce_scatter", (out, ins, rop, comm), [output], async_op)


def reduce_scatter_tensor(output: Array, input: Array, op: Any = ReduceOp.SUM, group: GroupLike = None,
                          async_op: bool = False) -> Optional[Work]:
    """``output`` = op over ranks of their block ``rank`` of ``input`` (``[ws * n, ...]`` or ``[ws, n, ...]``)."""
    name = "reduce_scatter_tensor"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    out = _writable(output, name, "output")
    inp = _raw(input, name, "input")
    rop = _reduce_op(op, name)
    return _run("reduce_scatter_tensor", (out, inp, rop, comm), [output], async_op)


def all_to_all(output_tensor_list: List[Array], input_tensor_list: List[Array], group: GroupLike = None,
               async_op: bool = False) -> Optional[Work]:
    """``output_tensor_list[i]`` = rank i's ``input_tensor_list[rank]``; one array per rank in each list."""
    name = "all_to_all"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    outs = _list(output_tensor_list, name, "output_tensor_list", True)
    ins = _list(input_tensor_list, name, "input_tensor_list", False)
    return _run("all_to_all", (outs, ins, comm), output_tensor_list, async_op)


def all_to_all_single(output: Array, input: Array, output_split_sizes: Optional[List[int]] = None,
                      input_split_sizes: Optional[List[int]] = None, group: GroupLike = None,
                      async_op: bool = False) -> Optional[Work]:
    """Rows (dim 0) of ``input`` go to the ranks in order, ``input_split_sizes[i]`` to rank i; ``output``
    receives ``output_split_sizes[i]`` rows from rank i. None means equal splits (dim 0 divisible by the
    group size). Splits that disagree across ranks raise :class:`MismatchError` on every rank."""
    name = "all_to_all_single"
    pg = _member(group, name)
    if pg is None:
        return None
    comm = pg._live_comm()
    out = _writable(output, name, "output")
    inp = _raw(input, name, "input")
    osplits = _splits(output_split_sizes, name, "output_split_sizes")
    isplits = _splits(input_split_sizes, name, "input_split_sizes")
    return _run("all_to_all_single", (out, inp, osplits, isplits, comm), [output], async_op)


def all_to_all_v(input: Array, send_splits: Sequence[int], group: GroupLike = None) -> Tuple[Array, List[int]]:
    """all_to_all_single that works out the receive splits: ``send_splits[i]`` rows of ``input`` go to
    rank i. Returns ``(output, recv_splits)``: the received rows in rank order (a new array of input's
    kind, numpy or torch) and how many rows came from each rank. Not in torch.distributed.

    Raises ValueError on a rank outside ``group``.
    """
    name = "all_to_all_v"
    pg = _resolve(group)
    if pg is None:
        raise ValueError(f"{name}: this rank is not a member of the group")
    inp = _raw(input, name, "input")
    splits = _splits(send_splits, name, "send_splits")
    framework = _C.Framework.Torch if _is_torch(input) else _C.Framework.NumPy
    output, recv_splits = _dist.all_to_all_v(inp, splits, pg._live_comm(), framework)
    return output, list(recv_splits)

"""scatterx.distributed's process groups: initialization, groups and ranks, reductions, errors.

The collectives are in ``_collectives.py``; ``scatterx.distributed`` re-exports both.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import os
import sys
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _C

try:
    _dist = _C.dist
except AttributeError:
    raise ImportError(
        "scatterx.distributed: this scatterx was built without MPI (the extension has no _C.dist). "
        "Install an MPI implementation with its development files (e.g. Debian/Ubuntu: "
        "apt install openmpi-bin libopenmpi-dev) and rebuild: pip install --force-reinstall --no-cache-dir . "
        "(from the scatterx checkout; -Ccmake.define.SCATTERX_WITH_MPI=ON makes a missing MPI an error)"
    ) from None

Array = Any  # numpy.ndarray, torch.Tensor (CPU, or CUDA in a CUDA build) or a CuPy array (CUDA build)

DistError = _dist.DistError
MismatchError = _dist.MismatchError
DistTimeoutError = _dist.DistTimeoutError
# torch raises DistBackendError where a backend fails a collective (an NCCL error, a watchdog timeout); here
# that is any DistError (MismatchError, DistTimeoutError), so ``except DistBackendError`` written for torch
# catches them.
DistBackendError = DistError


# ---- reductions, backend --------------------------------------------------------------------------------


class ReduceOp(enum.Enum):
    """The reductions, as torch.distributed.ReduceOp: ``SUM``, ``PRODUCT``, ``MIN``, ``MAX``, ``AVG``,
    ``BAND``, ``BOR``, ``BXOR`` and ``PREMUL_SUM``.

    MIN/MAX propagate NaN; AVG is the sum divided by the group size (integer
    dtypes round as scatter_reduce's mean); complex supports SUM, PRODUCT
    and AVG; bool supports SUM (or), PRODUCT (and), MIN and MAX. BAND, BOR
    and BXOR (bitwise and, or, xor) take integer and bool dtypes.
    PREMUL_SUM comes with its factor from :func:`_make_nccl_premul_sum`:
    each rank's input times that rank's factor, summed (floating and
    complex dtypes; the bare member raises).
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name}>"


class _PremulSum:
    """ReduceOp.PREMUL_SUM with its factor, as torch's ``_make_nccl_premul_sum`` returns it."""

    __slots__ = ("factor",)

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __eq__(self, other: Any) -> bool:  # as torch's: equal to the bare member, whatever the factor
        return other is ReduceOp.PREMUL_SUM or isinstance(other, _PremulSum)

    def __hash__(self) -> int:
        return hash(ReduceOp.PREMUL_SUM)

    def __repr__(self) -> str:
        return f"<ReduceOp.PREMUL_SUM factor={self.factor!r}>"


def _make_nccl_premul_sum(factor: Any) -> _PremulSum:
    """:torch_dist:`_make_nccl_premul_sum`: reduceOp.PREMUL_SUM carrying ``factor`` (a real number, or a one-element
    tensor or array): the reductions that take it (all_reduce, reduce, reduce_scatter, reduce_scatter_tensor)
    multiply this rank's input by ``factor``, then sum over the ranks. Each rank passes its own factor, as with
    NCCL."""
    try:
        if isinstance(factor, complex) or getattr(getattr(factor, "dtype", None), "kind", "") == "c":
            raise TypeError
        if hasattr(factor, "is_complex") and factor.is_complex():
            raise TypeError
        value = float(factor.item() if hasattr(factor, "item") else factor)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"_make_nccl_premul_sum: expected factor to be a real number or a one-element tensor, "
                        f"got {factor!r}") from None
    return _PremulSum(value)


def _premul_factor(op: Any, name: str, arrays: Sequence[Any]) -> Optional[float]:
    """PREMUL_SUM's factor when ``op`` is one (after checking ``arrays`` are floating or complex), else None."""
    if op is ReduceOp.PREMUL_SUM or (isinstance(op, str) and op.upper() == "PREMUL_SUM"):
        raise ValueError(f"{name}: expected ReduceOp.PREMUL_SUM with its factor, from _make_nccl_premul_sum(factor), "
                         "got the bare member")
    if not isinstance(op, _PremulSum):
        return None
    for x in arrays:
        dtype = x.dtype
        floating = (dtype.is_floating_point or dtype.is_complex) if hasattr(dtype, "is_floating_point") \
            else np.dtype(dtype).kind in "fc"
        if not floating:
            raise TypeError(f"{name}: ReduceOp.PREMUL_SUM expected a floating or complex dtype, got {dtype}")
    return op.factor


# ReduceOp -> the compiled enum, matched by torch's spelling over the compiled list (dist/dist.h's
# SCATTERX_FORALL_DIST_REDUCE_OPS): a reduction only one side has fails here, at import. PREMUL_SUM is
# this layer's: a scaled copy of the input, summed.
_REDUCE_OPS = {ReduceOp(_dist.reduce_op_name(op)): op for op in _dist.ReduceOp}
assert set(_REDUCE_OPS) == set(ReduceOp) - {ReduceOp.PREMUL_SUM}, "ReduceOp and dist/dist.h list different reductions"


def _reduce_op_member(op: Any) -> Any:
    """A reduction's name ("SUM", "sum", "prod", ...) as its ReduceOp member; anything else as it is."""
    if isinstance(op, str):
        return ReduceOp.__members__.get({"PROD": "PRODUCT"}.get(op.upper(), op.upper()), op)
    return op


def _reduce_op(op: Any, name: str) -> Any:
    if isinstance(op, _dist.ReduceOp):
        return op
    op = _reduce_op_member(op)
    if op is ReduceOp.PREMUL_SUM or isinstance(op, _PremulSum):
        raise ValueError(f"{name}: expected op to be a reduction without a factor (PREMUL_SUM is taken by "
                         "all_reduce, reduce, reduce_scatter and reduce_scatter_tensor; here scale the input and "
                         f"use SUM), got {op!r}")
    if isinstance(op, ReduceOp):
        return _REDUCE_OPS[op]
    raise ValueError(f"{name}: expected op to be one of ReduceOp.{', '.join(ReduceOp.__members__)}, got {op!r}")


def supports_complex(reduceOp: Any) -> bool:  # noqa: N803 (torch's argument name)
    """:torch_dist:`supports_complex`: whether ``reduceOp`` takes complex dtypes: SUM, AVG, PREMUL_SUM and, unlike
    torch (which refuses it), PRODUCT; not MIN and MAX (complex numbers have no order) or the bitwise ops."""
    if isinstance(reduceOp, _PremulSum):
        return True
    op = _reduce_op_member(reduceOp)
    if not isinstance(op, ReduceOp):
        raise ValueError(f"supports_complex: expected reduceOp to be one of ReduceOp."
                         f"{', ReduceOp.'.join(ReduceOp.__members__)}, got {reduceOp!r}")
    return op not in (ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)


class Backend:
    """Backend names, as torch.distributed.Backend. scatterx runs every group over MPI (``Backend.MPI ==
    "mpi"``); torch's other names are accepted where a backend is named, with a warning, so that code written
    for gloo or NCCL runs unchanged."""

    MPI = "mpi"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    XCCL = "xccl"
    UNDEFINED = "undefined"


def is_available() -> bool:
    """:torch_dist:`is_available`: True: this scatterx was built with its distributed layer (else importing this
    module failed)."""
    return True


def is_mpi_available() -> bool:
    """:torch_dist:`is_mpi_available`: True (the only backend)."""
    return True


def is_nccl_available() -> bool:
    """:torch_dist:`is_nccl_available`: False: scatterx.distributed runs over MPI only."""
    return False


def is_gloo_available() -> bool:
    """:torch_dist:`is_gloo_available`: False: scatterx.distributed runs over MPI only."""
    return False


def is_ucc_available() -> bool:
    """:torch_dist:`is_ucc_available`: False: scatterx.distributed runs over MPI only."""
    return False


def is_xccl_available() -> bool:
    """:torch_dist:`is_xccl_available`: False: scatterx.distributed runs over MPI only."""
    return False


def is_backend_available(backend: str) -> bool:
    """:torch_dist:`is_backend_available`: True for the torch backend names scatterx serves (every one, over MPI:
    ``"mpi"``, ``"gloo"``, ``"nccl"``, ``"ucc"``, ``"xccl"``), False for any other name."""
    return isinstance(backend, str) and backend.lower() in _TORCH_BACKENDS


def get_default_backend_for_device(device: Any) -> str:
    """:torch_dist:`get_default_backend_for_device`: ``"mpi"``, for every device (the CPU and, in a CUDA build,
    CUDA)."""
    del device
    return Backend.MPI


def is_torchelastic_launched() -> bool:
    """:torch_dist:`is_torchelastic_launched`: whether torchelastic (torchrun) started this process, by its
    ``TORCHELASTIC_RUN_ID`` variable, as torch decides (scatterx itself runs under an MPI launcher)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


class DebugLevel(enum.Enum):
    """torch.distributed.DebugLevel: ``OFF``, ``INFO``, ``DETAIL``. At ``DETAIL`` every group checks the dense
    collectives' arguments across ranks before moving data (scatterx's ``checks``), which is what torch's DETAIL
    level adds for collectives: a disagreement raises MismatchError on every rank."""

    OFF = "OFF"
    INFO = "INFO"
    DETAIL = "DETAIL"


def _debug_level_from_env() -> DebugLevel:
    value = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").strip().upper() or "OFF"
    if value not in DebugLevel.__members__:
        raise ValueError(f"TORCH_DISTRIBUTED_DEBUG: expected one of {', '.join(DebugLevel.__members__)}, got "
                         f"{os.environ['TORCH_DISTRIBUTED_DEBUG']!r}")
    return DebugLevel[value]


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
        return self._live_comm("ProcessGroup.rank").rank()

    def size(self) -> int:
        """Number of ranks in the group."""
        return len(self._ranks)

    def name(self) -> str:
        return self._desc

    def _live_comm(self, op: str) -> Any:
        """The group's communicator, for ``op``; ValueError once the group was destroyed."""
        if self._comm is None:
            raise ValueError(f"{op}: expected a live process group, got {self._desc or 'group'}, destroyed by "
                             "destroy_process_group")
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


@dataclasses.dataclass(frozen=True)
class Options:
    """A group's settings, given as ``pg_options`` to :func:`init_process_group` or :func:`new_group`
    (as torch's backend options objects). A field left None takes its environment variable's value
    for the world, the default group's for :func:`new_group`. ``checks``, ``chunk_bytes`` and
    ``shared_memory`` must be the same on every rank (a disagreement raises MismatchError on all).

    - ``checks``: cross-rank checks of the dense collectives' arguments (``SCATTERX_DIST_CHECKS``, off).
    - ``chunk_bytes``: the rings' pipelining chunk in bytes (``SCATTERX_DIST_CHUNK_BYTES``, 512 KiB).
    - ``shared_memory``: reduce-scatter through shared memory when every rank is on one host
      (``SCATTERX_DIST_SHM``, on).
    """

    checks: Optional[bool] = None
    chunk_bytes: Optional[int] = None
    shared_memory: Optional[bool] = None


def _option_kwargs(pg_options: Any, name: str) -> Dict[str, Any]:
    if pg_options is None:
        return {}
    if not isinstance(pg_options, Options):
        raise TypeError(f"{name}: expected pg_options to be a scatterx.distributed.Options or None, "
                        f"got {type(pg_options).__name__}")
    return {k: v for k, v in dataclasses.asdict(pg_options).items() if v is not None}


class _State:
    def __init__(self) -> None:
        self.world: Optional[ProcessGroup] = None
        self.groups: List[ProcessGroup] = []
        self.timeout: Optional[float] = None
        # mpi4py communicators passed as group: id -> (the communicator, its handle, the group)
        self.foreign: Dict[int, Tuple[Any, int, ProcessGroup]] = {}
        self.group_count = 0
        self.debug_level: Optional[DebugLevel] = None  # None: TORCH_DISTRIBUTED_DEBUG's, read when first needed


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


_TORCH_BACKENDS = (Backend.MPI, Backend.GLOO, Backend.NCCL, Backend.UCC, Backend.XCCL)


def _check_backend(backend: Optional[str], name: str) -> None:
    """A torch backend string ("mpi", "gloo", "nccl", ... or per device, "cpu:gloo,cuda:nccl") is served by
    MPI: anything but "mpi" gets a warning; a name torch does not have is an error."""
    if backend is None:
        return
    names = []
    if isinstance(backend, str):
        for part in backend.lower().split(","):
            names.append(part.split(":", 1)[1] if ":" in part else part)
    if not names or any(n.strip() not in _TORCH_BACKENDS for n in names):
        raise ValueError(f"{name}: expected backend to be None or a torch backend name ("
                         f"{', '.join(repr(b) for b in _TORCH_BACKENDS)}, or per device as 'cpu:gloo,cuda:nccl'; "
                         f"scatterx.distributed serves each with MPI), got {backend!r}")
    if any(n.strip() != Backend.MPI for n in names):
        warnings.warn(f"{name}: backend {backend!r} is served by MPI (scatterx.distributed runs every group over "
                      "MPI); pass 'mpi' or None to silence this", UserWarning, stacklevel=3)


def is_initialized() -> bool:
    """:torch_dist:`is_initialized`: True between :func:`init_process_group` and :func:`destroy_process_group`."""
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
    mpi4py) already did. ``backend``: None or ``"mpi"``; torch's other names
    (``"gloo"``, ``"nccl"``, ``"cpu:gloo,cuda:nccl"``, ...) are served by MPI
    too, with a warning. The launcher
    (mpirun) does the rendezvous, so ``init_method`` and ``store`` are not
    used; ``world_size`` and ``rank``, when given, must be MPI's. ``timeout``
    (a timedelta) bounds every collective of the default group and of groups
    made later without their own timeout (default: ``SCATTERX_DIST_TIMEOUT``
    seconds, else 600). ``pg_options`` (an :class:`Options`) sets the other
    settings. ``group_name`` and ``device_id`` are accepted for torch
    compatibility and ignored.
    """
    del init_method, store, device_id
    if _state.world is not None:
        raise ValueError("trying to initialize the default process group twice!")
    _check_backend(backend, "init_process_group")
    seconds = _seconds(timeout, "init_process_group")
    settings = _option_kwargs(pg_options, "init_process_group")
    if "checks" not in settings and "SCATTERX_DIST_CHECKS" not in os.environ and get_debug_level() is DebugLevel.DETAIL:
        settings["checks"] = True  # TORCH_DISTRIBUTED_DEBUG=DETAIL or set_debug_level(DETAIL); new groups inherit it
    comm = _dist.Communicator.world(timeout=seconds, **settings)
    if world_size not in (-1, None) and world_size != comm.size():
        raise ValueError(f"init_process_group: expected world_size to be -1 or MPI's {comm.size()} processes "
                         f"(scatterx takes the world from the MPI launcher), got {world_size}")
    if rank not in (-1, None) and rank != comm.rank():
        raise ValueError(f"init_process_group: expected rank to be -1 or this process's MPI rank {comm.rank()}, "
                         f"got {rank}")
    _state.timeout = seconds
    _state.world = ProcessGroup(comm, range(comm.size()), group_name or "WORLD")


def destroy_process_group(group: Optional[ProcessGroup] = None) -> None:
    """:torch_dist:`destroy_process_group`: frees ``group``'s communicator; with None, every group and the default
    group (then :func:`is_initialized` is False again and :func:`init_process_group` may be called anew)."""
    if group is None or group is _state.world:
        for pg in [_state.world, *_state.groups, *(entry[2] for entry in _state.foreign.values())]:
            if pg is not None:
                pg._comm = None
        _state.world, _state.groups, _state.foreign, _state.timeout = None, [], {}, None
        _state.group_count = 0
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
    # The default group's settings (the timeout: init_process_group's, or the environment's).
    settings = world._live_comm("group").options()
    del settings["timeout"]
    dup = _dist.Communicator.from_fortran_handle(handle, timeout=_state.timeout, **settings)
    # The group's members as global ranks, in group-rank order.
    ranks = np.zeros(dup.size(), np.int64)
    _dist.all_gather_into_tensor(ranks, np.array([world.rank()], np.int64), dup)
    pg = ProcessGroup(dup, [int(r) for r in ranks], f"mpi4py:{type(comm).__name__}")
    _state.foreign[id(comm)] = (comm, handle, pg)  # holds comm, so that its id is not reused
    return pg


def _resolve(group: GroupLike, op: str) -> Optional[ProcessGroup]:
    """The ProcessGroup ``group`` (an argument of ``op``) means, or None when this rank is not a member."""
    if group is None:
        return _default_group()
    if isinstance(group, ProcessGroup):
        return group
    if isinstance(group, int) and not isinstance(group, bool) and group == GroupMember.NON_GROUP_MEMBER:
        _default_group()
        return None
    if hasattr(group, "py2f"):
        return _foreign_group(group)
    raise TypeError(f"{op}: expected group to be a ProcessGroup, GroupMember.NON_GROUP_MEMBER, an mpi4py "
                    f"communicator or None, got {type(group).__name__}")


def new_group(
    ranks: Optional[Sequence[int]] = None,
    timeout: Optional[datetime.timedelta] = None,
    backend: Optional[str] = None,
    pg_options: Any = None,
    use_local_synchronization: bool = False,
    group_desc: Optional[str] = None,
    device_id: Any = None,
) -> Union[ProcessGroup, int]:
    """:torch_dist:`new_group`: a group of the global ``ranks`` (None: all), collective over the default group:
    every rank calls it, members or not, with the same ranks.

    Group ranks follow the sorted global ranks. On a rank outside ``ranks``
    it returns ``GroupMember.NON_GROUP_MEMBER``. ``timeout`` defaults to
    init_process_group's, and ``pg_options`` (an :class:`Options`) the
    default group's settings. ``use_local_synchronization`` is not supported
    (the split is collective over the world).
    """
    del device_id
    world = _default_group()
    _check_backend(backend, "new_group")
    if use_local_synchronization:
        raise ValueError("new_group: expected use_local_synchronization=False (every rank calls new_group), got True")
    seconds = _seconds(timeout, "new_group")
    settings = _option_kwargs(pg_options, "new_group")
    ws = world.size()
    if ranks is None:
        members = list(range(ws))
    else:
        members = sorted(int(r) for r in ranks)
        for r in members:
            if not 0 <= r < ws:
                raise ValueError(f"new_group: expected ranks within the world size {ws}, got rank {r}")
        if len(set(members)) != len(members):
            raise ValueError(f"new_group: expected distinct ranks, got {list(ranks)}")
    me = world.rank()
    member = me in members
    return _split_off(world, "new_group", 0 if member else -1, me, members, seconds, settings, group_desc)


def _split_off(parent: ProcessGroup, op: str, color: int, key: int, members: Sequence[int],
               seconds: Optional[float], settings: Dict[str, Any], group_desc: Optional[str]) -> Union[ProcessGroup, int]:
    """The group of this rank's ``color`` split off ``parent`` (collective over it): its global ``members`` in
    group-rank order (``key`` orders the ranks), or NON_GROUP_MEMBER for color -1. Timeout: ``seconds``, else
    init_process_group's; the other settings: ``settings``, else the parent's."""
    comm = parent._live_comm(op).split(color, key, timeout=seconds if seconds is not None else _state.timeout,
                                       **settings)
    _state.group_count += 1
    if color < 0:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, members, group_desc or f"group{_state.group_count}")
    _state.groups.append(pg)
    return pg


def get_rank(group: GroupLike = None) -> int:
    """:torch_dist:`get_rank`: this process's rank in ``group`` (default: the world); -1 if it is not a member."""
    pg = _resolve(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group: GroupLike = None) -> int:
    """:torch_dist:`get_world_size`: the number of ranks in ``group`` (default: the world); -1 if this process is
    not a member."""
    pg = _resolve(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group: GroupLike = None) -> str:
    """:torch_dist:`get_backend`: ``"mpi"``."""
    if _resolve(group, "get_backend") is None:
        raise ValueError("Invalid process group specified")
    return Backend.MPI


def get_process_group_ranks(group: GroupLike) -> List[int]:
    """:torch_dist:`get_process_group_ranks`: the global ranks of ``group``'s members, in group-rank order."""
    pg = _resolve(group, "get_process_group_ranks")
    if pg is None:
        raise ValueError("Invalid process group specified")
    return list(pg._ranks)


def get_group_rank(group: GroupLike, global_rank: int) -> int:
    """:torch_dist:`get_group_rank`: the rank in ``group`` of global rank ``global_rank``; ValueError if it is not a
    member."""
    pg = _resolve(group, "get_group_rank")
    if pg is None or global_rank not in pg._group_rank:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return pg._group_rank[global_rank]


def get_global_rank(group: GroupLike, group_rank: int) -> int:
    """:torch_dist:`get_global_rank`: the global rank of ``group``'s rank ``group_rank``."""
    pg = _resolve(group, "get_global_rank")
    if pg is None or not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return pg._ranks[group_rank]


def set_timeout(timeout: datetime.timedelta, group: GroupLike = None) -> None:
    """:torch_dist:`set_timeout`: the seconds every later operation of ``group`` (default: the world) may wait for
    its peers before raising DistTimeoutError. Each rank sets its own (the timeout need not agree)."""
    pg = _resolve(group, "set_timeout")
    if pg is None:
        raise ValueError("set_timeout: expected a group this rank is a member of, got a non-member's group")
    seconds = _seconds(timeout, "set_timeout")
    if seconds is None:
        raise TypeError("set_timeout: expected timeout to be a datetime.timedelta, got None")
    pg._live_comm("set_timeout").set_timeout(seconds)


def get_pg_count() -> int:
    """:torch_dist:`get_pg_count`: the process groups made since :func:`init_process_group` (the default group and
    every :func:`new_group` call, on members and non-members alike), 0 before it."""
    return 0 if _state.world is None else 1 + _state.group_count


def get_debug_level() -> DebugLevel:
    """:torch_dist:`get_debug_level`: the level :func:`set_debug_level` set, else ``TORCH_DISTRIBUTED_DEBUG``'s
    (``OFF`` when unset)."""
    if _state.debug_level is None:
        _state.debug_level = _debug_level_from_env()
    return _state.debug_level


def set_debug_level(level: DebugLevel) -> None:
    """:torch_dist:`set_debug_level`: at ``DETAIL`` the cross-rank argument checks go on in every live group and in
    the groups made later; at ``OFF`` or ``INFO`` they go off (the last call wins over each group's
    ``Options(checks=...)``). Each rank sets its own: call it on every rank alike."""
    if not isinstance(level, DebugLevel):
        raise TypeError(f"set_debug_level: expected a DebugLevel, got {type(level).__name__}")
    _state.debug_level = level
    for pg in [_state.world, *_state.groups]:
        if pg is not None and pg._comm is not None:
            pg._comm.set_checks(level is DebugLevel.DETAIL)


def set_debug_level_from_env() -> None:
    """:torch_dist:`set_debug_level_from_env`: :func:`set_debug_level` with ``TORCH_DISTRIBUTED_DEBUG``'s level
    (``OFF`` when unset; another value than OFF, INFO or DETAIL is a ValueError)."""
    set_debug_level(_debug_level_from_env())
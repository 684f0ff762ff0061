"""torch.distributed's collectives over MPI, for numpy arrays and torch tensors (CUDA ones too in a CUDA build).

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
  bool. Arrays on the CPU (numpy, torch) or, in a build with the CUDA
  backend (see ``scatterx.cuda``), torch CUDA tensors and CuPy arrays: a
  call's arrays all on the CPU or all on one CUDA device. On CUDA arrays a
  collective runs on the caller's current torch / CuPy stream and returns
  without synchronizing it (results are ready in that stream's order).
- The GIL is released while a collective runs. ``async_op=True`` queues it on
  the communicator's progress thread and returns a :class:`Work`; the arrays
  must not be touched until ``wait()`` returned (the Work keeps them alive).
- Ranks: ``src`` of :func:`broadcast` is a global rank, as in torch
  (``group_src`` takes a group rank). A rank outside ``group`` gets ``None``
  back from a collective (and a warning), -1 from :func:`get_rank` and
  :func:`get_world_size`.
- ``group`` may also be an mpi4py communicator (anything with ``py2f()``).
- Point-to-point: :func:`send`, :func:`recv`, :func:`isend`, :func:`irecv`,
  :class:`P2POp` with :func:`batch_isend_irecv`, and :func:`monitored_barrier`
  (torch's semantics; messages never match a collective's; see ``_p2p.py``);
  objects: :func:`send_object_list`, :func:`recv_object_list` (``_objects.py``).
- Reductions: :class:`ReduceOp` SUM, PRODUCT, MIN, MAX, AVG, and torch's
  bitwise BAND, BOR, BXOR (integers, bool) and PREMUL_SUM, whose factor
  comes from ``_make_nccl_premul_sum(factor)`` as in torch (floating and
  complex dtypes; the operations taking it run synchronously).
- Distributed GNN message passing: :func:`build_halo` and :class:`HaloExchange` fetch the neighbour rows
  a rank's edges need from the ranks owning them (differentiable; see ``halo.py``).
- Determinism: a reduction folds the ranks' values in an order fixed by
  the algorithm (chosen from the message size, the hosts and the settings)
  and the ranks, never by arrival timing, and every rank gets the same
  bits; the same call on the same group repeats bit for bit. The order may
  differ from torch's backends' (float sums may differ in the last bits).
- Errors: :class:`ValueError` (a local argument, e.g. a list of the wrong
  length), :class:`TypeError` (a dtype), :class:`MismatchError` (ranks
  disagree about split sizes, dtypes or shapes; raised on every rank),
  :class:`DistTimeoutError` (a :class:`TimeoutError`: a collective waited
  longer than the timeout; the group is unusable afterwards).
- Settings: ``timeout`` and ``pg_options=Options(checks=..., chunk_bytes=...,
  shared_memory=...)`` of :func:`init_process_group` and :func:`new_group`;
  what they leave unset comes from the environment: ``SCATTERX_DIST_TIMEOUT``
  (seconds, default 600), ``SCATTERX_DIST_CHECKS=1`` (cross-rank checks of the
  dense collectives' arguments; the variable-split all-to-alls always check),
  ``SCATTERX_DIST_CHUNK_BYTES``, ``SCATTERX_DIST_SHM`` (README "Environment").
"""

from ._groups import Array, GroupLike  # noqa: F401 (the signatures' type aliases, importable from here as before)
from ._groups import (
    Backend,
    DebugLevel,
    DistBackendError,
    DistError,
    DistTimeoutError,
    GroupMember,
    MismatchError,
    Options,
    ProcessGroup,
    ReduceOp,
    _make_nccl_premul_sum,
    destroy_process_group,
    get_backend,
    get_debug_level,
    get_default_backend_for_device,
    get_global_rank,
    get_group_rank,
    get_pg_count,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_backend_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    is_ucc_available,
    is_xccl_available,
    new_group,
    set_debug_level,
    set_debug_level_from_env,
    set_timeout,
    supports_complex,
)
from ._collectives import (
    Work,
    all_gather,
    all_gather_into_tensor,
    all_gather_single,
    all_reduce,
    all_to_all,
    all_to_all_single,
    all_to_all_v,
    barrier,
    broadcast,
    reduce_scatter,
    reduce_scatter_single,
    reduce_scatter_tensor,
)
from ._objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from ._p2p import P2POp, batch_isend_irecv, irecv, isend, monitored_barrier, recv, send
from ._rooted import gather, gather_into_tensor, gather_single, reduce, scatter
from ._subgroups import get_node_local_rank, new_subgroups, new_subgroups_by_enumeration, split_group

__all__ = [
    "Backend", "DistError", "DistTimeoutError", "GroupMember", "MismatchError", "Options", "ProcessGroup", "ReduceOp",
    "Work",
    "_make_nccl_premul_sum",
    "all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all", "all_to_all_single", "all_to_all_v",
    "barrier", "broadcast", "destroy_process_group", "get_backend", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group", "is_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available", "new_group", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "scatter", "reduce", "all_gather_object", "broadcast_object_list",
    "gather_object", "P2POp", "batch_isend_irecv", "irecv", "isend", "monitored_barrier", "recv", "send",
    "all_gather_single", "reduce_scatter_single", "gather_single", "gather_into_tensor", "scatter_object_list",
    "send_object_list", "recv_object_list", "new_subgroups", "new_subgroups_by_enumeration", "split_group",
    "get_node_local_rank", "supports_complex", "DebugLevel", "DistBackendError", "get_debug_level",
    "get_default_backend_for_device", "get_pg_count", "is_backend_available", "is_torchelastic_launched",
    "set_debug_level", "set_debug_level_from_env", "set_timeout", "is_ucc_available", "is_xccl_available",
    "HaloExchange", "build_halo",
    "ShardedEmbeddingBag", "ShardedEmbeddingBagCollection",
]


# The torch layers, imported on first use: the collectives need no torch.
_TORCH_LAYERS = {"ShardedEmbeddingBag": "embedding", "ShardedEmbeddingBagCollection": "embedding",
                 "HaloExchange": "halo", "build_halo": "halo"}


def __getattr__(name):
    if name in _TORCH_LAYERS:
        import importlib

        return getattr(importlib.import_module(f".{_TORCH_LAYERS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The CUDA backend's switches (ops/cuda.h), for builds that have it.

The ops themselves need nothing from here: torch CUDA tensors and CuPy arrays
go to the GPU kernels, on the caller's current stream. A wheel has the backend
when built with ``pip install . -Ccmake.define.SCATTERX_WITH_CUDA=ON`` (needs
nvcc); ``is_built()`` says whether this one does.
"""

from __future__ import annotations

from . import _C

__all__ = [
    "is_built",
    "device_count",
    "set_deterministic",
    "deterministic",
    "set_index_checks",
    "index_checks",
    "set_scatter_path",
    "scatter_path",
]

_SCATTER_PATHS = ("auto", "atomic", "sorted")


def is_built() -> bool:
    """Whether this build of scatterx has the CUDA backend (torch's counterpart: :torch:`cuda.is_available`,
    which also needs a device)."""
    return _C.cuda_is_built()


def device_count() -> int:
    """CUDA devices scatterx sees (0 without the backend, a driver or a GPU), as :torch:`cuda.device_count`."""
    return _C.cuda_device_count()


def set_deterministic(on: bool) -> None:
    """Scatters without atomics: each destination folds its values in a fixed order.

    Float sums and means then repeat bit for bit, run after run (as
    :torch:`use_deterministic_algorithms` does for torch's ops), at some cost in
    time. Process-wide; off by default. The CPU backend is always deterministic.
    """
    _C.cuda_set_deterministic(bool(on))


def deterministic() -> bool:
    """Whether CUDA scatters run without atomics (:func:`set_deterministic`); as
    :torch:`are_deterministic_algorithms_enabled` for torch's ops. False by default."""
    return _C.cuda_deterministic()


def set_index_checks(on: bool) -> None:
    """Off: no bounds pass and no stream synchronization per op.

    For callers that validate their indices: an out-of-range index is then
    skipped instead of raising IndexError (never a device-side assert).
    Process-wide; on by default. scatterx-only: torch's CUDA ops always
    check, with a device-side assert.
    """
    _C.cuda_set_index_checks(bool(on))


def index_checks() -> bool:
    """Whether CUDA ops check their indices first (:func:`set_index_checks`; True by default). scatterx-only."""
    return _C.cuda_index_checks()


def set_scatter_path(path: str) -> None:
    """How scatters with a reduce fold when not deterministic.

    ``"auto"`` (the default) takes atomics unless the index check finds a
    destination hot enough that its atomics would serialize (power-law
    degrees, skewed routing), and then sorts by destination. The measure rides
    on the index check, so with checks off ``"auto"`` takes atomics.
    ``"atomic"`` and ``"sorted"`` force a path; anything else raises ValueError.
    Process-wide. scatterx-only (torch has one path).
    """
    if path not in _SCATTER_PATHS:
        raise ValueError(f"set_scatter_path: expected path to be one of {', '.join(map(repr, _SCATTER_PATHS))}, got {path!r}")
    _C.cuda_set_scatter_path(_SCATTER_PATHS.index(path))


def scatter_path() -> str:
    """The path set by :func:`set_scatter_path`: ``"auto"`` (the default), ``"atomic"`` or ``"sorted"``.
    scatterx-only."""
    return _SCATTER_PATHS[_C.cuda_scatter_path()]

"""scatterx's host memory (ops/tensor.h): the cache of freed CPU tensors, and arrays allocated from it.

A new CPU tensor of scatterx's (an op's output) reuses the memory of one freed before it, pages already faulted
in: on a VM the kernel's first touch of fresh pages can cost more than the op that writes them (a GNN layer's
25.6 MB output: ~6 ms). ``SCATTERX_HOST_CACHE_BYTES`` bounds what is kept (default 1 GiB; 0 keeps nothing).

scatterx's CPU tensors of 64 KiB to 8 MiB also live in memory the other ranks on the host can map
(``SCATTERX_SHAREABLE_HOST_BYTES``, 256 MiB by default): ``scatterx.distributed`` copies a peer's message out of
such a tensor with a memcpy, where a numpy or torch buffer costs a copy through the kernel at about 60% of that
speed (its all-reduce and reduce-scatter fold out of the peers' tensors wherever they lie, mapped or through the
kernel; an all-to-all's messages of 16 to 64 KiB are read straight out of a peer only from such a tensor).
:func:`empty` hands that memory out as numpy arrays or torch tensors, as NCCL's ``ncclMemAlloc``
hands out the device buffers its zero-copy paths need.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any

import numpy as np

from . import _C


def host_cache_bytes() -> int:
    """Bytes of freed CPU memory scatterx keeps for reuse now: the host counterpart of the part of
    :torch:`cuda.memory_reserved` that no tensor uses. Bounded by ``SCATTERX_HOST_CACHE_BYTES``."""
    return _C.host_cache_bytes()


def empty_host_cache() -> int:
    """Gives every kept block back to the allocator, as :torch:`cuda.empty_cache` does for torch's CUDA
    allocator, and returns the bytes given back. Live tensors are not touched."""
    return _C.empty_host_cache()


def _dtype_name(dtype, op: str) -> tuple[str, bool]:
    """The core's name of a numpy dtype (or type, or name) or a torch.dtype, and whether it was torch's."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch."), True
    if isinstance(dtype, str) and dtype == "bfloat16":  # torch's only; numpy has no such dtype
        return dtype, False
    try:
        return np.dtype(dtype).name, False
    except TypeError:
        raise TypeError(f"{op}: expected dtype to be a numpy dtype, a dtype name or a torch.dtype, "
                        f"got {dtype!r}") from None


def _sizes(size, op: str) -> list[int]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])  # empty((2, 3)) as well as empty(2, 3), as torch.empty takes both
    if not all(isinstance(d, numbers.Integral) for d in size):
        raise TypeError(f"{op}: expected size to be ints or one sequence of ints, got {size!r}")
    if any(d < 0 for d in size):
        raise ValueError(f"{op}: expected non-negative sizes, got {tuple(size)}")
    return [int(d) for d in size]


def empty(*size, dtype: Any, framework: str | None = None):
    """A contiguous, uninitialized CPU array of scatterx's host memory: :torch:`empty` for the buffers a
    collective moves.

    ``size``: ints or one sequence of them, as :torch:`empty` takes. ``dtype``: a torch.dtype (the result is a
    torch tensor), a numpy dtype or type, or a name (``"float32"``, ``"bfloat16"``, ...; the result is a numpy
    array, or a torch tensor with ``framework="torch"``, which ``"bfloat16"`` needs).

    Arrays of 64 KiB to 8 MiB lie in memory the other ranks on this host can map (:func:`is_shareable`), so
    ``scatterx.distributed`` copies them out with a memcpy instead of through the kernel: an all-gather or
    all-to-all of such buffers runs at about twice Open MPI's busbw here (bench/RESULTS.md). Larger and smaller
    arrays come from scatterx's ordinary memory. The array frees its memory back to scatterx when it is
    garbage collected; views of it keep it alive, as with any numpy array or torch tensor.
    """
    op = "scatterx.empty"
    name, from_torch = _dtype_name(dtype, op)
    if framework is None:
        framework = "torch" if from_torch else "numpy"
    if framework not in ("numpy", "torch"):
        raise ValueError(f"{op}: expected framework 'numpy' or 'torch', got {framework!r}")
    if framework == "torch" and "torch" not in sys.modules:
        raise ValueError(f"{op}: framework='torch' needs torch imported first")
    if framework == "numpy" and name == "bfloat16":
        raise TypeError(f"{op}: numpy has no bfloat16; pass framework='torch' or a torch.dtype")
    fw = _C.Framework.Torch if framework == "torch" else _C.Framework.NumPy
    return _C.empty(_sizes(size, op), name, fw)


def empty_like(array):
    """:func:`empty` with ``array``'s shape and dtype, as the same kind of array (numpy or torch, on the CPU):
    :torch:`empty_like` in scatterx's host memory. The values are not copied."""
    op = "scatterx.empty_like"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(array, torch.Tensor):
        if array.device.type != "cpu":
            raise ValueError(f"{op}: expected a CPU tensor, got one on {array.device}")
        return empty(*array.shape, dtype=array.dtype)
    if isinstance(array, np.ndarray):
        return empty(*array.shape, dtype=array.dtype)
    raise TypeError(f"{op}: expected a numpy array or a torch tensor, got {type(array).__name__}")


def is_shareable(array) -> bool:
    """Whether every byte of ``array`` (numpy, torch or any DLPack array; views too) lies in memory the other
    ranks on this host can map, so that ``scatterx.distributed`` copies it with a memcpy: true for
    :func:`empty`'s arrays and scatterx's op outputs of 64 KiB to 8 MiB (while ``SCATTERX_SHAREABLE_HOST_BYTES``
    allows), false for numpy's and torch's own memory and for GPU arrays. No counterpart in torch: the host
    side of asking whether a CUDA buffer came from :torch:`cuda.MemPool` with NCCL's allocator."""
    return _C.host_shareable(array)

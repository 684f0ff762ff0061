"""The host memory cache: freed CPU tensors' memory kept for reuse (ops/tensor.h).

A new CPU tensor of scatterx's (an op's output) reuses the memory of one freed before it, pages already faulted
in: on a VM the kernel's first touch of fresh pages can cost more than the op that writes them (a GNN layer's
25.6 MB output: ~6 ms). ``SCATTERX_HOST_CACHE_BYTES`` bounds what is kept (default 1 GiB; 0 keeps nothing).
"""

from . import _C


def host_cache_bytes() -> int:
    """Bytes of freed CPU memory scatterx keeps for reuse now: the host counterpart of the part of
    :torch:`cuda.memory_reserved` that no tensor uses. Bounded by ``SCATTERX_HOST_CACHE_BYTES``."""
    return _C.host_cache_bytes()


def empty_host_cache() -> int:
    """Gives every kept block back to the allocator, as :torch:`cuda.empty_cache` does for torch's CUDA
    allocator, and returns the bytes given back. Live tensors are not touched."""
    return _C.empty_host_cache()

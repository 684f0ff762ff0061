"""scatterx.IndexPlan: a destination index checked and grouped once.

GNN layers scatter by the same destination index in every layer and every epoch; building the plan once
moves the index check and the grouping (a counting or radix sort of the positions by destination) out of
each call. ``scatterx.gather_scatter`` takes the plan as its ``dst_index`` and
``scatterx.torch_scatter.scatter`` as its ``index`` (dim 0); the results are bit-identical to the same
calls given the index, and gradients flow as they do there.
"""

from __future__ import annotations

from typing import Optional

from . import _C


class IndexPlan:
    """``IndexPlan(index, dim_size=None)``: a 1-d int32/int64 index whose values lie in ``[0, dim_size)``
    (``dim_size`` defaults to ``max(index) + 1``), grouped by value, stably. The plan copies what it needs
    (later changes to ``index`` do not reach it) and keeps ``index`` itself for the backward passes.

    The plan lives on its index's device (:attr:`device`) and takes arrays of that device only: a CPU plan
    groups on the host, a CUDA plan (from a torch CUDA tensor or a CuPy array) on the GPU, enqueued on the
    caller's current stream. Building a CUDA plan synchronizes the stream only where the host needs a value
    back: ``dim_size=None`` (the maximum) and the index check (``scatterx.cuda.index_checks()``, on by
    default). Errors: IndexError for a value outside ``[0, dim_size)`` (naming it), ValueError for an index
    that is not 1-d, TypeError for an index dtype other than int32/int64; an op given a plan on another
    device than its arrays raises ValueError naming the plan's device."""

    def __init__(self, index, dim_size: Optional[int] = None):
        from ._ops import _raw

        self.index = index
        # _raw makes the index's current CUDA stream (torch's or CuPy's) the one the grouping is enqueued on.
        self._plan = _C.IndexPlan(_raw(index, "IndexPlan", "index"), -1 if dim_size is None else int(dim_size))

    @property
    def device(self):
        """The device the plan lives on, the index's: a ``torch.device`` for a torch index, ``'cuda:<n>'`` for
        a CuPy array, ``'cpu'`` for a numpy array."""
        from ._ops import _is_cupy, _is_torch

        if _is_torch(self.index):
            return self.index.device
        if _is_cupy(self.index):
            return f"cuda:{self.index.device.id}"
        return "cpu"

    @property
    def dim_size(self) -> int:
        return self._plan.dim_size

    def __len__(self) -> int:
        return self._plan.positions

    def counts(self):
        """How many positions hold each value: ``[dim_size]`` int64, of the index's array kind, on the plan's
        device (on CUDA, computed on the caller's current stream)."""
        from ._ops import _framework, _use_stream_of

        _use_stream_of(self.index)
        return self._plan.counts(_framework(self.index))

    def check_dim_size(self, op: str, dim_size: Optional[int]) -> None:
        if dim_size is not None and int(dim_size) != self.dim_size:
            raise ValueError(f"{op}: expected dim_size to be None or the plan's dim_size ({self.dim_size}), "
                             f"got {dim_size}")

    def __repr__(self) -> str:
        return f"IndexPlan(positions={len(self)}, dim_size={self.dim_size})"

"""scatterx.distributed.nn: as torch.distributed.nn, the differentiable collectives of
:mod:`scatterx.distributed.nn.functional`, also importable from here."""

from .functional import (all_gather, all_reduce, all_to_all, all_to_all_single, all_to_all_v, broadcast, gather,
                         reduce, reduce_scatter, scatter)

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_single", "all_to_all_v", "broadcast", "gather",
           "reduce", "reduce_scatter", "scatter"]

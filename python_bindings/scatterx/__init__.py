"""scatterx: gather, scatter and index ops with PyTorch's exact semantics.

Takes numpy arrays and torch tensors without copies and returns the same
kind of array as its main input::

    import numpy as np, scatterx
    out = scatterx.scatter_reduce(np.zeros(3), 0, np.array([0, 1, 0]), np.array([1., 2., 3.]), "sum")

The functions mirror torch's (names, argument order, keywords); the in-place
forms end with an underscore. ``scatterx.torch`` holds the autograd
Functions used when a torch input requires grad.
"""

from . import cuda
from ._C import __version__
from ._memory import empty, empty_host_cache, empty_like, host_cache_bytes, is_shareable
from ._plan import IndexPlan
from ._ops import (
    gather,
    gather_dot,
    gather_scatter,
    index_add,
    index_add_,
    index_add_weighted,
    index_add_weighted_,
    index_reduce,
    index_reduce_,
    index_select,
    scatter,
    scatter_,
    scatter_add,
    scatter_add_,
    scatter_reduce,
    scatter_reduce_,
)

__all__ = [
    "__version__",
    "IndexPlan",
    "cuda",
    "empty",
    "empty_like",
    "empty_host_cache",
    "host_cache_bytes",
    "is_shareable",
    "gather",
    "gather_dot",
    "gather_scatter",
    "index_select",
    "scatter",
    "scatter_",
    "scatter_add",
    "scatter_add_",
    "scatter_reduce",
    "scatter_reduce_",
    "index_add",
    "index_add_",
    "index_add_weighted",
    "index_add_weighted_",
    "index_reduce",
    "index_reduce_",
]

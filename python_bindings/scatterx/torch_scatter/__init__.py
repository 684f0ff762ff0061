"""torch_scatter 2.1.2's public API on scatterx's kernels: ``import scatterx.torch_scatter as torch_scatter``.

Same names, signatures, defaults and results (index broadcasting, dim=-1, dim_size, out=, empty positions,
(values, arg) of min/max), on torch tensors (numpy arrays are wrapped). Differences are listed in the
README ("scatterx.torch_scatter"): results are deterministic on the CPU (on CUDA: the segment ops, min/max and the
fused paths, the rest with ``scatterx.cuda.set_deterministic(True)``), 16-bit floats accumulate in
float, amax/amin propagate NaN, integer means always floor, and invalid input raises instead of being
undefined. Gradients: every function, in src, when out is not given (torch_scatter's rules: min/max send the
gradient to the arg position); with out, the sums, means and mul record their write into out, and the other
functions refuse inputs that require grad.
"""

from ._composite import scatter_log_softmax, scatter_logsumexp, scatter_softmax, scatter_std
from ._scatter import scatter, scatter_add, scatter_max, scatter_mean, scatter_min, scatter_mul, scatter_sum
from ._segment import (
    gather_coo,
    gather_csr,
    segment_add_coo,
    segment_add_csr,
    segment_coo,
    segment_csr,
    segment_max_coo,
    segment_max_csr,
    segment_mean_coo,
    segment_mean_csr,
    segment_min_coo,
    segment_min_csr,
    segment_sum_coo,
    segment_sum_csr,
)

__version__ = "2.1.2"  # the torch_scatter release whose API this follows

__all__ = [
    "scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean", "scatter_min", "scatter_max",
    "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr", "segment_min_csr", "segment_max_csr",
    "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo", "segment_min_coo", "segment_max_coo",
    "gather_csr", "gather_coo",
    "scatter_softmax", "scatter_log_softmax", "scatter_logsumexp", "scatter_std",
]

"""The host memory cache (scatterx.host_cache_bytes / empty_host_cache): a freed output's memory is kept for the
next op, never shared with a live array, and given back on demand."""

import os

import numpy as np

import scatterx


def caching() -> bool:
    return os.environ.get("SCATTERX_HOST_CACHE_BYTES", "") != "0"


def test_freed_output_is_kept_and_emptied():
    scatterx.empty_host_cache()
    assert scatterx.host_cache_bytes() == 0
    x = np.arange(1 << 20, dtype=np.float64).reshape(-1, 4)  # 8 MiB
    index = np.arange(x.shape[0])[::-1].copy()
    out = scatterx.index_select(x, 0, index)
    nbytes = out.nbytes
    del out
    held = scatterx.host_cache_bytes()
    assert held >= nbytes if caching() else held == 0
    assert scatterx.empty_host_cache() == held
    assert scatterx.host_cache_bytes() == 0


def test_recycled_memory_never_aliases_a_live_output():
    x = np.random.default_rng(0).random((1 << 17, 8))
    index = np.random.default_rng(1).integers(0, x.shape[0], x.shape[0])
    first = scatterx.index_select(x, 0, index)
    del first  # its block goes to the cache ...
    second = scatterx.index_select(x, 0, index)  # ... and comes back here
    third = scatterx.index_select(x, 0, index[::-1].copy())  # a fresh block: second is alive
    assert not np.shares_memory(second, third)
    np.testing.assert_array_equal(second, x[index])
    np.testing.assert_array_equal(third, x[index[::-1]])

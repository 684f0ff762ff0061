"""The inputs of the C++ benchmarks (bench/bench_data.cpp) in numpy: splitmix64 streams with the same seeds, so
the Python benchmarks time the very data the C++ ones do."""

from __future__ import annotations

import numpy as np

_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
K_SEED = 20261122
K_BLOCK = 1 << 16  # values per generator block in bench_data.cpp's fill()


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function on uint64 states (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _draws(seed: int, start: int, count: int) -> np.ndarray:
    """Draws start+1 .. start+count of Rng(seed).next(): mix(seed + k * gamma)."""
    k = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return _mix(np.uint64(seed & _M64) + k * np.uint64(_GAMMA))


def _uniform(bits: np.ndarray) -> np.ndarray:
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _below(bits: np.ndarray, n) -> np.ndarray:
    v = (_uniform(bits) * np.asarray(n, dtype=np.float64)).astype(np.int64)
    return np.minimum(v, np.asarray(n, dtype=np.int64) - 1)


def make_permutation(n: int, seed: int) -> np.ndarray:
    """Fisher-Yates as bench_data.cpp: for i = n-1 .. 1, swap p[i] and p[below(i + 1)]."""
    p = np.arange(n, dtype=np.int64)
    if n < 2:
        return p
    i = np.arange(n - 1, 0, -1, dtype=np.int64)
    j = _below(_draws(seed, 0, n - 1), i + 1).tolist()
    pl = p.tolist()
    for a, b in zip(i.tolist(), j):
        pl[a], pl[b] = pl[b], pl[a]
    return np.array(pl, dtype=np.int64)


def make_index(count: int, rng_range: int, dist: str, seed: int) -> np.ndarray:
    bits = _draws(seed, 0, count)
    if dist == "uniform":
        return _below(bits, rng_range)
    cdf = np.cumsum(1.0 / np.arange(1, rng_range + 1, dtype=np.float64))  # sequential, as the C++ loop
    ids = make_permutation(rng_range, seed ^ 0x5BD1E995)
    rank = np.searchsorted(cdf, _uniform(bits) * cdf[-1], side="right")
    return ids[np.minimum(rank, rng_range - 1)]


def fill(n: int, seed: int, kind: str) -> np.ndarray:
    """n float32 values as bench_data.cpp's fill(): block b of 64k values uses Rng(seed * 0x100000001b3 + b)."""
    out = np.empty(n, dtype=np.float32)
    chunk_blocks = 64
    for b0 in range(0, (n + K_BLOCK - 1) // K_BLOCK, chunk_blocks):
        lo = b0 * K_BLOCK
        hi = min(n, (b0 + chunk_blocks) * K_BLOCK)
        pos = np.arange(lo, hi, dtype=np.uint64)
        block = pos // np.uint64(K_BLOCK)
        with np.errstate(over="ignore"):
            state = (np.uint64((seed * 0x100000001B3) & _M64) + block
                     + (pos - block * np.uint64(K_BLOCK) + np.uint64(1)) * np.uint64(_GAMMA))
        bits = _mix(state)
        if kind == "pm1":
            out[lo:hi] = np.where((bits >> np.uint64(63)) != 0, 1.0, -1.0)
        else:  # symmetric uniform in [-1, 1), rounded double -> float as static_cast<float>
            out[lo:hi] = (2.0 * _uniform(bits) - 1.0).astype(np.float32)
    return out

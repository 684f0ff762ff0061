"""Timing shared by the distributed torch-peer benchmarks (bench_moe.py, bench_embedding.py), run under mpirun
with scatterx.distributed and torch.distributed (gloo) both initialized."""

from __future__ import annotations

import time
from typing import Callable, Dict, List

import torch

import scatterx.distributed as sxd


def slowest(seconds: float) -> float:
    """The largest of the ranks' figures (a repetition takes as long as its slowest rank)."""
    t = torch.tensor([seconds], dtype=torch.float64)
    sxd.all_reduce(t, op=sxd.ReduceOp.MAX)
    return float(t[0])


def alternate(run: Callable[[str], object], reps: int, sides=("scatterx", "torch")) -> Dict[str, List[float]]:
    """reps timed repetitions of run(side) per side after a warm-up one, the sides' order alternating; each a
    barrier on both process groups, then the call, timed as the slowest rank's."""
    import torch.distributed as tdist

    times: Dict[str, List[float]] = {side: [] for side in sides}
    for rep in range(reps + 1):
        for side in (sides if rep % 2 == 0 else sides[::-1]):
            sxd.barrier()
            tdist.barrier()
            start = time.perf_counter()
            run(side)
            elapsed = slowest(time.perf_counter() - start)
            if rep > 0:
                times[side].append(elapsed)
    return times

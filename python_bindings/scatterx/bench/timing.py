"""Timing two libraries fairly on a shared machine: interleaved repetitions, and how much CPU other processes
took meanwhile (/proc/stat), with reruns of a disturbed measurement."""

from __future__ import annotations

import os
import statistics
import time

WARMUP = 3
NOISY = 0.10  # a row during which other processes used more than this share of the CPUs is run again ...
RETRIES = 2  # ... up to this many times


def interleaved(sx_fn, torch_fn, reps: int, warmup: int = WARMUP):
    """Warm-up, then scatterx and torch alternately; returns (torch times, scatterx times) in ms."""
    for _ in range(warmup):
        sx_fn()
        torch_fn()
    t_sx, t_torch = [], []
    clock = time.perf_counter
    for _ in range(reps):
        t0 = clock()
        sx_fn()
        t1 = clock()
        torch_fn()
        t2 = clock()
        t_sx.append((t1 - t0) * 1e3)
        t_torch.append((t2 - t1) * 1e3)
    return t_torch, t_sx


class CpuMonitor:
    """CPU time used by other processes (and stolen by the hypervisor) while a block runs, from /proc/stat."""

    def __init__(self):
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.ncpu = os.cpu_count() or 1

    def _busy(self):
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal ...: everything but idle and iowait
        return (sum(v[:8]) - v[3] - v[4]) / self.hz

    def start(self):
        self._t = (time.perf_counter(), self._busy(), time.process_time())

    def other_fraction(self) -> float:
        """Fraction of all CPUs' time since start() that went to other processes (nan if unknown)."""
        wall0, busy0, own0 = self._t
        busy = self._busy()
        if busy is None or busy0 is None:
            return float("nan")
        wall = time.perf_counter() - wall0
        if wall * self.ncpu * self.hz < 50:  # too short for /proc/stat's clock ticks
            return float("nan")
        other = (busy - busy0) - (time.process_time() - own0)
        return max(0.0, other) / (wall * self.ncpu)


def wait_quiet(monitor: CpuMonitor, limit_s: float = 60.0) -> float:
    """Sleeps in 1 s steps until other processes use less than NOISY of the CPUs (limit_s at most); returns the wait."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        monitor.start()
        time.sleep(1.0)
        if not monitor.other_fraction() > NOISY:
            break
    return time.perf_counter() - start


def rel_iqr(times) -> float:
    if len(times) < 4:
        return float("nan")
    q = statistics.quantiles(times, n=4)
    return (q[2] - q[0]) / statistics.median(times)


def measure_pair(sx_fn, torch_fn, reps: int, retries: int, monitor: CpuMonitor, note=None) -> dict:
    """Times the pair (interleaved), rerunning it up to `retries` times while other processes used more than
    NOISY of the CPUs, after waiting for a quiet second; keeps the quietest attempt. Returns torch_ms and
    scatterx_ms (medians), spread_scatterx and spread_torch (interquartile range / median), other (share of the
    CPUs other processes used; nan when unknown) and attempts. note(text) hears of each rerun."""
    best = None
    for attempt in range(1 + retries):
        monitor.start()
        t_torch, t_sx = interleaved(sx_fn, torch_fn, reps)
        other = monitor.other_fraction()
        if best is None or other < best["other"]:
            best = dict(torch_ms=statistics.median(t_torch), scatterx_ms=statistics.median(t_sx),
                        spread_scatterx=rel_iqr(t_sx), spread_torch=rel_iqr(t_torch), other=other)
        if not other > NOISY or attempt == retries:  # nan (unknown) counts as quiet
            break
        waited = wait_quiet(monitor)
        if note:
            note(f"other processes used {other:.0%} of the CPUs; waited {waited:.0f} s for a quiet second, "
                 "running it again")
    best["attempts"] = attempt + 1
    return best

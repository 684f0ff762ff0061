#!/usr/bin/env python3
"""scatterx vs torch on the CPU: the GNN and MoE workloads of bench/bench_ops.cpp.

Both libraries run on the very same tensors (scatterx reads torch tensors
through DLPack, without copies) with the same number of threads
(``torch.set_num_threads(n)`` and ``OMP_NUM_THREADS=n``, set before either
library is imported).

Workloads (``--size full``, the default; the inputs are generated with the
same splitmix64 streams and seeds as bench/bench_data.cpp, so they are the
C++ benchmark's data):

  gnn   1M edges x 64 float32 into 100k nodes; destination index /uniform or
        /powerlaw (Zipf, exponent 1, node ids randomly permuted); edges in
        random order. gather and the scatters take the 1-d int64 index
        expanded to [E, F] (``idx.view(-1, 1).expand(E, F)``, stride 0);
        index_select and index_add_ take it 1-d.
  moe   16384 tokens x 4096 bfloat16 rows by a random permutation:
        index_select (dispatch), gather (expanded index) and index_add_ by the
        permutation (combine).

``--size small`` (10k nodes, 100k edges, 1024 tokens x 1024) is a smoke run.

Allocator: torch allocates its scratch and results (the sort buffers of the
expanded-index scatter path, index_select's result) with glibc malloc, which
maps blocks above its mmap threshold fresh and unmaps them on free, so such
calls pay page faults every time; first touch is slow on VMs. scatterx
recycles its kernel scratch and asks for transparent huge pages for large
results. The header prints the knobs that change this for torch; to give
torch its best case, run with
``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296
THP_MEM_ALLOC_ENABLE=1`` in the environment (glibc keeps freed blocks mapped;
torch madvises huge pages for its large tensors).

Method: every op is run three times per library to warm up, then the two
libraries alternate (scatterx, torch, scatterx, torch, ...) for ``--reps``
repetitions each, so that a burst of noise hits both; the table gives the
median of each and speedup = torch median / scatterx median. /proc/stat tells
how much CPU time other processes took while each row ran ("other CPU"); a
row where they took more than 10% of the machine is run again (twice at
most, after waiting up to a minute for a quiet second; full size only) and
the quietest attempt is kept. In-place ops write into
preallocated destinations that are never reset (the sources are +-1, so the
values stay small, as in the C++ benchmark); gather and index_select write
into preallocated outputs (``out=``) except for the row marked "alloc", which
allocates its [E, F] result on every call in both libraries.

Checks: before timing, each op runs once in both libraries and the results
are compared: the in-place reductions from the same starting destination (a
copy of a random-valued tensor, so include_self is exercised), the out= forms
into outputs filled with NaN (so an element left unwritten shows). Gathers,
index_select, amax and amin must be bit-identical. Sums and means may round differently (scatterx folds
each destination's values in index order; torch's CPU kernels may fold in
another order), so they are compared with ``torch.allclose(rtol=1e-5,
atol=1e-5)`` for float32 and ``rtol=atol=1e-2`` for bfloat16 (one bfloat16
ulp is 2^-8 to 2^-7 relative); the table says "exact" when they are bit-identical
anyway, else the largest absolute difference.

Floors (``--strict`` exits 1 when one is missed or a check fails; without it
the exit status is 0 whatever the figures and checks):
  GNN scatter_add_ >= 1.5x torch's scatter_add_ and >= 1.5x torch's
      scatter_reduce_(..., 'sum') (same scatterx call, two torch baselines);
  GNN index_add_ >= 1.5x torch's index_add_;
  gather and index_select (GNN and MoE, with and without out=) >= 1.0x torch.
The other rows (scatter_reduce_ sum/mean/amax/amin, MoE index_add_) have no
floor and are reported for information.

Usage:
  python bench/bench_torch.py [--threads 2] [--reps 11] [--size full|small]
                              [--markdown-out FILE] [--strict]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

# ---- data: a numpy port of bench/bench_data.cpp (splitmix64, same seeds) --------------------------------

import numpy as np

from machine import cpu_model

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


SIZES = {
    "full": dict(nodes=100_000, edges=1_000_000, features=64, tokens=16384, hidden=4096),
    "small": dict(nodes=10_000, edges=100_000, features=64, tokens=1024, hidden=1024),
}


# ---- timing ---------------------------------------------------------------------------------------------


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


def pct(x: float) -> str:
    return "-" if x != x else f"{x:.0%}"


def retried(row) -> str:
    return f" ({row['attempts']} runs)" if row["attempts"] > 1 else ""


# ---- the benchmark --------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="threads for both libraries (default 2)")
    ap.add_argument("--reps", type=int, default=11, help="timed repetitions per library and op (default 11)")
    ap.add_argument("--size", choices=sorted(SIZES), default="full",
                    help="full: the C++ benchmark's sizes (default, about a minute); small: a smoke run of seconds")
    ap.add_argument("--markdown-out", metavar="FILE", help="also write the report (markdown) to FILE")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a floor is missed or a result check fails")
    args = ap.parse_args()
    if args.threads < 1 or args.reps < 1:
        ap.error("--threads and --reps must be positive")

    # Both OpenMP runtimes read this when they start, so it is set before either library loads.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    import scatterx

    torch.set_num_threads(args.threads)
    sz = SIZES[args.size]
    out_lines: list[str] = []

    def emit(line: str = "") -> None:
        print(line, flush=True)
        out_lines.append(line)

    emit(f"torch {torch.__version__}, scatterx {scatterx.__version__}, numpy {np.__version__}, "
         f"Python {platform.python_version()}")
    emit(f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; threads: {args.threads} "
         f"(torch.get_num_threads() = {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']})")
    thp = "?"
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            thp = fh.read().strip()
    except OSError:
        pass
    knobs = ", ".join(f"{k}={os.environ[k]}" for k in sorted(os.environ)
                      if k.startswith("MALLOC_") or k.startswith("GLIBC_TUNABLES") or k == "THP_MEM_ALLOC_ENABLE")
    emit(f"allocator: transparent huge pages {thp}; environment: {knobs or 'no MALLOC_* / THP_MEM_ALLOC_ENABLE set'}")
    emit(f"size {args.size}: GNN {sz['edges']} edges x {sz['features']} float32 -> {sz['nodes']} nodes; "
         f"MoE {sz['tokens']} tokens x {sz['hidden']} bfloat16; {args.reps} interleaved repetitions per op "
         f"after {WARMUP} warm-up runs, medians")
    if args.reps < 9:
        emit(f"note: --reps {args.reps} is below 9; medians of so few runs are rough")
    emit()

    rows = []  # dicts: op, shape, torch, sx, floor, check, spread, other
    monitor, whole_run = CpuMonitor(), CpuMonitor()
    whole_run.start()

    def bench(op, shape, sx_fn, torch_fn, check, floor=None):
        row = None
        retries = RETRIES if args.size == "full" else 0  # the smoke run stays quick
        for attempt in range(1 + retries):  # a row that other processes disturbed runs again; the quietest counts
            monitor.start()
            t_torch, t_sx = interleaved(sx_fn, torch_fn, args.reps)
            other = monitor.other_fraction()
            if row is None or other < row["other"]:
                row = dict(op=op, shape=shape, torch=statistics.median(t_torch), sx=statistics.median(t_sx),
                           floor=floor, check=check, spread=(rel_iqr(t_sx), rel_iqr(t_torch)), other=other,
                           attempts=attempt + 1)
            if not other > NOISY or attempt == retries:  # nan (unknown) counts as quiet
                break
            waited = wait_quiet(monitor)
            print(f"  ({op} {shape}: other processes used {other:.0%} of the CPUs; waited {waited:.0f} s for a quiet "
                  "second, running it again)", file=sys.stderr, flush=True)
        row["attempts"] = attempt + 1
        rows.append(row)
        print(f"  {op:<52} {shape:<22} torch {row['torch']:9.2f} ms  scatterx {row['sx']:9.2f} ms  "
              f"x{row['torch'] / row['sx']:5.2f}  [{check}]  other CPU {pct(row['other'])}", file=sys.stderr, flush=True)
        return row

    failures: list[str] = []

    def compare(name, got, want, exact: bool) -> str:
        """'exact', or the max abs difference if within tolerance; records a failure otherwise."""
        if got.shape != want.shape or got.dtype != want.dtype:
            failures.append(f"{name}: shape/dtype {tuple(got.shape)} {got.dtype} vs {tuple(want.shape)} {want.dtype}")
            return "MISMATCH"
        if torch.equal(got, want):
            return "exact"
        diff = (got.float() - want.float()).abs().max().item()
        if exact:
            failures.append(f"{name}: expected bit-identical results, max abs difference {diff:.3g}")
            return f"MISMATCH {diff:.2g}"
        tol = dict(rtol=1e-2, atol=1e-2) if got.dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
        if torch.allclose(got, want, **tol):
            return f"max abs diff {diff:.1g}"
        failures.append(f"{name}: outside tolerance {tol}, max abs difference {diff:.3g}")
        return f"MISMATCH {diff:.2g}"

    def out_check(name, sx_call, torch_call, out_sx, out_t) -> str:
        """Runs the out= forms once into outputs poisoned with NaN and compares them (bit-identical)."""
        out_sx.fill_(float("nan"))
        out_t.fill_(float("nan"))
        sx_call()
        torch_call()
        return compare(name, out_sx, out_t, exact=True)

    # ---- GNN ----
    t0 = time.perf_counter()
    n, e, f = sz["nodes"], sz["edges"], sz["features"]
    table = torch.from_numpy(fill(n * f, K_SEED + 1, "uniform").reshape(n, f))
    messages = torch.from_numpy(fill(e * f, K_SEED + 2, "pm1").reshape(e, f))
    idx_1d = {"uniform": torch.from_numpy(make_index(e, n, "uniform", K_SEED + 3)),
              "powerlaw": torch.from_numpy(make_index(e, n, "powerlaw", K_SEED + 4))}
    # touched outputs, one per library
    gathered_sx, gathered_t = torch.zeros(e, f), torch.zeros(e, f)
    agg_sx, agg_t = torch.zeros(n, f), torch.zeros(n, f)
    print(f"GNN data generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    for dist in ("uniform", "powerlaw"):
        idx = idx_1d[dist]
        idx2d = idx.view(-1, 1).expand(e, f)
        shape = f"gnn/{dist}"

        def reduce_check(name, sx_call, torch_call, exact):
            start = table.clone()  # include_self sees random values, not zeros
            a, b = start.clone(), start.clone()
            sx_call(a)
            torch_call(b)
            return compare(f"{name} {shape}", a, b, exact)

        # scatter_add_ (expanded index): vs torch's scatter_add_ and torch's scatter_reduce_(sum)
        chk = reduce_check("scatter_add_", lambda d: scatterx.scatter_add_(d, 0, idx2d, messages),
                           lambda d: d.scatter_add_(0, idx2d, messages), exact=False)
        bench("scatter_add_ vs torch scatter_add_", shape,
              lambda: scatterx.scatter_add_(agg_sx, 0, idx2d, messages),
              lambda: agg_t.scatter_add_(0, idx2d, messages), chk, floor=1.5)
        chk = reduce_check("scatter_add_ vs scatter_reduce_(sum)",
                           lambda d: scatterx.scatter_add_(d, 0, idx2d, messages),
                           lambda d: d.scatter_reduce_(0, idx2d, messages, "sum", include_self=True), exact=False)
        bench("scatter_add_ vs torch scatter_reduce_(sum)", shape,
              lambda: scatterx.scatter_add_(agg_sx, 0, idx2d, messages),
              lambda: agg_t.scatter_reduce_(0, idx2d, messages, "sum", include_self=True), chk, floor=1.5)
        for red in ("sum", "mean", "amax", "amin"):
            chk = reduce_check(f"scatter_reduce_({red})",
                               lambda d, r=red: scatterx.scatter_reduce_(d, 0, idx2d, messages, r, include_self=True),
                               lambda d, r=red: d.scatter_reduce_(0, idx2d, messages, r, include_self=True),
                               exact=red in ("amax", "amin"))
            bench(f"scatter_reduce_({red}, include_self=True)", shape,
                  lambda r=red: scatterx.scatter_reduce_(agg_sx, 0, idx2d, messages, r, include_self=True),
                  lambda r=red: agg_t.scatter_reduce_(0, idx2d, messages, r, include_self=True), chk)
        chk = reduce_check("index_add_", lambda d: scatterx.index_add_(d, 0, idx, messages),
                           lambda d: d.index_add_(0, idx, messages), exact=False)
        bench("index_add_", shape, lambda: scatterx.index_add_(agg_sx, 0, idx, messages),
              lambda: agg_t.index_add_(0, idx, messages), chk, floor=1.5)

        sx_call = lambda: scatterx.gather(table, 0, idx2d, out=gathered_sx)  # noqa: E731
        torch_call = lambda: torch.gather(table, 0, idx2d, out=gathered_t)  # noqa: E731
        chk = out_check(f"gather {shape}", sx_call, torch_call, gathered_sx, gathered_t)
        bench("gather (expanded index, out=)", shape, sx_call, torch_call, chk, floor=1.0)
        sx_call = lambda: scatterx.index_select(table, 0, idx, out=gathered_sx)  # noqa: E731
        torch_call = lambda: torch.index_select(table, 0, idx, out=gathered_t)  # noqa: E731
        chk = out_check(f"index_select {shape}", sx_call, torch_call, gathered_sx, gathered_t)
        bench("index_select (out=)", shape, sx_call, torch_call, chk, floor=1.0)
        chk = compare(f"index_select (alloc) {shape}", scatterx.index_select(table, 0, idx),
                      torch.index_select(table, 0, idx), exact=True)
        bench("index_select (alloc)", shape,
              lambda: scatterx.index_select(table, 0, idx), lambda: torch.index_select(table, 0, idx), chk, floor=1.0)

    del table, messages, idx_1d, gathered_sx, gathered_t, agg_sx, agg_t

    # ---- MoE ----
    t0 = time.perf_counter()
    tk, h = sz["tokens"], sz["hidden"]
    tokens = torch.from_numpy(fill(tk * h, K_SEED + 5, "uniform").reshape(tk, h)).to(torch.bfloat16)
    permuted = torch.from_numpy(fill(tk * h, K_SEED + 6, "pm1").reshape(tk, h)).to(torch.bfloat16)
    perm = torch.from_numpy(make_permutation(tk, K_SEED + 7))
    perm2d = perm.view(-1, 1).expand(tk, h)
    out_sx, out_t = torch.zeros(tk, h, dtype=torch.bfloat16), torch.zeros(tk, h, dtype=torch.bfloat16)
    comb_sx, comb_t = torch.zeros(tk, h, dtype=torch.bfloat16), torch.zeros(tk, h, dtype=torch.bfloat16)
    print(f"MoE data generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    shape = "moe/permute"

    sx_call = lambda: scatterx.index_select(tokens, 0, perm, out=out_sx)  # noqa: E731
    torch_call = lambda: torch.index_select(tokens, 0, perm, out=out_t)  # noqa: E731
    chk = out_check("index_select moe", sx_call, torch_call, out_sx, out_t)
    bench("index_select (dispatch, out=)", shape, sx_call, torch_call, chk, floor=1.0)
    sx_call = lambda: scatterx.gather(tokens, 0, perm2d, out=out_sx)  # noqa: E731
    torch_call = lambda: torch.gather(tokens, 0, perm2d, out=out_t)  # noqa: E731
    chk = out_check("gather moe", sx_call, torch_call, out_sx, out_t)
    bench("gather (dispatch, expanded index, out=)", shape, sx_call, torch_call, chk, floor=1.0)
    a, b = tokens.clone(), tokens.clone()
    chk = compare("index_add_ moe", scatterx.index_add_(a, 0, perm, permuted), b.index_add_(0, perm, permuted), False)
    del a, b
    bench("index_add_ (combine)", "moe/unpermute", lambda: scatterx.index_add_(comb_sx, 0, perm, permuted),
          lambda: comb_t.index_add_(0, perm, permuted), chk)
    # The weighted combine as torch code writes it (rows times router probabilities, then index_add_),
    # against scatterx's one-pass index_add_weighted_ (its products are not rounded to bfloat16).
    probs = torch.from_numpy(fill(tk, K_SEED + 8, "uniform")).to(torch.bfloat16)
    a, b = tokens.clone(), tokens.clone()
    chk = compare("index_add_weighted_ moe", scatterx.index_add_weighted_(a, 0, perm, permuted, probs),
                  b.index_add_(0, perm, permuted * probs[:, None]), False)
    del a, b
    bench("index_add_weighted_ (weighted combine)", "moe/unpermute",
          lambda: scatterx.index_add_weighted_(comb_sx, 0, perm, permuted, probs),
          lambda: comb_t.index_add_(0, perm, permuted * probs[:, None]), chk)

    # ---- report ----
    emit("| op | shape | torch ms | scatterx ms | speedup | floor | met? | check | spread sx / torch | other CPU |")
    emit("|---|---|---:|---:|---:|---:|---|---|---:|---:|")
    missed = []
    for r in rows:
        speedup = r["torch"] / r["sx"]
        if r["floor"] is None:
            floor, met = "-", "-"
        else:
            ok = speedup >= r["floor"]
            floor, met = f">= {r['floor']:.1f}x", ("yes" if ok else "**NO**")
            if not ok:
                missed.append(f"{r['op']} {r['shape']}: {speedup:.2f}x < {r['floor']:.1f}x")
        s_sx, s_t = r["spread"]
        emit(f"| {r['op']} | {r['shape']} | {r['torch']:.2f} | {r['sx']:.2f} | {speedup:.2f}x | {floor} | {met} "
             f"| {r['check']} | {s_sx:.0%} / {s_t:.0%} | {pct(r['other'])}{retried(r)} |")
    emit()
    emit("speedup = torch median / scatterx median; spread = interquartile range / median of the repetitions; "
         "other CPU = share of all CPUs used by other processes (or stolen) while the row ran, from /proc/stat; "
         f"a row above {NOISY:.0%} is run again (up to {RETRIES} times, full size only) and the quietest run is shown.")
    emit(f"Other processes used {pct(whole_run.other_fraction())} of the CPUs over the whole run.")
    n_floors = sum(r["floor"] is not None for r in rows)
    if missed:
        emit(f"Floors: {n_floors - len(missed)} of {n_floors} met; missed: " + "; ".join(missed) + ".")
    else:
        emit(f"Floors: all {n_floors} met.")
    if failures:
        emit("RESULT CHECK FAILURES: " + "; ".join(failures))
    else:
        emit("Checks: all results agree with torch (tolerances in the module docstring).")

    if args.markdown_out:
        with open(args.markdown_out, "w") as fh:
            fh.write("\n".join(out_lines) + "\n")
    if args.strict and (missed or failures):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

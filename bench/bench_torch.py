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

``--size small`` (10k nodes, 100k edges, 1024 tokens x 1024) is a smoke run; ``--size large`` (2M nodes,
20M edges of 16 float32, the MoE rows as full) takes minutes per row family: pick rows with ``--ops FAMILY``
(scatter_add_, scatter_reduce_, index_add_, index_add_weighted_, gather, index_select).

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

The workloads, their inputs and checks are scatterx.bench.local's (python -m scatterx.bench runs the same
rows without the floors); --json writes the rows in scatterx.bench.results' format (bench/plot.py draws
them).

Usage:
  python bench/bench_torch.py [--threads 2] [--reps 11] [--size full|small|large] [--ops FAMILY ...]
                              [--markdown-out FILE] [--json FILE] [--strict]
"""

from __future__ import annotations

import argparse
import os
import sys



def pct(x: float) -> str:
    return "-" if x != x else f"{x:.0%}"


def retried(row) -> str:
    return f" ({row['attempts']} runs)" if row["attempts"] > 1 else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="threads for both libraries (default 2)")
    ap.add_argument("--reps", type=int, default=11, help="timed repetitions per library and op (default 11)")
    ap.add_argument("--size", choices=("full", "small", "large"), default="full",
                    help="full: the C++ benchmark's sizes (default, about a minute); small: a smoke run of seconds; "
                         "large: a 2M-node, 20M-edge graph (minutes; pick rows with --ops)")
    ap.add_argument("--ops", nargs="+", metavar="FAMILY",
                    help="only these rows, by family: scatter_add_ scatter_reduce_ index_add_ index_add_weighted_ "
                         "gather index_select (default: all)")
    ap.add_argument("--markdown-out", metavar="FILE", help="also write the report (markdown) to FILE")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON (scatterx.bench.results) to FILE")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a floor is missed or a result check fails")
    args = ap.parse_args()
    if args.threads < 1 or args.reps < 1:
        ap.error("--threads and --reps must be positive")

    # Both OpenMP runtimes read this when they start, so it is set before either library loads.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    import scatterx
    from scatterx.bench import local, results
    from scatterx.bench.timing import NOISY, RETRIES, CpuMonitor, measure_pair

    torch.set_num_threads(args.threads)
    out_lines: list[str] = []

    def emit(line: str = "") -> None:
        print(line, flush=True)
        out_lines.append(line)

    for line in local.context_lines(torch, scatterx, args.threads, args.size, args.reps):
        emit(line)
    emit()

    monitor, whole_run = CpuMonitor(), CpuMonitor()
    whole_run.start()
    retries = RETRIES if args.size == "full" else 0  # the smoke run stays quick

    def measure(spec, sx_fn, torch_fn):
        note = lambda text: print(f"  ({spec.op} {spec.workload}: {text})", file=sys.stderr, flush=True)  # noqa: E731
        row = measure_pair(sx_fn, torch_fn, args.reps, retries, monitor, note)
        print(f"  {spec.op:<52} {spec.workload:<22} torch {row['torch_ms']:9.2f} ms  scatterx {row['scatterx_ms']:9.2f} "
              f"ms  x{row['torch_ms'] / row['scatterx_ms']:5.2f}  other CPU {pct(row['other'])}", file=sys.stderr,
              flush=True)
        return row

    def on_data(kind, seconds):
        print(f"{kind.upper()} data generated in {seconds:.1f} s", file=sys.stderr)

    try:
        specs = local.specs(scatterx, torch, args.ops)
    except ValueError as e:
        ap.error(f"--ops: {e}")
    rows, checker = local.run(specs, args.size, torch, measure, on_data)
    failures = checker.failures

    # ---- report ----
    emit("| op | workload | torch ms | scatterx ms | speedup | floor | met? | check | spread sx / torch | other CPU |")
    emit("|---|---|---:|---:|---:|---:|---|---|---:|---:|")
    missed = []
    for r in rows:
        if r["floor"] is None:
            floor, met = "-", "-"
        else:
            ok = r["ratio"] >= r["floor"]
            floor, met = f">= {r['floor']:.1f}x", ("yes" if ok else "**NO**")
            if not ok:
                missed.append(f"{r['op']} {r['workload']}: {r['ratio']:.2f}x < {r['floor']:.1f}x")
        emit(f"| {r['op']} | {r['workload']} | {r['torch_ms']:.2f} | {r['scatterx_ms']:.2f} | {r['ratio']:.2f}x "
             f"| {floor} | {met} | {r['check']} | {r['spread_scatterx']:.0%} / {r['spread_torch']:.0%} "
             f"| {pct(r['other'])}{retried(r)} |")
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
    if args.json:
        for r in rows:
            r["threads"] = args.threads
        results.write(args.json, results.document("local", "bench/bench_torch.py", rows, size=args.size,
                                                  torch=torch.__version__, scatterx=scatterx.__version__))
    if args.strict and (missed or failures):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

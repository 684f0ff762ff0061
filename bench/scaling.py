#!/usr/bin/env python3
"""The scaling table: scatterx's collectives and local ops as ranks, threads and sizes grow.

Runs the two standard suites several times and folds their reports into one markdown table each:

  collectives  build/release/bench/scatterx_bench_collectives under mpirun at each of --ranks (1, 2, 4 by
               default; more ranks than cores run oversubscribed), sizes --min-bytes to --max-bytes by x4,
               beside native MPI in the same run. Each row gives the median time at every rank count and the
               busbw ratio scatterx / MPI; the sizes where scatterx switches algorithm are the thresholds in
               README's Environment table (SCATTERX_DIST_ALLREDUCE_SMALL_BYTES, the 64 KiB single-copy and
               shared-memory block minimums), so the rows on either side show what each switch buys.
  local ops    build/release/bench/scatterx_bench (Google Benchmark) with OMP_NUM_THREADS set to each of
               --threads, at --size small and full: GB/s of the byte model (bench/RESULTS.md) per thread count
               and the speedup over one thread.

Usage:
  python3 bench/scaling.py [--ranks 1,2,4] [--threads 1,2,4] [--min-bytes 1K] [--max-bytes 64M]
                           [--ops all_reduce,all_gather,...] [--skip-local] [--skip-collectives]
                           [--markdown-out FILE]
Run it on a quiet machine: every figure is a median, but the machine is shared by the rank counts in turn.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from datetime import date

from machine import cpu_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIVES = os.path.join(ROOT, "build", "release", "bench", "scatterx_bench_collectives")
LOCAL = os.path.join(ROOT, "build", "release", "bench", "scatterx_bench")
LOCAL_FILTER = ("BM_(scatter_add|index_add|gather|index_select)/(gnn/(uniform|powerlaw)|moe/(permute|unpermute))/"
                "|BM_memcpy/gnn_scatter/omp")


def mpirun(ranks: int):
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def markdown_rows(path: str):
    """The rows of the first table in a markdown file whose header has an 'op' column, as dicts."""
    header = None
    with open(path) as f:
        for line in f:
            if not line.startswith("|"):
                if header:
                    return
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                if "op" in cells:
                    header = cells
                continue
            if set(line.strip()) <= set("|-: "):
                continue
            yield dict(zip(header, cells))


def run_collectives(ranks: int, args) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        md = os.path.join(tmp, "report.md")
        cmd = mpirun(ranks) + ["env", "OMP_NUM_THREADS=1", COLLECTIVES, "--min-bytes", args.min_bytes,
                               "--max-bytes", args.max_bytes, "--factor", "4", "--markdown", md]
        if args.ops:
            cmd += ["--ops", args.ops]
        print(f"-- collectives, {ranks} rank(s)", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return list(markdown_rows(md))


def collective_table(by_ranks: dict) -> list:
    """One row per op and size step: p50 us of scatterx and MPI at each rank count and the busbw ratio. The
    k-th size of an op is one row whatever the rank count (the all-to-alls round their splits per rank count,
    so their byte counts differ slightly); the size column gives the first rank count's."""
    ranks = sorted(by_ranks)
    cells, order = {}, []
    for r in ranks:
        step = {}
        for row in by_ranks[r]:
            if row["impl"] != "scatterx":
                continue
            k = step[row["op"]] = step.get(row["op"], -1) + 1
            if (row["op"], k) not in cells:
                cells[(row["op"], k)] = {"size": int(row["size (B)"])}
                order.append((row["op"], k))
            cells[(row["op"], k)][r] = {"scatterx": row}
        step = {}
        for row in by_ranks[r]:
            if row["impl"] == "scatterx":
                continue
            k = step[row["op"]] = step.get(row["op"], -1) + 1
            cells[(row["op"], k)][r]["MPI"] = row
    head = ["op", "size"]
    for r in ranks:
        head += [f"{r}r scatterx us", f"{r}r MPI us"] + ([] if r == 1 else [f"{r}r busbw sx/MPI"])
    lines = ["| " + " | ".join(head) + " |", "|---|---:|" + "".join("---:|" * (2 if r == 1 else 3) for r in ranks)]
    for key in order:
        line = [key[0], human(cells[key]["size"])]
        for r in ranks:
            pair = cells[key].get(r, {})
            sx, native = pair.get("scatterx", {}), pair.get("MPI", {})
            line += [sx.get("p50 us", "-"), native.get("p50 us", "-")]
            if r != 1:
                line.append(sx.get("busbw sx/MPI", "-") or "-")
        lines.append("| " + " | ".join(line) + " |")
    return lines


def run_local(threads: int, size: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [LOCAL, f"--size={size}", f"--benchmark_filter={LOCAL_FILTER}", "--benchmark_repetitions=3",
           "--benchmark_report_aggregates_only=true", "--benchmark_format=json"]
    print(f"-- local ops, {threads} thread(s), size {size}", file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    medians = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            medians[b["run_name"].removesuffix("/real_time")] = b.get("bytes_per_second", 0.0) / 1e9
    return medians


def local_table(results: dict, threads: list) -> list:
    head = ["benchmark", "size"] + [f"{t} thread(s) GB/s" for t in threads] + [f"x{threads[-1]} / x{threads[0]}"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(threads) + 1)]
    for size in ("small", "full"):
        names = sorted({n for t in threads for n in results.get((t, size), {})})
        for name in names:
            gbs = [results.get((t, size), {}).get(name) for t in threads]
            scale = f"{gbs[-1] / gbs[0]:.2f}x" if gbs[0] and gbs[-1] else "-"
            lines.append("| " + " | ".join([name, size] + [f"{g:.2f}" if g else "-" for g in gbs] + [scale]) + " |")
    return lines


def human(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def int_list(text: str) -> list:
    values = [int(v) for v in re.split(r"[,\s]+", text) if v]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,2,4, got {text!r}")
    return sorted(set(values))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int_list, default=[1, 2, 4])
    ap.add_argument("--threads", type=int_list, default=[1, 2, 4])
    ap.add_argument("--min-bytes", default="1K")
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--ops", default="", help="collectives to run (default: the suite's all)")
    ap.add_argument("--skip-collectives", action="store_true")
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--markdown-out", metavar="FILE")
    args = ap.parse_args()
    for binary, skip in ((COLLECTIVES, args.skip_collectives), (LOCAL, args.skip_local)):
        if not skip and not os.access(binary, os.X_OK):
            ap.error(f"{binary} is not built: cmake --preset release && cmake --build build/release")

    lines = [f"Scaling table, {date.today().isoformat()}, CPU: {cpu_model()}, {os.cpu_count()} logical CPUs", ""]
    if not args.skip_collectives:
        by_ranks = {r: run_collectives(r, args) for r in args.ranks}
        lines += ["Collectives (p50 us of the slowest rank; busbw ratio scatterx / native MPI):", ""]
        lines += collective_table(by_ranks) + [""]
    if not args.skip_local:
        results = {(t, s): run_local(t, s) for t in args.threads for s in ("small", "full")}
        lines += ["Local ops (GB/s of the byte model, medians of 3):", ""]
        lines += local_table(results, args.threads) + [""]
    text = "\n".join(lines)
    print(text)
    if args.markdown_out:
        with open(args.markdown_out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

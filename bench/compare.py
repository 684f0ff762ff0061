#!/usr/bin/env python3
"""Turns scatterx_bench results into a markdown table of GB/s against memcpy.

    compare.py results.json                  # from scatterx_bench --benchmark_format=json (or --benchmark_out=...)
    compare.py build/release/bench/scatterx_bench [--benchmark_* or --size flags...]
                                             # (or --run BENCH): runs it with
                                             # --benchmark_repetitions=5
                                             # --benchmark_report_aggregates_only=true

For every kernel benchmark it prints the median real time, the median GB/s
(1 GB = 1e9 bytes, under the byte model in bench_ops.cpp), the GB/s of the
matching serial and OpenMP memcpy baselines (named in the benchmark's label as
baseline=BM_memcpy/<label>) and the ratio to the faster of the two, then checks
the floors:
    row gather / index_select (BM_gather/*, BM_index_select/*) >= 60% of memcpy
    GNN scatter-add (BM_scatter_add/gnn/*)                      >= 40% of memcpy
With --strict the exit status is 1 when a floor is missed. Python 3 standard
library only.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

FLOORS = [
    (re.compile(r"^BM_(gather|index_select)/"), 0.60, "row gather / index_select"),
    (re.compile(r"^BM_scatter_add/gnn/"), 0.40, "GNN scatter-add"),
]


def load(args):
    if args.run:
        # A filter must keep the memcpy baselines, or there is nothing to compare with.
        extra = [re.sub(r"^--benchmark_filter=(.*)$", r"--benchmark_filter=(\1)|^BM_memcpy/", a) for a in args.extra]
        cmd = [
            args.run,
            "--benchmark_format=json",
            "--benchmark_repetitions=%d" % args.repetitions,
            "--benchmark_report_aggregates_only=true",
        ] + extra
        print("running: " + " ".join(cmd), file=sys.stderr)
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out)
    with open(args.json) as f:
        return json.load(f)


def to_ms(value, unit):
    return value * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def medians(data):
    """Per benchmark: median bytes/s, median real time (ms), label and the
    coefficient of variation of the time over the repetitions (None for one run).

    Uses the 'median' aggregates when present, otherwise the median of the
    iteration runs (one run without repetitions is its own median)."""
    runs, aggs, cvs = {}, {}, {}
    for b in data.get("benchmarks", []):
        # UseRealTime() appends /real_time to every name; drop it for readability.
        name = re.sub(r"/real_time$", "", b.get("run_name", b["name"]))
        if b.get("error_occurred"):
            print("warning: %s failed: %s" % (name, b.get("error_message")), file=sys.stderr)
            continue
        entry = (b.get("bytes_per_second", 0.0), to_ms(b["real_time"], b.get("time_unit", "ns")), b.get("label", ""))
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                aggs[name] = entry
            elif b.get("aggregate_name") == "cv":
                cvs[name] = b["real_time"]  # a fraction: stddev / mean of the repetitions' times
        else:
            runs.setdefault(name, []).append(entry)
    result = {}
    for name in list(runs) + [n for n in aggs if n not in runs]:
        if name in aggs:
            bps, ms, label = aggs[name]
            if not label and name in runs:
                label = runs[name][0][2]
        else:
            entries = runs[name]
            bps = statistics.median(e[0] for e in entries)
            ms = statistics.median(e[1] for e in entries)
            label = entries[0][2]
            if len(entries) > 1 and name not in cvs:
                times = [e[1] for e in entries]
                cvs[name] = statistics.stdev(times) / statistics.mean(times)
        result[name] = {"bps": bps, "ms": ms, "label": label, "cv": cvs.get(name)}
    return result


OP_ORDER = ["gather", "index_select", "scatter_add", "scatter_reduce", "index_add", "scatter"]
VARIANT_ORDER = ["sum", "prod", "mean", "amax", "amin", "uniform", "powerlaw", "permute", "unpermute"]


def order_key(name):
    """Registration order (random interleaving shuffles the JSON): workload, op, reduce, distribution."""
    parts = name.split("/")
    op = parts[0][3:] if parts[0].startswith("BM_") else parts[0]
    rank = lambda xs, x: xs.index(x) if x in xs else len(xs)
    return ([rank(["gnn", "moe"], parts[1] if len(parts) > 1 else ""), rank(OP_ORDER, op)] +
            [rank(VARIANT_ORDER, p) for p in parts[2:]], name)


def is_executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK) and not path.endswith(".json")


def cv_text(cv):
    return "-" if cv is None else "%.0f%%" % (cv * 100)


def baseline_of(name, label):
    m = re.search(r"baseline=BM_memcpy/(\S+)", label or "")
    if m:
        return m.group(1)
    # Fallback when a label was not kept: derive it from the name.
    workload = name.split("/")[1] if "/" in name else ""
    copy_like = name.startswith(("BM_gather/", "BM_index_select/")) or (
        name.startswith("BM_scatter/") and workload == "moe")
    return "%s_%s" % (workload, "gather" if copy_like else "scatter")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("json", nargs="?", help="scatterx_bench JSON output, or the scatterx_bench binary to run")
    p.add_argument("--run", metavar="BENCH", help="run this scatterx_bench binary instead of reading JSON")
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--strict", action="store_true", help="exit 1 when a floor is missed")
    # Flags this script does not know (--benchmark_filter=..., --size=small) go to the benchmark.
    args, args.extra = p.parse_known_args()
    if args.json and not args.run and is_executable(args.json):  # compare.py path/to/scatterx_bench
        args.run, args.json = args.json, None
    if bool(args.json) == bool(args.run):
        p.error("give either a JSON file or --run BENCH")
    if args.extra and not args.run:
        p.error("unknown arguments: " + " ".join(args.extra))

    data = load(args)
    res = medians(data)
    names = sorted(res, key=order_key)
    memcpy = {n: res[n] for n in sorted(res) if n.startswith("BM_memcpy/")}
    kernels = {n: res[n] for n in names if not n.startswith("BM_memcpy/")}

    ctx = data.get("context", {})
    print("Context: %s, %s CPUs, scatterx %s, OpenMP threads %s; GNN %s; MoE %s." % (
        ctx.get("host_name", "?"), ctx.get("num_cpus", "?"), ctx.get("scatterx_version", "?"),
        ctx.get("omp_max_threads", "?"), ctx.get("gnn", "?"), ctx.get("moe", "?")))
    print()
    print("| Benchmark | median time (ms) | cv | GB/s | memcpy serial GB/s | memcpy omp GB/s | vs best memcpy "
          "| floor |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    missed = []
    for name, r in kernels.items():
        base = baseline_of(name, r["label"])
        ser = memcpy.get("BM_memcpy/%s/serial" % base)
        omp = memcpy.get("BM_memcpy/%s/omp" % base)
        best = max([x["bps"] for x in (ser, omp) if x] or [0.0])
        ratio = r["bps"] / best if best else None
        floor_text = ""
        for pattern, floor, what in FLOORS:
            if pattern.search(name):
                if ratio is None:
                    floor_text = "no baseline"
                elif ratio >= floor:
                    floor_text = "met (>= %d%%)" % round(floor * 100)
                else:
                    floor_text = "**MISSED** (>= %d%%; short by %.0f points)" % (round(floor * 100),
                                                                                  (floor - ratio) * 100)
                    missed.append((name, ratio, floor))
                break
        print("| %s | %.2f | %s | %.2f | %s | %s | %s | %s |" % (
            name, r["ms"], cv_text(r["cv"]), r["bps"] / 1e9, "%.2f" % (ser["bps"] / 1e9) if ser else "-",
            "%.2f" % (omp["bps"] / 1e9) if omp else "-", "%.0f%%" % (ratio * 100) if ratio is not None else "-",
            floor_text))
    print()
    print("Baselines:")
    print()
    print("| Benchmark | median time (ms) | cv | GB/s |")
    print("|---|---:|---:|---:|")
    for name, r in memcpy.items():
        print("| %s | %.2f | %s | %.2f |" % (name, r["ms"], cv_text(r["cv"]), r["bps"] / 1e9))
    print()
    if missed:
        print("Floors missed: " + "; ".join("%s at %.0f%% (floor %d%%)" % (n, q * 100, round(f * 100))
                                            for n, q, f in missed))
    else:
        print("All floors met.")
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())

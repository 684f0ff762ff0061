"""python -m scatterx.bench: scatterx beside torch on this machine.

    python -m scatterx.bench [--quick] [--ops OP ...] [--threads N] [--plot] [--out DIR]
    OMP_NUM_THREADS=1 mpirun -n 2 python -m scatterx.bench [--quick] [--ops OP ...] [--plot] [--out DIR]

Alone, it runs the local ops of scatterx.bench.local (the GNN and MoE workloads; --quick: the small sizes,
seconds instead of minutes) beside torch's, with a progress bar on stderr, prints the ratio table (speedup =
torch time / scatterx time, medians of interleaved runs), and writes DIR/local.json. Under mpirun (a world of
more than one rank) it runs the collectives beside gloo (scatterx.bench.collectives; --quick: 1 KiB to 1 MiB)
and rank 0 writes DIR/collectives_gloo_<n>ranks.json. --plot draws the figures of scatterx.bench.plot into
DIR/figures (needs matplotlib). The JSON format is scatterx.bench.results'. Without torch it says so and
exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys

from .local import FAMILIES

COLLECTIVES = ("reduce_scatter", "all_gather", "all_reduce", "broadcast", "all_to_all_single", "all_to_all_v")


def world_size() -> int:
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"):
        if os.environ.get(name):
            return int(os.environ[name])
    return 1


def parse(argv, ws):
    ap = argparse.ArgumentParser(prog="python -m scatterx.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: seconds, not minutes")
    ap.add_argument("--ops", nargs="+", metavar="OP",
                    help=f"only these (commas or spaces): local {', '.join(FAMILIES)}; under mpirun "
                    f"{', '.join(COLLECTIVES)}")
    ap.add_argument("--threads", type=int, help="threads for both libraries (default: OMP_NUM_THREADS, else every "
                    "logical CPU); local ops only")
    ap.add_argument("--reps", type=int, help="timed repetitions per library and op (default 11; --quick 5)")
    ap.add_argument("--retries", type=int, help="reruns of an op (and size) during which other processes used more "
                    "than 10%% of the CPUs, each after waiting for a quiet second (default 2; --quick 0)")
    ap.add_argument("--plot", action="store_true", help="also draw the PNG figures into DIR/figures (matplotlib)")
    ap.add_argument("--out", default="scatterx-bench", metavar="DIR", help="where results go (default ./scatterx-bench)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    args.ops = [o for item in (args.ops or []) for o in item.split(",") if o]
    known = COLLECTIVES if ws > 1 else FAMILIES
    unknown = [o for o in args.ops if o not in known]
    if unknown:
        ap.error(f"unknown op(s) {unknown}; {'under mpirun' if ws > 1 else 'locally'} the ops are {', '.join(known)}")
    if (args.threads is not None and args.threads < 1) or (args.reps is not None and args.reps < 1):
        ap.error("--threads and --reps must be positive")
    if args.retries is None:
        args.retries = 0 if args.quick else 2
    elif args.retries < 0:
        ap.error("--retries must be >= 0")
    return args


def plot_into(out_dir, json_paths) -> None:
    from . import plot, results

    try:
        written = plot.render([d for p in json_paths for d in results.load(p)], os.path.join(out_dir, "figures"))
    except plot.MissingMatplotlib as e:
        print(f"scatterx.bench: no figures: {e}", file=sys.stderr)
        return
    print("figures: " + ", ".join(written))


def table_lines(rows) -> list:
    lines = ["| workload | op | torch ms | scatterx ms | speedup | check |", "|---|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['op']} | {r['torch_ms']:.3f} | {r['scatterx_ms']:.3f} "
                     f"| {r['ratio']:.2f}x | {r['check']} |")
    return lines


def run_local(args, argv) -> int:
    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    if os.environ.get("OMP_NUM_THREADS") != str(threads):
        # OpenMP reads the thread count when a library loads, and scatterx is loaded already: start again with it set.
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.execv(sys.executable, [sys.executable, "-m", "scatterx.bench", *argv])
    try:
        import torch
    except ImportError as e:
        print(f"scatterx.bench: skipped: this benchmark compares scatterx with torch, which is not importable ({e}); "
              "pip install torch")
        return 0
    import scatterx

    from . import local, results
    from .progress import Progress
    from .timing import CpuMonitor, measure_pair

    torch.set_num_threads(threads)
    size, reps = ("small", args.reps or 5) if args.quick else ("full", args.reps or 11)
    for line in local.context_lines(torch, scatterx, threads, size, reps):
        print(line)
    print(flush=True)
    specs = local.specs(scatterx, torch, args.ops or None)
    bar = Progress(len(specs), enabled=not args.no_progress)
    monitor = CpuMonitor()

    def measure(spec, sx_fn, torch_fn):
        row = measure_pair(sx_fn, torch_fn, reps, args.retries, monitor,
                           lambda text: bar.note(f"{spec.workload} {spec.op}: {text}"))
        bar.step(f"{spec.workload} {spec.op}: x{row['torch_ms'] / row['scatterx_ms']:.2f}")
        return row

    rows, checker = local.run(specs, size, torch, measure,
                              lambda kind, s: bar.note(f"{kind} inputs ({size}) generated in {s:.1f} s"))
    bar.done()
    print("\n".join(table_lines(rows)))
    print("\nspeedup = torch median / scatterx median (> 1: scatterx faster).")
    for failure in checker.failures:
        print(f"CHECK FAILED: {failure}")
    for r in rows:
        r["threads"] = threads
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "local.json")
    results.write(path, results.document("local", "scatterx.bench.local", rows, size=size,
                                         torch=torch.__version__, scatterx=scatterx.__version__))
    print(f"results: {path}")
    if args.plot:
        plot_into(args.out, [path])
    return 1 if checker.failures else 0


def run_collectives(args, ws) -> int:
    from . import collectives

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK") or os.environ.get("RANK") or 0)
    path = os.path.join(args.out, f"collectives_gloo_{ws}ranks.json")
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        if os.path.exists(path):
            os.remove(path)  # so that a run that is skipped does not present an old file as its own
    argv = (["--max-bytes", "1M", "--factor", "4"] if args.quick else []) + ["--retries", str(args.retries)]
    if args.ops:
        argv += ["--ops", ",".join(args.ops)]
    status = collectives.main(argv + ["--json", path], progress=not args.no_progress)
    if rank == 0 and os.path.exists(path):
        print(f"results: {path}")
        if args.plot:
            plot_into(args.out, [path])
    return status


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ws = world_size()
    args = parse(argv, ws)
    return run_collectives(args, ws) if ws > 1 else run_local(args, argv)


if __name__ == "__main__":
    sys.exit(main())

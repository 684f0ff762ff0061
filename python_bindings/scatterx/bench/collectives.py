"""scatterx.distributed vs torch.distributed (gloo) on the CPU: the collectives of bench/collectives/ (C++).

Run under MPI (scatterx takes its world from the launcher; gloo's rendezvous uses the same ranks)::

    OMP_NUM_THREADS=1 mpirun -n 2 python bench/bench_collectives_torch.py [--min-bytes 1K] [--max-bytes 64M]
        [--ops ...] [--alloc torch|scatterx] [--markdown FILE] [--json FILE]

(``python -m scatterx.bench`` under mpirun runs this module with a progress bar.) ``--json`` writes the rows
(impl scatterx and gloo) in scatterx.bench.results' format; a gloo row that could not run is left out.

(as root add ``--allow-run-as-root``; more ranks than cores: ``--oversubscribe``). gloo is initialized
from ``OMPI_COMM_WORLD_RANK`` / ``OMPI_COMM_WORLD_SIZE`` (or ``PMI_RANK`` / ``PMI_SIZE``, or ``RANK`` /
``WORLD_SIZE``), ``MASTER_ADDR`` (default 127.0.0.1) and ``MASTER_PORT`` (default 29531). When torch or
scatterx.distributed cannot be imported, the script says so and exits 0.

Pairs, on the very same torch float32 tensors (scatterx reads them through DLPack, without copies), made by
torch (``--alloc torch``, the default) or by ``scatterx.empty`` (``--alloc scatterx``: tensors of 64 KiB to
8 MiB in memory the ranks share, which scatterx copies out of with a memcpy and gloo reads as any tensor):

  reduce_scatter     sxd.reduce_scatter_tensor(out [n], inp [ws*n])  vs  dist.reduce_scatter_tensor
                     (gloo lacks it in many torch versions: the row then says "unsupported")
  all_gather         sxd.all_gather_into_tensor(out [ws*n], inp [n])  vs  dist.all_gather_into_tensor
                     (or, where gloo lacks it, dist.all_gather into views of out: the impl says so)
  all_reduce         sxd.all_reduce(buf), in place  vs  dist.all_reduce(buf); buf restored from a pristine
                     copy before every call, outside the timed region
  broadcast          sxd.broadcast(buf, src=0)  vs  dist.broadcast(buf, src=0); busbw = algbw (nccl-tests)
  all_to_all_single  sxd.all_to_all_single(out, inp, out_splits, in_splits)  vs  dist.all_to_all_single,
                     uneven splits (rank r sends u * ((r + j) % ws + 1) rows of 16 floats to rank j)
  all_to_all_v       sxd.all_to_all_v(inp, in_splits) (works out the receive splits, returns a new tensor)
                     vs  dist.all_to_all_single with the receive splits known beforehand

Columns as the C++ program's (nccl-tests' definitions): size = the gathered output, the reduce-scatter's
input, the all-reduce's tensor, the per-rank send buffer of the all-to-alls, in bytes; algbw = size / time,
busbw = algbw * (ws - 1) / ws (all-reduce: 2 (ws - 1) / ws); GB = 1e9 bytes; ratio = scatterx busbw / gloo
busbw at the medians.

Method: per op and size, --warmup untimed calls of each, then they alternate (scatterx, gloo, ...) for
--iters timed calls each (default 20 * sqrt(64 MiB / size), clamped to [20, 200]). With --timing call (the
default) a barrier precedes every timed call and each call is a sample; with --timing loop (nccl-tests'
method) a barrier precedes --batch calls back to back and their mean time is a sample (iters / batch
samples, at least 5). A sample's time is the slowest rank's (gloo all_reduce MAX of the per-rank times at the
end); p50 and p99 over the samples. The barrier is the same for both libraries: scatterx's by default
(--barrier gloo: gloo's). A rank leaves a barrier when the scheduler runs it, and the call's time on the
first rank out includes the wait for the last. gloo's barrier leaves its ranks asleep in socket waits, and
with more ranks than cores waking them costs the next call, whichever library's, hundreds of microseconds
(4 ranks on 2 vCPUs, a 1 KiB broadcast: 800-1100 us after gloo's barrier, 250-600 us after scatterx's, whose
waiting ranks stay awake, for both libraries; bench/RESULTS.md, "whose barrier"); --timing call pays it once
per call, loop once per batch.
Where every rank is on one host, whose clock they share, each sample is also split in two: the skew (from the
first rank's start to the last's) and the settled time (from the last rank's start to the last rank's end,
per call), which is what the collective itself took once every rank had come; a second table shows both.
"other CPU": the share of the machine that other processes used while the op and
size ran (/proc/stat, minus the ranks' own CPU time); above --noisy the block is run again (--retries times at
most, after waiting up to 30 s for a quiet second) and the quietest attempt is kept.

Checks: once per op and size both run into outputs filled with NaN and are compared: bit-identical for the
all-gather and the all-to-alls, sums within ``torch.allclose(rtol=1e-5, atol=1e-5)``. A failed check is
printed as a FAIL line and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import socket
import sys
import time

from .machine import cpu_model
from .progress import Progress

ROW = 16  # floats per all-to-all row
NOISY = 0.10


def parse_bytes(text: str) -> int:
    t = text.strip().upper()
    for suffix, scale in (("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30), ("KB", 1 << 10), ("MB", 1 << 20),
                          ("GB", 1 << 30), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * scale)
    return int(float(t))


def human(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def env_int(*names, default=None):
    for n in names:
        if os.environ.get(n):
            return int(os.environ[n])
    return default


def proc_busy() -> float:
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def quantile(xs, q):
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def fmt(f: str, v: float) -> str:
    return "-" if v != v else f % v


def pct(v: float) -> str:
    return "-" if v != v else f"{v:.0%}"


def main(argv=None, progress: bool = False) -> int:
    """The benchmark; argv as the command line's (sys.argv[1:] when None). progress: a progress bar on stderr
    instead of a line per op and size."""
    ap = argparse.ArgumentParser(prog="bench_collectives_torch.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--min-bytes", default="1K")
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--iters", type=int, default=0, help="timed calls per library (0: by size, 20 to 200)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--ops", default="reduce_scatter,all_gather,all_reduce,broadcast,all_to_all_single,all_to_all_v")
    ap.add_argument("--timing", choices=["call", "loop"], default="call",
                    help="call: a barrier before each timed call; loop: --batch calls back to back per barrier")
    ap.add_argument("--batch", type=int, default=10, help="calls per sample with --timing loop (default 10)")
    ap.add_argument("--barrier", choices=["scatterx", "gloo"], default="scatterx",
                    help="whose barrier precedes each sample, for both libraries (default scatterx)")
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--noisy", type=float, default=NOISY)
    ap.add_argument("--alloc", choices=["torch", "scatterx"], default="torch",
                    help="who allocates the tensors both libraries get (default torch)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the report (markdown) to FILE")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON (scatterx.bench.results) to FILE")
    args = ap.parse_args(argv)
    min_b, max_b = parse_bytes(args.min_bytes), parse_bytes(args.max_bytes)
    ops = [o for o in args.ops.split(",") if o]
    known = {"reduce_scatter", "all_gather", "all_reduce", "broadcast", "all_to_all_single", "all_to_all_v"}
    if not ops or set(ops) - known or min_b < 1 or max_b < min_b or args.factor < 2 or args.batch < 1:
        ap.error(f"--ops must name some of {sorted(known)}; need 0 < --min-bytes <= --max-bytes, --factor >= 2, "
                 "--batch >= 1")

    rank = env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", default=0)
    ws = env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE", default=1)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        if rank == 0:
            print(f"bench_collectives_torch: skipped: torch is not importable ({e})")
        return 0
    try:
        import scatterx
        import scatterx.distributed as sxd
    except ImportError as e:
        if rank == 0:
            print(f"bench_collectives_torch: skipped: scatterx.distributed is not importable ({e})")
        return 0
    if not dist.is_gloo_available():
        if rank == 0:
            print("bench_collectives_torch: skipped: this torch has no gloo backend")
        return 0

    torch.set_num_threads(1)
    sxd.init_process_group("mpi")
    if sxd.get_rank() != rank or sxd.get_world_size() != ws:
        print(f"rank {rank}: MPI says rank {sxd.get_rank()} of {sxd.get_world_size()}, the environment "
              f"{rank} of {ws}", file=sys.stderr)
        return 2
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", "29531"))
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=ws,
                            timeout=datetime.timedelta(seconds=120))

    lines: list[str] = []

    def emit(s: str = "") -> None:
        if rank == 0:
            print(s, flush=True)
            lines.append(s)

    def note(s: str) -> None:
        if rank == 0:
            bar.note(s) if progress else print(s, file=sys.stderr, flush=True)

    emit(f"torch {torch.__version__} (gloo), scatterx {scatterx.__version__} (scatterx.distributed over MPI), "
         f"Python {platform.python_version()}; {ws} ranks; CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; "
         f"torch threads {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}")
    emit(f"float32; sizes {human(min_b)} to {human(max_b)} (x{args.factor}); "
         + (f"{args.iters} timed calls" if args.iters else "20 * sqrt(64 MiB / size) timed calls (20 to 200)")
         + f" per library after {args.warmup} warm-up calls, interleaved, "
         + (f"{args.barrier} barrier before each; time = slowest rank; p50 / p99 over calls"
            if args.timing == "call" else
            f"{args.barrier} barrier before each {args.batch} back to back (nccl-tests' timing); time = slowest rank's "
            "mean; p50 / p99 over batches")
         + f"; tensors allocated by {args.alloc}")
    emit()

    sync = sxd.barrier if args.barrier == "scatterx" else dist.barrier
    gloo_max = lambda t: dist.all_reduce(t, op=dist.ReduceOp.MAX)  # noqa: E731
    gloo_sum = lambda t: dist.all_reduce(t, op=dist.ReduceOp.SUM)  # noqa: E731

    # The ranks share one clock only on one host: the arrival split below needs it.
    hosts = [None] * ws
    dist.all_gather_object(hosts, socket.gethostname())
    one_host = len(set(hosts)) == 1

    def arrival_split(starts, ends, batch):
        """Per sample, (settled, skew) in seconds: settled is from the last rank's start to the last rank's end
        (per call: / batch), the time a collective takes once every rank has come, which no collective can
        beat; skew is from the first rank's start to the last's, the wait after the barrier that the slowest
        rank's time also holds. Collective; the same on every rank."""
        spans = torch.stack([starts, -starts, ends])
        gloo_max(spans)
        return (spans[2] - spans[0]) / batch, spans[0] + spans[1]

    def other_fraction(t0):
        wall0, busy0, own0 = t0
        own = torch.tensor([time.process_time() - own0], dtype=torch.float64)
        gloo_sum(own)
        wall = time.perf_counter() - wall0
        if rank != 0 or wall * os.cpu_count() * os.sysconf("SC_CLK_TCK") < 50:
            return float("nan")
        return max(0.0, proc_busy() - busy0 - own.item()) / (wall * os.cpu_count())

    def monitor_start():
        return (time.perf_counter(), proc_busy(), time.process_time())

    def wait_quiet(limit=30.0):
        t0 = time.perf_counter()
        while True:
            dist.barrier()
            m = monitor_start()
            time.sleep(1.0)
            other = other_fraction(m)
            flag = torch.tensor([1 if (rank == 0 and (not other > args.noisy or time.perf_counter() - t0 >= limit))
                                 else 0])
            gloo_max(flag)
            if flag.item():
                return time.perf_counter() - t0

    def zeros(*shape):
        if args.alloc == "scatterx":
            return scatterx.empty(*shape, dtype=torch.float32).zero_()
        return torch.zeros(*shape)

    def values(n, seed):
        g = torch.Generator().manual_seed(seed)
        return zeros(n).copy_(torch.rand(n, generator=g) * 2 - 1)

    # ---- cases: dict(bytes, count, factor, exact, sx, ref, reset, outputs) ----
    def make(op, size):
        c = dict(op=op, reset=None, impl="gloo", unsupported=None)
        if op == "reduce_scatter":
            n = max(1, size // (4 * ws))
            inp, out = values(ws * n, 1000 + rank), zeros(n)
            c.update(bytes=ws * n * 4, count=n, factor=(ws - 1) / ws, exact=False, out=out,
                     sx=lambda: sxd.reduce_scatter_tensor(out, inp),
                     ref=lambda: dist.reduce_scatter_tensor(out, inp))

            def ref_check():
                tmp = inp.clone()
                dist.all_reduce(tmp)
                out.copy_(tmp.chunk(ws)[rank])

            c["ref_check"] = ref_check
        elif op == "all_gather":
            n = max(1, size // (4 * ws))
            inp, out = values(n, 2000 + rank), zeros(ws * n)
            views = list(out.chunk(ws))
            c.update(bytes=ws * n * 4, count=n, factor=(ws - 1) / ws, exact=True, out=out,
                     sx=lambda: sxd.all_gather_into_tensor(out, inp),
                     ref=lambda: dist.all_gather_into_tensor(out, inp))
            c["fallback"] = ("gloo all_gather (list)", lambda: dist.all_gather(views, inp))
        elif op == "all_reduce":
            n = max(1, size // 4)
            pristine, buf = values(n, 3000 + rank), zeros(n)
            c.update(bytes=n * 4, count=n, factor=2 * (ws - 1) / ws, exact=False, out=buf,
                     sx=lambda: sxd.all_reduce(buf), ref=lambda: dist.all_reduce(buf),
                     reset=lambda: buf.copy_(pristine))
        elif op == "broadcast":
            n = max(1, size // 4)
            pristine, buf = values(n, 5000), zeros(n)

            def reset():  # the root holds the data; the others' buffers are poisoned for the check
                buf.copy_(pristine) if rank == 0 else buf.fill_(float("nan"))

            c.update(bytes=n * 4, count=n, factor=1.0, exact=True, out=buf, reset=reset,
                     sx=lambda: sxd.broadcast(buf, src=0), ref=lambda: dist.broadcast(buf, src=0))
        else:
            units = ws * (ws + 1) // 2
            u = max(1, size // (4 * ROW * units))
            splits = [u * ((rank + j) % ws + 1) for j in range(ws)]  # sent to j = received from j
            rows = sum(splits)
            inp, out = values(rows * ROW, 4000 + rank).view(rows, ROW), zeros(rows, ROW)
            c.update(bytes=rows * ROW * 4, count=rows * ROW, factor=(ws - 1) / ws, exact=True, out=out,
                     ref=lambda: dist.all_to_all_single(out, inp, splits, splits))
            if op == "all_to_all_single":
                c["sx"] = lambda: sxd.all_to_all_single(out, inp, splits, splits)
            else:
                holder = {}

                def sx_v():
                    holder["r"] = sxd.all_to_all_v(inp, splits)

                c.update(sx=sx_v, reset=lambda: holder.clear(), holder=holder, splits=splits)
        return c

    def check(c, ref):
        """Runs scatterx and `ref` once each into NaN-filled outputs (the all-reduce: from the pristine values)
        and compares; returns (check text, failed), the same on every rank."""
        out = c["out"]
        msg = ""
        if c["reset"]:
            c["reset"]()
        if c["op"] not in ("all_reduce", "broadcast"):
            out.fill_(float("nan"))
        c["sx"]()
        if c["op"] == "all_to_all_v":
            got, rsplits = c["holder"]["r"]
            if list(rsplits) != c["splits"]:
                msg = f"recv_splits {list(rsplits)}, expected {c['splits']}"
            got = got.clone()
        else:
            got = out.clone()
        if c["reset"]:
            c["reset"]()
        if c["op"] not in ("all_reduce", "broadcast"):
            out.fill_(float("nan"))
        ref()
        want = out
        bad = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)  # mismatch flag, max abs diff, bitwise equal
        if msg or got.shape != want.shape or got.dtype != want.dtype:
            bad[0] = 1
            msg = msg or f"shape/dtype {tuple(got.shape)} {got.dtype} vs {tuple(want.shape)} {want.dtype}"
        elif not torch.equal(got, want):
            bad[2] = 0
            d = (got.double() - want.double()).abs()
            bad[1] = float("inf") if torch.isnan(d).any() else d.max().item()
            if c["exact"] or not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
                bad[0] = 1
                msg = f"max abs difference {bad[1].item():.3g}" + (" (bit-identical required)" if c["exact"] else "")
        if msg:
            print(f"FAIL {c['op']} {human(c['bytes'])} rank {rank}: {msg}", file=sys.stderr, flush=True)
        bad[2] = -bad[2]  # max of -bitwise = -(min bitwise)
        gloo_max(bad)
        if bad[0] > 0:
            return "FAIL", True
        if -bad[2] > 0:
            return "exact", False
        return f"max diff {bad[1].item():.1g}", False

    sizes, s = [], min_b
    while s <= max_b:
        sizes.append(s)
        s *= args.factor
    rows, failures = [], 0
    bar = Progress(len(ops) * len(sizes), enabled=progress and rank == 0)
    support: dict[str, str] = {}  # op -> why gloo cannot run it ("" when it can)
    whole = monitor_start()

    for op in ops:
        for size in sizes:
            c = make(op, size)
            # gloo support, decided once per op at its first size (the same outcome on every rank).
            if op in ("reduce_scatter", "all_gather") and op not in support:
                err = ""
                try:
                    c["ref"]()
                except (RuntimeError, NotImplementedError, ValueError, AttributeError) as e:
                    err = (str(e).splitlines() or [type(e).__name__])[0][:200]
                flag = torch.tensor([1 if err else 0])
                gloo_max(flag)
                support[op] = (err or "failed on another rank") if flag.item() else ""
                if support[op]:
                    note(f"  gloo {op}: {support[op]}")
            if support.get(op):
                if "fallback" in c:
                    c["impl"], c["ref"] = c["fallback"]
                else:
                    c["unsupported"] = support[op]
            row = dict(op=op, size=size, bytes=c["bytes"], count=c["count"], factor=c["factor"], impl=c["impl"],
                       sx=(math.nan, math.nan), ref=(math.nan, math.nan), check="-", other=math.nan, attempts=1,
                       settled=[math.nan, math.nan], skew=[math.nan, math.nan])
            if c["unsupported"]:
                # scatterx is timed alone and checked against gloo's all_reduce of the input, sliced
                c["ref"] = None
                row["check"], failed = check(c, c["ref_check"])
                row["check"] += " (vs gloo all_reduce)"
                row["unsupported"] = True
            else:
                row["check"], failed = check(c, c["ref"])
            failures += failed
            iters = args.iters or int(min(200, max(20, 20 * math.sqrt((64 << 20) / size))))
            for attempt in range(1 + args.retries):
                m = monitor_start()
                for _ in range(args.warmup):
                    for fn in (c["sx"], c["ref"]):
                        if fn is None:
                            continue
                        if c["reset"]:
                            c["reset"]()
                        fn()
                batch = 1 if args.timing == "call" else args.batch
                samples = iters if batch == 1 else max(5, iters // batch)
                t = torch.zeros(2, samples, dtype=torch.float64)
                # Each call's start and end on the clock every rank of one host shares (CLOCK_MONOTONIC).
                starts, ends = (torch.zeros(2, samples, dtype=torch.float64) for _ in range(2))
                for i in range(samples):
                    for k, fn in enumerate((c["sx"], c["ref"])):
                        if fn is None:
                            continue
                        if c["reset"]:
                            c["reset"]()
                        sync()
                        t0 = time.perf_counter()
                        for _ in range(batch):
                            fn()
                        t1 = time.perf_counter()
                        t[k, i] = (t1 - t0) / batch
                        starts[k, i], ends[k, i] = t0, t1
                if c["reset"]:
                    c["reset"]()
                gloo_max(t)
                settled, skew = arrival_split(starts, ends, batch)
                other = other_fraction(m)
                if attempt == 0 or (other == other and not other >= row["other"]):
                    ts, tr = (t[0] * 1e6).tolist(), (t[1] * 1e6).tolist()
                    row["sx"] = (quantile(ts, 0.5), quantile(ts, 0.99))
                    row["ref"] = (quantile(tr, 0.5), quantile(tr, 0.99)) if c["ref"] else (math.nan, math.nan)
                    row["other"] = other
                    timed = (True, c["ref"] is not None)
                    row["settled"], row["skew"] = ([quantile((x[k] * 1e6).tolist(), 0.5) if one_host and timed[k]
                                                    else math.nan for k in range(2)] for x in (settled, skew))
                again = torch.tensor([1 if rank == 0 and other > args.noisy and attempt < args.retries else 0])
                gloo_max(again)
                row["attempts"] = attempt + 1
                if not again.item():
                    break
                waited = wait_quiet()
                note(f"  ({op} {human(size)}: other processes used {pct(other)} of the CPUs; waited {waited:.0f} s, "
                     "running it again)")
            # The busbw ratio: both move the same bytes with the same factor, which is 0 on one rank.
            row["ratio"] = row["ref"][0] / row["sx"][0] if row["ref"][0] == row["ref"][0] else math.nan
            bar.step(f"{op} {human(size)}: busbw x{row['ratio']:.2f} {row['impl']}")
            if not progress:
                note(f"  {op:<18} {human(size):>8}  scatterx p50 {row['sx'][0]:10.1f} us  {row['impl']} p50 "
                     f"{row['ref'][0]:10.1f} us  busbw x{row['ratio']:.2f}  [{row['check']}]  other CPU {pct(other)}"
                     + (f"  settled {row['settled'][0]:.1f} / {row['settled'][1]:.1f} us, skew {row['skew'][0]:.1f} / "
                        f"{row['skew'][1]:.1f} us" if one_host else ""))
            rows.append(row)
    bar.done()

    other_all = other_fraction(whole)
    emit("| op | impl | size (B) | count | p50 us | p99 us | algbw GB/s | busbw GB/s | busbw sx/gloo | check "
         "| other CPU |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        def cells(t):
            alg = r["bytes"] / (t[0] * 1e-6) / 1e9 if t[0] == t[0] else math.nan
            return (f"{r['bytes']} | {r['count']} | {fmt('%.1f', t[0])} | {fmt('%.1f', t[1])} | {fmt('%.3f', alg)} "
                    f"| {fmt('%.3f', alg * r['factor'])}")
        other = pct(r["other"]) + (f" ({r['attempts']} runs)" if r["attempts"] > 1 else "")
        emit(f"| {r['op']} | scatterx | {cells(r['sx'])} | {fmt('%.2fx', r['ratio'])} | {r['check']} | {other} |")
        if r.get("unsupported"):
            emit(f"| {r['op']} | gloo | {r['bytes']} | {r['count']} | unsupported: {support[r['op']]} | | | | | | |")
        else:
            emit(f"| {r['op']} | {r['impl']} | {cells(r['ref'])} | | | |")
    emit()
    emit("busbw sx/gloo = scatterx busbw / gloo busbw at the medians; other CPU = share of all CPUs used by other "
         f"processes while the op and size ran (/proc/stat); above {args.noisy:.0%} it is run again (up to "
         f"{args.retries} times) and the quietest run is shown.")
    emit(f"Other processes used {pct(other_all)} of the CPUs over the whole run.")
    if one_host:
        emit()
        emit("After the last rank came (the ranks share one host's clock): settled = last rank's end - last rank's "
             "start, skew = last rank's start - first rank's start, p50 us over the samples; the slowest rank's "
             "time above holds both. settled sx/gloo = gloo's settled p50 / scatterx's.")
        emit()
        emit("| op | size (B) | settled scatterx | settled gloo | settled sx/gloo | skew scatterx | skew gloo |")
        emit("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            st, sk = r["settled"], r["skew"]
            emit(f"| {r['op']} | {r['bytes']} | {fmt('%.1f', st[0])} | {fmt('%.1f', st[1])} | "
                 f"{fmt('%.2fx', st[1] / st[0] if st[0] > 0 else math.nan)} | {fmt('%.1f', sk[0])} | "
                 f"{fmt('%.1f', sk[1])} |")
    emit(f"CHECKS: {failures} op/size pairs FAILED (see the FAIL lines)." if failures else
         "Checks: all results agree with gloo's (bit-identical for the gathers and all-to-alls; sums allclose).")
    if args.markdown and rank == 0:
        with open(args.markdown, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    if args.json and rank == 0:
        write_json(args.json, rows, ws, torch.__version__)
    dist.destroy_process_group()
    sxd.destroy_process_group()
    return 1 if failures else 0


def write_json(path, rows, ws, torch_version) -> None:
    """The rows in scatterx.bench.results' format: a scatterx row and a gloo row per op and size."""
    from . import results

    out = []
    for r in rows:
        for impl, t in (("scatterx", r["sx"]), ("gloo", r["ref"])):
            if t[0] != t[0]:  # not timed (gloo lacks the op)
                continue
            alg = r["bytes"] / (t[0] * 1e-6) / 1e9
            k = 0 if impl == "scatterx" else 1
            out.append(dict(op=r["op"], impl=impl, ranks=ws, bytes=r["bytes"], count=r["count"], dtype="float32",
                            median_us=t[0], p99_us=t[1], algbw_gbps=alg, busbw_gbps=alg * r["factor"],
                            settled_median_us=r["settled"][k], skew_median_us=r["skew"][k]))
            if impl == "gloo" and r["impl"] != "gloo":
                out[-1]["variant"] = r["impl"]  # "gloo all_gather (list)"
    results.write(path, results.document("collectives", "scatterx.bench.collectives", out, torch=torch_version))

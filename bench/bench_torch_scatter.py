#!/usr/bin/env python3
"""scatterx.torch_scatter vs what a PyTorch user writes without torch_scatter, on the CPU.

The GNN graph of bench/bench_torch.py (1M edges x 64 float32 into 100k nodes,
destination index uniform or power-law, the same generated data), and the
three things a GNN layer asks of torch_scatter, each beside its torch-only
equivalent:

  segment_csr    messages sorted by destination, reduced per CSR segment
                 (sum / mean / max), against torch.segment_reduce(offsets=)
  scatter        scatter(src, index, dim=0, dim_size=N, reduce=...) into a
                 new [N, F] tensor, against what PyG does without
                 torch_scatter: zeros(N, F).scatter_reduce_(0, index expanded,
                 src, reduce, include_self=False)
  scatter_softmax  softmax over each destination's incoming edges, against
                 PyG's composite (torch_geometric.utils.softmax): amax
                 scatter, gather back, exp, sum scatter, gather back, divide;
                 then the same with the gradient (forward + backward, as a
                 GAT layer's training step runs it)

Method as bench/bench_torch.py: same thread count for both (OMP_NUM_THREADS
and torch.set_num_threads, set before either loads), three warm-up runs, then
the two alternate for --reps repetitions; medians, speedup = torch / scatterx;
"other CPU" is the share of the machine other processes used meanwhile, and a
row run while it was above 10% waits for a quiet second and runs again (twice
at most). Results are checked against torch before timing (max / segment max
exactly; sums, means and softmax within float32 tolerance); segment_reduce's
max leaves empty segments at -inf where torch_scatter writes 0, so they are
compared on the non-empty segments.

Floors (--strict exits 1 on a miss or a failed check): segment_csr and
scatter with dim_size >= 1.5x torch; scatter_softmax >= 2x.

Usage: python bench/bench_torch_scatter.py [--threads 2] [--reps 11] [--size full|small] [--markdown-out FILE]
       [--ops segment_csr scatter scatter_softmax]   (only those rows; all by default)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from scatterx.bench.data import K_SEED, fill, make_index
from scatterx.bench.local import SIZES, torch_owned
from scatterx.bench.machine import cpu_model
from scatterx.bench.timing import NOISY, RETRIES, CpuMonitor, interleaved, rel_iqr, wait_quiet


def pct(x: float) -> str:
    return "-" if x != x else f"{x:.0%}"

FLOORS = {"segment_csr": 1.5, "scatter": 1.5, "scatter_softmax": 2.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--markdown-out", metavar="FILE")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--ops", nargs="+", choices=sorted(FLOORS), default=sorted(FLOORS),
                    help="which ops to time (default: all)")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    import scatterx
    import scatterx.torch_scatter as ts

    torch.set_num_threads(args.threads)
    sz = SIZES[args.size]
    n, e, f = sz["nodes"], sz["edges"], sz["features"]
    lines: list[str] = []

    def emit(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    emit(f"torch {torch.__version__}, scatterx {scatterx.__version__}; CPU: {cpu_model()}, {os.cpu_count()} logical "
         f"CPUs; threads: {args.threads}; GNN {e} edges x {f} float32 -> {n} nodes; {args.reps} interleaved "
         "repetitions per op, medians")
    emit()
    failures: list[str] = []
    rows = []
    monitor = CpuMonitor()

    def check(name, got, want, exact, mask=None):
        if mask is not None:
            got, want = got[mask], want[mask]
        if exact:
            ok = torch.equal(got, want)
        else:
            ok = torch.allclose(got, want, rtol=1e-5, atol=1e-6)
        if not ok:
            failures.append(f"{name}: max abs difference {(got - want).abs().max().item():.3g}")
        return "exact" if torch.equal(got, want) else ("close" if ok else "MISMATCH")

    def bench(op, shape, sx_fn, torch_fn, chk, floor):
        best = None
        for attempt in range(1 + RETRIES):
            monitor.start()
            t_torch, t_sx = interleaved(sx_fn, torch_fn, args.reps)
            other = monitor.other_fraction()
            if best is None or other < best[3]:
                best = (statistics.median(t_torch), statistics.median(t_sx), (rel_iqr(t_sx), rel_iqr(t_torch)), other)
            if not other > NOISY or args.size != "full":
                break
            wait_quiet(monitor)
        rows.append(dict(op=op, shape=shape, torch=best[0], sx=best[1], spread=best[2], other=best[3], check=chk,
                         floor=floor))
        print(f"  {op:<28} {shape:<14} torch {best[0]:8.2f} ms  scatterx {best[1]:8.2f} ms  "
              f"x{best[0] / best[1]:5.2f}  [{chk}]", file=sys.stderr, flush=True)

    # In torch's own (64-byte aligned) memory, as a PyTorch user's tensors are: see torch_owned.
    messages = torch_owned(fill(e * f, K_SEED + 2, "uniform").reshape(e, f), torch)
    grad_out = torch_owned(fill(e * f, K_SEED + 9, "pm1").reshape(e, f), torch) if "scatter_softmax" in args.ops else None
    for dist, seed in (("uniform", K_SEED + 3), ("powerlaw", K_SEED + 4)):
        idx = torch_owned(make_index(e, n, dist, seed), torch)
        idx2d = idx.view(-1, 1).expand(e, f)
        shape = f"gnn/{dist}"

        # segment_csr over the messages sorted by destination
        order = torch.argsort(idx, stable=True)
        src_sorted = messages.index_select(0, order).contiguous()
        counts = torch.bincount(idx, minlength=n)
        indptr = torch.zeros(n + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        nonempty = counts > 0
        for red in ("sum", "mean", "max") if "segment_csr" in args.ops else ():
            sx_fn = lambda r=red: ts.segment_csr(src_sorted, indptr, reduce=r)  # noqa: E731
            torch_fn = lambda r=red: torch.segment_reduce(src_sorted, r, offsets=indptr, axis=0)  # noqa: E731
            chk = check(f"segment_csr {red} {shape}", sx_fn(), torch_fn(), red == "max", nonempty)
            bench(f"segment_csr ({red})", shape, sx_fn, torch_fn, chk, FLOORS["segment_csr"])

        # scatter into a new [N, F] by dim_size, against PyG's torch-only path
        for red, torch_red in (("sum", "sum"), ("mean", "mean"), ("max", "amax")) if "scatter" in args.ops else ():
            sx_fn = lambda r=red: ts.scatter(messages, idx, dim=0, dim_size=n, reduce=r)  # noqa: E731
            torch_fn = lambda r=torch_red: torch.zeros(n, f).scatter_reduce_(  # noqa: E731
                0, idx2d, messages, r, include_self=False)
            chk = check(f"scatter {red} {shape}", sx_fn(), torch_fn(), red == "max")
            bench(f"scatter ({red}, dim_size)", shape, sx_fn, torch_fn, chk, FLOORS["scatter"])

        def torch_softmax(src=messages):  # torch_geometric.utils.softmax without torch_scatter
            src_max = torch.zeros(n, f).scatter_reduce_(0, idx2d, src.detach(), "amax", include_self=False)
            out = (src - src_max.index_select(0, idx)).exp()
            out_sum = torch.zeros(n, f).scatter_reduce_(0, idx2d, out, "sum", include_self=False) + 1e-16
            return out / out_sum.index_select(0, idx)

        if "scatter_softmax" not in args.ops:
            continue
        sx_fn = lambda: ts.scatter_softmax(messages, idx, dim=0, dim_size=n)  # noqa: E731
        chk = check(f"scatter_softmax {shape}", sx_fn(), torch_softmax(), False)
        bench("scatter_softmax", shape, sx_fn, torch_softmax, chk, FLOORS["scatter_softmax"])

        # a training step's share: the softmax and its gradient for the upstream gradient grad_out
        def train_step(softmax):
            x = messages.detach().requires_grad_(True)
            (grad_x,) = torch.autograd.grad(softmax(x), x, grad_out)
            return grad_x

        sx_train = lambda: train_step(lambda x: ts.scatter_softmax(x, idx, dim=0, dim_size=n))  # noqa: E731
        torch_train = lambda: train_step(torch_softmax)  # noqa: E731
        chk = check(f"scatter_softmax forward + backward {shape}", sx_train(), torch_train(), False)
        bench("scatter_softmax + backward", shape, sx_train, torch_train, chk, FLOORS["scatter_softmax"])

    emit("| op | shape | torch ms | scatterx ms | speedup | floor | met? | check | spread sx / torch | other CPU |")
    emit("|---|---|---:|---:|---:|---:|---|---|---:|---:|")
    missed = []
    for r in rows:
        speedup = r["torch"] / r["sx"]
        met = speedup >= r["floor"]
        if not met:
            missed.append(f"{r['op']} {r['shape']} {speedup:.2f}x < {r['floor']:.1f}x")
        emit(f"| {r['op']} | {r['shape']} | {r['torch']:.2f} | {r['sx']:.2f} | {speedup:.2f}x | >= {r['floor']:.1f}x "
             f"| {'yes' if met else '**NO**'} | {r['check']} | {r['spread'][0]:.0%} / {r['spread'][1]:.0%} "
             f"| {pct(r['other'])} |")
    emit()
    emit(f"Floors: {len(rows) - len(missed)} of {len(rows)} met" + (f"; missed: {'; '.join(missed)}." if missed else "."))
    emit("Checks: " + ("; ".join(failures) if failures else "all results agree with torch."))
    if args.markdown_out:
        with open(args.markdown_out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return 1 if args.strict and (missed or failures) else 0


if __name__ == "__main__":
    sys.exit(main())

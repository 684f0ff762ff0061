#!/usr/bin/env python3
"""The GNN layer's ops on a CUDA GPU, scatterx beside what a PyTorch user writes without it.

The GNN graph of bench/bench_torch.py (1M edges x 64 float32 into 100k nodes,
destination index uniform or power-law, the same generated data) on the GPU:

  gather_scatter   scatterx.gather_scatter(x, src, dst) (sum, mean, weighted
                   sum; also with an IndexPlan built once) against
                   index_select + index_add_ / scatter_reduce_ (the E x F
                   messages materialised)
  scatter          scatterx.torch_scatter.scatter(src, index, dim=0,
                   dim_size=N) against zeros(N, F).scatter_reduce_(...,
                   include_self=False), PyG's torch-only path
  segment_csr      against torch.segment_reduce(offsets=)
  scatter_softmax  the fused kernel against PyG's torch-only composite

Timing: CUDA events around each call, three warm-up calls, then scatterx
and torch alternate for --reps repetitions; medians, speedup = torch /
scatterx. Every result is checked against the torch one first (max exactly,
sums and softmax within float32 tolerance scaled by the largest result). scatterx's results are
deterministic; torch's index_add_ and scatter_reduce_ on CUDA fold with
atomics (order varies run to run).

Usage: python bench/bench_gnn_cuda.py [--reps 21] [--size full|small] [--markdown-out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from scatterx.bench.data import K_SEED, fill, make_index
from scatterx.bench.local import SIZES


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--markdown-out", metavar="FILE")
    args = ap.parse_args()
    import torch

    import scatterx
    import scatterx.torch_scatter as ts

    if not torch.cuda.is_available() or not scatterx.cuda.is_built():
        print("bench_gnn_cuda.py: needs a GPU and scatterx built with the CUDA backend", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    sz = SIZES[args.size]
    n, e, f = sz["nodes"], sz["edges"], sz["features"]
    lines: list[str] = []
    failures: list[str] = []

    def emit(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    def timed(fn) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def bench(op, shape, sx_fn, torch_fn, exact=False):
        got, want = sx_fn(), torch_fn()
        # Sums of a power-law hub's 10^5 terms: torch's atomics and scatterx's chunks round differently, by up to
        # about n u of the sum's magnitude; the tolerance scales with the largest result.
        scale = max(1.0, want.abs().max().item())
        ok = torch.equal(got, want) if exact else torch.allclose(got, want, rtol=1e-4, atol=1e-5 * scale)
        if not ok:
            failures.append(f"{op} {shape}: max abs difference {(got - want).abs().max().item():.3g}")
        for _ in range(3):
            sx_fn(), torch_fn()
        t_sx, t_torch = [], []
        for _ in range(args.reps):
            t_sx.append(timed(sx_fn))
            t_torch.append(timed(torch_fn))
        sx, tt = statistics.median(t_sx), statistics.median(t_torch)
        emit(f"| {op} | {shape} | {tt:.3f} | {sx:.3f} | {tt / sx:.2f}x | {'ok' if ok else '**MISMATCH**'} |")

    emit(f"{torch.cuda.get_device_name()}; torch {torch.__version__}, scatterx {scatterx.__version__}; GNN {e} edges "
         f"x {f} float32 -> {n} nodes; {args.reps} alternating repetitions, CUDA events, medians")
    emit()
    emit("| op | graph | torch ms | scatterx ms | speedup | check |")
    emit("|---|---|---:|---:|---:|---|")
    x = torch.from_numpy(fill(n * f, K_SEED + 1, "uniform").reshape(n, f)).to(dev)
    messages = torch.from_numpy(fill(e * f, K_SEED + 2, "uniform").reshape(e, f)).to(dev)
    weight = torch.rand(e, generator=torch.Generator().manual_seed(K_SEED + 5)).to(dev)
    src = torch.randint(0, n, (e,), generator=torch.Generator().manual_seed(K_SEED + 6)).to(dev)
    for dist, seed in (("uniform", K_SEED + 3), ("powerlaw", K_SEED + 4)):
        dst = torch.from_numpy(make_index(e, n, dist, seed)).to(dev)
        dst2d = dst.view(-1, 1).expand(e, f)
        plan = scatterx.IndexPlan(dst, n)

        def unfused_sum():
            return torch.zeros(n, f, device=dev).index_add_(0, dst, x.index_select(0, src))

        bench("gather_scatter (sum)", dist, lambda: scatterx.gather_scatter(x, src, dst, dim_size=n), unfused_sum)
        bench("gather_scatter (sum, IndexPlan)", dist, lambda: scatterx.gather_scatter(x, src, plan), unfused_sum)
        bench("gather_scatter (weighted sum)", dist,
              lambda: scatterx.gather_scatter(x, src, plan, edge_weight=weight),
              lambda: torch.zeros(n, f, device=dev).index_add_(0, dst, x.index_select(0, src) * weight[:, None]))
        bench("gather_scatter (mean)", dist, lambda: scatterx.gather_scatter(x, src, plan, "mean"),
              lambda: torch.zeros(n, f, device=dev).scatter_reduce_(0, dst2d, x.index_select(0, src), "mean",
                                                                    include_self=False))
        bench("scatter (sum, dim_size)", dist, lambda: ts.scatter(messages, dst, dim=0, dim_size=n, reduce="sum"),
              lambda: torch.zeros(n, f, device=dev).scatter_reduce_(0, dst2d, messages, "sum", include_self=False))
        bench("scatter (max, dim_size)", dist, lambda: ts.scatter(messages, dst, dim=0, dim_size=n, reduce="max"),
              lambda: torch.zeros(n, f, device=dev).scatter_reduce_(0, dst2d, messages, "amax", include_self=False),
              exact=True)

        order = torch.argsort(dst, stable=True)
        sorted_messages = messages.index_select(0, order).contiguous()
        indptr = torch.zeros(n + 1, dtype=torch.int64, device=dev)
        torch.cumsum(torch.bincount(dst, minlength=n), 0, out=indptr[1:])
        bench("segment_csr (sum)", dist, lambda: ts.segment_csr(sorted_messages, indptr, reduce="sum"),
              lambda: torch.segment_reduce(sorted_messages, "sum", offsets=indptr, axis=0))

        def torch_softmax():  # torch_geometric.utils.softmax without torch_scatter
            src_max = torch.zeros(n, f, device=dev).scatter_reduce_(0, dst2d, messages, "amax", include_self=False)
            out = (messages - src_max.index_select(0, dst)).exp()
            out_sum = torch.zeros(n, f, device=dev).scatter_reduce_(0, dst2d, out, "sum", include_self=False) + 1e-16
            return out / out_sum.index_select(0, dst)

        bench("scatter_softmax", dist, lambda: ts.scatter_softmax(messages, dst, dim=0, dim_size=n), torch_softmax)
        bench("scatter_softmax (IndexPlan)", dist, lambda: ts.scatter_softmax(messages, plan, dim=0), torch_softmax)
    emit()
    emit("Checks: " + ("; ".join(failures) if failures else "all results agree with torch."))
    if args.markdown_out:
        with open(args.markdown_out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What one call costs on tensors small enough that the kernel is not the time: scatterx beside torch (CPU).

    OMP_NUM_THREADS=1 python bench/bench_call_cost.py [--rows 64] [--reps 7] [--calls 20000]

GNN layers on small graphs (a molecule batch: tens to hundreds of nodes) and MoE routers call these ops with a
few hundred elements, thousands of times per step: there the Python wrapper, the argument conversion, the
checks and the thread start-up are the whole cost. Each op runs on the same tensors in both libraries
(float32 [rows, 16], an index of 2 * rows entries into rows positions), --calls calls per sample, samples
alternating scatterx / torch --reps times; the table gives the median microseconds per call and torch / scatterx
(above 1: scatterx is cheaper). Results are compared once per op before timing. One thread for both
(torch.set_num_threads(1)): on these sizes neither library splits the work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=64, help="destination rows (default 64; 16 floats each)")
    ap.add_argument("--reps", type=int, default=7, help="samples per library and op (default 7)")
    ap.add_argument("--calls", type=int, default=20000, help="calls per sample (default 20000)")
    args = ap.parse_args(argv)
    try:
        import torch
        import scatterx
        import scatterx.torch_scatter as ts
    except ImportError as e:
        print(f"bench_call_cost: skipped: {e}")
        return 0
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    n, e = args.rows, 2 * args.rows
    x = torch.zeros(n, 16)
    src = torch.randn(e, 16, generator=g)
    index = torch.randint(0, n, (e,), generator=g)
    index2d = index[:, None].expand(e, 16).contiguous()

    # (name, scatterx call, torch call): the same result from the same tensors.
    cases = [
        ("index_select", lambda: scatterx.index_select(src, 0, index), lambda: src.index_select(0, index)),
        ("gather", lambda: scatterx.gather(src, 0, index2d), lambda: torch.gather(src, 0, index2d)),
        ("index_add_", lambda: scatterx.index_add_(x, 0, index, src), lambda: x.index_add_(0, index, src)),
        ("index_add", lambda: scatterx.index_add(x, 0, index, src), lambda: x.index_add(0, index, src)),
        ("scatter_add_", lambda: scatterx.scatter_add_(x, 0, index2d, src), lambda: x.scatter_add_(0, index2d, src)),
        ("scatter_reduce amax", lambda: scatterx.scatter_reduce(x, 0, index2d, src, "amax"),
         lambda: x.scatter_reduce(0, index2d, src, "amax")),
        ("torch_scatter.scatter sum", lambda: ts.scatter(src, index, 0, dim_size=n),
         lambda: torch.zeros(n, 16).index_add_(0, index, src)),
        ("torch_scatter.scatter max", lambda: ts.scatter(src, index, 0, dim_size=n, reduce="max"),
         lambda: torch.zeros(n, 16).scatter_reduce_(0, index2d, src, "amax", include_self=False)),
    ]
    print(f"torch {torch.__version__}, scatterx {scatterx.__version__}, Python {sys.version.split()[0]}; "
          f"float32 [{n}, 16], {e} indices; {args.calls} calls per sample, {args.reps} samples each, alternating; "
          "one thread")
    print()
    print("| op | scatterx us | torch us | torch / scatterx |")
    print("|---|---:|---:|---:|")
    for name, sx_call, torch_call in cases:
        x.zero_()
        mine, theirs = sx_call(), torch_call()
        if name.endswith("_"):  # in place: compare the written tensor, from the same start
            x.zero_()
            sx_call()
            mine = x.clone()
            x.zero_()
            torch_call()
            theirs = x.clone()
        if not torch.allclose(mine, theirs, rtol=1e-5, atol=1e-5):
            print(f"FAIL {name}: scatterx's result differs from torch's")
            return 1
        t = {"sx": [], "torch": []}
        for _ in range(args.reps):
            for side, call in (("sx", sx_call), ("torch", torch_call)):
                t[side].append(timeit.timeit(call, number=args.calls) / args.calls * 1e6)
        s, r = statistics.median(t["sx"]), statistics.median(t["torch"])
        print(f"| {name} | {s:.2f} | {r:.2f} | {r / s:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

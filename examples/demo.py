#!/usr/bin/env python3
"""scatterx from Python: the two workloads of examples/demo.cpp, timed and checked.

 (a) GNN message passing on numpy arrays: a random power-law graph; gather
     the source-node features along the edges (index_select), aggregate the
     messages into their destination nodes with scatter_reduce (sum, mean,
     amax; index broadcast over the features, stride 0) and with index_add_
     (1-d index); check a hub, a typical node and a node without edges
     against a plain numpy loop.
 (b) with torch: MoE token routing on bfloat16 tensors (sort the tokens by
     their top-1 expert, dispatch with index_select, scale per expert,
     combine with index_add_ weighted by the router probability), then one
     training step of a tiny GNN layer (index_select -> linear ->
     scatter_reduce mean -> loss.backward()) whose gradients are compared
     with the same layer written with torch's own ops, in float64.

Usage: python examples/demo.py [--nodes N] [--edges E] [--features F]
                               [--tokens T] [--hidden H] [--threads P]
Exits 1 if a check fails, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

REPS = 3  # times are the best of REPS runs


def best_ms(op, reset=None) -> float:
    best = float("inf")
    for _ in range(REPS):
        if reset is not None:
            reset()
        start = time.perf_counter()
        op()
        best = min(best, (time.perf_counter() - start) * 1e3)
    return best


def step(name: str, what: str, ms: float, nbytes: float | None = None) -> None:
    rate = f"{nbytes / (ms * 1e6):7.2f} GB/s" if nbytes else ""
    print(f"  {name:<9} {what:<46} {ms:8.2f} ms {rate}")


def power_law_ids(rng: np.random.Generator, count: int, nodes: int) -> np.ndarray:
    """count node ids from a Zipf law (exponent 1) over a random permutation of the nodes."""
    cdf = np.cumsum(1.0 / np.arange(1, nodes + 1))
    rank = np.searchsorted(cdf, rng.random(count) * cdf[-1], side="right")
    return rng.permutation(nodes)[np.minimum(rank, nodes - 1)]


# ---- (a) GNN on numpy -----------------------------------------------------------------------------------


def run_gnn(sx, n: int, e: int, f: int) -> int:
    print(f"[GNN] numpy, power-law graph: {n} nodes, {e} edges, {f} float32 features per node")
    start = time.perf_counter()
    rng = np.random.default_rng(20261122)
    src = power_law_ids(rng, e, n)
    dst = power_law_ids(rng, e, n)
    dst_expanded = np.broadcast_to(dst[:, None], (e, f))  # torch_scatter style, stride 0, read-only, no copy
    x = rng.uniform(-1.0, 1.0, size=(n, f)).astype(np.float32)
    in_degree = np.bincount(dst, minlength=n)
    hub = int(in_degree.argmax())
    print(f"  data      generated in {(time.perf_counter() - start) * 1e3:.0f} ms; max in-degree {in_degree[hub]} "
          f"(node {hub}); {np.count_nonzero(in_degree == 0)} nodes have none")

    row, idx = 4.0 * f, 8.0 * e
    copy_bytes = idx + 2 * row * e  # index + rows read + rows written
    reduce_bytes = idx + row * e + 2 * row * n  # the destination read and written once

    messages = np.empty((e, f), dtype=np.float32)
    ms = best_ms(lambda: sx.index_select(x, 0, src, out=messages))
    step("gather", "index_select(x, 0, src, out=messages)", ms, copy_bytes)

    aggregates = {}
    for reduce in ("sum", "mean", "amax"):
        out = np.zeros((n, f), dtype=np.float32)
        # as PyG: zeros and include_self=False, so nodes without edges stay 0
        ms = best_ms(lambda: sx.scatter_reduce_(out, 0, dst_expanded, messages, reduce, include_self=False),
                     reset=lambda: out.fill(0))
        step("aggregate", f"scatter_reduce_({reduce}, dst broadcast)", ms, reduce_bytes)
        aggregates[reduce] = out
    added = np.zeros((n, f), dtype=np.float32)
    ms = best_ms(lambda: sx.index_add_(added, 0, dst, messages), reset=lambda: added.fill(0))
    step("aggregate", "index_add_(dst 1-d)", ms, reduce_bytes)

    # Both sums fold each node's messages in edge order: bit-identical.
    bad = int(not np.array_equal(added, aggregates["sum"]))
    print(f"  check     index_add_ == scatter_reduce_(sum) for all {n * f} values: {'MISMATCH' if bad else 'OK'}")
    # A hub, a typical node and a node without edges, recomputed from x (so the gather is checked too)
    probes = [hub]
    typical = np.flatnonzero((in_degree >= 2) & (in_degree <= 10))
    if typical.size:
        probes.append(int(typical[0]))
    isolated = np.flatnonzero(in_degree == 0)
    if isolated.size:
        probes.append(int(isolated[0]))
    for node in probes:
        sources = src[dst == node]  # in edge order
        total = np.zeros(f, dtype=np.float32)
        biggest = np.full(f, -np.inf, dtype=np.float32)
        for s in sources:  # a plain loop, in float32, in edge order
            total += x[s]
            np.maximum(biggest, x[s], out=biggest)
        deg = len(sources)
        want = {"sum": total, "mean": total / np.float32(deg) if deg else total,
                "amax": biggest if deg else np.zeros(f, dtype=np.float32)}
        miss = sum(not np.array_equal(aggregates[r][node], want[r]) for r in want)
        miss += not np.array_equal(added[node], total)
        print(f"  check     node {node:<7} in-degree {deg:<7} sum, mean, amax, index_add vs a plain loop: "
              f"{'MISMATCH' if miss else 'OK'}")
        bad += miss
    return bad


# ---- (b) MoE and a training step on torch ---------------------------------------------------------------


def run_moe(sx, torch, t: int, h: int, experts: int = 8) -> int:
    print(f"[MoE] torch, {t} tokens x {h} bfloat16 hidden, top-1 routing over {experts} experts")
    gen = torch.Generator().manual_seed(7)
    x = (torch.rand(t, h, generator=gen) * 2 - 1).to(torch.bfloat16)
    # skewed router: expert k with probability ~ 1 / (k + 1); router probability in [0.3, 1)
    expert = torch.multinomial(1.0 / torch.arange(1, experts + 1, dtype=torch.float64), t, replacement=True,
                               generator=gen)
    prob = 0.3 + 0.7 * torch.rand(t, generator=gen)
    scale = 0.5 + 0.25 * torch.arange(experts, dtype=torch.float32)

    start = time.perf_counter()
    perm = torch.sort(expert, stable=True).indices  # perm[j]: the token at sorted position j
    counts = torch.bincount(expert, minlength=experts).tolist()
    step("route", "stable sort by expert", (time.perf_counter() - start) * 1e3)
    print(f"            tokens per expert: {' '.join(map(str, counts))}")

    row, idx = 2.0 * h, 8.0 * t
    dispatched = torch.empty_like(x)
    ms = best_ms(lambda: sx.index_select(x, 0, perm, out=dispatched))
    step("dispatch", "index_select(x, 0, perm, out=)", ms, idx + 2 * row * t)

    # the "experts": scale each expert's rows, then weight each row by its token's router probability
    # (torch ops, not scatterx; each product in float, rounded to bfloat16)
    k, w = expert[perm], prob[perm]
    weighted = ((dispatched * scale[k][:, None]).to(torch.bfloat16) * w[:, None]).to(torch.bfloat16)

    combined = torch.zeros_like(x)
    ms = best_ms(lambda: sx.index_add_(combined, 0, perm, weighted), reset=lambda: combined.zero_())
    step("combine", "index_add_(y, 0, perm, weighted)", ms, idx + 3 * row * t)

    # y[t] = bf16(bf16(x[t] * scale[expert[t]]) * prob[t]) for every token, and torch's index_add_ agrees
    want = ((x * scale[expert][:, None]).to(torch.bfloat16) * prob[:, None]).to(torch.bfloat16)
    ref = torch.zeros_like(x).index_add_(0, perm, weighted)
    bad = int(not torch.equal(combined, want)) + int(not torch.equal(combined, ref))
    print(f"  check     combine == unrouted expert computation and == torch index_add_: {'MISMATCH' if bad else 'OK'}")
    return bad


def run_training_step(sx, torch, n: int, e: int, f: int) -> int:
    """One step of a tiny GNN layer, scatterx vs torch, float64."""
    print(f"[train] tiny GNN layer, float64: {n} nodes, {e} edges, {f} features; "
          "index_select -> linear -> scatter_reduce(mean) -> loss.backward()")
    rng = np.random.default_rng(1)
    src = torch.from_numpy(power_law_ids(rng, e, n))
    dst = torch.from_numpy(power_law_ids(rng, e, n))
    dst_expanded = dst.view(-1, 1).expand(e, f)
    x0 = torch.from_numpy(rng.standard_normal((n, f)))
    w0 = torch.from_numpy(rng.standard_normal((f, f)) / np.sqrt(f))
    b0 = torch.from_numpy(rng.standard_normal(f))
    target = torch.from_numpy(rng.standard_normal((n, f)))

    def layer(index_select, scatter_reduce):
        x = x0.clone().requires_grad_()
        lin = torch.nn.Linear(f, f, dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(w0)
            lin.bias.copy_(b0)
        gathered = index_select(x, 0, src)
        messages = lin(gathered)
        out = scatter_reduce(torch.zeros(n, f, dtype=torch.float64), 0, dst_expanded, messages, "mean",
                             include_self=False)
        loss = ((torch.tanh(out) - target) ** 2).mean()
        nodes = f"{gathered.grad_fn.name()}, {out.grad_fn.name()}"  # the backward nodes of the two ops
        loss.backward()
        return loss.detach(), (x.grad, lin.weight.grad, lin.bias.grad), nodes

    start = time.perf_counter()
    loss_sx, grads_sx, nodes_sx = layer(sx.index_select, sx.scatter_reduce)
    ms_sx = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    loss_t, grads_t, nodes_t = layer(torch.index_select, torch.scatter_reduce)
    ms_t = (time.perf_counter() - start) * 1e3
    step("step", "scatterx: forward + backward (one, cold)", ms_sx)
    print(f"            autograd nodes: {nodes_sx}")
    step("step", "torch:    forward + backward (one, cold)", ms_t)
    print(f"            autograd nodes: {nodes_t}")
    diffs = [(a - b).abs().max().item() for a, b in zip(grads_sx, grads_t)]
    loss_diff = (loss_sx - loss_t).abs().item()
    worst = max(diffs)
    ok = worst <= 1e-5 and loss_diff <= 1e-5 and all(g is not None for g in grads_sx)
    print(f"  check     loss {loss_sx.item():.6f} (|diff| {loss_diff:.1e}); max |grad diff| vs torch: "
          f"x {diffs[0]:.1e}, weight {diffs[1]:.1e}, bias {diffs[2]:.1e} (limit 1e-5): {'OK' if ok else 'MISMATCH'}")
    return int(not ok)


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def main() -> int:
    ap = argparse.ArgumentParser(
        description="scatterx demo: GNN message passing (numpy) and MoE routing with a training step (torch)",
        epilog="The training step uses at most 2000 nodes, 20000 edges and 16 features of these sizes.")
    ap.add_argument("--nodes", type=positive, default=100_000, help="graph nodes (default 100000)")
    ap.add_argument("--edges", type=positive, default=1_000_000, help="graph edges (default 1000000)")
    ap.add_argument("--features", type=positive, default=64, help="float32 features per node (default 64)")
    ap.add_argument("--tokens", type=positive, default=8192, help="MoE tokens (default 8192)")
    ap.add_argument("--hidden", type=positive, default=2048, help="bfloat16 hidden size per token (default 2048)")
    ap.add_argument("--threads", type=positive, default=None, help="OpenMP threads (default: OpenMP's own)")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before scatterx's OpenMP runtime starts
    import scatterx

    try:
        import torch
    except ImportError as err:
        torch = None
        torch_missing = f"{type(err).__name__}: {err}"
    if torch is not None and args.threads:
        torch.set_num_threads(args.threads)

    print(f"scatterx {scatterx.__version__} Python demo, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"times are the best of {REPS} runs")
    start = time.perf_counter()
    bad = run_gnn(scatterx, args.nodes, args.edges, args.features)
    if torch is None:
        print(f"[MoE] and [train] skipped: torch is not importable ({torch_missing})")
    else:
        bad += run_moe(scatterx, torch, args.tokens, args.hidden)
        bad += run_training_step(scatterx, torch, min(args.nodes, 2000), min(args.edges, 20000),
                                 min(args.features, 16))
    print(f"{'FAILED: results differ' if bad else 'all checks passed'} in {time.perf_counter() - start:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

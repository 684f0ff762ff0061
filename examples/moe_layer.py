"""A small expert-parallel MoE layer trained for a few steps over scatterx.distributed.moe, checked against
the same layer computed densely on one process.

    mpirun -n 2 python examples/moe_layer.py          (2 to 4 ranks; as root add --allow-run-as-root,
                                                        beyond 2 ranks on 2 cores --oversubscribe)

Each rank holds its own batch of tokens, a replica of the router and the experts it owns (E / W of them,
SwiGLU: w2(silu(x w1) * (x w3))). Per step: the router picks the top-k experts, moe.dispatch sends the
tokens to the experts' ranks, each rank runs its experts over their groups, moe.combine brings the outputs
back weighted by the router's softmax, and a squared-error loss is back-propagated through all of it; the
router's gradient is all-reduced (it is replicated), SGD updates everything.

The check, every step, in float64: every rank also computes the whole layer densely (every rank's tokens,
every expert, plain loops over the top-k) from the same parameters and compares its outputs and all its
gradients (tokens, router, its experts) with the distributed ones. The training is run twice; the two runs
must be bit-identical. Exits 1 on any mismatch. Then it times dispatch + combine alone at a larger size
(float32; bench/bench_moe.py is the full benchmark beside torch.distributed) and prints tokens per second.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
import torch.nn.functional as F

import scatterx.distributed as dist
import scatterx.distributed.nn as dnn
from scatterx.distributed import moe

TOKENS, HIDDEN, FFN, PER_RANK, TOP_K, STEPS, LR = 16, 8, 12, 2, 2, 3, 0.1


def make_params(experts: int):
    g = torch.Generator().manual_seed(0)

    def p(*shape):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) / shape[0] ** 0.5).requires_grad_()

    return {"router": p(HIDDEN, experts),
            "experts": [(p(HIDDEN, FFN), p(HIDDEN, FFN), p(FFN, HIDDEN)) for _ in range(experts)]}


def batch(rank: int, step: int):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(TOKENS, HIDDEN, generator=g, dtype=torch.float64)
    return x, torch.tanh(x @ torch.randn(HIDDEN, HIDDEN, generator=g, dtype=torch.float64))


def swiglu(x, w1, w3, w2):
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def route(router, x):
    weights, idx = torch.topk(torch.softmax(x @ router, dim=1), TOP_K, dim=1)
    return idx, weights


def distributed_step(params, x, target, rank, world):
    experts = PER_RANK * world
    idx, weights = route(params["router"], x)
    recv_x, sizes, handle = moe.dispatch(x, idx, weights, experts)
    groups = torch.split(recv_x, sizes.tolist())
    out = torch.cat([swiglu(groups[e], *params["experts"][rank * PER_RANK + e]) for e in range(PER_RANK)])
    y = moe.combine(out, handle)
    loss = ((y - target) ** 2).sum()
    loss.backward()
    # The router is replicated: its gradient sums over the ranks' tokens.
    router_grad = dnn.all_reduce(params["router"].grad)
    return y.detach(), x.grad, router_grad


def dense_step(params, batches, rank):
    """The whole layer on one process: every rank's tokens, every expert; this rank's share returned."""
    total = 0
    ys = []
    xs = [bx.clone().requires_grad_() for bx, _ in batches]
    for bx, (_, target) in zip(xs, batches):
        idx, weights = route(params["router"], bx)
        y = torch.zeros_like(bx)
        for t in range(bx.shape[0]):
            for j in range(TOP_K):
                y[t] = y[t] + weights[t, j] * swiglu(bx[t:t + 1], *params["experts"][int(idx[t, j])])[0]
        ys.append(y)
        total = total + ((y - target) ** 2).sum()
    total.backward()
    return ys[rank].detach(), xs[rank].grad, params["router"].grad


def train(rank: int, world: int):
    """Returns every step's (y, grads) and checks them against the dense layer; raises on a mismatch."""
    params = make_params(PER_RANK * world)
    dense = make_params(PER_RANK * world)
    history = []
    for step in range(STEPS):
        x, target = batch(rank, step)
        x.requires_grad_()
        y, x_grad, router_grad = distributed_step(params, x, target, rank, world)
        dy, dx_grad, drouter_grad = dense_step(dense, [batch(q, step) for q in range(world)], rank)
        torch.testing.assert_close(y, dy, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(x_grad, dx_grad, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(router_grad, drouter_grad, rtol=1e-10, atol=1e-10)
        mine = range(rank * PER_RANK, (rank + 1) * PER_RANK)
        for e in mine:
            for p, dp in zip(params["experts"][e], dense["experts"][e]):
                torch.testing.assert_close(p.grad, dp.grad, rtol=1e-10, atol=1e-10)
        history.append([y, x_grad, router_grad] + [p.grad.clone() for e in mine for p in params["experts"][e]])
        with torch.no_grad():  # SGD on both copies
            for group in (params, dense):
                group["router"] -= LR * (router_grad if group is params else group["router"].grad)
                group["router"].grad = None
                for e, weights in enumerate(group["experts"]):
                    for p in weights:
                        if p.grad is not None:
                            p -= LR * p.grad
                            p.grad = None
    return history


def throughput(rank: int, world: int, tokens: int = 4096, hidden: int = 1024, reps: int = 5) -> float:
    """Median seconds of one dispatch + combine (identity experts) of `tokens` x `hidden` float32 per rank."""
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(tokens, hidden, generator=g)
    experts = PER_RANK * world
    idx = torch.stack([torch.randperm(experts, generator=g)[:TOP_K] for _ in range(tokens)])
    weights = torch.rand(tokens, TOP_K, generator=g)
    times = []
    for _ in range(reps + 1):  # the first warms the buffers up
        dist.barrier()
        start = time.perf_counter()
        recv_x, _, handle = moe.dispatch(x, idx, weights, experts)
        moe.combine(recv_x, handle)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> int:
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        first, second = train(rank, world), train(rank, world)
        identical = all(torch.equal(a, b) for step_a, step_b in zip(first, second) for a, b in zip(step_a, step_b))
        if not identical:
            raise AssertionError("two runs of the same training differ")
        ok = 1
    except AssertionError as e:
        print(f"[rank {rank}] {e}", file=sys.stderr)
        ok = 0
    flags = torch.tensor([ok], dtype=torch.int64)
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    if rank == 0:
        status = "match" if flags.item() else "MISMATCH"
        print(f"moe_layer: {world} ranks, {STEPS} steps of {TOKENS} tokens/rank, {PER_RANK * world} experts, "
              f"top-{TOP_K}: outputs and gradients {status} the dense float64 layer; two runs bit-identical: "
              f"{'yes' if flags.item() else 'see errors'}")
    seconds = throughput(rank, world)
    if rank == 0:
        print(f"moe_layer: dispatch + combine of 4096 tokens x 1024 float32 per rank, {PER_RANK * world} experts, "
              f"top-{TOP_K}: {seconds * 1e3:.1f} ms (median of 5), {4096 * world / seconds / 1e6:.2f} M tokens/s "
              "over all ranks")
    dist.destroy_process_group()
    return 0 if flags.item() else 1


if __name__ == "__main__":
    sys.exit(main())

"""A 2-layer GraphSAGE (mean aggregation) training step on a graph partitioned over the ranks with
scatterx.distributed.build_halo, checked against the same model on the whole graph in one process.

    mpirun -n 2 python examples/graphsage_dist.py     (2 to 4 ranks; as root add --allow-run-as-root,
                                                       beyond 2 ranks on 2 cores --oversubscribe)

The graph: preferential attachment (a power-law degree distribution with a few hubs), undirected, plus a few
isolated nodes; node ids shuffled and each node given to a random rank (the same seeded rule on every rank).
Each rank keeps the edges that end at its nodes and the features of its nodes. A SAGE layer is
``lin_l(mean of the neighbours' rows) + lin_r(own row)``; the neighbours' rows come from ``halo(h)`` (one
all-to-all per layer) and the mean is scatterx.gather_scatter over ``halo.local_edge_index``. The loss is
the cross-entropy averaged over every node of the graph; the replicated weights' gradients are all-reduced,
then SGD updates them.

The check, in float64: every rank also runs the model on the whole graph in one process and compares the
loss, the logits of the hub (highest degree) and of the isolated nodes it owns (all its logits, in fact),
and the weight gradients. The step is run twice from the same weights; the two runs must be bit-identical.
Prints the step time and the halo bytes; exits 1 on any mismatch.
"""

from __future__ import annotations

import random
import sys
import time

import torch
import torch.nn.functional as F

import scatterx
import scatterx.distributed as dist
import scatterx.distributed.nn as dnn

NODES, ATTACH, ISOLATED, FEATURES, HIDDEN, CLASSES, LR, TIMED_STEPS = 3000, 3, 40, 16, 32, 5, 0.1, 5


def power_law_graph(seed: int = 0):
    """(edge_index [2, E] int64 with both directions of every edge, features [N, F], labels [N]): each new
    node attaches to ATTACH distinct earlier nodes chosen in proportion to their degree; ISOLATED nodes get
    no edge; ids are shuffled so the hubs and the isolated nodes land anywhere."""
    rng = random.Random(seed)
    linked = NODES - ISOLATED
    ends = list(range(ATTACH))  # one entry per edge end: sampling it picks nodes by degree
    pairs = []
    for v in range(ATTACH, linked):
        targets = set()
        while len(targets) < ATTACH:
            targets.add(rng.choice(ends))
        for u in sorted(targets):
            pairs.append((v, u))
            ends += [v, u]
    g = torch.Generator().manual_seed(seed)
    relabel = torch.randperm(NODES, generator=g)
    one_way = relabel[torch.tensor(pairs).t()]
    edge_index = torch.cat([one_way, one_way.flip(0)], 1)
    return edge_index, torch.randn(NODES, FEATURES, generator=g, dtype=torch.float64), \
        torch.randint(CLASSES, (NODES,), generator=g)


def make_params():
    g = torch.Generator().manual_seed(1)

    def p(*shape):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) / shape[-1] ** 0.5).requires_grad_()

    return {"l1": p(HIDDEN, FEATURES), "b1": p(HIDDEN), "r1": p(HIDDEN, FEATURES),
            "l2": p(CLASSES, HIDDEN), "b2": p(CLASSES), "r2": p(CLASSES, HIDDEN)}


def sage(params, x, exchange, edge_index, rows):
    """Two SAGE layers over ``rows`` destination nodes; ``exchange(h)`` gives the rows edge_index[0] indexes."""
    src, dst = edge_index

    def layer(h, n):
        neighbours = scatterx.gather_scatter(exchange(h), src, dst, "mean", dim_size=rows)
        return F.linear(neighbours, params[f"l{n}"], params[f"b{n}"]) + F.linear(h, params[f"r{n}"])

    return layer(torch.relu(layer(x, 1)), 2)


def distributed_step(params, halo, x_local, y_local):
    logits = sage(params, x_local, halo, halo.local_edge_index, halo.num_local)
    loss = F.cross_entropy(logits, y_local, reduction="sum") / NODES
    loss.backward()
    grads = {k: dnn.all_reduce(p.grad) for k, p in params.items()}  # the weights are replicated
    total = loss.detach().clone()
    dist.all_reduce(total)
    with torch.no_grad():
        for k, p in params.items():
            p -= LR * grads[k]
    return total, logits.detach(), grads


def whole_graph_step(params, edge_index, x, y):
    logits = sage(params, x, lambda h: h, edge_index, NODES)
    loss = F.cross_entropy(logits, y, reduction="sum") / NODES
    loss.backward()
    return loss.detach(), logits.detach(), {k: p.grad for k, p in params.items()}


def run(rank: int, world: int):
    """One distributed step from fresh weights, then TIMED_STEPS more for the clock. Every rank runs the
    same collectives whatever its results, so a mismatch is reported instead of leaving a rank waiting."""
    edge_index, x, y = power_law_graph()
    owner = torch.randint(world, (NODES,), generator=torch.Generator().manual_seed(2))
    halo = dist.build_halo(edge_index[:, owner[edge_index[1]] == rank], owner)
    x_local, y_local = x[halo.local_nodes], y[halo.local_nodes]
    loss, logits, grads = distributed_step(make_params(), halo, x_local, y_local)
    params = make_params()
    seconds = []
    for _ in range(TIMED_STEPS):
        dist.barrier()
        start = time.perf_counter()
        distributed_step(params, halo, x_local, y_local)
        seconds.append(time.perf_counter() - start)
        for p in params.values():
            p.grad = None
    return {"loss": loss, "logits": logits, "grads": grads, "halo": halo, "x_local": x_local,
            "step_s": sorted(seconds)[TIMED_STEPS // 2]}


def check(result) -> int:
    """Compares a run with the whole graph in one process (raises AssertionError); returns the hub's degree."""
    edge_index, x, y = power_law_graph()
    want_loss, want_logits, want_grads = whole_graph_step(make_params(), edge_index, x, y)
    local_nodes = result["halo"].local_nodes
    close = dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(result["loss"], want_loss, **close)
    degree = torch.bincount(edge_index[1], minlength=NODES)
    hub = int(degree.argmax())
    for node in [hub] + (degree == 0).nonzero().flatten().tolist():
        mine = (local_nodes == node).nonzero().flatten().tolist()
        if mine:
            torch.testing.assert_close(result["logits"][mine[0]], want_logits[node], **close,
                                       msg=lambda m: f"logits of node {node}: {m}")
    torch.testing.assert_close(result["logits"], want_logits[local_nodes], **close)
    for k, grad in result["grads"].items():
        torch.testing.assert_close(grad, want_grads[k], **close, msg=lambda m: f"gradient of {k}: {m}")
    return int(degree[hub])


def main() -> int:
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    first, second = run(rank, world), run(rank, world)
    halo, x_local = first["halo"], first["x_local"]
    hub_degree, failed = 0, 0
    try:
        hub_degree = check(first)
        if not (all(torch.equal(first[k], second[k]) for k in ("loss", "logits"))
                and all(torch.equal(g, second["grads"][k]) for k, g in first["grads"].items())):
            raise AssertionError("two runs of the same step differ")
    except AssertionError as e:
        sys.stderr.write(f"[rank {rank}] {e}\n")
        failed = 1
    # Per step: layer 1's rows forward; layer 2's rows forward and their gradients back (x needs none).
    sent = halo.bytes_per_call(x_local)[0] + 2 * halo.bytes_per_call(x_local.new_empty(0, HIDDEN))[0]
    totals = torch.tensor([failed, sent, halo.num_halo, halo.num_local], dtype=torch.int64)
    dist.all_reduce(totals)
    slowest = torch.tensor([first["step_s"]], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    failed_ranks, sent_bytes, halo_rows, owned_rows = totals.tolist()
    if rank == 0:
        verdict = f"MISMATCH on {failed_ranks} rank(s), see above" if failed_ranks else "match; two runs bit-identical"
        print(f"graphsage_dist: {world} ranks, {NODES} nodes ({ISOLATED} isolated, hub degree {hub_degree}), "
              f"{halo.local_edge_index.shape[1]} edges on rank 0; loss {first['loss'].item():.6f}; loss, hub and "
              f"isolated logits, weight gradients vs the whole graph in float64 (1e-12): {verdict}")
        print(f"graphsage_dist: step {slowest.item() * 1e3:.2f} ms (median of {TIMED_STEPS}, slowest rank); "
              f"{halo_rows} halo rows for {owned_rows} owned; halo bytes per step {sent_bytes} (all ranks, both "
              "layers, forward and backward)")
    dist.destroy_process_group()
    return 1 if failed_ranks else 0


if __name__ == "__main__":
    sys.exit(main())

"""A sharded embedding bag trained for one step, checked against torch.nn.functional.embedding_bag over the
whole table on one process, then timed.

    mpirun -n 2 python examples/embedding_bag_dist.py      (1 to 4 ranks; as root add --allow-run-as-root,
                                                             beyond 2 ranks on 2 cores --oversubscribe)

Each rank builds the same table from a seed and keeps its block of rows
(ShardedEmbeddingBag.from_pretrained, row-wise sharding), draws its own batch of bags (Zipf-skewed ids, so
the hot rows live on rank 0; lengths 0 to 30, empty bags included), and pools them in "mean" mode: the ids
travel to the ranks owning their rows, are pooled there, and the partial bags come back. Then a loss, its
backward (the gradient rows go back to their owners) and the fused SGD step on the shard.

The check, in float64: every rank also computes every rank's bags over the whole table with torch, the same
loss, its gradient and the SGD step, and compares its outputs and its shard after the step. Then the timing:
a float32 table of --rows x --dim, --batch bags of about 20 ids per rank, the median forward over 5 calls;
bench/bench_embedding.py is the full benchmark beside torch.distributed. Exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import scatterx.distributed as dist

ROWS, DIM, BAGS, LR = 5000, 16, 300, 0.5


def bags_of(rank: int, rows: int, bags: int, max_len: int = 30):
    """This rank's batch: (ids, offsets), Zipf-skewed ids (p(i) ~ 1 / (i + 1)), lengths in [0, max_len]."""
    g = torch.Generator().manual_seed(100 + rank)
    lengths = torch.randint(0, max_len + 1, (bags,), generator=g)
    cdf = torch.cumsum(1.0 / torch.arange(1, rows + 1, dtype=torch.float64), 0)
    u = torch.rand(int(lengths.sum()), generator=g, dtype=torch.float64)
    ids = torch.searchsorted(cdf / cdf[-1], u).clamp_(max=rows - 1)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]])
    return ids, offsets


def check(rank: int, world: int) -> float:
    """One training step against the whole-table reference; returns the largest difference."""
    table = torch.randn(ROWS, DIM, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    bag = dist.ShardedEmbeddingBag.from_pretrained(table, freeze=False, mode="mean")
    lo, hi = bag.shard_range
    ids, offsets = bags_of(rank, ROWS, BAGS)
    target = torch.randn(BAGS, DIM, generator=torch.Generator().manual_seed(rank), dtype=torch.float64)
    out = bag(ids, offsets)
    (out * target).sum().backward()
    bag.weight.grad = None  # the fused update reads the sparse rows the backward kept
    bag.sgd_step(LR)

    full = table.clone().requires_grad_()
    loss = 0
    for q in range(world):  # every rank's bags: the shard's gradient sums over all of them
        q_ids, q_offsets = bags_of(q, ROWS, BAGS)
        q_out = F.embedding_bag(q_ids, full, q_offsets, mode="mean")
        if q == rank:
            want = q_out.detach()
        loss = loss + (q_out * torch.randn(BAGS, DIM, generator=torch.Generator().manual_seed(q),
                                           dtype=torch.float64)).sum()
    loss.backward()
    stepped = (table - LR * full.grad)[lo:hi]
    return max((out.detach() - want).abs().max().item(), (bag.weight.detach() - stepped).abs().max().item())


def lookups_per_second(rank: int, world: int, rows: int, dim: int, batch: int) -> float:
    """Ids looked up per second over all ranks: the median of 5 forward calls (after one to warm up)."""
    torch.manual_seed(rank)
    bag = dist.ShardedEmbeddingBag(rows, dim, mode="sum", dtype=torch.float32)
    ids, offsets = bags_of(rank, rows, batch, max_len=40)
    total = torch.tensor([ids.numel()], dtype=torch.int64)
    dist.all_reduce(total)
    times = []
    with torch.no_grad():
        for _ in range(6):
            dist.barrier()
            start = time.perf_counter()
            bag(ids, offsets)
            times.append(time.perf_counter() - start)
    seconds = torch.tensor([statistics.median(times[1:])], dtype=torch.float64)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # the slowest rank's
    return total.item() / seconds.item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16384)
    args = parser.parse_args()
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    worst = torch.tensor([check(rank, world)], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    ok = worst.item() < 1e-12
    rate = lookups_per_second(rank, world, args.rows, args.dim, args.batch)
    if rank == 0:
        print(f"embedding_bag_dist: {world} ranks, a {ROWS} x {DIM} float64 table sharded by rows, {BAGS} bags/rank "
              f"(Zipf ids, mean): outputs and the shard after one SGD step {'match' if ok else 'DO NOT MATCH'} "
              f"torch over the whole table (max difference {worst.item():.1e})")
        print(f"embedding_bag_dist: {args.rows} x {args.dim} float32, {args.batch} bags of ~20 ids per rank (sum): "
              f"{rate / 1e6:.1f} M lookups/s over all ranks")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

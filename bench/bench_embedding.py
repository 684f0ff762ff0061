#!/usr/bin/env python3
"""Sharded embedding bags: scatterx.distributed.ShardedEmbeddingBag beside the same lookup written with
torch.distributed (gloo) all_to_all + torch's EmbeddingBag, in one run under mpirun.

    mpirun -n 2 python bench/bench_embedding.py             (and -n 4 --oversubscribe; as root --allow-run-as-root)

Tables: --tables (4) x --rows (1M) x --dim (128) float32, each sharded row-wise over the ranks (rank r owns
a contiguous block; each rank builds only its shard). Per rank and table: --batch (16384) bags of 10..30 ids
(20 on average), sum pooling, ids uniform or Zipf-skewed (--ids zipf, s = 1.05; hot rows on rank 0).

torch's side (the same algorithm, in torch): the ids sorted by owner (stable), the per-owner counts
exchanged with all_to_all_single, the local rows and bag numbers sent with all_to_all_single, the owner
pooling each (source rank, bag) run with torch.nn.functional.embedding_bag over its shard, the partial rows
sent back with all_to_all_single and index_add_-ed into the bags. scatterx's side is one call per table
(the same steps in C++ over scatterx's shared-memory all-to-alls). Forward only.

Both outputs are compared before timing. Timing: a barrier, then the 4 tables' lookups; a repetition's time
is the slowest rank's; the sides alternate for --reps repetitions after a warm-up; medians. Lookups/s: ids
looked up by all ranks over all tables, per second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per rank on both sides (the ranks share the cores)

import torch  # noqa: E402

import scatterx.distributed as sxd  # noqa: E402
from dist_timing import alternate  # noqa: E402


def make_bags(batch, rows, ids, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, 31, (batch,), generator=g)
    n = int(lengths.sum())
    if ids == "zipf":  # inverse-CDF sampling of p(i) ~ (i + 1)^-1.05
        cdf = torch.cumsum(torch.arange(1, rows + 1, dtype=torch.float64) ** -1.05, 0)
        x = torch.searchsorted(cdf / cdf[-1], torch.rand(n, generator=g, dtype=torch.float64)).clamp_(max=rows - 1)
    else:
        x = torch.randint(0, rows, (n,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]])
    return x, offsets, lengths


class TorchShardedBag:
    """The baseline: the same lookup in torch.distributed (gloo) + torch.nn.functional.embedding_bag."""

    def __init__(self, shard, lo, block, world):
        self.shard, self.lo, self.block, self.world = shard, lo, block, world

    def forward(self, x, lengths):
        import torch.distributed as tdist

        bags = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        owner = x // self.block
        order = torch.argsort(owner, stable=True)
        sent = torch.stack([x[order] - owner[order] * self.block, bags[order]], 1)
        send_counts = torch.bincount(owner, minlength=self.world)
        recv_counts = torch.empty_like(send_counts)
        tdist.all_to_all_single(recv_counts, send_counts)
        got = sent.new_empty(int(recv_counts.sum()), 2)
        tdist.all_to_all_single(got, sent, recv_counts.tolist(), send_counts.tolist())
        # Owner: one partial per (source, bag) run; source blocks are contiguous in got.
        source = torch.repeat_interleave(torch.arange(self.world), recv_counts)
        key = source * len(lengths) * 4 + got[:, 1]  # bag numbers < 4 * B on every rank here
        new = torch.ones(len(key), dtype=torch.bool)
        new[1:] = key[1:] != key[:-1]
        starts = torch.nonzero(new).reshape(-1)
        partial = torch.nn.functional.embedding_bag(got[:, 0], self.shard, starts, mode="sum")
        part_send = torch.bincount(source[starts], minlength=self.world)
        # Requester: the bags with ids on each owner, in owner then bag order (known locally).
        sorted_owner, sorted_bag = owner[order], bags[order]
        mine = torch.ones(len(order), dtype=torch.bool)
        mine[1:] = (sorted_owner[1:] != sorted_owner[:-1]) | (sorted_bag[1:] != sorted_bag[:-1])
        part_bag = sorted_bag[mine]
        part_recv = torch.bincount(sorted_owner[mine], minlength=self.world)
        parts = partial.new_empty(len(part_bag), partial.shape[1])
        tdist.all_to_all_single(parts, partial, part_recv.tolist(), part_send.tolist())
        return torch.zeros(len(lengths), partial.shape[1]).index_add_(0, part_bag, parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16384)
    ap.add_argument("--ids", choices=["uniform", "zipf"], default="uniform")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--port", type=int, default=29541)
    args = ap.parse_args()
    import torch.distributed as tdist

    sxd.init_process_group("mpi")
    rank, world = sxd.get_rank(), sxd.get_world_size()
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)
    torch.set_num_threads(1)

    sx_bags, torch_bags, inputs = [], [], []
    for t in range(args.tables):
        bag = sxd.ShardedEmbeddingBag(args.rows, args.dim, "sum", dtype=torch.float32)
        lo, hi = bag.shard_range
        torch_bags.append(TorchShardedBag(bag.weight.detach(), lo, -(-args.rows // world), world))
        sx_bags.append(bag)
        inputs.append(make_bags(args.batch, args.rows, args.ids, 1000 * t + rank))
    ids = sum(len(x) for x, _, _ in inputs)

    def run(side):
        with torch.no_grad():
            if side == "scatterx":
                return [b(x, o) for b, (x, o, _) in zip(sx_bags, inputs)]
            return [b.forward(x, n) for b, (x, _, n) in zip(torch_bags, inputs)]

    ok = all(torch.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(run("scatterx"), run("torch")))
    times = alternate(run, args.reps)
    totals = torch.tensor([ids], dtype=torch.int64)
    sxd.all_reduce(totals)
    oks = torch.tensor([int(ok)], dtype=torch.int64)
    sxd.all_reduce(oks, op=sxd.ReduceOp.MIN)
    if rank == 0:
        t_sx, t_t = statistics.median(times["scatterx"]), statistics.median(times["torch"])
        n = int(totals[0])
        print(f"sharded embedding bags (forward, sum), {world} ranks, {args.tables} tables x {args.rows} rows x "
              f"{args.dim} fp32 row-wise; per rank and table {args.batch} bags x ~20 ids ({args.ids}); "
              f"{args.reps} reps, medians of the slowest rank; torch {torch.__version__} gloo")
        print(f"  scatterx {t_sx * 1e3:8.1f} ms ({n / t_sx / 1e6:6.2f} M lookups/s)   torch gloo + EmbeddingBag "
              f"{t_t * 1e3:8.1f} ms ({n / t_t / 1e6:6.2f} M lookups/s)   speedup {t_t / t_sx:5.2f}x   "
              f"outputs agree: {'yes' if oks.item() else 'NO'}")
    tdist.destroy_process_group()
    sxd.destroy_process_group()
    return 0 if oks.item() else 1


if __name__ == "__main__":
    sys.exit(main())

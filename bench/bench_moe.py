#!/usr/bin/env python3
"""MoE dispatch + combine: scatterx.distributed.moe beside the same routing written with torch.distributed
(gloo) the way Megatron-LM's all-to-all token dispatcher does it, in one run under mpirun.

    mpirun -n 2 python bench/bench_moe.py               (and -n 4 --oversubscribe; as root --allow-run-as-root)

Per rank: T tokens x H bfloat16 (default 8192 x 2048), E experts (16) owned contiguously, top-k (2) routing
drawn from a skewed expert popularity (Zipf-like, s = 1.2, a random permutation of the experts, the same on
every rank) so some ranks receive far more than others. The experts are the identity, so each side's time
is the routing alone: dispatch, then combine (y[t] = sum_k w[t, k] * expert_out), forward only.

torch's side (Megatron's MoEAlltoAllTokenDispatcher, on gloo): the (token, slot) pairs sorted by expert
and the tokens permuted into that order (k copies of a token), the per-expert counts exchanged with an
all_to_all, the rows sent with all_to_all_single, the received chunks regrouped by local expert; on the way
back the reverse regrouping, all_to_all_single, and an index_add_ of the rows times their router weights.
It sends a token once per (token, expert) pair; scatterx once per (token, destination rank).

Both outputs are compared (bfloat16 tolerance) before timing. Timing: a barrier, then the call; a
repetition's time is the slowest rank's; the sides alternate for --reps repetitions after a warm-up;
medians. Bytes: rows each side sends to other ranks (its own rank's rows stay home), per rank, summed over
ranks, beside the minimum (one copy per token and destination rank); scatterx's metadata (k int64 local
expert ids and k float64 weights per row, one small message) is counted separately.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

# One thread per rank on both sides (set before torch and scatterx start OpenMP): the ranks already share
# the cores, and idle OpenMP threads spinning at barriers would take them from the working ranks.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import scatterx.distributed as sxd  # noqa: E402
from scatterx.distributed import moe  # noqa: E402
from dist_timing import alternate  # noqa: E402


def routing(tokens, experts, k, rank, seed=0):
    g = torch.Generator().manual_seed(seed)
    popularity = torch.arange(1, experts + 1, dtype=torch.float64) ** -1.2
    popularity = popularity[torch.randperm(experts, generator=g)]
    g.manual_seed(seed + 1 + rank)
    idx = torch.multinomial(popularity.expand(tokens, -1), k, replacement=False, generator=g)
    w = torch.softmax(torch.randn(tokens, k, generator=g), dim=1)
    return idx, w


def torch_dispatch_combine(x, idx, w, experts, world, group):
    """Megatron-LM's all-to-all dispatcher, forward, with identity experts."""
    import torch.distributed as tdist

    tokens, k = idx.shape
    local = experts // world
    flat = idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    permuted = x.index_select(0, order // k)
    counts = torch.bincount(flat, minlength=experts)
    send_counts = counts.view(world, local).contiguous()
    recv_counts = torch.empty_like(send_counts)
    tdist.all_to_all_single(recv_counts, send_counts, group=group)
    in_splits = send_counts.sum(1).tolist()
    out_splits = recv_counts.sum(1).tolist()
    recv = x.new_empty(sum(out_splits), x.shape[1])
    tdist.all_to_all_single(recv, permuted, out_splits, in_splits, group=group)
    chunks = recv.split(recv_counts.reshape(-1).tolist())           # (source, local expert) order
    grouped = torch.cat([chunks[s * local + e] for e in range(local) for s in range(world)])
    expert_out = grouped                                              # identity experts
    by_expert = expert_out.split(recv_counts.t().reshape(-1).tolist())  # (local expert, source) order
    back = torch.cat([by_expert[e * world + s] for s in range(world) for e in range(local)])
    returned = x.new_empty(tokens * k, x.shape[1])
    tdist.all_to_all_single(returned, back, in_splits, out_splits, group=group)
    weights = w.reshape(-1)[order].to(x.dtype)
    return torch.zeros_like(x).index_add_(0, order // k, returned * weights[:, None]), sum(
        n for r, n in enumerate(in_splits) if r != tdist.get_rank())


def scatterx_dispatch_combine(x, idx, w, experts):
    recv_x, _, handle = moe.dispatch(x, idx, w, experts)
    y = moe.combine(recv_x, handle)
    return y, sum(n for r, n in enumerate(handle.send_splits) if r != sxd.get_rank())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args()
    import torch.distributed as tdist

    sxd.init_process_group("mpi")
    rank, world = sxd.get_rank(), sxd.get_world_size()
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(args.tokens, args.hidden, generator=g).to(torch.bfloat16)
    idx, w = routing(args.tokens, args.experts, args.topk, rank)

    with torch.no_grad():
        y_sx, rows_sx = scatterx_dispatch_combine(x, idx, w, args.experts)
        y_t, rows_t = torch_dispatch_combine(x, idx, w, args.experts, world, None)
        ok = torch.allclose(y_sx.float(), y_t.float(), rtol=2e-2, atol=2e-2)
        times = alternate(lambda side: scatterx_dispatch_combine(x, idx, w, args.experts) if side == "scatterx"
                          else torch_dispatch_combine(x, idx, w, args.experts, world, None), args.reps)

    local = args.experts // world
    owner = idx // local
    minimum = sum(len({int(r) for r in owner[t] if int(r) != rank}) for t in range(args.tokens))
    counts = torch.tensor([rows_sx, rows_t, minimum], dtype=torch.int64)
    sxd.all_reduce(counts)
    oks = torch.tensor([int(ok)], dtype=torch.int64)
    sxd.all_reduce(oks, op=sxd.ReduceOp.MIN)
    if rank == 0:
        row_bytes = args.hidden * 2
        t_sx, t_t = statistics.median(times["scatterx"]), statistics.median(times["torch"])
        meta = args.topk * 16
        print(f"moe dispatch+combine, {world} ranks, {args.tokens} tokens x {args.hidden} bf16 per rank, "
              f"{args.experts} experts, top-{args.topk}, skewed routing; {args.reps} reps, medians of the slowest "
              f"rank; torch {torch.__version__} gloo")
        print(f"  scatterx {t_sx * 1e3:8.2f} ms   torch (Megatron-style, gloo) {t_t * 1e3:8.2f} ms   "
              f"speedup {t_t / t_sx:5.2f}x   outputs agree: {'yes' if oks.item() else 'NO'}")
        print(f"  token bytes sent to other ranks: scatterx {int(counts[0]) * row_bytes / 2**20:.1f} MiB, torch "
              f"{int(counts[1]) * row_bytes / 2**20:.1f} MiB, minimum {int(counts[2]) * row_bytes / 2**20:.1f} MiB "
              f"(each way); scatterx metadata {int(counts[0]) * meta / 2**20:.2f} MiB")
    tdist.destroy_process_group()
    sxd.destroy_process_group()
    return 0 if oks.item() else 1


if __name__ == "__main__":
    sys.exit(main())

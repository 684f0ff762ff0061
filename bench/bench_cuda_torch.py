#!/usr/bin/env python3
"""torch's own CUDA ops on the workloads of the scatterx GPU benchmark.

bench/bench_cuda.cpp times scatterx's CUDA kernels; this script times the
torch op that does the same job on the same inputs, so that
bench/gpu_report.py can put the two side by side. The inputs are built by
formulas shared with bench/bench_cuda.cpp and must stay in sync with it:

    splitmix64(x)          the usual splitmix64 finalizer (uint64, mod 2^64)
    uniform(seed, i)       (splitmix64((seed << 32) + i) >> 11) * 2^-53
    uniform_index          idx[i] = floor(uniform(seed, i) * n)
    powerlaw_index         idx[i] = min(n - 1, floor(n * u * u * u)), u = uniform(seed, i)
    skewed_index           idx[i] = min(n - 1, floor(n * u * u * u * u * u * u * u * u))
    permutation_index      idx[i] = (i * 0x9E3779B1 + 7) & (n - 1)   (n a power of two)
    MoE routing            expert of (t, k) = floor(uniform(3, t * K + k) * X);
                           sorted_token_ids = stable argsort of the experts // K
    float data             every byte 0x3f (cudaMemset(0x3f) on the C++ side):
                           0.747 in float32, 0.746 in bfloat16
    random float data      (amax, amin, prod sources) value[i] = 0.5 + w * 2^-24,
                           w = ((i * 0x9E3779B97F4A7C15 mod 2^64) >> 40): a Weyl
                           sequence in [0.5, 1.5) (double, rounded to float32), so that
                           the running extremum and product keep changing and
                           no workload measures a fold that never writes

Workloads: copy; index_select/row_bytes:{512,2048,8192} and
gather_rows/row_bytes:512 on a 1 GiB float32 table; scatter_add/unique (a
permutation); scatter_add and scatter_reduce amax/amin/prod of 2^23 edges x 64
float32 onto 2^20 power-law nodes; scatter_add and scatter_reduce amax of
2^24 float32 elements onto 2^16 skewed destinations; MoE permute (index_select) and weighted
unpermute (index_add_ of rows * router probabilities) of 2^16 tokens x 4096 bfloat16, top-2 of 64 experts.

Timing: per workload 3 warm-up calls, then --iters calls, each between a pair
of CUDA events; outputs that accumulate are reset before each call, outside
the events. Reports the median and p90 seconds, and GB/s under the same byte
model as the C++ benchmark (index read + source read + destination write, or
read-modify-write for the scatters; 1 GB = 1e9 bytes).

    python3 bench/bench_cuda_torch.py [--iters 20] [--filter SUBSTRING] [--json FILE]

Without torch or without a CUDA device it says so and exits 0 (writing a JSON
with empty results when --json is given).
"""

import argparse
import datetime
import gc
import json
import math
import statistics
import struct
import sys

GIB = 1 << 30
DEVICE = "cuda:0"
WARMUP_CALLS = 3

# The C++ benchmark fills float inputs with cudaMemset(0x3f); these are the
# values that byte pattern spells, so torch's fill_ writes the same bits.
FILL_BYTE = 0x3F
FILL_FLOAT32 = struct.unpack("<f", bytes([FILL_BYTE] * 4))[0]  # 0x3f3f3f3f
FILL_BFLOAT16 = struct.unpack("<f", bytes([0, 0, FILL_BYTE, FILL_BYTE]))[0]  # 0x3f3f, exact in bfloat16


# ---------------------------------------------------------------- inputs
# Bit for bit the formulas of bench/bench_cuda.cpp (numpy on the host, then
# copied to the device). numpy is imported lazily so that --help works
# without it.


def splitmix64(x):
    """splitmix64 of a uint64 array; the multiplies wrap mod 2^64 on purpose."""
    import numpy as np

    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform(seed, count):
    """uniform(seed, i) for i in [0, count): float64 in [0, 1)."""
    import numpy as np

    i = np.arange(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = np.uint64((seed << 32) & 0xFFFFFFFFFFFFFFFF) + i
    # The top 53 bits convert to float64 exactly; the scale by 2^-53 is exact too.
    return (splitmix64(x) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def uniform_index(seed, n, count):
    import numpy as np

    return np.floor(uniform(seed, count) * n).astype(np.int64)


def powerlaw_index(seed, n, count):
    """Node 0 is the hottest. n * u * u * u is evaluated left to right, as the
    C++ does, not as u ** 3 (pow may round differently)."""
    import numpy as np

    u = uniform(seed, count)
    return np.minimum(n - 1, np.floor(n * u * u * u).astype(np.int64))


def skewed_index(seed, n, count):
    """Value 0 takes a quarter of the index; the product left to right, as the C++."""
    import numpy as np

    u = uniform(seed, count)
    return np.minimum(n - 1, np.floor(n * u * u * u * u * u * u * u * u).astype(np.int64))


def permutation_index(n):
    """A bijection of [0, n) for n a power of two (odd multiplier mod 2^k)."""
    import numpy as np

    assert n > 0 and n & (n - 1) == 0, "permutation_index needs a power of two"
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return ((i * np.uint64(0x9E3779B1) + np.uint64(7)) & np.uint64(n - 1)).astype(np.int64)


def moe_sorted_token_ids(tokens, top_k, experts):
    """Rows in expert order (a stable sort of the (t, k) slots by expert), each
    row naming its token."""
    import numpy as np

    expert = np.floor(uniform(3, tokens * top_k) * experts).astype(np.int64)
    order = np.argsort(expert, kind="stable")
    return (order // top_k).astype(np.int64)


# ---------------------------------------------------------------- workloads
# Each workload is (name, setup); setup(torch) allocates its tensors and
# returns (op, reset, bytes): op is the timed call, reset (or None) restores
# the destination before each call, untimed; bytes is the byte model of one
# call. The index arrays are cached on the host because several workloads
# share them (and the power-law one takes a while to build).

_host_cache = {}


def cached(key, build):
    if key not in _host_cache:
        _host_cache[key] = build()
    return _host_cache[key]


def device_index(torch, host):
    return torch.from_numpy(host).to(DEVICE)


def device_values(torch, shape, dtype):
    value = FILL_BFLOAT16 if dtype == torch.bfloat16 else FILL_FLOAT32
    return torch.full(shape, value, dtype=dtype, device=DEVICE)


WEYL_STEP = 0x9E3779B97F4A7C15 - (1 << 64)  # the same 64 bits as an int64 (multiplies wrap)


def device_random_values(torch, shape):
    """float32 values of the 'random float data' formula, built on the device in pieces."""
    n = math.prod(shape)
    out = torch.empty(n, dtype=torch.float32, device=DEVICE)
    piece = 1 << 26
    for start in range(0, n, piece):
        i = torch.arange(start, min(n, start + piece), dtype=torch.int64, device=DEVICE)
        w = ((i * WEYL_STEP) >> 40) & 0xFFFFFF  # arithmetic shift; the mask keeps the 24 bits a logical one would
        out[start:start + i.numel()] = 0.5 + w.to(torch.float64) * 2.0**-24
    return out.view(shape)


def setup_copy(torch):
    src = torch.full((GIB,), FILL_BYTE, dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), None, 2 * GIB


def setup_row_gather(row_bytes, use_gather):
    def setup(torch):
        n = GIB // row_bytes
        cols = row_bytes // 4
        table = device_values(torch, (n, cols), torch.float32)
        index = device_index(torch, cached(("uniform", 1, n, n), lambda: uniform_index(1, n, n)))
        # Write into a preallocated output, as the C++ side does (index_select_out / gather_out).
        out = torch.empty((n, cols), dtype=torch.float32, device=DEVICE)
        if use_gather:
            expanded = index[:, None].expand(n, cols)
            op = lambda: torch.gather(table, 0, expanded, out=out)  # noqa: E731
        else:
            op = lambda: torch.index_select(table, 0, index, out=out)  # noqa: E731
        return op, None, 8 * n + 2 * n * row_bytes

    return setup


def setup_scatter_add_unique(torch):
    n = 1 << 21
    self_ = torch.zeros((n, 128), dtype=torch.float32, device=DEVICE)
    index = device_index(torch, permutation_index(n))[:, None].expand(n, 128)
    src = device_values(torch, (n, 128), torch.float32)
    return (lambda: self_.scatter_add_(0, index, src)), self_.zero_, 8 * n + n * 512 + 2 * n * 512


GNN_NODES = 1 << 20
GNN_EDGES = 1 << 23
GNN_FEATURES = 64


def setup_gnn_powerlaw(reduce):
    def setup(torch):
        nodes, edges, features = GNN_NODES, GNN_EDGES, GNN_FEATURES
        host = cached(("powerlaw", 2, nodes, edges), lambda: powerlaw_index(2, nodes, edges))
        index = device_index(torch, host)[:, None].expand(edges, features)
        if reduce == "sum":
            src = device_values(torch, (edges, features), torch.float32)
        else:
            src = device_random_values(torch, (edges, features))
        self_ = torch.empty((nodes, features), dtype=torch.float32, device=DEVICE)
        # The C++ side resets the destination to its fill pattern (0x3f bytes)
        # before each call, so include_self folds in the same values here.
        reset = lambda: self_.fill_(FILL_FLOAT32)  # noqa: E731
        if reduce == "sum":
            op = lambda: self_.scatter_add_(0, index, src)  # noqa: E731
        else:
            op = lambda: self_.scatter_reduce_(0, index, src, reduce=reduce, include_self=True)  # noqa: E731
        return op, reset, 8 * edges + 3 * edges * features * 4

    return setup


SKEWED_DESTINATIONS = 1 << 16
SKEWED_VALUES = 1 << 24


def setup_skewed_elements(reduce):
    def setup(torch):
        n, count = SKEWED_DESTINATIONS, SKEWED_VALUES
        index = device_index(torch, cached(("skewed", 4, n, count), lambda: skewed_index(4, n, count)))
        src = device_values(torch, (count,), torch.float32) if reduce == "sum" else device_random_values(torch, (count,))
        self_ = torch.empty((n,), dtype=torch.float32, device=DEVICE)
        reset = lambda: self_.fill_(FILL_FLOAT32)  # noqa: E731
        if reduce == "sum":
            op = lambda: self_.scatter_add_(0, index, src)  # noqa: E731
        else:
            op = lambda: self_.scatter_reduce_(0, index, src, reduce=reduce, include_self=True)  # noqa: E731
        return op, reset, 12 * count + 8 * n

    return setup


MOE_TOKENS = 1 << 16
MOE_TOP_K = 2
MOE_EXPERTS = 64
MOE_HIDDEN = 4096


def moe_ids(torch):
    host = cached(("moe", MOE_TOKENS, MOE_TOP_K, MOE_EXPERTS),
                  lambda: moe_sorted_token_ids(MOE_TOKENS, MOE_TOP_K, MOE_EXPERTS))
    return device_index(torch, host)


def setup_moe_permute(torch):
    rows = MOE_TOKENS * MOE_TOP_K
    tokens = device_values(torch, (MOE_TOKENS, MOE_HIDDEN), torch.bfloat16)
    ids = moe_ids(torch)
    out = torch.empty((rows, MOE_HIDDEN), dtype=torch.bfloat16, device=DEVICE)
    op = lambda: torch.index_select(tokens, 0, ids, out=out)  # noqa: E731
    return op, None, 8 * rows + 2 * rows * MOE_HIDDEN * 2


def setup_moe_unpermute(torch):
    """The weighted combine as torch code writes it: index_add_ of the rows times their probabilities."""
    rows = MOE_TOKENS * MOE_TOP_K
    expert_out = device_values(torch, (rows, MOE_HIDDEN), torch.bfloat16)
    probs = device_values(torch, (rows,), torch.bfloat16)
    ids = moe_ids(torch)
    out = torch.zeros((MOE_TOKENS, MOE_HIDDEN), dtype=torch.bfloat16, device=DEVICE)
    op = lambda: out.index_add_(0, ids, expert_out * probs[:, None])  # noqa: E731
    return op, out.zero_, 10 * rows + 3 * rows * MOE_HIDDEN * 2


WORKLOADS = (
    [("copy", setup_copy)]
    + [("index_select/row_bytes:%d" % r, setup_row_gather(r, False)) for r in (512, 2048, 8192)]
    + [
        ("gather_rows/row_bytes:512", setup_row_gather(512, True)),
        ("scatter_add/unique/row_bytes:512", setup_scatter_add_unique),
        ("scatter_add/powerlaw/feat:64", setup_gnn_powerlaw("sum")),
    ]
    + [("scatter_reduce/%s/powerlaw/feat:64" % r, setup_gnn_powerlaw(r)) for r in ("amax", "amin", "prod")]
    + [
        ("scatter_add/skewed/elements", setup_skewed_elements("sum")),
        ("scatter_reduce/amax/skewed/elements", setup_skewed_elements("amax")),
    ]
    + [
        ("moe/permute/hidden:4096", setup_moe_permute),
        ("moe/unpermute/hidden:4096", setup_moe_unpermute),
    ]
)


# ---------------------------------------------------------------- timing


def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def time_calls(torch, op, reset, iters):
    """Seconds of each of `iters` calls of op, measured by CUDA events around
    the op alone; reset (the destination) runs before each call, untimed."""
    for _ in range(WARMUP_CALLS):
        if reset is not None:
            reset()
        op()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    seconds = []
    for _ in range(iters):
        if reset is not None:
            reset()
        start.record()
        op()
        stop.record()
        torch.cuda.synchronize()
        seconds.append(start.elapsed_time(stop) / 1e3)  # elapsed_time is in ms
    return seconds


def run_workload(torch, setup, iters):
    op, reset, nbytes = setup(torch)
    seconds = sorted(time_calls(torch, op, reset, iters))
    return {"median_s": statistics.median(seconds), "p90_s": percentile(seconds, 0.9), "bytes": nbytes}


def is_out_of_memory(torch, error):
    # torch.cuda.OutOfMemoryError (a RuntimeError) exists from torch 1.13;
    # before, OOM was a plain RuntimeError told apart by its message.
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(error, oom)) or "out of memory" in str(error)


# ---------------------------------------------------------------- output


def now_iso():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def write_json(path, document):
    with open(path, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")


def markdown_table(results):
    lines = ["| workload | median ms | p90 ms | GB/s |", "|---|---:|---:|---:|"]
    for r in results:
        gbps = r["bytes"] / r["median_s"] / 1e9 if r["median_s"] > 0 else float("nan")
        lines.append("| %s | %.3f | %.3f | %.1f |" % (r["name"], r["median_s"] * 1e3, r["p90_s"] * 1e3, gbps))
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Times torch's CUDA ops on the workloads of bench/bench_cuda.cpp (same inputs).")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per workload (default 20)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument("--filter", metavar="SUBSTRING", default="",
                        help="only the workloads whose name contains SUBSTRING")
    args = parser.parse_args(argv)
    if args.iters < 1:
        parser.error("--iters must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)

    def give_up(reason, torch_version=None):
        # Not an error: the suite runs on machines without torch or a GPU too.
        print("bench_cuda_torch: %s; nothing to measure" % reason)
        if args.json:
            write_json(args.json, {"device": None, "torch": torch_version, "date": now_iso(), "results": []})
        return 0

    try:
        import numpy  # noqa: F401  (the inputs are built with it)
        import torch
    except ImportError as e:
        return give_up("cannot import %s" % (e.name or e))
    if not torch.cuda.is_available():
        return give_up("torch %s sees no CUDA device" % torch.__version__, torch.__version__)

    torch.cuda.set_device(0)
    device = torch.cuda.get_device_name(0)
    print("# torch %s on %s: the workloads of bench/bench_cuda.cpp (%d timed calls each)\n"
          % (torch.__version__, device, args.iters))
    sys.stdout.flush()

    results = []
    skipped = []
    for name, setup in WORKLOADS:
        if args.filter not in name:
            continue
        try:
            result = run_workload(torch, setup, args.iters)
        except RuntimeError as e:
            if not is_out_of_memory(torch, e):
                raise
            print("skipped %s: out of GPU memory" % name)
            skipped.append(name)
            result = None
        # Drop the workload's tensors (the closures, or the OOM traceback's
        # frames, held them) before the next one allocates.
        gc.collect()
        torch.cuda.empty_cache()
        if result is not None:
            result = dict(name=name, **result)
            results.append(result)
            # Progress on stderr; the table on stdout is the result.
            print("%-40s %9.3f ms" % (name, result["median_s"] * 1e3), file=sys.stderr)

    print(markdown_table(results))
    if skipped:
        print("\nskipped (out of GPU memory): " + ", ".join(skipped))
    if args.json:
        write_json(args.json, {
            "device": device,
            "torch": torch.__version__,
            "date": now_iso(),
            "iters": args.iters,
            "results": results,
            "skipped": skipped,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())

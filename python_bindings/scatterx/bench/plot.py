"""PNG figures from benchmark results (scatterx.bench.results' JSON), with matplotlib (imported here only).

    python -m scatterx.bench.plot RESULTS.json ... [-o DIR]        (bench/plot.py is the same command)

Figures, each written when the results hold its rows::

  busbw_<op>.png            collectives: bus bandwidth against message size, log-log, one panel per peer the
                            results measured scatterx beside (MPI from the C++ benchmark, gloo from the torch
                            one: each panel's scatterx line is the run its peer was timed in, interleaved), one
                            line per implementation and rank count (2 ranks solid, 4 dashed, ...). When several
                            files hold the same op, peer, implementation and rank count, the first one given wins.
  local_speedup.png         local ops: speedup over torch (torch time / scatterx time) as bars, one panel per
                            workload; the line at 1x is parity.
  gpu_copy_fraction.png     GPU: each workload's bandwidth as a fraction of the device's copy bandwidth.

Each figure's footnote names the tools that wrote its results, and the date and machine of the first file.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import results

IMPL_COLORS = {"scatterx": "tab:blue", "mpi": "tab:orange", "gloo": "tab:green", "memcpy": "tab:gray"}
IMPL_MARKERS = {"scatterx": "o", "mpi": "s", "gloo": "^", "memcpy": "x"}
RANK_STYLES = {2: "-", 4: "--", 8: ":"}


class MissingMatplotlib(RuntimeError):
    pass


def _pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display), or MissingMatplotlib saying how to get it."""
    try:
        import matplotlib
    except ImportError:
        raise MissingMatplotlib("the figures need matplotlib, which is not installed: pip install matplotlib "
                                "(the results themselves were written as JSON)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _footnote(docs) -> str:
    """'tool a + tool b, 2026-11-25, AMD EPYC (2 CPUs)': the tools of docs, the first one's date and machine."""
    m = docs[0].get("machine", {})
    tools = " + ".join(dict.fromkeys(d.get("tool", "?") for d in docs))
    return f"{tools}, {docs[0].get('date', '?')[:10]}, {m.get('cpu', '?')} ({m.get('logical_cpus', '?')} CPUs)"


def _size_label(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def peer_of(doc) -> str:
    """The implementations a collectives file measured scatterx beside ("mpi", "gloo"), joined by '/'."""
    return "/".join(sorted({r["impl"] for r in doc["rows"]} - {"scatterx"})) or "scatterx alone"


def collective_series(docs) -> dict:
    """{op: {peer: {(impl, ranks): [(bytes, busbw_gbps), ...] sorted by size}}}: one panel per peer
    (peer_of), so each scatterx line is the one measured beside that panel's peer. Of the files holding the
    same op, peer, implementation and rank count, the first is used; rows without a busbw are left out."""
    series, owner = {}, {}
    for i, doc in enumerate(docs):
        peer = peer_of(doc)
        for r in doc["rows"]:
            key = (r["op"], peer, r["impl"], r["ranks"])
            if owner.setdefault(key, i) != i or r["busbw_gbps"] is None:
                continue
            lines = series.setdefault(r["op"], {}).setdefault(peer, {})
            lines.setdefault((r["impl"], r["ranks"]), []).append((r["bytes"], r["busbw_gbps"]))
    for panels in series.values():
        for lines in panels.values():
            for points in lines.values():
                points.sort()
    return series


def plot_collective(plt, op, panels, note, path, dpi) -> None:
    """One log-log panel per peer, side by side, sharing the bandwidth axis."""
    peers = sorted(panels, key=lambda p: (p != "mpi", p))
    fig, axes = plt.subplots(1, len(peers), figsize=(1.2 + 4.6 * len(peers), 4.2), sharey=True, squeeze=False)
    for ax, peer in zip(axes[0], peers):
        lines = panels[peer]
        for (impl, ranks), points in sorted(lines.items(), key=lambda kv: (kv[0][1], kv[0][0] != "scatterx")):
            xs, ys = zip(*points)
            ax.plot(xs, ys, RANK_STYLES.get(ranks, "-."), marker=IMPL_MARKERS.get(impl, "."), markersize=4,
                    color=IMPL_COLORS.get(impl), label=f"{impl}, {ranks} ranks")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({x for pts in lines.values() for x, _ in pts})
        ticks = sizes if len(sizes) <= 8 else sizes[:: -(-len(sizes) // 8)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([_size_label(x) for x in ticks], rotation=30, ha="right")
        ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)  # the sizes are the ticks
        ax.set_xlabel("message size (nccl-tests' definition)")
        ax.set_title(f"{op}: scatterx beside {peer}", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("bus bandwidth, GB/s")
    fig.text(0.01, 0.01, note, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def plot_local(plt, rows, note, path, dpi) -> None:
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    heights = [len([r for r in rows if r["workload"] == w]) for w in workloads]
    fig, axes = plt.subplots(len(workloads), 1, figsize=(7.5, 1.1 + 0.32 * sum(heights) + 0.5 * len(workloads)),
                             sharex=True, gridspec_kw={"height_ratios": heights}, squeeze=False)
    top = max([r["ratio"] for r in rows if r["ratio"] is not None] + [1.0])
    for ax, w in zip(axes[:, 0], workloads):
        mine = [r for r in rows if r["workload"] == w and r["ratio"] is not None]
        ys = range(len(mine))
        ratios = [r["ratio"] for r in mine]
        ax.barh(ys, ratios, color=["tab:blue" if v >= 1 else "tab:red" for v in ratios], height=0.7)
        for y, v in zip(ys, ratios):
            ax.text(v, y, f" {v:.2f}x", va="center", fontsize=7)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([r["op"] for r in mine], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_title(w, fontsize=9, loc="left")
        ax.set_xlim(0, top * 1.18)
    axes[-1, 0].set_xlabel("speedup over torch (torch time / scatterx time; > 1: scatterx faster)")
    fig.text(0.01, 0.005, note, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def plot_gpu(plt, rows, note, path, dpi) -> None:
    mine = [r for r in rows if r["copy_fraction"] is not None]
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.3 * len(mine)))
    ys = range(len(mine))
    fractions = [r["copy_fraction"] * 100 for r in mine]
    ax.barh(ys, fractions, color="tab:purple", height=0.7)
    for y, v in zip(ys, fractions):
        ax.text(v, y, f" {v:.0f}%", va="center", fontsize=7)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([r["workload"] for r in mine], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(100, color="black", linewidth=0.8)
    ax.set_xlim(0, max(fractions + [100]) * 1.15)
    ax.set_xlabel("bandwidth as % of the device's copy bandwidth")
    ax.set_title("GPU workloads: fraction of copy bandwidth", fontsize=9, loc="left")
    fig.text(0.01, 0.005, note, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def render(docs, out_dir: str, dpi: int = 100) -> list:
    """Writes every figure the results `docs` (validated results objects) allow into out_dir; returns the
    paths written, in order."""
    plt = _pyplot()
    os.makedirs(out_dir, exist_ok=True)
    written = []
    by_suite = {}
    for doc in docs:
        by_suite.setdefault(doc["suite"], []).append(doc)
    if "collectives" in by_suite:
        note = _footnote(by_suite["collectives"])
        for op, panels in collective_series(by_suite["collectives"]).items():
            written.append(os.path.join(out_dir, f"busbw_{op}.png"))
            plot_collective(plt, op, panels, note, written[-1], dpi)
    for suite, name, draw in (("local", "local_speedup.png", plot_local),
                              ("gpu", "gpu_copy_fraction.png", plot_gpu)):
        rows = [r for doc in by_suite.get(suite, []) for r in doc["rows"]]
        key = "ratio" if suite == "local" else "copy_fraction"
        if any(r[key] is not None for r in rows):
            written.append(os.path.join(out_dir, name))
            draw(plt, rows, _footnote(by_suite[suite]), written[-1], dpi)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="plot.py", description="PNG figures from scatterx benchmark results (JSON).")
    ap.add_argument("results", nargs="+", metavar="RESULTS.json", help="files written by the benchmarks' --json")
    ap.add_argument("-o", "--out", default="bench/figures", help="folder for the PNGs (default bench/figures)")
    ap.add_argument("--dpi", type=int, default=100)
    args = ap.parse_args(argv)
    try:
        docs = [d for p in args.results for d in results.load(p)]
        written = render(docs, args.out, args.dpi)
    except (ValueError, OSError, MissingMatplotlib) as e:
        print(f"plot: {e}", file=sys.stderr)
        return 1
    for p in written:
        print(p)
    if not written:
        print("plot: the results hold no rows to draw", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

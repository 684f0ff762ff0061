"""The benchmarks' results as JSON: the one description of the format, and its reader and writer.

Every suite writes one object per run::

    {"format": "scatterx-bench-results/1",
     "suite": "collectives" | "local" | "gpu",
     "tool": the program that wrote it ("scatterx_bench_collectives", "scatterx.bench.collectives",
             "scatterx.bench.local", "bench/gpu_report.py"),
     "date": UTC time, ISO 8601 ("2026-11-25T19:06:31Z"),
     "machine": {"cpu": model name, "logical_cpus": n, ...},
     other keys the suite adds (versions: "torch", "scatterx"; the local suite's "size": "full" | "small"),
     "rows": [...]}

Rows by suite (times in the unit their name says; GB = 1e9 bytes; a figure that was not measured is null)::

  collectives  {"op": "all_reduce", "impl": "scatterx" | "mpi" | "gloo" | "memcpy" | "cma", "ranks": 2, "bytes": size
               as nccl-tests defines it (the gathered output, the reduce-scatter's input, the all-reduce's
               tensor, an all-to-all's per-rank send buffer), "count", "dtype", "median_us", "p99_us",
               "algbw_gbps": bytes / median, "busbw_gbps": algbw times nccl-tests' factor}
               Written by scatterx_bench_collectives --json (impl scatterx and mpi; the limit ops: copy and
               all_reduce_copies one row, memcpy; peer_copy memcpy, and cma for process_vm_readv) and by
               bench/bench_collectives_torch.py --json (impl scatterx and gloo).
  local        {"workload": "gnn/uniform", "op": "index_add_", "threads": 2, "scatterx_ms": median,
               "torch_ms": median, "ratio": torch_ms / scatterx_ms (the speedup over torch), "floor": the
               speedup the op is held to or null, "check": how the results compared}
               Written by bench/bench_torch.py --json and python -m scatterx.bench.
  gpu          {"workload": "index_select/row_bytes:512", "scatterx_ms", "gbps", "copy_gbps",
               "copy_fraction": gbps / copy_gbps, "torch_ms", "ratio": torch_ms / scatterx_ms}
               Written by bench/gpu_report.py --json.

A file holds one such object, or a list of them (several suites in one file: tests/python/data/
bench_fixture.json). Readers ignore keys they do not know; a new required key or a changed meaning bumps the version.
"""

from __future__ import annotations

import datetime
import json

from .machine import machine_info

FORMAT = "scatterx-bench-results/1"

# The keys every row of a suite carries (others may be present).
ROW_KEYS = {
    "collectives": ("op", "impl", "ranks", "bytes", "median_us", "algbw_gbps", "busbw_gbps"),
    "local": ("workload", "op", "scatterx_ms", "torch_ms", "ratio"),
    "gpu": ("workload", "scatterx_ms", "gbps", "copy_gbps", "copy_fraction"),
}


def document(suite: str, tool: str, rows: list, machine_extra=None, **extra) -> dict:
    """A results object for `rows`, dated now, describing this machine (plus the dict machine_extra), with the
    keys of `extra` at the top level (versions, the size of the run)."""
    machine = machine_info()
    machine.update(machine_extra or {})
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"format": FORMAT, "suite": suite, "tool": tool, "date": date, "machine": machine, **extra, "rows": rows}
    validate(doc)
    return doc


def _finite(v):
    """v, or None where JSON has no number for it (NaN, infinity)."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    return v


def write(path: str, doc: dict) -> None:
    rows = [{k: _finite(v) for k, v in row.items()} for row in doc["rows"]]
    with open(path, "w") as f:
        json.dump(dict(doc, rows=rows), f, indent=None, separators=(", ", ": "))
        f.write("\n")


def validate(doc, where: str = "results") -> dict:
    """doc itself when it is a results object of a known format and suite with the rows' keys; ValueError
    naming the file and what is wrong otherwise."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{where}: expected a {FORMAT!r} results object (got format {got!r})")
    suite = doc.get("suite")
    if suite not in ROW_KEYS:
        raise ValueError(f"{where}: unknown suite {suite!r} (expected one of {sorted(ROW_KEYS)})")
    if not isinstance(doc.get("rows"), list):
        raise ValueError(f"{where}: 'rows' must be a list")
    for i, row in enumerate(doc["rows"]):
        missing = [k for k in ROW_KEYS[suite] if k not in row]
        if missing:
            raise ValueError(f"{where}: {suite} row {i} lacks {missing} (got keys {sorted(row)})")
    return doc


def load(path: str) -> list:
    """The validated results objects in the file at `path` (a list, of one when the file holds one)."""
    with open(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
    docs = doc if isinstance(doc, list) else [doc]
    return [validate(d, f"{path}[{i}]" if isinstance(doc, list) else path) for i, d in enumerate(docs)]

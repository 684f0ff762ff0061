"""The collective benchmark against gloo (scatterx.bench.collectives, bench/bench_collectives_torch.py), run as
one MPI singleton process: its JSON rows, the split of each sample into skew and settled time, and both barriers.
The multi-rank runs are in bench/RESULTS.md; here the method is checked, not the speed."""

import json
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
C = pytest.importorskip("scatterx._C")
if not hasattr(C, "dist"):
    pytest.skip("scatterx was built without MPI (no scatterx._C.dist)", allow_module_level=True)
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("this torch has no gloo backend", allow_module_level=True)


# The benchmark's command line, run by this interpreter.
MAIN = "import sys; from scatterx.bench.collectives import main; sys.exit(main(sys.argv[1:]))"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path, *args):
    out = tmp_path / "collectives.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    proc = subprocess.run([sys.executable, "-c", MAIN, "--min-bytes", "1K", "--max-bytes", "4K", "--iters", "5",
                           "--warmup", "1", "--retries", "0", "--json", str(out), *args],
                          capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(out.read_text())["rows"]


@pytest.mark.parametrize("barrier", ["scatterx", "gloo"])
def test_every_row_holds_its_settled_time_and_skew(tmp_path, barrier):
    stdout, rows = run(tmp_path, "--ops", "broadcast,all_to_all_v", "--barrier", barrier)
    assert f"{barrier} barrier before each" in stdout
    assert sorted((r["op"], r["impl"], r["bytes"]) for r in rows) == sorted(
        (op, impl, size) for op, size in (("broadcast", 1024), ("broadcast", 4096), ("all_to_all_v", 1024),
                                          ("all_to_all_v", 4096)) for impl in ("scatterx", "gloo"))
    for r in rows:
        assert r["ranks"] == 1 and r["median_us"] > 0
        # One rank: it is the first and the last to start, so there is no skew, and the settled time is the
        # call's own.
        assert r["skew_median_us"] == 0
        assert r["settled_median_us"] == pytest.approx(r["median_us"])
    assert "| op | size (B) | settled scatterx | settled gloo | settled sx/gloo | skew scatterx | skew gloo |" in stdout
    # An all-to-all on one rank has a busbw of 0 (factor (ws - 1) / ws): its ratio is the time's.
    assert "busbw xnan" not in stdout and "| broadcast | scatterx | 1024 |" in stdout


def test_an_unknown_barrier_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-c", MAIN, "--barrier", "mpi"], capture_output=True, text=True,
                          timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 2
    assert "--barrier: invalid choice: 'mpi' (choose from 'scatterx', 'gloo')" in proc.stderr

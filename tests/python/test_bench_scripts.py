"""Every script in bench/ still starts: `--help` runs its imports and its argument parser, so a helper that
moved (bench_torch_scatter.py once imported names bench_torch.py no longer had) fails here rather than at
the next measuring session. The measurements themselves are not run (benchmarks are not timed tests)."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench")
SCRIPTS = sorted(f for f in os.listdir(BENCH) if f.endswith(".py"))


def test_the_scripts_are_found():
    assert {"bench_torch.py", "bench_torch_scatter.py", "bench_gnn_cuda.py", "plot.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_starts(script):
    proc = subprocess.run([sys.executable, os.path.join(BENCH, script), "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_call_cost_compares_results_before_timing():
    """bench_call_cost.py checks every op's result against torch's before it times anything; a few calls run
    those checks (the times themselves mean nothing here)."""
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_call_cost.py"), "--calls", "3", "--reps", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "FAIL" not in proc.stdout and proc.stdout.count("|") > 8 * 5

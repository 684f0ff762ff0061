"""The benchmark figures and results (scatterx.bench): every figure kind is drawn from the fixture
tests/python/data/bench_fixture.json, so the plotting code cannot rot unnoticed, and python -m scatterx.bench
writes results in the documented format."""

import io
import json
import os
import subprocess
import sys

import pytest

from conftest import import_torch
from scatterx.bench import plot, results
from scatterx.bench.progress import Progress

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "bench_fixture.json")
ROOT = os.path.dirname(os.path.dirname(HERE))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXPECTED_FIGURES = ["busbw_all_reduce.png", "busbw_all_gather.png", "local_speedup.png", "gpu_copy_fraction.png"]


def mpl():
    return pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install matplotlib)")


def assert_png(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert len(data) > 2000, f"{path} is only {len(data)} bytes"
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100, image.shape
    assert image.std() > 0.01, f"{path} is blank"


def test_fixture_is_valid_results():
    docs = results.load(FIXTURE)
    assert [d["suite"] for d in docs] == ["collectives", "collectives", "local", "gpu"]


def test_render_draws_every_figure_kind(tmp_path):
    mpl()
    written = plot.render(results.load(FIXTURE), str(tmp_path / "figures"), dpi=60)
    assert [os.path.basename(p) for p in written] == EXPECTED_FIGURES
    assert sorted(os.listdir(tmp_path / "figures")) == sorted(EXPECTED_FIGURES)
    for p in written:
        assert_png(p)


def test_bench_plot_py_command(tmp_path):
    mpl()
    out = tmp_path / "figs"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "plot.py"), FIXTURE, "-o", str(out),
                           "--dpi", "50"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(out)) == sorted(EXPECTED_FIGURES)
    assert proc.stdout.split() == [str(out / name) for name in EXPECTED_FIGURES]


def test_a_panel_per_peer_first_file_wins_and_null_figures_are_left_out():
    def doc(impls, busbw):
        rows = [dict(op="all_reduce", impl=i, ranks=2, bytes=b, median_us=1.0, algbw_gbps=1.0, busbw_gbps=busbw)
                for i in impls for b in (1024, 4096)]
        return results.validate(dict(format=results.FORMAT, suite="collectives", tool="t", rows=rows))

    cpp, gloo, gloo_again = doc(["scatterx", "mpi"], 1.0), doc(["scatterx", "gloo"], 2.0), doc(["gloo"], 3.0)
    gloo["rows"][-1]["busbw_gbps"] = None  # gloo at 4096 B: not measured
    panels = plot.collective_series([cpp, gloo, gloo_again])["all_reduce"]
    assert sorted(panels) == ["gloo", "mpi"]
    assert panels["mpi"] == {("scatterx", 2): [(1024, 1.0), (4096, 1.0)], ("mpi", 2): [(1024, 1.0), (4096, 1.0)]}
    # each panel's scatterx line is the one timed beside its peer; gloo from the first file holding it
    assert panels["gloo"] == {("scatterx", 2): [(1024, 2.0), (4096, 2.0)], ("gloo", 2): [(1024, 2.0)]}


def test_results_that_are_not_results_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something-else/1", "rows": []}))
    with pytest.raises(ValueError, match=r"bad.json: expected a 'scatterx-bench-results/1' results object"):
        results.load(str(bad))
    row = dict(workload="gnn/uniform", op="gather", scatterx_ms=1.0)
    bad.write_text(json.dumps(dict(format=results.FORMAT, suite="local", tool="t", rows=[row])))
    with pytest.raises(ValueError, match=r"local row 0 lacks \['torch_ms', 'ratio'\]"):
        results.load(str(bad))
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not JSON"):
        results.load(str(bad))


def test_missing_matplotlib_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plot.MissingMatplotlib, match="pip install matplotlib"):
        plot.render(results.load(FIXTURE), str(tmp_path))


def test_progress_bar_writes_a_line_per_step_to_a_file():
    out = io.StringIO()
    bar = Progress(4, stream=out)
    for what in ("a", "b", "c", "d"):
        bar.step(what)
    bar.done()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[1].startswith("[" + "#" * 15 + "." * 15 + "] 2/4") and lines[1].endswith(" b")
    assert lines[3].startswith("[" + "#" * 30 + "] 4/4")


def run_bench(args, tmp_path, code=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"):
        env.pop(name, None)  # one process: the local benchmark
    cmd = [sys.executable, "-m", "scatterx.bench"] if code is None else [sys.executable, "-c", code]
    return subprocess.run(cmd + args + ["--threads", "1", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(tmp_path))


def test_python_m_scatterx_bench_quick_writes_results(tmp_path):
    import_torch()
    proc = run_bench(["--quick", "--ops", "index_add_"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = results.load(str(tmp_path / "local.json"))
    assert len(docs) == 1 and docs[0]["suite"] == "local" and docs[0]["tool"] == "scatterx.bench.local"
    assert docs[0]["size"] == "small" and docs[0]["machine"]["logical_cpus"] >= 1
    rows = docs[0]["rows"]
    assert [(r["workload"], r["op"]) for r in rows] == [
        ("gnn/uniform", "index_add_"), ("gnn/powerlaw", "index_add_"), ("moe/unpermute", "index_add_ (combine)")]
    for r in rows:
        assert r["scatterx_ms"] > 0 and r["torch_ms"] > 0 and r["threads"] == 1
        assert r["ratio"] == pytest.approx(r["torch_ms"] / r["scatterx_ms"])
        assert r["check"] == "exact" or r["check"].startswith("max abs diff")
    assert "| gnn/uniform | index_add_ |" in proc.stdout
    assert "] 3/3 " in proc.stderr  # the progress bar's last step


def test_python_m_scatterx_bench_without_torch_exits_0(tmp_path):
    code = ("import sys; sys.modules['torch'] = None; from scatterx.bench.__main__ import main; "
            "sys.exit(main(sys.argv[1:]))")
    proc = run_bench(["--quick"], tmp_path, code=code)
    assert proc.returncode == 0, proc.stderr
    assert "skipped" in proc.stdout and "pip install torch" in proc.stdout
    assert not (tmp_path / "local.json").exists()


def test_python_m_scatterx_bench_refuses_an_unknown_op(tmp_path):
    proc = run_bench(["--quick", "--ops", "all_reduce"], tmp_path)
    assert proc.returncode == 2
    assert "unknown op(s) ['all_reduce']; locally the ops are scatter_add_" in proc.stderr


def test_gpu_report_json_is_results_the_plotter_draws(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_report", os.path.join(ROOT, "bench", "gpu_report.py"))
    gpu_report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_report)

    def entry(workload, ms, nbytes):
        return {"name": f"cuda/{workload}/manual_time", "run_type": "aggregate", "aggregate_name": "median",
                "run_name": f"cuda/{workload}/manual_time", "real_time": ms, "time_unit": "ms", "bytes": nbytes}

    sx = tmp_path / "sx.json"
    sx.write_text(json.dumps({"context": {"device": "test GPU"}, "benchmarks": [
        entry("copy", 1.0, 2e9), entry("index_select/row_bytes:512", 1.0, 1.5e9)]}))
    torch_json = tmp_path / "torch.json"
    torch_json.write_text(json.dumps({"results": [{"name": "index_select/row_bytes:512", "median_s": 3e-3}]}))
    out = tmp_path / "gpu.json"
    assert gpu_report.main(["--scatterx", str(sx), "--torch", str(torch_json), "--json", str(out)]) == 0
    (doc,) = results.load(str(out))
    assert doc["suite"] == "gpu" and doc["machine"]["gpu"] == "test GPU"
    rows = {r["workload"]: r for r in doc["rows"]}
    assert rows["index_select/row_bytes:512"]["copy_fraction"] == pytest.approx(0.75)
    assert rows["index_select/row_bytes:512"]["ratio"] == pytest.approx(3.0)
    assert rows["copy"]["torch_ms"] is None
    mpl()
    assert [os.path.basename(p) for p in plot.render([doc], str(tmp_path / "f"), dpi=50)] == ["gpu_copy_fraction.png"]

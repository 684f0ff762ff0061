"""bench/gpu_report.py on synthetic results: the table and the floors the GPU
suite (scripts/gpu_suite.sh) writes into bench/RESULTS.md. Runs anywhere."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def gpu_report():
    spec = importlib.util.spec_from_file_location("gpu_report", os.path.join(ROOT, "bench", "gpu_report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gb_entry(workload, ms, nbytes):
    return {"name": "cuda/%s/manual_time" % workload, "run_name": "cuda/%s/manual_time" % workload,
            "run_type": "aggregate", "aggregate_name": "median", "real_time": ms, "time_unit": "ms",
            "bytes": nbytes}


def rows_of(text, heading):
    """{first cell: cells} of the markdown table after `heading`."""
    rows = {}
    for line in text.split(heading, 1)[1].splitlines():
        if rows and not line.startswith("|"):
            break  # the table's end
        if line.startswith("| ") and not line.startswith("| workload"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells
    return rows


def test_floors_and_variants_against_torchs_plain_workload(gpu_report):
    sx = {"context": {"device": "NVIDIA H100"}, "benchmarks": [
        gb_entry("copy", 1.0, 3.0e9),                                   # 3000 GB/s
        gb_entry("index_select/row_bytes:512", 1.0, 2.7e9),            # 90% of copy
        gb_entry("scatter_add/unique/row_bytes:512", 1.0, 2.1e9),      # 70%: missed
        gb_entry("scatter_add/powerlaw/feat:64", 2.0, 1e9),
        gb_entry("scatter_add/powerlaw/feat:64/deterministic", 2.5, 1e9),  # 1.25x: met
        gb_entry("scatter_add/skewed/elements/sorted", 0.5, 1e9),
    ]}
    torch = {"results": [
        {"name": "scatter_add/powerlaw/feat:64", "median_s": 6.5e-3, "bytes": 1e9},  # 3.25x
        {"name": "scatter_add/skewed/elements", "median_s": 4e-3, "bytes": 1e9},    # 8x for /sorted
        {"name": "moe/permute/hidden:4096", "median_s": 1e-3, "bytes": 1e9},        # torch only
    ]}
    text = gpu_report.report(sx, torch, [])
    assert "device: NVIDIA H100" in text
    table = rows_of(text, "Copy bandwidth")
    assert table["scatter_add/skewed/elements/sorted"][-1] == "8.00x"
    assert table["scatter_add/powerlaw/feat:64/deterministic"][-1] == "2.60x"
    assert "scatter_add/skewed/elements" in table  # torch's row, no scatterx figure
    floors = rows_of(text, "## Floors")
    assert floors["index_select/row_bytes:512"][2:] == ["90.0% of copy", "met"]
    assert floors["scatter_add/unique/row_bytes:512"][2:] == ["70.0% of copy", "MISSED"]
    assert floors["scatter_add/powerlaw/feat:64"][2:] == ["3.25x torch", "met"]
    assert floors["scatter_add/powerlaw/feat:64/deterministic"][2:] == ["1.25x", "met"]
    assert floors["moe/permute/hidden:4096"][3] == "n/a"


def test_unreadable_input_still_gives_a_report(gpu_report, tmp_path, capsys):
    bad = tmp_path / "sx.json"
    bad.write_text("{not json")
    assert gpu_report.main(["--scatterx", str(bad), "--markdown", str(tmp_path / "out.md")]) == 0
    text = (tmp_path / "out.md").read_text()
    assert "scatterx results not read" in text and "0 met" in text

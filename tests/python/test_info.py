"""The environment report, ``python -m scatterx.info`` (scatterx/info.py).

Run as a user runs it (a subprocess), its rows are checked against what the
packages themselves say: versions against their ``__version__``, the knob
rows against README's table of knobs, the MPI library against mpi4py's.
"""

import importlib.metadata
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import scatterx
from scatterx import _C
from scatterx.info import report

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"

BUILD_ROWS = ["scatterx", "compiler", "build type", "CUDA backend", "CUDA architectures", "CUDA compiler",
              "CUDA devices", "distributed layer", "CPU ISA", "OpenMP", "OpenMP max threads"]
MPI_ROWS = ["MPI library", "MPI standard", "MPI initialized", "MPI CUDA-aware (build)", "MPI CUDA-aware (run time)"]
PYTHON_ROWS = ["python", "python executable", "platform", "numpy", "torch", "torch CUDA", "mpi4py", "cupy",
               "scatterx._C.dist", "OMP_NUM_THREADS"]


def readme_knobs():
    """The variables of README's Environment table, in its order."""
    section = README.read_text().split("\n## Environment\n")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `SCATTERX_")]
    return [row.split("`")[1] for row in rows]


def run_info(env_changes=None, code=None):
    """The rows `python -m scatterx.info` prints (or `python -c code`), as a dict."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCATTERX_") and k != "OMP_NUM_THREADS"}
    env.update(env_changes or {})
    args = ["-c", code] if code else ["-m", "scatterx.info"]
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {}
    for line in proc.stdout.splitlines():
        name, sep, value = line.partition(": ")
        assert sep and name not in rows, f"not a new 'name: value' line: {line!r}"
        rows[name] = value
    return rows


def test_command_prints_every_row():
    rows = run_info({"OMP_NUM_THREADS": "3", "SCATTERX_DIST_TIMEOUT": "7.5"})
    mpi = MPI_ROWS if hasattr(_C, "dist") else ["MPI library"]
    assert list(rows) == BUILD_ROWS + mpi + PYTHON_ROWS + readme_knobs()
    assert all(rows.values()), rows
    assert rows["scatterx"] == scatterx.__version__ == importlib.metadata.version("scatterx")
    assert rows["OMP_NUM_THREADS"] == "3"
    assert rows["OpenMP max threads"] == "3"  # what the C++ side's OpenMP took from it
    assert rows["SCATTERX_DIST_TIMEOUT"] == "7.5"
    assert rows["SCATTERX_DIST_CHUNK_BYTES"] == "524288 (default)"
    assert rows["CPU ISA"] in ("avx2", "baseline")
    assert rows["CUDA backend"] == ("built" if scatterx.cuda.is_built() else "not built")
    assert rows["scatterx._C.dist"] == ("yes" if hasattr(_C, "dist") else "no")


def test_forced_isa_and_an_invalid_knob_are_reported():
    rows = run_info({"SCATTERX_CPU_ISA": "baseline", "SCATTERX_DIST_CHUNK_BYTES": "64k"})
    assert rows["CPU ISA"] == "baseline"
    assert rows["SCATTERX_CPU_ISA"] == "baseline"
    assert rows["SCATTERX_DIST_CHUNK_BYTES"] == (
        "64k (invalid: SCATTERX_DIST_CHUNK_BYTES: expected a whole number of bytes from 1 to 1099511627776, "
        "got '64k')")


def test_versions_are_the_packages_own():
    rows = report()
    assert rows["numpy"] == np.__version__
    assert rows["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert rows["python executable"] == sys.executable
    for name in ("torch", "mpi4py", "cupy"):
        try:
            module = __import__(name)
        except ImportError:
            assert rows[name] == "not installed", name
        else:
            assert rows[name] == module.__version__, name
    if rows["torch"] != "not installed":
        import torch

        assert rows["torch CUDA"].startswith(f"{torch.version.cuda or 'none'} (available: ")


def test_missing_and_broken_optional_packages_are_rows(tmp_path):
    broken = tmp_path / "cupy"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise RuntimeError('no CUDA driver')\n")
    hide = ("import sys, runpy; sys.modules['torch'] = None; sys.modules['mpi4py'] = None; "
            "runpy.run_module('scatterx.info', run_name='__main__')")
    # Prepended: the package may itself be found through PYTHONPATH (a --target install).
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    rows = run_info({"PYTHONPATH": path}, code=hide)
    assert rows["torch"] == "not installed"
    assert rows["torch CUDA"] == "not installed"
    assert rows["mpi4py"] == "not installed"
    assert rows["cupy"] == "broken: RuntimeError: no CUDA driver"
    assert rows["numpy"] == np.__version__


def test_mpi_rows_before_and_after_mpi_init():
    if not hasattr(_C, "dist"):
        pytest.skip("scatterx built without the distributed layer")
    before = report()
    assert before["MPI initialized"] == "no"  # the report never initializes MPI
    assert before["MPI library"]
    pytest.importorskip("mpi4py", reason="mpi4py not installed")
    code = ("from mpi4py import MPI; from scatterx.info import report, format_report; import sys; "
            "sys.stdout.write(format_report(report())); "
            "sys.stdout.write('mpi4py library: ' + '; '.join(line.replace('\\t', ' ').rstrip() "
            "for line in MPI.Get_library_version().rstrip('\\x00').splitlines() if line.strip()) + '\\n')")
    rows = run_info({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}, code=code)
    assert rows["MPI initialized"] == "yes"
    assert rows["MPI library"] == rows["mpi4py library"] == before["MPI library"]
    if rows["MPI library"].startswith("Open MPI"):
        assert rows["MPI CUDA-aware (run time)"] in ("yes", "no")

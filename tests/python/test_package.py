"""The installed package: public API, typing stubs (_C.pyi, py.typed), version, no torch import; the suite's
stop on a torch that is installed but broken."""

import ast
import importlib.metadata
import inspect
import os
import pathlib
import subprocess
import sys

import scatterx
from scatterx import _C

PUBLIC = ["gather", "index_select", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
          "scatter_reduce_", "index_add", "index_add_", "index_add_weighted", "index_add_weighted_", "index_reduce",
          "index_reduce_"]
PACKAGE_DIR = pathlib.Path(scatterx.__file__).parent


def test_public_api():
    assert sorted(scatterx.__all__) == sorted(PUBLIC + ["__version__", "cuda", "gather_scatter", "gather_dot",
                                                        "IndexPlan", "host_cache_bytes", "empty_host_cache", "empty",
                                                        "empty_like", "is_shareable"])
    assert list(inspect.signature(scatterx.IndexPlan).parameters) == ["index", "dim_size"]
    fused = inspect.signature(scatterx.gather_scatter).parameters
    assert list(fused) == ["x", "src_index", "dst_index", "reduce", "edge_weight", "dim_size"]
    assert scatterx.gather_scatter.__doc__
    assert list(inspect.signature(scatterx.gather_dot).parameters) == ["a", "a_index", "b", "b_index"]
    assert scatterx.gather_dot.__doc__
    assert callable(scatterx.cuda.is_built) and callable(scatterx.cuda.set_deterministic)
    for name in PUBLIC:
        f = getattr(scatterx, name)
        assert callable(f) and f.__doc__, name
        params = list(inspect.signature(f).parameters)
        assert params[:3] == ["input", "dim", "index"], (name, params)


def test_version_matches_the_distribution():
    assert scatterx.__version__ == importlib.metadata.version("scatterx")
    assert _C.__version__ == scatterx.__version__


def test_stub_and_marker_are_installed():
    assert (PACKAGE_DIR / "py.typed").is_file()
    stub = PACKAGE_DIR / "_C.pyi"
    assert stub.is_file()
    files = {str(f) for f in importlib.metadata.files("scatterx")}
    assert "scatterx/py.typed" in files and "scatterx/_C.pyi" in files


def test_stub_declares_every_compiled_function():
    tree = ast.parse((PACKAGE_DIR / "_C.pyi").read_text())
    declared = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    compiled = {name for name in dir(_C) if not name.startswith("_") and callable(getattr(_C, name))}
    assert compiled, "the extension exports nothing"
    assert compiled <= declared, f"not in _C.pyi: {sorted(compiled - declared)}"
    assert {"gather", "gather_out", "index_select", "index_select_out", "scatter", "scatter_value", "index_add",
            "index_reduce", "Framework"} <= declared


def test_importing_scatterx_does_not_import_torch():
    code = "import sys, numpy, scatterx; scatterx.gather(numpy.zeros(2), 0, numpy.zeros(1, 'int64')); " \
           "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_a_broken_torch_stops_the_suite_with_its_error(tmp_path):
    """A torch that is installed but fails to import (files missing, as an install cut short leaves it) stops
    the run with one message naming its error (conftest.py), instead of failing the collection of every
    module with torch tests."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        'raise OSError("libtorch_global_deps.so: cannot open shared object file")\n')
    env = dict(os.environ, SCATTERX_TEST_HIDE_TORCH="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    some_tests = pathlib.Path(__file__).parent / "test_info.py"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(some_tests)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 4, out.stdout + out.stderr
    assert "torch is installed but does not import (OSError: libtorch_global_deps.so" in out.stdout + out.stderr

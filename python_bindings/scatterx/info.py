"""The environment report for bug reports: ``python -m scatterx.info``.

Prints one ``name: value`` line per row: scatterx's build and run time as
the C++ ``scatterx::build_info()`` reports them (version, compiler, CUDA
backend and architectures, CPU ISA in use, OpenMP threads), the MPI library
(``scatterx::dist::mpi_info()``, where the distributed layer is built), the
Python side (interpreter, numpy, torch, mpi4py, cupy, OMP_NUM_THREADS) and
every SCATTERX_* knob's value. ``report()`` returns the same rows as a dict.

Nothing here initializes MPI (CUDA is asked only how many devices it sees,
and torch whether it has one), and a missing or broken optional package is a
row ("not installed", "broken: ..."), never an error.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys

from . import _C

__all__ = ["report", "format_report", "main"]

NOT_INSTALLED = "not installed"


def _module_version(name: str) -> str:
    """The version of the module `import name` loads, or why there is none."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and name.split(".")[0] != e.name.split(".")[0]:
            return f"broken: {type(e).__name__}: {e}"  # installed, but one of its own imports is missing
        return NOT_INSTALLED
    except Exception as e:  # a report lists a broken install, it does not stop at it
        return f"broken: {type(e).__name__}: {e}"
    return str(getattr(module, "__version__", "unknown (no __version__)"))


def _torch_cuda() -> str:
    """The CUDA version torch was built with and whether it sees a GPU now."""
    torch = sys.modules.get("torch")
    if torch is None:
        return NOT_INSTALLED
    try:
        built = torch.version.cuda or "none"
        return f"{built} (available: {'yes' if torch.cuda.is_available() else 'no'})"
    except Exception as e:
        return f"unknown ({type(e).__name__}: {e})"


def _mpi_rows() -> list[tuple[str, str]]:
    dist = getattr(_C, "dist", None)
    if dist is None:
        return [("MPI library", "none (scatterx was built without the distributed layer)")]
    return [tuple(row) for row in dist.mpi_info_rows()]


def _python_rows() -> list[tuple[str, str]]:
    return [
        ("python", platform.python_version()),
        ("python executable", sys.executable),
        ("platform", platform.platform()),
        ("numpy", _module_version("numpy")),
        ("torch", _module_version("torch")),
        ("torch CUDA", _torch_cuda()),
        ("mpi4py", _module_version("mpi4py")),
        ("cupy", _module_version("cupy")),
        ("scatterx._C.dist", "yes" if hasattr(_C, "dist") else "no"),
        ("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "unset")),
    ]


def report() -> dict[str, str]:
    """Every row of the report, in print order: name -> value.

    Keys: the C++ build rows ("scatterx", "compiler", "CUDA backend",
    "CUDA architectures", "CPU ISA", "OpenMP max threads", ...), the MPI rows
    ("MPI library", "MPI CUDA-aware (run time)", ...), the Python rows
    ("python", "numpy", "torch", "mpi4py", "cupy", "scatterx._C.dist",
    "OMP_NUM_THREADS", ...) and one per knob, named by its variable.
    """
    rows = [tuple(row) for row in _C.build_info_rows()]
    rows += _mpi_rows() + _python_rows()
    rows += [tuple(row) for row in _C.knob_rows()]
    return dict(rows)


def format_report(rows: dict[str, str]) -> str:
    """One ``name: value`` line per row."""
    return "".join(f"{name}: {value}\n" for name, value in rows.items())


def main() -> int:
    sys.stdout.write(format_report(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

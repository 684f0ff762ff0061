"""Shared setup of the scatterx.distributed suite, run by every rank:

    mpirun -n N python -m pytest -q tests/python_dist        (N = 1, 2, 3, ...)

The default process group is initialized once per process (every test uses
it). Every rank runs the same tests in the same order; each one knows the
exact expected result from the rank formulas. Rank 0 reports as usual; the
other ranks print only their failures (to stderr, prefixed with the rank),
and each rank's pytest exits nonzero when one of its tests failed.
"""

import atexit
import datetime
import os
import sys

import pytest

try:
    import scatterx.distributed as dist
except ImportError as e:  # built without MPI: every test skips with this reason
    dist = None
    DIST_MISSING = str(e)
else:
    DIST_MISSING = ""

TORCH_MISSING = "torch not installed"
MPI4PY_MISSING = "mpi4py not installed"

# Generous, but well below scripts/test.sh's overall limit: a rank that
# waits on a collective its peers never start fails instead of hanging.
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("SCATTERX_TEST_DIST_TIMEOUT", "120")))


def _rank():
    return dist.get_rank() if dist is not None and dist.is_initialized() else 0


def rank_and_size():
    """(this process's rank, the world size) for a test module's rank formulas: (0, 1) when the distributed
    layer is missing (pytest_collection_modifyitems then skips every test with the reason)."""
    if dist is None:
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if dist is None:
        return
    if not dist.is_initialized():
        dist.init_process_group("mpi", timeout=TIMEOUT)
    if dist.get_rank() != 0:
        # Before the terminal reporter is created: it then writes to devnull.
        config._scatterx_stdout = sys.stdout
        sys.stdout = open(os.devnull, "w")
        atexit.register(sys.stdout.close)


def pytest_collection_modifyitems(config, items):
    if dist is None:
        skip = pytest.mark.skip(reason=f"scatterx.distributed unavailable: {DIST_MISSING}")
        for item in items:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    if report.failed and _rank() != 0:
        sys.stderr.write(f"\n[rank {_rank()}] FAILED {report.nodeid} ({report.when})\n{report.longreprtext}\n")
        sys.stderr.flush()


def pytest_sessionfinish(session, exitstatus):
    if _rank() != 0 and exitstatus not in (0, 5):
        sys.stderr.write(f"[rank {_rank()}] pytest exit status {int(exitstatus)}: "
                         f"{session.testsfailed} test(s) failed on this rank\n")
        sys.stderr.flush()


def pytest_report_header(config):
    if dist is None:
        return f"scatterx.distributed: unavailable ({DIST_MISSING})"
    try:
        import torch
        torch_info = f"torch {torch.__version__}"
    except ImportError:
        torch_info = "torch not available (torch tests are skipped)"
    try:
        from mpi4py import MPI
        mpi_info = f"mpi4py {MPI.Get_library_version().splitlines()[0].strip()}"
    except ImportError:
        mpi_info = "mpi4py not available (its tests are skipped)"
    return f"scatterx.distributed: world size {dist.get_world_size()}, {torch_info}, {mpi_info}"


def pytest_unconfigure(config):
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()
    out = getattr(config, "_scatterx_stdout", None)
    if out is not None:
        sys.stdout = out  # devnull stays open until exit: the terminal reporter still holds it


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason=TORCH_MISSING)


@pytest.fixture
def MPI():  # noqa: N802 (mpi4py's name)
    return pytest.importorskip("mpi4py.MPI", reason=MPI4PY_MISSING)

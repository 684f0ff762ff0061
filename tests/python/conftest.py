"""Shared setup of scatterx's Python tests.

SCATTERX_TEST_HIDE_TORCH=1 hides torch (sys.modules["torch"] = None), so
the suite runs as it would where torch is not installed: every torch test
is skipped with the reason "torch not installed" and the numpy tests run.
"""

import os
import sys

import numpy as np
import pytest

if os.environ.get("SCATTERX_TEST_HIDE_TORCH") == "1":
    sys.modules["torch"] = None  # `import torch` now raises ModuleNotFoundError

sys.path.insert(0, os.path.dirname(__file__))  # sx_reference, whatever the import mode

TORCH_MISSING = "torch not installed"


def import_torch():
    """torch, or a skip of the calling test with the reason 'torch not installed'."""
    return pytest.importorskip("torch", reason=TORCH_MISSING)


@pytest.fixture
def torch():
    return import_torch()


@pytest.fixture
def rng(request):
    from sx_reference import seed_for

    return np.random.default_rng(seed_for(request.node.nodeid))


def _broken_torch():
    """Why an installed torch fails to import ("TypeName: message"), or None: it imports, or is not there.
    A torch whose files are partly missing raises OSError from its shared libraries, which
    pytest.importorskip passes on; every module with torch tests would then fail to collect."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        return None
    except Exception as e:  # whatever an installed torch raises is the answer
        return f"{type(e).__name__}: {e}"
    return None


def pytest_sessionstart(session):
    error = _broken_torch()
    if error is not None:
        pytest.exit(f"torch is installed but does not import ({error}). Reinstall it (pip install "
                    "--force-reinstall torch), uninstall it, or set SCATTERX_TEST_HIDE_TORCH=1 to run "
                    "without it", returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_report_header(config):
    try:
        import torch
    except ImportError:
        return "scatterx tests: torch not available (torch tests are skipped)"
    return f"scatterx tests: torch {torch.__version__}, cuda available: {torch.cuda.is_available()}"

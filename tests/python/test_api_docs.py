"""The API reference cannot rot: every public function and class has a docstring naming its torch counterpart,
and the C++ header pages (docs/_ext/cpp_headers.py) fail the docs build when a header goes missing.

The public API is each module's ``__all__``; the docs (docs/, built by scripts/test.sh with warnings as errors)
render those docstrings."""

import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import import_torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The modules whose __all__ is the public Python API (docs/*.rst render each), and whether they need torch.
PUBLIC_MODULES = {
    "scatterx": False,
    "scatterx.cuda": False,
    "scatterx.torch": True,
    "scatterx.torch_scatter": True,
    "scatterx.distributed": True,  # its __all__ names the torch layers (halo, embedding) too
    "scatterx.distributed.nn": True,
    "scatterx.distributed.moe": True,
    "scatterx.distributed.embedding": True,
    "scatterx.distributed.halo": True,
}

# scatterx-only API with no torch / torch_scatter / torch.distributed counterpart to name; everything else
# must name one (the word "torch" in its docstring: torch.*, torch_scatter.*, torch.distributed.*).
SCATTERX_ONLY = {
    "scatterx.IndexPlan",                           # a destination index checked and grouped once
    "scatterx.distributed.moe.MoEHandle",           # dispatch's routing, opaque, for combine
    "scatterx.distributed.HaloExchange",            # the halo exchange plan of a partitioned graph
    "scatterx.distributed.build_halo",
    "scatterx.distributed.halo.HaloExchange",
    "scatterx.distributed.halo.build_halo",
    "scatterx.cuda.index_checks",                   # switches torch does not have (set_index_checks and
    "scatterx.cuda.scatter_path",                   # set_scatter_path say what torch does instead)
}


def _module(name):
    if PUBLIC_MODULES[name]:
        import_torch()
    if name.startswith("scatterx.distributed"):
        import scatterx._C as c

        if not hasattr(c, "dist"):
            pytest.skip("scatterx was built without its distributed layer (no MPI)")
    return importlib.import_module(name)


def _public_callables(name):
    module = _module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__: its public API is undeclared"
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.ismodule(obj) or not callable(obj):
            continue  # scatterx.cuda is documented as its own module; __version__ is a string
        yield f"{name}.{attr}", obj


@pytest.mark.parametrize("name", sorted(PUBLIC_MODULES))
def test_every_public_callable_names_its_torch_counterpart(name):
    missing, no_counterpart = [], []
    for qualified, obj in _public_callables(name):
        doc = inspect.getdoc(obj) or ""
        if not doc.strip():
            missing.append(qualified)
        elif "torch" not in doc and qualified not in SCATTERX_ONLY:
            no_counterpart.append(qualified)
    assert not missing, f"public callables without a docstring: {missing}"
    assert not no_counterpart, ("docstrings that name no torch / torch_scatter / torch.distributed counterpart "
                                f"(name one, or add the function to SCATTERX_ONLY with a reason): {no_counterpart}")


def _rendered_names():
    """What docs/*.rst renders: the targets of its auto* directives, and the modules whose automodule takes all
    :members: (name -> None) or a list of them (name -> that list)."""
    text = ""
    for page in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        if page.endswith(".rst"):
            with open(os.path.join(ROOT, "docs", page)) as f:
                text += f.read()
    targets = set(re.findall(r"^\.\. auto(?:function|class|exception|data|method):: (\S+)", text, re.M))
    modules = {}
    for module, options in re.findall(r"^\.\. automodule:: (\S+)\n((?:[ \t]+:[^\n]*\n)*)", text, re.M):
        listed = re.search(r":members:(.*)", options)
        if listed:
            names = [n.strip() for n in listed.group(1).split(",") if n.strip()]
            modules[module] = names or None
    return targets, modules


@pytest.mark.parametrize("name", sorted(PUBLIC_MODULES))
def test_every_public_callable_is_rendered_in_the_docs(name):
    """A function added to a module's __all__ but to no docs page would be public and undocumented."""
    targets, modules = _rendered_names()
    missing = []
    for qualified, obj in _public_callables(name):
        attr = qualified.rsplit(".", 1)[1]
        homes = {name, getattr(obj, "__module__", name)}
        if any(f"{home}.{attr}" in targets for home in homes):
            continue
        if any(home in modules and (modules[home] is None or attr in modules[home]) for home in homes):
            continue
        missing.append(qualified)
    assert not missing, f"public callables no docs/*.rst page renders (add an auto* directive): {missing}"


def test_the_scatterx_only_list_names_only_public_callables():
    """A stale entry would hide nothing but would let a renamed function's new name go unchecked."""
    public = set()
    for name in PUBLIC_MODULES:  # skips where torch or the distributed layer is missing
        public.update(q for q, _ in _public_callables(name))
    assert SCATTERX_ONLY <= public, f"not public (renamed or removed?): {sorted(SCATTERX_ONLY - public)}"


def _umbrella_includes():
    """The headers scatterx.h includes: the one-page builds below list none of them but the two they show."""
    with open(os.path.join(ROOT, "scatterx.h")) as f:
        included = re.findall(r'^#include "([^"]+)"', f.read(), re.M)
    return [h for h in included if h != "ops/scatter/scatter.h"]


def _sphinx_build(tmp_path, rst):
    """Builds one page with the docs' header extension over the repository's headers; (returncode, output)."""
    pytest.importorskip("sphinx", reason="sphinx not installed (scripts/common.sh installs it)")
    if importlib.util.find_spec("sphinx.__main__") is None:
        pytest.skip("this sphinx cannot run as `python -m sphinx`")
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.join(ROOT, 'docs', '_ext')!r})
        extensions = ["cpp_headers"]
        cpp_headers_root = {ROOT!r}
        cpp_headers_umbrella = "scatterx.h"
        cpp_headers_unlisted = {_umbrella_includes()!r}
    """))
    (src / "index.rst").write_text(rst)
    run = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "-q", "-b", "html", str(src),
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    return run.returncode, run.stdout + run.stderr, tmp_path / "out" / "index.html"


def test_cpp_header_page_renders_contract_and_declarations(tmp_path):
    code, output, html = _sphinx_build(tmp_path, "C++\n===\n\n.. cpp-header:: scatterx.h\n\n"
                                                 ".. cpp-header:: ops/scatter/scatter.h\n")
    assert code == 0, output
    page = html.read_text()
    assert "Common contract" in page                       # scatter.h's opening comment
    assert "scatter_reduce_" in page and "include_self" in page  # a declaration ...
    assert "with include_self = false the values already in self" in page.lower()  # ... and its comment


def test_cpp_header_page_fails_on_a_missing_header(tmp_path):
    code, output, _ = _sphinx_build(tmp_path, "C++\n===\n\n.. cpp-header:: scatterx.h\n\n"
                                              ".. cpp-header:: ops/scatter/scatter.h\n\n"
                                              ".. cpp-header:: ops/no_such_header.h\n")
    assert code != 0
    assert "ops/no_such_header.h is listed but does not exist" in output


def test_cpp_header_page_fails_when_a_public_header_is_not_rendered(tmp_path):
    code, output, _ = _sphinx_build(tmp_path, "C++\n===\n\n.. cpp-header:: scatterx.h\n")
    assert code != 0
    assert "ops/scatter/scatter.h (public: scatterx.h includes it) is rendered by no cpp-header directive" in output

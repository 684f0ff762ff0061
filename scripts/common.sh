# Shared by scripts/*.sh: install what is missing, then build a preset.
set -euo pipefail

SCATTERX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCATTERX_JOBS=${SCATTERX_JOBS:-$(nproc)}

# Debian packages the C++ build needs; installed only when missing. clang,
# libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes) and libomp-dev
# (OpenMP for clang) are for the fuzz preset (scripts/fuzz.sh).
scatterx_install_deps() {
  local wanted=(g++ cmake make ninja-build libgtest-dev libbenchmark-dev python3 python3-dev python3-venv openmpi-bin libopenmpi-dev
    clang libclang-rt-14-dev libomp-dev)
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# scatterx_build <preset>: configure and build one CMake preset.
scatterx_build() {
  local preset=$1
  echo "== configure + build ($preset)"
  cmake --preset "$preset" -S "$SCATTERX_ROOT" >/dev/null
  cmake --build --preset "$preset" -j "$SCATTERX_JOBS"
}

# scatterx_python_deps [torch] [pyg] [mpi4py]: a virtual environment in
# build/venv with numpy, pytest, hypothesis, sphinx (the API reference in docs/)
# and matplotlib (test_plot.py draws the benchmark figures), plus what is
# asked for and missing:
#   torch    a large download; if it fails the torch tests and demos skip
#            and say so,
#   pyg      torch_geometric (pure Python; test_pyg.py skips without it),
#   mpi4py   when MPI is installed (the tests with an mpi4py communicator).
SCATTERX_VENV="$SCATTERX_ROOT/build/venv"
scatterx_pip() { "$SCATTERX_VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
scatterx_free_disk() { echo "$(df -h --output=avail "$SCATTERX_ROOT" | tail -1 | tr -d ' ') free on disk"; }
# Imports torch and makes a tensor, which loads every one of its libraries.
scatterx_torch_imports() { "$SCATTERX_VENV/bin/python" -c "import torch; torch.zeros(1)" >/dev/null 2>&1; }
# A torch whose unpacking was cut short (a full disk, say) fails to import with
# OSError, which pytest.importorskip passes on: every torch test module would
# then error instead of skipping. pip cannot uninstall it when its RECORD was
# never written, so what it left is deleted by name.
scatterx_remove_broken_torch() {
  echo "== torch could not be installed ($(scatterx_free_disk)): its tests and demos will be skipped"
  scatterx_pip uninstall -y torch >/dev/null 2>&1 || true
  local site
  site=$("$SCATTERX_VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  rm -rf "$site/torch" "$site"/torch-*.dist-info
}
scatterx_python_deps() {
  local want=" $* "
  if [ ! -x "$SCATTERX_VENV/bin/python" ]; then
    echo "== python venv ($SCATTERX_VENV)"
    python3 -m venv "$SCATTERX_VENV"
  fi
  local has=("$SCATTERX_VENV/bin/python" -c)
  scatterx_pip install numpy pytest hypothesis sphinx matplotlib
  if [[ $want == *" torch "* ]] && ! scatterx_torch_imports; then
    echo "== installing torch (for the torch comparisons, autograd and the torch demos; $(scatterx_free_disk))"
    scatterx_pip install torch || true
    if ! scatterx_torch_imports; then
      echo "== torch does not import after installing: installing it again, without pip's cache ($(scatterx_free_disk))"
      scatterx_pip install --force-reinstall --no-cache-dir torch || true
    fi
    scatterx_torch_imports || scatterx_remove_broken_torch
  fi
  if [[ $want == *" pyg "* ]] && scatterx_torch_imports \
      && ! "${has[@]}" "import torch_geometric" 2>/dev/null; then
    echo "== installing torch_geometric (for tests/python/test_pyg.py: PyG on scatterx.torch_scatter)"
    scatterx_pip install torch_geometric || echo "== torch_geometric could not be installed: test_pyg.py will be skipped"
  fi
  if [[ $want == *" mpi4py "* ]] && command -v mpicc >/dev/null && ! "${has[@]}" "import mpi4py" 2>/dev/null; then
    echo "== installing mpi4py (for the scatterx.distributed tests with an mpi4py communicator)"
    scatterx_pip install mpi4py || echo "== mpi4py could not be installed: its tests will be skipped"
  fi
}

# scatterx_python_package: the scatterx package built from this checkout
# (pip install .) into the environment above.
scatterx_python_package() {
  echo "== pip install . (the scatterx Python package)"
  scatterx_pip install "$SCATTERX_ROOT"
}

# scatterx_python_env [torch] [pyg] [mpi4py]: both of the above.
scatterx_python_env() {
  scatterx_python_deps "$@"
  scatterx_python_package
}

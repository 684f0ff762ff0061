#!/usr/bin/env bash
# Builds and runs every scatterx test:
#   1. the Release build's GoogleTest suite (ctest),
#   2. the installed package consumed from a separate CMake project,
#   3. the Python package: pip install . into build/venv, then pytest
#      (torch is installed too, so the torch comparisons and autograd
#      checks run; SCATTERX_TORCH=0 skips it and those tests say so),
#   4. the C++ suite built with AddressSanitizer + UndefinedBehaviorSanitizer.
# --quick skips step 4.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
quick=0
[ "${1:-}" = "--quick" ] && quick=1

scatterx_install_deps
scatterx_build release
echo "== ctest (release)"
ctest --preset release -j "$SCATTERX_JOBS"

echo "== install + find_package(scatterx) from another project"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$SCATTERX_ROOT/build/release" --prefix "$prefix/install" >/dev/null
cmake -S "$SCATTERX_ROOT/examples/consumer" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix/install" >/dev/null
cmake --build "$prefix/consumer" -j "$SCATTERX_JOBS" >/dev/null
"$prefix/consumer/consumer"

scatterx_python_env "$([ "${SCATTERX_TORCH:-1}" = 0 ] || echo torch)"
echo "== pytest"
(cd "$SCATTERX_ROOT" && OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$SCATTERX_VENV/bin/python" -m pytest -q -rs tests/python)

if [ $quick -eq 0 ]; then
  scatterx_build asan
  echo "== ctest (asan + ubsan)"
  ctest --preset asan -j "$SCATTERX_JOBS"
fi
echo "== all tests passed"

#!/usr/bin/env bash
# Builds and runs every scatterx test:
#   1. the Release build's GoogleTest suite (ctest),
#   2. the installed package consumed from a separate CMake project,
#   3. the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer.
# --quick skips step 3.
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

if [ $quick -eq 0 ]; then
  scatterx_build asan
  echo "== ctest (asan + ubsan)"
  ctest --preset asan -j "$SCATTERX_JOBS"
fi
echo "== all tests passed"

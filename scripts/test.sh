#!/usr/bin/env bash
# Builds and runs every scatterx test:
#   1. the Release build's GoogleTest suite (ctest); where nvcc is found the
#      build includes the CUDA backend for sm_90, whose tests skip without a GPU,
#   2. the installed package consumed from a separate CMake project,
#   3. the Python package: pip install . into build/venv (whose third-party
#      packages, torch among them, install in the background during 1), its environment
#      report (python -m scatterx.info, which CI logs keep), then pytest
#      (with matplotlib, so test_plot.py draws every benchmark figure from
#      a fixture; torch is installed too, so the torch comparisons and autograd
#      checks run; SCATTERX_TORCH=0 skips it and those tests say so),
#      then the API reference (docs/, Sphinx, warnings are errors) into
#      build/docs (where torch and the distributed layer are there to import),
#      then tests/python_dist under mpirun with 1, 2, 3 and 4 ranks (and
#      examples/moe_layer.py, graphsage_dist.py and embedding_bag_dist.py
#      with 2 and 4),
#      and with 3
#      ranks through the emulated device paths of dist/device.h
#      (scatterx.distributed; mpi4py's tests skip if it did not install),
#      then the MPI suites with ranks on several simulated hosts
#      (scripts/multihost.sh --suite; skipped where network namespaces
#      cannot be made),
#   4. the C++ suite built with AddressSanitizer + UndefinedBehaviorSanitizer,
#   5. the libFuzzer target over the op front ends for SCATTERX_FUZZ_SECONDS
#      (default 60; scripts/fuzz.sh: clang, ASan + UBSan, the committed corpus).
# --quick skips steps 4 and 5.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
quick=0
[ "${1:-}" = "--quick" ] && quick=1

scatterx_install_deps
prefix=$(mktemp -d)
deps_pid=""
trap 'rm -rf "$prefix"; [ -z "$deps_pid" ] || kill "$deps_pid" 2>/dev/null || true' EXIT

# The Python packages install in the background while the C++ build runs.
# Unpacking torch's GBs keeps about one core busy for 1.5 minutes, which
# slows the build by about half of what running it alone would take (more
# where the download waits on the network). Its output is shown when done.
mkdir -p "$SCATTERX_ROOT/build"
deps_log="$SCATTERX_ROOT/build/python_deps.log"
scatterx_python_deps $([ "${SCATTERX_TORCH:-1}" = 0 ] || echo torch pyg) mpi4py >"$deps_log" 2>&1 &
deps_pid=$!

scatterx_build release
echo "== ctest (release)"
ctest --preset release -j "$SCATTERX_JOBS"

echo "== install + find_package(scatterx) from another project"
cmake --install "$SCATTERX_ROOT/build/release" --prefix "$prefix/install" >/dev/null
cmake -S "$SCATTERX_ROOT/examples/consumer" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix/install" >/dev/null
cmake --build "$prefix/consumer" -j "$SCATTERX_JOBS" >/dev/null
"$prefix/consumer/consumer"
if [ -x "$prefix/consumer/consumer_dist" ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 "$prefix/consumer/consumer_dist"
fi

echo "== python packages (installed in the background during the build; log: build/python_deps.log)"
if ! wait "$deps_pid"; then
  deps_pid=""
  cat "$deps_log"
  echo "== installing the Python packages failed" >&2
  exit 1
fi
deps_pid=""
cat "$deps_log"
scatterx_python_package
echo "== environment (python -m scatterx.info)"
"$SCATTERX_VENV/bin/python" -m scatterx.info
echo "== pytest"
(cd "$SCATTERX_ROOT" && OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$SCATTERX_VENV/bin/python" -m pytest -q -rs tests/python)

# autodoc imports every documented module: the torch layers need torch, scatterx.distributed needs MPI.
if "$SCATTERX_VENV/bin/python" -c "import torch, scatterx._C as c; assert hasattr(c, 'dist')" 2>/dev/null; then
  echo "== API reference (docs/ -> build/docs; Sphinx, warnings are errors)"
  # -E: read every page again, so a docstring changed in the installed package is always re-checked.
  "$SCATTERX_VENV/bin/python" -m sphinx -E -W --keep-going -q -b html "$SCATTERX_ROOT/docs" "$SCATTERX_ROOT/build/docs"
else
  echo "== API reference skipped: it documents the torch layers and scatterx.distributed (needs torch and MPI)"
fi

if "$SCATTERX_VENV/bin/python" -c "import scatterx._C as c; assert hasattr(c, 'dist')" 2>/dev/null; then
  echo "== pytest under mpirun (scatterx.distributed)"
  for n in 1 2 3 4; do
    echo "-- $n rank(s)"
    (cd "$SCATTERX_ROOT" && timeout 600 mpirun --allow-run-as-root --oversubscribe -n "$n" \
      env OMP_NUM_THREADS=1 "$SCATTERX_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/python_dist)
  done
  if "$SCATTERX_VENV/bin/python" -c "import torch" 2>/dev/null; then
    for n in 2 4; do
      echo "-- examples/moe_layer.py, $n ranks"
      (cd "$SCATTERX_ROOT" && timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" \
        env OMP_NUM_THREADS=1 "$SCATTERX_VENV/bin/python" examples/moe_layer.py)
      echo "-- examples/graphsage_dist.py, $n ranks"
      (cd "$SCATTERX_ROOT" && timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" \
        env OMP_NUM_THREADS=1 "$SCATTERX_VENV/bin/python" examples/graphsage_dist.py)
      echo "-- examples/embedding_bag_dist.py, $n ranks (timed on a smaller table)"
      (cd "$SCATTERX_ROOT" && timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" \
        env OMP_NUM_THREADS=1 "$SCATTERX_VENV/bin/python" examples/embedding_bag_dist.py --rows 100000 --batch 2048)
    done
  fi
  echo "-- 3 ranks, through the CUDA tensors' paths on an emulated device (dist/device.h)"
  (cd "$SCATTERX_ROOT" && timeout 600 mpirun --allow-run-as-root --oversubscribe -n 3 \
    env OMP_NUM_THREADS=1 SCATTERX_DIST_EMULATE_DEVICE=staged SCATTERX_DIST_STAGING_CHUNK_BYTES=65536 \
    "$SCATTERX_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/python_dist)
  echo "== several hosts on this machine (scripts/multihost.sh --suite: network namespaces, TCP between them)"
  # Making a namespace needs root (CAP_SYS_ADMIN); a container without it skips.
  probe="sxmhprobe$$"
  if command -v ip >/dev/null && ip netns add "$probe" 2>/dev/null; then
    ip netns delete "$probe"
    timeout 600 bash "$SCATTERX_ROOT/scripts/multihost.sh" --suite
  else
    echo "-- skipped: 'ip netns add' is not permitted here (needs root), so no simulated hosts"
  fi
elif command -v mpicc >/dev/null; then
  echo "== MPI is installed but the Python package has no scatterx._C.dist: the build lost the distributed layer" >&2
  exit 1
else
  echo "== scatterx.distributed not built (no MPI found): its mpirun tests are skipped"
fi

if [ $quick -eq 0 ]; then
  scatterx_build asan
  echo "== ctest (asan + ubsan)"
  ctest --preset asan -j "$SCATTERX_JOBS"
  "$SCATTERX_ROOT/scripts/fuzz.sh" "${SCATTERX_FUZZ_SECONDS:-60}"
fi
echo "== all tests passed"

#!/usr/bin/env bash
# The CUDA backend's suite, for any machine with an NVIDIA GPU, in steps that
# each end well inside 10 minutes and that can run as separate commands:
#   build   configure and build the `cuda` preset (Ninja; sm_90 unless
#           CMAKE_CUDA_ARCHITECTURES says otherwise): the CUDA tests, the
#           GPU benchmark and, where MPI is found, the distributed suite;
#   tests   the CUDA tests (tests/cuda_test.cpp: every op x dtype x reduce
#           against the serial reference), then compute-sanitizer memcheck
#           over a fast subset of them;
#   dist    the distributed layer's CUDA tests under mpirun, 2 ranks sharing
#           the GPU: through pinned staging, and directly if MPI reports
#           itself CUDA-aware;
#   python  the Python package built with the CUDA backend (python3 with
#           torch, nanobind and scikit-build-core, no network needed) and
#           its whole pytest suite, torch CUDA tensors and CuPy arrays
#           included (tests/python/test_cuda.py and the CUDA autograd tests);
#   bench   the GPU benchmark (bench/bench_cuda.cpp), torch's CUDA ops on the
#           same workloads (bench/bench_cuda_torch.py, skipped without
#           torch), and one table with the floors (bench/gpu_report.py);
#           after the python step, also the GNN layer's ops beside torch
#           (bench/bench_gnn_cuda.py).
# With no step named, all five run in order. A failing step never stops the
# later ones; each appends "STEP: ok" or "STEP: FAILED (...)" to
# OUT/steps.txt, its logs and results land in OUT (default build/gpu_suite),
# and the exit status is non-zero when any step failed.
#
# Usage: scripts/gpu_suite.sh [--deps DIR] [--build-dir DIR] [--out DIR] [--quick] [STEP ...]
#   --deps DIR  a bundle from scripts/gpu_bundle.sh (GoogleTest source, Google
#               Benchmark, Open MPI) for a node that has none of them;
#   --quick     the tests' smoke subset, benchmarks with one repetition.
# SCATTERX_GPU_STEP_SECONDS (default 540) bounds each step.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build/cuda"
out="$root/build/gpu_suite"
deps=""
quick=0
steps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deps) deps=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    build|tests|dist|python|bench) steps+=("$1"); shift ;;
    all) steps+=(build tests dist python bench); shift ;;
    *) echo "gpu_suite.sh: expected --deps, --build-dir, --out, --quick or a step (build tests dist python bench all), got $1" >&2
       exit 2 ;;
  esac
done
[ ${#steps[@]} -gt 0 ] || steps=(build tests dist python bench)
mkdir -p "$out"
out=$(cd "$out" && pwd)
bundle_args=""
if [ -n "$deps" ]; then
  [ -f "$deps/env.sh" ] || { echo "gpu_suite.sh: --deps expected a folder made by scripts/gpu_bundle.sh, got $deps" >&2; exit 2; }
  # shellcheck source=/dev/null
  source "$deps/env.sh"
  bundle_args=$SCATTERX_BUNDLE_CMAKE_ARGS
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
step_seconds=${SCATTERX_GPU_STEP_SECONDS:-540}
tests="$build/tests/scatterx_cuda_tests"
bench="$build/bench/scatterx_bench_cuda"
dist_tests="$build/tests/dist/scatterx_dist_tests"

# ---------------------------------------------------------------- steps
# Each returns non-zero on failure and leaves its logs in $out.

step_build() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$out/device.txt" 2>&1 || true
  cat "$out/device.txt"
  # shellcheck disable=SC2086
  cmake --preset cuda -S "$root" -B "$build" -DSCATTERX_BUILD_PYTHON=OFF $bundle_args >"$out/build.log" 2>&1 &&
    cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1
  local status=$?
  tail -n 5 "$out/build.log"
  return $status
}

step_tests() {
  local status=0 filter='*'
  [ $quick -eq 1 ] && filter='CudaTest.*:*Float32*:*Int64_Amax*:*BFloat16_Sum*'
  "$tests" --gtest_filter="$filter" --gtest_output="xml:$out/cuda_tests.xml" >"$out/cuda_tests.log" 2>&1 || status=1
  tail -n 25 "$out/cuda_tests.log"
  echo "-- compute-sanitizer memcheck (a fast subset of the tests)"
  local memcheck_filter='CudaTest.*:*Float32_Sum_IndexInt64*:*Float16_Amax_IndexInt32*:*Complex128_Prod_IndexInt64*'
  memcheck_filter+=':*Bool_IndexInt32_Gather*:*Int8_Sum_IndexInt64_Src*:*BFloat16_Mean_IndexInt32*'
  if command -v compute-sanitizer >/dev/null; then
    compute-sanitizer --tool memcheck --error-exitcode 1 "$tests" --gtest_filter="$memcheck_filter" \
      >"$out/memcheck.log" 2>&1 || status=1
    tail -n 8 "$out/memcheck.log"
  else
    echo "compute-sanitizer not found: memcheck skipped" | tee "$out/memcheck.log"
  fi
  return $status
}

step_dist() {
  if ! command -v mpirun >/dev/null || [ ! -x "$dist_tests" ]; then
    echo "mpirun or scatterx_dist_tests not here (give --deps DIR): skipped" | tee "$out/dist.log"
    return 1
  fi
  # With CUDA-aware MPI the default run hands device buffers to MPI; the
  # second run forces the pinned staging path either way.
  local status=0 aware
  for aware in 1 0; do
    SCATTERX_DIST_TIMEOUT=120 SCATTERX_DIST_CUDA_AWARE=$aware OMP_NUM_THREADS=1 mpirun -n 2 --oversubscribe \
      "$dist_tests" --gtest_filter='CudaDist*:InteropTest.*' >"$out/dist_cuda_aware$aware.log" 2>&1 || status=1
    tail -n 4 "$out/dist_cuda_aware$aware.log"
  done
  return $status
}

step_python() {
  # Installed into a folder of its own (--target) so that the machine's
  # Python stays as it was; no build isolation: nothing can be fetched.
  local site="$build-python-site" status=0
  rm -rf "$site"
  # shellcheck disable=SC2086
  CMAKE_ARGS="$bundle_args -DSCATTERX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}" \
    python3 -m pip install --no-build-isolation --no-deps --no-compile --target "$site" \
    --config-settings=build-dir="$build-python" "$root" >"$out/python_build.log" 2>&1 || { tail -n 30 "$out/python_build.log"; return 1; }
  local workers=""
  python3 -c 'import xdist' 2>/dev/null && workers="-n 8"
  # shellcheck disable=SC2086
  (cd "$root" && PYTHONPATH="$site" python3 -m pytest -q $workers -p no:cacheprovider tests/python \
    --junitxml="$out/pytest.xml" >"$out/pytest.log" 2>&1) || status=1
  tail -n 15 "$out/pytest.log"
  echo "-- the CUDA tests alone"
  (cd "$root" && PYTHONPATH="$site" python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py -rs \
    >"$out/pytest_cuda.log" 2>&1) || status=1
  tail -n 5 "$out/pytest_cuda.log"
  return $status
}

step_bench() {
  local status=0 repetitions=5
  [ $quick -eq 1 ] && repetitions=1
  "$bench" --benchmark_repetitions=$repetitions \
    --benchmark_report_aggregates_only=$([ $repetitions -gt 1 ] && echo true || echo false) \
    --benchmark_out="$out/scatterx.json" --benchmark_out_format=json >"$out/scatterx.txt" 2>&1 || status=1
  tail -n 40 "$out/scatterx.txt"
  echo "-- torch"
  python3 "$root/bench/bench_cuda_torch.py" --json "$out/torch.json" >"$out/torch.txt" 2>&1 ||
    echo '{"results": []}' >"$out/torch.json"
  tail -n 30 "$out/torch.txt"
  echo "-- report"
  python3 "$root/bench/gpu_report.py" --scatterx "$out/scatterx.json" --torch "$out/torch.json" \
    --markdown "$out/results.md" || status=1
  if [ -d "$build-python-site/scatterx" ]; then
    echo "-- the GNN layer beside torch (the python step's package)"
    PYTHONPATH="$build-python-site" python3 "$root/bench/bench_gnn_cuda.py" --markdown-out "$out/gnn.md" \
      >"$out/gnn.txt" 2>&1 || status=1
    tail -n 25 "$out/gnn.txt"
  fi
  return $status
}

# ---------------------------------------------------------------- driver

export root build out quick bundle_args tests bench dist_tests
failed=0
for step in "${steps[@]}"; do
  echo "== $step"
  start=$(date +%s)
  # A subshell per step: a crash or a time-out ends that step alone.
  ( export -f "step_$step"; timeout "$step_seconds" bash -c "step_$step" )
  rc=$?
  seconds=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    echo "$step: ok (${seconds} s)" | tee -a "$out/steps.txt"
  else
    [ $rc -eq 124 ] && why="timed out after $step_seconds s" || why="exit $rc"
    echo "$step: FAILED ($why, ${seconds} s; logs in $out)" | tee -a "$out/steps.txt"
    failed=1
  fi
done
echo "== results in $out"
exit $failed

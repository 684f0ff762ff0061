#!/usr/bin/env bash
# The CUDA backend's suite, for any machine with an NVIDIA GPU:
#   1. builds the `cuda` preset (sm_90 unless CMAKE_CUDA_ARCHITECTURES says
#      otherwise) -- or, with --no-build, uses binaries built elsewhere;
#   2. runs the CUDA tests (tests/cuda_test.cpp: every op x dtype x reduce
#      against the serial reference), then compute-sanitizer memcheck over a
#      fast subset of them; where MPI is installed, the distributed layer's
#      CUDA tests under mpirun (2 ranks, staged and, if MPI is CUDA-aware,
#      direct);
#   3. runs the GPU benchmark (bench/bench_cuda.cpp) and torch's CUDA ops on
#      the same workloads (bench/bench_cuda_torch.py, skipped without torch),
#      and writes one table with the floors (bench/gpu_report.py).
# Everything lands in --out (default build/gpu_suite): results.md, the JSON,
# the logs. Exit status: non-zero when a test or memcheck fails.
#
# Usage: scripts/gpu_suite.sh [--build-dir DIR] [--out DIR] [--no-build] [--quick]
#   --quick: the tests' smoke subset only, benchmarks with one repetition.
# Binaries built on another machine run here as they are (static CUDA
# runtime, GoogleTest linked in); the benchmark needs libbenchmark's shared
# library: put it in DIR/carried-libs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build/cuda"
out="$root/build/gpu_suite"
do_build=1
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --quick) quick=1; shift ;;
    *) echo "gpu_suite.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export LD_LIBRARY_PATH="$build/carried-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/device.txt"

if [ $do_build -eq 1 ]; then
  echo "== build (cuda preset)"
  cmake --preset cuda -S "$root" -B "$build" -DSCATTERX_BUILD_PYTHON=OFF >/dev/null
  cmake --build "$build" -j "$(nproc)" --target scatterx_cuda_tests scatterx_bench_cuda
fi
tests="$build/tests/scatterx_cuda_tests"
bench="$build/bench/scatterx_bench_cuda"

status=0
echo "== CUDA tests"
filter='*'
[ $quick -eq 1 ] && filter='CudaTest.*:*Float32*:*Int64_Amax*:*BFloat16_Sum*'
if ! "$tests" --gtest_filter="$filter" --gtest_output="xml:$out/cuda_tests.xml" >"$out/cuda_tests.log" 2>&1; then
  status=1
fi
tail -n 25 "$out/cuda_tests.log"

echo "== compute-sanitizer memcheck (a fast subset of the tests)"
memcheck_filter='CudaTest.*:*Float32_Sum_IndexInt64*:*Float16_Amax_IndexInt32*:*Complex128_Prod_IndexInt64*'
memcheck_filter+=':*Bool_IndexInt32_Gather*:*Int8_Sum_IndexInt64_Src*'
if command -v compute-sanitizer >/dev/null; then
  if ! compute-sanitizer --tool memcheck --error-exitcode 1 "$tests" --gtest_filter="$memcheck_filter" \
      >"$out/memcheck.log" 2>&1; then
    status=1
  fi
  tail -n 8 "$out/memcheck.log"
else
  echo "compute-sanitizer not found: memcheck skipped" | tee "$out/memcheck.log"
fi

echo "== distributed layer on the GPU (2 ranks sharing the device)"
dist_tests="$build/tests/dist/scatterx_dist_tests"
if command -v mpirun >/dev/null; then
  [ $do_build -eq 1 ] && { cmake --build "$build" -j "$(nproc)" --target scatterx_dist_tests >/dev/null 2>&1 || true; }
fi
if command -v mpirun >/dev/null && [ -x "$dist_tests" ]; then
  # With CUDA-aware MPI the default run hands device buffers to MPI; the
  # second run forces the pinned staging path either way.
  for aware in 1 0; do
    if ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 SCATTERX_DIST_TIMEOUT=120 \
        SCATTERX_DIST_CUDA_AWARE=$aware mpirun -n 2 --oversubscribe "$dist_tests" \
        --gtest_filter='CudaDist*:InteropTest.*' >"$out/dist_cuda_aware$aware.log" 2>&1; then
      status=1
    fi
    tail -n 4 "$out/dist_cuda_aware$aware.log"
  done
else
  echo "mpirun or scatterx_dist_tests not here: skipped" | tee "$out/dist_cuda_aware1.log"
fi

echo "== benchmarks: scatterx"
repetitions=5
[ $quick -eq 1 ] && repetitions=1
"$bench" --benchmark_repetitions=$repetitions --benchmark_report_aggregates_only=$([ $repetitions -gt 1 ] && echo true || echo false) \
  --benchmark_out="$out/scatterx.json" --benchmark_out_format=json | tee "$out/scatterx.txt"

echo "== benchmarks: torch"
python3 "$root/bench/bench_cuda_torch.py" --json "$out/torch.json" | tee "$out/torch.txt" || \
  echo '{"results": []}' >"$out/torch.json"

echo "== report"
python3 "$root/bench/gpu_report.py" --scatterx "$out/scatterx.json" --torch "$out/torch.json" \
  --markdown "$out/results.md"
echo "== results in $out (tests: $([ $status -eq 0 ] && echo passed || echo FAILED))"
exit $status

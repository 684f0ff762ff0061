#!/usr/bin/env bash
# scripts/gpu_suite.sh runs every step it is given, whatever happened to the
# ones before: here on stand-in binaries (no GPU needed), the tests step fails,
# the bench step outlives its time limit, the dist step finds no suite; each
# is reported in steps.txt and the suite's exit status is non-zero.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/tests" "$tmp/build/bench"
printf '#!/bin/sh\necho "stand-in CUDA tests: 1 failed"\nexit 1\n' >"$tmp/build/tests/scatterx_cuda_tests"
printf '#!/bin/sh\nsleep 60\n' >"$tmp/build/bench/scatterx_bench_cuda"
chmod +x "$tmp/build/tests/scatterx_cuda_tests" "$tmp/build/bench/scatterx_bench_cuda"

status=0
PATH=/usr/bin:/bin SCATTERX_GPU_STEP_SECONDS=3 bash "$root/scripts/gpu_suite.sh" --build-dir "$tmp/build" \
  --out "$tmp/out" tests bench dist >"$tmp/log" 2>&1 || status=$?
cat "$tmp/out/steps.txt"
fail() { echo "gpu_suite_steps_test: $1"; cat "$tmp/log"; exit 1; }
[ $status -ne 0 ] || fail "expected a non-zero exit status, got 0"
grep -q '^tests: FAILED (exit 1' "$tmp/out/steps.txt" || fail "expected the tests step to fail with exit 1"
grep -q '^bench: FAILED (timed out after 3 s' "$tmp/out/steps.txt" || fail "expected the bench step to time out"
grep -q '^dist: FAILED' "$tmp/out/steps.txt" || fail "expected the dist step to run and fail"
grep -q 'stand-in CUDA tests: 1 failed' "$tmp/out/cuda_tests.log" || fail "expected the tests step's log in OUT"
[ "$(wc -l <"$tmp/out/steps.txt")" -eq 3 ] || fail "expected one line per step"
echo "gpu_suite_steps_test: 3 steps, each reported"

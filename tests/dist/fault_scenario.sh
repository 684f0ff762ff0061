#!/usr/bin/env bash
# Runs one scenario of fault_scenarios.cpp under mpirun and checks how the job
# ended:
#   fault_scenario.sh EXPECT BOUND_S REGEX EXE -- COMMAND...
# EXPECT is "fail" (nonzero exit status), "pass" (zero) or "any" (mpirun
# --enable-recovery exits 0 even after MPI_Abort); the job must end
# within BOUND_S seconds, print something matching REGEX (grep -E), and leave
# no process running EXE behind (any found is listed, killed by its pid, and
# fails the test).
set -u
expect=$1 bound=$2 regex=$3 exe=$4
shift 5
log=$(mktemp)
start=$(date +%s%N)
timeout -s KILL $((bound + 60)) "$@" >"$log" 2>&1
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
elapsed=$((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000)))
cat "$log"
status=0
echo "--- exit status $rc after ${elapsed} s (bound ${bound} s)"
if [ "$expect" = fail ] && [ "$rc" -eq 0 ]; then echo "FAIL: expected a nonzero exit status"; status=1; fi
if [ "$expect" = pass ] && [ "$rc" -ne 0 ]; then echo "FAIL: expected exit status 0"; status=1; fi
if [ "$elapsed_ms" -gt $((bound * 1000)) ]; then echo "FAIL: took longer than ${bound} s"; status=1; fi
if ! grep -Eq "$regex" "$log"; then echo "FAIL: output does not match \"$regex\""; status=1; fi
rm -f "$log"
# mpirun has returned; its ranks must be gone too (allow them a moment). A
# rank's command line starts with EXE (this script's does not). Dead ranks
# whose parent exited may stay as zombies where PID 1 does not reap them (as
# in this project's containers): they hold no resources and are not counted.
running() { pgrep -f "^${exe}( |\$)"; }
for _ in $(seq 50); do
  running >/dev/null || break
  sleep 0.1
done
left=$(running)
if [ -n "$left" ]; then
  echo "FAIL: processes left running:"
  ps -o pid,etime,args -p $left
  kill -9 $left
  status=1
fi
[ "$status" -eq 0 ] && echo "ok: the job ended as expected, nothing left running"
exit $status

#!/usr/bin/env bash
# scripts/fuzz.sh [seconds] [--merge]: builds the fuzz preset (clang, libFuzzer,
# ASan + UBSan; the ops library and fuzz/ops_fuzzer.cpp only) and runs the
# fuzzer for `seconds` (default 60) over the committed corpus fuzz/corpus.
# New inputs go to a scratch directory, so the committed corpus only changes
# with --merge, which folds the inputs that add coverage into it afterwards.
# Exits nonzero on any finding (a wrong result, an undocumented error, a
# crash, a sanitizer report, a leak or a timeout); the input that caused it
# is saved under build/fuzz/artifacts/ and rerunning the fuzzer on that one
# file reproduces it:
#   build/fuzz/fuzz/scatterx_ops_fuzzer build/fuzz/artifacts/crash-...
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
seconds=60
merge=0
for arg in "$@"; do
  case $arg in
    --merge) merge=1 ;;
    *) seconds=$arg ;;
  esac
done

scatterx_install_deps
scatterx_build fuzz
fuzzer="$SCATTERX_ROOT/build/fuzz/fuzz/scatterx_ops_fuzzer"
corpus="$SCATTERX_ROOT/fuzz/corpus"
artifacts="$SCATTERX_ROOT/build/fuzz/artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export SCATTERX_HOST_CACHE_BYTES=0  # every freed block back to the allocator, where ASan sees a use after free
export OMP_NUM_THREADS=1
echo "== fuzzing the op front ends for ${seconds}s (corpus: $(ls "$corpus" | wc -l) inputs)"
"$fuzzer" -max_total_time="$seconds" -print_final_stats=1 -max_len=512 -timeout=30 -rss_limit_mb=2048 \
  -artifact_prefix="$artifacts/" "$scratch" "$corpus"
if [ $merge -eq 1 ]; then
  echo "== merging the inputs that add coverage into fuzz/corpus"
  "$fuzzer" -merge=1 -max_len=512 "$corpus" "$scratch"
fi
echo "== fuzzing found nothing"

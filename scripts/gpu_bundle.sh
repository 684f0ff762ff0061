#!/usr/bin/env bash
# Gathers, on a Debian 12 machine with network, what the GPU suite
# (scripts/gpu_suite.sh) needs and a bare, air-gapped GPU node lacks, into one
# folder to carry there (about 30 MiB):
#   - GoogleTest's source (Debian's googletest), built with the tests;
#   - Google Benchmark's headers, library and CMake package (libbenchmark-dev);
#   - Open MPI 4.1's runtime, wrappers and headers with their libraries
#     (openmpi-bin, libopenmpi-dev and dependencies), unpacked and relocated
#     through OPAL_PREFIX, for the distributed layer's device tests.
# DIR/env.sh sets PATH, LD_LIBRARY_PATH and Open MPI's relocation variables
# and SCATTERX_BUNDLE_CMAKE_ARGS (what CMake needs to find all three); paths
# are relative to DIR, so the folder may move. `scripts/gpu_suite.sh --deps
# DIR` sources it.
#
# Usage: scripts/gpu_bundle.sh DIR           gather into DIR (emptied first)
#        scripts/gpu_bundle.sh --check DIR   dry run of the GPU suite's build
#   --check configures and builds the cuda preset (into DIR-check-build) in a
#   mount namespace where the system's GoogleTest, Google Benchmark and Open
#   MPI are hidden, so that everything comes from DIR, then runs the CPU
#   parts that prove each piece works: a GoogleTest suite built from the
#   source, the benchmark binary linked to the carried library, and the
#   distributed suite under the carried mpirun with 2 ranks.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian packages whose files the bundle holds (the runtime dependencies of
# Open MPI that a CUDA image usually lacks included).
packages=(googletest libbenchmark-dev libbenchmark1debian
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-2.1-7
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200
  libnl-route-3-200 libpsm2-2 libmunge2 libltdl7 libnuma1)

gather() {
  local dir=$1
  rm -rf "$dir"
  mkdir -p "$dir/debs" "$dir/root" "$dir/bin"
  dir=$(cd "$dir" && pwd)
  (cd "$dir/debs" && apt-get download "${packages[@]}" >/dev/null 2>&1) || {
    apt-get update -qq && (cd "$dir/debs" && apt-get download "${packages[@]}" >/dev/null)
  }
  for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$dir/root"; done
  rm -rf "$dir/debs" "$dir/root/usr/share/doc" "$dir/root/usr/share/man" "$dir/root/usr/share/lintian" \
    "$dir/root/usr/lib/x86_64-linux-gnu/fortran"
  local tool
  for tool in mpirun mpiexec mpicc mpicxx ompi_info; do
    local target=usr/bin/$tool.openmpi
    [ -e "$dir/root/$target" ] || target=usr/bin/$tool
    ln -s "../root/$target" "$dir/bin/$tool"
  done
  cat >"$dir/env.sh" <<'EOF'
# Written by scripts/gpu_bundle.sh: source it to use this bundle.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=$here/root/usr/lib/x86_64-linux-gnu
export PATH="$here/bin:$PATH"
export LD_LIBRARY_PATH="$lib:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$here/root/usr"                                 # Open MPI, moved from /usr
export PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"       # its PMIx's plugins
# One node: shared memory and TCP through the ob1 layer, no ssh. (With an
# InfiniPath PSM library found and no such hardware, the PSM layer was
# picked and hung the threaded tests.)
export OMPI_MCA_plm_rsh_agent=false OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
SCATTERX_BUNDLE_CMAKE_ARGS="-DSCATTERX_GTEST_SOURCE_DIR=$here/root/usr/src/googletest"
SCATTERX_BUNDLE_CMAKE_ARGS+=" -Dbenchmark_ROOT=$here/root/usr -DCMAKE_PREFIX_PATH=$here/root/usr"
SCATTERX_BUNDLE_CMAKE_ARGS+=" -DMPI_C_COMPILER=$here/bin/mpicc -DMPI_CXX_COMPILER=$here/bin/mpicxx"
SCATTERX_BUNDLE_CMAKE_ARGS+=" -DMPIEXEC_EXECUTABLE=$here/bin/mpirun"
export SCATTERX_BUNDLE_CMAKE_ARGS
unset here lib
EOF
  echo "gpu_bundle.sh: $dir holds $(du -sh "$dir" | cut -f1) ($(find "$dir" | wc -l) files)"
}

# Inside `unshare -m`: bind empty folders (and /dev/null for files) over the
# system's copies, so that a build can only use the bundle's.
hide_system_copies() {
  mount --make-rprivate /
  local empty
  empty=$(mktemp -d)
  local d f
  for d in /usr/include/gtest /usr/include/gmock /usr/include/benchmark /usr/src/googletest \
    /usr/lib/x86_64-linux-gnu/cmake/GTest /usr/lib/x86_64-linux-gnu/cmake/benchmark \
    /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi; do
    if [ -d "$d" ]; then mount --bind "$empty" "$d"; fi
  done
  for f in /usr/lib/x86_64-linux-gnu/libmpi.so.40.* /usr/lib/x86_64-linux-gnu/libopen-rte.so.40.* \
    /usr/lib/x86_64-linux-gnu/libopen-pal.so.40.* /usr/lib/x86_64-linux-gnu/libgtest*.a \
    /usr/lib/x86_64-linux-gnu/libgmock*.a /usr/lib/x86_64-linux-gnu/libbenchmark* /usr/bin/orterun /usr/bin/opal_wrapper; do
    if [ -f "$f" ]; then mount --bind /dev/null "$f"; fi
  done
}

check() {
  local dir build
  dir=$(cd "$1" && pwd)
  build="$dir-check-build"
  hide_system_copies
  # shellcheck source=/dev/null
  source "$dir/env.sh"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  echo "== configure the cuda preset from the bundle alone ($build)"
  # shellcheck disable=SC2086
  cmake --preset cuda -S "$root" -B "$build" -DSCATTERX_BUILD_PYTHON=OFF $SCATTERX_BUNDLE_CMAKE_ARGS >"$build.log" 2>&1 ||
    { tail -n 30 "$build.log"; return 1; }
  grep -E "GoogleTest built from|Found MPI|benchmark" "$build.log" || true
  echo "== build"
  cmake --build "$build" -j "$(nproc)" --target scatterx_tests scatterx_cuda_tests scatterx_bench_cuda \
    scatterx_dist_tests >>"$build.log" 2>&1 || { tail -n 30 "$build.log"; return 1; }
  echo "== GoogleTest from the bundle's source"
  "$build/tests/scatterx_tests" --gtest_filter='FoldToleranceTest*:FoldValues*' | tail -n 1
  echo "== Google Benchmark from the bundle's library"
  ldd "$build/bench/scatterx_bench_cuda" | grep benchmark
  "$build/bench/scatterx_bench_cuda" --benchmark_list_tests >/dev/null
  echo "== the distributed suite under the bundle's mpirun, 2 ranks"
  ldd "$build/tests/dist/scatterx_dist_tests" | grep -E "libmpi|open-pal"
  OMP_NUM_THREADS=1 SCATTERX_DIST_TIMEOUT=120 timeout 540 mpirun -n 2 --oversubscribe \
    "$build/tests/dist/scatterx_dist_tests" 2>&1 | grep -E '^\[  (PASSED|FAILED)  \]'
}

case "${1:-}" in
  --check)
    [ $# -eq 2 ] || { echo "usage: $0 --check DIR" >&2; exit 2; }
    export -f hide_system_copies check
    export root
    exec unshare -m bash -c "set -euo pipefail; check '$2'"
    ;;
  -*|"")
    echo "usage: $0 DIR | --check DIR" >&2
    exit 2
    ;;
  *)
    gather "$1"
    ;;
esac

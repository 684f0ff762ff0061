#!/usr/bin/env bash
# The main job: builds only what it runs, then shows the library on generated
# data, each part checked against a single-process reference and timed:
#   1. GNN aggregation and MoE token routing from C++ (scatterx_demo), then
#      from Python (examples/demo.py: numpy, and torch with autograd),
#   2. under mpirun with 2 ranks: the MoE layer (examples/moe_layer.cpp and
#      examples/moe_layer.py), a sharded embedding bag
#      (examples/embedding_bag_dist.py) and a GraphSAGE training step over a
#      partitioned graph (examples/graphsage_dist.py).
# torch is installed into build/venv for the Python parts; with
# SCATTERX_TORCH=0 it is not, and the parts that need it say they are
# skipped. Extra arguments go to the single-process demos (see --help).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
scatterx_install_deps
echo "== configure + build the demos (release)"
cmake --preset release -S "$SCATTERX_ROOT" >/dev/null
targets=(scatterx_demo)
command -v mpirun >/dev/null && targets+=(scatterx_moe_layer)
cmake --build "$SCATTERX_ROOT/build/release" -j "$SCATTERX_JOBS" --target "${targets[@]}"
echo "== demo (C++)"
"$SCATTERX_ROOT/build/release/examples/scatterx_demo" "$@"

scatterx_python_env $([ "${SCATTERX_TORCH:-1}" = 0 ] || echo torch)
python=("$SCATTERX_VENV/bin/python")
echo "== demo (Python)"
"${python[@]}" "$SCATTERX_ROOT/examples/demo.py" "$@"

if ! command -v mpirun >/dev/null; then
  echo "== no mpirun: the distributed demos are skipped"
  exit 0
fi
# As root Open MPI wants both variables; with 2 ranks on 2 cores no oversubscription is needed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(timeout 300 mpirun -n 2 --oversubscribe env OMP_NUM_THREADS=1)
echo "== MoE layer, 2 ranks (C++: dist/moe.h)"
"${mpi[@]}" "$SCATTERX_ROOT/build/release/examples/scatterx_moe_layer"
if ! "${python[@]}" -c "import torch" 2>/dev/null; then
  echo "== torch is not installed: the Python distributed demos are skipped"
  exit 0
fi
for example in moe_layer embedding_bag_dist graphsage_dist; do
  echo "== examples/$example.py, 2 ranks"
  "${mpi[@]}" "${python[@]}" "$SCATTERX_ROOT/examples/$example.py"
done
echo "== demo finished: every check passed"

#!/usr/bin/env bash
# Builds scatterx and runs the demo: GNN aggregation and MoE token routing
# on generated data, from C++ and then from Python (numpy; and torch with
# autograd when build/venv has torch, e.g. after scripts/test.sh, or with
# SCATTERX_TORCH=1). Extra arguments go to both demos (see --help).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
scatterx_install_deps
scatterx_build release
echo "== demo"
"$SCATTERX_ROOT/build/release/examples/scatterx_demo" "$@"
scatterx_python_env "$([ "${SCATTERX_TORCH:-0}" = 1 ] && echo torch)"
echo "== python demo"
"$SCATTERX_VENV/bin/python" "$SCATTERX_ROOT/examples/demo.py" "$@"

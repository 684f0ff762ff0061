#!/usr/bin/env bash
# Builds scatterx and runs the demo: GNN aggregation and MoE token routing
# on generated data. Extra arguments go to the demo (see --help).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
scatterx_install_deps
scatterx_build release
echo "== demo"
"$SCATTERX_ROOT/build/release/examples/scatterx_demo" "$@"

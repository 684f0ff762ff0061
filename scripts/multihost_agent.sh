#!/usr/bin/env bash
# Open MPI's launch agent for scripts/multihost.sh (--mca plm_rsh_agent).
# mpirun calls it as it would call ssh, `multihost_agent.sh HOST COMMAND...`
# with HOST an address of the hostfile (10.231.0.I), and it runs COMMAND (a
# shell command line, as ssh runs it) in host I's network namespace under
# host I's hostname, set in a UTS namespace of its own. So each simulated
# host runs its own orted and Open MPI sees as many nodes as namespaces.
set -euo pipefail
host=$1
shift
index=${host##*.}
# The namespaces' prefix comes from multihost.sh through mpirun's environment.
# shellcheck disable=SC2016  # expanded by the inner sh
exec ip netns exec "${SCATTERX_MULTIHOST_NS:?set by scripts/multihost.sh}h$index" \
  unshare --uts sh -c 'hostname "$1"; shift; exec sh -c "$*"' sh "sxhost$index" "$@"

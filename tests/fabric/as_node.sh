#!/usr/bin/env bash
# Runs a program as a rank of a fake node, for multi-node tests on one host:
#   cclrun -n 4 -- as_node.sh 2 prog args...   # 2 nodes x 2 ranks
# Rank r (CCL_RANK, from cclrun) gets CCL_NODE_ID=node<r / PPN>, LOCAL_RANK and LOCAL_WORLD_SIZE
# to match: ranks of different fake nodes share no memory and talk over libfabric (tcp on
# loopback unless FI_PROVIDER says otherwise). With AS_NODE_ORDER=cyclic, rank r is on node
# r % (CCL_SIZE / PPN) instead, so that no node's ranks are consecutive.
set -euo pipefail
ppn=$1
shift
: "${CCL_RANK:?as_node.sh runs under cclrun (CCL_RANK unset)}"
if [ "${AS_NODE_ORDER:-}" = cyclic ]; then
    nodes=$((${CCL_SIZE:?} / ppn))
    export CCL_NODE_ID=node$((CCL_RANK % nodes))
    export LOCAL_RANK=$((CCL_RANK / nodes))
else
    export CCL_NODE_ID=node$((CCL_RANK / ppn))
    export LOCAL_RANK=$((CCL_RANK % ppn))
fi
export LOCAL_WORLD_SIZE=$ppn
exec "$@"

#!/usr/bin/env bash
# A torchrun-style launcher for one node, without torch: starts N copies of a program with RANK,
# WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, as torchrun does,
# and CCL_KVS_SECRET. MASTER_ADDR defaults to 127.0.0.1; MASTER_PORT to one below a free port (ccl's
# rank 0 serves the KVS at MASTER_PORT + 1). When a rank fails the others are stopped, and the
# first failure's status is the script's.
# Usage: torchrun_style.sh N program [args...]
set -u
n=${1:?usage: $0 N program [args...]}
shift
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
if [ -z "${MASTER_PORT:-}" ]; then
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
           2>/dev/null) || port=$((20000 + RANDOM % 20000))
    export MASTER_PORT=$((port - 1))
fi
# No channel carries a secret from rank 0 here: give every rank the same fresh one
# (docs/reliability.md).
export CCL_KVS_SECRET=${CCL_KVS_SECRET:-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')}
for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n "$@" &
done
status=0
for ((left = n; left > 0; left--)); do
    wait -n  # the next rank to end (the ranks are this script's only children)
    rc=$?
    if [ $rc -ne 0 ] && [ $status -eq 0 ]; then
        status=$rc
        running=$(jobs -p)
        [ -n "$running" ] && kill $running 2>/dev/null
    fi
done
exit $status

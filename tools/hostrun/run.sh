#!/usr/bin/env bash
# On the host: ccl against the host's Open MPI and the carried MPICH (where pack.sh carried it),
# three alternating rounds (compare_peers.sh), the results tarred into $OUT (or /tmp).
#   CARRY/run.sh "2 4 8 16" allreduce,broadcast,barrier
set -u
source "$(dirname "$0")/env.sh"
cd "$carry/../.."  # the checkout
echo "== host: $(nproc) cpus, $(lscpu | grep 'Model name' | sed 's/ \+/ /g'), load $(cut -d' ' -f1-3 /proc/loadavg)"
mpirun --version 2>&1 | head -1
ldd "$B/ccl_bench" | grep "not found"
o=/tmp/res-$(date +%H%M%S)
mkdir -p "$o"
peers=openmpi
[ -x "$carry/wrap/mpiexec.mpich" ] && peers="openmpi mpich"
tools/compare_peers.sh --peers "$peers" --ranks "$1" --colls "$2" --repeat 3 --target 0.2 \
    --ccl-bench "$B/ccl_bench" --cclrun "$B/cclrun" --out "$o/cmp" 2>&1 | tail -40
tar czf "${OUT:-/tmp}/$(basename "$o").tgz" -C "$o" .

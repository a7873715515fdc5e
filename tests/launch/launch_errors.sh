#!/usr/bin/env bash
# ccl_comm_create_from_env with wrong launcher variables: each case must fail with a clear message,
# quickly, and never hang. The program is the C API test, which prints ccl_last_error() and exits 1.
# Usage: launch_errors.sh TEST_C_API [MPIEXEC_MPICH] [MPIRUN_OPENMPI]  (empty: skip those cases)
set -u
prog=${1:?usage: $0 TEST_C_API [MPIEXEC_MPICH] [MPIRUN_OPENMPI]}
mpiexec=${2:-}
mpirun=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
# Nothing from the environment that runs the tests (a Slurm job, say) may take part.
for v in $(env | sed -n 's/^\(CCL_[A-Z_]*\|SLURM_[A-Z_]*\|PMI_[A-Z_]*\|PMIX_[A-Z_]*\|OMPI_[A-Z_]*\|MPI_LOCAL[A-Z]*\|TORCHELASTIC_[A-Z_]*\|RANK\|WORLD_SIZE\|LOCAL_RANK\|LOCAL_WORLD_SIZE\|MASTER_ADDR\|MASTER_PORT\)=.*/\1/p'); do
    unset "$v"
done
export CCL_KVS_TIMEOUT=3 CCL_TIMEOUT=10
TMP=$(mktemp -d)
bg=
trap '[ -n "$bg" ] && kill $bg 2>/dev/null; rm -rf "$TMP"' EXIT
failed=0
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
        2>/dev/null || echo $((20000 + RANDOM % 20000))
}

# expect NAME MAX_SECONDS TEXT... -- command...: the command fails (not by timeout) within
# MAX_SECONDS and its output holds every TEXT.
expect() {
    local name=$1 max=$2
    shift 2
    local texts=()
    while [ "$1" != "--" ]; do texts+=("$1"); shift; done
    shift
    local start rc t missing=
    start=$(now)
    if declare -F "$1" >/dev/null; then "$@"; else timeout 60 "$@"; fi >"$TMP/out" 2>&1
    rc=$?
    t=$(elapsed "$start")
    for x in "${texts[@]}"; do grep -qF -- "$x" "$TMP/out" || missing+=" '$x'"; done
    if [[ $rc != 0 && $rc != 124 && -z $missing ]] && awk -v t="$t" -v m="$max" 'BEGIN { exit !(t < m) }'; then
        echo "ok   $name (exit $rc after ${t}s)"
    else
        failed=1
        echo "FAIL $name: exit $rc after ${t}s (at most ${max}s expected)${missing:+, missing$missing}"
        sed 's/^/     /' "$TMP/out" | head -20
    fi
}

port=$(free_port)
torch=(RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)))

expect "RANK without WORLD_SIZE" 5 "invalid usage" "partial torchrun" "WORLD_SIZE" -- env RANK=0 "$prog"
expect "torchrun without MASTER_ADDR" 5 "invalid usage" "MASTER_ADDR" -- \
    env RANK=0 WORLD_SIZE=2 MASTER_PORT=29500 "$prog"
expect "stale RANK under Open MPI's variables" 5 "invalid usage" "conflicting" "OMPI_COMM_WORLD_RANK=1" -- \
    env "${torch[@]}" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 \
    OMPI_COMM_WORLD_LOCAL_SIZE=2 PMIX_NAMESPACE=x "$prog"
expect "forced launcher without its variables" 5 "invalid usage" "CCL_PROCESS_LAUNCHER=hydra" -- \
    env CCL_PROCESS_LAUNCHER=hydra "${torch[@]}" "$prog"
expect "CCL_PROCESS_LAUNCHER=none" 5 "invalid usage" "ccl_comm_create" -- \
    env CCL_PROCESS_LAUNCHER=none "${torch[@]}" "$prog"
expect "unknown CCL_PROCESS_LAUNCHER" 5 "invalid argument" "CCL_PROCESS_LAUNCHER='mpich'" -- \
    env CCL_PROCESS_LAUNCHER=mpich "${torch[@]}" "$prog"
expect "srun without PMI" 5 "invalid usage" "--mpi=pmi2" -- \
    env SLURM_PROCID=0 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_LOCALID=0 SLURM_NODEID=0 \
    SLURM_STEP_TASKS_PER_NODE=2 "$prog"

# A rank that never comes: ranks 0 and 1 of a job of 3 give up after CCL_KVS_TIMEOUT (3 s).
two_of_three() {
    local p
    p=$(($(free_port) - 1))
    env "${torch[@]}" WORLD_SIZE=3 MASTER_PORT=$p "$prog" &
    env "${torch[@]}" WORLD_SIZE=3 MASTER_PORT=$p RANK=1 LOCAL_RANK=1 "$prog"
    local rc1=$?
    wait $!
    local rc0=$?
    [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && return 1
    return 0
}
expect "a torchrun rank never arrives" 15 "timed out" -- two_of_three

# Rank 0's KVS port is taken (by another job's rank 0, here waiting for its rank 1).
env "${torch[@]}" CCL_KVS_TIMEOUT=20 "$prog" >"$TMP/bg" 2>&1 &
bg=$!
for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
    sleep 0.1
done
expect "KVS port in use" 5 "in use" "CCL_KVS_PORT" -- env "${torch[@]}" "$prog"
kill $bg 2>/dev/null
wait $bg 2>/dev/null
bg=

# Under the real launchers, a rank that never calls ccl: the others give up after
# CCL_KVS_TIMEOUT (3 s). (Hydra then waits for the idle rank's 4 s; Open MPI stops the job at
# once.)
if [ -n "$mpiexec" ]; then
    expect "mpiexec: a rank never arrives" 20 "PMI_FD within 3 s" -- "$mpiexec" -n 2 sh -c \
        'if [ "$PMI_RANK" = 1 ]; then exec sleep 4; else exec "$0"; fi' "$prog"
fi
if [ -n "$mpirun" ]; then
    expect "mpirun: a rank never arrives" 20 "PMIx fence" "CCL_KVS_TIMEOUT" -- "$mpirun" \
        --oversubscribe --allow-run-as-root -np 2 sh -c \
        'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec sleep 30; else exec "$0"; fi' "$prog"
fi
exit $failed

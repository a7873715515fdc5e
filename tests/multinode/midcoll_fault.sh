#!/usr/bin/env bash
# A node breaks in the middle of a collective across fake nodes (tools/fakenodes): every rank
# still running must fail with CCL_ERROR_PEER_FAILURE or CCL_ERROR_TIMEOUT within CCL_TIMEOUT
# (+ slack) of the break, by itself (mn_loop keeps its rank alive until every survivor
# reported, so cclrun's stopping the job hides nothing), cclrun must exit non-zero, and nothing
# may be left running or in any node's /dev/shm.
# Usage: midcoll_fault.sh CASE path/to/cclrun path/to/mn_loop path/to/fakenodes
#   CASE: link_down.KxM   node1's link goes down (its bridge port): every rank on every node
#                         fails (the cut ones too)
#         node_killed.KxM every rank of node1 is SIGKILLed: the others fail
#         rank_killed.KxM node1's last rank is SIGKILLed while every rank makes calls of four
#                         alltoalls in a group: its node sees the death (the pid) and tells the
#                         others, so every survivor fails well before its deadline
# CCL_TIMEOUT of the ranks: MIDCOLL_CCL_TIMEOUT (default 4, 1 for node_killed, 10 for
# rank_killed); the check allows that + 3 s (3 s for rank_killed). Setting MIDCOLL_CCL_TIMEOUT
# higher (e.g. 60) shows the test failing when deadlines are not kept.
# shellcheck disable=SC2086
set -uo pipefail
CASE=${1:?usage: $0 CASE cclrun mn_loop fakenodes}
CCLRUN=${2:?} LOOP=${3:?} FN=${4:?}
# shellcheck source=tests/multinode/lib.sh
. "$(dirname "$0")/lib.sh"
require_namespaces

what=${CASE%%.*} shape=${CASE#*.}
K=${shape%x*} M=${shape#*x}
N=$((K * M))
# CCL_TIMEOUT the check holds the ranks to. When node1's ranks are killed, the others learn it
# only from their deadline (an endpoint reports nothing for a receive from any source when one
# connection drops), and cclrun SIGKILLs the survivors 2 s after the first death: 1 s leaves them
# the time to see it by themselves.
limit=4
[ "$what" = node_killed ] && limit=1
timeout=${MIDCOLL_CCL_TIMEOUT:-$limit}  # CCL_TIMEOUT the ranks get
coll=mix
# A killed rank with co-located survivors: no deadline is needed (and cclrun SIGKILLs the
# survivors 2 s after the death anyway).
if [ "$what" = rank_killed ]; then
    limit=0 timeout=${MIDCOLL_CCL_TIMEOUT:-10} coll=group_alltoall
fi
slack=3

fakenodes_scratch "$FN"
eval "$("$FN" up "$K" 2>/dev/null)" || skip "fakenodes up failed"
mkdir -p "$TMP/res"

# mn_loop alternates large and small allreduces and a broadcast, so that the break lands in the
# middle of some collective, often with data in flight.
export CCL_TIMEOUT=$timeout CCL_KVS_TIMEOUT=30
ready() {
    local c
    c=$(grep -c '^\[[0-9]*\] rank [0-9]* ready pid' "$TMP/out" 2>/dev/null)
    [ "${c:-0}" -ge "$N" ]
}
# Up to 3 tries: with CCL_TIMEOUT=1 on a loaded machine, setting the communicator up (opening
# the connections) can itself time out, which is not what this test is about.
for try in 1 2 3; do
    rm -f "$TMP/res/"*
    "$FN" exec node0 -- "$CCLRUN" --hosts "$("$FN" hosts)" --ppn "$M" -l \
        --launcher-cmd "$FN exec {host} --" -- "$LOOP" --results "$TMP/res" --seconds 60 --coll "$coll" \
        >"$TMP/out" 2>"$TMP/err" &
    job_pid=$!
    wait_for 60 'ready || [ -z "$(alive $job_pid)" ]'
    ready && [ -n "$(alive $job_pid)" ] && break
    echo "try $try: the ranks did not start: $(grep -m1 mn_loop "$TMP/err")"
    kill -KILL "$job_pid" 2>/dev/null
    wait "$job_pid" 2>/dev/null
    job_pid=""
    if [ "$try" = 3 ]; then
        fail "$CASE: the ranks did not start" "$(cat "$TMP/out" "$TMP/err")"
        finish
        exit
    fi
done
sleep 0.5  # a few collectives in
# Survivors: every rank when the link is cut, the other nodes' when node1's ranks are killed.
expect=$(seq 0 $((N - 1)))
start=$(now)
case $what in
link_down) "$FN" link down node1 ;;
node_killed)
    victims=$(sed -n "s/^\[\([0-9]*\)\] rank [0-9]* ready pid \([0-9]*\)$/\1 \2/p" "$TMP/out" |
        awk -v m="$M" '$1 >= m && $1 < 2 * m { print $2 }')
    kill -KILL $victims
    expect=$(seq 0 $((N - 1)) | awk -v m="$M" '$1 < m || $1 >= 2 * m')
    ;;
rank_killed)
    victim=$((2 * M - 1))
    kill -KILL "$(sed -n "s/^\[$victim\] rank [0-9]* ready pid \([0-9]*\)$/\1/p" "$TMP/out")"
    expect=$(seq 0 $((N - 1)) | awk -v v="$victim" '$1 != v')
    ;;
*)
    echo "unknown case $CASE"
    exit 2
    ;;
esac
t_cut=$(date +%s.%N)
all_reported() {
    local r
    for r in $expect; do [ -f "$TMP/res/rank.$r" ] || return 1; done
}
wait_for $((limit + slack + 5)) all_reported
touch "$TMP/res/done"  # the ranks may exit now
rc=0
wait_for 40 "[ -z \"\$(alive $job_pid)\" ]" || kill -KILL "$job_pid"
wait "$job_pid"
rc=$?
job_pid=""
t=$(elapsed "$start")

why=""
for r in $expect; do
    f=$TMP/res/rank.$r
    if ! [ -f "$f" ]; then
        why="$why; rank $r reported no failure"
        continue
    fi
    read -r code when _ <"$f"
    after=$(awk -v a="$t_cut" -v b="$when" 'BEGIN { printf "%.2f", b - a }')
    case $code in PEER_FAILURE | TIMEOUT) ;; *) why="$why; rank $r failed with $code" ;; esac
    less_than $((limit + slack)) "$after" || why="$why; rank $r failed ${after}s after the break"
    echo "rank $r: $code ${after}s after the break"
done
[ "$rc" -ne 0 ] || why="$why; cclrun exited 0"
left=$(pgrep -f -- "^$LOOP" || true)
[ -z "$left" ] || why="$why; left running: $left"
for ((k = 0; k < K; k++)); do
    shm=$("$FN" exec "node$k" -- sh -c 'ls /dev/shm' 2>&1)
    [ -z "$shm" ] || why="$why; node$k's /dev/shm holds: $shm"
done
if [ -z "$why" ]; then
    ok "$CASE: every survivor failed with a peer-failure or timeout error within $((limit + slack)) s of the break (CCL_TIMEOUT $timeout s), cclrun exited $rc (${t}s)"
else
    fail "$CASE" "${why#; }" "rc=$rc" "stdout: $(cat "$TMP/out")" "stderr: $(tail -${FAULT_TAIL:-30} "$TMP/err")"
fi
finish

#!/usr/bin/env bash
# cclrun across fake nodes (tools/fakenodes): every rank gets a consistent place and meets the
# others through the KVS that cclrun serves on node0; a failure anywhere stops every rank on every
# node and cclrun exits non-zero naming it; nothing is left running afterwards.
# Usage: cclrun_multinode.sh CASE path/to/cclrun path/to/mn_probe path/to/fakenodes
#   CASE: 2x2 (--hosts, --ppn), 3x2 (--hostfile), rank_fails, rank_killed, link_down,
#         agent_killed, sigint
# Lists of pids are split into words on purpose; sh -c scripts expand in the nodes.
# shellcheck disable=SC2086,SC2016,SC2046,SC2002
set -uo pipefail
CASE=${1:?usage: $0 CASE cclrun mn_probe fakenodes}
CCLRUN=${2:?} PROBE=${3:?} FN=${4:?}
# shellcheck source=tests/multinode/lib.sh
. "$(dirname "$0")/lib.sh"
require_namespaces

fakenodes_scratch "$FN"
export CCL_KVS_TIMEOUT=${CCL_KVS_TIMEOUT:-30}

hosts_of() { seq -s, -f 'node%g' 0 $(($1 - 1)); }

# job K CCLRUN_ARGS...: cclrun on node0 of K fresh nodes, launching through fakenodes exec;
# stdout in $TMP/out, stderr in $TMP/err, the run's id in $TMP/id.
job() {
    local k=$1
    shift
    rm -f "$TMP/id"
    "$FN" run "$k" -- sh -c 'echo "$FAKENODES_ID" >"$0"; exec "$FAKENODES" exec node0 -- "$@"' \
        "$TMP/id" "$CCLRUN" --launcher-cmd "$FN exec {host} --" "$@" >"$TMP/out" 2>"$TMP/err"
}
# job_bg K ARGS...: the same in the background ($job_pid), with SIGINT at its default.
job_bg() {
    local k=$1
    shift
    rm -f "$TMP/id"
    env --default-signal=INT "$FN" run "$k" -- sh -c \
        'echo "$FAKENODES_ID" >"$0"; exec "$FAKENODES" exec node0 -- "$@"' \
        "$TMP/id" "$CCLRUN" --launcher-cmd "$FN exec {host} --" "$@" >"$TMP/out" 2>"$TMP/err" &
    job_pid=$!
}
ready_count() { cat "$TMP/out" 2>/dev/null | grep -c '^\[[0-9]*\] rank [0-9]* ready$'; }
# all_ready N: waits (20 s at most) until N ranks said ready.
all_ready() { wait_for 20 "[ \"\$(ready_count)\" -ge $1 ]"; }
rank_pids() { sed -n 's/^\[[0-9]*\] rank .* pid \([0-9]*\)$/\1/p' "$TMP/out"; }
# finish_job: waits for the background job; sets rc and t (seconds since $start).
finish_job() {
    wait "$job_pid"
    rc=$?
    job_pid=""
    t=$(elapsed "$start")
}
show() { echo "rc=$rc after ${t:-?}s" "stdout: $(cat "$TMP/out")" "stderr: $(cat "$TMP/err")"; }

# check_places N PPN: every rank printed its place: rank r on node r/PPN, local rank r%PPN.
check_places() {
    local n=$1 ppn=$2 r bad=""
    for ((r = 0; r < n; r++)); do
        grep -qx "\[$r\] rank $r/$n local $((r % ppn))/$ppn host node$((r / ppn)) pid [0-9]*" \
            "$TMP/out" || bad="$bad $r"
    done
    [ -z "$bad" ] || echo "ranks without their expected place:$bad"
}

# no_strays: no rank, agent or cclrun of ours left anywhere.
no_strays() {
    local left
    left=$(alive $(rank_pids))
    left="$left$(pgrep -f -- "^$PROBE" || true)$(pgrep -f -- "^$CCLRUN --agent" || true)"
    [ -z "$left" ] || echo "left running: $left"
}

case $CASE in
    2x2)
        start=$(now)
        job 2 --hosts node0,node1 --ppn 2 -l -- "$PROBE"
        rc=$? t=$(elapsed "$start")
        why="$(check_places 4 2)$(no_strays)"
        if [ $rc -eq 0 ] && [ -z "$why" ] && grep -qx '\[0\] ok: 4 ranks on 2 hosts' "$TMP/out"; then
            ok "2 nodes x 2 ranks: places, environment, KVS rendezvous and /dev/shm sharing (${t}s)"
        else
            fail "2 nodes x 2 ranks" "$why" "$(show)"
        fi
        ;;
    3x2)
        printf '# three fake nodes\nnode0 slots=2\nnode1:2\nnode2   # slots: 6 ranks / 3 hosts\n' \
            >"$TMP/hostfile"
        start=$(now)
        job 3 -n 6 --hostfile "$TMP/hostfile" -l -- "$PROBE"
        rc=$? t=$(elapsed "$start")
        why="$(check_places 6 2)$(no_strays)"
        if [ $rc -eq 0 ] && [ -z "$why" ] && grep -qx '\[0\] ok: 6 ranks on 3 hosts' "$TMP/out"; then
            ok "3 nodes x 2 ranks from a host file (${t}s)"
        else
            fail "3 nodes x 2 ranks" "$why" "$(show)"
        fi
        ;;
    rank_fails)
        start=$(now)
        job 2 --hosts node0,node1 --ppn 2 -l -- "$PROBE" --loop 60 --fail-rank 2
        rc=$? t=$(elapsed "$start")
        why=$(no_strays)
        if [ $rc -eq 3 ] && [ -z "$why" ] && less_than 40 "$t" &&
            grep -q '^cclrun@node1: rank 2 (pid [0-9]*) on node1 exited with status 3' "$TMP/err" &&
            grep -q '^cclrun: the agent on node1 (ranks 2-3, pid [0-9]*) exited with status 3' \
                "$TMP/err"; then
            ok "a rank on node1 exits 3: all stopped, cclrun exits 3 naming it (${t}s)"
        else
            fail "a rank on node1 exits 3" "$why" "$(show)"
        fi
        ;;
    rank_killed)
        job_bg 2 --hosts node0,node1 --ppn 2 -l -- "$PROBE" --loop 60
        all_ready 4
        victim=$(sed -n 's/^\[3\] rank 3\/4 .* pid \([0-9]*\)$/\1/p' "$TMP/out")
        start=$(now)
        [ -n "$victim" ] && kill -KILL "$victim"
        finish_job
        why=$(no_strays)
        if [ -n "$victim" ] && [ $rc -eq 137 ] && [ -z "$why" ] && less_than 25 "$t" &&
            grep -q "^cclrun@node1: rank 3 (pid $victim) on node1 was killed by signal SIGKILL" \
                "$TMP/err"; then
            ok "rank 3 on node1 SIGKILLed: all stopped ${t}s later, cclrun exits 137"
        else
            fail "rank on node1 SIGKILLed" "victim '$victim'" "$why" "$(show)"
        fi
        ;;
    link_down)
        export CCL_KVS_TIMEOUT=5
        job_bg 2 --hosts node0,node1 --ppn 2 -l -- "$PROBE" --loop 60
        all_ready 4
        start=$(now)
        FAKENODES_ID=$(cat "$TMP/id") "$FN" link down node1
        finish_job
        why=$(no_strays)
        # Without the cut the job runs 60 s; with it the ranks' KVS waits time out (5 s).
        if [ "$(ready_count)" -eq 4 ] && [ $rc -ne 0 ] && [ -z "$why" ] && less_than 25 "$t" &&
            grep -q '^\[[0-9]\] mn_probe: rank [0-9]: .*timed out after 5 s' "$TMP/err"; then
            ok "node1's link cut: the ranks time out, cclrun exits $rc ${t}s later"
        else
            fail "node1's link cut" "$why" "$(show)"
        fi
        ;;
    agent_killed)
        job_bg 3 --hosts node0,node1,node2 --ppn 2 -l -- "$PROBE" --loop 60
        all_ready 6
        agent=""
        for p in $(FAKENODES_ID=$(cat "$TMP/id") "$FN" pids node2); do
            tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--agent' && agent=$p
        done
        start=$(now)
        [ -n "$agent" ] && kill -KILL "$agent"
        finish_job
        why=$(no_strays)
        if [ -n "$agent" ] && [ $rc -eq 137 ] && [ -z "$why" ] && less_than 25 "$t" &&
            grep -q "^cclrun: the agent on node2 (ranks 4-5, pid $agent) was killed by signal SIGKILL" \
                "$TMP/err"; then
            ok "node2's agent SIGKILLed: its ranks die with it, the rest stop, exit 137 (${t}s)"
        else
            fail "node2's agent SIGKILLed" "agent '$agent'" "$why" "$(show)"
        fi
        ;;
    sigint)
        job_bg 2 --hosts node0,node1 --ppn 2 -l -- "$PROBE" --loop 60
        all_ready 4
        launcher=$(pgrep -f -- "^$CCLRUN --launcher-cmd")
        start=$(now)
        [ -n "$launcher" ] && kill -INT "$launcher"
        finish_job
        why=$(no_strays)
        if [ -n "$launcher" ] && [ $rc -eq 130 ] && [ -z "$why" ] && less_than 25 "$t" &&
            grep -q '^cclrun: got SIGINT; stopping the hosts' "$TMP/err"; then
            ok "SIGINT to cclrun: every rank on every node stopped, exit 130 (${t}s)"
        else
            fail "SIGINT to cclrun" "cclrun pid '$launcher'" "$why" "$(show)"
        fi
        ;;
    *)
        echo "unknown case '$CASE'"
        exit 2
        ;;
esac
finish

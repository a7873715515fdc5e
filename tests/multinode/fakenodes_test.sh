#!/usr/bin/env bash
# Lists of pids are split into words on purpose; sh -c scripts expand in the nodes.
# shellcheck disable=SC2086,SC2016
# tools/fakenodes: nodes with their own hostname, an empty private /dev/shm and an address that
# only the nodes see, reachable from each other, cut by `link down`; nothing left after down,
# after SIGINT during `run`, and after a SIGKILLed `run` followed by a new run.
# Usage: fakenodes_test.sh path/to/fakenodes
set -uo pipefail
FN=${1:?usage: $0 path/to/fakenodes}
# shellcheck source=tests/multinode/lib.sh
. "$(dirname "$0")/lib.sh"
require_namespaces
command -v python3 >/dev/null || skip "needs python3 (a TCP listener and client)"
# The interpreter itself (a pyenv shim costs half a second a start).
PY=$(python3 -c 'import sys; print(sys.executable)')

TMP=$(mktemp -d)
# A state folder of our own: other runs on this machine are not ours to see or remove.
export FAKENODES_STATE=$TMP/state
cleanup() {
    "$FN" down --all >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT

root_addrs() { ip -o addr show | awk '{ print $2, $3, $4 }' | sort; }
root_links() { ip -o link show | awk -F': ' '{ print $2 }' | sort; }
addrs_before=$(root_addrs)
links_before=$(root_links)
holders() { pgrep -f "^fakenodes:$1:" || true; }

# connect FROM HOST PORT: a TCP connection from node FROM to HOST:PORT within 2 s.
listen() {
    "$FN" exec "$1" -- timeout 60 "$PY" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1]))); s.listen(); s.settimeout(50)
while True:
    c, a = s.accept(); c.sendall(b"hello from " + socket.gethostname().encode()); c.close()' "$2" &
}
# connect NODE HOST PORT (NODE "-": from here).
connect() {
    local on=("$FN" exec "$1" --)
    [ "$1" = - ] && on=()
    "${on[@]}" "$PY" -c '
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
print(s.recv(64).decode())' "$2" "$3" 2>/dev/null
}

# --- up, exec, link, down ------------------------------------------------------------------------
eval "$("$FN" up 3 2>/dev/null)"
id=${FAKENODES_ID:-}
if [[ $id =~ ^fn[0-9a-f]{8}$ ]] && [ "$("$FN" hosts)" = node0,node1,node2 ]; then
    ok "up 3: run $id, nodes node0,node1,node2"
else
    fail "up 3" "id='$id' hosts='$("$FN" hosts 2>&1)'"
fi

bad=""
for i in 0 1 2; do
    got=$("$FN" exec "node$i" -- sh -c 'echo "$(hostname) $(ls -A /dev/shm | wc -l) $(pwd)"')
    [ "$got" = "node$i 0 $PWD" ] || bad="$bad node$i: '$got'"
done
if [ -z "$bad" ]; then ok "exec: own hostname, empty /dev/shm, same cwd on every node"; else
    fail "exec: hostname, /dev/shm, cwd" "$bad"; fi

"$FN" exec node1 -- touch /dev/shm/fakenodes-test-n1
if "$FN" exec node1 -- test -e /dev/shm/fakenodes-test-n1 &&
    ! "$FN" exec node0 -- test -e /dev/shm/fakenodes-test-n1 &&
    [ ! -e /dev/shm/fakenodes-test-n1 ]; then
    ok "/dev/shm is private to each node"
else
    fail "/dev/shm is private to each node"
    rm -f /dev/shm/fakenodes-test-n1
fi

addr2=$("$FN" addr node2)
if [ "$("$FN" exec node2 -- ip -o -4 addr show dev eth0 | awk '{ print $4 }')" = "$addr2/24" ] &&
    [ "$(root_addrs)" = "$addrs_before" ] && [ "$(root_links)" = "$links_before" ] &&
    ! ip -o addr show | grep -q "$addr2"; then
    ok "node2 has $addr2; the root namespace's links and addresses are unchanged"
else
    fail "addresses only inside the nodes" "root now: $(root_addrs | tr '\n' ';')"
fi

listen node2 7001
wait_for 5 'connect node0 node2 7001 >/dev/null'
got=$(connect node0 node2 7001)
got_ip=$(connect node1 "$addr2" 7001)
if [ "$got" = "hello from node2" ] && [ "$got_ip" = "hello from node2" ]; then
    ok "node0 and node1 reach node2 (by name and by address)"
else
    fail "nodes reach each other" "node0 got '$got', node1 got '$got_ip'"
fi
# (A connection may succeed through a proxy of this machine's network; node2 must not answer it.)
got=$(connect - "$addr2" 7001)
if [ "$got" != "hello from node2" ]; then ok "the root namespace cannot reach node2"; else
    fail "the root namespace reached node2 at $addr2"; fi

"$FN" link down node2
cut=$(connect node0 node2 7001 || echo unreachable)
"$FN" link up node2
wait_for 5 'connect node0 node2 7001 >/dev/null'
back=$(connect node0 node2 7001)
if [ "$cut" = unreachable ] && [ "$back" = "hello from node2" ]; then
    ok "link down node2 cuts it off; link up brings it back"
else
    fail "link down/up" "while down: '$cut', after up: '$back'"
fi

kill %1 2>/dev/null   # the listener
"$FN" exec node1 -- sleep 300 &
wait_for 5 '[ -n "$("$FN" pids node1)" ]'
stray=$("$FN" pids node1)
"$FN" down
left_holders=$(holders "$id")
left_stray=$(alive $stray)
if [ -n "$stray" ] && [ -z "$left_holders" ] && [ -z "$left_stray" ] &&
    [ ! -e "$FAKENODES_STATE/$id" ] && [ "$(root_links)" = "$links_before" ]; then
    ok "down: holders, processes on the nodes ($stray) and state are gone"
else
    fail "down" "holders left: '$left_holders', processes left: '$left_stray' (of '$stray')"
fi
wait 2>/dev/null
unset FAKENODES_ID

# --- run: exit status, SIGINT --------------------------------------------------------------------
"$FN" run 1 -- sh -c 'exit 7' 2>/dev/null
rc=$?
if [ $rc -eq 7 ]; then ok "run passes on the command's status (7)"; else fail "run status" "rc=$rc"; fi

# A background job of a script starts with SIGINT ignored: give it back its default.
env --default-signal=INT "$FN" run 2 -- sh -c \
    'echo "$FAKENODES_ID" >"$0"; "$FAKENODES" exec node1 -- sleep 300' "$TMP/id1" 2>/dev/null &
runner=$!
wait_for 20 '[ -s "$TMP/id1" ]'
id1=$(cat "$TMP/id1" 2>/dev/null)
wait_for 5 '[ -n "$(FAKENODES_ID=$id1 "$FN" pids node1 2>/dev/null)" ]'
stray=$(FAKENODES_ID=$id1 "$FN" pids node1 2>/dev/null)
start=$(now)
kill -INT $runner
wait $runner
rc=$?
t=$(elapsed "$start")
if [ $rc -eq 130 ] && [ -n "$stray" ] && [ -z "$(alive $stray)" ] && [ -z "$(holders "$id1")" ] &&
    [ ! -e "$FAKENODES_STATE/$id1" ] && less_than 10 "$t"; then
    ok "SIGINT during run: exit 130 after ${t}s, nothing left"
else
    fail "SIGINT during run" "rc=$rc after ${t}s, id '$id1', stray '$(alive $stray)'" \
        "holders '$(holders "$id1")'"
fi

# --- a SIGKILLed run is cleaned up by the next one -----------------------------------------------
"$FN" run 2 -- sh -c \
    'echo "$FAKENODES_ID" >"$0"; "$FAKENODES" exec node0 -- sleep 300' "$TMP/id2" 2>/dev/null &
runner=$!
wait_for 20 '[ -s "$TMP/id2" ]'
id2=$(cat "$TMP/id2" 2>/dev/null)
wait_for 5 '[ -n "$(FAKENODES_ID=$id2 "$FN" pids node0 2>/dev/null)" ]'
stray=$(FAKENODES_ID=$id2 "$FN" pids node0 2>/dev/null)
kill -KILL $runner
wait $runner 2>/dev/null
stale=$(holders "$id2")
"$FN" run 1 -- true 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && [ -n "$stale" ] && [ -n "$stray" ] && [ -z "$(holders "$id2")" ] &&
    [ -z "$(alive $stray)" ] && [ ! -e "$FAKENODES_STATE/$id2" ] &&
    grep -q "removing $id2" "$TMP/err"; then
    ok "SIGKILLed run: its holders ($(echo $stale | tr " " ,)) and processes removed by the next run"
else
    fail "SIGKILLed run" "rc=$rc stale='$stale' now '$(holders "$id2")'" \
        "stray '$(alive $stray)'" "stderr: $(cat "$TMP/err")"
fi

# --- errors ---------------------------------------------------------------------------------------
"$FN" exec node0 -- true 2>"$TMP/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "fakenodes: 0 runs" "$TMP/err"; then ok "exec without a run fails"; else
    fail "exec without a run" "rc=$rc" "$(cat "$TMP/err")"; fi
"$FN" up 0 2>"$TMP/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "want 1..64 nodes" "$TMP/err"; then ok "up 0 fails"; else
    fail "up 0" "rc=$rc" "$(cat "$TMP/err")"; fi

# Holders of our runs (their working directory is their run's folder, under our state folder).
our_holders() {
    local p
    for p in $(holders "fn[0-9a-f]*"); do
        case $(readlink "/proc/$p/cwd") in "$FAKENODES_STATE"/*) echo "$p" ;; esac
    done
}
left=$(ls -A "$FAKENODES_STATE" 2>/dev/null)
if [ -z "$left" ] && [ -z "$(our_holders)" ]; then ok "nothing left in the end"; else
    fail "nothing left" "state: '$left', holders: '$(our_holders)'"; fi
finish

#!/usr/bin/env bash
# cclrun's host options without namespaces or root: every "host" is this machine, its agent
# started through a local launcher command (`env CCLRUN_HOST={host}`). Places and environment,
# variables passed on, the KVS secret kept off command lines and out of agents' environments,
# labels, failures, timeouts, signals, and usage errors.
# Usage: cclrun_hosts_local.sh path/to/cclrun
# shellcheck disable=SC2016
set -uo pipefail
CCLRUN=${1:?usage: $0 path/to/cclrun}
# shellcheck source=tests/multinode/lib.sh
. "$(dirname "$0")/lib.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
L='env CCLRUN_HOST={host}'

# Places: hosts a (no slots: 5 ranks / 2 hosts, rounded up = 3) and b:3.
out=$("$CCLRUN" -n 5 --hosts a,b:3 --launcher-cmd "$L" -- sh -c \
    'echo $CCLRUN_HOST $CCL_RANK $CCL_SIZE $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE' \
    2>"$TMP/err")
rc=$?
expected=$'a 0 5 0 5 0 3\na 1 5 1 5 1 3\na 2 5 2 5 2 3\nb 3 5 3 5 0 2\nb 4 5 4 5 1 2'
if [ $rc -eq 0 ] && [ "$(sort <<<"$out")" = "$expected" ]; then
    ok "5 ranks on a,b:3: ranks in blocks, local ranks per host"
else
    fail "places" "rc=$rc" "output: $out" "stderr: $(cat "$TMP/err")"
fi

out=$("$CCLRUN" --hosts a,b,c --ppn 2 --launcher-cmd "$L" -- sh -c 'echo $CCLRUN_HOST' 2>&1)
if [ "$(sort <<<"$out" | uniq -c | awk '{ print $1 $2 }' | paste -sd' ')" = "2a 2b 2c" ]; then
    ok "--ppn 2 without -n: 2 ranks on each of 3 hosts"
else
    fail "--ppn without -n" "output: $out"
fi

# Variables: CCL_* and FI_* pass on, -x NAME and -x NAME=VALUE too; nothing else of ours.
out=$(CCL_FOO=bar FI_PROVIDER=tcp MYVAR=mine NOTME=1 "$CCLRUN" --hosts a \
    --launcher-cmd 'env -i PATH=/usr/bin:/bin CCLRUN_HOST={host}' -x MYVAR -x OTHER=o -- \
    sh -c 'echo "$CCL_FOO $FI_PROVIDER $MYVAR $OTHER ${NOTME:-unset}"' 2>&1)
if [ "$out" = "bar tcp mine o unset" ]; then ok "CCL_*, FI_* and -x reach the ranks"; else
    fail "variables on hosts" "output: $out"; fi

# torch's rendezvous: MASTER_ADDR the first host as listed, one MASTER_PORT everywhere; -x wins.
out=$(env -u MASTER_ADDR -u MASTER_PORT "$CCLRUN" --hosts a,b --ppn 1 --launcher-cmd "$L" -- \
    sh -c 'echo $MASTER_ADDR $MASTER_PORT' 2>&1 | sort -u)
kept=$("$CCLRUN" --hosts a,b --ppn 1 --launcher-cmd "$L" -x MASTER_ADDR=10.1.2.3 -- \
    sh -c 'echo $MASTER_ADDR' 2>&1 | sort -u)
if [[ $out =~ ^a\ [0-9]+$ && $kept == 10.1.2.3 ]]; then
    ok "MASTER_ADDR (the first host) and MASTER_PORT on every host; -x MASTER_ADDR kept"
else
    fail "MASTER_ADDR/MASTER_PORT across hosts" "set: $out" "kept: $kept"
fi

# The secret: in the ranks' environment only; never on the agent's command line or environment.
"$CCLRUN" --hosts a --launcher-cmd "$L" -- sh -c \
    'tr "\0" " " </proc/$PPID/cmdline; echo; tr "\0" "\n" </proc/$PPID/environ | grep -c "^CCL_KVS_ADDRESS=";
     echo "$CCL_KVS_ADDRESS"' >"$TMP/out" 2>&1
rc=$?
agent_cmd=$(sed -n 1p "$TMP/out")
in_env=$(sed -n 2p "$TMP/out")
address=$(sed -n 3p "$TMP/out")
secret=${address#*/}
if [ $rc -eq 0 ] && [[ $address =~ ^[0-9.]+:[0-9]+/[0-9a-f]{32}$ ]] &&
    [ "$agent_cmd" = "$(readlink -f "$CCLRUN") --agent " ] && [ "$in_env" = 0 ] && [[ $agent_cmd != *$secret* ]]; then
    ok "the KVS secret is not on the agent's command line nor in its environment"
else
    fail "the KVS secret" "rc=$rc" "$(cat "$TMP/out")"
fi

# Labels through agents: whole lines, stdout and stderr apart.
"$CCLRUN" --hosts a,b --ppn 1 -l --launcher-cmd "$L" -- \
    sh -c 'echo out$CCL_RANK; echo err$CCL_RANK >&2; printf tail$CCL_RANK' >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(sort "$TMP/out")" = $'[0] out0\n[0] tail0\n[1] out1\n[1] tail1' ] &&
    [ "$(sort "$TMP/err")" = $'[0] err0\n[1] err1' ]; then
    ok "--label through agents"
else
    fail "--label through agents" "rc=$rc" "stdout: $(cat "$TMP/out")" "stderr: $(cat "$TMP/err")"
fi

# A failing rank on host b stops the ranks on host a; cclrun exits with its status.
start=$(now)
"$CCLRUN" -n 4 --hosts a,b --launcher-cmd "$L" -- sh -c \
    'echo $$ >>"$0"; if [ $CCL_RANK = 3 ]; then sleep 0.3; exit 4; fi; exec sleep 60' \
    "$TMP/pids" 2>"$TMP/err"
rc=$?
t=$(elapsed "$start")
# shellcheck disable=SC2046
left=$(alive $(cat "$TMP/pids"))
if [ $rc -eq 4 ] && [ -z "$left" ] && less_than 8 "$t" &&
    grep -q '^cclrun@b: rank 3 (pid [0-9]*) on b exited with status 4' "$TMP/err" &&
    grep -q '^cclrun: the agent on b (ranks 2-3, pid [0-9]*) exited with status 4; stopping the other 1 host(s)' "$TMP/err"; then
    ok "a rank failing on b: all stopped, exit 4 after ${t}s"
else
    fail "a rank failing on b" "rc=$rc after ${t}s, left: '$left'" "stderr: $(cat "$TMP/err")"
fi

# A rank ignoring SIGTERM is SIGKILLed by its agent.
start=$(now)
"$CCLRUN" -n 2 --hosts a,b --launcher-cmd "$L" -- sh -c \
    'if [ $CCL_RANK = 1 ]; then sleep 0.3; exit 5; fi; trap "" TERM; exec sleep 60' 2>"$TMP/err"
rc=$?
t=$(elapsed "$start")
if [ $rc -eq 5 ] && less_than 8 "$t" && grep -q '^cclrun@a: rank 0 .* sending SIGKILL' "$TMP/err"; then
    ok "SIGTERM ignored on a: SIGKILL by its agent after ${t}s"
else
    fail "SIGTERM ignored" "rc=$rc after ${t}s" "stderr: $(cat "$TMP/err")"
fi

# The launcher cannot be run, or fails.
"$CCLRUN" --hosts a,b --launcher-cmd 'no-such-launcher-xyz {host}' -- true 2>"$TMP/err"
rc=$?
if [ $rc -eq 127 ] &&
    grep -q "cannot start the agent on [ab]: cannot execute 'no-such-launcher-xyz'" "$TMP/err"; then
    ok "launcher not found: exit 127"
else
    fail "launcher not found" "rc=$rc" "stderr: $(cat "$TMP/err")"
fi
"$CCLRUN" --hosts a --launcher-cmd 'false' -- true 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "the agent on a (rank 0, pid [0-9]*) exited with status 1" "$TMP/err"; then
    ok "launcher failing: exit 1 naming the host"
else
    fail "launcher failing" "rc=$rc" "stderr: $(cat "$TMP/err")"
fi

# --timeout across hosts.
rm -f "$TMP/pids"
start=$(now)
"$CCLRUN" --timeout 0.5 --hosts a,b --ppn 2 --launcher-cmd "$L" -- \
    sh -c 'echo $$ >>"$0"; exec sleep 60' "$TMP/pids" 2>"$TMP/err"
rc=$?
t=$(elapsed "$start")
# shellcheck disable=SC2046
left=$(alive $(cat "$TMP/pids"))
if [ $rc -eq 124 ] && [ -z "$left" ] && less_than 8 "$t" && grep -q "timed out" "$TMP/err"; then
    ok "--timeout: exit 124 after ${t}s, no rank left"
else
    fail "--timeout" "rc=$rc after ${t}s, left '$left'" "stderr: $(cat "$TMP/err")"
fi

# SIGINT to cclrun stops every host's ranks.
rm -f "$TMP/pids"
env --default-signal=INT "$CCLRUN" --hosts a,b --ppn 2 --launcher-cmd "$L" -- \
    sh -c 'echo $$ >>"$0"; exec sleep 60' "$TMP/pids" 2>"$TMP/err" &
cpid=$!
wait_for 10 '[ "$(cat "$TMP/pids" 2>/dev/null | wc -l)" = 4 ]'
kill -INT $cpid
wait $cpid
rc=$?
# shellcheck disable=SC2046
left=$(alive $(cat "$TMP/pids"))
if [ $rc -eq 130 ] && [ -z "$left" ] && [ "$(wc -l <"$TMP/pids")" = 4 ]; then
    ok "SIGINT: exit 130, the ranks of both hosts stopped"
else
    fail "SIGINT" "rc=$rc, left '$left'" "stderr: $(cat "$TMP/err")"
fi

# The agent refuses what is not a job spec, and a stdin that closes first.
echo junk | "$CCLRUN" --agent 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "not a cclrun job spec" "$TMP/err"; then ok "agent: garbage on stdin"; else
    fail "agent: garbage on stdin" "rc=$rc" "$(cat "$TMP/err")"; fi
"$CCLRUN" --agent </dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "stdin closed before the job spec" "$TMP/err"; then
    ok "agent: stdin closed"
else
    fail "agent: stdin closed" "rc=$rc" "$(cat "$TMP/err")"
fi

# Usage errors: exit 2 with a message.
printf 'a\nb slots=x\n' >"$TMP/badhosts"
printf 'a\na\n' >"$TMP/twice"
for args in "--ppn 2 -n 2 true" "--launcher-cmd ssh -n 1 true" "--hosts a,a true" \
    "--hosts a,,b true" "--hosts a:0 true" "--hosts a;b true" "--hosts a --ppn 1 -n 2 true" \
    "--hostfile $TMP/nonexistent true" "--hostfile $TMP/badhosts true" \
    "--hostfile $TMP/twice true" "--hosts a --hostfile $TMP/twice true" "--hosts a -x =3 true" \
    "--hosts a -x UNSET_VAR_XYZ true" "--hosts a:2,b:1 -n 4 true"; do
    # shellcheck disable=SC2086
    "$CCLRUN" $args 2>"$TMP/err" >/dev/null
    rc=$?
    if [ $rc -eq 2 ] && grep -q "^cclrun: " "$TMP/err"; then ok "usage error: '$args'"; else
        fail "usage error: '$args'" "rc=$rc" "stderr: $(cat "$TMP/err")"; fi
done
finish

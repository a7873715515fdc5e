#!/usr/bin/env bash
# cclrun's behaviour as a launcher: environment, labels, failure propagation, signals, timeouts and
# /dev/shm clean-up. Usage: cclrun_selftest.sh path/to/cclrun
set -u
CCLRUN=${1:?usage: $0 path/to/cclrun}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }
now() { date +%s.%N; }
# elapsed START: seconds since START, as a decimal.
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# faster_than SECONDS VALUE: true when VALUE < SECONDS.
faster_than() { awk -v lim="$1" -v v="$2" 'BEGIN { exit !(v < lim) }'; }

# Environment of -n 3.
out=$("$CCLRUN" -n 3 -- sh -c \
    'echo $CCL_RANK $CCL_SIZE $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $CCL_KVS_ADDRESS' \
    2>"$TMP/err")
rc=$?
expected=$'0 3 0 3 0 3\n1 3 1 3 1 3\n2 3 2 3 2 3'
got=$(echo "$out" | awk '{ print $1, $2, $3, $4, $5, $6 }' | sort)
addrs=$(echo "$out" | awk '{ print $7 }' | sort -u)
if [[ $rc == 0 && $got == "$expected" && $(echo "$addrs" | wc -l) == 1 &&
      $addrs =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+/[0-9a-f]{32}$ ]]; then
    ok "environment of -n 3"
else
    fail "environment of -n 3" "rc=$rc" "output: $out" "stderr: $(cat "$TMP/err")"
fi


# torch's env:// rendezvous: MASTER_ADDR and one free MASTER_PORT for all ranks; set ones stay.
out=$(env -u MASTER_ADDR -u MASTER_PORT "$CCLRUN" -n 2 -- sh -c 'echo $MASTER_ADDR $MASTER_PORT' \
    2>"$TMP/err" | sort -u)
kept=$(MASTER_ADDR=node7 MASTER_PORT=29999 "$CCLRUN" -n 2 -- sh -c 'echo $MASTER_ADDR $MASTER_PORT' \
    2>>"$TMP/err" | sort -u)
if [[ $out =~ ^127\.0\.0\.1\ [0-9]+$ && ${out#* } -gt 0 && ${out#* } -lt 65536 &&
      $kept == "node7 29999" ]]; then
    ok "MASTER_ADDR and MASTER_PORT"
else
    fail "MASTER_ADDR and MASTER_PORT" "set: $out" "kept: $kept" "stderr: $(cat "$TMP/err")"
fi
# Labels: stdout and stderr separately, a partial last line flushed at EOF.
"$CCLRUN" -n 2 -l -- sh -c 'echo out$CCL_RANK; echo err$CCL_RANK >&2; printf "tail$CCL_RANK"' \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc == 0 && $(sort "$TMP/out") == $'[0] out0\n[0] tail0\n[1] out1\n[1] tail1' &&
      $(sort "$TMP/err") == $'[0] err0\n[1] err1' ]]; then
    ok "--label prefixes"
else
    fail "--label prefixes" "rc=$rc" "stdout: $(cat "$TMP/out")" "stderr: $(cat "$TMP/err")"
fi

# Without -l the output is the ranks' own.
out=$("$CCLRUN" -n 2 -- sh -c 'echo plain' 2>&1)
if [[ $? == 0 && $out == $'plain\nplain' ]]; then ok "no labels without -l"; else
    fail "no labels without -l" "output: $out"; fi

# A failing rank: its status is cclrun's, and the sleeping ranks are stopped at once.
start=$(now)
"$CCLRUN" -n 4 -- sh -c 'if [ $CCL_RANK = 1 ]; then exit 3; fi; exec sleep 60' 2>"$TMP/err"
rc=$?
t=$(elapsed "$start")
if [[ $rc == 3 ]] && faster_than 3 "$t" &&
       grep -q "rank 1 (pid [0-9]*) exited with status 3" "$TMP/err"; then
    ok "failing rank: exit 3 after ${t}s"
else
    fail "failing rank" "rc=$rc after ${t}s" "stderr: $(cat "$TMP/err")"
fi

# A rank killed by SIGKILL.
"$CCLRUN" -n 3 -- sh -c 'if [ $CCL_RANK = 2 ]; then kill -KILL $$; fi; exec sleep 60' 2>"$TMP/err"
rc=$?
if [[ $rc == 137 ]] && grep -q "rank 2 (pid [0-9]*) was killed by signal SIGKILL" "$TMP/err"; then
    ok "rank killed by SIGKILL: exit 137"
else
    fail "rank killed by SIGKILL" "rc=$rc" "stderr: $(cat "$TMP/err")"
fi

# Without -l a rank's stderr passes through cclrun (which reads what a failed rank said last)
# unchanged: partial lines as they come.
"$CCLRUN" -n 2 -- sh -c 'echo e$CCL_RANK >&2; printf "tail$CCL_RANK" >&2' 2>"$TMP/err" >/dev/null
rc=$?
if [[ $rc == 0 && $(grep -o 'e[01]\|tail[01]' "$TMP/err" | sort | tr '\n' ' ') == "e0 e1 tail0 tail1 " ]]; then
    ok "stderr passed on without -l"
else
    fail "stderr passed on without -l" "rc=$rc" "stderr: $(cat "$TMP/err")"
fi

# The rank a failure points at is named, not just the first one to exit. A stopped rank: the
# others time out waiting for it (it gets SIGCONT after SIGTERM, so no SIGKILL is needed).
"$CCLRUN" -n 3 -- sh -c 'case $CCL_RANK in
    1) kill -STOP $$ ;;
    0) sleep 0.5; echo "rank 0: timed out after 0.5 s (CCL_TIMEOUT) waiting for rank 1" >&2; exit 3 ;;
    esac; exec sleep 60' 2>"$TMP/err"
rc=$?
if [[ $rc == 3 ]] && ! grep -q "sending SIGKILL" "$TMP/err" &&
       grep -q "rank 0 (pid [0-9]*) exited with status 3; the failure points at rank 1 (pid [0-9]*): it is stopped" "$TMP/err" &&
       grep -q "rank 0's last error names rank 1: rank 0: timed out" "$TMP/err"; then
    ok "stopped rank named as the cause, and stopped by SIGTERM"
else
    fail "stopped rank named as the cause" "rc=$rc after ${t}s" "stderr: $(cat "$TMP/err")"
fi
# A running rank the failed one's error names (it hangs), with and without -l.
for label in "" "-l"; do
    "$CCLRUN" -n 3 $label -- sh -c 'case $CCL_RANK in
        0) sleep 0.3; echo "[ccl E 1] ccl_allreduce: rank 2 (pid 7) died" >&2; exit 4 ;;
        esac; exec sleep 60' 2>"$TMP/err"
    rc=$?
    if [[ $rc == 4 ]] &&
           grep -q "exited with status 4; the failure points at rank 2 (pid [0-9]*): rank 0's error names it, and it is still running" "$TMP/err"; then
        ok "named rank as the cause ${label:-without -l}"
    else
        fail "named rank as the cause ${label:-without -l}" "rc=$rc" "stderr: $(cat "$TMP/err")"
    fi
done
# A chain: rank 0 says rank 2 failed first, rank 2 (which failed) says it waited for rank 1.
"$CCLRUN" -n 3 -- sh -c 'case $CCL_RANK in
    2) echo "[ccl E 2] ccl_allreduce: timed out after 1 s (CCL_TIMEOUT) waiting for rank 1" >&2; sleep 5; exit 3 ;;
    0) sleep 0.5; echo "[ccl E 1] ccl_allreduce: rank 2 of this communicator failed first (timed out)" >&2; exit 3 ;;
    esac; exec sleep 60' 2>"$TMP/err"
rc=$?
if [[ $rc == 3 ]] &&
       grep -q "rank 0 (pid [0-9]*) exited with status 3; the failure points at rank 1 (pid [0-9]*): rank 2's error names it, and it is still running" "$TMP/err"; then
    ok "chain of names followed to the cause"
else
    fail "chain of names followed to the cause" "rc=$rc" "stderr: $(cat "$TMP/err")"
fi
# A failure that names nobody else is the failed rank's own, as before.
"$CCLRUN" -n 2 -- sh -c 'if [ $CCL_RANK = 1 ]; then echo "rank 1: bad input" >&2; exit 3; fi; exec sleep 60' 2>"$TMP/err"
if grep -q "rank 1 (pid [0-9]*) exited with status 3; stopping the other 1 rank(s)" "$TMP/err"; then
    ok "own failure named as before"
else
    fail "own failure named as before" "stderr: $(cat "$TMP/err")"
fi

# A rank that ignores SIGTERM is killed after the grace period.
start=$(now)
"$CCLRUN" -n 2 -- sh -c \
    'if [ $CCL_RANK = 0 ]; then sleep 0.3; exit 5; fi; trap "" TERM; exec sleep 60' \
    2>"$TMP/err"
rc=$?
t=$(elapsed "$start")
if [[ $rc == 5 ]] && faster_than 5 "$t" && grep -q "sending SIGKILL" "$TMP/err"; then
    ok "SIGTERM ignored: SIGKILL after ${t}s"
else
    fail "SIGTERM ignored" "rc=$rc after ${t}s" "stderr: $(cat "$TMP/err")"
fi

# Program not found.
"$CCLRUN" -n 2 -- ./no-such-program-xyz 2>"$TMP/err"
rc=$?
if [[ $rc == 127 ]] && grep -q "cannot execute './no-such-program-xyz'" "$TMP/err"; then
    ok "program not found: exit 127"
else
    fail "program not found" "rc=$rc" "stderr: $(cat "$TMP/err")"
fi

# The whole-job timeout.
start=$(now)
"$CCLRUN" -n 2 --timeout 0.5 -- sleep 60 2>"$TMP/err"
rc=$?
t=$(elapsed "$start")
if [[ $rc == 124 ]] && faster_than 3 "$t" && grep -q "timed out" "$TMP/err"; then
    ok "--timeout: exit 124 after ${t}s"
else
    fail "--timeout" "rc=$rc after ${t}s" "stderr: $(cat "$TMP/err")"
fi

# --timeout is read strictly, as CCL_TIMEOUT is: no hex, sign, space or exponent.
for bad in 0x10 +3 " 5" 1e3 -1 0; do
    if "$CCLRUN" -n 1 --timeout "$bad" -- true 2>"$TMP/err"; then
        fail "--timeout '$bad'" "accepted" ""
    elif grep -q -- "--timeout wants" "$TMP/err"; then
        ok "--timeout '$bad' refused"
    else
        fail "--timeout '$bad'" "refused without saying why" "stderr: $(cat "$TMP/err")"
    fi
done

# SIGINT to cclrun: ranks stopped, exit 130, nothing left running.
"$CCLRUN" -n 3 -- sh -c 'echo $$ >>'"$TMP/pids"'; exec sleep 60' 2>"$TMP/err" &
cpid=$!
for _ in $(seq 50); do [[ -f $TMP/pids && $(wc -l <"$TMP/pids") == 3 ]] && break; sleep 0.1; done
kill -INT "$cpid"
wait "$cpid"
rc=$?
alive=0
for p in $(cat "$TMP/pids" 2>/dev/null); do
    # A zombie under a container's pid 1 is gone as far as we care.
    if kill -0 "$p" 2>/dev/null && [[ $(ps -o stat= -p "$p") != Z* ]]; then alive=$((alive + 1)); fi
done
if [[ $rc == 130 && $alive == 0 ]]; then ok "SIGINT: exit 130, ranks stopped"; else
    fail "SIGINT" "rc=$rc, $alive ranks still alive" "stderr: $(cat "$TMP/err")"; fi

# /dev/shm clean-up of segments named after a rank's pid (here the rank is the shell itself).
"$CCLRUN" -n 2 -- sh -c 'touch /dev/shm/ccl-$$-x; echo $$' >"$TMP/out" 2>"$TMP/err"
rc=$?
left=0
for p in $(cat "$TMP/out"); do [[ -e /dev/shm/ccl-$p-x ]] && left=$((left + 1)); done
if [[ $rc == 0 && $(wc -l <"$TMP/out") == 2 && $left == 0 ]]; then
    ok "/dev/shm clean-up"
else
    fail "/dev/shm clean-up" "rc=$rc, $left files left" "stderr: $(cat "$TMP/err")"
    for p in $(cat "$TMP/out"); do rm -f "/dev/shm/ccl-$p-x"; done
fi

# Binding: a core each when the ranks fit (the default on this machine), else none.
allowed() { awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status; }
full=$(allowed)
# Cores among the cpus we may use: distinct (package, core) pairs.
cores=$(for c in $(awk -v l="$full" 'BEGIN { n = split(l, p, ","); for (i = 1; i <= n; i++) {
            m = split(p[i], r, "-"); for (c = r[1]; c <= (m > 1 ? r[2] : r[1]); c++) print c } }'); do
            t=/sys/devices/system/cpu/cpu$c/topology
            echo "$(cat $t/physical_package_id 2>/dev/null)/$(cat $t/core_id 2>/dev/null)"
        done | sort -u | wc -l)
show='awk "/^Cpus_allowed_list/ { print \$2 }" /proc/self/status'
if ((cores >= 2)); then
    out=$("$CCLRUN" -n 2 -- sh -c "$show" 2>"$TMP/err")
    if [[ $(echo "$out" | sort -u | wc -l) == 2 && $(echo "$out" | grep -cx "$full") == 0 &&
          ! -s $TMP/err ]]; then
        ok "-n 2: a core each ($(echo $out))"
    else
        fail "-n 2: a core each" "cpus: $full, ranks: $(echo $out)" "stderr: $(cat "$TMP/err")"
    fi
else
    echo "skip -n 2 binding: $cores core(s) here"
fi
# One rank: block gives it every core; core one of them.
out=$("$CCLRUN" -n 1 -- sh -c "$show" 2>&1)
if [[ $out == "$full" ]]; then ok "-n 1: every core"; else fail "-n 1: every core" "cpus: $full, rank: $out"; fi
if ((cores >= 2)); then
    out=$("$CCLRUN" --bind-to core -n 1 -- sh -c "$show" 2>&1)
    if [[ -n $out && $out != "$full" && $out != *cclrun* ]]; then ok "--bind-to core -n 1: one core ($out)"; else
        fail "--bind-to core -n 1" "cpus: $full, rank: $out"; fi
fi
out=$("$CCLRUN" --bind-to none -n 2 -- sh -c "$show" 2>&1)
if [[ $(echo "$out" | grep -cx "$full") == 2 ]]; then ok "--bind-to none"; else
    fail "--bind-to none" "cpus: $full, ranks: $(echo $out)"; fi
n=$((cores + 1))
out=$("$CCLRUN" -n $n -- sh -c "$show" 2>"$TMP/err")
if [[ $(echo "$out" | grep -cx "$full") == "$n" && ! -s $TMP/err ]]; then
    ok "-n $n on $cores core(s): unbound, silently"
else
    fail "-n $n unbound" "ranks: $(echo $out)" "stderr: $(cat "$TMP/err")"
fi
out=$("$CCLRUN" --bind-to core -n $n -- sh -c "$show" 2>"$TMP/err")
if [[ $? == 0 && $(echo "$out" | grep -cx "$full") == "$n" ]] &&
       grep -q "not binding the ranks: $n ranks but $cores cores" "$TMP/err"; then
    ok "--bind-to core -n $n: unbound, says why"
else
    fail "--bind-to core -n $n" "ranks: $(echo $out)" "stderr: $(cat "$TMP/err")"
fi

# Usage errors: exit 2 with a message.
for args in "" "-n" "-n 0 true" "-n 4097 true" "-n x true" "-n 2" "--bogus -n 1 true" \
            "-n 1 --timeout 0 true" "-n 1 --timeout abc true" "--bind-to all -n 1 true"; do
    # shellcheck disable=SC2086
    "$CCLRUN" $args 2>"$TMP/err" >/dev/null
    rc=$?
    if [[ $rc == 2 ]] && grep -q "^cclrun: " "$TMP/err"; then ok "usage error: '$args'"; else
        fail "usage error: '$args'" "rc=$rc" "stderr: $(cat "$TMP/err")"; fi
done
"$CCLRUN" --help | grep -q "^usage: cclrun" && ok "--help" || fail "--help"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]

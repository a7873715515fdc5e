#!/usr/bin/env bash
# SIGSTOP of rank 1 in the middle of a loop of allreduces: the other ranks time out waiting for
# it, and cclrun names rank 1 (stopped) as the rank the failure points at, not whichever rank
# exited first; it exits non-zero within CCL_TIMEOUT plus a few seconds, no rank process survives
# and nothing is left in /dev/shm. Usage: rank_stopped.sh cclrun test_c_api NRANKS
set -uo pipefail
cclrun=$1 prog=$2 n=${3:-4}
export CCL_TIMEOUT=3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$cclrun" -n "$n" -- "$prog" --loop 100000000 2>"$TMP/err" &
launcher=$!
# Rank 1 by its environment, once every rank runs.
victim=
for _ in $(seq 100); do
  for p in $(pgrep -P "$launcher"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'CCL_RANK=1' && victim=$p
  done
  [ -n "$victim" ] && [ "$(pgrep -P "$launcher" | wc -l)" -eq "$n" ] && break
  sleep 0.1
done
[ -n "$victim" ] || { echo "FAIL: no rank 1 under cclrun"; kill -9 "$launcher"; exit 1; }
ranks=$(pgrep -P "$launcher")
sleep 1  # well inside the loop of allreduces
start=$(date +%s)
kill -STOP "$victim"
wait "$launcher"; rc=$?
elapsed=$(( $(date +%s) - start ))
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: cclrun exited 0"; fail=1; }
[ "$elapsed" -le $((CCL_TIMEOUT + 5)) ] || { echo "FAIL: cclrun took ${elapsed}s"; fail=1; }
grep -q "the failure points at rank 1 (pid $victim): it is stopped" "$TMP/err" ||
  { echo "FAIL: cclrun did not name rank 1 (pid $victim), which was stopped:"; cat "$TMP/err"; fail=1; }
for pid in $ranks; do
  if kill -0 "$pid" 2>/dev/null && [[ $(ps -o stat= -p "$pid") != Z* ]]; then
    echo "FAIL: rank pid $pid still alive"; kill -9 "$pid"; fail=1
  fi
done
# Segments are named after the rank that made them: ccl-<pid>-...
for pid in $ranks; do
  left=$(ls /dev/shm | grep "^ccl-$pid-")
  [ -z "$left" ] || { echo "FAIL: segments left in /dev/shm: $left"; fail=1; }
done
[ $fail -eq 0 ] && echo "ok: cclrun named stopped rank 1 and exited $rc after ${elapsed}s:" &&
  grep '^cclrun:' "$TMP/err"
exit $fail

#!/usr/bin/env bash
# SIGKILL of one rank in the middle of a loop of allreduces: cclrun exits non-zero within
# CCL_TIMEOUT plus a few seconds, no rank process survives and nothing is left in /dev/shm.
set -uo pipefail
cclrun=$1 prog=$2
export CCL_TIMEOUT=10
before=$(ls /dev/shm | grep -c '^ccl-' || true)
start=$(date +%s)
"$cclrun" -n 4 -- "$prog" --loop 100000000 &
launcher=$!
sleep 2
ranks=$(pgrep -P "$launcher" | sort -n)
victim=$(echo "$ranks" | sed -n 3p)
[ -n "$victim" ] || { echo "FAIL: no rank processes found under cclrun"; kill -9 $launcher; exit 1; }
kill -9 "$victim"
wait "$launcher"; rc=$?
elapsed=$(( $(date +%s) - start - 2 ))
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: cclrun exited 0"; fail=1; }
[ "$elapsed" -le $((CCL_TIMEOUT + 5)) ] || { echo "FAIL: cclrun took ${elapsed}s"; fail=1; }
for pid in $ranks; do
  if kill -0 "$pid" 2>/dev/null; then echo "FAIL: rank pid $pid still alive"; kill -9 "$pid"; fail=1; fi
done
after=$(ls /dev/shm | grep -c '^ccl-' || true)
[ "$after" -le "$before" ] || { echo "FAIL: segments left in /dev/shm:"; ls /dev/shm | grep '^ccl-'; fail=1; }
[ $fail -eq 0 ] && echo "ok: cclrun exited $rc after ${elapsed}s, no rank and no segment left"
exit $fail

#!/usr/bin/env bash
# ccl_bench beside nccl-tests (issue 59): its flags take nccl-tests' meaning where they can and
# say plainly what to use where they cannot; the table has #iters and min; the closing line reads
# like nccl-tests'; tools/plot_bench.py draws its CSV. Args: cclrun ccl_bench source-dir
set -uo pipefail
cclrun=$1 bench=$2 src=$3
failed=0
ok() { echo "ok: $1"; }
fail() { echo "FAILED: $1"; shift; printf '  %s\n' "$@"; failed=1; }
csv=$(mktemp)
png=$(mktemp --suffix .png)
trap 'rm -f "$csv" "$png"' EXIT

out=$(timeout 120 "$cclrun" -n 2 -- "$bench" -c allreduce -d float,half -c 0 -s 8,4K -n 5 --csv "$csv" 2>&1)
rows=$(grep -cE '^ +(8|4096) +[0-9]+ +(float32|float16) +sum .* N/A +5 +[0-9.]+$' <<<"$out")
if [[ $rows == 4 ]]; then ok "-d float,half and -c 0 (no check): 4 rows, #iters 5, min"; else
    fail "-d float,half -c 0" "$out"; fi
if grep -qE '^# Avg bus bandwidth    : [0-9.e+-]+ $' <<<"$out"; then ok "nccl-tests' closing line"; else
    fail "the closing line" "$out"; fi
if head -1 "$csv" | grep -q ',wrong,iters,min_us$' && [[ $(tail -n +2 "$csv" | cut -d, -f13 | sort -u) == 5 ]]; then
    ok "the CSV has iters and min_us"; else fail "the CSV's columns" "$(cat "$csv")"; fi
for args in "-g 2" "-i 1M"; do
    # shellcheck disable=SC2086  # the flags are words
    err=$(timeout 60 "$cclrun" -n 1 -- "$bench" $args 2>&1)
    rc=$?
    if [[ $rc != 0 ]] && grep -q -- "${args%% *} is" <<<"$err"; then ok "$args says what to use instead"; else
        fail "$args" "rc=$rc" "$err"; fi
done
# Two launches in one file: a series with a spread, drawn as a band.
timeout 120 "$cclrun" -n 2 -- "$bench" -c allreduce -s 8,4K -n 5 --csv "$csv.2" >/dev/null 2>&1
tail -n +2 "$csv.2" >>"$csv" && rm -f "$csv.2"
if out=$(/usr/bin/python3 "$src/tools/plot_bench.py" "$csv" -l ccl -o "$png" 2>&1) && [[ -s $png ]]; then
    ok "plot_bench draws the CSV ($out)"; else fail "plot_bench" "$out"; fi
exit $failed

#!/usr/bin/env bash
# Ranks that a launcher left unbound (torchrun_style.sh) bind themselves at their first
# communicator, every thread to its equal share of the cores (CCL_BIND=auto, the default); with
# CCL_BIND=none they stay on every cpu, as under cclrun --bind-to none; ranks bound already (here
# by taskset) keep their cpus. cclrun --cpus-per-rank K binds each rank to K cores; a rank's team
# (CCL_RANK_THREADS) is the cpus it owns by default.
# Usage: bind_check.sh bind_check cclrun
set -u
prog=${1:?usage: $0 bind_check cclrun}
cclrun=${2:?usage: $0 bind_check cclrun}
here=$(cd "$(dirname "$0")" && pwd)
cores=$(nproc)
if [ "$cores" -lt 2 ]; then echo "skip: $cores cpu(s) here"; exit 0; fi
fails=0
check() {  # name expectation output
    echo "$1:"
    echo "$3" | sed 's/^/  /'
    if eval "$2"; then echo "  ok"; else echo "  FAIL"; fails=$((fails + 1)); fi
}
all=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
field() { echo "$out" | awk -v r="$1" -v f="$2" '$1 == "rank" && $2 == r { print $f }'; }

out=$(env -u CCL_BIND "$here/torchrun_style.sh" 2 "$prog" 2>&1)
m0=$(field 0 4) t0=$(field 0 6) m1=$(field 1 4) t1=$(field 1 6)
check "unbound ranks bind themselves" \
    '[ -n "$m0" ] && [ -n "$m1" ] && [ "$m0" != "$all" ] && [ "$m1" != "$all" ] && [ "$m0" != "$m1" ] && [ "$t0" = "$m0" ] && [ "$t1" = "$m1" ]' "$out"

out=$(CCL_BIND=none "$here/torchrun_style.sh" 2 "$prog" 2>&1)
check "CCL_BIND=none leaves them" \
    '[ "$(field 0 4)" = "$all" ] && [ "$(field 1 4)" = "$all" ] && [ "$(field 0 6)" = "$all" ]' "$out"

out=$(env -u CCL_BIND "$cclrun" --bind-to none -n 2 -- "$prog" 2>&1)
check "cclrun --bind-to none leaves them" \
    '[ "$(field 0 4)" = "$all" ] && [ "$(field 1 4)" = "$all" ]' "$out"

out=$(env -u CCL_BIND taskset -c 0 "$here/torchrun_style.sh" 2 "$prog" 2>&1)
check "ranks their user bound keep their cpus" \
    '[ "$(field 0 4)" = "0" ] && [ "$(field 1 4)" = "0" ]' "$out"

out=$(env -u CCL_RANK_THREADS "$cclrun" --cpus-per-rank 1 -n 2 -- "$prog" 2>&1)
check "cclrun --cpus-per-rank 1: a cpu each, a team of one" \
    '[ "$(field 0 4)" != "$(field 1 4)" ] && [ "$(field 0 4)" -ge 0 ] 2>/dev/null && [ "$(field 1 4)" -ge 0 ] && [ "$(field 0 8)" = 1 ] && [ "$(field 1 8)" = 1 ]' "$out"

out=$(env -u CCL_RANK_THREADS "$cclrun" --cpus-per-rank 2 -n 1 -- "$prog" 2>&1)
check "cclrun --cpus-per-rank 2 -n 1: a team of the rank's 2 cpus" '[ "$(field 0 8)" = 2 ]' "$out"

out=$(CCL_RANK_THREADS=3 "$cclrun" -n 1 -- "$prog" 2>&1)
check "CCL_RANK_THREADS=3 sets the team" '[ "$(field 0 8)" = 3 ]' "$out"

out=$("$cclrun" --cpus-per-rank 1 --bind-to none -n 1 -- "$prog" 2>&1)
rc=$?
check "--cpus-per-rank with --bind-to none is refused" '[ $rc = 2 ] && echo "$out" | grep -q "cpus-per-rank"' "$out"

out=$(CCL_BIND=sometimes "$here/torchrun_style.sh" 2 "$prog" 2>&1)
check "a bad CCL_BIND is refused by name" 'echo "$out" | grep -q "CCL_BIND"' "$out"

[ $fails -eq 0 ] || { echo "bind_check: $fails check(s) failed"; exit 1; }
echo "bind_check: all passed"

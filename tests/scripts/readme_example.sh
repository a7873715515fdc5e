#!/usr/bin/env bash
# The README's complete C example compiles against ccl.h alone, links with -lccl and runs correctly
# under cclrun -n 4. Args: README include-dir lib-dir cclrun
set -euo pipefail
readme=$1 include=$2 libdir=$3 cclrun=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The first ```c block of the README.
awk '/^```c$/ {on=1; next} /^```$/ && on {exit} on' "$readme" > "$work/allreduce.c"
cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$include" "$work/allreduce.c" -L"$libdir" -lccl \
   -Wl,-rpath,"$libdir" -o "$work/allreduce"
out=$("$cclrun" -n 4 -- "$work/allreduce")
echo "$out"
[ "$(echo "$out" | grep -c 'x\[0\] = 6 (expected 6), broadcast 42')" -eq 4 ] || { echo "FAIL: unexpected output"; exit 1; }

# The README's launcher lines, as written, with ./allreduce the program above and ccl_info the
# build's: each must run (Open MPI as root with the flags its footnote in docs/launching.md gives;
# a launcher that is not installed here, like srun, is said and skipped).
bindir=$(dirname "$cclrun")
failed=0
while IFS= read -r line; do
    cmd=${line%%#*}
    prog=${cmd%% *}
    [[ $prog == ccl_info ]] && prog=$bindir/ccl_info
    command -v "$prog" >/dev/null || { echo "skipped (no $prog here): $cmd"; continue; }
    [[ $cmd == *" ..."* ]] && { echo "skipped (a placeholder): $cmd"; continue; }
    run=${cmd//.\/allreduce/$work/allreduce}
    run=${run//ccl_info/$bindir/ccl_info}
    if [[ $prog == mpirun && $(id -u) == 0 ]]; then run=${run/mpirun/mpirun --allow-run-as-root --oversubscribe}; fi
    # shellcheck disable=SC2086  # the line's words
    if out=$(CCL_TIMEOUT=60 timeout 120 $run 2>&1 </dev/null); then echo "ok: $cmd"; else
        echo "FAIL: $cmd"; echo "$out" | tail -5; failed=1; fi
    if [[ $cmd == *allreduce* ]] && [[ $(grep -c 'x\[0\] = 6 (expected 6), broadcast 42' <<<"$out") != 4 ]]; then
        echo "FAIL: $cmd: unexpected output"; echo "$out" | tail -5; failed=1; fi
done < <(awk '/^Or start ccl programs the way you start jobs already/ {on=1; next}
              on && /^    / {print substr($0, 5); next} on && /^`/ {exit}' "$readme")
exit $failed

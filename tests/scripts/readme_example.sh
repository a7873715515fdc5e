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

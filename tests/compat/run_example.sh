#!/bin/sh
# Runs one of oneCCL's examples under MPI and reads its verdict as the example states it: rank 0
# (every rank for broadcast) prints PASSED, a failed check prints FAILED; the examples exit 0
# either way. cpu_allreduce_bf16_test skips itself where the CPU lacks AVX-512 (it converts with
# AVX-512 instructions) and says "BF16 is disabled": ctest reports that as skipped.
#   run_example.sh MPIEXEC RANKS EXAMPLE
set -u
out=$("$1" -n "$2" "$3" 2>&1)
rc=$?
printf '%s\n' "$out"
case $out in *"BF16 is disabled"*) echo "skipped: the example needs AVX-512 for its bf16 conversions"; exit 0 ;; esac
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
case $out in *FAILED*) echo "FAIL: the example printed FAILED"; exit 1 ;; esac
case $out in *PASSED*) exit 0 ;; esac
echo "FAIL: the example never printed PASSED"
exit 1

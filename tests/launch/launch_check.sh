#!/usr/bin/env bash
# ccl under a real launcher, with no ccl variables set: ccl_info detects the launcher and each
# rank's place, the C API test passes on every rank, and ccl_bench checks every collective.
# Usage: launch_check.sh LAUNCHER N CCL_INFO TEST_C_API CCL_BENCH -- launcher command prefix...
#   e.g. launch_check.sh hydra 4 build/ccl_info build/tests/test_c_api build/ccl_bench -- mpiexec.mpich -n 4
set -u
launcher=$1 n=$2 ccl_info=$3 test_c_api=$4 ccl_bench=$5
shift 5
[ "${1:-}" = "--" ] && shift
prefix=("$@")
# Nothing from the environment that runs the tests (a Slurm job, say) may take part.
for v in $(env | sed -n 's/^\(CCL_RANK\|CCL_SIZE\|CCL_KVS_ADDRESS\|CCL_PROCESS_LAUNCHER\|CCL_KVS_PORT\|SLURM_[A-Z_]*\|PMI_[A-Z_]*\|PMIX_[A-Z_]*\|OMPI_[A-Z_]*\|MPI_LOCAL[A-Z]*\|TORCHELASTIC_[A-Z_]*\|RANK\|WORLD_SIZE\|LOCAL_RANK\|LOCAL_WORLD_SIZE\|MASTER_ADDR\|MASTER_PORT\)=.*/\1/p'); do
    unset "$v"
done
failed=0
ok() { echo "ok   $1"; }
fail() { failed=1; echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }
ranks_expected=$(for ((r = 0; r < n; r++)); do echo $r; done)

out=$("${prefix[@]}" "$ccl_info" 2>&1)
rc=$?
got_launchers=$(echo "$out" | grep -c "^launcher: *$launcher\$")
got_ranks=$(echo "$out" | sed -n "s/^rank: *\([0-9]*\) of $n\$/\1/p" | sort -n)
if [[ $rc == 0 && $got_launchers == "$n" && $got_ranks == "$ranks_expected" ]]; then
    ok "ccl_info: $n ranks of $launcher"
else
    fail "ccl_info" "rc=$rc" "output: $out"
fi

out=$("${prefix[@]}" "$test_c_api" 2>&1)
rc=$?
got_ranks=$(echo "$out" | sed -n "s/^rank \([0-9]*\) of $n: .* C API ok\$/\1/p" | sort -n)
if [[ $rc == 0 && $got_ranks == "$ranks_expected" ]]; then
    ok "test_c_api on $n ranks"
else
    fail "test_c_api" "rc=$rc" "output: $out"
fi

out=$("${prefix[@]}" "$ccl_bench" -c all -s 8,64K -n 5 -C all 2>&1)
rc=$?
if [[ $rc == 0 && $(echo "$out" | grep -c "^# ccl_bench: .*, $n ranks,") == 1 &&
      $out == *"wrong values: 0 (OK)"* ]]; then
    ok "ccl_bench -c all on $n ranks"
else
    fail "ccl_bench" "rc=$rc" "output: $out"
fi
exit $failed

#!/usr/bin/env bash
# ccl_info lists every knob with its value in effect and its default, hides the KVS address's
# secret, and flags a CCL_* variable that is no knob with the one it most likely meant; each
# rank warns about that variable once, when it creates its communicator.
# Usage: ccl_info_knobs.sh CCL_INFO CCLRUN TEST_C_API
set -u
info=$1 cclrun=$2 test_c_api=$3
failed=0
ok() { echo "ok   $1"; }
fail() {
    failed=1
    echo "FAIL $1"
    shift
    for l in "$@"; do echo "     $l"; done
}

# Only the variables set here: one unknown, whatever the environment running the tests has.
for v in $(compgen -e | grep '^CCL_'); do unset "$v"; done

knobs=$("$info" --markdown | wc -l)
out=$(env CCL_PROCESS_LAUNCHER=none CCL_TIMEOUT=60 CCL_ALLREDUC=ring CCL_CMA_SLICE=4096 \
    CCL_KVS_ADDRESS=127.0.0.1:5/00112233445566778899aabbccddeeff "$info" 2>/dev/null)
rc=$?
listed=$(grep -cE '^  CCL_[A-Z0-9_]+=' <<<"$out")
if [[ $rc == 0 && $listed == "$knobs" ]]; then ok "every knob listed ($knobs)"; else
    fail "every knob listed" "rc=$rc, $listed of $knobs listed" "output: $out"
fi
if grep -qE '^  CCL_TIMEOUT=60 +\(default 300\) ' <<<"$out" &&
    grep -qE '^  CCL_CMA_SLICE=4K +\(default 2M\) ' <<<"$out" &&
    grep -qE '^  CCL_SHM_BUFFER_SIZE=1M +\(default\) ' <<<"$out"; then
    ok "values in effect and defaults"
else
    fail "values in effect and defaults" "output: $out"
fi
if [[ $out != *00112233445566778899aabbccddeeff* ]] &&
    grep -qF '  CCL_KVS_ADDRESS=127.0.0.1:5/(secret not shown)' <<<"$out"; then
    ok "the KVS address's secret is not shown"
else
    fail "the KVS address's secret is not shown" "output: $out"
fi
if [[ $(grep -c '^unknown:' <<<"$out") == 1 ]] &&
    grep -qxF 'unknown:    CCL_ALLREDUC is no ccl variable (did you mean CCL_ALLREDUCE?)' <<<"$out"; then
    ok "a typo flagged, with the knob it meant"
else
    fail "a typo flagged, with the knob it meant" "output: $out"
fi

err=$(env CCL_ALLREDUC=ring "$cclrun" -n 2 -- "$test_c_api" 2>&1 >/dev/null)
rc=$?
# The ranks warn, each once, as they create their communicators; cclrun, which creates none, not.
warned=$(grep -c 'CCL_ALLREDUC is no ccl variable (did you mean CCL_ALLREDUCE?)' <<<"$err")
pids=$(grep -o '^\[ccl W [0-9]* ' <<<"$err" | sort -u | wc -l)
if [[ $rc == 0 && $warned == 2 && $pids == 2 ]]; then ok "each rank warns once"; else
    fail "each rank warns once" "rc=$rc, $warned warnings from $pids processes" "stderr: $err"
fi
exit $failed

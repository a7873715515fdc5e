#!/usr/bin/env bash
# Installs the dependencies, builds ccl and runs every test: the regular build, then the same
# tests under ASan+UBSan, then the threaded tests (KVS, arena, cache, workers, requests, groups,
# threads, large single-copy transfers in slices, split communicators, point to point over shared
# memory and over libfabric (whose progress thread runs beside the caller's), the PMI and
# rendezvous clients, abort, the handle tables' entries) under TSan.
# Usage: tools/test.sh [--quick]   (--quick: the regular build only)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

tools/install-deps.sh
jobs=$(nproc)

# suite DIR "CMAKE ARGS" "TARGETS" "CTEST ARGS" [CMAKE ARG...]  (those last may hold spaces)
suite() {
    echo "== $1: build"
    # shellcheck disable=SC2086
    cmake -S . -B "$1" -G Ninja $2 "${@:5}" >/dev/null
    # shellcheck disable=SC2086
    cmake --build "$1" -j "$jobs" --target $3
    echo "== $1: test"
    # shellcheck disable=SC2086
    ctest --test-dir "$1" --output-on-failure --timeout 300 -j "$jobs" $4
}

# Line tables only (-g1), the same code: what a sanitizer's report and a backtrace need, at a
# sixth less compile time than full debug information over the three builds (CI's time). The
# build folders keep it; `cmake -S . -B build -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG"`
# gives build/ full debug information again.
rel=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
debug=(-DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1)
suite build "-DCMAKE_BUILD_TYPE=RelWithDebInfo" all "" "${rel[@]}"
if [ $quick -eq 0 ]; then
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    suite build-asan "-DCMAKE_BUILD_TYPE=Debug -DCCL_SANITIZE=address" all "" "${debug[@]}"
    export TSAN_OPTIONS=halt_on_error=1
    suite build-tsan "-DCMAKE_BUILD_TYPE=Debug -DCCL_SANITIZE=thread" \
        "ccl_unit_tests cclrun test_nonblocking test_groups test_threads test_split test_p2p test_p2p_tags test_abort test_threads_one_comm" \
        "-R Kvs|Arena|ScheduleCache|HandleTable|Pmi|Rendezvous|Cma|test_nonblocking|test_groups|test_threads|test_split|test_p2p|reliability.test_abort" \
        "${debug[@]}"
fi

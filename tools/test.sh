#!/usr/bin/env bash
# Installs the dependencies, builds ccl and runs every test: the regular build, then the same
# tests under ASan+UBSan and the threaded unit tests under TSan. Usage: tools/test.sh [--quick]
# (--quick: the regular build only).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

tools/install-deps.sh
jobs=$(nproc)

run_suite() {  # build dir, cmake args..., then ctest args after --
    local dir=$1; shift
    local cmake_args=() ctest_args=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmake_args+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    ctest_args=("$@")
    echo "== $dir: configure and build"
    cmake -S . -B "$dir" -G Ninja "${cmake_args[@]}" >/dev/null
    cmake --build "$dir" -j "$jobs"
    echo "== $dir: test"
    ctest --test-dir "$dir" --output-on-failure --timeout 300 -j "$jobs" "${ctest_args[@]}"
}

run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ $quick -eq 0 ]; then
    # Sanitizers: halt on the first report; shared memory and fork are fine under both.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DCCL_SANITIZE=address
    export TSAN_OPTIONS=halt_on_error=1
    run_suite build-tsan -DCMAKE_BUILD_TYPE=Debug -DCCL_SANITIZE=thread -- -R 'Kvs|Config|Arena'
fi

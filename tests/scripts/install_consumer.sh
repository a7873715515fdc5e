#!/usr/bin/env bash
# After `cmake --install`, another project finds ccl through find_package(ccl) and through
# pkg-config, builds against ccl.h and runs. Args: build-dir source-dir
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
mkdir -p "$work/app"
cat > "$work/app/main.c" <<'C'
#include <ccl/ccl.h>
#include <stdio.h>
int main(void) {
    int a, b, c;
    if (ccl_get_version(&a, &b, &c) != CCL_SUCCESS) return 1;
    printf("ccl %d.%d.%d\n", a, b, c);
    return 0;
}
C
cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(ccl 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE ccl::ccl)
CM
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/build/consumer"
libdir=$(ls -d "$work"/prefix/lib*/pkgconfig | head -n 1)
export PKG_CONFIG_PATH=$libdir
cc "$work/app/main.c" $(pkg-config --cflags --libs ccl) -o "$work/consumer-pc"
LD_LIBRARY_PATH="$(dirname "$libdir")" "$work/consumer-pc"
# The installed tools run from a prefix that is not a system one, with no LD_LIBRARY_PATH.
env -u LD_LIBRARY_PATH "$work/prefix/bin/ccl_info" >/dev/null
env -u LD_LIBRARY_PATH CCL_TIMEOUT=60 timeout 120 "$work/prefix/bin/cclrun" -n 2 -- \
    "$work/prefix/bin/ccl_bench" -c allreduce -s 8 -n 5 >/dev/null
echo "ok: find_package(ccl) and pkg-config ccl both work; the installed ccl_info and ccl_bench run"


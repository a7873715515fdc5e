#!/bin/sh
# After `cmake --install`, a oneCCL program builds against the installed oneapi/ccl.hpp with
# nothing but pkg-config's flags (docs/oneccl.md) and runs at 2 ranks.
#   installed_header.sh BUILD_DIR PROGRAM.cpp MPI_CFLAGS_AND_LIBS MPIEXEC INCLUDE_DIR...
set -eu
build=$1 prog=$2 mpi=$3 mpiexec=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/oneapi/ccl.hpp"
test -f "$work/prefix/include/oneapi/ccl/config.h"
libdir=$(ls -d "$work"/prefix/lib*/pkgconfig | head -n 1)
export PKG_CONFIG_PATH="$libdir"
incs=
for d in "$@"; do incs="$incs -I$d"; done
# shellcheck disable=SC2046,SC2086 # the flags are words
c++ -std=c++11 -Wall -Wextra -Wno-unused-parameter -Werror $incs "$prog" -o "$work/prog" \
    $(pkg-config --cflags --libs ccl) $mpi
out=$(LD_LIBRARY_PATH="$(dirname "$libdir")" "$mpiexec" -n 2 "$work/prog")
printf '%s\n' "$out"
case $out in *PASSED*) echo "ok: built against the installed oneapi/ccl.hpp with pkg-config ccl" ;; *) exit 1 ;; esac

#!/usr/bin/env bash
# src/transport/libfabric.cpp looks libfabric's functions up at the symbol versions a program
# built against the installed headers binds: link one with -lfabric and compare what it binds
# (objdump -T) with the versions that file names. Usage: symbol_versions.sh path/to/libfabric.cpp
set -euo pipefail
src=${1:?usage: $0 path/to/libfabric.cpp}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every function the file binds, as "name version".
want=$(grep -o 'bind(lib, "fi_[a-z_]*", "FABRIC_[0-9.]*"' "$src" |
    sed 's/bind(lib, "\(fi_[a-z_]*\)", "\(FABRIC_[0-9.]*\)"/\1 \2/' | sort)
[ -n "$want" ] || { echo "FAIL: no bind(lib, \"fi_...\", \"FABRIC_...\") in $src"; exit 1; }
{
    echo '#include <rdma/fabric.h>'
    echo '#include <rdma/fi_errno.h>'
    echo 'int main(void) { void* volatile p[] = {'
    awk '{ printf "(void*)%s,\n", $1 }' <<<"$want"
    echo '}; return p[0] == 0; }'
} >"$work/probe.c"
# shellcheck disable=SC2046
cc "$work/probe.c" -o "$work/probe" $(pkg-config --cflags --libs libfabric)
got=$(objdump -T "$work/probe" | awk '$NF ~ /^fi_/ { v = $(NF-1); gsub(/[()]/, "", v); print $NF, v }' | sort)
if [ "$got" != "$want" ]; then
    echo "FAIL: the installed libfabric headers bind other versions than $src names"
    echo "binds:"; echo "$got"
    echo "names:"; echo "$want"
    exit 1
fi
echo "ok: $(wc -l <<<"$want") libfabric functions at the versions the headers bind"

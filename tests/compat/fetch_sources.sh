#!/bin/sh
# Copies the third-party sources the compat tests build unmodified (docs/oneccl.md) out of two git
# mirrors, at their HEAD, into tests/compat/thirdparty/, and writes PROVENANCE files saying where
# each came from. Both projects are Apache-2.0: their LICENSE files come along, and every file
# keeps its own header.
#   tests/compat/fetch_sources.sh MIRROR_DS MIRROR_ONECCL
# MIRROR_DS: a git directory of github.com/deepspeedai/DeepSpeed; MIRROR_ONECCL: one of
# github.com/uxlfoundation/oneCCL (bare or not).
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 MIRROR_DS MIRROR_ONECCL" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$here/thirdparty

# copy MIRROR DEST_DIR REPO_URL WHY PATH...: each PATH at HEAD into DEST_DIR/PATH.
copy() {
    mirror=$1 dest=$2 url=$3 why=$4
    shift 4
    commit=$(git --git-dir="$mirror" rev-parse HEAD)
    date=$(git --git-dir="$mirror" show -s --format=%cI HEAD)
    rm -rf "$dest"
    mkdir -p "$dest"
    {
        echo "repository: $url"
        echo "commit: $commit ($date)"
        echo "licence: Apache-2.0 (LICENSE, copied from the same commit)"
        echo "copied by: tests/compat/fetch_sources.sh, unmodified"
        echo "why: $why"
        echo "paths:"
    } >"$dest/PROVENANCE"
    for path in LICENSE "$@"; do
        mkdir -p "$dest/$(dirname "$path")"
        git --git-dir="$mirror" show "HEAD:$path" >"$dest/$path"
        echo "  $path" >>"$dest/PROVENANCE"
    done
}

ds=$(git --git-dir="$1" rev-parse --git-dir 2>/dev/null || echo "$1/.git")
oneccl=$(git --git-dir="$2" rev-parse --git-dir 2>/dev/null || echo "$2/.git")

# DeepSpeed's CPU communication op (CCLCommBuilder: ccl.cpp and shm.cpp, the headers they
# include), the ReduceOp its functions take (deepspeed.comm.ReduceOp), and the builder whose flags
# the compat build uses.
copy "$ds" "$out/deepspeed" https://github.com/deepspeedai/DeepSpeed \
    "DeepSpeed's ccl.cpp built as a torch extension against ccl's oneapi/ccl.hpp" \
    csrc/cpu/comm/ccl.cpp csrc/cpu/comm/shm.cpp csrc/cpu/comm/shm.h \
    csrc/cpu/comm/x86_64/shm.h csrc/cpu/comm/arm64/shm.h csrc/cpu/comm/riscv64/shm.h \
    deepspeed/comm/reduce_op.py op_builder/cpu/comm.py

# oneCCL's examples/cpu (host API only) and the example headers they include.
copy "$oneccl" "$out/oneccl" https://github.com/uxlfoundation/oneCCL \
    "oneCCL's host-API examples built unmodified against ccl's oneapi/ccl.hpp" \
    examples/cpu/cpu_allgather_test.cpp examples/cpu/cpu_allgatherv_test.cpp \
    examples/cpu/cpu_allreduce_bf16_test.cpp examples/cpu/cpu_allreduce_test.cpp \
    examples/cpu/cpu_broadcast_test.cpp examples/include/base.hpp examples/include/bf16.hpp

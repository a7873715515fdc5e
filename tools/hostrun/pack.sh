#!/usr/bin/env bash
# Packs what a bare x86-64 host needs to run ccl_bench beside its own Open MPI: the built
# binaries and the libraries `ldd` lists (not libc, libm, libstdc++ or libgcc_s: the host's are
# newer, and a carried libstdc++ broke the host's MPI build), plus env.sh, run.sh and ab.sh.
# Where this machine has MPICH (../shared/peers/setup.sh), mpich.tar.xz carries the peers'
# benchmark built against it for a portable target, with libmpich, UCX (and its CMA module) and
# hydra: the host has no MPICH, and libmpich alone is 40 MB unpacked.
#   tools/hostrun/pack.sh [BUILD] [DEST]     (default build, .devcarry/h16: ignored by git)
# Then, on the host, in a copy of the checkout that holds DEST (two folders below its root, as
# the default is): DEST/run.sh "2 4 8 16" allreduce,broadcast,barrier for whole tables, or
# DEST/ab.sh 4 sendrecv 4K,32K 5 "" "CCL_CMA_MIN=64K" for variants in alternating launches.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$repo/build}
dest=${2:-$repo/.devcarry/h16}
# carry_libs DIR FILE...: the libraries the files need into DIR, but glibc's and the C++
# runtime (the host's) and libccl (copied as built).
carry_libs() {
    local dir=$1
    shift
    ldd "$@" | awk '/=>/ {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libresolv|libstdc\+\+|libgcc_s|libccl)\.so' |
        xargs -r -I{} cp -L {} "$dir/"
}
mkdir -p "$dest/bin" "$dest/lib"
bins=(ccl_bench cclrun ccl_info handoff_lat exchange_lat line_rtt copy_bw)
for b in "${bins[@]}"; do cp "$build/$b" "$dest/bin/"; done
cp -L "$build/libccl.so.0" "$dest/lib/"
carry_libs "$dest/lib" "$build/libccl.so.0" "${bins[@]/#/$build/}"
strip "$dest"/bin/* "$dest/lib/libccl.so.0"
cp "$repo/tools/hostrun/env.sh" "$repo/tools/hostrun/run.sh" "$repo/tools/hostrun/ab.sh" "$dest/"
if command -v mpicxx.mpich >/dev/null; then
    m=$(mktemp -d)
    mkdir -p "$m/bin" "$m/lib/ucx"
    mpicxx.mpich -O3 -march=x86-64-v3 -std=c++20 -o "$m/bin/mpi_family_bench.mpich" \
        "$repo/bench/peers/mpi_family_bench.cpp"
    hydra=$(readlink -f "$(command -v mpiexec.mpich)")
    cp "$hydra" "$(dirname "$hydra")/hydra_pmi_proxy" "$m/bin/"
    carry_libs "$m/lib" "$m/bin/mpi_family_bench.mpich" "$hydra"
    ucp=$(ldd "$m/bin/mpi_family_bench.mpich" | awk '/libucp/ {print $3}')
    cp -L "$(dirname "$ucp")/ucx/libuct_cma.so.0" "$m/lib/ucx/"
    strip "$m"/bin/* "$m"/lib/*.so* "$m"/lib/ucx/*
    tar cJf "$dest/mpich.tar.xz" -C "$m" .
    rm -rf "$m"
fi
du -sh "$dest"

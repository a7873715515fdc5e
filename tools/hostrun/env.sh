# Sourced on the host (tools/hostrun/pack.sh put it beside the carried bin/ and lib/): the carried
# ccl binaries and libraries, and the host's Open MPI under the names compare_peers.sh uses
# (mpirun.openmpi, mpicxx.openmpi), its ranks bound to cores. Sets B to the binaries' folder.
carry=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH=$carry/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$carry/wrap"
for t in mpirun mpicxx; do p=$(command -v $t) && ln -sf "$p" "$carry/wrap/$t.openmpi"; done
export PATH=$carry/wrap:$PATH
export OMPI_MCA_hwloc_base_binding_policy=core OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=$carry/bin
# MPICH, where pack.sh carried it: mpiexec.mpich runs hydra with the carried libraries and UCX's
# CMA module, ranks bound to cores; the benchmark goes where compare_peers.sh looks, newer than
# its source so that it is not rebuilt.
if [ -f "$carry/mpich.tar.xz" ]; then
    [ -d "$carry/mpich" ] || { mkdir -p "$carry/mpich" && tar xJf "$carry/mpich.tar.xz" -C "$carry/mpich"; }
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s UCX_MODULE_DIR=%s exec %s -bind-to core "$@"\n' \
        "$carry/mpich/lib" "$carry/mpich/lib/ucx" "$carry/mpich/bin/mpiexec.hydra" >"$carry/wrap/mpiexec.mpich"
    chmod +x "$carry/wrap/mpiexec.mpich"
    ln -sf "$carry/mpich/bin/hydra_pmi_proxy" "$carry/wrap/hydra_pmi_proxy"
    mkdir -p "$carry/../../build-peers"
    cp "$carry/mpich/bin/mpi_family_bench.mpich" "$carry/../../build-peers/"
    touch "$carry/../../build-peers/mpi_family_bench.mpich"
fi

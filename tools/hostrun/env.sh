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

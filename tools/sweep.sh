#!/usr/bin/env bash
# Every collective from 8 B to 64 MiB (x8 steps), ccl_bench and Open MPI's mpi_family_bench on the
# same cpus, at each rank count, then the plots: how docs/plots/host16_*.png were made.
#
#   tools/sweep.sh OUT [RANKS...]          (default ranks: 2 4 8 16)
#
# Rank count N runs on cpus 0..N-1 (taskset), Open MPI with --bind-to core. Writes OUT/ccl.csv,
# OUT/openmpi.csv and, with matplotlib, OUT/<collective>.png. Environment: CCL_BIN, the folder of
# cclrun and ccl_bench (default build/); MPICXX, MPIRUN (default mpicxx, mpirun); TARGET, seconds
# per size (default 0.05).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: tools/sweep.sh OUT [RANKS...]}
shift
ranks=${*:-2 4 8 16}
bin=${CCL_BIN:-$repo/build}
target=${TARGET:-0.05}
colls=allreduce,broadcast,reduce,allgather,allgatherv,reduce_scatter,alltoall,alltoallv,barrier,sendrecv
mkdir -p "$out"
mfb=$out/mpi_family_bench
"${MPICXX:-mpicxx}" -O2 -std=c++17 -o "$mfb" "$repo/bench/peers/mpi_family_bench.cpp"
header=collective,ranks,size_bytes,count,dtype,op,root,in_place,time_us,algbw_gbps,busbw_gbps,wrong
echo "$header" > "$out/openmpi.csv"
: > "$out/ccl.csv"  # its header from ccl_bench's first file (ccl's CSV has more columns)
for n in $ranks; do
    cpus=0-$((n - 1))
    echo "== ccl, $n ranks"
    taskset -c "$cpus" "$bin/cclrun" -n "$n" "$bin/ccl_bench" -c "$colls" -b 8 -e 64M -f 8 \
        -t "$target" --csv "$out/ccl-$n.csv"
    echo "== Open MPI, $n ranks"
    taskset -c "$cpus" "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to core \
        -np "$n" "$mfb" --only "$colls" --min 8 --max 64M --factor 8 --target "$target" \
        --csv "$out/openmpi-$n.csv"
    [ -s "$out/ccl.csv" ] || head -1 "$out/ccl-$n.csv" > "$out/ccl.csv"
    tail -n +2 "$out/ccl-$n.csv" >> "$out/ccl.csv"
    tail -n +2 "$out/openmpi-$n.csv" >> "$out/openmpi.csv"
done
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
    for c in ${colls//,/ }; do
        [ "$c" = barrier ] && continue
        /usr/bin/python3 "$repo/tools/plot_bench.py" "$out/ccl.csv" "$out/openmpi.csv" -l ccl \
            -l "Open MPI" -c "$c" -o "$out/$c.png" --title "$c, float32: ccl against Open MPI"
    done
else
    echo "sweep: /usr/bin/python3 has no matplotlib (apt-get install python3-matplotlib): plot elsewhere with tools/plot_bench.py $out/ccl.csv $out/openmpi.csv"
fi

#!/usr/bin/env bash
# Across two fake nodes (tools/fakenodes), in one run: the raw TCP bandwidth between the nodes
# (iperf3), Open MPI's MPI_Allreduce over TCP (btl tcp,self) and ccl's allreduce, one rank per
# node (--ppn P: P ranks per node). The three are run alternately (raw, Open MPI, ccl; the order
# rotates between rounds) and the table shows the median of each over --repeat rounds, with the
# load (uptime) before and after: the development machines are small and shared, so only figures
# of one run compare. ccl's ranks run with CCL_BIND=none, unbound like Open MPI's (--bind-to none):
# fake nodes share one machine's cores, and ranks binding themselves by local rank would pile
# the nodes' rank 0s onto the same cores (--ccl-env can set it otherwise).
#
# Usage: tests/multinode/compare_fabric.sh [--repeat R] [--sizes LIST] [--time S] [--out DIR]
#        [--ppn P] [--ccl-env "VAR=VALUE ..."]
# Needs root (namespaces), iperf3, Open MPI and ../shared/peers/bin/mpi_bench.openmpi (its
# setup.sh builds it; --no-mpi leaves Open MPI out).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
FN=$repo/tools/fakenodes
repeat=3
sizes=8,4K,64K,1M,16M
time_s=0.3
out=""
ccl_env="CCL_BIND=none"
mpi=1
ppn=1
peers=${PEERS_DIR:-$repo/../shared/peers}
build=${BUILD_DIR:-$repo/build}
while [ $# -gt 0 ]; do
    case $1 in
    --repeat) repeat=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --time) time_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ccl-env) ccl_env="CCL_BIND=none $2"; shift 2 ;;
    --ppn) ppn=$2; shift 2 ;;
    --no-mpi) mpi=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_fabric.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "compare_fabric.sh: needs root (namespaces)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "compare_fabric.sh: needs iperf3" >&2; exit 2; }
mpi_bench=$peers/bin/mpi_bench.openmpi
if [ "$mpi" = 1 ] && ! [ -x "$mpi_bench" ]; then
    echo "compare_fabric.sh: $mpi_bench missing (run $peers/setup.sh, or --no-mpi)" >&2
    exit 2
fi
out=${out:-$build/compare-fabric-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

# Sizes in bytes (K, M suffixes).
bytes_list=()
IFS=, read -ra _s <<<"$sizes"
for s in "${_s[@]}"; do
    case $s in
    *K) bytes_list+=($((${s%K} << 10))) ;;
    *M) bytes_list+=($((${s%M} << 20))) ;;
    *) bytes_list+=("$s") ;;
    esac
done
min_b=${bytes_list[0]} max_b=${bytes_list[-1]}

eval "$("$FN" up 2)"
trap '"$FN" down >/dev/null 2>&1 || true' EXIT
node1=$("$FN" addr node1)
# Open MPI's rsh agent: "agent HOST command..." runs the command in that node's namespaces.
agent=$out/rsh-agent.sh
cat >"$agent" <<EOF
#!/bin/sh
host=\$1; shift
exec "$FN" exec "\$host" -- /bin/sh -c "\$*"
EOF
chmod +x "$agent"

run_raw() { # ROUND: single stream, then 2 streams and both directions for reference
    local r=$1 mode
    for mode in 1 P2 bidir; do
        "$FN" exec node1 -- iperf3 -s -1 >/dev/null 2>&1 &
        local srv=$!
        sleep 0.3
        local args=()
        [ "$mode" = P2 ] && args=(-P 2)
        [ "$mode" = bidir ] && args=(--bidir)
        "$FN" exec node0 -- timeout 30 iperf3 -c "$node1" -t 3 -J "${args[@]}" \
            >"$out/raw-$mode-$r.json" 2>&1 || true
        wait "$srv" 2>/dev/null || true
    done
}
# --bind-to none: each fake node sees the machine's cores, so Open MPI's default binding would
# pin both ranks to core 0, where their busy polling shares one core in 4 ms slices.
# --oversubscribe: Open MPI 4.1.6 (the 16-core host's) counted no slots on a fake node ("not
# enough slots available") although --host gives each its ranks.
run_mpi() {
    "$FN" exec node0 -- timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe -np $((2 * ppn)) --host "node0:$ppn,node1:$ppn" --bind-to none \
        --mca plm_rsh_agent "$agent" --mca btl tcp,self --mca btl_tcp_if_include eth0 \
        --mca oob_tcp_if_include eth0 "$mpi_bench" --only allreduce --min "$min_b" \
        --max "$max_b" --target "$time_s" >"$out/mpi-$1.txt" 2>&1 || echo "Open MPI round $1 failed (see $out/mpi-$1.txt)" >&2
}
run_ccl() {
    # shellcheck disable=SC2086
    env $ccl_env "$FN" exec node0 -- timeout 300 "$build/cclrun" --hosts node0,node1 --ppn "$ppn" \
        --launcher-cmd "$FN exec {host} --" -- "$build/ccl_bench" -c allreduce -s "$sizes" \
        -t "$time_s" --csv "$out/ccl-$1.csv" >"$out/ccl-$1.txt" 2>&1 || echo "ccl round $1 failed (see $out/ccl-$1.txt)" >&2
}

load_before=$(uptime)
for ((r = 1; r <= repeat; r++)); do
    order=(raw mpi ccl)
    [ "$mpi" = 1 ] || order=(raw ccl)
    n=${#order[@]}
    for ((k = 0; k < n; k++)); do
        what=${order[$(((k + r - 1) % n))]}
        echo "round $r: $what" >&2
        "run_$what" "$r"
    done
done
load_after=$(uptime)

python3 - "$out" "$repeat" "${bytes_list[*]}" "$load_before" "$load_after" "$sizes" "$ppn" <<'EOF' | tee "$out/summary.md"
import json, statistics, sys, glob, os
out, repeat, sizes = sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[3].split()]
ppn = int(sys.argv[7])
n = 2 * ppn
def med(v): return statistics.median(v) if v else float('nan')
def raw(mode):
    v = []
    for r in range(1, repeat + 1):
        try:
            j = json.load(open(f"{out}/raw-{mode}-{r}.json"))
            e = j["end"]
            if mode == "bidir":
                v.append((e["sum_sent"]["bits_per_second"] + e["sum_sent_bidir_reverse"]["bits_per_second"]) / 8e9)
            else:
                v.append(e["sum_received"]["bits_per_second"] / 8e9)
        except Exception:
            pass
    return v
def mpi():
    t = {}
    for r in range(1, repeat + 1):
        p = f"{out}/mpi-{r}.txt"
        if not os.path.exists(p): continue
        for line in open(p):
            f = line.split()
            if len(f) >= 8 and f[0] == "allreduce" and f[-1] == "ok":
                t.setdefault(int(f[1]), []).append(float(f[3]))
    return t
def ccl():
    t = {}
    for r in range(1, repeat + 1):
        p = f"{out}/ccl-{r}.csv"
        if not os.path.exists(p): continue
        for line in open(p).read().splitlines()[1:]:
            f = line.split(",")
            if f[0] == "allreduce" and f[1] == str(n) and f[11] in ("0", ""):
                t.setdefault(int(f[2]), []).append(float(f[8]))
    return t
def fmt_size(b):
    for u, s in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= u and b % u == 0: return f"{b // u} {s}"
    return f"{b} B"
r1, rp, rb = raw("1"), raw("P2"), raw("bidir")
m, c = mpi(), ccl()
# busbw of an n-rank allreduce = algbw x 2(n-1)/n (= algbw at 2 ranks).
bus = lambda b, us: b / (us * 1e-6) / 1e9 * 2 * (n - 1) / n
print(f"Load before: {sys.argv[4].strip()}  \nLoad after: {sys.argv[5].strip()}  ")
print(f"Raw TCP between the two nodes (iperf3, median of {len(r1)}): {med(r1):.2f} GB/s one stream, "
      f"{med(rp):.2f} GB/s two streams (-P 2), {med(rb):.2f} GB/s both directions together (--bidir)\n")
print("| size | ccl allreduce (us) | ccl busbw (GB/s) | Open MPI (us) | Open MPI busbw (GB/s) | raw (GB/s) | ccl/raw | ccl/Open MPI busbw |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for b in sizes:
    ct, mt = med(c.get(b, [])), med(m.get(b, []))
    cb, mb = bus(b, ct), bus(b, mt)
    print(f"| {fmt_size(b)} | {ct:.1f} | {cb:.2f} | {mt:.1f} | {mb:.2f} | {med(r1):.2f} | "
          f"{cb / med(r1) * 100:.0f}% | {cb / mb:.2f}x |")
print(f"\n(medians of {repeat} rounds; 2 nodes x {ppn} rank{'s' if ppn > 1 else ''}; all files in {out})")
EOF

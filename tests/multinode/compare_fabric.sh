#!/usr/bin/env bash
# Across two fake nodes (tools/fakenodes), in one run: the raw TCP bandwidth between the nodes
# (iperf3), Open MPI's MPI_Allreduce over TCP (btl tcp,self) and ccl's allreduce, one rank per
# node (--ppn P: P ranks per node). The three are run alternately (raw, Open MPI, ccl; the order
# rotates between rounds) and the table shows the median of each over --repeat rounds, with the
# load (uptime) before and after: the development machines are small and shared, so only figures
# of one run compare. ccl's ranks run with CCL_BIND=none, unbound like Open MPI's (--bind-to none):
# fake nodes share one machine's cores, and ranks binding themselves by local rank would pile
# the nodes' rank 0s onto the same cores (--ccl-env can set it otherwise). --base DIR adds a
# round of another build's ccl_bench and cclrun (say, main's) to each, for a before/after in
# alternating launches.
#
# Usage: tests/multinode/compare_fabric.sh [--repeat R] [--sizes LIST] [--time S] [--out DIR]
#        [--ppn P] [--ccl-env "VAR=VALUE ..."] [--base BUILD_DIR]
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
base=""
while [ $# -gt 0 ]; do
    case $1 in
    --repeat) repeat=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --time) time_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ccl-env) ccl_env="CCL_BIND=none $2"; shift 2 ;;
    --ppn) ppn=$2; shift 2 ;;
    --no-mpi) mpi=0; shift ;;
    --base) base=$(cd "$2" && pwd); shift 2 ;;
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
    # The floor under a small allreduce: one TCP connection exchanging 8 B and 4 KiB.
    "$FN" exec node1 -- timeout 30 "$build/tcp_exchange" --listen 5999 >/dev/null 2>&1 &
    srv=$!
    sleep 0.3
    "$FN" exec node0 -- timeout 30 "$build/tcp_exchange" --connect "$node1:5999" --sizes 8,4K \
        --time 0.2 >"$out/exchange-$r.txt" 2>&1 || true
    wait "$srv" 2>/dev/null || true
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
run_ccl() { # ROUND [BUILD NAME]
    local b=${2:-$build} name=${3:-ccl}
    # shellcheck disable=SC2086
    env $ccl_env "$FN" exec node0 -- timeout 300 "$b/cclrun" --hosts node0,node1 --ppn "$ppn" \
        --launcher-cmd "$FN exec {host} --" -- "$b/ccl_bench" -c allreduce -s "$sizes" \
        -t "$time_s" --csv "$out/$name-$1.csv" >"$out/$name-$1.txt" 2>&1 || echo "$name round $1 failed (see $out/$name-$1.txt)" >&2
}
run_base() { run_ccl "$1" "$base" base; }

load_before=$(uptime)
for ((r = 1; r <= repeat; r++)); do
    order=(raw mpi ccl)
    [ "$mpi" = 1 ] || order=(raw ccl)
    [ -z "$base" ] || order+=(base)
    n=${#order[@]}
    for ((k = 0; k < n; k++)); do
        what=${order[$(((k + r - 1) % n))]}
        echo "round $r: $what" >&2
        "run_$what" "$r"
    done
done
load_after=$(uptime)

python3 - "$out" "$repeat" "${bytes_list[*]}" "$load_before" "$load_after" "$sizes" "$ppn" "$base" <<'EOF' | tee "$out/summary.md"
import json, statistics, sys, glob, os
out, repeat, sizes = sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[3].split()]
ppn = int(sys.argv[7])
base = sys.argv[8]
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
def collect(file, row):  # {key: [value per round]} from each round's file; row(line) -> (key, value) or None
    t = {}
    for r in range(1, repeat + 1):
        p = f"{out}/{file.format(r)}"
        if not os.path.exists(p): continue
        for line in open(p):
            kv = row(line.rstrip("\n"))
            if kv: t.setdefault(kv[0], []).append(kv[1])
    return t
def mpi_row(line):
    f = line.split()
    if len(f) >= 8 and f[0] == "allreduce" and f[-1] == "ok": return int(f[1]), float(f[3])
def ccl_row(line):
    f = line.split(",")
    if len(f) > 11 and f[0] == "allreduce" and f[1] == str(n) and f[11] in ("0", ""):
        return int(f[2]), float(f[8])
def exchange_row(line):
    f = line.split()
    if len(f) == 3 and f[0] in ("block", "spin", "helper"): return (f[0], int(f[1])), float(f[2])
mpi = lambda: collect("mpi-{}.txt", mpi_row)
ccl = lambda name="ccl": collect(name + "-{}.csv", ccl_row)
exchange = lambda: collect("exchange-{}.txt", exchange_row)
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
      f"{med(rp):.2f} GB/s two streams (-P 2), {med(rb):.2f} GB/s both directions together (--bidir)  ")
x = exchange()
print("An exchange over one TCP connection (tcp_exchange, us per call, median): " +
      "; ".join(f"{fmt_size(b)}: " + ", ".join(f"{w} {med(x.get((w, b), [])):.2f}"
                                             for w in ("block", "spin", "helper"))
                for b in (8, 4096)) + "\n")
bc = ccl("base") if base else {}
print("| size | ccl allreduce (us) | ccl busbw (GB/s) | Open MPI (us) | Open MPI busbw (GB/s) | raw (GB/s) | ccl/raw | ccl/Open MPI busbw |"
      + (" base ccl (us) | base/ccl time |" if base else ""))
print("|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if base else ""))
for b in sizes:
    ct, mt = med(c.get(b, [])), med(m.get(b, []))
    cb, mb = bus(b, ct), bus(b, mt)
    row = (f"| {fmt_size(b)} | {ct:.1f} | {cb:.2f} | {mt:.1f} | {mb:.2f} | {med(r1):.2f} | "
           f"{cb / med(r1) * 100:.0f}% | {cb / mb:.2f}x |")
    if base:
        bt = med(bc.get(b, []))
        row += f" {bt:.1f} | {bt / ct:.2f}x |"
    print(row)
if base:
    print(f"\n(base: {base})")
print(f"\n(medians of {repeat} rounds; 2 nodes x {ppn} rank{'s' if ppn > 1 else ''}; all files in {out})")
EOF

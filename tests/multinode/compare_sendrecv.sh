#!/usr/bin/env bash
# Point to point across two fake nodes (tools/fakenodes), one rank each: ccl_bench -c sendrecv and
# Open MPI's MPI_Irecv/MPI_Send ring (build-peers/mpi_family_bench.openmpi --only sendrecv, btl
# tcp), alternately, --repeat rounds; prints the median time of each per size.
#
# Usage: tests/multinode/compare_sendrecv.sh [--repeat R] [--time S]
# Needs root (namespaces), Open MPI and the peer benchmark (tools/compare_peers.sh --build-only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
FN=$repo/tools/fakenodes
build=${BUILD_DIR:-$repo/build}
peer=$repo/build-peers/mpi_family_bench.openmpi
repeat=3
time_s=0.3
while [ $# -gt 0 ]; do
    case $1 in
    --repeat) repeat=$2; shift 2 ;;
    --time) time_s=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_sendrecv.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "compare_sendrecv.sh: needs root (namespaces)" >&2; exit 2; }
[ -x "$peer" ] || { echo "compare_sendrecv.sh: $peer missing (tools/compare_peers.sh --build-only)" >&2; exit 2; }
out=$(mktemp -d)
eval "$("$FN" up 2)"
trap '"$FN" down >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
agent=$out/rsh-agent.sh
printf '#!/bin/sh\nhost=$1; shift\nexec %s exec "$host" -- /bin/sh -c "$*"\n' "$FN" >"$agent"
chmod +x "$agent"
sizes=8,512,8K,128K,512K,2M,8M,16M  # Open MPI's ladder (8 B x 4) meets these
echo "load before: $(uptime)"
for ((r = 1; r <= repeat; r++)); do
    "$FN" exec node0 -- timeout 300 "$build/cclrun" --hosts node0,node1 \
        --launcher-cmd "$FN exec {host} --" -- "$build/ccl_bench" -c sendrecv -s "$sizes" \
        -t "$time_s" 2>&1 | awk '/^ +[0-9]/ {print "ccl", $1, $6}' >>"$out/rows"
    "$FN" exec node0 -- timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 \
        --host node0:1,node1:1 --bind-to none --mca plm_rsh_agent "$agent" --mca btl tcp,self \
        --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 "$peer" --only sendrecv \
        --min 8 --max 16M --factor 4 --with-max --target "$time_s" 2>&1 |
        awk '/^ +[0-9]/ {print "ompi", $1, $3}' >>"$out/rows"
done
echo "load after: $(uptime)"
python3 - "$out/rows" "$sizes" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    who, size, us = line.split()
    t.setdefault((who, int(size)), []).append(float(us))
sizes = sorted({s for _, s in t if ("ccl", s) in t})
print("| size | ccl (us) | Open MPI (us) |\n|---:|---:|---:|")
med = lambda k: f"{statistics.median(t[k]):.1f}" if k in t else "-"
for s in sizes:
    print(f"| {s} | {med(('ccl', s))} | {med(('ompi', s))} |")
PY

#!/usr/bin/env bash
# Variants of ccl against Open MPI and MPICH in alternating launches, then each one's median per
# size: how the changes in docs/performance.md were judged. On a virtual machine the spread from
# one launch to the next (5-15%) is larger than most differences, so variants and peers take
# turns, round after round, and only medians over rounds are compared.
#   tools/hostrun/ab.sh N COLL SIZES ROUNDS VARIANT...
#   e.g. CARRY/ab.sh 4 sendrecv 4K,32K,256K 5 "" "--bind-to core" "CCL_CMA_MIN=64K"
# A variant is words: NAME=value goes into the environment, anything else to cclrun ("" is the
# defaults). SIZES as ccl_bench -s; the peers measure the sizes on the x8 ladder from the
# smallest, and the largest. Where pack.sh carried it (CARRY, beside bin/), it runs the carried
# binaries with env.sh; in a checkout, build/ and the peers of tools/compare_peers.sh.
# A virtual machine may move its cpus between placements (line_rtt, see compare_peers.sh): a
# cache line's round trip between the first two cpus is read before and after every launch, a
# launch whose readings differ by more than 1.5x is dropped, and where the kept launches' readings
# span more than 2x the medians are per placement: "near" below their geometric middle, "far"
# above (each with how many launches it had).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -d "$here/bin" ]; then
    # shellcheck source=tools/hostrun/env.sh
    source "$here/env.sh"  # sets B
else
    B=$here/../../build
fi
cd "$here/../.."
(($# >= 5)) || { sed -n '2,16p' "$0" >&2; exit 2; }
n=$1 coll=$2 sizes=$3 rounds=$4
shift 4
peers=()
for p in openmpi mpich; do
    launcher=mpirun.openmpi
    [ $p = mpich ] && launcher=mpiexec.mpich
    command -v $launcher >/dev/null && peers+=("$p")
done
if ((${#peers[@]})); then
    tools/compare_peers.sh --build-only --peers "${peers[*]}" >/dev/null 2>&1 ||
        { echo "ab.sh: building the peers failed (tools/compare_peers.sh --build-only)" >&2; exit 1; }
fi
ladder=$(tr , '\n' <<<"$sizes" | numfmt --from=iec | sort -n)
lo=$(head -1 <<<"$ladder")
hi=$(tail -1 <<<"$ladder")
rows=$(mktemp)
csv=$(mktemp)
trap 'rm -f "$rows" "$csv"' EXIT
line_rtt=$B/line_rtt
# shellcheck source=tools/line_rtt.sh
source tools/line_rtt.sh
# record NAME BEFORE: the CSV's sizes and times (us) into the rows with the launch's line_rtt
# (the mean of BEFORE and a reading now; 0 without line_rtt), and as one line on stdout. A launch
# that moved (readings 1.5x apart, or only one of them read) is shown but not kept.
record() {
    local line rtt after
    after=$(read_rtt)
    if [ "$2" = 0 ] && [ "$after" = 0 ]; then
        rtt=0
    elif steady 1.5 "$2" "$after"; then
        rtt=$((($2 + after) / 2))
    else
        rtt=moved
    fi
    line=$(tail -n +2 "$csv" | cut -d, -f3,9 | tr '\n' ' ')
    printf '%-34s %-8s %s\n' "$1" "$rtt" "${line:-(no result: the launch failed or timed out)}"
    [ "$rtt" = moved ] ||
        tail -n +2 "$csv" | awk -F, -v name="$1" -v rtt="$rtt" '{ print rtt "\t" name "\t" $3 "\t" $9 }' >>"$rows"
    : >"$csv"
}
for ((r = 1; r <= rounds; ++r)); do
    for v in "$@"; do
        envs=() opts=()
        for w in $v; do
            if [[ $w == *=* && $w != -* ]]; then envs+=("$w"); else opts+=("$w"); fi
        done
        # cclrun stops its ranks at --timeout; timeout(1) is its backstop, as in compare_peers.sh.
        before=$(read_rtt)
        timeout -k 10 125 env ${envs[@]+"${envs[@]}"} "$B/cclrun" ${opts[@]+"${opts[@]}"} \
            -n "$n" --timeout 120 "$B/ccl_bench" -c "$coll" -s "$sizes" -t 0.2 --csv "$csv" \
            >/dev/null 2>&1 || true
        record "ccl[$v]" "$before"
    done
    for p in "${peers[@]}"; do
        launch=(mpirun.openmpi --allow-run-as-root --oversubscribe -np "$n")
        [ "$p" = mpich ] && launch=(mpiexec.mpich -n "$n")
        before=$(read_rtt)
        timeout -k 10 120 "${launch[@]}" "build-peers/mpi_family_bench.$p" --only "$coll" --min "$lo" \
            --max "$hi" --factor 8 --with-max --target 0.2 --csv "$csv" >/dev/null 2>&1 || true
        record "$p" "$before"
    done
done
echo "-- medians over $rounds rounds (us), $n ranks, $coll (launches that moved dropped)"
# Label each row by placement (see the header), then medians per label, variant and size.
awk -F'\t' 'NR == FNR { if ($1 > 0) { lo = (lo == "" || $1 < lo) ? $1 : lo; hi = $1 > hi ? $1 : hi }; next }
    { where = "one"; if (lo != "" && hi > 2 * lo) where = $1 < sqrt(lo * hi) ? "near" : "far"
      print where "\t" $2 "\t" $3 "\t" $4 }' "$rows" "$rows" |
    sort -t$'\t' -k1,1r -k2,2 -k3,3n -k4,4g | awk -F'\t' '
    function flush() { if (k) printf "%-5s %-34s %10s %10.3f  (%d)\n", key0, key1, key2, (k % 2 ? t[(k + 1) / 2] : (t[k / 2] + t[k / 2 + 1]) / 2), k }
    { if ($1 != key0 || $2 != key1 || $3 != key2) { flush(); key0 = $1; key1 = $2; key2 = $3; k = 0 } t[++k] = $4 }
    END { flush() }'

#!/usr/bin/env bash
# Times ccl and the MPI peers (Open MPI, MPICH) in one run, collective by collective, and writes a
# markdown comparison: per collective and rank count, size | ccl us | Open MPI us | MPICH us |
# ccl/best, marking the sizes where ccl is slower than the best peer.
#
# The machines are noisy, so the three are run alternately: for each rank count and collective,
# every round runs ccl, Open MPI and MPICH back to back (the order rotates between rounds); with
# --repeat R the table shows the median over the R rounds. All CSVs and logs land in --out.
# A virtual machine's cpus may move under it between launches (build/line_rtt: on the 2-core VM a
# cache line's round trip went from 105 to 530 ns and back, and every small size with it), so a
# round counts only where that round trip stayed the same from its first launch to its last
# (--steady); else it is run again. Each round runs in two parts, each checked so, the sizes up to
# 32 KiB and the larger ones: the short launches of the small sizes need not outlast the long ones.
#
# Usage: tools/compare_peers.sh [options]        (tools/compare_peers.sh --help)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
all_colls="allreduce,broadcast,reduce,allgather,allgatherv,reduce_scatter,alltoall,alltoallv,barrier,sendrecv"

ranks="2 4"
colls=$all_colls
min_size=8
max_size=64M
factor=8
repeat=1
target=0.05       # seconds per size, MPI benchmarks
mpich_target=""   # default: --target
max_iters=20000   # most timed calls per size, MPI benchmarks
slow=0.5          # MPI benchmarks: a size whose first call took this long gets one timed call
run_timeout=300   # seconds per launch
peers="openmpi mpich"
out=""
ccl_bench=$repo/build/ccl_bench
cclrun=$repo/build/cclrun
ccl_args=""
steady=1.5        # a round's line_rtt readings may differ by this factor at most (0: no check)
retries=3         # a round's part is run again at most this often
use_ccl=1
build_only=0
peer_build=$repo/build-peers

usage() {
    cat <<EOF
usage: tools/compare_peers.sh [options]
  --ranks "2 4"        rank counts (space- or comma-separated; default "2 4")
  --colls LIST         collectives, comma-separated (default all:
                       $all_colls)
  --min SIZE           smallest size (default 8; K, M, G suffixes)
  --max SIZE           largest size (default 64M; always measured, even off the --factor ladder)
  --factor N           size multiplier (default 8)
  --repeat R           rounds; the tables show the median over them (default 1; 3 for docs)
  --target S           MPI benchmarks: seconds of timing per size (default 0.05)
  --mpich-target S     the same for MPICH only (default: --target)
  --max-iters N        MPI benchmarks: most timed calls per size (default 20000)
  --slow S             MPI benchmarks: a size whose first call took S seconds or more gets
                       one timed call and no calibration (default 0.5; bounds MPICH at 4 ranks)
  --timeout S          limit of one launch, seconds (default 300)
  --steady F           run a round's part again (up to $retries times) when line_rtt (beside
                       ccl_bench), read before each launch and after the last, varied by more
                       than a factor F: the machine moved its cpus (default 1.5; 0: no check)
  --peers "openmpi mpich"   which peers to run
  --ccl-bench PATH     ccl_bench (default build/ccl_bench)
  --cclrun PATH        launcher of ccl_bench (default build/cclrun)
  --ccl-args "ARGS"    extra arguments for ccl_bench
  --no-ccl             run the peers only
  --out DIR            output folder (default build-peers/compare-DATE)
  --build-only         build the MPI benchmarks into build-peers/ and stop
  -h, --help
The summary goes to stdout and to OUT/summary.md; progress goes to stderr.
EOF
}

die() {
    echo "compare_peers: $*" >&2
    exit 2
}

need_value() { [ $# -ge 2 ] || die "option $1 needs a value"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --ranks) need_value "$@"; ranks=${2//,/ }; shift 2 ;;
        --colls) need_value "$@"; colls=$2; shift 2 ;;
        --min) need_value "$@"; min_size=$2; shift 2 ;;
        --max) need_value "$@"; max_size=$2; shift 2 ;;
        --factor) need_value "$@"; factor=$2; shift 2 ;;
        --repeat) need_value "$@"; repeat=$2; shift 2 ;;
        --target) need_value "$@"; target=$2; shift 2 ;;
        --mpich-target) need_value "$@"; mpich_target=$2; shift 2 ;;
        --max-iters) need_value "$@"; max_iters=$2; shift 2 ;;
        --slow) need_value "$@"; slow=$2; shift 2 ;;
        --timeout) need_value "$@"; run_timeout=$2; shift 2 ;;
        --steady) need_value "$@"; steady=$2; shift 2 ;;
        --peers) need_value "$@"; peers=${2//,/ }; shift 2 ;;
        --ccl-bench) need_value "$@"; ccl_bench=$2; shift 2 ;;
        --cclrun) need_value "$@"; cclrun=$2; shift 2 ;;
        --ccl-args) need_value "$@"; ccl_args=$2; shift 2 ;;
        --no-ccl) use_ccl=0; shift ;;
        --out) need_value "$@"; out=$2; shift 2 ;;
        --build-only) build_only=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown option '$1'" ;;
    esac
done

# ------------------------------------------------------------------------------------ checks
[ "$colls" = all ] && colls=$all_colls
to_bytes() {  # 8, 64K, 16M, 1G -> bytes
    local s=$1 n unit
    [[ $s =~ ^([0-9]+)([KMG]?)B?$ ]] || die "bad size '$s' (examples: 8, 64K, 16M)"
    n=${BASH_REMATCH[1]}
    unit=${BASH_REMATCH[2]}
    case $unit in K) n=$((n << 10)) ;; M) n=$((n << 20)) ;; G) n=$((n << 30)) ;; esac
    echo "$n"
}
uint_at_least() { [[ $1 =~ ^[0-9]{1,12}$ ]] && (($1 >= $2)); }
is_num() { [[ $1 =~ ^[0-9]*\.?[0-9]+$ ]]; }
min_b=$(to_bytes "$min_size")
max_b=$(to_bytes "$max_size")
((min_b >= 1)) || die "--min must be at least 1"
((min_b <= max_b)) || die "--min is larger than --max"
uint_at_least "$factor" 2 || die "--factor must be an integer >= 2"
uint_at_least "$repeat" 1 || die "--repeat must be an integer >= 1"
uint_at_least "$max_iters" 3 || die "--max-iters must be an integer >= 3"
uint_at_least "$run_timeout" 1 || die "--timeout must be whole seconds"
is_num "$target" || die "bad --target '$target'"
is_num "$slow" || die "bad --slow '$slow'"
is_num "$steady" || die "bad --steady '$steady'"
mpich_target=${mpich_target:-$target}
is_num "$mpich_target" || die "bad --mpich-target '$mpich_target'"
for n in $ranks; do uint_at_least "$n" 1 || die "bad rank count '$n'"; done
[ -n "${ranks// /}" ] || die "--ranks is empty"
IFS=, read -r -a coll_list <<<"$colls"
for c in "${coll_list[@]}"; do
    [[ ",$all_colls," == *",$c,"* ]] || die "unknown collective '$c' (known: $all_colls)"
done
for p in $peers; do
    [ "$p" = openmpi ] || [ "$p" = mpich ] || die "unknown peer '$p' (openmpi, mpich)"
done
command -v timeout >/dev/null || die "needs timeout (coreutils)"
command -v python3 >/dev/null || die "needs python3 (tools/compare_table.py makes the tables)"

# The size ladder min, min*factor, ... <= max; max is added when the ladder misses it, so that both
# ends are always measured: the MPI benchmarks do it in the same launch (--with-max), ccl_bench in a
# second launch (-b MAX -e MAX).
ladder=()
for ((s = min_b; s <= max_b; s *= factor)); do
    ladder+=("$s")
    if ((s > max_b / factor)); then break; fi  # the next size would pass max (or overflow)
done
extra_max=0
[ "${ladder[-1]}" = "$max_b" ] || { extra_max=1; ladder+=("$max_b"); }
# The two parts of every round: sizes up to 32 KiB, and the rest (tag -large).
small_end=0 large_begin=0
for s in "${ladder[@]}"; do
    if ((s <= 32768)); then small_end=$s; elif ((!large_begin)); then large_begin=$s; fi
done
# sizes_between LO HI: the ladder's sizes from LO to HI, comma-separated.
sizes_between() {
    local s list=()
    for s in "${ladder[@]}"; do ((s >= $1 && s <= $2)) && list+=("$s"); done
    (IFS=,; echo "${list[*]}")
}

# --------------------------------------------------------------------------------- the builds
peer_src=$repo/bench/peers/mpi_family_bench.cpp
declare -A launch_of=([openmpi]="mpirun.openmpi" [mpich]="mpiexec.mpich")
build_peer() {  # build-peers/mpi_family_bench.MPI, rebuilt when the source is newer
    local mpi=$1 bin=$peer_build/mpi_family_bench.$1
    if [ -x "$bin" ] && [ "$bin" -nt "$peer_src" ]; then return 0; fi
    { command -v "mpicxx.$mpi" && command -v "${launch_of[$mpi]}"; } >/dev/null ||
        die "mpicxx.$mpi / ${launch_of[$mpi]} not found: run ../shared/peers/setup.sh" \
            "(it installs Open MPI and MPICH from Debian)"
    mkdir -p "$peer_build"
    echo "compare_peers: building $bin" >&2
    "mpicxx.$mpi" -O3 -march=native -std=c++20 -Wall -Wextra -o "$bin.tmp" "$peer_src" ||
        die "building $bin failed"
    mv "$bin.tmp" "$bin"
}
for p in $peers; do build_peer "$p"; done
if ((build_only)); then
    for p in $peers; do echo "compare_peers: ready: $peer_build/mpi_family_bench.$p" >&2; done
    exit 0
fi
if ((use_ccl)); then
    if [ ! -x "$ccl_bench" ] || [ ! -x "$cclrun" ]; then
        echo "compare_peers: WARNING: $ccl_bench or $cclrun missing (build ccl first:" \
            "cmake -S . -B build -G Ninja && cmake --build build); running the peers only" >&2
        use_ccl=0
    fi
fi
# What this ccl_bench understands: --csv is needed; --sizes (one launch for the whole ladder, max
# included) and --time (the same time per size as the MPI benchmarks) are used when there.
ccl_sizes=0
ccl_time=0
if ((use_ccl)); then
    ccl_help=$(timeout 20 "$ccl_bench" --help 2>&1 || true)
    grep -q -- "--csv" <<<"$ccl_help" ||
        echo "compare_peers: WARNING: $ccl_bench --help mentions no --csv; its runs will" \
            "probably fail (an old ccl_bench? rebuild ccl)" >&2
    if grep -qE -- '--sizes( |=|,|$)' <<<"$ccl_help"; then ccl_sizes=1; fi
    if grep -qE -- '--time( |=|,|$)' <<<"$ccl_help"; then ccl_time=1; fi
fi
impls=()
((use_ccl)) && impls+=(ccl)
for p in $peers; do impls+=("$p"); done
((${#impls[@]})) || die "nothing to run (--no-ccl and no --peers)"

out=${out:-$peer_build/compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/raw" || die "cannot create $out"
out=$(cd "$out" && pwd)
# A reused folder must not mix in CSVs of an earlier run.
rm -f "$out"/raw/*.csv "$out"/raw/*.log "$out/failures.tsv" "$out/rtt.tsv"
: >"$out/failures.tsv"

# The placement check (--steady; tools/line_rtt.sh).
line_rtt=$(dirname "$ccl_bench")/line_rtt  # built beside ccl_bench
# shellcheck source=tools/line_rtt.sh
source "$repo/tools/line_rtt.sh"
if [ "$steady" != 0 ] && [ "$(read_rtt)" = 0 ]; then
    echo "compare_peers: WARNING: $line_rtt does not run (not built, or fewer than two cpus):" \
        "rounds are not checked for a change of placement" >&2
    steady=0
fi

# ---------------------------------------------------------------------------------- the runs
# run_one IMPL N COLL ROUND MIN MAX TAG: one launch; its CSV and log go to OUT/raw.
run_one() {
    local impl=$1 n=$2 coll=$3 round=$4 lo=$5 hi=$6 tag=$7
    local base=$out/raw/$impl-n$n-$coll-r$round$tag
    local -a cmd
    case $impl in
        ccl)
            cmd=("$cclrun" -n "$n" --timeout "$run_timeout" "$ccl_bench" -c "$coll")
            if ((ccl_sizes)) && [ "$tag" != -max ]; then
                cmd+=(-s "$(sizes_between "$lo" "$hi")")
            else
                cmd+=(-b "$lo" -e "$hi" -f "$factor")
            fi
            if ((ccl_time)); then cmd+=(-t "$target"); fi
            # shellcheck disable=SC2206  # --ccl-args is split into words on purpose
            cmd+=(--csv "$base.csv" $ccl_args) ;;
        openmpi)
            cmd=(mpirun.openmpi --allow-run-as-root --oversubscribe -np "$n"
                "$peer_build/mpi_family_bench.openmpi" --only "$coll" --min "$lo" --max "$hi"
                --factor "$factor" --with-max --target "$target" --max-iters "$max_iters"
                --slow "$slow" --csv "$base.csv") ;;
        mpich)
            cmd=(mpiexec.mpich -n "$n"
                "$peer_build/mpi_family_bench.mpich" --only "$coll" --min "$lo" --max "$hi"
                --factor "$factor" --with-max --target "$mpich_target" --max-iters "$max_iters"
                --slow "$slow" --csv "$base.csv") ;;
    esac
    echo "\$ ${cmd[*]}" >"$base.log"
    # cclrun stops its ranks itself at --timeout; timeout(1) is its backstop and the MPIs' limit.
    local t0=$SECONDS rc=0 limit=$run_timeout
    [ "$impl" = ccl ] && limit=$((run_timeout + 5))
    timeout -k 10 "$limit" "${cmd[@]}" >>"$base.log" 2>&1 </dev/null || rc=$?
    if ((rc != 0)); then
        local why="exit status $rc"
        ((rc == 124 || rc == 137)) && why="timed out after ${run_timeout}s"
        # impl, ranks, collective, round, why, log: read by compare_table.py
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$impl" "$n" "$coll" "$round" "$why" "$base.log" \
            >>"$out/failures.tsv"
        printf ' %s%s FAILED (%s)' "$impl" "$tag" "$why" >&2
    else
        printf ' %s%s %ds' "$impl" "$tag" "$((SECONDS - t0))" >&2
    fi
    return 0
}

start=$SECONDS
load_start=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load_start" -v c="$(nproc)" 'BEGIN { exit !(l > c / 2) }'; then
    echo "compare_peers: WARNING: load average $load_start on $(nproc) cores: other work is" \
        "running, the times will be noisy (MPICH busy-polls and suffers most)" >&2
fi
echo "compare_peers: ${impls[*]} at ranks $ranks, ${#coll_list[@]} collectives," \
    "sizes $min_b..$max_b x$factor, $repeat round(s); output $out" >&2
for n in $ranks; do
    for coll in "${coll_list[@]}"; do
        for ((r = 1; r <= repeat; ++r)); do
            parts=()
            ((small_end)) && parts+=("$min_b $small_end")
            ((large_begin)) && parts+=("$large_begin $max_b -large")
            [ "$coll" = barrier ] && parts=("$min_b $min_b")
            for part in "${parts[@]}"; do
                read -r lo hi tag <<<"$part"
                failed_before=$(wc -l <"$out/failures.tsv")
                for ((try = 0; ; ++try)); do
                    printf '[n=%s %s round %d, %s..%s%s]' "$n" "$coll" "$r" "$lo" "$hi" \
                        "$( ((try)) && echo ", again")" >&2
                    # Rotate the order between rounds: no implementation always runs first.
                    k=${#impls[@]}
                    rtt=()
                    for ((i = 0; i < k; ++i)); do
                        impl=${impls[$(((i + r - 1) % k))]}
                        [ "$steady" = 0 ] || rtt+=("$(read_rtt)")
                        run_one "$impl" "$n" "$coll" "$r" "$lo" "$hi" "$tag"
                        if ((extra_max)) && [ "$hi" = "$max_b" ] && [ "$impl" = ccl ] &&
                            ((!ccl_sizes)); then
                            run_one "$impl" "$n" "$coll" "$r" "$max_b" "$max_b" "-max"
                        fi
                    done
                    [ "$steady" = 0 ] && { echo >&2; break; }
                    rtt+=("$(read_rtt)")
                    verdict=steady
                    steady "$steady" "${rtt[@]}" || verdict=moved
                    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$coll" "$r" "$try" "${rtt[*]}" \
                        "$verdict" "$lo..$hi" >>"$out/rtt.tsv"
                    printf ' line_rtt %s ns' "${rtt[*]}" >&2
                    if [ $verdict = steady ] || ((try >= retries)); then echo >&2; break; fi
                    echo ": moved" >&2
                    # The failures of a round run again are those of its last try.
                    head -n "$failed_before" "$out/failures.tsv" >"$out/failures.tmp"
                    mv "$out/failures.tmp" "$out/failures.tsv"
                done
            done
        done
    done
done
echo "compare_peers: runs took $((SECONDS - start)) s" >&2

# -------------------------------------------------------------------------------- the tables
ccl_opts="--no-ccl"
if ((use_ccl)); then
    ccl_opts="--ccl-bench $ccl_bench"
    [ -n "$ccl_args" ] && ccl_opts+=" --ccl-args \"$ccl_args\""
fi
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
    echo "command: tools/compare_peers.sh --ranks \"$ranks\" --colls $colls --min $min_b" \
        "--max $max_b --factor $factor --repeat $repeat --target $target" \
        "--mpich-target $mpich_target --max-iters $max_iters --slow $slow $ccl_opts"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "machine: $cpu, $(nproc) cores"
    echo "runs took: $((SECONDS - start)) s; load average at the start $load_start," \
        "at the end $(cut -d' ' -f1 /proc/loadavg)"
    if [ -s "$out/rtt.tsv" ]; then
        awk -F'\t' -v retries="$retries" '{ n = split($5, v, " "); for (i = 1; i <= n; ++i) {
                if (lo == "" || v[i] + 0 < lo) lo = v[i] + 0; if (v[i] + 0 > hi) hi = v[i] + 0 } }
            $4 > 0 { again++ } $6 == "moved" && $4 == retries { kept++ }
            END { printf "placement: line_rtt %d-%d ns; parts run again: %d", lo, hi, again;
                  if (kept) printf " (%d still moved after %d tries, kept)", kept, retries + 1
                  print "" }' "$out/rtt.tsv"
    fi
} >"$out/meta.txt"
ladder_csv=$(IFS=,; echo "${ladder[*]}")
python3 "$repo/tools/compare_table.py" --raw "$out/raw" --ranks "${ranks// /,}" \
    --colls "$colls" --impls "$(IFS=,; echo "${impls[*]}")" --sizes "$ladder_csv" \
    --meta "$out/meta.txt" --failures "$out/failures.tsv" --medians "$out/medians.csv" \
    >"$out/summary.md"
cat "$out/summary.md"
echo "compare_peers: summary in $out/summary.md, medians in $out/medians.csv" >&2
if [ -s "$out/failures.tsv" ]; then
    echo "compare_peers: $(wc -l <"$out/failures.tsv") launch(es) failed, see $out/failures.tsv" >&2
fi

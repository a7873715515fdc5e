# shellcheck shell=bash
# Sourced by tools/compare_peers.sh and tools/hostrun/ab.sh: the placement check. A virtual
# machine may move its cpus between placements (build/line_rtt: a cache line's round trip between
# the first two cpus, ns; on the 2-core VM 105 or 530), and every small size moves with it, so
# launches count only where the readings around them agree. The sourcing script sets line_rtt to
# the binary's path.

# read_rtt: one reading, or 0 where line_rtt fails or hangs (two threads that never meet spin
# until the timeout).
# shellcheck disable=SC2154  # line_rtt: set by the sourcing script
read_rtt() { timeout 10 "$line_rtt" 2>/dev/null || echo 0; }

# steady FACTOR READING...: whether the readings (all read) differ by FACTOR at most.
steady() {
    local f=$1
    shift
    printf '%s\n' "$@" | awk -v f="$f" 'NR == 1 || $1 < lo { lo = $1 } $1 > hi { hi = $1 }
        END { exit !(lo > 0 && hi <= f * lo) }'
}

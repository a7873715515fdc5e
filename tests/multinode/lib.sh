# shellcheck shell=bash
# Shared by the multinode test scripts (sourced). Tests exit 77 (ctest: skipped) when this machine
# cannot make namespaces, 0 when every check passed, 1 otherwise.

passed=0
failed=0
t0=$(date +%s.%N)
ok() {
    passed=$((passed + 1))
    echo "ok   $1 [$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s]"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL $1"
    shift
    local l
    for l in "$@"; do echo "     $l"; done
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
skip() {
    echo "SKIP: $*"
    exit 77
}

# Skips unless fake nodes can be made here: root, iproute2, util-linux, namespaces.
require_namespaces() {
    [ "$(id -u)" -eq 0 ] || skip "needs root to make network, mount and UTS namespaces"
    local t
    for t in ip unshare nsenter setsid pgrep; do
        command -v "$t" >/dev/null || skip "needs '$t' (Debian packages iproute2, util-linux, procps)"
    done
    unshare --net --mount --uts --propagation private \
        sh -c 'mount -t tmpfs fakenodes-probe /dev/shm && hostname fakenodes-probe' 2>/dev/null ||
        skip "cannot create namespaces here (unshare --net --mount --uts, a tmpfs on /dev/shm, a hostname: a container without CAP_SYS_ADMIN?)"
    unshare --net sh -c 'ip link add name a type veth peer name b && ip link add name br type bridge' \
        2>/dev/null || skip "cannot create veth pairs and bridges (kernel modules veth, bridge?)"
}

# fakenodes_scratch FAKENODES: a scratch folder $TMP with a fakenodes state folder of its own
# (other runs on this machine are not ours to see or remove); on exit, the job $job_pid (when
# set) is killed, every node taken down and $TMP removed.
fakenodes_scratch() {
    FN=$1
    TMP=$(mktemp -d)
    export FAKENODES_STATE=$TMP/state
    trap '[ -n "${job_pid:-}" ] && kill -KILL "$job_pid" 2>/dev/null; "$FN" down --all >/dev/null 2>&1; rm -rf "$TMP"' EXIT
}

now() { date +%s.%N; }
# elapsed START: seconds since START, as a decimal.
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# less_than LIMIT VALUE
less_than() { awk -v lim="$1" -v v="$2" 'BEGIN { exit !(v < lim) }'; }

# wait_for SECONDS 'CONDITION': evaluates the shell CONDITION every 0.1 s until it holds; false
# after SECONDS.
wait_for() {
    local limit=$1 i
    for ((i = 0; i < limit * 10; i++)); do
        eval "$2" && return 0
        sleep 0.1
    done
    return 1
}

# alive PID...: prints the pids still running (zombies count as gone).
alive() {
    local p st
    for p in "$@"; do
        st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) || continue
        [ -n "$st" ] && [ "$st" != Z ] && echo "$p"
    done
    return 0
}

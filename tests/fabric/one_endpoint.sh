#!/usr/bin/env bash
# Every communicator of a process shares its endpoint, over either transport: test_split across 2
# fake nodes x 2 ranks (as_node.sh) makes some forty sub-communicators per rank while the world
# lives, and each rank's debug log must say it opened its endpoint exactly once (with an endpoint
# per communicator it said so for every one).
# Usage: one_endpoint.sh CCLRUN AS_NODE TEST_SPLIT
set -u
cclrun=$1 as_node=$2 prog=$3
failed=0
for transport in ofi socket; do
    case $transport in
    ofi) opened="libfabric endpoint open" ;;
    socket) opened="socket transport: listening on" ;;
    esac
    out=$(CCL_TRANSPORT=$transport FI_PROVIDER=tcp CCL_LOG_LEVEL=debug "$cclrun" -n 4 -l -- \
        "$as_node" 2 "$prog" --gtest_brief=1 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL: test_split across fake nodes over $transport exited $rc"
        echo "$out" | tail -30
        failed=1
        continue
    fi
    for r in 0 1 2 3; do
        n=$(echo "$out" | grep -c "^\[$r\] .*$opened")
        splits=$(echo "$out" | grep -c "^\[$r\] .*communicator ready")
        if [ "$n" -ne 1 ] || [ "$splits" -lt 10 ]; then
            echo "FAIL: rank $r opened $n $transport endpoint(s) for $splits communicators (expected 1)"
            failed=1
        else
            echo "ok   $transport rank $r: 1 endpoint for $splits communicators"
        fi
    done
done
exit $failed

#!/usr/bin/env bash
# Every communicator of a process shares its libfabric endpoint: test_split across 2 fake nodes x
# 2 ranks (as_node.sh) makes some forty sub-communicators per rank while the world lives, and each
# rank's debug log must say "libfabric endpoint open" exactly once (with an endpoint per
# communicator it said so for every one).
# Usage: one_endpoint.sh CCLRUN AS_NODE TEST_SPLIT
set -u
cclrun=$1 as_node=$2 prog=$3
out=$(FI_PROVIDER=tcp CCL_LOG_LEVEL=debug "$cclrun" -n 4 -l -- "$as_node" 2 "$prog" --gtest_brief=1 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
    echo "FAIL: test_split across fake nodes exited $rc"
    echo "$out" | tail -30
    exit 1
fi
failed=0
for r in 0 1 2 3; do
    n=$(echo "$out" | grep -c "^\[$r\] .*libfabric endpoint open")
    splits=$(echo "$out" | grep -c "^\[$r\] .*communicator ready")
    if [ "$n" -ne 1 ] || [ "$splits" -lt 10 ]; then
        echo "FAIL: rank $r opened $n libfabric endpoint(s) for $splits communicators (expected 1)"
        failed=1
    else
        echo "ok   rank $r: 1 endpoint for $splits communicators"
    fi
done
exit $failed

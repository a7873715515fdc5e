#!/usr/bin/env bash
# Runs a program as K nodes x M ranks on fake nodes: tools/fakenodes makes K nodes, cclrun starts
# on node0 (where it serves the KVS) and starts M ranks on each node, labelled. Exits with
# cclrun's status, 77 when fake nodes cannot be made here.
# Usage: on_fakenodes.sh K M path/to/cclrun [cclrun options] -- prog [args...]
#   e.g. tests/multinode/on_fakenodes.sh 2 2 build/cclrun -- build/test_family --gtest_brief=1
set -euo pipefail
K=${1:?usage: $0 K M cclrun [options] -- prog [args...]}
M=${2:?} CCLRUN=${3:?}
shift 3
here=$(dirname "$0")
FN=$(readlink -f "$here/../../tools/fakenodes")
# shellcheck source=tests/multinode/lib.sh
. "$here/lib.sh"
require_namespaces
hosts=$(seq -s, -f 'node%g' 0 $((K - 1)))
exec "$FN" run "$K" --on node0 -- "$CCLRUN" --hosts "$hosts" --ppn "$M" \
    --launcher-cmd "$FN exec {host} --" -l "$@"

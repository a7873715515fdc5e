#!/usr/bin/env bash
# Every function of libccl's AVX2 and AVX-512 reduction kernels that touches a ymm or zmm register
# clears their upper halves (vzeroupper) on its way out. One that returns with them dirty makes
# every later SSE instruction of the process slow on Intel cpus (the caller's memcpy, the next
# call's flags): a small reduce took 0.42-0.56 us instead of 0.21 on the 16-core host's Xeon when a
# helper taking a vector argument was not inlined. Counted per function: at least as many
# vzeroupper as ret.
set -euo pipefail
lib=$1
command -v objdump >/dev/null || { echo "objdump not found"; exit 1; }
dis=$(objdump -d --no-show-raw-insn -C "$lib")
rc=0
report=$(awk '
    /^[0-9a-f]+ <.*>:$/ {
        f = ""
        if ($0 ~ /ccl::kernels_avx(2|512)::/) { f = $0; n++ }
        next
    }
    f == "" { next }
    /%[yz]mm/ && !(f in wide) { wide[f] = 1; nwide++ }
    /\tvzeroupper/ { vz[f]++ }
    /\tret/ { ret[f]++ }
    END {
        for (k in ret)
            if ((k in wide) && ret[k] > vz[k]) { print "returns with dirty upper halves: " k; bad++ }
        printf "%d kernel functions, %d with wide registers checked\n", n, nwide
        if (n == 0) { print "no kernel functions found (renamed?)"; exit 1 }
        exit bad > 0
    }' <<<"$dis") || rc=$?
echo "$report"
exit $rc

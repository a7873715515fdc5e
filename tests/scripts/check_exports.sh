#!/usr/bin/env bash
# libccl.so exports only ccl_* functions, and has a SONAME.
set -euo pipefail
lib=$1
bad=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^ccl_' || true)
if [ -n "$bad" ]; then
  echo "libccl exports symbols outside ccl_*:"; echo "$bad"; exit 1
fi
nonfunc=$(nm -D --defined-only "$lib" | awk '$2 != "T" {print}' || true)
if [ -n "$nonfunc" ]; then
  echo "libccl exports non-function symbols:"; echo "$nonfunc"; exit 1
fi
headers=$(objdump -p "$lib")  # not piped into grep -q: SIGPIPE would fail the pipeline
grep -q "SONAME *libccl\.so\.0" <<<"$headers" || { echo "no SONAME libccl.so.0"; exit 1; }
echo "exports: $(nm -D --defined-only "$lib" | wc -l) ccl_* functions, SONAME ok"

#!/usr/bin/env bash
# The README's main-job command and its PyTorch lines run as written, from a folder whose build/
# is this build: the main job's run (what follows its build steps, which CI's own configure and
# build stand in for) must print ccl_bench's table with no wrong values; each PyTorch line must
# run a train.py that calls dist.init_process_group("ccl") and checks an all_reduce.
# Args: README build-dir [python]   (python: the one the torch backend was built for; none: skip it)
set -euo pipefail
readme=$(realpath "$1") build=$(realpath "$2") python=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
cd "$work"
failed=0
run() { # label command...
    local label=$1; shift
    if out=$(CCL_TIMEOUT=60 timeout 240 env "$@" 2>&1 </dev/null); then echo "ok: $label"; else
        echo "FAIL: $label"; echo "$out" | tail -8; failed=1; fi
}

# The set-up section's first command; its last step is the run.
main=$(awk '/^Build and run the main job/ {on=1; next} on && /^    / {print substr($0, 5); exit}' "$readme")
job=${main##*&& }
[[ $job == build/cclrun* ]] || { echo "FAIL: the main command's last step is not a cclrun line: $main"; exit 1; }
# shellcheck disable=SC2086  # the line's words
run "$job" $job
grep -q '^# wrong values: 0 (OK)' <<<"$out" && grep -q '^# Avg bus bandwidth' <<<"$out" \
    || { echo "FAIL: $job: no clean table"; echo "$out" | tail -5; failed=1; }

if [[ -n $python && $python != none ]]; then
    cat > train.py <<'PY'
import os
import torch
import torch.distributed as dist
import ccl_torch  # noqa: F401  (registers "ccl")

dist.init_process_group("ccl")
rank, size = dist.get_rank(), dist.get_world_size()
assert size == int(os.environ["WORLD_SIZE"]), (size, os.environ["WORLD_SIZE"])
x = torch.full((1000,), float(rank + 1))
dist.all_reduce(x)
assert torch.equal(x, torch.full((1000,), size * (size + 1) / 2)), x[:4]
print(f"rank {rank}/{size}: all_reduce ok", flush=True)
dist.destroy_process_group()
PY
    # torch 1.13's torchrun on Python 3.11 needs the README's footnote (docs/torch.md).
    workaround=$("$python" -c 'import sys, torch; print(int(torch.__version__.split(".")[0]) < 2 and sys.version_info >= (3, 11))')
    while IFS= read -r line; do
        label=${line%%#*} label=${label%"${label##*[! ]}"}
        cmd=$label
        # `python3` in the docs is the one with torch (docs/torch.md); torchrun is that python's.
        cmd=${cmd//python3/$python}
        cmd=${cmd/torchrun /$python -m torch.distributed.run $([[ $workaround == True ]] && echo --redirects 2 --tee 2) }
        # shellcheck disable=SC2086  # the line's words
        run "$label" $cmd
        [[ $(grep -o 'all_reduce ok' <<<"$out" | wc -l) == 4 ]] || { echo "FAIL: $label: not 4 ranks ok"; echo "$out" | tail -5; failed=1; }
    done < <(awk '/^## PyTorch/ {on=1; next} on && /^    / {print substr($0, 5); next} on && /^\(/ {exit}' "$readme")
fi
exit $failed

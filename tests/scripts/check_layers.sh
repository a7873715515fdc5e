#!/usr/bin/env bash
# Fails when an include runs up a floor or sideways (docs/architecture.md), or the README's layout
# table misses a directory of src/ or tests/. The floors:
#   base                  -> system, ccl/ccl.h, base
#   shm, transport, kvs   -> base and itself, never each other
#   core                  -> base, shm, transport, kvs, core
#   bindings, tools       -> anything below
# Usage: check_layers.sh SOURCE_DIR
set -euo pipefail
root=${1:-$(dirname "$0")/../..}
cd "$root"

allowed() { # floor -> the project prefixes its files may include
    case $1 in
    base) echo "ccl base" ;;
    shm | transport | kvs) echo "ccl base $1" ;;
    core) echo "ccl base shm transport kvs core" ;;
    esac
}

bad=0
for floor in base shm transport kvs core; do
    ok=" $(allowed $floor) "
    # Every quoted or angled include with a directory: "dir/file.h" or <dir/file.h>.
    while IFS=: read -r file line text; do
        dir=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^/">]+)\/.*/\1/' <<<"$text")
        [ -d "src/$dir" ] || [ "$dir" = ccl ] || continue # a system header such as <sys/mman.h>
        if [[ $ok != *" $dir "* ]]; then
            echo "$file:$line: src/$floor may not include $dir/ ($text)"
            bad=1
        fi
    done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<][^/">]+/' "src/$floor" || true)
done
# Only the real floors exist under src/: a new directory must be placed in this table first.
for d in src/*/; do
    d=$(basename "$d")
    [ -n "$(allowed "$d")" ] || { echo "src/$d: not a known floor (add it to $0)"; bad=1; }
done
# The README's layout table names every floor's directory, and every top directory of tests/.
for d in src/*/ tests/*/; do
    grep -qF "\`${d%/}/\`" README.md || grep -qF "\`$(basename "$d")/\`" README.md ||
        { echo "README.md: the layout table does not name ${d%/}/"; bad=1; }
done
[ $bad -eq 0 ] && echo "layers: every include stays on its floor or goes down"
exit $bad

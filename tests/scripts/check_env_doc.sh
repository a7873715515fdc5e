#!/usr/bin/env bash
# docs/env.md against the table of knobs (src/base/config.cpp), which `ccl_info --markdown` prints a
# row of each: fails on a knob without its row in env.md, a row that differs from the table's (its
# default, values or text), a CCL_* row that is no knob, a row twice, a "More" link to no section
# of docs/tuning.md, and a CCL_* variable that the sources read but the table lacks.
# Usage: check_env_doc.sh CCL_INFO SOURCE_DIR
set -euo pipefail
info=$1
root=$2
env_md=$root/docs/env.md
tuning=$root/docs/tuning.md
bad=0
fail() {
    echo "FAIL $1"
    bad=1
}
name_of() { sed -E 's/^\| `([A-Z0-9_]+)`.*/\1/'; }

table=$("$info" --markdown)
doc=$(grep -E '^\| `CCL_' "$env_md" || true)
while IFS= read -r row; do
    [ -n "$row" ] || continue
    name=$(name_of <<<"$row")
    if ! grep -qxF -- "$row" <<<"$doc"; then
        if grep -qE "^\| \`$name\`" <<<"$doc"; then
            fail "docs/env.md's row of $name differs from the table's; the table's is:"
        else
            fail "docs/env.md has no row of $name; the table's is:"
        fi
        echo "     $row"
    fi
done <<<"$table"
while IFS= read -r row; do
    [ -n "$row" ] || continue
    name=$(name_of <<<"$row")
    grep -qE "^\| \`$name\`" <<<"$table" ||
        fail "docs/env.md has a row of $name, which is no knob (src/base/config.cpp)"
done <<<"$doc"
for name in $(name_of <<<"$doc" | sort | uniq -d); do
    fail "docs/env.md has more than one row of $name"
done
# Each "More" link (env.md's rows, libfabric's too) names a section of tuning.md.
for anchor in $(grep -oE 'tuning\.md#[a-z0-9_]+' "$env_md" | sed 's/.*#//' | sort -u); do
    grep -qix "## $anchor" "$tuning" || fail "docs/env.md links tuning.md#$anchor: no such section"
done
# The variables the library, its tools and builds read by name: getenv("CCL_X") and the like in
# C++ (string literals naming one variable), os.environ in Python, ${CCL_X} in scripts.
read_vars=$(
    cd "$root"
    {
        grep -rhoE '"CCL_[A-Z0-9_]+"' src bindings tools bench --include='*.cpp' --include='*.h' \
            --exclude=config.cpp |
            tr -d '"'
        grep -rhoE 'environ(\.get\(|\[)"CCL_[A-Z0-9_]+"' bindings tools bench --include='*.py' |
            grep -oE 'CCL_[A-Z0-9_]+'
        grep -rhoE '\$\{?CCL_[A-Z0-9_]+' tools --include='*.sh' | grep -oE 'CCL_[A-Z0-9_]+'
    } | sort -u
)
for name in $read_vars; do
    grep -qE "^\| \`$name\`" <<<"$table" ||
        fail "$name is read (grep -rn '$name' src bindings tools bench) but is no knob"
done
if [ $bad -eq 0 ]; then
    echo "env_doc: docs/env.md has the row of each of the $(wc -l <<<"$table") knobs, as the table"
else
    echo "(ccl_info --markdown prints the table's rows; the table is kKnobs in src/base/config.cpp)"
fi
exit $bad

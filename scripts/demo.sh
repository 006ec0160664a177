#!/usr/bin/env bash
# First contact with memtrail: installs what is missing (scripts/deps.sh),
# builds (make), runs a real program under memtrail's summary mode and prints
# the report it wrote, then again in detail mode and prints its top
# allocation sites, symbolized. The program is SQLite on the shared benchmark workload
# (~1.9 M allocations) when sqlite3 and the workload are there, else CPython,
# else `ls -R /usr/include`.
# Usage: scripts/demo.sh   (MT_SHARED overrides ROOT/../shared, BUILD build/)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SHARED=${MT_SHARED:-$ROOT/../shared}
WORKLOAD=$SHARED/bench/workload.sql

step() { printf '\n==> %s\n' "$*"; }

step "checking build dependencies (scripts/deps.sh)"
bash scripts/deps.sh

step "building (make)"
make BUILD="$BUILD"

if command -v sqlite3 >/dev/null 2>&1 && [ -f "$WORKLOAD" ]; then
    WORKLOAD=$(cd "$(dirname "$WORKLOAD")" && pwd)/workload.sql
    # sqlite3 splits a dot-command's argument on blanks: quote only if needed.
    if [[ $WORKLOAD =~ [[:space:]] ]]; then WORKLOAD="'$WORKLOAD'"; fi
    prog=(sqlite3 :memory: ".read $WORKLOAD")
elif command -v python3 >/dev/null 2>&1; then
    prog=(python3 -c 'd = {i: str(i) * 8 for i in range(200000)}; print(len(d))')
else
    prog=(ls -R /usr/include)
fi

rm -f "$BUILD"/demo.*.mtr
shown=""
for a in "${prog[@]}"; do
    if [[ $a =~ [^[:alnum:]_./:%=-] ]]; then shown+=" \"$a\""; else shown+=" $a"; fi
done
step "running: $BUILD/bin/memtrail run -o $BUILD/demo.%p.mtr --$shown"
# The program's own output is not the point; memtrail's line on stderr is.
"$BUILD/bin/memtrail" run -o "$BUILD/demo.%p.mtr" -- "${prog[@]}" >/dev/null

# newest PREFIX: the newest PREFIX.*.mtr (a program that forks leaves one
# per process); exits when there is none.
newest() {
    local f found=""
    for f in "$1".*.mtr; do
        [ -e "$f" ] || continue
        if [ -z "$found" ] || [ "$f" -nt "$found" ]; then found=$f; fi
    done
    if [ -z "$found" ]; then
        echo "demo.sh: memtrail wrote no report (expected $1.PID.mtr)" >&2
        exit 1
    fi
    echo "$found"
}
report=$(newest "$BUILD/demo")

step "$BUILD/bin/memtrail report summary $report"
"$BUILD/bin/memtrail" report summary "$report"

rm -f "$BUILD"/demo-detail.*.mtr
step "running: $BUILD/bin/memtrail run --mode detail --depth 8 -o $BUILD/demo-detail.%p.mtr --$shown"
"$BUILD/bin/memtrail" run --mode detail --depth 8 -o "$BUILD/demo-detail.%p.mtr" -- "${prog[@]}" >/dev/null
detail=$(newest "$BUILD/demo-detail")
step "$BUILD/bin/memtrail report detail $detail --sort allocated --top 5 (the sites after the summary)"
"$BUILD/bin/memtrail" report detail "$detail" --sort allocated --top 5 | sed -n '/^Allocation sites/,$p'

step "$BUILD/bin/memtrail html $detail -o $BUILD/demo-detail.html (the same report as a page: open it in a browser)"
"$BUILD/bin/memtrail" html "$detail" -o "$BUILD/demo-detail.html"

#!/usr/bin/env bash
# Runs every test: the unit tests of CLI-side code (built with ASan+UBSan),
# then each tests/*/test_*.sh script (agent tests on real programs, CLI
# behaviour). Every check prints one "PASS name" or "FAIL name: why" line,
# or "SKIP name: why" when what it needs is not installed (not a failure);
# the skips are tallied on the line "N skipped" and the last line is the
# tally "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
export MT_ROOT=$PWD
passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_one() { # name, command...
    local name=$1; shift
    "$@" >"$log" 2>&1
    local rc=$?
    local p f s
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
    grep -E '^(PASS|FAIL|SKIP) ' "$log"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exited with status $rc"; f=$((f + 1))
        tail -n 20 "$log" | sed 's/^/    | /'
    elif [ "$f" -ne 0 ]; then
        grep -v -E '^(PASS|FAIL|SKIP) ' "$log" | tail -n 20 | sed 's/^/    | /'
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
        echo "FAIL $name: ran no check"; f=1
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

for t in "$BUILD"/asan/tests/*/test_*; do
    [ -x "$t" ] || continue
    run_one "$t" "$t"
done
for t in tests/*/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$t" bash "$t"
done
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

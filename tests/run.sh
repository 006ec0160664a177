#!/usr/bin/env bash
# Runs every test: the unit tests of CLI-side code (built with ASan+UBSan),
# then each tests/*/test_*.sh script (agent tests on real programs, CLI
# behaviour). Every check prints one "PASS name" or "FAIL name: why" line;
# the last line is the tally "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
export MT_ROOT=$PWD
passed=0 failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_one() { # name, command...
    local name=$1; shift
    "$@" >"$log" 2>&1
    local rc=$?
    local p f
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
    grep -E '^(PASS|FAIL) ' "$log"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exited with status $rc"; f=$((f + 1))
        tail -n 20 "$log" | sed 's/^/    | /'
    elif [ "$f" -ne 0 ]; then
        grep -v -E '^(PASS|FAIL) ' "$log" | tail -n 20 | sed 's/^/    | /'
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: ran no check"; f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
}

for t in "$BUILD"/asan/tests/*/test_*; do
    [ -x "$t" ] || continue
    run_one "$t" "$t"
done
for t in tests/*/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$t" bash "$t"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

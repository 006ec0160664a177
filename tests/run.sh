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

# Tests write their files under their own scratch directories: the work
# tree must hold no new files afterwards (git's view of untracked and
# ignored files, outside the build directory).
untracked() {
    git status --porcelain --untracked-files=all --ignored 2>/dev/null | sed -n 's/^[?!][?!] //p' |
        grep -v "^${BUILD#"$PWD/"}/" | sort
}
before=$(untracked)

for t in "$BUILD"/asan/tests/*/test_*; do
    [ -x "$t" ] || continue
    run_one "$t" "$t"
done
for t in tests/*/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$t" bash "$t"
done
new_files=$(comm -13 <(printf '%s\n' "$before") <(untracked) | grep -v '^$' | head -20)
if [ -z "$new_files" ]; then
    echo "PASS tests leave no files in the work tree"; passed=$((passed + 1))
else
    echo "FAIL tests leave no files in the work tree: $(echo "$new_files" | tr '\n' ' ')"; failed=$((failed + 1))
fi
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

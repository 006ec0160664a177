# Every make target the README tells a user to run (`make X` in its text,
# or a "make X" line of a code block) installs what it needs first: in its
# dry run (make -n, which also dry-runs the $(MAKE) lines it recurses
# into), scripts/deps.sh comes before any compiler (CC, CXX, FUZZ_CC,
# RUSTC and GO are set to a marker so that every compile is seen) and
# before any other tool — a fresh machine has neither the headers nor the
# tools. The check
# is also run on copies of the Makefile broken on purpose, which it must
# refuse.
source "$(dirname "$0")/../lib.sh"
command -v make >/dev/null || { fail setup "make is not installed"; exit 1; }

targets=$( (grep -oE '`make [a-z][a-z0-9_-]*' "$MT_ROOT/README.md"; grep -oE '^make [a-z][a-z0-9_-]*' "$MT_ROOT/README.md") |
    sed -E 's/^`?make //' | sort -u)
expect_match "the README names make targets (demo and check among them)" "check.*demo|demo.*check" "$(echo $targets)"

# order MAKEFILE TARGET: "ok" when, in the dry run of TARGET, the first
# command that needs more than the base system (anything but rm, rmdir,
# mkdir, ln, cp, install, touch, echo, printf: a compiler, clang-format, a
# script...) is scripts/deps.sh, so that it runs before any compiler; else
# what is wrong. (`make uninstall` only removes files: it needs nothing.)
order() {
    local out deps comp first
    if ! out=$(make -C "$MT_ROOT" -f "$1" -n "$2" BUILD="$T/build" CC=mt-compiler CXX=mt-compiler \
        FUZZ_CC=mt-compiler RUSTC=mt-compiler GO=mt-compiler 2>&1); then
        echo "make -n $2 failed: $(printf '%s\n' "$out" | tail -2)"
        return
    fi
    # one line per command: continuation lines joined, make's own lines left out
    out=$(printf '%s\n' "$out" | sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' | grep -vE '^make(\[[0-9]+\])?: ')
    deps=$(printf '%s\n' "$out" | grep -n 'scripts/deps\.sh' | head -1 | cut -d: -f1)
    comp=$(printf '%s\n' "$out" | grep -nE '(^|[^a-z-])mt-compiler ' | head -1)
    first=$(printf '%s\n' "$out" | grep -nvE '^-?(rm|rmdir|mkdir|ln|cp|install|touch|echo|printf)( |$)' | head -1)
    if [ -z "$first" ]; then
        echo ok
    elif [ -z "$deps" ]; then
        echo "never runs scripts/deps.sh${comp:+; compiles at: ${comp#*:}}"
    elif [ -n "$comp" ] && [ "${comp%%:*}" -lt "$deps" ]; then
        echo "compiles before deps: ${comp#*:}"
    elif [ "${first%%:*}" != "$deps" ]; then
        echo "runs '${first#*:}' before deps"
    else
        echo ok
    fi
}

for t in $targets; do
    expect_eq "make $t (named in the README) runs deps before building anything" "ok" "$(order Makefile "$t" | cut -c1-300)"
done

# The check refuses what it must: a target that never installs, and one
# that builds before it installs.
sed 's/^check: deps$/check:/' "$MT_ROOT/Makefile" >"$T/no-deps.mk"
sed 's/^demo: deps$/demo: all deps/' "$MT_ROOT/Makefile" >"$T/late-deps.mk"
expect_eq "the broken copies differ from the Makefile" "2" \
    "$( (cmp -s "$T/no-deps.mk" "$MT_ROOT/Makefile" || echo x; cmp -s "$T/late-deps.mk" "$MT_ROOT/Makefile" || echo x) | wc -l)"
expect_match "a copy whose check skips deps is refused" "^never runs scripts/deps.sh; compiles at: mt-compiler" \
    "$(order "$T/no-deps.mk" check)"
expect_match "a copy whose demo builds before deps is refused" "^compiles before deps: mt-compiler" \
    "$(order "$T/late-deps.mk" demo)"

# scripts/demo.sh (make demo) runs deps, then a bare `make`: the default
# goal must build the CLI and the agent, whatever rule comes first in the
# Makefile (a generated file's rule once did, and the demo then found no
# memtrail to run).
bare=$(cd "$MT_ROOT" && make -n BUILD="$T/bare" 2>/dev/null | tr '\n' ' ')
expect_match "a bare make (what scripts/demo.sh runs) builds bin/memtrail" "-o $T/bare/bin/memtrail " "$bare"
expect_match "a bare make (what scripts/demo.sh runs) builds the agent" "-o $T/bare/lib/libmemtrail.so " "$bare"

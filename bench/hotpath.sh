#!/usr/bin/env bash
# Instructions per malloc+free pair that the agent adds to glibc's, counted
# by callgrind (valgrind): bench/hotpath.c run bare and under the agent in
# the same invocation. Instruction counts do not depend on the machine's
# load, so a change to the hot path can be compared exactly with --base.
# With --sqlite, the program is SQLite's workload (../shared/bench/
# workload.sql, bench/overhead.sh's): the ratio of its instructions to the
# bare run's, a figure for overhead.sh's wall times that no load moves.
#
# Usage: bench/hotpath.sh [--pairs N | --sqlite] [--mode summary|sample|detail|trace]
#                         [--base LIB]
#   --pairs N   malloc+free pairs (default 1000000)
#   --sqlite    count sqlite3 :memory: ".read workload.sql" instead (needs
#               sqlite3; MT_SHARED: where ../shared is)
#   --mode M    the agent's mode (default summary)
#   --base LIB  another libmemtrail.so (say, an older build) counted beside
#               this tree's, with its ratio
# Environment: BUILD (default build): the agent measured is
# $BUILD/lib/libmemtrail.so. Needs valgrind (apt install valgrind, or
# scripts/deps.sh --bench).
set -euo pipefail
die() { echo "hotpath.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pairs=1000000 mode=summary base="" sqlite=0
bad_usage() { echo "hotpath.sh: $*" >&2; echo "try: bench/hotpath.sh --help" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --pairs) [ $# -ge 2 ] || bad_usage "--pairs needs a number"; pairs=$2; shift ;;
        --sqlite) sqlite=1 ;;
        --mode) [ $# -ge 2 ] || bad_usage "--mode needs summary, sample, detail or trace"; mode=$2; shift ;;
        --base) [ $# -ge 2 ] || bad_usage "--base needs a library"; base=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) bad_usage "unknown option '$1'" ;;
    esac
    shift
done
[[ $pairs =~ ^[1-9][0-9]*$ ]] || bad_usage "--pairs wants a positive integer, not '$pairs'"
case $mode in summary|sample|detail|trace) ;; *) bad_usage "--mode wants summary, sample, detail or trace, not '$mode'" ;; esac
command -v valgrind >/dev/null 2>&1 || die "valgrind is not installed (apt install valgrind, or scripts/deps.sh --bench)"
[ -f "$AGENT" ] || die "the agent is not built ($AGENT): run 'make' first"
if [ -n "$base" ] && [ ! -f "$base" ]; then die "--base: no such library: $base"; fi

if [ "$sqlite" = 1 ]; then
    command -v sqlite3 >/dev/null 2>&1 || die "sqlite3 is not installed (apt install sqlite3, or scripts/deps.sh)"
    [ -f "$BENCH_SRC/workload.sql" ] || die "no $BENCH_SRC/workload.sql (set MT_SHARED to the shared directory)"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-hotpath.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
if [ "$sqlite" = 1 ]; then
    prog=(sqlite3 :memory: "$(sqlite_read_arg)")
else
    cc -O2 -o "$TMP/hotpath" "$ROOT/bench/hotpath.c" || die "cannot build bench/hotpath.c"
    prog=("$TMP/hotpath" "$pairs")
fi

# irefs [LIB]: the program's instructions (all its threads), bare or under LIB.
# follow_exec=on: the agent would otherwise leave valgrind's exec of the
# program untracked.
irefs() {
    local out
    if [ $# -eq 0 ]; then
        out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "${prog[@]}" 2>&1 >/dev/null)
    else
        out=$(LD_PRELOAD=$1 MEMTRAIL_OPTIONS="mode=$mode:follow_exec=on:output=$TMP/r.%p.out" \
            valgrind --tool=callgrind --callgrind-out-file=/dev/null "${prog[@]}" 2>&1 >/dev/null)
    fi
    printf '%s\n' "$out" | awk '/I +refs:/ { gsub(",", "", $NF); print $NF; found = 1 } END { if (!found) exit 1 }' ||
        die "callgrind printed no instruction count: $(printf '%s\n' "$out" | tail -n 3)"
}

# in_unit COUNT: instructions as shown, per pair or (SQLite) in millions;
# ratio: the whole program's against the bare run's, shown for SQLite.
if [ "$sqlite" = 1 ]; then
    echo "hotpath: instructions of sqlite3 :memory: \"$(sqlite_read_arg)\" (callgrind), mode=$mode"
    in_unit() { awk -v a="$1" 'BEGIN { printf "%8.1f M", a / 1e6 }'; }
    ratio() { awk -v a="$1" -v b="$bare" 'BEGIN { printf ", %.3fx bare", a / b }'; }
else
    echo "hotpath: instructions per malloc+free pair (callgrind), $(group "$pairs") pairs of 16-215 bytes, mode=$mode"
    in_unit() { awk -v a="$1" -v n="$pairs" 'BEGIN { printf "%8.1f per pair", a / n }'; }
    ratio() { :; }
fi
bare=$(irefs)
echo "   bare (glibc)       $(in_unit "$bare")"
# agent LABEL LIB: LIB's count, and what it adds to the bare run's; sets $added
agent() {
    local n; n=$(irefs "$2")
    added=$((n - bare))
    echo "   $1  $(in_unit "$n"): $(in_unit "$added" | sed 's/^ *//') added$(ratio "$n") ($2)"
}
agent "this tree's agent" "$AGENT"
now_added=$added
if [ -n "$base" ]; then
    agent "--base agent     " "$base"
    echo "   this tree adds $(awk -v a="$now_added" -v b="$added" 'BEGIN { printf "%.2f", a / b }')x the instructions --base adds"
fi

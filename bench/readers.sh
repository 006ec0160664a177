#!/usr/bin/env bash
# The readers on large reports: how long `memtrail report detail`, `memtrail
# query PID detail` and `memtrail diff` take on a real detail report of about
# half a million sites, and `memtrail report` and `diff` on a report of a
# million categories. Reading must stay O(n log n): the target is under 5 s
# for each (a quadratic reader took 77 s for 262,144 sites).
#
# The sites come from a real run: a program whose binary recursion of depth
# DEPTH (default 19: 524,288 leaves, each a distinct call stack) allocates at
# every leaf, recorded with `memtrail run --mode detail --depth 24` (the
# agent's site table holds 524,287 sites; the rest are counted as dropped).
# The categories are synthesized in the report format (docs/report-format.md).
# Each figure is checked, not only timed: the number of sites read, the
# totals of the categories (against python3's sums of the file).
#
# Usage: bash bench/readers.sh [DEPTH] [CATEGORIES]   (default 19 1000000)
# Needs: make all; python3. Writes about 400 MB to $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
die() { echo "bench/readers.sh: $*" >&2; exit 1; }

DEPTH=${1:-19}
NCAT=${2:-1000000}
LIMIT_S=5
[[ $DEPTH =~ ^[0-9]+$ ]] && [ "$DEPTH" -ge 1 ] && [ "$DEPTH" -le 22 ] || die "DEPTH: 1 to 22, not '$DEPTH'"
[[ $NCAT =~ ^[0-9]+$ ]] && [ "$NCAT" -ge 1 ] || die "CATEGORIES: a positive integer, not '$NCAT'"
[ -x "$MEMTRAIL" ] && [ -f "$AGENT" ] || die "memtrail is not built ($MEMTRAIL): run 'make' first"
[ "$have_python" = 1 ] || die "python3 is needed"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-readers.XXXXXX")
prog_pid=""
cleanup() {
    if [ -n "$prog_pid" ]; then kill "$prog_pid" 2>/dev/null || true; wait "$prog_pid" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# ---- the program: binary recursion, one allocation per leaf ----------------
cat >"$TMP/tree.c" <<'EOF'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void *volatile keep;
static long leaves;
__attribute__((noinline)) static void leaf(void)
{
    keep = malloc(16);      /* kept: each leaf's block stays live */
    leaves++;
}
__attribute__((noinline)) static void walk(int d)
{
    if (d == 0) {
        leaf();
        return;
    }
    walk(d - 1);            /* two call sites: two return addresses per level */
    __asm__ volatile("");
    walk(d - 1);
    __asm__ volatile("");
}
int main(int argc, char **argv)
{
    walk(atoi(argv[1]));
    printf("%ld\n", leaves);
    fflush(stdout);
    if (argc > 2)           /* stay alive to be queried */
        pause();
    return 0;
}
EOF
gcc -O1 -g -fno-optimize-sibling-calls -fno-inline -o "$TMP/tree" "$TMP/tree.c" || die "cannot compile the program"

# timed NAME CMD...: runs CMD (its output discarded) and prints the time
# against the target; a failure or a time over the target fails the bench.
timed() {
    local name=$1; shift
    run_timed "$TMP/err" "$@"
    local secs verdict
    secs=$(awk -v u="$elapsed" 'BEGIN { printf "%.2f", u / 1e6 }')
    verdict=$(awk -v s="$secs" -v l="$LIMIT_S" 'BEGIN { print (s < l) ? "ok" : "SLOW" }')
    [ "$rc" -eq 0 ] || verdict="FAILED (status $rc)"
    printf '  %-46s %7s s  %s\n' "$name" "$secs" "$verdict"
    if [ "$rc" -ne 0 ]; then show_err "$TMP/err"; fi
    [ "$verdict" = ok ] || status=1
}
status=0

echo "== detail reports of a real run: binary recursion of depth $DEPTH, --depth 24"
t0=$(now_us)
"$MEMTRAIL" run --mode detail --depth 24 -o "$TMP/a.mtr" -- "$TMP/tree" "$DEPTH" >"$TMP/leaves" 2>"$TMP/run.err" ||
    die "the run failed: $(cat "$TMP/run.err")"
t1=$(now_us)
"$MEMTRAIL" run --mode detail --depth 24 -o "$TMP/b.mtr" -- "$TMP/tree" "$DEPTH" >/dev/null 2>&1 ||
    die "the second run failed"
sites=$(grep -c '^site ' "$TMP/a.mtr")
dropped=$(sed -n 's/^sites count=[0-9]* dropped=\([0-9]*\)$/\1/p' "$TMP/a.mtr")
printf '  recorded in %.2f s: %s leaves, %s sites (%s allocations found the table full), %s MB\n' \
    "$(awk -v u=$((t1 - t0)) 'BEGIN { print u / 1e6 }')" "$(group "$(cat "$TMP/leaves")")" "$(group "$sites")" \
    "$(group "$dropped")" "$(( $(stat -c %s "$TMP/a.mtr") / 1000000 ))"

timed "report detail (text, --top 10)" "$MEMTRAIL" report detail "$TMP/a.mtr" --top 10
timed "report detail --json --top 10" "$MEMTRAIL" report detail "$TMP/a.mtr" --json --top 10
timed "diff (two runs, sites matched by stack)" "$MEMTRAIL" diff "$TMP/a.mtr" "$TMP/b.mtr" --top 10
timed "export --format folded" "$MEMTRAIL" export "$TMP/a.mtr" --format folded
# Every site as JSON: output-bound (24 symbolized frames a site), shown
# for scale, not held to the target.
t0=$(now_us)
json_bytes=$("$MEMTRAIL" report detail "$TMP/a.mtr" --json | wc -c)
t1=$(now_us)
printf '  %-46s %7.2f s  (%s MB of JSON; output-bound, not held to the target)\n' \
    "report detail --json, every site" "$(awk -v u=$((t1 - t0)) 'BEGIN { print u / 1e6 }')" \
    "$((json_bytes / 1000000))"
# What was read, against the file's own lines: the sites merged by their
# innermost frame (--depth 1) add up to every site and every live byte.
"$MEMTRAIL" report detail "$TMP/a.mtr" --json --depth 1 >"$TMP/a.json"
python3 - "$TMP/a.json" "$TMP/a.mtr" <<'PYEOF' || status=1
import json, sys
d = json.load(open(sys.argv[1]))
n = live = 0
for line in open(sys.argv[2]):
    if line.startswith("site "):
        n += 1
        live += int(line.split(" live_bytes=")[1].split()[0])
got = (sum(s["merged_sites"] for s in d["sites"]), sum(s["live_bytes"] for s in d["sites"]))
ok = got == (n, live)
print("  read: %d sites holding %d live bytes; the file: %d, %d: %s"
      % (got + (n, live) + ("the same" if ok else "WRONG",)))
sys.exit(0 if ok else 1)
PYEOF

echo "== query PID detail: the same program, alive"
"$MEMTRAIL" run --mode detail --depth 24 -o "$TMP/q.mtr" -- "$TMP/tree" "$DEPTH" wait >"$TMP/q.leaves" 2>/dev/null &
prog_pid=$!
for _ in $(seq 1 200); do [ -s "$TMP/q.leaves" ] && break; sleep 0.1; done
qpid=$(pgrep -n -f "^$TMP/tree $DEPTH wait" || true)
if [ -z "$qpid" ]; then
    echo "  the program did not start"; status=1
else
    timed "query PID detail (text, --top 10)" "$MEMTRAIL" query "$qpid" detail --top 10 --timeout 120
    kill "$qpid" 2>/dev/null || true
fi
wait "$prog_pid" 2>/dev/null || true
prog_pid=""

echo "== a report of $(group "$NCAT") categories (synthesized)"
python3 - "$TMP/c1.mtr" "$TMP/c2.mtr" "$NCAT" >"$TMP/cat.truth" <<'PYEOF'
import sys
out1, out2, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
tot = [0, 0]
for k, path in enumerate((out1, out2)):
    with open(path, "w") as f:
        f.write("memtrail-report 1\npid %d\nmode summary\nstart_ns 1000\nend_ns 2000\nreason exit\n" % (100 + k))
        for i in range(n):
            if k == 1 and i % 10 == 0:
                continue        # gone in the second report
            live = (i * 7919 + k * 13) % 100000
            tot[k] += live
            f.write("category c%07d kind=malloc live_bytes=%d live_count=1 peak_bytes=%d allocs=1 frees=0 "
                    "reallocs=0 reserved=0 committed=0 resident=0 mappings=0\n" % (i, live, live))
        f.write("total live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=0 reallocs=0\nend\n"
                % (tot[k], n, tot[k], n))
print(tot[0], tot[1])
PYEOF
timed "report (text)" "$MEMTRAIL" report "$TMP/c1.mtr"
timed "report --json" "$MEMTRAIL" report "$TMP/c1.mtr" --json
timed "diff of two such reports (--json)" "$MEMTRAIL" diff "$TMP/c1.mtr" "$TMP/c2.mtr" --json
"$MEMTRAIL" diff "$TMP/c1.mtr" "$TMP/c2.mtr" --json >"$TMP/diff.json"
python3 - "$TMP/diff.json" "$NCAT" $(cat "$TMP/cat.truth") <<'PYEOF' || status=1
import json, sys
d = json.load(open(sys.argv[1]))
n, t1, t2 = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cats = d["categories"]
gone = sum(1 for c in cats if c["status"] == "gone")
sums = sum(c["live_bytes"] for c in cats), sum(c["live_bytes"] - c["live_bytes_delta"] for c in cats)
ok = len(cats) == n and gone == (n + 9) // 10 and sums == (t2, t1)
print("  diff: %d categories, %d gone, live bytes %d -> %d: %s" % (len(cats), gone, sums[1], sums[0],
      "as the files say" if ok else "WRONG"))
sys.exit(0 if ok else 1)
PYEOF
[ "$status" = 0 ] && echo "all under ${LIMIT_S} s, figures as the files say" || echo "FAILED: see above"
exit "$status"

#!/usr/bin/env bash
# Virtual memory tracking: reserved/committed/resident per category against
# the test programs' own ledgers and the kernel's /proc figures, thread
# stacks, and how much of a real program's RSS the categories explain.
. "$(dirname "$0")/../lib.sh"
SHARED=${MT_SHARED:-$MT_ROOT/../shared}
# The reports the programs write at exit (besides the ones they ask for)
# go to the scratch directory, not the work tree.
export MEMTRAIL_OPTIONS="output=$T/exit.%p.mtr"

# field REPORT CATEGORY FIELD: a field of a category line (or of "process").
field() {
    awk -v c="$2" -v f="$3" '($1 == "category" && $2 == c) || ($1 == "process" && c == "process") {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) print kv[2] } }' "$1"
}
# explained REPORT: % of rss_bytes in the resident of categories other than "other"
explained() {
    awk '$1 == "category" && $2 != "other" { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "resident") r += kv[2] } }
         $1 == "process" { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "rss_bytes") rss = kv[2] } }
         END { if (rss > 0) printf "%.2f\n", 100 * r / rss; else print 0 }' "$1"
}
resident_sum() {
    awk '$1 == "category" { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "resident") r += kv[2] } } END { print r + 0 }' "$1"
}

# --- a program that maps, unmaps, remaps, protects, discards, touches ---
out=$(LD_PRELOAD=$AGENT "$TBIN/vmmap" "$T/vm.mtr")
expect_eq "vmmap ran" 0 $?
while read -r _ cat res com rss; do
    expect_eq "vm $cat reserved" "$res" "$(field "$T/vm.mtr" "$cat" reserved)"
    expect_eq "vm $cat committed" "$com" "$(field "$T/vm.mtr" "$cat" committed)"
    expect_eq "vm $cat resident" "$rss" "$(field "$T/vm.mtr" "$cat" resident)"
done < <(printf '%s\n' "$out" | grep '^expect ')
expect_eq "vm built-in names are not tags" "builtin_tag -22 -22" "$(printf '%s\n' "$out" | grep '^builtin_tag')"
before=$(printf '%s\n' "$out" | awk '/^rss_before/ {print $2}')
after=$(printf '%s\n' "$out" | awk '/^rss_after/ {print $2}')
rss=$(field "$T/vm.mtr" process rss_bytes)
check "vm rss_bytes within the kernel's before/after ($before <= $rss <= $after)" test "$before" -le "$rss" -a "$rss" -le "$after"
sum=$(resident_sum "$T/vm.mtr")
# Pieces of a kernel mapping split between categories are counted from
# pagemap, which also shows pages mapped to the shared zero page.
check "vm categories' resident adds up to rss_bytes ($sum vs $rss)" \
    python3 -c "import sys; s, r = int(sys.argv[1]), int(sys.argv[2]); sys.exit(not (r > 0 and abs(s - r) <= max(8192, r // 200)))" "$sum" "$rss"
peak=$(field "$T/vm.mtr" process peak_rss_bytes)
check "vm peak_rss_bytes >= rss_bytes" test "$peak" -ge "$rss"
expect_eq "vm peak of tagged mappings" 409600 "$(field "$T/vm.mtr" vm.anon peak_mapped)"
expect_eq "vm malloc has no address space of its own" 0 "$(field "$T/vm.mtr" malloc reserved)"

# --- thread stacks ---
out=$(LD_PRELOAD=$AGENT "$TBIN/vmthreads" "$T/th.mtr" 5)
read -r _ _ res com rss < <(printf '%s\n' "$out" | grep '^expect stacks')
expect_eq "stacks reserved = [stack] + 5 thread stacks with guards (maps)" "$res" "$(field "$T/th.mtr" stacks reserved)"
expect_eq "stacks committed = without the guards" "$com" "$(field "$T/th.mtr" stacks committed)"
expect_eq "stacks resident = the kernel's Rss of those mappings" "$rss" "$(field "$T/th.mtr" stacks resident)"

# --- CPython: pymalloc's arenas come from mmap ---
if [ -f "$SHARED/bench/pyalloc.py" ]; then
    # The report is written while the workload's objects are still alive.
    # The interpreter itself, not a wrapper script (pyenv's shim) that execs
    # it: exec'd programs run untracked unless following is on.
    PY=$(python3 -c 'import sys; print(sys.executable)')
    REPORT="$T/py.mtr" LD_PRELOAD=$AGENT "$PY" -c '
import ctypes, os, runpy, sys
sys.argv = [sys.argv[1]]
g = runpy.run_path(sys.argv[0], run_name="__main__")
ctypes.CDLL(None).mt_report_write(os.environ["REPORT"].encode())
' "$SHARED/bench/pyalloc.py" >/dev/null 2>"$T/py.err" || true
    if [ -s "$T/py.mtr" ]; then
        e=$(explained "$T/py.mtr")
        check "CPython at its peak: categories explain >= 99% of RSS ($e%)" python3 -c "import sys; sys.exit(float(sys.argv[1]) < 99)" "$e"
        mm=$(field "$T/py.mtr" mmap resident); rss=$(field "$T/py.mtr" process rss_bytes)
        check "CPython: pymalloc arenas show in mmap ($mm of $rss resident)" test "$mm" -gt $((rss / 2))
    else
        fail "CPython report" "no report written: $(head -c 300 "$T/py.err")"
    fi
else
    fail "CPython workload" "$SHARED/bench/pyalloc.py not found"
fi

# --- SQLite through memtrail run ---
if command -v sqlite3 >/dev/null && [ -f "$SHARED/bench/workload.sql" ]; then
    (cd "$T" && "$MT" run -o "$T/sq.mtr" -- sqlite3 :memory: ".read $SHARED/bench/workload.sql" >/dev/null 2>&1)
    e=$(explained "$T/sq.mtr")
    check "SQLite: categories explain >= 99% of RSS ($e%)" python3 -c "import sys; sys.exit(float(sys.argv[1]) < 99)" "$e"
    check "SQLite: code resident > 0" test "$(field "$T/sq.mtr" code resident)" -gt 0
    check "SQLite: heap reserved > 0" test "$(field "$T/sq.mtr" heap reserved)" -gt 0
else
    fail "SQLite workload" "sqlite3 or workload.sql missing"
fi

# --- the VM lock under hostile timing ---
# (timeout runs the program through env, so the agent goes into the program
# and not into timeout, which would drop it before the exec.)
MEMTRAIL_OPTIONS="output=$T/race.mtr" timeout 20 env LD_PRELOAD=$AGENT "$TBIN/vmrace" exit
expect_eq "_exit in a signal handler during mmap: exits with its status, no hang" 7 $?
check "_exit in a signal handler during mmap: report written" grep -q '^end$' "$T/race.mtr"
out=$(MEMTRAIL_OPTIONS="output=$T/fork.%p.mtr" timeout 120 env LD_PRELOAD=$AGENT "$TBIN/vmrace" fork)
expect_eq "_Fork while another thread maps: no child hangs on the VM lock" "stuck 0" "$out"
out=$(MEMTRAIL_OPTIONS="output=$T/st.mtr" timeout 60 env LD_PRELOAD=$AGENT "$TBIN/vmrace" stacks "$T/st.mtr")
big=${out#big }
check "stacks of exited guardless threads leave no stale record (stacks resident $(field "$T/st.mtr" stacks resident) < 4 MiB)" \
    test "$(field "$T/st.mtr" stacks resident)" -lt $((4 << 20))
check "the 60 MiB block is heap (heap resident $(field "$T/st.mtr" heap resident) >= $big)" \
    test "$(field "$T/st.mtr" heap resident)" -ge "$big"

# --- one VMA split between categories, with zero-page reads --------------
out=$(LD_PRELOAD=$AGENT "$TBIN/zeropage" "$T/zp.mtr")
expect_eq "zeropage ran" 0 $?
"$MT" report --json "$T/zp.mtr" >"$T/zp.json"
if [ "$(id -u)" = 0 ]; then
    # Frame numbers are visible: the zero page is told apart exactly.
    for cat in zp-a zp-b; do
        want=$(echo "$out" | awk -v c=$cat '$1 == "expect" && $2 == c {print $3}')
        expect_eq "split VMA: $cat resident is the pages the kernel counts (written; read too where reads take pages)" "$want" \
            "$(json_get "$T/zp.json" "[c['resident_bytes'] for c in j['categories'] if c['name']=='$cat'][0]")"
    done
fi
expect_eq "split VMA: the categories never explain more than the process's RSS" "True" \
    "$(json_get "$T/zp.json" "sum(c['resident_bytes'] for c in j['categories']) <= j['process']['rss_bytes']")"

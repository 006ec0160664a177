#!/usr/bin/env bash
# Overhead of memtrail's summary and detail modes against the bare program and
# against heaptrack, on the shared workloads (../shared/bench): the mbench malloc
# microbenchmark, SQLite and CPython. Runs are interleaved (bare, memtrail,
# heaptrack, bare, ...) so machine noise hits every column alike; the headline
# figure is min-of-runs, the median is shown beside it.
#
# Usage: bench/overhead.sh [--runs N] [--quick] [--only mbench|sqlite|python]
#                          [--direct] [--no-heaptrack] [--no-memtrail]
#                          [--no-detail] [--no-summary]
#   --runs N        timed runs per column (default 5)
#   --quick         2 runs, mbench with fewer ops: a smoke test, not a result
#   --only W        one workload
#   --direct        time the agent alone (LD_PRELOAD + MEMTRAIL_OPTIONS)
#                   instead of through `memtrail run`
#   --no-heaptrack  skip the heaptrack column
#   --no-memtrail   time bare and heaptrack only (memtrail need not be built)
#   --no-detail     skip the detail-mode column (memtrail run --mode detail)
#   --no-summary    skip the summary-mode column
# Environment: MT_SHARED (default ROOT/../shared), BUILD (default build).
# Exit status: 0, or 1 when a workload fails under memtrail (or bare), or
# memtrail is not built.
set -euo pipefail
die() { echo "overhead.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=5 quick=0 only="" direct=0 use_heaptrack=1 use_memtrail=1 use_summary=1 use_detail=1

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
bad_usage() { echo "overhead.sh: $*" >&2; echo "try: bench/overhead.sh --help" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --runs) [ $# -ge 2 ] || bad_usage "--runs needs a number"
                runs=$2; shift ;;
        --runs=*) runs=${1#--runs=} ;;
        --quick) quick=1 ;;
        --only) [ $# -ge 2 ] || bad_usage "--only needs mbench, sqlite or python"
                only=$2; shift ;;
        --only=*) only=${1#--only=} ;;
        --direct) direct=1 ;;
        --no-heaptrack) use_heaptrack=0 ;;
        --no-memtrail) use_memtrail=0 ;;
        --no-detail) use_detail=0 ;;
        --no-summary) use_summary=0 ;;
        -h|--help) usage; exit 0 ;;
        *) bad_usage "unknown option '$1'" ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || bad_usage "--runs wants a positive integer, not '$runs'"
case $only in ""|mbench|sqlite|python) ;; *) bad_usage "--only wants mbench, sqlite or python, not '$only'" ;; esac
if [ "$quick" = 1 ]; then runs=2; fi
[ -d "$BENCH_SRC" ] || die "workloads not found: $BENCH_SRC (set MT_SHARED to the shared directory)"

if [ "$use_memtrail" = 0 ]; then use_summary=0 use_detail=0; fi
if [ "$use_summary" = 0 ] && [ "$use_detail" = 0 ]; then use_memtrail=0; fi
if [ "$use_memtrail" = 1 ]; then
    if [ ! -x "$MEMTRAIL" ] || [ ! -f "$AGENT" ]; then
        die "memtrail is not built ($MEMTRAIL, $AGENT): run 'make' first (or pass --no-memtrail)"
    fi
fi
if [ "$use_heaptrack" = 1 ] && ! command -v heaptrack >/dev/null 2>&1; then
    echo "note: heaptrack is not installed (apt install heaptrack, or scripts/deps.sh): its column is skipped"
    use_heaptrack=0
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

status=0

# ---- the columns ------------------------------------------------------------

# Each sets $rc and $elapsed; workload output is discarded.
col_bare() { run_timed "$TMP/bare.err" "$@"; }

col_memtrail() { # MODE REPORT_PREFIX CMD...
    local mode=$1 prefix=$2; shift 2
    if [ "$direct" = 1 ]; then
        run_timed "$TMP/memtrail.err" env LD_PRELOAD="$AGENT" \
            MEMTRAIL_OPTIONS="mode=$mode:output=$prefix.%p.mtr" "$@"
    else
        run_timed "$TMP/memtrail.err" "$MEMTRAIL" run --mode "$mode" -o "$prefix.%p.mtr" -- "$@"
    fi
}

col_heaptrack() {
    rm -rf "$TMP/ht"; mkdir "$TMP/ht"
    run_timed "$TMP/heaptrack.err" heaptrack -o "$TMP/ht/trace" "$@"
    rm -rf "$TMP/ht" # its traces can be tens of MB
}

# The report's total allocation count, from `memtrail report --json` when
# python3 is there, else from the report file's `total` line.
report_allocs() { # FILE
    local f=$1 out
    if [ "$have_python" = 1 ] &&
        out=$("$MEMTRAIL" report summary "$f" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
def find(o):
    """The allocs of the "total" object, wherever the JSON puts it."""
    if isinstance(o, dict):
        t = o.get("total")
        if isinstance(t, dict) and isinstance(t.get("allocs"), int):
            return t
        for v in o.values():
            r = find(v)
            if r: return r
    elif isinstance(o, list):
        for v in o:
            r = find(v)
            if r: return r
    return None
r = find(d)
if r is None: sys.exit(1)
if not isinstance(r.get("reallocs"), int):  # else sum the heap categories
    cats = [c for c in d.get("categories", []) if isinstance(c, dict)]
    rs = [c.get("reallocs") for c in cats if c.get("kind") == "malloc"]
    if rs and all(isinstance(x, int) for x in rs):
        r = dict(r, reallocs=sum(rs))
f = lambda k: r[k] if isinstance(r.get(k), int) else "?"
print(f("allocs"), f("reallocs"), f("frees"), "memtrail report --json")
' 2>/dev/null); then
        echo "$out"
        return
    fi
    awk '$1 == "total" {
            a = r = f = "?"
            for (i = 2; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == "allocs") a = kv[2]
                if (kv[1] == "reallocs") r = kv[2]
                if (kv[1] == "frees") f = kv[2]
            }
            print a, r, f, "the report file (memtrail report --json gave no total)"; found = 1
         }
         END { if (!found) print "? ? ? nowhere: the report has no total line" }' "$f"
}

# ---- one workload -----------------------------------------------------------

summary_lines=()

# bench_workload NAME TARGET DETAIL_TARGET LABEL CMD...: the targets are
# the ratios to bare that summary and detail mode must stay under ("" for
# none).
bench_workload() {
    local name=$1 target=$2 dtarget=$3 label=$4; shift 4
    local -a t_bare=() t_mt=() t_dt=() t_ht=()
    local i prefix cols="bare"
    if [ "$use_summary" = 1 ]; then cols+=", memtrail summary"; fi
    if [ "$use_detail" = 1 ]; then cols+=", memtrail detail"; fi
    if [ "$use_heaptrack" = 1 ]; then cols+=", heaptrack"; fi

    echo
    echo "== $name: $label"
    echo "   $runs timed runs each, interleaved ($cols), after one untimed warm-up"

    # Warm-up: page cache, and a first check that the workload runs at all.
    col_bare "$@"
    if [ "$rc" -ne 0 ]; then bare_failed "$name" "; workload skipped"; return; fi
    local ht=$use_heaptrack
    for ((i = 1; i <= runs; i++)); do
        col_bare "$@"
        if [ "$rc" -ne 0 ]; then bare_failed "$name" " (run $i)"; return; fi
        t_bare+=("$elapsed")

        local mode
        for mode in summary detail; do
            if [ "$mode" = summary ] && [ "$use_summary" = 0 ]; then continue; fi
            if [ "$mode" = detail ] && [ "$use_detail" = 0 ]; then continue; fi
            prefix=$TMP/mt-$mode-$name-$i
            col_memtrail "$mode" "$prefix" "$@"
            if [ "$rc" -ne 0 ]; then
                echo "   FAILED: the workload exited with status $rc under memtrail $mode (run $i; bare runs exit 0)"
                show_err "$TMP/memtrail.err"
                status=1; summary_lines+=("$name: FAILED under memtrail $mode (status $rc)"); return
            fi
            if ! compgen -G "$prefix.*.mtr" >/dev/null; then
                echo "   FAILED: memtrail $mode wrote no report ($prefix.PID.mtr) in run $i"
                show_err "$TMP/memtrail.err"
                status=1; summary_lines+=("$name: FAILED under memtrail $mode (no report)"); return
            fi
            if [ "$mode" = summary ]; then t_mt+=("$elapsed"); else t_dt+=("$elapsed"); fi
        done

        if [ "$ht" = 1 ]; then
            col_heaptrack "$@"
            if [ "$rc" -ne 0 ]; then
                echo "   note: the workload exited with status $rc under heaptrack; heaptrack column dropped"
                show_err "$TMP/heaptrack.err"
                ht=0; t_ht=()
            else
                t_ht+=("$elapsed")
            fi
        fi
    done

    local b_min b_med m_min m_med h_min h_med
    read -r b_min b_med < <(min_median "${t_bare[@]}")
    printf '   %-10s %10s %10s %14s %14s\n' "" "min s" "median s" "x bare (min)" "x bare (med)"
    printf '   %-10s %10.3f %10.3f %14s %14s\n' bare "$b_min" "$b_med" 1.00 1.00
    local r_min="" r_med="" d_min d_med dr_min="" dr_med=""
    if [ "${#t_mt[@]}" -gt 0 ]; then
        read -r m_min m_med < <(min_median "${t_mt[@]}")
        r_min=$(ratio "$m_min" "$b_min"); r_med=$(ratio "$m_med" "$b_med")
        printf '   %-10s %10.3f %10.3f %14.2f %14.2f\n' summary "$m_min" "$m_med" "$r_min" "$r_med"
    fi
    if [ "${#t_dt[@]}" -gt 0 ]; then
        read -r d_min d_med < <(min_median "${t_dt[@]}")
        dr_min=$(ratio "$d_min" "$b_min"); dr_med=$(ratio "$d_med" "$b_med")
        printf '   %-10s %10.3f %10.3f %14.2f %14.2f\n' detail "$d_min" "$d_med" "$dr_min" "$dr_med"
    fi
    local hr_min="" hr_med=""
    if [ "${#t_ht[@]}" -gt 0 ]; then
        read -r h_min h_med < <(min_median "${t_ht[@]}")
        hr_min=$(ratio "$h_min" "$b_min"); hr_med=$(ratio "$h_med" "$b_med")
        printf '   %-10s %10.3f %10.3f %14.2f %14.2f\n' heaptrack "$h_min" "$h_med" "$hr_min" "$hr_med"
    fi

    local line="$name:" sep=" "
    if [ -n "$r_min" ]; then
        line+=$(printf ' summary %.2fx (median %.2fx)' "$r_min" "$r_med")
        if [ -n "$target" ]; then
            local verdict
            verdict=$(awk -v r="$r_min" -v t="$target" 'BEGIN { print (r <= t) ? "met" : "NOT met" }')
            printf '   target: summary mode <= %sx bare: %s (%.2fx by min, %.2fx by median)\n' \
                "$target" "$verdict" "$r_min" "$r_med"
            line+=", target <= ${target}x $verdict"
        fi
        local allocs reallocs frees src
        read -r allocs reallocs frees src < <(report_allocs "$(compgen -G "$TMP/mt-summary-$name-1.*.mtr" | head -n 1)")
        local what
        what="$(group "$allocs") allocations"
        if [ "$reallocs" != "?" ]; then what+=" + $(group "$reallocs") reallocs"; fi
        echo "   memtrail tracked: $what, $(group "$frees") frees (run 1, from $src)"
        line+=", $(group "$allocs") allocs tracked"
    fi
    if [ -n "$dr_min" ]; then
        if [ -n "$r_min" ]; then line+="; "; fi
        line+=$(printf 'detail %.2fx (median %.2fx)' "$dr_min" "$dr_med")
        if [ -n "$dtarget" ]; then
            local dverdict sites
            dverdict=$(awk -v r="$dr_min" -v t="$dtarget" 'BEGIN { print (r <= t) ? "met" : "NOT met" }')
            printf '   target: detail mode <= %sx bare: %s (%.2fx by min, %.2fx by median)\n' \
                "$dtarget" "$dverdict" "$dr_min" "$dr_med"
            line+=", target <= ${dtarget}x $dverdict"
        fi
        sites=$(awk '$1 == "sites" { sub(/^count=/, "", $2); print $2 }' "$(compgen -G "$TMP/mt-detail-$name-1.*.mtr" | head -n 1)")
        echo "   memtrail detail recorded ${sites:-?} allocation sites (run 1)"
        sep="; "
    fi
    if [ -n "$hr_min" ]; then
        if [ -n "$r_min" ]; then sep="; "; fi
        line+=$sep$(printf 'heaptrack %.2fx (median %.2fx)' "$hr_min" "$hr_med")
    fi
    summary_lines+=("$line")
}

# ---- the workloads ----------------------------------------------------------

host_cpus=$(nproc 2>/dev/null || echo "?")
echo "memtrail overhead benchmark: summary and detail mode vs bare vs heaptrack"
echo "   machine: $(uname -srm), $host_cpus CPUs; wall time of whole runs, min-of-runs is the headline"
if [ "$use_memtrail" = 1 ]; then
    if [ "$direct" = 1 ]; then
        echo "   memtrail timed as the agent alone: LD_PRELOAD=$AGENT MEMTRAIL_OPTIONS=mode=summary|detail:output=..."
    else
        echo "   memtrail timed through the CLI: $MEMTRAIL run --mode summary|detail -o FILE -- CMD (detail: default depth 4)"
    fi
else
    echo "   memtrail column skipped (--no-memtrail)"
fi
if [ "$use_heaptrack" = 1 ]; then
    echo "   heaptrack: $(command -v heaptrack) -o TMPFILE CMD ($(heaptrack --version 2>/dev/null | head -n 1))"
fi
if [ "$quick" = 1 ]; then echo "   --quick: a smoke test (2 runs, mbench 2x200000 ops), not a result"; fi

want() { [ -z "$only" ] || [ "$only" = "$1" ]; }

if want mbench; then
    mbench=$(mbench_binary)
    ops=2000000
    if [ "$quick" = 1 ]; then ops=200000; fi
    bench_workload mbench 1.5 2.5 "mbench 2 $ops 4096 (gcc -O2 -pthread)" "$mbench" 2 "$ops" 4096
fi

if want sqlite; then
    if command -v sqlite3 >/dev/null 2>&1; then
        sqlite=$(command -v sqlite3)
        sql=$(sqlite_read_arg)
        bench_workload sqlite 1.03 1.3 "sqlite3 :memory: \"$sql\"" "$sqlite" :memory: "$sql"
    else
        echo; echo "== sqlite: skipped, sqlite3 is not installed (apt install sqlite3, or scripts/deps.sh)"
        summary_lines+=("sqlite: skipped (no sqlite3)")
    fi
fi

if want python; then
    if [ "$have_python" = 1 ]; then
        python=$(python_binary)
        bench_workload python "" "" "$python $BENCH_SRC/pyalloc.py" "$python" "$BENCH_SRC/pyalloc.py"
    else
        echo; echo "== python: skipped, python3 is not installed (apt install python3, or scripts/deps.sh)"
        summary_lines+=("python: skipped (no python3)")
    fi
fi

echo
echo "== summary (min-of-runs ratios to bare)"
for l in "${summary_lines[@]}"; do echo "   $l"; done
if [ "$status" -ne 0 ]; then
    echo "overhead.sh: a workload failed (see above)" >&2
fi
exit "$status"

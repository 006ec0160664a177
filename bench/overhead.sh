#!/usr/bin/env bash
# Overhead of memtrail's summary, detail and sampled modes (and, with
# --fit, summary mode under canary=fit) against the bare program, with the
# peers in the same table: heaptrack, and jemalloc's own sampling profiler
# (jemalloc with MALLOC_CONF=prof:true,lg_prof_sample:19, one sample per
# 512 KiB, against jemalloc alone). Workloads are the shared
# ones (../shared/bench): the mbench malloc microbenchmark, SQLite and
# CPython. Runs are interleaved (bare, memtrail, ..., bare, ...) so machine
# noise hits every column alike; the headline figure is min-of-runs, the
# median is shown beside it, and the paired ratio: the median over rounds
# of each run's time over the bare run's of the same round, which a host
# whose speed drifts moves least.
#
# Usage: bench/overhead.sh [--runs N] [--quick] [--only mbench|sqlite|python]
#                          [--direct] [--no-heaptrack] [--no-memtrail]
#                          [--no-detail] [--no-summary] [--no-sample]
#                          [--no-jemalloc] [--fit]
#   --runs N        timed runs per column (default 5)
#   --quick         2 runs, mbench with fewer ops: a smoke test, not a result
#   --only W        one workload
#   --direct        time the agent alone (LD_PRELOAD + MEMTRAIL_OPTIONS)
#                   instead of through `memtrail run`
#   --no-heaptrack  skip the heaptrack column
#   --no-memtrail   time bare and heaptrack only (memtrail need not be built)
#   --no-detail     skip the detail-mode column (memtrail run --mode detail)
#   --no-summary    skip the summary-mode column
#   --no-sample     skip the sampled-mode column (memtrail run --mode sample,
#                   default rate 512 KiB)
#   --no-jemalloc   skip the jemalloc and jemalloc+prof columns
#   --fit           add a summary-fit column: summary mode with the agent
#                   option canary=fit (docs/canary.md), no canary byte
#                   glibc's chunk has no room for
# Environment: MT_SHARED (default ROOT/../shared), BUILD (default build).
# Exit status: 0, or 1 when a workload fails under memtrail (or bare), or
# memtrail is not built.
set -euo pipefail
die() { echo "overhead.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=5 quick=0 only="" direct=0 use_heaptrack=1 use_memtrail=1 use_summary=1 use_detail=1 use_sample=1
use_jemalloc=1 use_fit=0

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
        --no-sample) use_sample=0 ;;
        --no-jemalloc) use_jemalloc=0 ;;
        --fit) use_fit=1 ;;
        -h|--help) usage; exit 0 ;;
        *) bad_usage "unknown option '$1'" ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || bad_usage "--runs wants a positive integer, not '$runs'"
case $only in ""|mbench|sqlite|python) ;; *) bad_usage "--only wants mbench, sqlite or python, not '$only'" ;; esac
if [ "$quick" = 1 ]; then runs=2; fi
[ -d "$BENCH_SRC" ] || die "workloads not found: $BENCH_SRC (set MT_SHARED to the shared directory)"

if [ "$use_memtrail" = 0 ]; then use_summary=0 use_detail=0 use_sample=0 use_fit=0; fi
if [ "$use_summary" = 0 ] && [ "$use_detail" = 0 ] && [ "$use_sample" = 0 ] && [ "$use_fit" = 0 ]; then
    use_memtrail=0
fi
if [ "$use_memtrail" = 1 ]; then
    if [ ! -x "$MEMTRAIL" ] || [ ! -f "$AGENT" ]; then
        die "memtrail is not built ($MEMTRAIL, $AGENT): run 'make' first (or pass --no-memtrail)"
    fi
fi
if [ "$use_heaptrack" = 1 ] && ! command -v heaptrack >/dev/null 2>&1; then
    echo "note: heaptrack is not installed (apt install heaptrack, or scripts/deps.sh): its column is skipped"
    use_heaptrack=0
fi
JEMALLOC=""
if [ "$use_jemalloc" = 1 ]; then
    for f in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/*/libjemalloc.so.2 /usr/lib/libjemalloc.so.2; do
        if [ -f "$f" ]; then JEMALLOC=$f; break; fi
    done
    if [ -z "$JEMALLOC" ]; then
        echo "note: libjemalloc.so.2 is not installed (apt install libjemalloc2, or scripts/deps.sh --bench): its columns are skipped"
        use_jemalloc=0
    fi
fi
JE_PROF_CONF="prof:true,prof_active:true,lg_prof_sample:19"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

status=0

# ---- the columns ------------------------------------------------------------

# Each sets $rc and $elapsed; workload output is discarded.
col_bare() { run_timed "$TMP/bare.err" "$@"; }

col_memtrail() { # COLUMN REPORT_PREFIX CMD... (summary-fit: summary with canary=fit)
    local mode=$1 prefix=$2 opts=""; shift 2
    if [ "$mode" = summary-fit ]; then mode=summary opts="canary=fit:"; fi
    if [ "$direct" = 1 ]; then
        run_timed "$TMP/memtrail.err" env LD_PRELOAD="$AGENT" \
            MEMTRAIL_OPTIONS="${opts}mode=$mode:output=$prefix.%p.mtr" "$@"
    elif [ -n "$opts" ]; then
        run_timed "$TMP/memtrail.err" env MEMTRAIL_OPTIONS="${MEMTRAIL_OPTIONS:+$MEMTRAIL_OPTIONS:}${opts%:}" \
            "$MEMTRAIL" run --mode "$mode" -o "$prefix.%p.mtr" -- "$@"
    else
        run_timed "$TMP/memtrail.err" "$MEMTRAIL" run --mode "$mode" -o "$prefix.%p.mtr" -- "$@"
    fi
}

col_jemalloc() { run_timed "$TMP/jemalloc.err" env LD_PRELOAD="$JEMALLOC" "$@"; }
col_jeprof() { run_timed "$TMP/jemalloc.err" env LD_PRELOAD="$JEMALLOC" MALLOC_CONF="$JE_PROF_CONF" "$@"; }

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

# bench_workload NAME TARGET DETAIL_TARGET SAMPLE_TARGET LABEL CMD...: the
# targets are the ratios to bare that summary, detail and sampled mode must
# stay under ("" for none). The jemalloc+prof column's ratio is to jemalloc
# alone: the peer's own cost of sampling.
bench_workload() {
    local name=$1 target=$2 dtarget=$3 starget=$4 label=$5; shift 5
    local -a cols=(bare)
    local i prefix col
    if [ "$use_summary" = 1 ]; then cols+=(summary); fi
    if [ "$use_fit" = 1 ]; then cols+=(summary-fit); fi
    if [ "$use_detail" = 1 ]; then cols+=(detail); fi
    if [ "$use_sample" = 1 ]; then cols+=(sample); fi
    if [ "$use_jemalloc" = 1 ]; then cols+=(jemalloc jemalloc+prof); fi
    if [ "$use_heaptrack" = 1 ]; then cols+=(heaptrack); fi
    local -A times=()

    echo
    echo "== $name: $label"
    echo "   $runs timed runs each, interleaved ($(IFS=,; echo "${cols[*]}" | sed 's/,/, /g')), after one untimed warm-up"

    # Warm-up: page cache, and a first check that the workload runs at all.
    col_bare "$@"
    if [ "$rc" -ne 0 ]; then bare_failed "$name" "; workload skipped"; return; fi
    local -A dropped=()
    for ((i = 1; i <= runs; i++)); do
        for col in "${cols[@]}"; do
            if [ -n "${dropped[$col]:-}" ]; then continue; fi
            case $col in
            bare)
                col_bare "$@"
                if [ "$rc" -ne 0 ]; then bare_failed "$name" " (run $i)"; return; fi ;;
            summary|summary-fit|detail|sample)
                prefix=$TMP/mt-$col-$name-$i
                col_memtrail "$col" "$prefix" "$@"
                if [ "$rc" -ne 0 ]; then
                    echo "   FAILED: the workload exited with status $rc under memtrail $col (run $i; bare runs exit 0)"
                    show_err "$TMP/memtrail.err"
                    status=1; summary_lines+=("$name: FAILED under memtrail $col (status $rc)"); return
                fi
                if ! compgen -G "$prefix.*.mtr" >/dev/null; then
                    echo "   FAILED: memtrail $col wrote no report ($prefix.PID.mtr) in run $i"
                    show_err "$TMP/memtrail.err"
                    status=1; summary_lines+=("$name: FAILED under memtrail $col (no report)"); return
                fi ;;
            jemalloc|jemalloc+prof|heaptrack)
                case $col in
                jemalloc) col_jemalloc "$@" ;;
                jemalloc+prof) col_jeprof "$@" ;;
                heaptrack) col_heaptrack "$@" ;;
                esac
                if [ "$rc" -ne 0 ]; then
                    echo "   note: the workload exited with status $rc under $col; its column dropped"
                    show_err "$TMP/${col%%+*}.err"
                    dropped[$col]=1; times[$col]=""; continue
                fi ;;
            esac
            times[$col]+="$elapsed "
        done
    done

    local -A mins=() meds=()
    for col in "${cols[@]}"; do
        if [ -z "${times[$col]:-}" ]; then continue; fi
        # shellcheck disable=SC2086
        read -r "mins[$col]" "meds[$col]" < <(min_median ${times[$col]})
    done
    printf '   %-14s %10s %10s %14s %14s %14s\n' "" "min s" "median s" "x bare (min)" "x bare (med)" "x bare (pair)"
    local -A rmin=() rmed=() rpair=()
    for col in "${cols[@]}"; do
        if [ -z "${mins[$col]:-}" ]; then continue; fi
        rmin[$col]=$(ratio "${mins[$col]}" "${mins[bare]}"); rmed[$col]=$(ratio "${meds[$col]}" "${meds[bare]}")
        rpair[$col]=$(paired_ratio "${times[$col]}" "${times[bare]}")
        printf '   %-14s %10.3f %10.3f %14.3f %14.3f %14.3f\n' "$col" "${mins[$col]}" "${meds[$col]}" "${rmin[$col]}" \
            "${rmed[$col]}" "${rpair[$col]}"
    done
    local je_min="" je_med="" je_pair=""
    if [ -n "${mins[jemalloc+prof]:-}" ] && [ -n "${mins[jemalloc]:-}" ]; then
        je_min=$(ratio "${mins[jemalloc+prof]}" "${mins[jemalloc]}")
        je_med=$(ratio "${meds[jemalloc+prof]}" "${meds[jemalloc]}")
        je_pair=$(paired_ratio "${times[jemalloc+prof]}" "${times[jemalloc]}")
        printf '   jemalloc+prof x jemalloc: %.3f (min), %.3f (median), %.3f (paired): the peer sampling profiler'"'"'s own cost\n' \
            "$je_min" "$je_med" "$je_pair"
    fi

    local line="$name:" sep=" " verdict mode tgt
    for mode in summary summary-fit detail sample; do
        if [ -z "${rmin[$mode]:-}" ]; then continue; fi
        line+=$sep$(printf '%s %.3fx (median %.3fx, paired %.3fx)' "$mode" "${rmin[$mode]}" "${rmed[$mode]}" "${rpair[$mode]}")
        sep="; "
        case $mode in summary|summary-fit) tgt=$target ;; detail) tgt=$dtarget ;; sample) tgt=$starget ;; esac
        if [ -n "$tgt" ]; then
            verdict=$(awk -v r="${rmin[$mode]}" -v t="$tgt" 'BEGIN { print (r <= t) ? "met" : "NOT met" }')
            printf '   target: %s <= %sx bare: %s (%.3fx by min, %.3fx by median, %.3fx paired)\n' \
                "$([ "$mode" = summary-fit ] && echo "summary mode, canary=fit" || echo "$mode mode")" "$tgt" "$verdict" "${rmin[$mode]}" "${rmed[$mode]}" "${rpair[$mode]}"
            line+=", target <= ${tgt}x $verdict"
        fi
    done
    if [ -n "${rmin[summary]:-}" ]; then
        local allocs reallocs frees src what
        read -r allocs reallocs frees src < <(report_allocs "$(compgen -G "$TMP/mt-summary-$name-1.*.mtr" | head -n 1)")
        what="$(group "$allocs") allocations"
        if [ "$reallocs" != "?" ]; then what+=" + $(group "$reallocs") reallocs"; fi
        echo "   memtrail tracked: $what, $(group "$frees") frees (run 1, from $src)"
    fi
    local sites samples
    for mode in detail sample; do
        if [ -z "${rmin[$mode]:-}" ]; then continue; fi
        sites=$(awk '$1 == "sites" { sub(/^count=/, "", $2); print $2 }' "$(compgen -G "$TMP/mt-$mode-$name-1.*.mtr" | head -n 1)")
        if [ "$mode" = sample ]; then
            samples=$(awk '$1 == "site" { for (i = 2; i <= NF; i++) if ($i ~ /^samples=/) { sub(/^samples=/, "", $i); n += $i } }
                           END { print n + 0 }' "$(compgen -G "$TMP/mt-sample-$name-1.*.mtr" | head -n 1)")
            echo "   memtrail sample recorded ${sites:-?} allocation sites from $(group "${samples:-0}") sampled allocations (run 1)"
        else
            echo "   memtrail detail recorded ${sites:-?} allocation sites (run 1)"
        fi
    done
    if [ -n "$je_min" ]; then
        line+=$sep$(printf 'jemalloc+prof %.3fx of jemalloc (median %.3fx, paired %.3fx)' "$je_min" "$je_med" "$je_pair")
        sep="; "
    fi
    if [ -n "${rmin[heaptrack]:-}" ]; then
        line+=$sep$(printf 'heaptrack %.3fx (median %.3fx, paired %.3fx)' "${rmin[heaptrack]}" "${rmed[heaptrack]}" \
            "${rpair[heaptrack]}")
    fi
    summary_lines+=("$line")
}

# ---- the workloads ----------------------------------------------------------

host_cpus=$(nproc 2>/dev/null || echo "?")
echo "memtrail overhead benchmark: summary, detail and sampled mode vs bare; heaptrack; jemalloc+prof vs jemalloc"
echo "   machine: $(uname -srm), $host_cpus CPUs; wall time of whole runs, min-of-runs is the headline"
if [ "$use_memtrail" = 1 ]; then
    if [ "$direct" = 1 ]; then
        echo "   memtrail timed as the agent alone: LD_PRELOAD=$AGENT MEMTRAIL_OPTIONS=mode=summary|detail|sample:output=..."
    else
        echo "   memtrail timed through the CLI: $MEMTRAIL run --mode summary|detail|sample -o FILE -- CMD (default depth 4, sample rate 512 KiB)"
    fi
    if [ "$use_fit" = 1 ]; then
        echo "   summary-fit: summary mode with MEMTRAIL_OPTIONS=canary=fit (docs/canary.md)"
    fi
else
    echo "   memtrail column skipped (--no-memtrail)"
fi
if [ "$use_heaptrack" = 1 ]; then
    echo "   heaptrack: $(command -v heaptrack) -o TMPFILE CMD ($(heaptrack --version 2>/dev/null | head -n 1))"
fi
if [ "$use_jemalloc" = 1 ]; then
    echo "   jemalloc: LD_PRELOAD=$JEMALLOC; jemalloc+prof: the same with MALLOC_CONF=$JE_PROF_CONF"
fi
if [ "$quick" = 1 ]; then echo "   --quick: a smoke test (2 runs, mbench 2x200000 ops), not a result"; fi

want() { [ -z "$only" ] || [ "$only" = "$1" ]; }

if want mbench; then
    mbench=$(mbench_binary)
    ops=2000000
    if [ "$quick" = 1 ]; then ops=200000; fi
    bench_workload mbench 1.15 2.5 1.20 "mbench 2 $ops 4096 (gcc -O2 -pthread)" "$mbench" 2 "$ops" 4096
fi

if want sqlite; then
    if command -v sqlite3 >/dev/null 2>&1; then
        sqlite=$(command -v sqlite3)
        sql=$(sqlite_read_arg)
        bench_workload sqlite 1.03 1.3 1.04 "sqlite3 :memory: \"$sql\"" "$sqlite" :memory: "$sql"
    else
        echo; echo "== sqlite: skipped, sqlite3 is not installed (apt install sqlite3, or scripts/deps.sh)"
        summary_lines+=("sqlite: skipped (no sqlite3)")
    fi
fi

if want python; then
    if [ "$have_python" = 1 ]; then
        python=$(python_binary)
        bench_workload python "" "" "" "$python $BENCH_SRC/pyalloc.py" "$python" "$BENCH_SRC/pyalloc.py"
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

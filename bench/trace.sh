#!/usr/bin/env bash
# memtrail's trace mode against heaptrack, measured side by side in one run,
# on the shared workloads (../shared/bench: the mbench malloc microbenchmark,
# SQLite, CPython):
#  1. Recording: wall time bare / `memtrail run --mode trace --allow-loss`
#     (the program never waits for the disk, losses counted) / the default
#     (--no-loss: nothing lost) / heaptrack; min and median of interleaved
#     runs (bare, trace --allow-loss, trace, heaptrack, bare, ...) after one
#     untimed bare warm-up; events recorded and lost; file sizes and bytes
#     per event.
#  2. Analysis: `memtrail analyze --json` against `heaptrack_print` (its full
#     default analysis, output to /dev/null) on each workload's traces (run
#     1's): wall time, events/s, peak RSS (/usr/bin/time -f %M).
#  3. Synthetic: a trace of >= 100 M events with >= 1 M blocks live at once
#     (bench/tracegen), analysed against the bound 32 MiB + 12 B x max live.
#  4. Threads (issue 18): bench/tthreads (each of N threads makes PAIRS
#     malloc/free pairs on a 256-slot table, sizes 16-527 B) at each thread
#     count: bare / memtrail trace with the default options / heaptrack,
#     interleaved, min and median; events written and lost (the goal: 0 at
#     every count); events/s, and per encoder thread; peak RSS (VmHWM of
#     the traced process itself: the agent is preloaded directly, as
#     `memtrail run` does, under /usr/bin/time -f %M) beyond the bare run's;
#     mbench bare / traced the same way (time and RSS); and the encoders'
#     speed-up, trace_threads=1 against trace_threads=2 (skipped with a
#     note when the agent does not know the option). Goals are printed
#     beside the figures: 8 threads <= 0.35x heaptrack's time, mbench <=
#     2.5x bare, RSS <= 16 MB beyond bare on mbench.
# It prints figures and asserts nothing about them.
#
# How events are counted (bytes per event):
#   memtrail   "events" of `memtrail analyze --json` (every event read:
#              allocs + frees + reallocs + mapping changes)
#   heaptrack  its .zst decompressed (zstdcat): '+' lines (allocations, a
#              realloc's new block included: what heaptrack_print reports as
#              "calls to allocation functions") plus '-' lines (frees, a
#              realloc's old block included). heaptrack's B/event is also
#              given per memtrail's event count of the same workload.
#
# Usage: bench/trace.sh [--runs N] [--quick] [--only mbench|sqlite|python|threads]
#                       [--no-heaptrack] [--no-synthetic]
#                       [--synthetic-events N] [--synthetic-live N]
#                       [--threads LIST] [--no-threads] [--pairs N]
#                       [--trace-options OPTS]
#   --runs N              timed runs per column (default 5)
#   --quick               2 runs, mbench 2x200000 ops, a synthetic trace of
#                         2 M events / 100 k live, 200000 pairs a thread in
#                         part 4: a smoke test, not a result
#   --only W              one workload (the synthetic part and part 4 still
#                         run); --only threads: part 4 alone
#   --no-heaptrack        skip heaptrack and heaptrack_print
#   --no-synthetic        skip part 3 (it takes a minute and ~400 MB of disk)
#   --synthetic-events N  events in the synthetic trace (default 100000000)
#   --synthetic-live N    blocks kept live in it (default 1000000)
#   --threads LIST        part 4's thread counts (default 1,2,4,8,32)
#   --no-threads          skip part 4
#   --pairs N             part 4: malloc/free pairs per thread (default
#                         2000000; --quick: 200000)
#   --trace-options OPTS  part 4: agent options added to every memtrail run
#                         (MEMTRAIL_OPTIONS syntax, e.g. trace_loss=wait)
# Environment: MT_SHARED (default ROOT/../shared), BUILD (default build),
#   TRACEGEN (the generator; default BUILD/bench/tracegen, built with
#   `make tracegen` when bench/tracegen.c is there), TTHREADS (part 4's
#   workload; default BUILD/bench/tthreads, built with `make tthreads`),
#   TMPDIR.
# Exit status: 0; 1 when a workload or an analysis fails under memtrail (or
# bare), or memtrail is not built; 2 on bad usage.
set -euo pipefail

die() { echo "trace.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=5 quick=0 only="" use_heaptrack=1 use_synthetic=1
syn_events=100000000 syn_live=1000000 syn_set=0
use_threads=1 thread_list=1,2,4,8,32 pairs=2000000 pairs_set=0 trace_opts=""

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
bad_usage() { echo "trace.sh: $*" >&2; echo "try: bench/trace.sh --help" >&2; exit 2; }
need_arg() { [ "$1" -ge 2 ] || bad_usage "$2 needs a value"; }

while [ $# -gt 0 ]; do
    case $1 in
        --runs) need_arg $# "$1"; runs=$2; shift ;;
        --runs=*) runs=${1#--runs=} ;;
        --quick) quick=1 ;;
        --only) need_arg $# "$1"; only=$2; shift ;;
        --only=*) only=${1#--only=} ;;
        --no-heaptrack) use_heaptrack=0 ;;
        --no-synthetic) use_synthetic=0 ;;
        --synthetic-events) need_arg $# "$1"; syn_events=$2; syn_set=1; shift ;;
        --synthetic-events=*) syn_events=${1#*=}; syn_set=1 ;;
        --synthetic-live) need_arg $# "$1"; syn_live=$2; syn_set=1; shift ;;
        --synthetic-live=*) syn_live=${1#*=}; syn_set=1 ;;
        --threads) need_arg $# "$1"; thread_list=$2; shift ;;
        --threads=*) thread_list=${1#*=} ;;
        --no-threads) use_threads=0 ;;
        --pairs) need_arg $# "$1"; pairs=$2; pairs_set=1; shift ;;
        --pairs=*) pairs=${1#*=}; pairs_set=1 ;;
        --trace-options) need_arg $# "$1"; trace_opts=$2; shift ;;
        --trace-options=*) trace_opts=${1#*=} ;;
        -h|--help) usage; exit 0 ;;
        *) bad_usage "unknown option '$1'" ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || bad_usage "--runs wants a positive integer, not '$runs'"
[[ $syn_events =~ ^[1-9][0-9]*$ ]] || bad_usage "--synthetic-events wants a positive integer, not '$syn_events'"
[[ $syn_live =~ ^[1-9][0-9]*$ ]] || bad_usage "--synthetic-live wants a positive integer, not '$syn_live'"
case $only in ""|mbench|sqlite|python|threads) ;; *) bad_usage "--only wants mbench, sqlite, python or threads, not '$only'" ;; esac
[[ $thread_list =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bad_usage "--threads wants counts like 1,2,4,8,32, not '$thread_list'"
for n in ${thread_list//,/ }; do [ "$n" -le 256 ] || bad_usage "--threads: at most 256 threads, not $n"; done
[[ $pairs =~ ^[1-9][0-9]*$ ]] || bad_usage "--pairs wants a positive integer, not '$pairs'"
if [ "$only" = threads ] && [ "$use_threads" = 0 ]; then bad_usage "--only threads and --no-threads leave nothing to run"; fi
if [ "$quick" = 1 ]; then
    runs=2
    if [ "$syn_set" = 0 ]; then syn_events=2000000 syn_live=100000; fi
    if [ "$pairs_set" = 0 ]; then pairs=200000; fi
fi
if [ "$only" = threads ]; then use_synthetic=0; fi
[ -d "$BENCH_SRC" ] || die "workloads not found: $BENCH_SRC (set MT_SHARED to the shared directory)"
if [ ! -x "$MEMTRAIL" ] || [ ! -f "$AGENT" ]; then
    die "memtrail is not built ($MEMTRAIL, $AGENT): run 'make' first"
fi
if [ "$use_heaptrack" = 1 ]; then
    if ! command -v heaptrack >/dev/null 2>&1 || ! command -v heaptrack_print >/dev/null 2>&1; then
        echo "note: heaptrack/heaptrack_print not installed (scripts/deps.sh --bench, or apt install heaptrack): heaptrack columns skipped"
        use_heaptrack=0
    fi
fi
have_zstdcat=0
if command -v zstdcat >/dev/null 2>&1; then have_zstdcat=1; fi
have_time=0
if [ -x /usr/bin/time ]; then have_time=1; fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-trace-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

status=0
summary_lines=()

# ---- helpers ----------------------------------------------------------------

# json_num FILE PATH: a number from a JSON file (PATH like "peak.count");
# prints "?" when absent.
json_num() {
    local f=$1 path=$2
    if [ "$have_python" = 1 ]; then
        python3 - "$f" "$path" <<'EOF' 2>/dev/null || echo "?"
import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[k]
if isinstance(d, bool) or not isinstance(d, (int, float)):
    sys.exit(1)
print(d)
EOF
    else # the first occurrence of the last key: right for the top-level keys
        local v
        v=$(grep -o "\"${path##*.}\": *[0-9]*" "$f" | head -n 1 | sed 's/.*: *//')
        echo "${v:-?}"
    fi
}

# run_measured LOG CMD...: run_timed, plus the peak RSS of CMD in KiB in $rss_kb
# ("?" when neither /usr/bin/time nor python3 is there).
run_measured() {
    local log=$1; shift
    if [ "$have_time" = 1 ]; then
        run_timed "$log" /usr/bin/time -f %M -o "$TMP/rss" "$@"
        rss_kb=$(tail -n 1 "$TMP/rss" 2>/dev/null || echo "?")
    elif [ "$have_python" = 1 ]; then
        run_timed "$log" python3 -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$TMP/rss" "$@"
        rss_kb=$(tail -n 1 "$TMP/rss" 2>/dev/null || echo "?")
    else
        run_timed "$log" "$@"
        rss_kb="?"
    fi
    [[ $rss_kb =~ ^[0-9]+$ ]] || rss_kb="?"
}

max_of() { printf '%s\n' "$@" | grep -E '^[0-9]+$' | sort -n | tail -n 1 || true; }
fsize() { stat -c %s "$1"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e6 }'; }
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; }
mevs() { awk -v e="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.2f", e / s / 1e6; else print "-" }'; }
kib_mb() { if [ "$1" = "?" ]; then echo "?"; else awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; fi; }

# The "memtrail: trace: N events, M lost, B bytes in FILE" lines of a run's
# stderr: prints "N M" summed over them (a process per line), or "? ?".
trace_line() {
    awk '/^memtrail: trace: [0-9]+ events, [0-9]+ lost/ { n += $3; m += $5; k++ }
         END { if (k) print n, m; else print "?", "?" }' "$1"
}

# heaptrack_counts FILE: "PLUS MINUS" lines of a heaptrack data file.
heaptrack_counts() {
    if [ "$have_zstdcat" = 1 ]; then
        case $1 in
            *.zst) zstdcat "$1" ;;
            *.gz) zcat "$1" ;;
            *) cat "$1" ;;
        esac | awk '/^\+/ { p++ } /^-/ { m++ } END { print p + 0, m + 0 }'
    else
        echo "? ?"
    fi
}

# ---- machine ----------------------------------------------------------------

cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
mem_total=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null || true)
echo "memtrail trace-mode benchmark: recording, file size and analysis vs heaptrack"
echo "   machine: $(uname -srm), nproc $(nproc 2>/dev/null || echo '?'), ${cpu_model:-unknown CPU}, ${mem_total:-? GiB} RAM"
echo "   memtrail: $("$MEMTRAIL" --version 2>/dev/null | head -n 1) ($(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo 'no git'))"
if [ "$use_heaptrack" = 1 ]; then
    echo "   heaptrack: $(heaptrack --version 2>/dev/null | head -n 1), $(heaptrack_print --version 2>/dev/null | head -n 1)"
fi
echo "   wall time of whole runs (EPOCHREALTIME), $runs timed runs per column, interleaved; min is the headline, median beside it"
echo "   peak RSS: $(if [ "$have_time" = 1 ]; then echo '/usr/bin/time -f %M'; elif [ "$have_python" = 1 ]; then echo 'getrusage(RUSAGE_CHILDREN) via python3'; else echo 'not measured'; fi)"
if [ "$quick" = 1 ]; then echo "   --quick: a smoke test (2 runs, mbench 2x200000 ops, small synthetic trace, 200000 pairs a thread), not a result"; fi

# ---- 1. recording -----------------------------------------------------------

# Per workload, kept for part 2: the traces (run 1) and their event counts.
declare -A mt_file ht_file mt_events ht_events mt_which

# record_workload NAME LABEL CMD...
record_workload() {
    local name=$1 label=$2; shift 2
    local -a t_bare=() t_tr=() t_nl=() t_ht=() lost_tr=() lost_nl=()
    local -A size=() line_events=()
    local i f n m ht=$use_heaptrack cols="bare, trace --allow-loss, trace --no-loss (the default)"
    if [ "$ht" = 1 ]; then cols+=", heaptrack"; fi
    echo
    echo "-- $name: $label"
    echo "   $runs timed runs each, interleaved ($cols), after one untimed bare warm-up"

    col_bare() { run_timed "$TMP/bare.err" "$@"; }
    col_bare "$@"
    if [ "$rc" -ne 0 ]; then bare_failed "$name" "; workload skipped"; return; fi
    for ((i = 1; i <= runs; i++)); do
        col_bare "$@"
        if [ "$rc" -ne 0 ]; then bare_failed "$name" " (run $i)"; return; fi
        t_bare+=("$elapsed")

        local kind
        for kind in tr nl; do
            f=$TMP/$name-$kind-$i.mtt
            local -a extra=()
            if [ "$kind" = nl ]; then extra=(--no-loss); else extra=(--allow-loss); fi
            run_timed "$TMP/mt.err" "$MEMTRAIL" run --mode trace "${extra[@]}" -o "$f" -- "$@"
            local what="memtrail trace${extra[*]:+ ${extra[*]}}"
            if [ "$rc" -ne 0 ]; then
                echo "   FAILED: the workload exited with status $rc under $what (run $i; bare runs exit 0)"
                show_err "$TMP/mt.err"
                status=1; summary_lines+=("$name: FAILED under $what (status $rc)"); return
            fi
            if [ ! -s "$f" ]; then
                echo "   FAILED: $what wrote no trace ($f) in run $i"
                show_err "$TMP/mt.err"
                status=1; summary_lines+=("$name: FAILED under $what (no trace)"); return
            fi
            read -r n m < <(trace_line "$TMP/mt.err")
            if [ "$kind" = tr ]; then
                t_tr+=("$elapsed"); lost_tr+=("$m")
            else
                t_nl+=("$elapsed"); lost_nl+=("$m")
            fi
            if [ "$i" = 1 ]; then
                size[$kind]=$(fsize "$f"); line_events[$kind]=$n
            else
                rm -f "$f"
            fi
        done

        if [ "$ht" = 1 ]; then
            rm -rf "$TMP/ht-$name-$i"; mkdir "$TMP/ht-$name-$i"
            run_timed "$TMP/ht.err" heaptrack -o "$TMP/ht-$name-$i/trace" "$@"
            f=$(compgen -G "$TMP/ht-$name-$i/trace.*" | head -n 1 || true)
            if [ "$rc" -ne 0 ] || [ -z "$f" ]; then
                echo "   note: the workload exited with status $rc under heaptrack (or it wrote no file); heaptrack column dropped"
                show_err "$TMP/ht.err"
                ht=0; t_ht=()
            else
                t_ht+=("$elapsed")
                if [ "$i" = 1 ]; then ht_file[$name]=$f; else rm -rf "$TMP/ht-$name-$i"; fi
            fi
        fi
    done
    if [ "$ht" = 0 ]; then unset "ht_file[$name]"; fi

    local b_min b_med r_min r_med n_min n_med h_min h_med
    read -r b_min b_med < <(min_median "${t_bare[@]}")
    read -r r_min r_med < <(min_median "${t_tr[@]}")
    read -r n_min n_med < <(min_median "${t_nl[@]}")
    printf '   %-17s %8s %8s %9s %9s %9s %9s\n' "" "min s" "med s" "x bare" "x bare" "x htrack" "x htrack"
    printf '   %-17s %8s %8s %9s %9s %9s %9s\n' "" "" "" "(min)" "(med)" "(min)" "(med)"
    row() { # LABEL MIN MED
        local hm="" hd=""
        if [ "${#t_ht[@]}" -gt 0 ]; then hm=$(ratio "$2" "$h_min"); hd=$(ratio "$3" "$h_med"); fi
        printf '   %-17s %8.3f %8.3f %9.2f %9.2f %9s %9s\n' "$1" "$2" "$3" \
            "$(ratio "$2" "$b_min")" "$(ratio "$3" "$b_med")" \
            "${hm:+$(printf '%.2f' "$hm")}" "${hd:+$(printf '%.2f' "$hd")}"
    }
    if [ "${#t_ht[@]}" -gt 0 ]; then read -r h_min h_med < <(min_median "${t_ht[@]}"); fi
    row bare "$b_min" "$b_med"
    row "trace --allow-loss" "$r_min" "$r_med"
    row "trace (no loss)" "$n_min" "$n_med"
    if [ "${#t_ht[@]}" -gt 0 ]; then row heaptrack "$h_min" "$h_med"; fi

    # Events: from the analysis of run 1's traces.
    local ev_tr ev_nl lost_an_tr
    "$MEMTRAIL" analyze --json "$TMP/$name-tr-1.mtt" >"$TMP/$name-tr.json" 2>"$TMP/an.err" || {
        echo "   FAILED: memtrail analyze --json failed on the default trace of run 1 (status $?)"
        show_err "$TMP/an.err"; status=1; summary_lines+=("$name: FAILED analyze"); return; }
    "$MEMTRAIL" analyze --json "$TMP/$name-nl-1.mtt" >"$TMP/$name-nl.json" 2>"$TMP/an.err" || {
        echo "   FAILED: memtrail analyze --json failed on the --no-loss trace of run 1 (status $?)"
        show_err "$TMP/an.err"; status=1; summary_lines+=("$name: FAILED analyze"); return; }
    ev_tr=$(json_num "$TMP/$name-tr.json" events)
    ev_nl=$(json_num "$TMP/$name-nl.json" events)
    lost_an_tr=$(json_num "$TMP/$name-tr.json" events_lost)
    echo "   events recorded (run 1, memtrail analyze --json \"events\"): trace $(group "$ev_tr") (\"events_lost\" $lost_an_tr), --no-loss $(group "$ev_nl")"
    echo "   (the run's own line said: trace $(group "${line_events[tr]}") events, --no-loss $(group "${line_events[nl]}") events)"
    echo "   events lost per run (memtrail's 'trace: ... M lost' line): trace: ${lost_tr[*]}; --no-loss: ${lost_nl[*]}"

    # Which memtrail trace part 2 analyses: the default one unless it lost events.
    if [ "${lost_tr[0]}" = 0 ]; then
        mt_file[$name]=$TMP/$name-tr-1.mtt; mt_events[$name]=$ev_tr; mt_which[$name]="default retention"
    else
        mt_file[$name]=$TMP/$name-nl-1.mtt; mt_events[$name]=$ev_nl; mt_which[$name]="--no-loss (the default; --allow-loss lost events)"
    fi

    # Sizes.
    local hsz="" hp="?" hm="?" hev="?" hcalls="?"
    echo "   file sizes (run 1):"
    printf '   %-19s %13s %13s %9s %13s\n' "" bytes events "B/event" "B/our event"
    printf '   %-19s %13s %13s %9s %13s\n' "memtrail trace" "$(group "${size[tr]}")" "$(group "$ev_tr")" \
        "$(per "${size[tr]}" "$ev_tr")" "$(per "${size[tr]}" "$ev_tr")"
    printf '   %-19s %13s %13s %9s %13s\n' "memtrail --no-loss" "$(group "${size[nl]}")" "$(group "$ev_nl")" \
        "$(per "${size[nl]}" "$ev_nl")" "$(per "${size[nl]}" "$ev_nl")"
    if [ -n "${ht_file[$name]:-}" ]; then
        hsz=$(fsize "${ht_file[$name]}")
        read -r hp hm < <(heaptrack_counts "${ht_file[$name]}")
        if [ "$hp" != "?" ]; then hev=$((hp + hm)); fi
        ht_events[$name]=$hev
        printf '   %-19s %13s %13s %9s %13s\n' "heaptrack ${ht_file[$name]##*.}" "$(group "$hsz")" "$(group "$hev")" \
            "$(per "$hsz" "$hev")" "$(per "$hsz" "$ev_nl")"
        # heaptrack_print's own count, for the record (its summary, untimed).
        heaptrack_print "${ht_file[$name]}" >"$TMP/$name-htp.txt" 2>/dev/null || true
        hcalls=$(sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p' "$TMP/$name-htp.txt" | head -n 1)
        echo "   heaptrack events = '+' lines $(group "$hp") + '-' lines $(group "$hm") of the zstdcat'ed file;" \
            "heaptrack_print's \"calls to allocation functions\": $(group "${hcalls:-?}")"
        echo "   B/our event = heaptrack's bytes / memtrail's event count (--no-loss trace) of the same workload"
        printf '   size memtrail/heaptrack: %s (trace), %s (--no-loss)\n' \
            "$(ratio "${size[tr]}" "$hsz")" "$(ratio "${size[nl]}" "$hsz")"
    fi

    local line
    line=$(printf '%s: trace %.2fx bare, --no-loss %.2fx' "$name" "$(ratio "$r_min" "$b_min")" "$(ratio "$n_min" "$b_min")")
    if [ "${#t_ht[@]}" -gt 0 ]; then
        line+=$(printf ', heaptrack %.2fx; trace/heaptrack time %.2f' "$(ratio "$h_min" "$b_min")" "$(ratio "$r_min" "$h_min")")
    fi
    line+=", $(per "${size[tr]}" "$ev_tr") B/event"
    if [ -n "$hsz" ]; then line+=", size/heaptrack $(ratio "${size[tr]}" "$hsz")"; fi
    line+=", lost $(IFS=+; echo "${lost_tr[*]}")"
    summary_lines+=("$line")
}

want() { [ -z "$only" ] || [ "$only" = "$1" ]; }
if [ "$only" = threads ]; then echo; echo "== 1.-3. skipped (--only threads)"; fi
workloads=()

if [ "$only" != threads ]; then
echo
echo "== 1. Recording: bare / memtrail run --mode trace [--allow-loss|--no-loss (the default)] -o FILE / heaptrack -o FILE"
fi
if want mbench; then
    mbench=$(mbench_binary)
    ops=2000000
    if [ "$quick" = 1 ]; then ops=200000; fi
    record_workload mbench "mbench 2 $ops 4096 (gcc -O2 -pthread)" "$mbench" 2 "$ops" 4096
    workloads+=(mbench)
fi
if want sqlite; then
    if command -v sqlite3 >/dev/null 2>&1; then
        sql=$(sqlite_read_arg)
        record_workload sqlite "sqlite3 :memory: \"$sql\" ($(sqlite3 --version | cut -d' ' -f1))" \
            "$(command -v sqlite3)" :memory: "$sql"
        workloads+=(sqlite)
    else
        echo; echo "-- sqlite: skipped, sqlite3 is not installed (apt install sqlite3, or scripts/deps.sh)"
        summary_lines+=("sqlite: skipped (no sqlite3)")
    fi
fi
if want python; then
    if [ "$have_python" = 1 ]; then
        python=$(python_binary)
        record_workload python "$python $BENCH_SRC/pyalloc.py ($("$python" --version 2>&1))" \
            "$python" "$BENCH_SRC/pyalloc.py"
        workloads+=(python)
    else
        echo; echo "-- python: skipped, python3 is not installed (apt install python3, or scripts/deps.sh)"
        summary_lines+=("python: skipped (no python3)")
    fi
fi

# ---- 2. analysis ------------------------------------------------------------

if [ "$only" != threads ]; then
echo
echo "== 2. Analysis: memtrail analyze --json TRACE >/dev/null vs heaptrack_print FILE >/dev/null (full default analysis)"
echo "   events/s = each tool's own event count (as in part 1) / its wall time"
fi
for name in "${workloads[@]}"; do
    [ -n "${mt_file[$name]:-}" ] || continue
    local_ht=${ht_file[$name]:-}
    echo
    echo "-- $name: memtrail's trace of run 1 (${mt_which[$name]}), $(group "${mt_events[$name]}") events$(
        if [ -n "$local_ht" ]; then echo "; heaptrack's of run 1, $(group "${ht_events[$name]}") events"; fi)"
    # Warm-up (page cache), untimed.
    "$MEMTRAIL" analyze --json "${mt_file[$name]}" >/dev/null 2>&1 || true
    if [ -n "$local_ht" ]; then heaptrack_print "$local_ht" >/dev/null 2>&1 || true; fi
    t_mt=() t_hp=() r_mt=() r_hp=() failed=0
    for ((i = 1; i <= runs; i++)); do
        run_measured "$TMP/an.err" "$MEMTRAIL" analyze --json "${mt_file[$name]}"
        if [ "$rc" -ne 0 ]; then
            echo "   FAILED: memtrail analyze --json exited with status $rc (run $i)"
            show_err "$TMP/an.err"
            status=1; summary_lines+=("$name analysis: FAILED (status $rc)"); failed=1; break
        fi
        t_mt+=("$elapsed"); r_mt+=("$rss_kb")
        if [ -n "$local_ht" ]; then
            run_measured "$TMP/htp.err" heaptrack_print "$local_ht"
            if [ "$rc" -ne 0 ]; then
                echo "   note: heaptrack_print exited with status $rc; its column dropped"
                show_err "$TMP/htp.err"; local_ht=""; t_hp=()
            else
                t_hp+=("$elapsed"); r_hp+=("$rss_kb")
            fi
        fi
    done
    [ "$failed" = 0 ] || continue
    read -r m_min m_med < <(min_median "${t_mt[@]}")
    m_rss=$(max_of "${r_mt[@]}"); m_rss=${m_rss:-?}
    printf '   %-16s %8s %8s %13s %12s %12s %12s\n' "" "min s" "med s" events "M ev/s (min)" "M ev/s (med)" "peak RSS MB"
    printf '   %-16s %8.3f %8.3f %13s %12s %12s %12s\n' "memtrail analyze" "$m_min" "$m_med" "$(group "${mt_events[$name]}")" \
        "$(mevs "${mt_events[$name]}" "$m_min")" "$(mevs "${mt_events[$name]}" "$m_med")" "$(kib_mb "$m_rss")"
    line="$name analysis: memtrail $(mevs "${mt_events[$name]}" "$m_min") M ev/s, $(kib_mb "$m_rss") MB"
    if [ "${#t_hp[@]}" -gt 0 ]; then
        read -r p_min p_med < <(min_median "${t_hp[@]}")
        p_rss=$(max_of "${r_hp[@]}"); p_rss=${p_rss:-?}
        hev=${ht_events[$name]}
        printf '   %-16s %8.3f %8.3f %13s %12s %12s %12s\n' "heaptrack_print" "$p_min" "$p_med" "$(group "$hev")" \
            "$(mevs "$hev" "$p_min")" "$(mevs "$hev" "$p_med")" "$(kib_mb "$p_rss")"
        sp_ev=$(awk -v me="${mt_events[$name]}" -v mt="$m_min" -v he="$hev" -v ht="$p_min" \
            'BEGIN { if (mt > 0 && ht > 0 && he > 0) printf "%.2f", (me / mt) / (he / ht); else print "nan" }')
        sp_t=$(ratio "$p_min" "$m_min")
        verdict=$(awk -v a="$sp_ev" 'BEGIN { print (a + 0 >= 5) ? "met" : "NOT met" }')
        echo "   speed memtrail/heaptrack: ${sp_ev}x in events/s (each its own count), ${sp_t}x in wall time on the same workload (min of runs); target >= 5x events/s: $verdict"
        rr="?"
        if [ "$m_rss" != "?" ] && [ "$p_rss" != "?" ]; then rr=$(ratio "$m_rss" "$p_rss"); fi
        echo "   peak RSS memtrail/heaptrack: $rr"
        line+="; heaptrack_print $(mevs "$hev" "$p_min") M ev/s, $(kib_mb "$p_rss") MB; speed ${sp_ev}x (ev/s), ${sp_t}x (time), target 5x $verdict; RSS ratio $rr"
    fi
    summary_lines+=("$line")
done

# ---- 3. synthetic -----------------------------------------------------------

if [ "$only" != threads ]; then
echo
echo "== 3. Synthetic trace: bench/tracegen, analysed in bounded memory"
fi
if [ "$only" = threads ]; then
    : # part 4 alone
elif [ "$use_synthetic" = 0 ]; then
    echo "   skipped (--no-synthetic)"
else
    tracegen=${TRACEGEN:-$BUILD_DIR/bench/tracegen}
    if [ -z "${TRACEGEN:-}" ] && [ -f "$ROOT/bench/tracegen.c" ]; then
        make -s -C "$ROOT" BUILD="$BUILD_DIR" tracegen >"$TMP/make.log" 2>&1 ||
            { echo "   note: make tracegen failed:"; show_err "$TMP/make.log"; }
    fi
    avail_kb=$(df -Pk "$TMP" | awk 'NR == 2 { print $4 }')
    need_kb=$((syn_events * 6 / 1024)) # tracegen writes ~3.5 B/event; a margin
    if [ ! -x "$tracegen" ]; then
        echo "   skipped: no generator ($tracegen; bench/tracegen.c + make tracegen, or set TRACEGEN)"
        summary_lines+=("synthetic: skipped (no tracegen)")
    elif [ "${avail_kb:-0}" -lt "$need_kb" ]; then
        echo "   skipped: $((avail_kb / 1024)) MiB free in $TMP, ~$((need_kb / 1024)) MiB wanted (set TMPDIR)"
        summary_lines+=("synthetic: skipped (disk)")
    else
        syn=$TMP/synthetic.mtt
        echo "   $tracegen -o FILE -n $syn_events -l $syn_live"
        run_timed "$TMP/gen.err" "$tracegen" -o "$syn" -n "$syn_events" -l "$syn_live"
        gen_s=$(awk -v u="$elapsed" 'BEGIN { printf "%.2f", u / 1e6 }')
        if [ "$rc" -ne 0 ] || [ ! -s "$syn" ]; then
            echo "   FAILED: tracegen exited with status $rc"
            show_err "$TMP/gen.err"
            status=1; summary_lines+=("synthetic: FAILED (tracegen)")
        else
            ssz=$(fsize "$syn")
            echo "   generated in ${gen_s} s: $(group "$ssz") bytes ($(mb "$ssz") MB, $(per "$ssz" "$syn_events") B/event)"
            run_measured "$TMP/an.err" "$MEMTRAIL" analyze --json "$syn"
            an_rc=$rc an_us=$elapsed an_rss=$rss_kb
            "$MEMTRAIL" analyze --json "$syn" >"$TMP/syn.json" 2>/dev/null || true # the figures (untimed)
            rm -f "$syn"
            if [ "$an_rc" -ne 0 ]; then
                echo "   FAILED: memtrail analyze --json exited with status $an_rc"
                show_err "$TMP/an.err"
                status=1; summary_lines+=("synthetic: FAILED (analyze status $an_rc)")
            else
                sev=$(json_num "$TMP/syn.json" events)
                pk=$(json_num "$TMP/syn.json" peak.count)
                lc=$(json_num "$TMP/syn.json" live.count)
                mx=$(json_num "$TMP/syn.json" live.max_count)
                maxlive=$(max_of "$pk" "$lc" "$mx"); maxlive=${maxlive:-?}
                an_s=$(awk -v u="$an_us" 'BEGIN { printf "%.3f", u / 1e6 }')
                echo "   memtrail analyze --json: $(group "$sev") events in ${an_s} s = $(mevs "$sev" "$an_s") M events/s, peak RSS $(kib_mb "$an_rss") MB ($an_rss KiB)"
                echo "   max live = the largest of \"peak.count\" ($(group "$pk")), \"live.count\" at the end ($(group "$lc"))$(
                    [ "$mx" != "?" ] && echo " and \"live.max_count\" ($(group "$mx"))") of the JSON: $(group "$maxlive")"
                if [ "$maxlive" != "?" ] && [ "$an_rss" != "?" ]; then
                    bound=$((33554432 + 12 * maxlive))
                    rss_b=$((an_rss * 1024))
                    within=$([ "$rss_b" -le "$bound" ] && echo yes || echo no)
                    echo "   bound 32 MiB + 12 B x $(group "$maxlive") = $(group "$bound") bytes ($(mb "$bound") MB); peak RSS $(group "$rss_b") bytes ($(mb "$rss_b") MB): within bound: $within ($(ratio "$rss_b" "$bound") of it)"
                    summary_lines+=("synthetic: $(group "$sev") events, $(group "$maxlive") live: $(mevs "$sev" "$an_s") M ev/s, RSS $(mb "$rss_b") MB vs bound $(mb "$bound") MB: within bound: $within")
                else
                    echo "   within bound: unknown (max live or RSS not measured)"
                    summary_lines+=("synthetic: $(group "$sev") events: $(mevs "$sev" "$an_s") M ev/s, bound not checked")
                fi
            fi
        fi
    fi
fi

# ---- 4. threads -------------------------------------------------------------

# traced_opts OUT [MORE]: MEMTRAIL_OPTIONS of a traced run, as `memtrail
# run --mode trace -o OUT` makes it: the caller's MEMTRAIL_OPTIONS, part
# 4's --trace-options, MORE, then mode and output (later keys win).
traced_opts() {
    local o=${MEMTRAIL_OPTIONS:-}
    if [ -n "$trace_opts" ]; then o=${o:+$o:}$trace_opts; fi
    if [ -n "${2:-}" ]; then o=${o:+$o:}$2; fi
    echo "${o:+$o:}mode=trace:output=$1"
}
# run_traced LOG OUT MORE CMD...: run_measured of CMD with the agent
# preloaded directly, so that the peak RSS is the traced process's own.
run_traced() {
    local log=$1 out=$2 more=$3; shift 3
    run_measured "$log" env MEMTRAIL_OPTIONS="$(traced_opts "$out" "$more")" LD_PRELOAD="$AGENT" "$@"
}
mb_of_kb() { if [[ $1 =~ ^-?[0-9]+$ ]]; then awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; else echo "?"; fi; }
goal() { # VALUE OP LIMIT: "met" or "NOT met" ("?" when VALUE is not a number)
    awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN {
        if (v !~ /^-?[0-9.]+$/) { print "?"; exit }
        ok = (op == "<=") ? (v + 0 <= l + 0) : (v + 0 == l + 0)
        print ok ? "met" : "NOT met" }'
}
all_zero() { local x; for x in "$@"; do [ "$x" = 0 ] || return 1; done; }

# Does the agent know trace_threads? An unknown key makes it say so and run
# untracked: then the encoder part is skipped.
have_trace_threads=0
probe_trace_threads() {
    rm -f "$TMP/probe.mtt"
    run_timed "$TMP/probe.err" env MEMTRAIL_OPTIONS="mode=trace:output=$TMP/probe.mtt:trace_threads=2" \
        LD_PRELOAD="$AGENT" "$TTHREADS_BIN" 1 10
    if [ "$rc" = 0 ] && [ -s "$TMP/probe.mtt" ] && ! grep -q 'trace_threads' "$TMP/probe.err"; then
        have_trace_threads=1
    fi
    rm -f "$TMP/probe.mtt"
}

# The encoder threads a default run has, and why (for events/s per encoder).
encoders() {
    local k
    k=$(printf '%s' "$trace_opts" | tr ':' '\n' | sed -n 's/^trace_threads=\([0-9]*\)$/\1/p' | tail -n 1)
    if [ -n "$k" ]; then enc=$k enc_why="trace_threads=$k"
    elif [ "$have_trace_threads" = 1 ]; then
        enc=$(nproc 2>/dev/null || echo 1); [ "$enc" -le 4 ] || enc=4
        enc_why="the default trace_threads, min(nproc, 4)"
    else enc=1 enc_why="one dispatcher thread: this agent has no trace_threads option"; fi
}

# threads_count N: bare / memtrail trace / heaptrack of tthreads N PAIRS.
threads_count() {
    local n=$1 i f w l ht=$use_heaptrack
    local -a t_b=() t_m=() t_h=() r_b=() r_m=() r_h=() lost=() written=()
    echo
    echo "-- tthreads $n x $(group "$pairs") pairs: $runs timed runs each, interleaved (bare, memtrail trace$(
        [ "$ht" = 1 ] && echo ", heaptrack")), after one untimed bare warm-up"
    run_measured "$TMP/bare.err" "$TTHREADS_BIN" "$n" "$pairs"
    if [ "$rc" -ne 0 ]; then bare_failed "threads $n" "; skipped"; return; fi
    for ((i = 1; i <= runs; i++)); do
        run_measured "$TMP/bare.err" "$TTHREADS_BIN" "$n" "$pairs"
        if [ "$rc" -ne 0 ]; then bare_failed "threads $n" " (run $i)"; return; fi
        t_b+=("$elapsed"); r_b+=("$rss_kb")
        f=$TMP/tt-$n.mtt
        run_traced "$TMP/mt.err" "$f" "" "$TTHREADS_BIN" "$n" "$pairs"
        if [ "$rc" -ne 0 ] || [ ! -s "$f" ]; then
            echo "   FAILED: tthreads exited with status $rc under memtrail trace (run $i), or wrote no trace"
            show_err "$TMP/mt.err"
            status=1; summary_lines+=("threads $n: FAILED under memtrail trace (status $rc)"); return
        fi
        t_m+=("$elapsed"); r_m+=("$rss_kb")
        read -r w l < <(trace_line "$TMP/mt.err")
        written+=("$w"); lost+=("$l")
        rm -f "$f"
        if [ "$ht" = 1 ]; then
            rm -rf "$TMP/ht-tt"; mkdir "$TMP/ht-tt"
            run_measured "$TMP/ht.err" heaptrack -o "$TMP/ht-tt/trace" "$TTHREADS_BIN" "$n" "$pairs"
            if [ "$rc" -ne 0 ] || [ -z "$(compgen -G "$TMP/ht-tt/trace.*" || true)" ]; then
                echo "   note: tthreads exited with status $rc under heaptrack (or it wrote no file); heaptrack column dropped"
                show_err "$TMP/ht.err"; ht=0; t_h=()
            else
                t_h+=("$elapsed"); r_h+=("$rss_kb")
            fi
            rm -rf "$TMP/ht-tt"
        fi
    done
    local b_min b_med m_min m_med h_min="" h_med="" rb rm rh beyond
    read -r b_min b_med < <(min_median "${t_b[@]}")
    read -r m_min m_med < <(min_median "${t_m[@]}")
    if [ "${#t_h[@]}" -gt 0 ]; then read -r h_min h_med < <(min_median "${t_h[@]}"); fi
    rb=$(max_of "${r_b[@]}"); rm=$(max_of "${r_m[@]}"); rh=$(max_of "${r_h[@]+"${r_h[@]}"}")
    beyond="?"
    if [ -n "$rb" ] && [ -n "$rm" ]; then beyond=$((rm - rb)); fi
    printf '   %-15s %8s %8s %8s %8s %9s %9s %9s %10s\n' "" "min s" "med s" "x bare" "x bare" "x htrack" "x htrack" \
        "peak RSS" "beyond"
    printf '   %-15s %8s %8s %8s %8s %9s %9s %9s %10s\n' "" "" "" "(min)" "(med)" "(min)" "(med)" "MB" "bare MB"
    trow() { # LABEL MIN MED RSS_KB BEYOND_KB
        local hm="" hd=""
        if [ -n "$h_min" ]; then hm=$(printf '%.2f' "$(ratio "$2" "$h_min")"); hd=$(printf '%.2f' "$(ratio "$3" "$h_med")"); fi
        printf '   %-15s %8.3f %8.3f %8.2f %8.2f %9s %9s %9s %10s\n' "$1" "$2" "$3" "$(ratio "$2" "$b_min")" \
            "$(ratio "$3" "$b_med")" "$hm" "$hd" "$(mb_of_kb "${4:-?}")" "$5"
    }
    trow bare "$b_min" "$b_med" "$rb" ""
    trow "memtrail trace" "$m_min" "$m_med" "$rm" "$(mb_of_kb "$beyond")"
    if [ -n "$h_min" ]; then trow heaptrack "$h_min" "$h_med" "$rh" "(tree)"; fi
    echo "   peak RSS: VmHWM of the process (/usr/bin/time -f %M), the largest of the runs; heaptrack's is its largest process"
    local lost_ok evs
    lost_ok=$(all_zero "${lost[@]}" && echo met || echo "NOT met")
    echo "   memtrail events written per run: $(for w in "${written[@]}"; do printf '%s ' "$(group "$w")"; done)"
    echo "   memtrail events lost per run: ${lost[*]} (goal: 0 at every thread count: $lost_ok)"
    evs=$(mevs "${written[0]}" "$m_min")
    echo "   memtrail: $evs M events/s (run 1's events / the min time), $(awk -v e="$evs" -v k="$enc" \
        'BEGIN { if (e ~ /^[0-9.]+$/) printf "%.2f", e / k; else print "?" }') M events/s per encoder thread ($enc: $enc_why)"
    local line
    line="threads $n: memtrail $(printf '%.2f' "$(ratio "$m_min" "$b_min")")x bare"
    if [ -n "$h_min" ]; then
        local mh
        mh=$(ratio "$m_min" "$h_min")
        line+=$(printf ', %.3fx heaptrack (heaptrack %.2fx bare)' "$mh" "$(ratio "$h_min" "$b_min")")
        if [ "$n" = 8 ]; then
            echo "   goal at 8 threads: memtrail <= 0.35x heaptrack's time: ${mh}x, $(goal "$mh" "<=" 0.35)"
            line+=" (goal <= 0.35: $(goal "$mh" "<=" 0.35))"
        fi
    fi
    line+=", $evs M ev/s, lost $(IFS=+; echo "${lost[*]}") (goal 0: $lost_ok), RSS +$(mb_of_kb "$beyond") MB"
    summary_lines+=("$line")
}

# mbench_rss: mbench bare / traced, time and peak RSS (the issue's goals).
mbench_rss() {
    local mb ops=2000000 i f w l
    local -a t_b=() t_m=() r_b=() r_m=() lost=()
    if [ "$quick" = 1 ]; then ops=200000; fi
    mb=$(mbench_binary)
    echo
    echo "-- mbench 2 $ops 4096: time and peak RSS, bare / memtrail trace (default options${trace_opts:+, plus $trace_opts})," \
        "$runs runs each, interleaved"
    run_measured "$TMP/bare.err" "$mb" 2 "$ops" 4096
    if [ "$rc" -ne 0 ]; then bare_failed "mbench (RSS)" "; skipped"; return; fi
    for ((i = 1; i <= runs; i++)); do
        run_measured "$TMP/bare.err" "$mb" 2 "$ops" 4096
        if [ "$rc" -ne 0 ]; then bare_failed "mbench (RSS)" " (run $i)"; return; fi
        t_b+=("$elapsed"); r_b+=("$rss_kb")
        f=$TMP/mbench-rss.mtt
        run_traced "$TMP/mt.err" "$f" "" "$mb" 2 "$ops" 4096
        if [ "$rc" -ne 0 ]; then
            echo "   FAILED: mbench exited with status $rc under memtrail trace (run $i)"; show_err "$TMP/mt.err"
            status=1; summary_lines+=("mbench (RSS): FAILED under memtrail trace"); return
        fi
        t_m+=("$elapsed"); r_m+=("$rss_kb")
        read -r w l < <(trace_line "$TMP/mt.err"); lost+=("$l")
        rm -f "$f"
    done
    local b_min b_med m_min m_med rb rm beyond="?" x
    read -r b_min b_med < <(min_median "${t_b[@]}")
    read -r m_min m_med < <(min_median "${t_m[@]}")
    rb=$(max_of "${r_b[@]}"); rm=$(max_of "${r_m[@]}")
    if [ -n "$rb" ] && [ -n "$rm" ]; then beyond=$((rm - rb)); fi
    x=$(ratio "$m_min" "$b_min")
    printf '   bare %.3f s (median %.3f), memtrail trace %.3f s (median %.3f): %.3fx bare (goal <= 2.5x: %s)\n' \
        "$b_min" "$b_med" "$m_min" "$m_med" "$x" "$(goal "$x" "<=" 2.5)"
    echo "   peak RSS: bare $(mb_of_kb "$rb") MB, traced $(mb_of_kb "$rm") MB: $(mb_of_kb "$beyond") MB beyond bare" \
        "(goal <= 16 MB: $(goal "$(mb_of_kb "$beyond")" "<=" 16)); events lost per run: ${lost[*]}"
    summary_lines+=("mbench: memtrail trace ${x}x bare (goal <= 2.5: $(goal "$x" "<=" 2.5)), RSS +$(mb_of_kb "$beyond") MB (goal <= 16: $(goal "$(mb_of_kb "$beyond")" "<=" 16)), lost $(IFS=+; echo "${lost[*]}")")
}

# encoder_speedup N: tthreads N PAIRS traced with trace_threads=1 and =2.
encoder_speedup() {
    local n=$1 i k f w l
    local -A t=() ev=()
    echo
    echo "-- encoder threads: tthreads $n x $(group "$pairs") pairs traced with trace_threads=1 and trace_threads=2, $runs runs each, interleaved"
    if [ "$have_trace_threads" = 0 ]; then
        echo "   skipped: this agent does not know trace_threads (MEMTRAIL_OPTIONS: unknown key); it comes with issue 18's encoder threads"
        summary_lines+=("encoders: skipped (no trace_threads option)")
        return
    fi
    for ((i = 1; i <= runs; i++)); do
        for k in 1 2; do
            f=$TMP/enc.mtt
            run_traced "$TMP/mt.err" "$f" "trace_threads=$k" "$TTHREADS_BIN" "$n" "$pairs"
            if [ "$rc" -ne 0 ] || [ ! -s "$f" ]; then
                echo "   FAILED: status $rc with trace_threads=$k (run $i), or no trace"; show_err "$TMP/mt.err"
                status=1; summary_lines+=("encoders: FAILED"); return
            fi
            t[$k]+="$elapsed "
            read -r w l < <(trace_line "$TMP/mt.err")
            ev[$k]=$w
            if [ "$l" != 0 ]; then echo "   note: trace_threads=$k lost $l events in run $i"; fi
            rm -f "$f"
        done
    done
    local m1 d1 m2 d2 e1 e2 sp
    # shellcheck disable=SC2086 # the lists of times
    read -r m1 d1 < <(min_median ${t[1]})
    # shellcheck disable=SC2086
    read -r m2 d2 < <(min_median ${t[2]})
    e1=$(mevs "${ev[1]}" "$m1"); e2=$(mevs "${ev[2]}" "$m2")
    sp=$(ratio "$m1" "$m2")
    printf '   trace_threads=1: %.3f s (median %.3f), %s M events/s, %s per encoder thread\n' "$m1" "$d1" "$e1" "$e1"
    printf '   trace_threads=2: %.3f s (median %.3f), %s M events/s, %s per encoder thread\n' "$m2" "$d2" "$e2" \
        "$(awk -v e="$e2" 'BEGIN { printf "%.2f", e / 2 }')"
    printf '   speed-up from 1 to 2 encoder threads: %.2fx (min times)\n' "$sp"
    summary_lines+=("encoders: 1 -> 2 trace_threads: $(printf '%.2f' "$sp")x ($e1 -> $e2 M ev/s at $n threads)")
}

if [ "$use_threads" = 1 ]; then
    echo
    echo "== 4. Threads: bench/tthreads (N threads x PAIRS malloc/free pairs, 256-slot tables, 16-527 B)," \
        "bare / memtrail trace (default options${trace_opts:+, plus $trace_opts}) / heaptrack -o FILE"
    TTHREADS_BIN=${TTHREADS:-$BUILD_DIR/bench/tthreads}
    if [ -z "${TTHREADS:-}" ] && [ -f "$ROOT/bench/tthreads.c" ]; then
        make -s -C "$ROOT" BUILD="$BUILD_DIR" tthreads >"$TMP/make.log" 2>&1 ||
            { echo "   note: make tthreads failed:"; show_err "$TMP/make.log"; }
    fi
    if [ ! -x "$TTHREADS_BIN" ]; then
        echo "   skipped: no workload ($TTHREADS_BIN; bench/tthreads.c + make tthreads, or set TTHREADS)"
        summary_lines+=("threads: skipped (no tthreads)")
    else
        echo "   the agent is preloaded directly (MEMTRAIL_OPTIONS=...mode=trace:output=FILE, what memtrail run sets)," \
            "each run under /usr/bin/time for its peak RSS; nproc $(nproc 2>/dev/null || echo '?')"
        probe_trace_threads
        encoders
        for n in ${thread_list//,/ }; do threads_count "$n"; done
        if want mbench || [ "$only" = threads ]; then mbench_rss; fi
        enc_n=8
        # shellcheck disable=SC2086 # the list's numbers
        if [[ ",$thread_list," != *,8,* ]]; then enc_n=$(max_of ${thread_list//,/ }); fi
        encoder_speedup "$enc_n"
    fi
fi

echo
echo "== summary (min of runs)"
for l in "${summary_lines[@]}"; do echo "   $l"; done
if [ "$status" -ne 0 ]; then echo "trace.sh: a workload failed (see above)" >&2; fi
exit "$status"

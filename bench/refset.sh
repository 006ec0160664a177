#!/usr/bin/env bash
# Overhead of recording a reference set (memtrail refset record) against the
# bare program, on the shared SQLite and CPython workloads (../shared/bench).
# Runs are interleaved (bare, then each recording mode, then bare again...)
# so machine noise hits every column alike; the headline figure is
# min-of-runs, with the median beside it. The goals (issue 16): <= 1.3x bare
# without --stacks, <= 2x with --stacks.
#
# Columns: bare; `refset record --no-agent` (perf + scans only); `refset
# record` (with the agent's exact releases); `refset record --stacks` (with
# the impacting stacks). For each recording it also reports the pages
# handled per second of the run and the recording's bytes per page event
# (a reference or a release of one page), from the recording itself.
#
# Usage: bench/refset.sh [--runs N] [--only sqlite|python] [--quick]
# Environment: MT_SHARED (default ROOT/../shared), BUILD (default build).
set -euo pipefail
die() { echo "refset.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=5 only=""
while [ $# -gt 0 ]; do
    case $1 in
        --runs) runs=$2; shift ;;
        --runs=*) runs=${1#--runs=} ;;
        --only) only=$2; shift ;;
        --only=*) only=${1#--only=} ;;
        --quick) runs=2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "refset.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs wants a positive integer, not '$runs'"
case $only in ""|sqlite|python) ;; *) die "--only wants sqlite or python, not '$only'" ;; esac
[ -d "$BENCH_SRC" ] || die "workloads not found: $BENCH_SRC (set MT_SHARED to the shared directory)"
[ -x "$MEMTRAIL" ] && [ -f "$AGENT" ] || die "memtrail is not built: run 'make' first"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-refset-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if ! "$MEMTRAIL" refset record --no-agent -o "$TMP/probe.mtrs" -- true >/dev/null 2>"$TMP/probe.err"; then
    die "memtrail refset record cannot record here: $(head -1 "$TMP/probe.err")"
fi

modes=(no-agent agent stacks)
mode_args() {
    case $1 in
        no-agent) echo --no-agent ;;
        agent) echo ;;
        stacks) echo --stacks ;;
    esac
}

# The recording's page events: pages referenced and released, from the
# recorder's last line ("memtrail: refset: N pages referenced (...), M
# released, L samples lost; FILE (B bytes)").
page_events() { # STDERR-FILE
    sed -n 's/^memtrail: refset: \([0-9]*\) pages referenced.*, \([0-9]*\) released, \([0-9]*\) samples lost.*/\1 \2 \3/p' "$1" | tail -1
}

summary=()
bench_workload() { # NAME LABEL CMD...
    local name=$1 label=$2; shift 2
    local -a t_bare=()
    declare -A times=()
    echo
    echo "== $name: $label"
    echo "   $runs timed runs each, interleaved (bare, ${modes[*]}), after one untimed warm-up"
    run_timed "$TMP/bare.err" "$@"
    [ "$rc" -eq 0 ] || { echo "   FAILED bare (status $rc)"; show_err "$TMP/bare.err"; return; }
    local i m
    for ((i = 1; i <= runs; i++)); do
        run_timed "$TMP/bare.err" "$@"
        t_bare+=("$elapsed")
        for m in "${modes[@]}"; do
            # shellcheck disable=SC2046 # the mode's options are words
            run_timed "$TMP/$m.err" "$MEMTRAIL" refset record $(mode_args "$m") -o "$TMP/$name-$m-$i.mtrs" -- "$@"
            if [ "$rc" -ne 0 ]; then
                echo "   FAILED under refset record ($m, run $i): status $rc"; show_err "$TMP/$m.err"; return
            fi
            times[$m]+="$elapsed "
            if [ "$i" -eq 1 ]; then cp "$TMP/$m.err" "$TMP/$name-$m-1.err"; else rm -f "$TMP/$name-$m-$i.mtrs"; fi
        done
    done
    local b_min b_med
    read -r b_min b_med < <(min_median "${t_bare[@]}")
    printf '   %-9s %9s %9s %9s %9s %11s %9s %12s\n' "" "min s" "median s" "x bare" "x median" "pages/s" "B/event" "recording"
    printf '   %-9s %9.3f %9.3f %9s %9s\n' bare "$b_min" "$b_med" 1.00 1.00
    local line="$name:"
    for m in "${modes[@]}"; do
        local m_min m_med r_min r_med refd reld lost size per rate
        # shellcheck disable=SC2086 # the times are words
        read -r m_min m_med < <(min_median ${times[$m]})
        r_min=$(ratio "$m_min" "$b_min"); r_med=$(ratio "$m_med" "$b_med")
        read -r refd reld lost < <(page_events "$TMP/$name-$m-1.err")
        [ -n "$refd" ] || { echo "   $m: no end line from the recorder"; show_err "$TMP/$name-$m-1.err"; continue; }
        size=$(stat -c %s "$TMP/$name-$m-1.mtrs")
        per=$(awk -v s="$size" -v n="$((refd + reld))" 'BEGIN { printf "%.2f", n ? s / n : 0 }')
        rate=$(awk -v n="$((refd + reld))" -v t="$m_med" 'BEGIN { printf "%.0f", (t > 0) ? n / t : 0 }')
        printf '   %-9s %9.3f %9.3f %9.2f %9.2f %11s %9s %12s\n' "$m" "$m_min" "$m_med" "$r_min" "$r_med" \
            "$(group "$rate")" "$per" "$(group "$size") B"
        local goal=1.3
        [ "$m" = stacks ] && goal=2
        local verdict
        verdict=$(awk -v r="$r_min" -v t="$goal" 'BEGIN { print (r <= t) ? "met" : "NOT met" }')
        line+=$(printf ' %s %.2fx (goal <= %sx %s, %s pages referenced + %s released, %s lost, %s B/event);' \
            "$m" "$r_min" "$goal" "$verdict" "$(group "$refd")" "$(group "$reld")" "$lost" "$per")
    done
    summary+=("$line")
}

if [ -z "$only" ] || [ "$only" = sqlite ]; then
    if command -v sqlite3 >/dev/null 2>&1; then
        bench_workload sqlite "sqlite3 :memory: < workload.sql" "$(command -v sqlite3)" :memory: "$(sqlite_read_arg)"
    else
        echo "== sqlite: skipped, sqlite3 is not installed"
    fi
fi
if [ -z "$only" ] || [ "$only" = python ]; then
    bench_workload python "python3 pyalloc.py" "$(python_binary)" "$BENCH_SRC/pyalloc.py"
fi
echo
echo "== summary"
printf '%s\n' "${summary[@]}"

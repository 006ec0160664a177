#!/usr/bin/env bash
# What memory info and request spans cost (issue 17's benchmark), each figure
# beside a peer measured in the same run:
#   1. mt_memory_info: ns per call, alone and with reader threads racing
#      writer threads that raise events; peers: glibc's mallinfo2() and a
#      read of /proc/self/statm (what a monitor calls otherwise).
#      Goal: <= 200 ns.
#   2. A span begin/end pair (span_faults off and on), and a malloc+free
#      pair outside and inside a span (the cost of timing a call).
#      Goal: a pair <= 100 ns with span_faults=off.
#   3. A request loop (bench/info_cost.c requests) bare, under the agent
#      without spans, and with a span per request.
#   4. mbench and SQLite: bare, summary mode as it is (no span open), and
#      summary with alloc_timing=all (every allocator call timed); with
#      --base REV also summary mode built from REV (git), so "no change
#      when no span is open" is measured, not assumed.
# Runs are interleaved; min and median of --runs N runs.
#
# Usage: bench/info.sh [--runs N] [--base REV] [--only snapshot|spans|requests|workloads]
# Environment: MT_SHARED (default ROOT/../shared), BUILD (default build).
set -euo pipefail
die() { echo "info.sh: $*" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runs=5 base="" only=""
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
bad_usage() { echo "info.sh: $*" >&2; echo "try: bench/info.sh --help" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --runs) [ $# -ge 2 ] || bad_usage "--runs needs a number"; runs=$2; shift ;;
        --base) [ $# -ge 2 ] || bad_usage "--base needs a git revision"; base=$2; shift ;;
        --only) [ $# -ge 2 ] || bad_usage "--only needs a part"; only=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) bad_usage "unknown option '$1'" ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || bad_usage "--runs wants a positive integer, not '$runs'"
case $only in ""|snapshot|spans|requests|workloads) ;; *) bad_usage "--only wants snapshot, spans, requests or workloads" ;; esac
[ -x "$MEMTRAIL" ] && [ -f "$AGENT" ] || die "memtrail is not built in $BUILD_DIR (make)"
[ -d "$BENCH_SRC" ] || die "workloads not found: $BENCH_SRC (set MT_SHARED)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-info-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$BUILD_DIR/bench"
COST=$BUILD_DIR/bench/info_cost
gcc -O2 -pthread -I"$ROOT/include" -o "$COST" "$ROOT/bench/info_cost.c" -L"$BUILD_DIR/lib" -lmemtrail-stub \
    -Wl,-rpath,"$BUILD_DIR/lib" || die "cannot build bench/info_cost.c"
summary=()
part() { [ -z "$only" ] || [ "$only" = "$1" ]; }
field() { awk -v k="$1" '$1 == k { print $2 } $1 == "alone" && $2 == k { print $3 } $1 == "concurrent" && $2 == k { print $3 }' "$2" | head -1; }

if part snapshot; then
    echo "== mt_memory_info: 4 writers raising events, 2 readers, 3 s (CPU ns per call)"
    MEMTRAIL_OPTIONS="output=$TMP/s.%p.mtr" LD_PRELOAD=$AGENT "$COST" snapshot 4 2 3 >"$TMP/snap.out" 2>"$TMP/snap.err" ||
        { cat "$TMP/snap.err"; die "info_cost snapshot failed"; }
    sed 's/^/   /' "$TMP/snap.out"
    grep -q '^agent yes' "$TMP/snap.out" || die "the agent did not answer mt_memory_info"
    alone=$(field mt_memory_info_ns "$TMP/snap.out")
    conc=$(awk '$1 == "concurrent" && $2 == "mt_memory_info_ns" { print $3 }' "$TMP/snap.out")
    mi=$(field mallinfo2_ns "$TMP/snap.out")
    st=$(field statm_read_ns "$TMP/snap.out")
    summary+=("mt_memory_info: ${alone} ns alone, ${conc} ns with 4 writers (goal <= 200 ns: $(awk -v a="$conc" 'BEGIN { print (a <= 200) ? "met" : "NOT met" }')); mallinfo2 ${mi} ns ($(ratio "$mi" "$alone")x the snapshot), statm read ${st} ns ($(ratio "$st" "$alone")x)")
fi

if part spans; then
    echo "== spans: 2,000,000 pairs"
    for f in off on; do
        MEMTRAIL_OPTIONS="output=$TMP/p.%p.mtr:span_faults=$f" LD_PRELOAD=$AGENT "$COST" spans 2000000 >"$TMP/spans-$f.out" 2>&1 ||
            { cat "$TMP/spans-$f.out"; die "info_cost spans failed"; }
        sed "s/^/   span_faults=$f: /" "$TMP/spans-$f.out"
    done
    p_off=$(field span_pair_ns "$TMP/spans-off.out"); p_on=$(field span_pair_ns "$TMP/spans-on.out")
    mo=$(field malloc_free_outside_span_ns "$TMP/spans-off.out"); mi=$(field malloc_free_inside_span_ns "$TMP/spans-off.out")
    summary+=("span pair: ${p_off} ns (goal <= 100 ns: $(awk -v a="$p_off" 'BEGIN { print (a <= 100) ? "met" : "NOT met" }')), ${p_on} ns with span_faults=on; malloc+free ${mo} ns outside a span, ${mi} ns inside ($(ratio "$mi" "$mo")x)")
fi

# columns NAME LABEL ENV [LABEL ENV]...: times ${cmd[@]} once per column per
# round (ENV: assignments for env, or - for none; the first column is the
# baseline), prints the table, sets $line and min_N/med_N per column.
columns() {
    local name=$1; shift
    local -a labels=() envs=()
    while [ $# -gt 0 ]; do labels+=("$1"); envs+=("$2"); shift 2; done
    declare -A t=()
    local i j
    for ((i = 0; i <= runs; i++)); do
        for j in "${!labels[@]}"; do
            if [ "${envs[$j]}" = - ]; then
                run_timed "$TMP/run.err" "${cmd[@]}"
            else
                # shellcheck disable=SC2086 # the env assignments are words
                run_timed "$TMP/run.err" env ${envs[$j]} "${cmd[@]}"
            fi
            [ "$rc" -eq 0 ] || { show_err "$TMP/run.err"; die "$name (${labels[$j]}) exited with $rc"; }
            [ "$i" -eq 0 ] || t[$j]+="$elapsed "
        done
    done
    local b_min b_med
    # shellcheck disable=SC2086
    read -r b_min b_med < <(min_median ${t[0]})
    printf '   %-22s %9s %9s %8s %9s\n' "" "min s" "median s" "x first" "x median"
    line="$name:"
    for j in "${!labels[@]}"; do
        local m_min m_med
        # shellcheck disable=SC2086
        read -r m_min m_med < <(min_median ${t[$j]})
        printf '   %-22s %9.3f %9.3f %8s %9s\n' "${labels[$j]}" "$m_min" "$m_med" "$(ratio "$m_min" "$b_min")" "$(ratio "$m_med" "$b_med")"
        [ "$j" -eq 0 ] || line+=" ${labels[$j]} $(ratio "$m_min" "$b_min")x"
        printf -v "min_$j" '%s' "$m_min"
    done
}

if part requests; then
    echo
    echo "== requests: 400,000 requests of 16 malloc/free each, $runs runs interleaved"
    # one program; INFO_COST_SPANS=on opens a span per request
    o="MEMTRAIL_OPTIONS=output=$TMP/r.%p.mtr"
    cmd=("$COST" requests 400000 16)
    columns requests bare - agent-no-spans "LD_PRELOAD=$AGENT $o" agent-spans "LD_PRELOAD=$AGENT $o INFO_COST_SPANS=on"
    # shellcheck disable=SC2154 # min_N are set by columns
    summary+=("$line (spans on / off: $(ratio "$min_2" "$min_1")x)")
    rm -f "$TMP"/r.*.mtr
fi

if part workloads; then
    base_agent=""
    if [ -n "$base" ]; then
        echo
        echo "== building the agent at $base (for the summary-mode comparison)"
        mkdir -p "$TMP/base"
        git -C "$ROOT" archive "$base" | tar -x -C "$TMP/base" || die "cannot export $base"
        make -s -C "$TMP/base" BUILD="$TMP/base/build" "$TMP/base/build/lib/libmemtrail.so" >/dev/null 2>"$TMP/base.err" ||
            { show_err "$TMP/base.err"; die "cannot build the agent at $base"; }
        base_agent=$TMP/base/build/lib/libmemtrail.so
    fi
    o="MEMTRAIL_OPTIONS=output=$TMP/w.%p.mtr"
    specs=(bare - summary "LD_PRELOAD=$AGENT $o" "alloc_timing=all" "LD_PRELOAD=$AGENT $o:alloc_timing=all")
    if [ -n "$base_agent" ]; then specs+=("summary@$base" "LD_PRELOAD=$base_agent $o"); fi
    echo
    echo "== mbench (2 threads x 2,000,000 ops), $runs runs interleaved"
    cmd=("$(mbench_binary)")
    columns mbench "${specs[@]}"
    mb_line=$line
    if [ -n "$base_agent" ]; then
        # shellcheck disable=SC2154
        mb_line+=" (summary now / summary at $base: $(ratio "$min_1" "$min_3")x)"
    fi
    summary+=("$mb_line")
    if command -v sqlite3 >/dev/null 2>&1; then
        echo
        echo "== sqlite3 :memory: < workload.sql, $runs runs interleaved"
        cmd=("$(command -v sqlite3)" :memory: "$(sqlite_read_arg)")
        columns sqlite "${specs[@]}"
        sq_line=$line
        if [ -n "$base_agent" ]; then sq_line+=" (summary now / summary at $base: $(ratio "$min_1" "$min_3")x)"; fi
        summary+=("$sq_line")
    fi
    rm -f "$TMP"/w.*.mtr
fi

echo
echo "== summary"
printf '%s\n' "${summary[@]}"

# shellcheck shell=bash disable=SC2034 # its variables are the callers'
# Shell helpers shared by the workload benchmarks (bench/overhead.sh,
# bench/trace.sh): where things are, timing, min/median, ratios, and the
# three shared workloads (../shared/bench). Sourced, not run. The caller
# sets `set -euo pipefail`, defines die() and, for the workload helpers,
# makes $TMP.
export LC_ALL=C # a '.' in $EPOCHREALTIME and in printf's numbers

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=${MT_SHARED:-$ROOT/../shared}
BENCH_SRC=$SHARED/bench
if [ -d "$BENCH_SRC" ]; then BENCH_SRC=$(cd "$BENCH_SRC" && pwd); fi
BUILD_DIR=${BUILD:-build}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
MEMTRAIL=$BUILD_DIR/bin/memtrail
AGENT=$BUILD_DIR/lib/libmemtrail.so

have_python=0
if command -v python3 >/dev/null 2>&1; then have_python=1; fi

# ---- timing -----------------------------------------------------------------

now_us() { local t=${EPOCHREALTIME/./}; echo "$((10#$t))"; }

# run_timed LOGFILE CMD...: runs CMD with its output discarded (stderr kept in
# LOGFILE for error messages); sets $elapsed (microseconds) and $rc.
run_timed() {
    local log=$1; shift
    local t0 t1
    t0=$(now_us)
    set +e
    "$@" >/dev/null 2>"$log" </dev/null
    rc=$?
    set -e
    t1=$(now_us)
    elapsed=$((t1 - t0))
}

# Prints "min median" in seconds of the microsecond figures given.
min_median() {
    printf '%s\n' "$@" | sort -n | awk '
        { v[NR] = $1 }
        END {
            med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.6f %.6f\n", v[1] / 1e6, med / 1e6
        }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }'; }

# paired_ratio "A1 A2 ..." "B1 B2 ...": the median of Ai / Bi, each pair
# timed in the same round of an interleaved benchmark. A host whose speed
# drifts between rounds (a shared or paging hypervisor) moves both runs
# of a round alike, so this figure wanders less than the ratio of two
# columns' mins or medians taken apart.
paired_ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); m = split(b, y, " "); if (m < n) n = m
        k = 0
        for (i = 1; i <= n; i++) if (y[i] > 0) r[++k] = x[i] / y[i]
        if (k == 0) { print "nan"; exit }
        for (i = 2; i <= k; i++) { v = r[i]; for (j = i - 1; j >= 1 && r[j] > v; j--) r[j + 1] = r[j]; r[j + 1] = v }
        printf "%.3f", (k % 2) ? r[(k + 1) / 2] : (r[k / 2] + r[k / 2 + 1]) / 2
    }'
}

show_err() { # LOGFILE
    if [ -s "$1" ]; then tail -n 15 "$1" | sed 's/^/    | /'; fi
}

# The bare run just made (col_bare) failed with status $rc: say so and mark
# the workload failed (the caller returns). WHEN ends the first line.
bare_failed() { # NAME WHEN
    echo "   FAILED: the bare workload exited with status $rc$2"
    show_err "$TMP/bare.err"
    status=1; summary_lines+=("$1: FAILED bare (status $rc)")
}

group() { # 1912345 -> 1,912,345
    local n=$1 out=""
    [[ $n =~ ^[0-9]+$ ]] || { echo "$n"; return; }
    while [ ${#n} -gt 3 ]; do out=",${n: -3}$out"; n=${n:0:${#n}-3}; done
    echo "$n$out"
}

# ---- the shared workloads ---------------------------------------------------

# mbench_binary: prints the path of mbench, compiled from the shared source
# when missing or older than it (gcc -O2 -pthread).
mbench_binary() {
    local mbench=$BUILD_DIR/bench/mbench
    if [ ! -x "$mbench" ] || [ "$BENCH_SRC/mbench.c" -nt "$mbench" ]; then
        mkdir -p "$BUILD_DIR/bench"
        gcc -O2 -pthread -o "$mbench" "$BENCH_SRC/mbench.c" >&2 || die "cannot compile $BENCH_SRC/mbench.c"
    fi
    echo "$mbench"
}

# sqlite_read_arg: the `.read FILE` argument for sqlite3 (which splits a
# dot-command's argument on blanks: quoted only if needed).
sqlite_read_arg() {
    local sql=$BENCH_SRC/workload.sql
    if [[ $sql =~ [[:space:]] ]]; then sql="'$sql'"; fi
    echo ".read $sql"
}

# python_binary: the interpreter itself, not a wrapper such as a pyenv shim:
# the shim would be timed too, and heaptrack does not follow its exec.
python_binary() {
    local python
    python=$(python3 -c 'import sys; print(sys.executable)')
    [ -x "$python" ] || python=$(command -v python3)
    echo "$python"
}

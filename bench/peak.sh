#!/usr/bin/env bash
# The peak across threads: how far summary mode's peak is from the true
# one, against heaptrack's, and what keeping it costs.
#   1. tests/agent/peak N: N threads each hold 200 000 bytes in 50-byte
#      blocks at one barrier beside the main thread's 1 MiB, so the true
#      peak is known exactly; memtrail's and heaptrack's peaks against it.
#   2. the time the agent adds per malloc+free pair (a loop of 20 M pairs
#      of 64 bytes, one thread), against the bare loop.
#   3. mbench (../shared/bench) with 8 threads: wall time bare, under
#      memtrail (summary), under heaptrack; min of RUNS interleaved runs.
# Usage: bench/peak.sh [--runs N]   Environment: BUILD (default build), MT_SHARED.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
runs=3
[ "${1:-}" = --runs ] && runs=$2
B=${BUILD:-build}
case $B in /*) ;; *) B=$PWD/$B ;; esac
AGENT=$B/lib/libmemtrail.so
SHARED=${MT_SHARED:-$PWD/../shared}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
[ -x "$B/tests/agent/peak" ] || { echo "peak.sh: build first (make tests)" >&2; exit 1; }

echo "== peak accuracy (bytes; error against the true peak)"
printf '%8s %12s %12s %9s %22s\n' threads true memtrail error "heaptrack (whole heap)"
for n in 1 2 8 32 128; do
    want=$("$B/tests/agent/peak" "$n" | awk '{print $2}')
    MEMTRAIL_OPTIONS="output=$T/pk.mtr" LD_PRELOAD=$AGENT "$B/tests/agent/peak" "$n" >/dev/null
    got=$("$B/bin/memtrail" report --json "$T/pk.mtr" |
        python3 -c "import json,sys; j=json.load(sys.stdin); print([c['peak_bytes'] for c in j['categories'] if c['name']=='pk'][0])")
    ht=-
    if command -v heaptrack >/dev/null; then
        (cd "$T" && heaptrack -o "$T/ht.$n" "$B/tests/agent/peak" "$n" >/dev/null 2>&1) || true
        f=$(ls "$T"/ht."$n".* 2>/dev/null | head -1)
        # heaptrack's peak is the whole heap's: the worker threads' pointer
        # arrays (N x 32 000 bytes) and libc's own blocks come on top.
        [ -n "$f" ] && ht=$(heaptrack_print -f "$f" 2>/dev/null | awk '/^peak heap memory consumption/ {print $5}')
        [ -n "$ht" ] || ht=-
    fi
    printf '%8d %12d %12d %8.3f%% %22s\n' "$n" "$want" "$got" "$(python3 -c "print(100*($got-$want)/$want)")" "$ht"
done

echo "== cost per malloc+free pair (one thread, 20 M pairs of 64 B; min of $runs runs)"
cat >"$T/loop.c" <<'C'
#include <stdlib.h>
int main(void) { for (int i = 0; i < 20000000; i++) { void *volatile p = malloc(64); free(p); } return 0; }
C
gcc -O2 -o "$T/loop" "$T/loop.c"
lb=() lm=()
for _ in $(seq "$runs"); do
    run_timed "$T/err.log" "$T/loop"; lb+=("$elapsed")
    run_timed "$T/err.log" env MEMTRAIL_OPTIONS="output=$T/loop.mtr" LD_PRELOAD="$AGENT" "$T/loop"; lm+=("$elapsed")
done
b=$(printf '%s\n' "${lb[@]}" | sort -n | head -1); m=$(printf '%s\n' "${lm[@]}" | sort -n | head -1)
printf 'bare %.1f ns, memtrail %.1f ns per pair (%.2fx): %.1f ns added by the agent\n' \
    "$(python3 -c "print($b*1e3/2e7)")" "$(python3 -c "print($m*1e3/2e7)")" "$(python3 -c "print($m/$b)")" \
    "$(python3 -c "print(($m-$b)*1e3/2e7)")"

echo "== mbench, 8 threads x 1 M ops (min of $runs runs)"
gcc -O2 -pthread -o "$T/mbench" "$SHARED/bench/mbench.c"
timeit() { run_timed "$T/err.log" "$@"; awk -v u="$elapsed" 'BEGIN { printf "%.6f\n", u / 1e6 }'; }
best() { sort -n | head -1; }
tb=() tm=() th=()
for _ in $(seq "$runs"); do
    tb+=("$(timeit "$T/mbench" 8 1000000)")
    tm+=("$(timeit env MEMTRAIL_OPTIONS="output=$T/mb.mtr" LD_PRELOAD="$AGENT" "$T/mbench" 8 1000000)")
    if command -v heaptrack >/dev/null; then th+=("$(timeit heaptrack -o "$T/mbht" "$T/mbench" 8 1000000)"); fi
done
b=$(printf '%s\n' "${tb[@]}" | best); m=$(printf '%s\n' "${tm[@]}" | best)
printf 'bare %.3f s, memtrail %.3f s (%.2fx)' "$b" "$m" "$(python3 -c "print($m/$b)")"
if [ ${#th[@]} -gt 0 ]; then
    h=$(printf '%s\n' "${th[@]}" | best)
    printf ', heaptrack %.3f s (%.2fx); memtrail/heaptrack %.2f' "$h" "$(python3 -c "print($h/$b)")" "$(python3 -c "print($m/$h)")"
fi
echo

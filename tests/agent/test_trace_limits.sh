#!/usr/bin/env bash
# Trace mode at the edge of its resources (tests/agent/trace_limits.c): a
# program under RLIMIT_AS that takes memory until malloc fails, a trace
# file that cannot be opened, and a file that fills up (RLIMIT_FSIZE, the
# EFBIG of a full disk) under 4 threads. The agent degrades and says so;
# its counts agree with what the file holds.
. "$(dirname "$0")/../lib.sh"

TL=$TBIN/trace_limits
blocks_of() { printf '%s' "$1" | sed -n 's/^blocks \([0-9]*\)$/\1/p'; }

# --- out of memory: the program keeps its memory, the trace is finished --------
run_mt "$TL" aslimit 256
bare=$(blocks_of "$out")
run_mt env MEMTRAIL_OPTIONS="mode=trace:output=$T/as.mtt" LD_PRELOAD="$AGENT" "$TL" aslimit 256
traced=$(blocks_of "$out")
expect_eq "trace_limits: RLIMIT_AS: the program exits 0 under trace mode" "0 1" "$rc $([ -n "$traced" ] && echo 1)"
if [ -n "$bare" ] && [ -n "$traced" ] && [ $((traced * 10)) -ge $((bare * 9)) ] && [ "$traced" -le $((bare + 4)) ]; then
    pass "trace_limits: RLIMIT_AS: the program gets as much memory as bare, within 10% and no more ($traced blocks traced, $bare bare)"
else fail "trace_limits: RLIMIT_AS: the program gets its memory" "$traced blocks traced, $bare bare"; fi
expect_match "trace_limits: RLIMIT_AS: the agent says recording stopped, and counts what it lost" \
    "trace: [0-9]+ events, [1-9][0-9]* lost .*out of memory: recording stopped" "$err"
written=$(printf '%s' "$err" | sed -n 's/.*trace: \([0-9]*\) events.*/\1/p')
run_mt "$MT_ASAN" analyze --json "$T/as.mtt"
expect_eq "trace_limits: RLIMIT_AS: the trace analyses (exit 0)" 0 "$rc"
printf '%s' "$out" >"$T/as.json"
expect_eq "trace_limits: RLIMIT_AS: the trace is complete, with the blocks taken before the stop" "True 1" \
    "$(json_get "$T/as.json" "'%s %d' % (j['complete'], int(j['allocs'] >= 50))")"
expect_eq "trace_limits: RLIMIT_AS: events said written = events in the file" "$written" \
    "$(json_get "$T/as.json" "j['events']")"

# --- an unopenable file: every event lost, and why -------------------------------
run_mt env MEMTRAIL_OPTIONS="mode=trace:output=/nonexistent/dir/x.mtt" LD_PRELOAD="$AGENT" "$TL" threads 1 1000
expect_eq "trace_limits: unopenable: the program runs" "0" "$rc"
expect_match "trace_limits: unopenable: names the file and errno's text, counts the loss" \
    "trace: cannot open /nonexistent/dir/x\.mtt: No such file or directory; [1-9][0-9]* events lost" "$err"
lost=$(printf '%s' "$err" | sed -n 's/.*; \([0-9]*\) events lost.*/\1/p')
expect_eq "trace_limits: unopenable: every event is lost (2000 and start-up)" 1 "$([ "${lost:-0}" -ge 2000 ] && echo 1 || echo 0)"

# --- a full file (EFBIG, as ENOSPC) under 4 threads: counts agree with the file --------
ulimit_run() { # KB, then the command: RLIMIT_FSIZE of KB KiB, SIGXFSZ ignored (writes fail with EFBIG)
    local kb=$1; shift
    bash -c 'ulimit -f "$0"; trap "" XFSZ; exec "$@"' "$kb" "$@"
}
run_mt ulimit_run 300 env MEMTRAIL_OPTIONS="mode=trace:output=$T/full.mtt" LD_PRELOAD="$AGENT" "$TL" threads 4 300000
expect_eq "trace_limits: full file: the program runs" 0 "$rc"
written=$(printf '%s' "$err" | sed -n 's/.*trace: \([0-9]*\) events, \([0-9]*\) lost.*/\1/p')
lost=$(printf '%s' "$err" | sed -n 's/.*trace: \([0-9]*\) events, \([0-9]*\) lost.*/\2/p')
expect_match "trace_limits: full file: the failure is said, with errno's text" "writing $T/full.mtt failed: File too large" "$err"
run_mt "$MT_ASAN" analyze --json "$T/full.mtt"
printf '%s' "$out" >"$T/full.json"
expect_eq "trace_limits: full file: events said written = events in the file" "$written" \
    "$(json_get "$T/full.json" "j['events']")"
expect_eq "trace_limits: full file: written + lost = every event (2400000 and start-up, within 1000)" 1 \
    "$(( ${written:-0} + ${lost:-0} >= 2400000 && ${written:-0} + ${lost:-0} < 2401000 ? 1 : 0 ))"

# --- a process with no events names no file ----------------------------------
# (trace_limits without arguments prints its usage with no allocation)
MEMTRAIL_OPTIONS="mode=trace:output=$T/none.%p.mtt" LD_PRELOAD=$AGENT "$TBIN/trace_limits" >/dev/null 2>"$T/none.err"
named=$(grep -oE ' in /[^ ]+' "$T/none.err" | sed 's/^ in //')
if [ -n "$named" ] && [ ! -e "$named" ]; then
    fail "trace_limits: no events" "names $named, which does not exist: $(cat "$T/none.err")"
else
    contains "trace_limits: no events: says no file was written" "no events, no trace file written" "$(cat "$T/none.err")"
fi
# memtrail run, which expects a file, says why there may be none
"$MT" run --mode trace -o "$T/none-run.%p.mtt" -- "$TBIN/trace_limits" >/dev/null 2>"$T/none-run.err"
contains "trace_limits: no events, memtrail run: names no allocation as a reason for no file" \
    "may have made no allocation (then no trace file is written)" "$(cat "$T/none-run.err")"

# --- getrlimit shows the program the RLIMIT_AS it set --------------------------
got=$(MEMTRAIL_OPTIONS="mode=detail:output=$T/gl.%p.mtr" LD_PRELOAD=$AGENT python3 -c '
import resource
resource.setrlimit(resource.RLIMIT_AS, (1 << 40, resource.RLIM_INFINITY))
print(resource.getrlimit(resource.RLIMIT_AS)[0])' 2>&1)
expect_eq "RLIMIT_AS: getrlimit gives back what the program set, though the agent's share is added" "$((1 << 40))" "$got"

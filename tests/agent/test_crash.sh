# The crash report: on SIGSEGV, SIGBUS, SIGABRT, SIGFPE and SIGILL the agent
# writes the report file (reason "signal NAME") and a summary on stderr,
# then the process dies of the same signal. Counts are compared with the
# ledger the crashing program kept itself (tests/agent/crasher.c), the
# signal with what the same program dies of without memtrail (as seen by
# python3's subprocess), addresses and thread ids with what it printed.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$TBIN/crasher" ] || { fail setup "build first (make tests)"; exit 1; }
ulimit -c 0 # no core files from the crashes below

# crash MODE [OPTIONS]: runs crasher MODE under the agent, output $T/MODE.mtr;
# sets got (how it ended), bare (how it ends without memtrail).
crash() {
    local mode=$1 opts=${2:+:$2}
    rm -f "$T/$mode".*
    bare=$(end_status "$T/$mode.bare.out" "$T/$mode.bare.err" "$TBIN/crasher" "$mode" "$T/$mode.bare.ledger" "$T/$mode.bare.file")
    got=$(end_status "$T/$mode.out" "$T/$mode.err" MEMTRAIL_OPTIONS="output=$T/$mode.mtr$opts" LD_PRELOAD="$AGENT" \
        "$TBIN/crasher" "$mode" "$T/$mode.ledger" "$T/$mode.file")
    grep -E '^(PASS|FAIL) ' "$T/$mode.out"
}

# check_report NAME MODE SIGNAME: the report file and the stderr summary
# both match the ledger.
check_report() {
    local name=$1 mode=$2 sig=$3
    set -- $(cat "$T/$mode.ledger" 2>/dev/null)
    if [ ! -f "$T/$mode.mtr" ]; then
        fail "$name: report written" "no $T/$mode.mtr; stderr: $(head -c 600 "$T/$mode.err")"
        return
    fi
    "$MT" report --json "$T/$mode.mtr" >"$T/$mode.json"
    expect_eq "$name: report reason" "signal $sig" "$(json_get "$T/$mode.json" "j['reason']")"
    expect_eq "$name: report = ledger (live bytes, count, allocs, frees)" "$2 $3 $5 $6" \
        "$(json_get "$T/$mode.json" "' '.join(str(c[k]) for c in j['categories'] if c['name']=='crashcat' for k in ('live_bytes','live_count','allocs','frees'))")"
    expect_match "$name: stderr summary names the signal and the pid" \
        "memtrail: fatal signal $sig in pid $(json_get "$T/$mode.json" "j['pid']") \(crasher\)" "$(cat "$T/$mode.err")"
    expect_eq "$name: stderr summary = ledger (live bytes, count)" "$2 $3" \
        "$(grep -E '^memtrail: +crashcat ' "$T/$mode.err" | sed -E 's/.*live_bytes=([0-9]+) live_count=([0-9]+).*/\1 \2/')"
    expect_match "$name: stderr says where the report went" "crash report written to $T/$mode.mtr" "$(cat "$T/$mode.err")"
}

# --- each fatal signal, on the main thread -------------------------------
crash segv
expect_eq "segv: dies of the signal it dies of without memtrail" "signal SIGSEGV $bare" "$got signal SIGSEGV"
check_report segv segv SIGSEGV
expect_match "segv: summary gives the faulting address" "SIGSEGV in pid [0-9]+ .*: address not mapped, at address 0x0$" \
    "$(grep 'fatal signal' "$T/segv.err")"
"$MT" report --json "$T/segv.mtr" >"$T/segv.json"
expect_eq "segv: summary total = report total (live bytes)" "$(json_get "$T/segv.json" "j['total']['live_bytes']")" \
    "$(grep -E '^memtrail: +total ' "$T/segv.err" | sed -E 's/.*live_bytes=([0-9]+).*/\1/')"
set -- $(cat "$T/segv.ledger")
expect_eq "segv: single-thread peak = ledger peak (report, summary)" "$4 $4" \
    "$(json_get "$T/segv.json" "[c['peak_bytes'] for c in j['categories'] if c['name']=='crashcat'][0]") $(grep -E '^memtrail: +crashcat ' "$T/segv.err" | sed -E 's/.*peak_bytes=([0-9]+).*/\1/')"

crash abort
expect_eq "abort: dies of SIGABRT, as without memtrail" "signal SIGABRT $bare" "$got signal SIGABRT"
check_report abort abort SIGABRT

crash stack
expect_eq "stack overflow: dies of SIGSEGV, as without memtrail" "signal SIGSEGV $bare" "$got signal SIGSEGV"
check_report "stack overflow (alternate stack)" stack SIGSEGV

crash bus
expect_eq "bus: truncated mapping dies of SIGBUS, as without memtrail" "signal SIGBUS $bare" "$got signal SIGBUS"
check_report bus bus SIGBUS
expect_match "bus: summary gives the address the program touched" \
    "at address $(sed -n 's/^addr //p' "$T/bus.out")\$" "$(grep 'fatal signal' "$T/bus.err")"

crash fpe
expect_eq "fpe: division by zero dies of SIGFPE, as without memtrail" "signal SIGFPE $bare" "$got signal SIGFPE"
check_report fpe fpe SIGFPE
expect_match "fpe: summary says why" "integer division by zero" "$(grep 'fatal signal' "$T/fpe.err")"

crash ill
expect_eq "ill: __builtin_trap dies of SIGILL, as without memtrail" "signal SIGILL $bare" "$got signal SIGILL"
check_report ill ill SIGILL

# --- a fault on another thread: both threads' blocks, that thread named ------
crash thread
expect_eq "thread: dies of SIGSEGV, as without memtrail" "signal SIGSEGV $bare" "$got signal SIGSEGV"
check_report "thread (main + crashing thread's blocks)" thread SIGSEGV
expect_match "thread: summary names the crashing thread" "thread $(sed -n 's/^tid //p' "$T/thread.out"):" \
    "$(grep 'fatal signal' "$T/thread.err")"

# --- a stack overflow on another thread: its alternate stack comes from the
# agent's pthread_create trampoline -----------------------------------------
crash threadstack
expect_eq "thread stack overflow: dies of SIGSEGV, as without memtrail" "signal SIGSEGV $bare" "$got signal SIGSEGV"
check_report "thread stack overflow (the thread's alternate stack)" threadstack SIGSEGV

# --- a crash inside the agent's own free hook --------------------------------
crash inhook
expect_eq "in the agent's free hook: dies of SIGSEGV, as without memtrail" "signal SIGSEGV $bare" "$got signal SIGSEGV"
check_report "in the agent's free hook" inhook SIGSEGV

# --- another thread holds the report writer: no report, still dies ------------
crash busy
expect_eq "writer busy: still dies of SIGSEGV" "signal SIGSEGV" "$got"
expect_match "writer busy: summary on stderr" "^memtrail: +crashcat +live_bytes=$(cut -d' ' -f2 "$T/busy.ledger") " \
    "$(grep crashcat "$T/busy.err")"
expect_match "writer busy: says why there is no report" "cannot write the report: another report is being written" \
    "$(cat "$T/busy.err")"

# --- a fault inside the crash handler: default action, no loop ----------------
crash nested
expect_eq "fault in the handler: the second signal's default action (SIGSEGV)" "signal SIGSEGV" "$got"
expect_eq "fault in the handler: the summary came once" "1" "$(grep -c 'fatal signal SIGABRT' "$T/nested.err")"

# --- memtrail run passes the death on as 128+N --------------------------------
for m in segv:11:SIGSEGV abort:6:SIGABRT bus:7:SIGBUS; do
    IFS=: read -r mode n sig <<<"$m"
    rm -f "$T"/run.*
    "$MT" run -o "$T/run.%p.mtr" -- "$TBIN/crasher" "$mode" "$T/run.ledger" "$T/run.file" >"$T/run.out" 2>"$T/run.err"
    rc=$?
    expect_eq "memtrail run, $mode: exit status 128+$n" "$((128 + n))" "$rc"
    rep=$(ls "$T"/run.*.mtr 2>/dev/null | head -1)
    expect_eq "memtrail run, $mode: report reason" "signal $sig" \
        "$( [ -n "$rep" ] && json_get <("$MT" report --json "$rep") "j['reason']")"
    expect_match "memtrail run, $mode: announces the report" "summary report of [0-9]+ written to" "$(cat "$T/run.err")"
done

# --- handlers that are not ours are kept ---------------------------------------
crash own
expect_eq "own SIGSEGV handler: it runs and exits 42, as without memtrail" "exit 42 $bare own handler ran" \
    "$got exit 42 $(cat "$T/own.out")"
expect_eq "own SIGSEGV handler: no crash summary from memtrail" "0" "$(grep -c 'fatal signal' "$T/own.err")"
expect_eq "own SIGSEGV handler: the report is the one from _exit" "exit" \
    "$(json_get <("$MT" report --json "$T/own.mtr") "j['reason']")"

rm -f "$T"/ign.*
got=$(end_status "$T/ign.out" "$T/ign.err" IGNORE=SIGABRT MEMTRAIL_OPTIONS="output=$T/ign.mtr" LD_PRELOAD="$AGENT" \
    "$TBIN/crasher" abort "$T/ign.ledger")
expect_eq "SIGABRT ignored at start-up: left alone (abort still kills, no crash report)" "signal SIGABRT 0 no report" \
    "$got $(grep -c 'fatal signal' "$T/ign.err") $([ -f "$T/ign.mtr" ] && echo report || echo no report)"

# --- crash_report=off ------------------------------------------------------------
crash segv crash_report=off
expect_eq "crash_report=off: dies of SIGSEGV, no summary, no report" "signal SIGSEGV 0 no report" \
    "$got $(grep -c 'fatal signal' "$T/segv.err") $([ -f "$T/segv.mtr" ] && echo report || echo no report)"
crash segv crash_report=on
expect_eq "crash_report=on: the report" "signal SIGSEGV" "$(grep -s '^reason ' "$T/segv.mtr" | cut -d' ' -f2-)"
err=$(MEMTRAIL_OPTIONS="crash_report=maybe" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_match "crash_report=maybe: clear message" \
    "^memtrail: MEMTRAIL_OPTIONS: bad value 'maybe' for crash_report \(accepted: on, crash, off\); running untracked$" "$err"

# --- a handler that chains to ours: CPython's faulthandler --------------------
rm -f "$T"/py.*
got=$(end_status "$T/py.out" "$T/py.err" MEMTRAIL_OPTIONS="output=$T/py.mtr" LD_PRELOAD="$AGENT" \
    python3 -X faulthandler -c 'import ctypes; ctypes.string_at(0)')
expect_eq "python faulthandler: dies of SIGSEGV" "signal SIGSEGV" "$got"
expect_eq "python faulthandler: its traceback, then our summary" "Fatal Python error: Segmentation fault|memtrail: fatal signal SIGSEGV" \
    "$(grep -oE '^(Fatal Python error: Segmentation fault|memtrail: fatal signal SIGSEGV)' "$T/py.err" | paste -sd'|')"
expect_eq "python faulthandler: report reason" "signal SIGSEGV" "$(grep -s '^reason ' "$T/py.mtr" | cut -d' ' -f2-)"

# The report when a signal's default action ends the program (SIGTERM from
# a service manager, SIGPIPE in a pipeline, SIGHUP, SIGQUIT, SIGUSR1/2,
# SIGALRM, SIGXCPU): the agent writes it quietly, reason "signal NAME",
# and the process still dies of that signal. Counts are compared with the
# ledger the program kept itself (tests/agent/termsig.c), the way it ends
# with how it ends without memtrail, and what the program sees of the
# dispositions (the agent's handler is hidden: SIG_DFL) with what it sees
# without the agent. Also: RLIMIT_FSIZE, which the agent's own writes must
# not turn into a SIGXFSZ.
source "$(dirname "$0")/../lib.sh"
P=$TBIN/termsig
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$P" ] || { fail setup "build first (make tests)"; exit 1; }
ulimit -c 0 # SIGQUIT dumps core by default

# run_both NAME MODE [OPTIONS]: termsig MODE bare, then under the agent
# (report $T/NAME.mtr); sets bare and got.
run_both() {
    local name=$1 mode=$2 opts=${3:+:$3}
    rm -f "$T/$name".*
    bare=$(end_status "$T/$name.bare.out" "$T/$name.bare.err" "$P" "$mode" "$T/$name.bare.ledger" "$T/$name.bare.file")
    got=$(end_status "$T/$name.out" "$T/$name.err" MEMTRAIL_OPTIONS="output=$T/$name.mtr$opts" LD_PRELOAD="$AGENT" \
        "$P" "$mode" "$T/$name.ledger" "$T/$name.file")
}

# check_report NAME REASON: the report's reason and termcat = the ledger.
check_report() {
    local name=$1 reason=$2
    if [ ! -f "$T/$name.mtr" ]; then
        fail "$name: report written" "no $T/$name.mtr; stderr: $(head -c 600 "$T/$name.err")"
        return
    fi
    "$MT" report --json "$T/$name.mtr" >"$T/$name.json"
    set -- $(cat "$T/$name.ledger" 2>/dev/null)
    expect_eq "$name: report reason '$reason', termcat = ledger (live bytes, count, allocs, frees)" \
        "$reason $2 $3 $5 $6" \
        "$(json_get "$T/$name.json" "' '.join([j['reason']] + [str(c[k]) for c in j['categories'] if c['name']=='termcat' for k in ('live_bytes','live_count','allocs','frees')])")"
}

# --- each terminating signal: the same death, a report at it, quietly ----------
for sig in TERM HUP QUIT USR1 USR2 PIPE ALRM XCPU; do
    run_both "$sig" "$sig"
    expect_eq "SIG$sig: dies of it, as without memtrail" "signal SIG$sig signal SIG$sig" "$bare $got"
    check_report "$sig" "signal SIG$sig"
    expect_eq "SIG$sig: nothing on stderr (not a crash)" "" "$(cat "$T/$sig.err")"
done

# --- a thread allocating all along while SIGTERM comes ---------------------------
run_both threads threads
expect_eq "threads: dies of SIGTERM, as without memtrail" "signal SIGTERM signal SIGTERM" "$bare $got"
check_report threads "signal SIGTERM"

# --- a signal that lands in the agent's own work waits for it ---------------------
# "deep" allocates 48 calls deep until its CPU-clock timer sends SIGTERM: in
# detail mode most of that time is the agent's stack walk, so the signal
# lands there in most runs. Before, it then got its default action at once,
# without a report (6 runs in 10 in detail mode, trace mode about half; sample
# mode walks too rarely to be hit, and is here as a check that it still
# works). Each run must die of SIGTERM with its complete report at the signal
# (a trace: complete too).
for mode in detail sample trace; do
    bad=""
    for i in 1 2 3 4 5 6 7 8; do
        name="deep_${mode}_$i"
        rm -f "$T/$name".*
        got=$(end_status "$T/$name.out" "$T/$name.err" MEMTRAIL_OPTIONS="mode=$mode:depth=64:output=$T/$name.mtr" \
            LD_PRELOAD="$AGENT" "$P" deep "$T/$name.ledger" $((20 + 9 * i)))
        rep=$T/$name.mtr
        [ $mode = trace ] && rep=$T/$name.mtr.mtr
        seen="$got|$(grep -s '^reason ' "$rep" | cut -d' ' -f2-)|$(tail -n1 "$rep" 2>/dev/null)"
        if [ $mode = trace ]; then
            "$MT" analyze --json "$T/$name.mtr" >"$T/$name.json" 2>/dev/null
            seen="$seen|$(json_get "$T/$name.json" "j['complete']" 2>/dev/null)"
        fi
        want="signal SIGTERM|signal SIGTERM|end"
        [ $mode = trace ] && want="$want|True"
        [ "$seen" = "$want" ] || bad="$bad run $i: $seen;"
    done
    expect_eq "SIGTERM in the agent's stack walks ($mode, 8 runs): each dies of it, its report complete, reason signal SIGTERM" \
        "" "$bad"
done

# ljmp: the program's own SIGPROF handler siglongjmps out of whatever runs
# (a timeout idiom), most often the agent's stack walk, which never
# finishes: the thread stays in the agent's work for good. Its SIGTERM then
# waits at most 10 s (a timer sends it again, and the second one ends the
# process at once) instead of for ever: the program, which sleeps 15 s after
# it and then prints "survived", must die of SIGTERM without printing it.
rm -f "$T"/ljmp.*
got=$(end_status "$T/ljmp.out" "$T/ljmp.err" MEMTRAIL_OPTIONS="mode=detail:output=$T/ljmp.mtr" \
    LD_PRELOAD="$AGENT" "$P" ljmp "$T/ljmp.ledger")
expect_eq "ljmp: a thread left in the agent's work by a longjmp still dies of its SIGTERM, bounded" \
    "signal SIGTERM|" "$got|$(cat "$T/ljmp.out")"

# exitself/exitother: 16384 sites, then exit 0; SIGTERM comes while the report
# at exit is being written (its temporary file appears), to the thread
# writing it or to another one. The report finishes (reason exit, every
# site), nothing is left behind, and the process dies of the signal.
# Before: exitself lost the report (its temporary left behind), exitother
# exited 0 (the signal lost).
for m in exitself exitother; do
    D=$T/$m
    rm -rf "$D" "$T/$m".*
    mkdir -p "$D"
    got=$(end_status "$T/$m.out" "$T/$m.err" MEMTRAIL_OPTIONS="mode=detail:depth=64:output=$D/r.mtr" \
        LD_PRELOAD="$AGENT" "$P" $m "$T/$m.ledger" "$D")
    expect_eq "$m: SIGTERM during the report at exit: dies of it; the report finished (reason exit, ends), alone in its directory" \
        "signal SIGTERM|exit|end|r.mtr" \
        "$got|$(grep -s '^reason ' "$D/r.mtr" | cut -d' ' -f2-)|$(tail -n1 "$D/r.mtr" 2>/dev/null)|$(ls "$D" | tr '\n' ' ' | sed 's/ $//')"
    expect_eq "$m: every site in it (16384 stacks and more)" yes \
        "$([ "$(cat "$D/r.mtr" 2>/dev/null | grep -c '^site ')" -ge 16384 ] && echo yes || echo no)"
    cp "$D/r.mtr" "$T/$m.mtr" 2>/dev/null
    check_report "$m" exit
    expect_eq "$m: nothing on stderr" "" "$(cat "$T/$m.err")"
done

# --- RLIMIT_FSIZE: the report is a file too --------------------------------------
run_both XFSZ XFSZ
expect_eq "SIGXFSZ: dies of it, as without memtrail" "signal SIGXFSZ signal SIGXFSZ" "$bare $got"
expect_eq "SIGXFSZ: the report cannot be written under the program's 4 KiB limit, and says so" \
    "memtrail: cannot write the report to $T/XFSZ.mtr: File too large" "$(cat "$T/XFSZ.err")"
# Before, the agent's report at exit, larger than the limit, raised
# SIGXFSZ and ended a program that exits 0 without memtrail.
run_both smallfsize smallfsize
expect_eq "a 4 KiB RLIMIT_FSIZE, then exit 0: exits 0, as without memtrail" "exit 0 bye exit 0 bye" \
    "$bare $(cat "$T/smallfsize.bare.out") $got $(cat "$T/smallfsize.out")"
expect_eq "a 4 KiB RLIMIT_FSIZE: the agent says why there is no report" \
    "memtrail: cannot write the report to $T/smallfsize.mtr: File too large" "$(cat "$T/smallfsize.err")"

# --- what the program sees, and what it does with it ------------------------------
run_both disp disp
expect_eq "dispositions: sigaction, signal, sysv_signal, bsd_signal and sigset say what they say without memtrail" \
    "$(cat "$T/disp.bare.out")" "$(cat "$T/disp.out")"
contains "dispositions: SIG_DFL everywhere" "TERM sigaction=dfl signal=dfl sysv_signal=dfl bsd_signal=dfl sigset=dfl" \
    "$(cat "$T/disp.out")"
run_both graceful graceful
expect_eq "a handler installed only over the default (as Ruby's): it runs, exit 0, as without memtrail" \
    "exit 0 graceful exit 0 graceful" "$bare $(cat "$T/graceful.bare.out") $got $(cat "$T/graceful.out")"
check_report graceful exit
rm -f "$T"/ign.*
got=$(end_status "$T/ign.out" "$T/ign.err" IGNORE=SIGTERM MEMTRAIL_OPTIONS="output=$T/ign.mtr" LD_PRELOAD="$AGENT" \
    "$P" TERM "$T/ign.ledger")
expect_eq "SIGTERM ignored at start-up: left ignored (the program lives on, exit 5), the report at exit" \
    "exit 5 exit" "$got $(grep -s '^reason ' "$T/ign.mtr" | cut -d' ' -f2-)"

# --- a vfork child that dies of SIGTERM leaves its parent's crash report alone ------
run_both vfork vfork
expect_eq "vfork: the child dies of SIGTERM, then the parent of SIGSEGV, as without memtrail" \
    "signal SIGSEGV child SIGTERM signal SIGSEGV child SIGTERM" \
    "$bare $(cat "$T/vfork.bare.out") $got $(cat "$T/vfork.out")"
check_report vfork "signal SIGSEGV"
contains "vfork: the parent's crash summary" "memtrail: fatal signal SIGSEGV" "$(cat "$T/vfork.err")"

# --- a container's PID 1: the kernel drops a signal at the default sent to it, so
# the agent leaves the terminating signals alone there ------------------------------
if unshare -fp true 2>/dev/null; then
    expect_eq "PID 1 (unshare -fp): SIGTERM not taken, as without memtrail" "pid1=yes caught=no" \
        "$(MEMTRAIL_OPTIONS="output=$T/pid1.mtr" unshare -fp env LD_PRELOAD="$AGENT" "$P" sigcgt "$T/pid1.ledger")"
    expect_eq "not PID 1: SIGTERM taken" "pid1=no caught=yes" \
        "$(MEMTRAIL_OPTIONS="output=$T/pidn.mtr" LD_PRELOAD="$AGENT" "$P" sigcgt "$T/pidn.ledger")"
else
    echo "SKIP PID 1: unshare -fp is not allowed here"
fi

# --- crash_report=crash and off: no report at SIGTERM ------------------------------
for v in crash off; do
    run_both "cr$v" TERM "crash_report=$v"
    expect_eq "crash_report=$v: dies of SIGTERM, no report" "signal SIGTERM no report" \
        "$got $([ -f "$T/cr$v.mtr" ] && echo report || echo no report)"
done

# --- killed from outside, through memtrail run, in summary and trace mode -----------
# start_waiter DIR MODE EXT: `memtrail run --mode MODE` of the waiting
# program in the background, output w.PID.EXT in DIR; sets runner (run's
# pid) and pid (the program's, once it said ready).
start_waiter() {
    "$MT" run --mode "$2" -o "$1/w.%p.$3" -- "$P" wait "$1/ledger" >"$1/out" 2>"$1/err" </dev/null &
    runner=$!
    for _ in $(seq 1 100); do grep -q ready "$1/out" 2>/dev/null && break; sleep 0.1; done
    pid=$(pgrep -f "$P wait $1/ledger" | while read -r p; do [ "$(cat /proc/$p/comm)" = termsig ] && echo "$p"; done | head -1)
}
for mode in summary trace; do
    ext=mtr; [ $mode = trace ] && ext=mtt
    D=$T/run.$mode
    mkdir -p "$D"
    start_waiter "$D" $mode $ext
    [ -n "$pid" ] && kill -TERM "$pid"
    wait "$runner"
    expect_eq "memtrail run, $mode, kill -TERM: exit status 143" 143 "$?"
    if [ $mode = summary ]; then
        expect_eq "memtrail run, summary: the report's reason" "signal SIGTERM" \
            "$(grep -s '^reason ' "$D"/w.*.mtr | cut -d' ' -f2-)"
        contains "memtrail run, summary: announces the report" "summary report of $pid written to $D/w.$pid.mtr" \
            "$(cat "$D/err")"
    else
        "$MT" analyze --json "$D/w.$pid.mtt" >"$D/an.json" 2>"$D/an.err"
        expect_eq "memtrail run, trace: the trace is complete (finished at the signal), with termcat's 5 allocations" \
            "True True" "$(json_get "$D/an.json" "str(j['complete']) + ' ' + str(j['allocs'] >= 5)")"
        expect_eq "memtrail run, trace: the report beside the trace" "signal SIGTERM" \
            "$(grep -s '^reason ' "$D/w.$pid.mtt.mtr" | cut -d' ' -f2-)"
        contains "memtrail run, trace: says the signal, and that the trace was finished" \
            "memtrail: it was killed by signal 15 (Terminated); the trace is complete (it has its end record)" "$(cat "$D/err")"
    fi
done
# SIGKILL in trace mode: the trace as far as it was written, no end record;
# memtrail run says so (summary mode says the program was killed too).
D=$T/run.kill9
mkdir -p "$D"
start_waiter "$D" trace mtt
[ -n "$pid" ] && kill -KILL "$pid"
wait "$runner"
expect_eq "memtrail run, trace, kill -KILL: exit status 137" 137 "$?"
contains "memtrail run, trace, kill -KILL: names the trace" "memtrail: trace of $pid written to $D/w.$pid.mtt" "$(cat "$D/err")"
contains "memtrail run, trace, kill -KILL: says it was killed and the trace has no end record" \
    "memtrail: it was killed by signal 9 (Killed): the trace has no end record ('memtrail analyze' says what it holds)" \
    "$(cat "$D/err")"

# --- CPython: SIGINT stays KeyboardInterrupt's, SIGTERM's report --------------------
PY=/usr/bin/python3
if [ -x "$PY" ]; then
    q='import signal; print(signal.getsignal(signal.SIGINT).__name__, signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP))'
    expect_eq "python: the handlers it sees are as without memtrail (SIGINT: its KeyboardInterrupt)" \
        "$("$PY" -c "$q")" "$(MEMTRAIL_OPTIONS="output=$T/pyq.mtr" LD_PRELOAD="$AGENT" "$PY" -c "$q")"
    got=$(end_status "$T/py.out" "$T/py.err" MEMTRAIL_OPTIONS="output=$T/py.mtr" LD_PRELOAD="$AGENT" \
        "$PY" -c 'import os, signal; x = [bytes(1000) for _ in range(1000)]; os.kill(os.getpid(), signal.SIGTERM)')
    expect_eq "python, SIGTERM: dies of it, the report at it" "signal SIGTERM signal SIGTERM" \
        "$got $(grep -s '^reason ' "$T/py.mtr" | cut -d' ' -f2-)"
    got=$(end_status "$T/pyi.out" "$T/pyi.err" MEMTRAIL_OPTIONS="output=$T/pyi.mtr" LD_PRELOAD="$AGENT" \
        "$PY" -c 'import os, signal
try:
    os.kill(os.getpid(), signal.SIGINT)
except KeyboardInterrupt:
    print("KeyboardInterrupt")')
    expect_eq "python, SIGINT: still its KeyboardInterrupt, exit 0, the report at exit" "exit 0 KeyboardInterrupt exit" \
        "$got $(cat "$T/pyi.out") $(grep -s '^reason ' "$T/pyi.mtr" | cut -d' ' -f2-)"
else
    echo "SKIP python under SIGTERM and SIGINT: /usr/bin/python3 is not installed"
fi

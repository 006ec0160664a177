#!/usr/bin/env bash
# The agent's own descriptors (its trace file, the query socket, the /proc
# files it reads) against a program that closes or takes descriptors it
# did not open (tests/agent/fdclose.c): close of every number from 3,
# close_range, closefrom, dup2/dup3 of a file of its own onto each of
# them, and raw (the close_range system call itself, which no hook sees,
# then F_DUPFD onto each number: the agent's trace file checks its
# descriptor before each write and opens itself again); then it opens 16
# files and allocates 300,000 blocks. Before
# fdguard.c the trace file's number went to one of the program's files,
# and the rest of the trace was written into it. The truth: each of the
# program's files holds exactly what the program wrote; the trace holds
# every allocation (its analysis counts them), with none lost; the
# summary report counts them too.
. "$(dirname "$0")/../lib.sh"

P=$TBIN/fdclose
[ -x "$P" ] && [ -x "$MT" ] || { fail setup "build first: $P / $MT missing"; exit 1; }
ALLOCS=300000

files_ok() { # NAME DIR WAY
    local k bad=""
    for k in $(seq 0 15); do
        [ "$(cat "$2/f$k" 2>/dev/null)" = "mine $k" ] || bad="$bad f$k($(head -c 40 "$2/f$k" 2>/dev/null | od -An -c | tr -s ' ' | head -c 60))"
    done
    if [ -f "$2/dup" ]; then
        grep -qv '^mine 1[0-9][0-9]$' "$2/dup" && bad="$bad dup($(grep -cv '^mine 1[0-9][0-9]$' "$2/dup") foreign lines)"
    elif [ "$3" = dup2 ] || [ "$3" = dup3 ] || [ "$3" = raw ]; then
        bad="$bad dup(missing)"
    fi
    if [ -z "$bad" ]; then pass "$1"; else fail "$1" "not the program's own content:$bad"; fi
}

for way in close close_range closefrom raw dup2 dup3; do
    for mode in summary trace; do
        ext=mtr; [ $mode = trace ] && ext=mtt
        D=$T/$way.$mode
        mkdir -p "$D"
        # no descriptor but 0, 1 and 2 from here: the program takes every other for the agent's
        out=$("$MT" run --mode $mode -o "$D/out.%p.$ext" -- "$P" $way "$D" $mode 2>"$D/err" </dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-)
        rc=$?
        expect_eq "$way, $mode: the program runs" "0 fdclose: $ALLOCS allocations" "$rc ${out%%,*}"
        if [ $mode = trace ] && [ $way != close ] && [ $way != close_range ] && [ $way != closefrom ]; then
            taken=$(sed -n 's/.*, \([0-9]*\) descriptors taken, trace file among them/\1/p' <<<"$out")
            if [ "${taken:-0}" -ge 2 ]; then pass "$way, trace: it took the agent's descriptors, the trace file's among them ($taken)"
            else fail "$way, trace: it took the agent's descriptors, the trace file's among them" "$out"; fi
        fi
        files_ok "$way, $mode: its files hold only what it wrote" "$D" $way
        f=$(ls "$D"/out.*."$ext" 2>/dev/null | head -1)
        if [ -z "$f" ]; then
            fail "$way, $mode: the agent's output" "none in $D: $(head -c 600 "$D/err")"
            continue
        fi
        if [ $mode = trace ]; then
            contains "$way, trace: nothing lost" ", 0 lost" "$(grep 'events,' "$D/err")"
            # raw: the trace file's number was closed behind the hooks and is
            # the program's file now; the agent opened its file again
            [ $way = raw ] && contains "raw, trace: the agent says it opened the trace file again" \
                "closed the trace file's descriptor behind the agent's hooks 1 time: the file was opened again" "$(grep 'events,' "$D/err")"
            "$MT" analyze "$f" >"$D/an" 2>"$D/an.err"
            expect_eq "$way, trace: the trace reads whole" "00" "$?$(grep -c 'CAUTION' "$D/an")"
            n=$(sed -n 's/^ *allocations \([0-9]*\),.*/\1/p' "$D/an" | head -1)
            if [ -n "$n" ] && [ "$n" -ge $((ALLOCS + 1000)) ]; then pass "$way, trace: every allocation is in it ($n)"
            else fail "$way, trace: every allocation is in it" "allocations=${n:-none}, want >= $((ALLOCS + 1000))"; fi
        else
            "$MT" report --json "$f" >"$D/r.json" 2>/dev/null
            n=$(json_get "$D/r.json" "[c['allocs'] for c in j['categories'] if c['name'] == 'malloc'][0]" 2>/dev/null)
            if [ -n "$n" ] && [ "$n" -ge $((ALLOCS + 1000)) ]; then pass "$way, summary: the report counts every allocation ($n)"
            else fail "$way, summary: the report counts every allocation" "allocs=${n:-none}"; fi
        fi
    done
done

# The query socket survives a program that closed every descriptor, and
# one that put its own file on each (dup2; in trace mode the socket is
# served by a thread, which must follow it to its new number): it still
# answers.
skip() { echo "SKIP $1: $2"; }
PY=/usr/bin/python3 # Debian's, not a wrapper that execs another (pyenv's shim would run it untracked)
[ -x "$PY" ] || PY=
if [ -z "$PY" ]; then
    skip "the query socket after closes and dup2" "/usr/bin/python3 is not installed"
fi
for case in closerange:summary dup2:trace; do
    [ -n "$PY" ] || break
    how=${case%%:*} mode=${case#*:}
    D=$T/query.$how
    mkdir -p "$D"
    cat >"$D/q.py" <<PY
import os, sys, time
fds = [int(n) for n in os.listdir("/proc/self/fd") if int(n) > 2]
if "$how" == "closerange":
    os.closerange(3, 4096)
else:
    null = os.open("/dev/null", os.O_WRONLY)
    for fd in fds:
        if fd != null:
            try: os.dup2(null, fd)
            except OSError: pass
keep = [bytes(1000) for _ in range(1000)]
sys.stdout.write("ready\n"); sys.stdout.flush()
time.sleep(30)
PY
    ext=mtr; [ $mode = trace ] && ext=mtt
    "$MT" run --mode $mode -o "$D/q.%p.$ext" -- "$PY" "$D/q.py" >"$D/q.out" 2>"$D/q.err" </dev/null &
    runner=$!
    for _ in $(seq 1 100); do grep -q ready "$D/q.out" 2>/dev/null && break; sleep 0.1; done
    qpid=$(pgrep -f "$D/q.py" | while read -r p; do [ "$(cat /proc/$p/comm)" != memtrail ] && echo "$p"; done | head -1)
    if [ -n "$qpid" ]; then
        ans=$("$MT" query "$qpid" 2>&1)
        contains "$how, $mode: the query socket still answers" "memtrail native memory summary: pid $qpid" "$ans"
    else
        fail "$how, $mode: the query socket still answers" "the program did not start: $(head -c 400 "$D/q.err")"
    fi
    kill "$qpid" 2>/dev/null
    wait "$runner"
    expect_eq "$how, $mode: memtrail run ends with the program (SIGTERM: 143)" 143 "$?"
done

# The agent's long-lived descriptors sit at the top of the descriptor
# range, out of the program's way: below 512 (half the usual limit) a
# program sees the same descriptors open as bare, in every mode (the
# query socket, the /proc files, the output directory, libunwind's pipe).
bare_low=$(bash -c "ulimit -n 1024; exec \"$P\" list" </dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-)
for mode in summary detail trace sample; do
    got=$(bash -c "ulimit -n 1024; exec \"$MT\" run --mode $mode -o \"$T/low.$mode.%p.mt\" -- \"$P\" list" \
        2>"$T/low.$mode.err" </dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-)
    expect_eq "placement, $mode: below 512 the program sees what it sees bare" "$bare_low" "$got"
done

# Under a descriptor limit too small for that (ulimit -n 6), the agent
# keeps none it can do without: the program opens as many files as bare
# (before: none of its 3). No query socket then, and it says so.
count() { # LIMIT MODE|bare
    local pre=$AGENT
    [ "$2" = bare ] && pre=
    bash -c "ulimit -n $1; exec env MEMTRAIL_OPTIONS=mode=$2:output=$T/count.%p.mtr LD_PRELOAD=$pre \"$P\" count" \
        2>"$T/count.$2.err" </dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-
}
bare_n=$(count 6 bare)
expect_eq "ulimit -n 6, bare: the program opens 3" "fdclose: opened 3" "$bare_n"
for mode in summary detail; do
    expect_eq "ulimit -n 6, $mode: the program opens as many as bare" "$bare_n" "$(count 6 $mode)"
    contains "ulimit -n 6, $mode: the agent says there is no query socket, and why" \
        "the descriptor limit (ulimit -n) is too low" "$(cat "$T/count.$mode.err")"
done
n=$(ls "$T"/count.*.mtr 2>/dev/null | wc -l)
expect_eq "ulimit -n 6: both reports written" 2 "$n"
out=$(bash -c "ulimit -n 6; exec \"$MT\" run -o \"$T/count-run.%p.mtr\" -- \"$P\" count" 2>"$T/count-run.err" </dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-)
expect_eq "ulimit -n 6, memtrail run: runs the program, which opens as many as bare" "0 $bare_n" "$? $out"

# libunwind's memory-validation pipe: a walk through code with no unwind
# information (tests/agent/unwpipe.c) makes libunwind read a byte from it
# and write one into it. After the program's closefrom(3) and two opens,
# the program's input file must still read whole and its output file hold
# only what it wrote (before: the pipe was on 3 and 4, which the program
# got back: its input lost 4 bytes, its output got 4 bytes of stack).
# "vfork": a vfork child (sharing libunwind's memory, not the descriptor
# table) first closes everything and walks the same code: the pipe libunwind
# makes again there must not land in the parent's array (before the fix of
# the review: the parent's files lost and got a byte, 3 runs of 3).
U=$TBIN/unwpipe
for u in auto cfi libunwind vfork; do
    for mode in detail trace; do
        D=$T/unw.$u.$mode
        mkdir -p "$D"
        printf 'ABCDEFGH\n' >"$D/in"
        extra=
        [ $u = vfork ] && extra=vfork
        out=$("$MT" run --mode $mode --unwind "${u/vfork/auto}" -o "$D/r.%p.mt" -- "$U" "$D" $extra 2>"$D/err" </dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-)
        # (the fds are 3 and 4, the pipe's old numbers, but for one an
        # agent thread may hold for a moment while it opens a file)
        expect_match "libunwind's pipe ($u, $mode): the program's files are its own" \
            "^0 unwpipe: fds [0-9]+ [0-9]+ in=ABCDEFGH out=ok mine$" "$? $out $(tr -c "[:print:]\n" "?" <"$D/out" 2>/dev/null)"
    done
done

# A program at its descriptor limit (tests/agent/fdfull.c opens /dev/null
# until EMFILE), as a server leaking descriptors ends: its report at exit,
# at SIGTERM, at a crash, and mt_report_write's, must still be written
# whole, address space included (before: none was, "cannot write the
# report: Too many open files"). The agent's two reserve descriptors are
# let go for the report: limits set by the program after start-up (soft
# under the hard limit, or equal: the reserve moves under them) or before
# (ulimit -n). The program sees its limit unchanged after the report, is
# still at it (its next open fails with EMFILE), and has every descriptor
# it opened.
F=$TBIN/fdfull
for how in below:64:128 equal:64:64 preset:64:64; do
    IFS=: read -r way soft hard <<<"$how"
    for mode in exit term segv api; do
        D=$T/full.$way.$mode
        rm -rf "$D"
        mkdir -p "$D"
        pre=""
        [ $way = preset ] && pre="ulimit -n $soft;"
        st=$(bash -c "$pre MEMTRAIL_OPTIONS=output=$D/r.mtr LD_PRELOAD=$AGENT exec $F $soft $hard $mode $D/a.mtr" \
            >"$D/out" 2>"$D/err" </dev/null; echo $?)
        rep=$D/r.mtr
        [ $mode = api ] && rep=$D/a.mtr
        want=0
        [ $mode = term ] && want=143
        [ $mode = segv ] && want=139
        expect_eq "at the descriptor limit ($way $soft/$hard, $mode): exit status $want, the program at its limit" \
            "$want full" "$st $(grep -o '^full' "$D/out")"
        expect_eq "at the descriptor limit ($way, $mode): the report whole, fdcat 123456 bytes, the address space in it" \
            "end|live_bytes=123456|1|yes" \
            "$(tail -n1 "$rep" 2>/dev/null)|$(grep -s '^category fdcat ' "$rep" | grep -o 'live_bytes=[0-9]*')|$(grep -sc '^process ' "$rep")|$(grep -s '^category code ' "$rep" | grep -qE 'reserved=[1-9]' && echo yes)"
        if [ $mode = api ]; then
            expect_eq "at the descriptor limit ($way, api): mt_report_write 0; the program's limit as it set it, its next open EMFILE, none of its descriptors closed" \
                "after rc=0 soft=$soft hard=$hard open=EMFILE lost=0" "$(grep '^after' "$D/out")"
        fi
        [ $mode = segv ] || expect_eq "at the descriptor limit ($way, $mode): nothing on stderr" "" "$(cat "$D/err")"
    done
done
# A vfork child that sets its own limit shares the agent's memory, not the
# descriptor table: the parent's reserve stays (before the review's fix, the
# child's numbers went into it, and the parent's report closed two of the
# parent's files). A raw close_range of everything from 3 gives the agent's
# numbers to the program: the report then has no reserve and says so, but
# closes none of the program's files (before: two).
for mode in vfork rawclose; do
    D=$T/full.$mode
    rm -rf "$D"
    mkdir -p "$D"
    MEMTRAIL_OPTIONS=output=$D/r.mtr LD_PRELOAD=$AGENT "$F" 64 64 $mode "$D/a.mtr" >"$D/out" 2>"$D/err" </dev/null
    rc=0
    [ $mode = rawclose ] && rc=-24
    expect_eq "at the descriptor limit ($mode): mt_report_write $rc, none of the program's descriptors closed" \
        "after rc=$rc soft=64 hard=64 open=EMFILE lost=0" "$(grep '^after' "$D/out")"
done
# A terminating signal (SIGALRM from the program's own timer) that lands in a
# fork, while the agent holds its tables across it, at the descriptor limit:
# it waits for the fork, then the report is written whole (the review of
# 6902e80: it was sent again while the reserve's lock was still held for
# the fork, and the report found no descriptor, 6 runs of 6). Each child
# writes its own report too (%p).
D=$T/full.forkloop
rm -rf "$D"
mkdir -p "$D"
MEMTRAIL_OPTIONS="output=$D/r.%p.mtr" LD_PRELOAD=$AGENT "$F" 64 64 forkloop >"$D/out" 2>"$D/err" </dev/null &
fpid=$!
wait $fpid
st=$?
expect_eq "at the descriptor limit, SIGALRM during forks: dies of it, its report whole, reason signal SIGALRM" \
    "142|signal SIGALRM|end" \
    "$st|$(grep -s '^reason ' "$D/r.$fpid.mtr" | cut -d' ' -f2-)|$(tail -n1 "$D/r.$fpid.mtr" 2>/dev/null)"
# A live query at the descriptor limit (a leaking server is one worth
# asking): the connection takes a reserve descriptor's number (before:
# accept failed with EMFILE and the query got no answer), the reply has the
# heap's figures and, from the one descriptor left, the address space;
# smaps then, and mincore instead of pagemap for a kernel mapping split
# between two categories (fdmapa and fdmapb, 1 and 3 MiB touched: exact).
# The number comes back to the reserve after, so the program's own report
# is whole. forkquery: the same in a child forked at the limit, whose query
# socket took one reserve number (before: "no control socket ... Too many
# open files" on stderr in every such child); its reply then has no
# descriptor left for the address space and leaves it out, silently (the
# program's stderr is not the asker's), while its report is whole.
fdfield() { # JSON CATEGORY FIELD: a category's field, or the process's ("-")
    "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
if sys.argv[2] == "-":
    print(d.get("process") and d["process"].get(sys.argv[3]))
else:
    print(next((c.get(sys.argv[3]) for c in d["categories"] if c["name"] == sys.argv[2]), "none"))' "$@" 2>/dev/null
}
for mode in query forkquery; do
    D=$T/full.$mode
    rm -rf "$D"
    mkdir -p "$D"
    mkfifo "$D/in"
    MEMTRAIL_OPTIONS="output=$D/r.%p.mtr" LD_PRELOAD=$AGENT "$F" 64 64 $mode "$D/a.mtr" <"$D/in" >"$D/out" 2>"$D/err" &
    fpid=$!
    exec 8>"$D/in"
    for _ in $(seq 200); do
        grep -q '^ready' "$D/out" && break
        sleep 0.05
    done
    qpid=$fpid
    [ $mode = forkquery ] && qpid=$(awk '/^child/ {print $2}' "$D/out")
    "$MT" query "$qpid" --json >"$D/q.json" 2>"$D/q.err"
    qrc=$?
    held=$(ls -l "/proc/$qpid/fd" 2>/dev/null | grep -c memtrail-reserve)
    echo go >&8
    exec 8>&-
    wait $fpid
    st=$?
    expect_eq "query at the descriptor limit ($mode): the program at its limit, one kernel mapping for fdmapa and fdmapb" \
        "full merged 1" "$(grep -o '^full' "$D/out") $(grep '^merged' "$D/out")"
    expect_eq "query at the descriptor limit ($mode): answered, fdcat 123456 live bytes" \
        "0 123456" "$qrc $(fdfield "$D/q.json" fdcat live_bytes)"
    if [ $mode = query ]; then
        expect_eq "query at the descriptor limit: the address space in the reply, the split mapping's pages exact (mincore)" \
            "1048576 3145728 yes" \
            "$(fdfield "$D/q.json" fdmapa resident_bytes) $(fdfield "$D/q.json" fdmapb resident_bytes) $([ "$(fdfield "$D/q.json" - rss_bytes)" -gt 0 ] 2>/dev/null && echo yes)"
        expect_eq "query at the descriptor limit: both reserve descriptors back after it" 2 "$held"
    else
        expect_eq "query at the descriptor limit (forkquery): the child's reply leaves the address space out" \
            "None None" "$(fdfield "$D/q.json" - rss_bytes) $(fdfield "$D/q.json" fdmapa resident_bytes)"
        expect_eq "query at the descriptor limit (forkquery): one reserve descriptor left beside the child's query socket" 1 "$held"
    fi
    expect_eq "query at the descriptor limit ($mode): then mt_report_write 0, the program's limit and descriptors as they were" \
        "0|after rc=0 soft=64 hard=64 open=EMFILE lost=0" "$st|$(grep '^after' "$D/out")"
    expect_eq "query at the descriptor limit ($mode): that report whole, the split mapping's pages exact" \
        "end|1|resident=1048576|resident=3145728" \
        "$(tail -n1 "$D/a.mtr" 2>/dev/null)|$(grep -sc '^process ' "$D/a.mtr")|$(grep -s '^category fdmapa ' "$D/a.mtr" | grep -o 'resident=[0-9]*')|$(grep -s '^category fdmapb ' "$D/a.mtr" | grep -o 'resident=[0-9]*')"
    expect_eq "query at the descriptor limit ($mode): nothing on the program's stderr" "" "$(cat "$D/err")"
done
# Queries closing their connections in the middle of the program's own
# reports at the limit (query=thread: the server thread answers "busy" while
# the main thread writes mt_report_write's, again and again for 4 s): a
# closing connection must not take back the numbers a report has let go
# (the review of 789fe08: it did, and that report failed with "Too many
# open files").
D=$T/full.apiloop
rm -rf "$D"
mkdir -p "$D"
MEMTRAIL_OPTIONS="query=thread:output=$D/r.%p.mtr" LD_PRELOAD=$AGENT "$F" 64 64 apiloop "$D/a.mtr" >"$D/out" 2>"$D/err" </dev/null &
fpid=$!
for _ in $(seq 200); do
    grep -q '^ready' "$D/out" && break
    sleep 0.05
done
asked=0
while kill -0 $fpid 2>/dev/null && ! grep -q '^apiloop' "$D/out"; do
    "$MT" query $fpid >/dev/null 2>>"$D/q.err"
    asked=$((asked + 1))
done
wait $fpid
expect_eq "queries during the program's reports at the limit: every report written (queries asked: $asked, busy: $(grep -c busy "$D/q.err"))" \
    "0 failed=0 yes" "$? $(grep -o 'failed=[0-9]*' "$D/out") $([ "$(grep -c busy "$D/q.err")" -gt 0 ] && echo yes)"
expect_eq "queries during the program's reports at the limit: nothing on its stderr" "" "$(cat "$D/err")"

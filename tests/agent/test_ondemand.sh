# Recording on demand: `memtrail query PID start detail|trace` and `stop`
# on a running program (tests/agent/ondemand.c). Its threads allocate in
# three phases and keep the books of each; recording is switched on before
# phase 2 and off after it, so the trace (read by `memtrail analyze`) and
# the detail sites (the agent's own report, read here by python) must hold
# exactly phase 2's books, and the summary counters the whole run's.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }
unset XDG_RUNTIME_DIR

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

wait_file() { local i; for ((i = 0; i < 3000; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }
wait_gone() { local i; for ((i = 0; i < 3000; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.02; done; return 1; }
# field FILE N: the Nth number of a ledger line.
field() { awk -v n="$2" '{ print $n }' "$1"; }
# The program's books of phase 2, as analyze --json names them:
# allocs frees reallocs frees_unknown reallocs_unknown allocated_bytes live_bytes live_count
books() { cat "$1/ledger2"; }
# The same figures from `memtrail analyze FILE --json`.
analyzed() {
    "$MT" analyze "$1" --json >"$T/a.json" 2>"$T/a.err" || { echo "analyze failed: $(cat "$T/a.err")"; return; }
    python3 - "$T/a.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(j["allocs"], j["frees"], j["reallocs"], j["frees_unknown"], j["reallocs_unknown"], j["allocated_bytes"],
      j["live_bytes"], j["live_count"])
EOF
}
# sites_of REPORT: the sites of category ondemand summed, from the agent's
# own report text (docs/report-format.md): "allocs frees reallocs live_bytes live_count".
sites_of() {
    python3 - "$1" <<'EOF'
import sys
s = {"allocs": 0, "frees": 0, "reallocs": 0, "live_bytes": 0, "live_count": 0}
for line in open(sys.argv[1], errors="replace"):
    parts = line.split()
    if len(parts) > 2 and parts[0] == "site":
        f = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
        if f.get("category") == "ondemand":
            for k in s:
                s[k] += int(f[k])
print(s["allocs"], s["frees"], s["reallocs"], s["live_bytes"], s["live_count"])
EOF
}
# raw_detail PID FILE: the agent's detail report over the control socket, as is.
raw_detail() {
    python3 - "/tmp/memtrail-$(id -u)/$1.sock" "$2" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"detail\n")
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
open(sys.argv[2], "wb").write(data)
EOF
}
# category_of PID: "live_bytes live_count allocs frees reallocs" of category
# ondemand in the process's summary now (as the program's DIR/total).
category_of() {
    "$MT" query "$1" summary --json >"$T/s.json" 2>"$T/s.err" || { echo "query failed: $(cat "$T/s.err")"; return; }
    python3 -c 'import json,sys
c = [c for c in json.load(open(sys.argv[1]))["categories"] if c["name"] == "ondemand"][0]
print(c["live_bytes"], c["live_count"], c["allocs"], c["frees"], c["reallocs"])' "$T/s.json"
}
# launch NAME OPTIONS [fork]: starts the program in $T/NAME; sets pid and D.
launch() {
    D=$T/$1; mkdir -p "$D"
    MEMTRAIL_OPTIONS="$2" LD_PRELOAD=$AGENT "$TBIN/ondemand" "$D" ${3:-} >"$D/stdout" 2>"$D/stderr" &
    pid=$!; pids+=("$pid")
    wait_file "$D/ready1" || fail "$1: program starts" "no ready1; $(cat "$D/stderr")"
}
# phase N: lets the program run phase N and waits until it is done.
phase() { touch "$D/go$1"; wait_file "$D/ready$(($1 + 1))" || fail "phase $1 ends" "no ready$(($1 + 1))"; }
finish() { touch "$D/go4"; wait "$pid"; }
# q NAME ARGS...: a query that must succeed (its reply is not shown).
q() { local n=$1; shift; if "$MT" query "$@" >"$T/q.out" 2>&1; then pass "$n"; else fail "$n" "$(cat "$T/q.out")"; fi; }

# --- trace, started off: start trace -o FILE (relative), phase 2, stop --------
launch trace "mode=trace:start=off:output=$T/trace/startup.%p.mtt" fork
phase 1
mkdir -p "$T/cwd"
out=$(cd "$T/cwd" && "$MT" query "$pid" start trace -o rec.mtt 2>&1); rc=$?
expect_eq "start trace: exit 0, says so" "0 trace recording on: every event from now on ('stop' finishes the file)" \
    "$rc $out"
out=$("$MT" query "$pid" start detail 2>&1); rc=$?
expect_eq "start while recording: the process's error, exit 1" \
    "1 memtrail: process $pid: trace recording is already on; 'stop' it first" "$rc $out"
phase 2
out=$("$MT" query "$pid" stop 2>&1); rc=$?
expect_match "stop: exit 0, names the trace, in the CLI's directory" \
    "^0 trace: [0-9]+ events, 0 lost, [0-9]+ bytes in $T/cwd/rec\.mtt\$" "$rc $out"
out=$("$MT" query "$pid" stop 2>&1); rc=$?
expect_eq "stop while not recording: the process's error, exit 1" \
    "1 memtrail: process $pid: nothing is being recorded (summary counting only); 'start detail' or 'start trace' first" \
    "$rc $out"
phase 3
expect_eq "summary counters exact across the switches (query at the end)" "$(cat "$D/total")" "$(category_of "$pid")"
finish
rc=$?
child=$(cat "$D/child" 2>/dev/null)
expect_eq "trace: the program exits 0, nothing on stderr (the forked child lost nothing: no line)" \
    "0:" "$rc:$(cat "$D/stderr")"
expect_eq "trace: the forked child's trace: 25 events (10 + 10 + 5), complete" "25 True" \
    "$("$MT" analyze --json "$T/cwd/rec.mtt.$child" 2>/dev/null | json_get /dev/stdin "'%d %s' % (j['events'], j['complete'])")"
"$MT" analyze "$T/cwd/rec.mtt" >"$T/a.txt" 2>&1
expect_eq "trace: analyze reads it whole (exit 0, not 'Incomplete')" "0 0" "$? $(grep -c Incomplete "$T/a.txt")"
expect_match "trace: analyze --json says complete" '"complete": true' "$("$MT" analyze "$T/cwd/rec.mtt" --json 2>&1)"
expect_eq "trace holds exactly phase 2 (allocs frees reallocs frees_unknown reallocs_unknown bytes live)" \
    "$(books "$D")" "$(analyzed "$T/cwd/rec.mtt")"
expect_eq "start=off: no trace at start-up, none at exit" "" "$(ls "$T/trace" | grep mtt)"
expect_eq "fork while recording: the child's own trace (FILE.PID), complete, with its allocations only, its frees of 5 inherited blocks known (the parent's trace holds them)" \
    "10 15 0" "$(analyzed "$T/cwd/rec.mtt.$child" | awk '{ print $1, $2, $4 }')"
# the parent's trace began on demand: what the parent held before it, the
# child inherited unseen
expect_eq "fork while recording: the child's trace began late too (caveat began_late, a note why)" \
    "True True" \
    "$("$MT" analyze "$T/cwd/rec.mtt.$child" --json | python3 -c 'import json,sys; j = json.load(sys.stdin)
print(bool(j["caveats"] and j["caveats"]["began_late"]), "began after the parent had allocated" in (j["inherited"]["note"] or ""))')"
run_mt "$MT" analyze "$T/cwd/rec.mtt.$child" --peak
contains "fork while recording: the child's text CAUTION says it began at a fork without all its parent's blocks" \
    "CAUTION: the trace began at a fork without all its parent's blocks" "$out"
"$MT" html "$T/cwd/rec.mtt.$child" -o "$T/child.html" >/dev/null 2>&1
expect_match "fork while recording: the child's html page's data carries the caveat" '"began_late": ?true' "$(cat "$T/child.html")"

expect_eq "trace begun on demand: analyze --json says blocks before it are in no figure (began_late, live/leaks/peak unbounded)" \
    "True [False, False, False]" \
    "$("$MT" analyze "$T/cwd/rec.mtt" --json | python3 -c 'import json,sys; c = json.load(sys.stdin)["caveats"]
print(c["began_late"], [f["bounded"] for f in c["figures"] if f["figure"] in ("live", "leaks", "peak")])')"

# --- trace begun on demand while blocks are live, none of them freed in it -----
# tests/agent/held.c holds 64 blocks (its books: DIR/held) when the trace
# starts, then allocates and frees 100 more and exits: the trace sees no
# unknown free, yet the held bytes are in no figure; analyze must say so
# (text, JSON, and the html page built from the same analysis).
D=$T/before; mkdir -p "$D"
MEMTRAIL_OPTIONS="mode=trace:start=off:output=$D/startup.mtt" LD_PRELOAD=$AGENT "$TBIN/held" "$D" >"$D/out" 2>&1 &
pid=$!; pids+=("$pid")
wait_file "$D/ready" || fail "before: program starts" "$(cat "$D/out")"
q "before: start trace with blocks live" "$pid" start trace -o "$D/t.mtt"
touch "$D/go"; wait "$pid"
"$MT" analyze "$D/t.mtt" --json >"$T/b.json" 2>&1
expect_eq "before: the program held 5242880 bytes (64 blocks) when the trace began; the trace: 100 allocs, live 0, no unknown free" \
    "5242880 64 100 0 0" "$(cat "$D/held") $(json_get "$T/b.json" "'%d %d %d' % (j['allocs'], j['live_bytes'], j['frees_unknown'] + j['reallocs_unknown'])")"
expect_eq "before: JSON caveats say the trace began late, live/leaks/peak not bounded" \
    "True 0 [('live', False), ('leaks', False), ('peak', False)]" \
    "$(json_get "$T/b.json" "'%s %s %s' % (j['caveats'] and j['caveats'].get('began_late'), j['caveats'] and j['caveats']['events_lost'], j['caveats'] and [(f['figure'], f['bounded']) for f in j['caveats']['figures']])")"
run_mt "$MT" analyze "$D/t.mtt" --peak --leaks
contains "before: text CAUTION before the figures: began on demand, blocks before it in no figure" \
    "CAUTION: the trace began on demand (memtrail query PID start trace), after the program had run: blocks allocated before it began are in no figure" \
    "$(printf '%s' "$out" | sed -n '2,4p' | tr '\n' ' ' | sed 's/  */ /g')"
expect_eq "before: the CAUTION wrapped as the other CAUTIONs are (its widest line within 90 columns)" "yes" \
    "$(printf '%s\n' "$out" | sed -n '/CAUTION/,/^  allocations/p' | sed '$d' | awk '{ if (length($0) > w) w = length($0) } END { print (w > 0 && w <= 90) ? "yes" : "no: " w }')"
"$MT" html "$D/t.mtt" -o "$T/b.html" >/dev/null 2>&1
expect_match "before: the html page's data carries the caveat" '"began_late": ?true' "$(cat "$T/b.html")"

# --- exec while recording a trace: the file is finished there ----------------
# follow_exec=on: the new program loads the agent and starts as the options
# say (start=off: not recording).
launch exec "mode=trace:start=off:follow_exec=on:output=$T/exec/startup.%p.mtt" exec
phase 1
q "exec: start trace" "$pid" start trace -o "$T/exec/rec.mtt"
phase 2
touch "$D/go3"; wait "$pid"
expect_eq "exec: the program (now /bin/true) exits 0" "0" "$?"
expect_eq "exec: the trace is finished at the exec and holds exactly phase 2" "$(books "$D")" \
    "$(analyzed "$T/exec/rec.mtt")"
expect_match "exec: analyze --json says complete" '"complete": true' "$("$MT" analyze "$T/exec/rec.mtt" --json 2>&1)"
expect_eq "exec: the new program records nothing (start=off)" "rec.mtt" "$(ls "$T/exec" | grep mtt)"

# --- trace from start-up: stop, then a new trace for phase 2 -----------------
launch retrace "mode=trace:output=$T/retrace/startup.mtt"
phase 1
out=$("$MT" query "$pid" stop 2>&1)
expect_match "stop of the start-up trace names its file" "trace: [0-9]+ events, 0 lost, [0-9]+ bytes in $T/retrace/startup\.mtt" "$out"
expect_match "the start-up trace is complete and holds phase 1" "\"complete\": true" "$("$MT" analyze "$T/retrace/startup.mtt" --json 2>&1)"
q "start trace again, without -o" "$pid" start trace
phase 2
out=$("$MT" query "$pid" stop 2>&1)
expect_match "stop of the second trace: it went to the process's output, numbered" \
    "trace: [0-9]+ events, 0 lost, [0-9]+ bytes in $T/retrace/startup\.mtt\.1\$" "$out"
phase 3
finish
expect_eq "the second trace holds exactly phase 2" "$(books "$D")" "$(analyzed "$T/retrace/startup.mtt.1")"
expect_eq "nothing more was written at exit" "" "$(cat "$D/stderr")"

# --- detail, started off ------------------------------------------------------
launch detail "mode=detail:start=off:output=$T/detail/final.mtr"
phase 1
raw_detail "$pid" "$T/d1.txt"
expect_eq "start=off: no site holds a block of phase 1" "0 0 0 0 0" "$(sites_of "$T/d1.txt")"
out=$("$MT" query "$pid" start detail 2>&1); rc=$?
expect_match "start detail: exit 0" "^0 detail recording on" "$rc $out"
phase 2
q "stop detail" "$pid" stop
raw_detail "$pid" "$T/d2.txt"
# A realloc of a phase-2 block moves it to the realloc's site (a free at
# the old one, an allocation at the new); one of an older block enters
# the sites as an allocation: allocs = A + R, frees = F + (R - RU).
read -r A F R FU RU BYTES LB LC <"$D/ledger2"
expect_eq "detail: the sites hold exactly phase 2's blocks (allocs frees reallocs live)" \
    "$((A + R)) $((F + R - RU)) 0 $LB $LC" "$(sites_of "$T/d2.txt")"
phase 3
finish
# Phase 3 allocates nothing at a site; it frees every block the sites hold.
expect_eq "detail: phase 3 adds no allocation; the sites' blocks freed then are counted" \
    "$((A + R)) 0 $LC" "$(sites_of "$T/detail/final.mtr" | awk '{ print $1, $4, $2 - '"$((F + R - RU))"' }')"
expect_eq "detail: summary counters exact" "$(awk '{ print $1, $2, $3, $4, $5 }' "$D/total")" \
    "$(python3 -c 'import sys
for l in open(sys.argv[1]):
    p = l.split()
    if p[:2] == ["category", "ondemand"]:
        f = dict(x.split("=", 1) for x in p[2:] if "=" in x)
        print(f["live_bytes"], f["live_count"], f["allocs"], f["frees"], f["reallocs"])' "$T/detail/final.mtr")"

# --- under load: threads allocating without pause as recording switches ----------
# A trace started while blocks are live and stopped while threads are
# inside malloc: no allocation without its id (an id allocated twice while
# live), unknown frees and reallocs only of blocks older than the trace
# (at most THREADS * SLOTS = 256 live at once), and the summary exact.
D=$T/churn; mkdir -p "$D"
MEMTRAIL_OPTIONS="mode=trace:start=off:trace_loss=wait:output=$D/x.mtt" LD_PRELOAD=$AGENT "$TBIN/ondemand_churn" "$D" \
    >"$D/stdout" 2>"$D/stderr" &
pid=$!; pids+=("$pid")
wait_file "/tmp/memtrail-$(id -u)/$pid.sock" || fail "load: the agent listens" "no socket for $pid"
for i in 1 2 3; do
    q "load: start trace $i" "$pid" start trace -o "$D/t$i.mtt"
    sleep 0.2
    q "load: stop trace $i" "$pid" stop
    q "load: start detail $i" "$pid" start detail
    q "load: stop detail $i" "$pid" stop
done
touch "$D/stop"
wait_file "$D/total"
expect_eq "load: summary counters exact" "$(cat "$D/total")" \
    "$("$MT" query "$pid" summary --json 2>&1 | python3 -c 'import json,sys
c = [c for c in json.load(sys.stdin)["categories"] if c["name"] == "churn"][0]
print(c["live_bytes"], c["live_count"], c["allocs"], c["frees"], c["reallocs"])')"
touch "$D/go"; wait "$pid"
for i in 1 2 3; do
    "$MT" analyze "$D/t$i.mtt" --json >"$T/a.json" 2>&1
    expect_eq "load: trace $i complete, no event lost, no id reused, at most 256 blocks unknown" "True 0 0 True" \
        "$(python3 -c 'import json,sys; j = json.load(open(sys.argv[1]))
print(j["complete"], j["events_lost"], j["ids_reused"], j["frees_unknown"] + j["reallocs_unknown"] <= 256 and j["allocs"] > 1000)' "$T/a.json")"
done

# --- errors ---------------------------------------------------------------------
launch summary "mode=summary:output=$T/summary/r.mtr"
out=$("$MT" query "$pid" start detail 2>&1); rc=$?
expect_match "a summary-mode process cannot start recording: says why, exit 1" \
    "^1 memtrail: process $pid: this process runs in summary mode: recording on demand needs it started in detail or trace mode" \
    "$rc $out"
phase 1; phase 2; phase 3; finish

launch sig "mode=detail:start=off:output=$T/sig/r.mtr"
out=$("$MT" query "$pid" start trace -o "$T/sig/t.mtt" 2>&1); rc=$?
expect_match "start trace from the signal handler: refused, names query=thread" \
    "^1 memtrail: process $pid: trace recording on demand needs the control thread.*query=thread" "$rc $out"
out=$("$MT" query "$pid" start trace -o "$T/nosuchdir/t.mtt" 2>&1); rc=$?
expect_match "start trace into a missing directory: refused before recording" \
    "^1 memtrail: process $pid: (cannot write $T/nosuchdir/t.mtt: No such file or directory|trace recording on demand needs the control thread)" \
    "$rc $out"
out=$("$MT" query "$pid" start everything 2>&1); rc=$?
expect_eq "start of an unknown recording: usage error, exit 2" "2" "$rc"
contains "start of an unknown recording: names the accepted ones" "accepted: detail, sample, trace" "$out"
out=$("$MT" query "$pid" start 2>&1); rc=$?
expect_eq "start without what: usage error, exit 2" "2" "$rc"
out=$("$MT" query "$pid" start detail -o x.mtt 2>&1); rc=$?
expect_eq "start detail -o: usage error, exit 2" "2 memtrail: -o FILE applies to 'start trace' only" "$rc $(echo "$out" | head -1)"
phase 1; phase 2; phase 3; finish

launch thr "mode=detail:start=off:query=thread:output=$T/thr/r.mtr"
out=$("$MT" query "$pid" start trace -o "$T/nosuchdir/t.mtt" 2>&1); rc=$?
expect_eq "start trace into a missing directory: refused, says why" \
    "1 memtrail: process $pid: cannot write $T/nosuchdir/t.mtt: No such file or directory (checked as this process's user, in its directory)" \
    "$rc $out"
long=$T/$(printf 'a%.0s' $(seq 500)).mtt
out=$("$MT" query "$pid" start trace -o "$long" 2>&1); rc=$?
expect_eq "start trace with a path over 440 bytes: refused, says the limit" \
    "1 memtrail: process $pid: the trace's path is too long (at most 440 bytes)" "$rc $out"
out=$("$MT" query "$pid" start trace 2>&1); rc=$?
expect_eq "start trace without -o in a detail-mode process: refused" \
    "1 memtrail: process $pid: 'start trace' needs -o FILE here (this process's output is its report)" "$rc $out"
phase 1
q "a detail-mode process serving from a thread can record a trace" "$pid" start trace -o "$T/thr/t.mtt"
phase 2
q "and stop it" "$pid" stop
phase 3
finish
expect_eq "its trace holds exactly phase 2" "$(books "$D")" "$(analyzed "$T/thr/t.mtt")"

MEMTRAIL_OPTIONS="mode=off" LD_PRELOAD=$AGENT "$TBIN/ondemand" "$T" >/dev/null 2>&1 &
pid=$!; pids+=("$pid")
wait_file "$T/ready1"
out=$("$MT" query "$pid" start detail 2>&1); rc=$?
expect_match "a process not tracked (mode=off): says so, exit 1" "^1 memtrail: process $pid is not tracked by memtrail" "$rc $out"
kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null

out=$(cd "$T" && MEMTRAIL_OPTIONS=start=off "$MT" run --mode trace -o "$T/run.mtt" -- "$TBIN/ondemand" 2>&1); rc=$?
expect_match "memtrail run --mode trace with start=off: no trace, says why" \
    "^memtrail: no trace from [0-9]+ at $T/run.mtt: it ran with start=off" "$(echo "$out" | tail -1)"

out=$(MEMTRAIL_OPTIONS="start=maybe" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_eq "start=maybe: one line naming the key and the accepted values" \
    "memtrail: MEMTRAIL_OPTIONS: bad value 'maybe' for start (accepted: on, off); running untracked" "$out"

# A stop racing the program's exit (and its final report, which finishes
# the same trace): the program never dies of it. The stop is sent at
# moments around the end of the program's 0.5 s, one try each.
mkdir -p "$T/race"
crashed=0 tries=0
for i in $(seq 12); do
    MEMTRAIL_OPTIONS="mode=trace:trace_buffer=256MB:query=thread:output=$T/race/t.$i.mtt" LD_PRELOAD=$AGENT \
        "$TBIN/ondemand_exit" 0.5 >"$T/race/pid" 2>"$T/race/err.$i" &
    prog=$!
    for _ in $(seq 100); do [ -s "$T/race/pid" ] && break; sleep 0.01; done
    sleep "0.$((34 + 2 * i))"
    "$MT" query "$(head -1 "$T/race/pid")" stop >/dev/null 2>&1
    wait "$prog"; rc=$?
    tries=$((tries + 1))
    if [ "$rc" -ne 0 ] || grep -q "fatal signal" "$T/race/err.$i"; then
        crashed=$((crashed + 1)); echo "try $i: status $rc: $(tail -2 "$T/race/err.$i")"
    fi
    : >"$T/race/pid"
done
expect_eq "a stop racing the exit: the program exits 0 every time ($tries tries)" "0" "$crashed"

# --- a stop racing the program's exit, made certain -------------------------------
# libholdsend.so holds the agent's answer to the stop ("ok trace: ...", the
# trace finished by then) until the program, let go meanwhile, is leaving
# (its socket file gone), and 1 s more. The exit must wait for the stop
# and its answer: the client gets it (or, gone, the program's stderr says
# it), the trace is complete and holds exactly phase 2, the program exits 0.
# hold_run NAME [gone]: phase 2 traced, then the stop held while the
# program runs phase 3 and exits; with "gone", the client is killed while
# its answer is held. Sets D, pid, qrc (the client's status), prc.
hold_run() {
    D=$T/$1; mkdir -p "$D"
    MEMTRAIL_OPTIONS="mode=trace:start=off:query=thread:output=$D/startup.mtt" HOLDSEND_MATCH="ok trace:" \
        HOLDSEND_TOUCH="$D/held" HOLDSEND_MS=1000 \
        bash -c 'HOLDSEND_UNTIL_GONE=/tmp/memtrail-$(id -u)/$$.sock LD_PRELOAD=$0 exec "$@"' \
        "$AGENT:$TBIN/libholdsend.so" "$TBIN/ondemand" "$D" >"$D/stdout" 2>"$D/stderr" &
    pid=$!; pids+=("$pid")
    wait_file "$D/ready1" || fail "$1: program starts" "no ready1; $(cat "$D/stderr")"
    phase 1
    q "$1: start trace" "$pid" start trace -o "$D/t.mtt"
    phase 2
    touch "$D/go4" # the program leaves once phase 3 is done
    # (in a subshell whose stderr is not the script's: bash says "Killed" there)
    ("$MT" query "$pid" stop >"$D/q.out" 2>&1 & echo $! >"$D/qpid"; wait $!) 2>/dev/null &
    local qpid=$!
    wait_file "$D/held" || fail "$1: the stop's answer is held" "no $D/held; $(cat "$D/stderr")"
    if [ "${2:-}" = gone ]; then kill -9 "$(cat "$D/qpid")"; fi
    touch "$D/go3"
    # While the exit waits for the stop (its socket file gone, the answer
    # held 1 s more), a query is told the process is ending, not that it is
    # untracked. Checked when the program is still there after the answer.
    local sock=/tmp/memtrail-$(id -u)/$pid.sock
    for _ in $(seq 500); do [ -e "$sock" ] || break; sleep 0.01; done
    local end_out; end_out=$("$MT" query "$pid" summary 2>&1)
    if kill -0 "$pid" 2>/dev/null; then
        expect_eq "$1: a query while the program leaves: it is ending" \
            "memtrail: process $pid runs memtrail's agent but has no control socket: it is ending (its exit or exec removes the socket first), or its agent runs untracked or could not open one (its stderr says why)" \
            "$end_out"
    else
        echo "SKIP $1: a query while the program leaves: the program had left already ($end_out)"
    fi
    wait "$qpid"; qrc=$?
    wait "$pid"; prc=$?
}
# trace_whole NAME: the trace is complete and holds exactly phase 2.
trace_whole() {
    "$MT" analyze "$D/t.mtt" >"$T/a.txt" 2>&1
    expect_eq "$1: analyze reads the trace whole (exit 0, not 'Incomplete', no caveat of a cut)" "0 0" \
        "$? $(grep -c -i -E 'Incomplete|truncated' "$T/a.txt")"
    expect_eq "$1: analyze --json says complete" "True" "$("$MT" analyze "$D/t.mtt" --json | json_get /dev/stdin "j['complete']")"
    expect_eq "$1: the trace holds exactly phase 2 (the program's books)" "$(books "$D")" "$(analyzed "$D/t.mtt")"
}
hold_run hold
events=$("$MT" analyze "$D/t.mtt" --json | json_get /dev/stdin "j['events']")
expect_eq "hold: the client gets the stop's answer: exit 0, the trace's events and path" \
    "0 trace: $events events, 0 lost, B bytes in $D/t.mtt" "$qrc $(sed 's/lost, [0-9]* bytes/lost, B bytes/' "$D/q.out")"
expect_eq "hold: the program exits 0, nothing on its stderr (the stop answered; its exit had no trace left)" \
    "0:" "$prc:$(cat "$D/stderr")"
trace_whole hold
hold_run holdgone gone
expect_eq "holdgone: the program exits 0" "0" "$prc"
expect_eq "holdgone: the answer no client took is on the program's stderr, one line, with the trace's path" \
    "memtrail: the answer to 'query PID stop' could not be sent (the client left): trace: $("$MT" analyze "$D/t.mtt" --json | json_get /dev/stdin "j['events']") events, 0 lost, B bytes in $D/t.mtt" \
    "$(sed 's/lost, [0-9]* bytes/lost, B bytes/' "$D/stderr")"
trace_whole holdgone

# `memtrail query` and the agent's control socket, on running programs
# (tests/agent/live.c, live_oom.c). Every figure a query returns is compared
# with the program's own books; permissions with stat(1) and the kernel's
# /proc; JSON is read back with python3.
source "$(dirname "$0")/../lib.sh"
# MT_QUERY_MODE=thread runs it all against query=thread (test_query_thread.sh).
MODE=${MT_QUERY_MODE:-on}
QOPT="query=$MODE:"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# wait_file FILE: until the program creates it (bounded; no timing is checked).
wait_file() { local i; for ((i = 0; i < 3000; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }
# wait_gone PID: until the process has exited.
wait_gone() { local i; for ((i = 0; i < 3000; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.02; done; return 1; }
# ledger_field FILE CATEGORY N: field N (1 = live bytes, 2 = live count) of a ledger line.
ledger_field() { awk -v c="$2" -v n="$3" '$1 == c { print $(n + 1) }' "$1"; }
# cat_json JSON CATEGORY KEY
cat_json() { json_get "$1" "[c['$3'] for c in j['categories'] if c['name'] == '$2'][0]"; }
# The socket of a process of ours, as the agent places it (XDG_RUNTIME_DIR is unset below).
sock_of() { echo "/tmp/memtrail-$(id -u)/$1.sock"; }

unset XDG_RUNTIME_DIR

# --- summary, baseline and diff of a running program ------------------------
D=$T/live; mkdir -p "$D"
MEMTRAIL_OPTIONS="${QOPT}output=$T/live.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/live" "$D" fork >"$T/live.out" 2>&1 &
pid=$!; pids+=("$pid")
if ! wait_file "$D/ready1"; then
    fail "query: live program starts" "no $D/ready1; output: $(cat "$T/live.out")"
    exit 1
fi
sock=$(sock_of "$pid")
expect_eq "query: socket is mode 0600, a socket, ours" "600 socket $(id -u)" "$(stat -c '%a %F %u' "$sock" 2>&1)"
expect_eq "query: its directory is mode 0700, a directory, ours" "700 directory $(id -u)" \
    "$(stat -c '%a %F %u' "$(dirname "$sock")" 2>&1)"

"$MT" query "$pid" summary --json >"$T/q1.json" 2>"$T/q1.err"
expect_eq "query summary: exits 0" "0" "$?"
expect_eq "query summary: live bytes and count of the category = the program's books" \
    "$(ledger_field "$D/phase1" live 1) $(ledger_field "$D/phase1" live 2)" \
    "$(cat_json "$T/q1.json" live live_bytes) $(cat_json "$T/q1.json" live live_count)"
expect_eq "query summary: the report is the process's own, reason query" "$pid query" \
    "$(json_get "$T/q1.json" "'%s %s' % (j['pid'], j['reason'])")"
"$MT" query "$pid" >"$T/q1.txt" 2>&1
expect_match "query: text summary names the category with its block count" \
    '^-[[:space:]]+live \(reserved=[0-9]+KB, committed=[0-9]+KB, resident=[0-9]+KB, mappings=[0-9]+\)' "$(cat "$T/q1.txt")"
# 10 blocks of 1000 bytes: 10000 B = 9.77KB
expect_match "query: text summary, live=9.77KB (10 blocks) for it" 'malloc=9\.77KB #10' "$(grep -A1 ' live (' "$T/q1.txt")"
"$MT_ASAN" query "$pid" summary --scale MB >"$T/q1-asan.txt" 2>"$T/q1-asan.err"
expect_eq "query (ASan build): summary exits 0, nothing on stderr" "0:" "$?:$(cat "$T/q1-asan.err")"

# diff before any baseline: the agent says so
out=$("$MT_ASAN" query "$pid" diff 2>&1); rc=$?
expect_eq "query diff without a baseline: the process's error, exit 1" \
    "1 memtrail: process $pid: no baseline; run 'memtrail query PID baseline' first" "$rc $out"

"$MT" query "$pid" baseline >"$T/base.txt" 2>&1
expect_eq "query baseline: exits 0" "0" "$?"
expect_match "query baseline: confirms, then the summary" "^Baseline of process $pid set" "$(head -1 "$T/base.txt")"
expect_match "query baseline: the summary follows" "malloc=9\.77KB #10" "$(cat "$T/base.txt")"
"$MT" query "$pid" baseline --json >"$T/base.json" 2>/dev/null
expect_eq "query baseline --json: stdout is the report (reason baseline)" "baseline" "$(json_get "$T/base.json" "j['reason']")"

touch "$D/go1"
wait_file "$D/ready2" || fail "query: step 2" "no $D/ready2"
"$MT" query "$pid" diff --json >"$T/diff.json" 2>"$T/diff.err"
expect_eq "query diff: exits 0" "0" "$?"
want_b=$(( $(ledger_field "$D/phase2" live 1) - $(ledger_field "$D/phase1" live 1) ))
want_c=$(( $(ledger_field "$D/phase2" live 2) - $(ledger_field "$D/phase1" live 2) ))
expect_eq "query diff --json: live bytes/count delta = the program's books" "$want_b $want_c" \
    "$(cat_json "$T/diff.json" live live_bytes_delta) $(cat_json "$T/diff.json" live live_count_delta)"
"$MT_ASAN" query "$pid" diff >"$T/diff.txt" 2>"$T/diff-asan.err"
expect_eq "query diff (ASan build): text diff exits 0, nothing on stderr" "0:" "$?:$(cat "$T/diff-asan.err")"

tasks=$(ls "/proc/$pid/task" | grep -v "^$pid\$")
if [ "$MODE" = thread ]; then
    # The program's signals never land on the agent's thread.
    expect_eq "agent: one extra thread" "1" "$(echo "$tasks" | grep -c .)"
    blk=$(awk '/^SigBlk:/ { print $2 }' "/proc/$pid/task/$tasks/status" 2>/dev/null)
    want=$(python3 -c 'print("%016x" % (((1 << 64) - 1) & ~sum(1 << (s - 1) for s in (9, 19, 32, 33))))')
    expect_eq "agent thread: every signal blocked (all but SIGKILL, SIGSTOP and glibc's two)" "$want" "$blk"
else
    # Signal-driven: no thread of the agent's; the queries above were
    # answered by a handler on the program's own thread.
    expect_eq "agent: no extra thread (signal-driven serving)" "0" "$(echo "$tasks" | grep -c .)"
    sig=$(python3 -c 'import signal; print(signal.SIGRTMAX - 3)')
    cgt=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status")
    check "agent: the query signal (SIGRTMAX-3) is caught" python3 -c "import sys; sys.exit(not (int(sys.argv[1], 16) >> ($sig - 1)) & 1)" "$cgt"
fi
nocloexec=0
for fd in /proc/$pid/fd/*; do
    case $(readlink "$fd") in socket:*) ;; *) continue ;; esac
    flags=$(awk '/^flags:/ { print $2 }' "/proc/$pid/fdinfo/${fd##*/}")
    (( (8#$flags & 8#2000000) == 0 )) && nocloexec=$((nocloexec + 1))
done
expect_eq "agent: its sockets are close-on-exec" "0" "$nocloexec"

# The protocol, spoken directly (python3's socket module).
ask() { python3 - "$1" "$2" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
try:
    s.sendall(sys.argv[2].encode()); s.shutdown(socket.SHUT_WR)
except OSError:
    pass    # a refusing server may have closed already; its answer is still there
data = b""
while True:
    b = s.recv(65536)
    if not b: break
    data += b
sys.stdout.write(data.decode(errors="replace"))
EOF
}
expect_eq "protocol: an unknown command is named in the error" \
    "error unknown command 'frobnicate' (accepted: summary, detail, baseline, diff, sessions, exit, start, stop)" "$(ask "$sock" $'frobnicate\n')"
expect_eq "protocol: diff is two complete reports (baseline, then now)" "baseline query 2" \
    "$(ask "$sock" $'diff\n' | awk '/^reason /{ r = r $2 " " } /^end$/ { n++ } END { print r n }')"

# --- fork: the child has its own socket; a vfork child removes nothing ----
touch "$D/go2"
if wait_file "$D/child.ready"; then
    child=$(cat "$D/child.ready")
    expect_eq "fork: errno in the child is as the program left it" "4242" "$(cat "$D/child.errno")"
    expect_eq "fork: the child has its own socket" "socket" "$(stat -c %F "$(sock_of "$child")" 2>&1)"
    "$MT" query "$child" summary --json >"$T/child.json" 2>"$T/child.err"
    expect_eq "fork: the child answers with its own pid and books" \
        "$child $(ledger_field "$D/child" child 1) $(ledger_field "$D/child" child 2)" \
        "$(json_get "$T/child.json" "j['pid']") $(cat_json "$T/child.json" child live_bytes) $(cat_json "$T/child.json" child live_count)"
    "$MT" query "$child" diff >/dev/null 2>"$T/child-diff.err"
    expect_match "fork: the child does not inherit the parent's baseline" "no baseline" "$(cat "$T/child-diff.err")"
    "$MT" query "$pid" summary --json >"$T/parent.json" 2>/dev/null
    expect_eq "fork: the parent still answers with its own pid" "$pid" "$(json_get "$T/parent.json" "j['pid']")"
    touch "$D/child.go"
    wait_file "$D/forked" || fail "fork: parent goes on" "no $D/forked"
    check "fork: the child's socket is gone after it exits" test ! -e "$(sock_of "$child")"
    check "vfork: a vfork child's _exit leaves the parent's socket" test -S "$sock"
    "$MT" query "$pid" summary --json >"$T/parent2.json" 2>/dev/null
    expect_eq "vfork: the parent answers after its vfork child left" "$pid" "$(json_get "$T/parent2.json" "j['pid']")"
else
    fail "fork: child" "no $D/child.ready; output: $(cat "$T/live.out")"
fi
touch "$D/go3"
wait_gone "$pid"
wait "$pid"; rc=$?
expect_eq "query: the program ran to its end undisturbed" "0" "$rc"
check "query: the socket is gone after the program exits" test ! -e "$sock"

# --- the heap is exhausted: the summary still comes --------------------------
D=$T/oom; mkdir -p "$D"
MEMTRAIL_OPTIONS="${QOPT}output=$T/oom.mtr" LD_PRELOAD=$AGENT "$TBIN/live_oom" "$D" >"$T/oom.out" 2>&1 &
pid=$!; pids+=("$pid")
if wait_file "$D/ready"; then
    expect_eq "oom: the program's last malloc failed" "1" "$(ledger_field "$D/oom" exhausted 1)"
    "$MT" query "$pid" summary --json >"$T/oom.json" 2>"$T/oom.err"
    expect_eq "oom: query summary works with the heap exhausted" "0" "$?"
    expect_eq "oom: and its figures are the program's books" \
        "$(ledger_field "$D/oom" oom 1) $(ledger_field "$D/oom" oom 2)" \
        "$(cat_json "$T/oom.json" oom live_bytes) $(cat_json "$T/oom.json" oom live_count)"
else
    fail "oom: program" "no $D/ready; output: $(cat "$T/oom.out")"
fi
touch "$D/go"; wait_gone "$pid"

# --- processes memtrail cannot or must not talk to ---------------------------
sleep 600 & plain=$!; pids+=("$plain")
# Its pid may be one an earlier tracked process had and, killed or exec'd
# into an untracked program, left its socket under (README, Limits): that
# file is not this process's, and this check is about a process with none.
rm -f "$(sock_of "$plain")"
for mt in "$MT" "$MT_ASAN"; do
    tag=$([ "$mt" = "$MT_ASAN" ] && echo " (ASan build)")
    out=$("$mt" query "$plain" summary 2>&1); rc=$?
    expect_eq "query$tag: a process without the agent is not tracked, exit 1" \
        "1 memtrail: process $plain is not tracked by memtrail (no control socket at $(sock_of "$plain"))" "$rc $out"
    nopid=$(cat /proc/sys/kernel/pid_max)   # pids are below pid_max
    out=$("$mt" query "$nopid" summary 2>&1); rc=$?
    expect_eq "query$tag: a pid that does not exist, exit 1" "1 memtrail: no process with pid $nopid" "$rc $out"
    out=$("$mt" query 12x summary 2>&1); rc=$?
    expect_eq "query$tag: a PID that is not a number is a usage error" "2" "$rc"
    out=$("$mt" query "$plain" leaks 2>&1); rc=$?
    expect_match "query$tag: an unknown request is a usage error naming the accepted ones" \
        "^2 memtrail: unknown request 'leaks' \(accepted: summary, detail, baseline, diff, metrics, info, start, stop\)" "$rc $out"
    out=$("$mt" query 2>&1); rc=$?
    expect_eq "query$tag: missing PID, exit 2" "2" "$rc"
done
kill "$plain"
"$MT" query --help | grep -q '^usage: memtrail query PID'
expect_eq "query --help: usage on stdout, exit 0" "0" "$?"

# query=off: the agent tracks but serves no socket; a bad value is named.
D=$T/off; mkdir -p "$D"
MEMTRAIL_OPTIONS="query=off:output=$T/off.mtr" LD_PRELOAD=$AGENT "$TBIN/live" "$D" >"$T/off.out" 2>&1 & off=$!; pids+=("$off")
wait_file "$D/ready1" || fail "query=off: program" "no $D/ready1; output: $(cat "$T/off.out")"
out=$("$MT" query "$off" 2>&1); rc=$?
expect_eq "query=off: no socket; the agent is there (its maps), so the answer says why, not 'not tracked'" \
    "1 memtrail: process $off runs memtrail's agent with query=off: it answers no queries" "$rc $out"
expect_eq "query=off: no extra thread" "1" "$(ls "/proc/$off/task" | wc -l)"
expect_eq "query=off: the query signal is not caught" "0" \
    "$(python3 -c 'import signal, sys; print((int(sys.argv[1], 16) >> (signal.SIGRTMAX - 4)) & 1)' "$(awk '/^SigCgt:/ { print $2 }' "/proc/$off/status")")"
kill "$off"
out=$(MEMTRAIL_OPTIONS="query=maybe" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_eq "query=maybe: named, with the accepted values" \
    "memtrail: MEMTRAIL_OPTIONS: bad value 'maybe' for query (accepted: on, thread, off); running untracked" "$out"

# Started with stdin closed: the socket does not take fd 0.
D=$T/closed; mkdir -p "$D"
MEMTRAIL_OPTIONS="${QOPT}output=$T/closed.mtr" LD_PRELOAD=$AGENT "$TBIN/live" "$D" <&- >"$T/closed.out" 2>&1 & closed=$!; pids+=("$closed")
if wait_file "$D/ready1"; then
    expect_eq "stdin closed: fd 0 stays free for the program" "" "$(readlink "/proc/$closed/fd/0" 2>/dev/null)"
    "$MT" query "$closed" --json >"$T/closed.json" 2>&1
    expect_eq "stdin closed: the socket still answers" "$closed" "$(json_get "$T/closed.json" "j['pid']")"
else
    fail "stdin closed: program" "no $D/ready1; output: $(cat "$T/closed.out")"
fi
touch "$D/go1" "$D/go2"; wait_gone "$closed"

# A stopped process: the client gives up after --timeout and says why.
MEMTRAIL_OPTIONS="${QOPT}output=$T/stop.mtr" LD_PRELOAD=$AGENT sleep 600 & stopped=$!; pids+=("$stopped")
wait_file "$(sock_of "$stopped")"
kill -STOP "$stopped"
# Until every thread has stopped: one that has not yet (the stop reaches the
# others through the thread that takes it) could still answer.
for ((i = 0; i < 500; i++)); do
    awk '/^State:/ && $2 != "T" { n++ } END { exit n > 0 }' /proc/"$stopped"/task/*/status 2>/dev/null && break
    sleep 0.01
done
out=$("$MT" query "$stopped" --timeout 1 2>&1); rc=$?
expect_eq "query: a stopped process times out, exit 1" \
    "1 memtrail: process $stopped did not answer within 1 seconds (is it stopped?)" "$rc $out"
kill -CONT "$stopped"
"$MT" query "$stopped" summary --json >"$T/cont.json" 2>/dev/null
expect_eq "query: it answers again once continued" "$stopped" "$(json_get "$T/cont.json" "j['pid']")"
kill "$stopped"; wait_gone "$stopped"
rm -f "$(sock_of "$stopped")"   # killed by a signal: no exit handler removed it

# --- a process that exits before answering -----------------------------------
# The query's signal ends a sleep that tests/agent/sleep_once.c does not
# resume, so it exits; or it exits on its own while the query is on its
# way. Either way the query says so, not "closed its control socket
# without answering", "busy" or "nothing listens". hold.so, preloaded into
# memtrail, holds the query's send() (or connect()) until the program has
# gone, so the exit comes first every time.
cat >"$T/hold.c" <<'EOF2'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
/* Until process MT_HOLD_PID is gone or a zombie (at most 20 s). */
static void hold(const char *call)
{
    const char *which = getenv("MT_HOLD"), *pid = getenv("MT_HOLD_PID");
    if (!which || !pid || strcmp(which, call) != 0)
        return;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        int ended = !f;
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "State:", 6) == 0)
                ended = strchr(line, 'Z') != NULL;
        if (f)
            fclose(f);
        if (ended)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    hold("send");
    return ((ssize_t (*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send"))(fd, buf, n, flags);
}
int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    hold("connect");
    return ((int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect"))(fd, addr, len);
}
EOF2
# start_sleeper SECONDS: sleep_once under the agent; its pid in $sleeper once its socket is there.
start_sleeper() {
    rm -f "$T/sleeper.pid"
    MEMTRAIL_OPTIONS="${QOPT}output=$T/sleeper.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/sleep_once" "$T/sleeper.pid" "$1" \
        >"$T/sleeper.out" 2>&1 &
    sleeper=$!; pids+=("$sleeper")
    wait_file "$T/sleeper.pid" && wait_file "$(sock_of "$sleeper")"
}
if ! cc -shared -fPIC -o "$T/hold.so" "$T/hold.c" -ldl 2>"$T/hold.err"; then
    fail "exits before answering: build hold.so" "$(head -c 300 "$T/hold.err")"
else
    if [ "$MODE" = on ]; then
        # The connection's signal ends the sleep; the request is sent once the program is gone.
        if start_sleeper 60; then
            out=$(MT_HOLD=send MT_HOLD_PID=$sleeper LD_PRELOAD=$T/hold.so "$MT" query "$sleeper" summary 2>&1); rc=$?
            expect_eq "exits before answering (the query ended its sleep): said plainly, exit 1" \
                "1 memtrail: process $sleeper exited before answering" "$rc $out"
            wait "$sleeper"
            expect_eq "exits before answering: the program's sleep was cut short (it exits 0)" 0 "$?"
        else
            fail "exits before answering: program starts" "output: $(cat "$T/sleeper.out")"
        fi
        # Without holding: answered, or the same line (never busy, never closed without answering).
        bad=""
        for i in 1 2 3 4 5; do
            start_sleeper 60 || { bad="$bad run $i did not start;"; break; }
            out=$("$MT" query "$sleeper" summary 2>&1 >/dev/null); rc=$?
            [ $rc = 0 ] || [ "$rc $out" = "1 memtrail: process $sleeper exited before answering" ] ||
                bad="$bad run $i: $rc $out;"
            wait "$sleeper"
        done
        expect_eq "exits before answering: 5 unheld runs, each answered or said plainly" "" "$bad"
    fi
    # The program leaves on its own (a 3 s sleep) between the socket's lookup and the connection.
    if start_sleeper 3; then
        out=$(MT_HOLD=connect MT_HOLD_PID=$sleeper LD_PRELOAD=$T/hold.so "$MT" query "$sleeper" summary 2>&1); rc=$?
        expect_eq "exits before the connection: said plainly, exit 1" \
            "1 memtrail: process $sleeper exited before answering" "$rc $out"
        wait "$sleeper"
    else
        fail "exits before the connection: program starts" "output: $(cat "$T/sleeper.out")"
    fi
fi

# --- another user's process -------------------------------------------------
if [ "$(id -u)" = 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    chmod 0711 "$T"
    D=$T/other; mkdir -m 0777 "$D"
    # The agent goes into the program, not into setpriv (a second thread
    # makes its setresuid-then-setresgid fail: see docs/cli.md).
    env -u HOME -u XDG_RUNTIME_DIR setpriv --reuid=65534 --regid=65534 --clear-groups \
        env MEMTRAIL_OPTIONS="${QOPT}output=$D/other.mtr" LD_PRELOAD=$AGENT "$TBIN/live" "$D" >"$T/other.out" 2>&1 &
    other=$!; pids+=("$other")
    if wait_file "$D/ready1"; then
        opid=$(cat "$D/ready1")
        osock=/tmp/memtrail-65534/$opid.sock
        expect_eq "other user: its socket is its own, mode 0600" "600 65534" "$(stat -c '%a %u' "$osock" 2>&1)"
        for mt in "$MT" "$MT_ASAN"; do
            out=$("$mt" query "$opid" summary 2>&1); rc=$?
            expect_eq "other user: the client refuses$([ "$mt" = "$MT_ASAN" ] && echo ' (ASan build)')" \
                "1 memtrail: process $opid belongs to uid 65534; memtrail query only talks to your own processes" "$rc $out"
        done
        expect_eq "other user: the server refuses root too" "error permission denied" "$(ask "$osock" $'summary\n')"
        touch "$D/go1" "$D/go2"
        wait_gone "$other"
        check "other user: its socket is gone after it exits" test ! -e "$osock"
    else
        fail "other user: program" "no $D/ready1; output: $(cat "$T/other.out")"
    fi
else
    echo "NOTE other-user checks skipped: this machine cannot switch to uid 65534"
fi

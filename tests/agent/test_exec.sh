# Exec: the report a process leaves when it execs, follow_exec=off (exec'd
# programs run untracked; the agent leaves LD_PRELOAD) and follow_exec=on /
# `memtrail run --follow-exec` (the agent survives every exec-family entry
# point, even with an environment that drops it). The truth: what the
# exec'd program sees itself (/proc/self/maps, its environment, its
# arguments), test programs' own ledgers, the kernel's pids and ppids,
# and a direct run of the same workload.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$TBIN/execer" ] || { fail setup "build first: $MT / $AGENT / $TBIN/execer missing"; exit 1; }
E=$TBIN/execer
E_REAL=$(readlink -f "$E")

# report_get MTR EXPR: a Python expression over the report's JSON `j`.
report_get() {
    "$MT" report --json "$1" >"$T/rg.json" 2>/dev/null || { echo "unreadable"; return; }
    json_get "$T/rg.json" "$2"
}
# main_pid: the pid `memtrail run` named on stderr ($err).
main_pid() { printf '%s\n' "$err" | sed -n 's/^memtrail: summary report of \([0-9]*\) written to .*/\1/p'; }
# field LINE KEY: KEY=VALUE out of a "check ..." line (VALUE up to the next space).
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# compare_ledger NAME MTR LEDGER CATEGORY: the report's counters for the
# category equal the program's own ledger.
compare_ledger() {
    local line; line=$(grep "^$4 " "$3") || { fail "$1" "no ledger line for $4"; return; }
    set -- "$1" "$2" $line
    expect_eq "$1" "live_bytes=$4 live_count=$5 peak_bytes=$6 allocs=$7 frees=$8 reallocs=$9" \
        "$(report_get "$2" "' '.join('%s=%s' % (k, c[k]) for c in j['categories'] if c['name'] == '$3' for k in ('live_bytes','live_count','peak_bytes','allocs','frees','reallocs'))")"
}

# --- the option ----------------------------------------------------------------
err=$(cd "$T" && MEMTRAIL_OPTIONS="follow_exec=maybe" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_match "follow_exec=maybe: one clear line" "bad value 'maybe' for follow_exec \(accepted: on, off\); running untracked" "$err"
expect_eq "follow_exec=maybe: untracked (no report)" "" "$(cd "$T" && ls memtrail.*.mtr 2>/dev/null)"

# --- following off (the default) -------------------------------------------------
mkdir -p "$T/off"
out=$(cd "$T/off" && "$MT" run -o "$T/off/%p.mtr" -- sh -c 'exec cat /proc/self/environ' 2>"$T/err" | tr '\0' '\n')
err=$(cat "$T/err")
expect_eq "off: the exec'd program does not see the agent in LD_PRELOAD" "" "$(printf '%s\n' "$out" | grep -E '^LD_PRELOAD=|libmemtrail')"
pid=$(main_pid)
if [ -n "$pid" ] && [ -f "$T/off/$pid.mtr" ]; then
    expect_eq "off: the shell leaves a report with reason exec, as itself" "exec $(readlink -f "$(command -v sh)")" \
        "$(report_get "$T/off/$pid.mtr" "j['reason'] + ' ' + j['exe']")"
else
    fail "off: the shell's report at exec" "none; stderr: $err"
fi
expect_eq "off: no other report (cat runs untracked)" "1" "$(ls "$T/off" | wc -l)"

printf 'int memtrail_test_other;\n' >"$T/other.c"
if cc -shared -fPIC -o "$T/other.so" "$T/other.c"; then
    out=$(LD_PRELOAD=$T/other.so "$MT" run -o "$T/off/o.%p.mtr" -- sh -c 'exec cat /proc/self/environ' 2>/dev/null | tr '\0' '\n')
    expect_eq "off: other preloaded libraries stay in LD_PRELOAD" "LD_PRELOAD=$T/other.so" "$(printf '%s\n' "$out" | grep '^LD_PRELOAD=')"
else
    fail "off: other preloaded libraries" "cannot build a shared library"
fi

# Each entry point, environment kept: the program runs untracked; an exec
# leaves the caller's report (reason exec); spawn and a vfork child do not
# replace the caller, whose report is the exit one.
entries="execve execv execvp execvpe execl execlp execle fexecve execveat posix_spawn posix_spawnp vfork"
for entry in $entries; do
    rm -rf "$T/v" && mkdir "$T/v"
    out=$(MEMTRAIL_OPTIONS="output=$T/v/%p.mtr" LD_PRELOAD=$AGENT "$E" via "$entry" keep 2>&1)
    line=$(printf '%s\n' "$out" | grep '^check ')
    expect_eq "off, $entry: exec'd program untracked, arguments intact" "agent=0 preload=- args=x|y z" \
        "agent=$(field "$line" agent) preload=$(field "$line" preload) args=$(printf '%s\n' "$line" | sed -n 's/.* args=//p')"
    cpid=$(field "$line" pid) ppid=$(field "$line" ppid)
    case $entry in
    posix_spawn*|vfork)
        expect_eq "off, $entry: only the caller's report, reason exit" "$ppid.mtr exit" \
            "$(ls "$T/v" | tr '\n' ' ' | sed 's/ $//') $(report_get "$T/v/$ppid.mtr" "j['reason']")" ;;
    *)
        expect_eq "off, $entry: the caller's report at exec (reason exec, its own command line)" "$cpid.mtr exec via" \
            "$(ls "$T/v" | tr '\n' ' ' | sed 's/ $//') $(report_get "$T/v/$cpid.mtr" "j['reason'] + ' ' + j['cmdline'][1]")" ;;
    esac
done

# --- following on: every entry point keeps the agent ------------------------------
# Environments: only PATH, none at all, and one too big for the agent's
# copy on the stack (it takes pages from mmap instead).
for entry in $entries; do
    for kind in clear empty big; do
        rm -rf "$T/v" && mkdir "$T/v"
        out=$(MEMTRAIL_OPTIONS="output=$T/v/%p.mtr:follow_exec=on" LD_PRELOAD=$AGENT "$E" via "$entry" "$kind" 2>&1)
        line=$(printf '%s\n' "$out" | grep '^check ')
        expect_eq "on, $entry, environment $kind: agent mapped in the exec'd program, arguments intact" \
            "agent=1 args=x|y z" "agent=$(field "$line" agent) args=$(printf '%s\n' "$line" | sed -n 's/.* args=//p')"
        cpid=$(field "$line" pid) ppid=$(field "$line" ppid)
        # the environment passed, plus LD_PRELOAD and MEMTRAIL_OPTIONS
        case $kind in clear) want=3 ;; empty) want=2 ;; big) want=1203 ;; esac
        expect_eq "on, $entry, environment $kind: the program's variables kept, the agent's added" "$want" "$(field "$line" nenv)"
        if [ -n "$cpid" ] && [ -f "$T/v/$cpid.mtr" ]; then
            expect_eq "on, $entry, environment $kind: the exec'd program's own report" "exit $E_REAL check|x|y z" \
                "$(report_get "$T/v/$cpid.mtr" "j['reason'] + ' ' + j['exe'] + ' ' + '|'.join(j['cmdline'][1:])")"
        else
            fail "on, $entry, environment $kind: the exec'd program's report" "none at $T/v/$cpid.mtr; output: $out"
        fi
        case $entry in posix_spawn*|vfork)
            expect_eq "on, $entry, environment $kind: the caller's own report, reason exit" "exit via" \
                "$(report_get "$T/v/$ppid.mtr" "j['reason'] + ' ' + j['cmdline'][1]")" ;;
        esac
    done
done

# --- vfork children write no report ------------------------------------------------
for fo in off on; do
    for mode in vfork-exit vfork-fail; do
        rm -rf "$T/v" && mkdir "$T/v"
        out=$(MEMTRAIL_OPTIONS="output=$T/v/%p.mtr:follow_exec=$fo" LD_PRELOAD=$AGENT "$E" $mode "$T/v.ledger" 2>&1)
        printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | sed "s/\$/ [$mode, follow $fo]/"
        vchild=$(printf '%s\n' "$out" | sed -n 's/^vchild pid=//p')
        expect_eq "$mode (follow $fo): no phantom report from the vfork child" "no" \
            "$([ -n "$vchild" ] && [ -e "$T/v/$vchild.mtr" ] && echo "yes: $vchild.mtr" || echo no)"
        parent=$(ls "$T/v" | grep -v "^$vchild\.mtr$" | head -1)
        if [ -n "$parent" ]; then
            compare_ledger "$mode (follow $fo): the parent's later allocations count exactly" "$T/v/$parent" "$T/v.ledger" after
        else
            fail "$mode (follow $fo): the parent's report" "none in $T/v"
        fi
    done
done

# --- a sandbox that kills on kcmp: vfork children make no such call and live ---
rm -rf "$T/k" && mkdir "$T/k"
out=$(MEMTRAIL_OPTIONS="output=$T/k/%p.mtr" LD_PRELOAD=$AGENT "$TBIN/nokcmp" 2>&1)
expect_eq "seccomp killing kcmp: vfork and raw clone children live (exec, _exit, exit), one report" "vfork+exec 0
vfork+_exit 0
clone+exit 0 1" "$out $(ls "$T/k" | wc -l)"

# --- a failed exec: the process stays tracked, its final report replaces the exec one --
for fo in off on; do
    for entry in execve execvp execl; do
        rm -rf "$T/v" && mkdir "$T/v"
        out=$(MEMTRAIL_OPTIONS="output=$T/v/%p.mtr:follow_exec=$fo" LD_PRELOAD=$AGENT "$E" exec-fail $entry "$T/v.ledger" 2>&1)
        printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | sed "s/\$/ [exec-fail $entry, follow $fo]/"
        f=$(ls "$T"/v/*.mtr 2>/dev/null | head -1)
        if [ -n "$f" ]; then
            expect_eq "failed $entry (follow $fo): final report, reason exit" "exit" "$(report_get "$f" "j['reason']")"
            compare_ledger "failed $entry (follow $fo): allocations after it count exactly" "$f" "$T/v.ledger" after
        else
            fail "failed $entry (follow $fo): report" "none"
        fi
    done
done

# --- memtrail run --follow-exec ----------------------------------------------------

run_mt "$MT" run --follow-exec -o "$T/x.mtr" -- true
expect_eq "run --follow-exec without %p: usage error" 2 "$rc"
expect_match "run --follow-exec without %p: says why" "--follow-exec: -o '$T/x.mtr' has no %p, but every process of the tree writes its own report" "$err"
expect_match "run --help describes --follow-exec" "--follow-exec +keep tracking across exec" "$("$MT" run --help)"

mkdir -p "$T/ex"
run_mt "$MT" run --follow-exec -o "$T/ex/%p.mtr" -- sh -c "exec '$TBIN/exact' '$T/exact.ledger'"
printf '%s\n' "$out" | grep -E '^(PASS|FAIL) '
pid=$(main_pid)
if [ -n "$pid" ] && [ -f "$T/ex/$pid.mtr" ]; then
    expect_eq "run --follow-exec -- sh -c 'exec exact': the pid's report is exact's" "$(readlink -f "$TBIN/exact") exit" \
        "$(report_get "$T/ex/$pid.mtr" "j['exe'] + ' ' + j['reason']")"
    compare_ledger "run --follow-exec -- sh -c 'exec exact': matches exact's ledger to the byte" "$T/ex/$pid.mtr" "$T/exact.ledger" exact
else
    fail "run --follow-exec -- sh -c 'exec exact'" "no report for the main pid; stderr: $err"
fi
contains "run --follow-exec: a lone process: says no other report" "no other process of the tree wrote a report" "$err"

# A tree: sh forks twice, each child execs the checker; one report per pid.
mkdir -p "$T/tree"
run_mt "$MT" run --follow-exec -o "$T/tree/%p.mtr" -- sh -c "'$E' check a & '$E' check b; wait"
pid=$(main_pid)
checks=$(printf '%s\n' "$out" | grep '^check ')
expect_eq "tree: both children tracked" "2" "$(printf '%s\n' "$checks" | grep -c 'agent=1')"
n=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    cpid=$(field "$line" pid) cppid=$(field "$line" ppid) arg=$(printf '%s\n' "$line" | sed -n 's/.* args=//p')
    expect_eq "tree: child $arg's report: its pid, its parent the shell, its own command line" \
        "$cpid $pid check|$arg" \
        "$(report_get "$T/tree/$cpid.mtr" "'%d %d %s' % (j['pid'], j['ppid'], '|'.join(j['cmdline'][1:]))")"
    n=$((n + 1))
done <<<"$checks"
expect_eq "tree: one report per process (the shell and its two children)" "3" "$(ls "$T/tree" | grep -c '\.mtr$')"
expect_eq "tree: the shell's report is its exit one" "exit" "$(report_get "$T/tree/$pid.mtr" "j['reason']")"
contains "tree: run counts the other reports" "memtrail: 2 more reports, from other processes of the tree, in $T/tree" "$err"
contains "tree: run points to the tree summary" "memtrail: summarise the tree with: memtrail report $T/tree" "$err"

# SQLite through a shell's exec: the same allocations as a direct run.
if command -v sqlite3 >/dev/null; then
    sql="$MT_ROOT/../shared/bench/workload.sql"
    [ -f "$sql" ] || { printf 'CREATE TABLE t(x);\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<50000) INSERT INTO t SELECT printf("%%08d",x) FROM c;\nSELECT count(*), sum(length(x)) FROM t;\n' >"$T/w.sql"; sql=$T/w.sql; }
    mkdir -p "$T/sq"
    run_mt "$MT" run -o "$T/sq/direct.%p.mtr" -- sqlite3 :memory: ".read $sql"
    direct=$(report_get "$(ls "$T"/sq/direct.*.mtr | head -1)" "j['total']['allocs'] + j['total']['reallocs']")
    run_mt "$MT" run --follow-exec -o "$T/sq/sh.%p.mtr" -- sh -c "exec sqlite3 :memory: '.read $sql'"
    pid=$(main_pid)
    got=$(report_get "$T/sq/sh.$pid.mtr" "'%s %d' % (j['exe'], j['total']['allocs'] + j['total']['reallocs'])")
    set -- $got
    if [ "${1:-}" = /usr/bin/sqlite3 ] && [ -n "${2:-}" ] && [ "$direct" -gt 100000 ] &&
        [ $(( (${2} - direct) * 1000 / direct )) -le 5 ] && [ $(( (direct - ${2}) * 1000 / direct )) -le 5 ]; then
        pass "sqlite3 via sh -c exec: allocs+reallocs $2 within 0.5% of a direct run's $direct"
    else
        fail "sqlite3 via sh -c exec" "got '$got', direct run $direct; stderr: $err"
    fi
else
    fail "sqlite3" "sqlite3 is not installed (scripts/deps.sh installs it)"
fi

# --- trace mode: the tree's other traces are counted, not called missing --
mkdir -p "$T/ftree"
(cd "$T/ftree" && "$MT" run --mode trace --follow-exec -o "$T/ftree/t.%p.mtt" -- \
    sh -c 'ls / >/dev/null; echo hi | cat >/dev/null; true' >/dev/null 2>"$T/ftree.err")
n=$(ls "$T/ftree" | grep -E -c '^t\.[0-9]+\.mtt(\.[0-9]+)?$') # an exec'd image's is FILE.1
contains "run --follow-exec, trace mode: says how many traces the other processes wrote" \
    "$((n - 1)) more traces, from other processes of the tree" "$(cat "$T/ftree.err")"

# --- daemon(): the parent and the daemon both write their reports ------------------
# glibc's daemon() forks and leaves the parent by an _exit inside libc, a
# path no hook sees: that process would write no report, and in trace mode
# no end to its trace. The agent's daemon() does the same steps, the parent
# leaving through the agent's _exit. tests/agent/daemonize.c keeps the
# books of category daemon: the parent's before daemon(), the daemon's
# (inherited blocks included) at its exit. daemon(1, 1), and daemon(0, 0)
# (cwd /, stdio on /dev/null).
# wait_daemon DIR: until the daemon has written its pid and is gone.
wait_daemon() {
    local i p
    for ((i = 0; i < 500; i++)); do
        p=$(cat "$1/daemon.pid" 2>/dev/null)
        [ -n "$p" ] && ! kill -0 "$p" 2>/dev/null && return 0
        sleep 0.02
    done
    return 1
}
# daemon_trace TRACE LEDGER [PARENT_LEDGER]: "complete live_count live_bytes
# allocs reallocs frees_unknown replayed" of the trace: live blocks at the
# end and blocks allocated at the stacks of category daemon (a realloc puts
# its block at its own stack: counted there, as detail mode's sites do),
# the trace's reallocs (the program's only ones are its books'); and after
# "want" the same from the books, when they differ (allocations and
# reallocs since the fork for a daemon, whose books begin as its
# parent's).
daemon_trace() {
    python3 - "$MT" "$@" <<'PYEOF'
import json, subprocess, sys
mt, trace, books = sys.argv[1:4]
j = json.loads(subprocess.run([mt, 'analyze', '--json', trace], capture_output=True, text=True).stdout or 'null')
def own(path):
    f = open(path).read().split()
    return dict(zip(('live_bytes', 'live_count', 'peak', 'allocs', 'frees', 'reallocs'), map(int, f[1:])))
b = own(books)
if len(sys.argv) > 4:
    p = own(sys.argv[4])
    b['allocs'] -= p['allocs']
    b['reallocs'] -= p['reallocs']
want = (True, b['live_count'], b['live_bytes'], b['allocs'] + b['reallocs'], b['reallocs'], 0, len(sys.argv) > 4)
if not j:
    print('unreadable', 'want', *want)
    sys.exit()
mine = lambda xs: [x for x in xs if x['category'] == 'daemon']
live = mine(j['leaks']['stacks'])
hot = mine(j['hot']['by_count']['stacks'])
got = (j['complete'], sum(x['live_count'] for x in live), sum(x['live_bytes'] for x in live),
       sum(x['allocs'] for x in hot), j['reallocs'], j['frees_unknown'],
       bool(j['inherited'] and j['inherited']['replayed']))
print(*got, *(['want', *want] if got != want else []))
PYEOF
}
for how in keep close; do
    arg=; [ "$how" = close ] && arg=close
    D=$T/daemon-$how; mkdir -p "$D"
    run_mt "$MT" run -o "$D/r.%p.mtr" -- "$TBIN/daemonize" "$D" $arg
    wait_daemon "$D" || fail "daemon ($how): the daemon ends" "no $D/daemon.pid or still running"
    parent=$(cat "$D/parent.pid" 2>/dev/null) child=$(cat "$D/daemon.pid" 2>/dev/null)
    expect_eq "daemon ($how): memtrail run exits 0 and names the parent's report" "0 $parent" "$rc $(main_pid)"
    compare_ledger "daemon ($how): the parent's report holds its books" "$D/r.$parent.mtr" "$D/parent.ledger" daemon
    expect_eq "daemon ($how): the parent's report is its exit's, whole" "exit True" \
        "$(report_get "$D/r.$parent.mtr" "'%s %s' % (j['reason'], j['complete'])")"
    compare_ledger "daemon ($how): the daemon's report holds its books (inherited blocks too)" "$D/r.$child.mtr" \
        "$D/daemon.ledger" daemon
    expect_eq "daemon ($how): two reports, the parent's and the daemon's" "r.$parent.mtr r.$child.mtr" \
        "$(cd "$D" && ls r.*.mtr | sort -t. -k2n | tr '\n' ' ' | sed 's/ $//')"

    D=$T/dtrace-$how; mkdir -p "$D"
    run_mt "$MT" run --mode trace -o "$D/t.%p.mtt" -- "$TBIN/daemonize" "$D" $arg
    wait_daemon "$D" || fail "daemon ($how), trace: the daemon ends" "no $D/daemon.pid or still running"
    parent=$(cat "$D/parent.pid" 2>/dev/null) child=$(cat "$D/daemon.pid" 2>/dev/null)
    expect_eq "daemon ($how), trace: memtrail run exits 0, the parent's trace line and its file named" \
        "0 1 1" "$rc $(printf '%s\n' "$err" | grep -c "^memtrail: trace: [0-9]* events, 0 lost, [0-9]* bytes in $D/t\.$parent\.mtt\$") $(printf '%s\n' "$err" | grep -c "^memtrail: trace of $parent written to $D/t\.$parent\.mtt\$")"
    expect_eq "daemon ($how), trace: the parent's trace is complete and holds its books (complete live_count live_bytes allocs reallocs frees_unknown inherited)" \
        "True 3 3333 4 0 0 False" "$(daemon_trace "$D/t.$parent.mtt" "$D/parent.ledger")"
    expect_eq "daemon ($how), trace: the daemon's trace is complete, inherits the parent's blocks, and holds its books" \
        "True 4 12221 2 1 0 True" "$(daemon_trace "$D/t.$child.mtt" "$D/daemon.ledger" "$D/parent.ledger")"
done

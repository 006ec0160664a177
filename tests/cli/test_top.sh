# `memtrail top` on a running program whose allocations the test knows
# (tests/agent/topprog.c, detail mode): printed frames (stdout not a
# terminal), then the live view in a detached tmux session of fixed size
# on a private server (send-keys, capture-pane). Figures are checked
# against `memtrail query PID detail --json` (read with python3) and the
# program's own design: 4 x 100 KiB kept in "big" from big_live, a 4 MiB
# spike in "spike", 2000 allocations in "churny" from many_small. The
# terminal's mode is compared (stty -g) before and after top, on each way
# out: q after the process exited, Ctrl-C, SIGTERM; Ctrl-Z and fg under a
# shell with job control.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$TBIN/topprog" ] || { fail setup "build first: $MT / $AGENT / $TBIN/topprog missing"; exit 1; }
command -v tmux >/dev/null || { fail setup "tmux is not installed (scripts/deps.sh installs it)"; exit 1; }

TMUX_SOCK=$T/tmux.sock
tm() { tmux -S "$TMUX_SOCK" -f /dev/null "$@"; }
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    tm kill-server 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
unset XDG_RUNTIME_DIR TMUX

wait_file() { local i; for ((i = 0; i < 1500; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }
# pane SESSION: the screen as it is now.
pane() { tm capture-pane -p -t "$1" 2>/dev/null; }
# wait_pane SESSION REGEX: until the screen shows it (bounded; no timing is checked).
wait_pane() { local i; for ((i = 0; i < 300; i++)); do pane "$1" | grep -Eq -- "$2" && return 0; sleep 0.05; done; return 1; }
# first_row TEXT HEADING: the first row below the line that starts with HEADING, its fields joined by one space.
first_row() { printf '%s\n' "$1" | awk -v h="$2" 'found { $1 = $1; print; exit } index($0, h) == 1 { found = 1 }'; }
# top_site TEXT: the function the first site row names (the word after the category).
top_site() { first_row "$1" "     LIVE" | awk '{ print $6 }'; }

# The sizes as top prints them (common/units.h: whole units as integers),
# for exact values only; and the rows the JSON says come first for each sort.
cat >"$T/truth.py" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
def size(b):
    units = ["B", "KB", "MB", "GB"]
    u = 0
    while u + 1 < len(units) and b >= 1024 ** (u + 1):
        u += 1
    assert b % 1024 ** u == 0, b
    return "%d%s" % (b // 1024 ** u, units[u])
key = {"live": "live_bytes", "peak": "peak_bytes", "allocs": "allocs"}
what = sys.argv[2]
if what == "row":
    c = [c for c in j["categories"] if c["name"] == sys.argv[3]][0]
    print(c["name"], size(c["live_bytes"]), c["live_count"], size(c["peak_bytes"]), c["allocs"], c["frees"], "-")
elif what == "category":
    cs = [c for c in j["categories"] if c["kind"] == "malloc"]
    print(max(cs, key=lambda c: c[key[sys.argv[3]]])["name"])
elif what == "site":
    s = max(j["sites"], key=lambda s: s[key[sys.argv[3]]])
    print(s["frames"][0]["function"])
PY
truth() { python3 "$T/truth.py" "$@"; }

D=$T/prog; mkdir -p "$D"
MEMTRAIL_OPTIONS="mode=detail:output=$T/prog.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/topprog" "$D" >"$T/prog.out" 2>&1 &
pid=$!; pids+=("$pid")
wait_file "$D/ready" || { fail "top: the program starts" "no $D/ready: $(cat "$T/prog.out")"; exit 1; }
"$MT" query "$pid" detail --json >"$T/q.json" 2>"$T/q.err"
expect_eq "query detail --json: exits 0" "0:" "$?:$(cat "$T/q.err")"
expect_eq "the program's books: big holds 4 x 100KiB, spike peaked at 4MiB, churny made 2000 allocations" \
    "409600 4 4194304 2000" \
    "$(json_get "$T/q.json" "' '.join(str([c[k] for c in j['categories'] if c['name'] == n][0]) for n, k in [('big', 'live_bytes'), ('big', 'live_count'), ('spike', 'peak_bytes'), ('churny', 'allocs')])")"

# --- printed frames (stdout a file) -------------------------------------------
run_mt "$MT" top "$pid"
expect_eq "top, stdout not a terminal: one frame, exit 0, nothing on stderr" "0:" "$rc:$err"
for c in big spike churny; do
    expect_eq "top (printed): the $c row = query --json" "$(truth "$T/q.json" row $c)" \
        "$(printf '%s\n' "$out" | awk -v c=$c '$1 == c { $1 = $1; print }')"
done
expect_eq "top (printed): the first category and site by live bytes = the JSON's" \
    "$(truth "$T/q.json" category live) $(truth "$T/q.json" site live)" \
    "$(first_row "$out" CATEGORY | cut -d' ' -f1) $(top_site "$out")"
expect_eq "top (printed): ... = the program's (big, from big_live)" "big big_live" \
    "$(first_row "$out" CATEGORY | cut -d' ' -f1) $(top_site "$out")"
for s in peak allocs; do
    run_mt "$MT" top "$pid" --sort $s --top 2
    expect_eq "top --sort $s: the first category and site = the JSON's" \
        "$(truth "$T/q.json" category $s) $(truth "$T/q.json" site $s)" \
        "$(first_row "$out" CATEGORY | cut -d' ' -f1) $(top_site "$out")"
    contains "top --sort $s --top 2: two sites shown" "Sites: 2 of" "$out"
done
run_mt "$MT" top "$pid" --iterations 2 --interval 0.1
expect_eq "top --iterations 2: two frames" "0 2" "$rc $(printf '%s\n' "$out" | grep -c '^memtrail top - pid')"
run_mt "$MT_ASAN" top "$pid" --sort allocs
expect_eq "top (ASan build): a frame, exit 0, nothing on stderr" "0:" "$rc:$err"

# --- errors -------------------------------------------------------------------
run_mt "$MT" top 2147483647
expect_eq "top: no such process: one line, exit 1" "1 memtrail: no process with pid 2147483647" "$rc $err"
run_mt "$MT" top $$
expect_match "top: an untracked process: one line, exit 1" "^1 memtrail: process $$ is not tracked by memtrail" "$rc $err"
run_mt "$MT" top "$pid" --sort size
expect_match "top --sort size: a usage error, exit 2" "^2 memtrail: --sort" "$rc $err"
run_mt "$MT" top abc
expect_match "top abc: a usage error, exit 2" "^2 memtrail: 'abc' is not a process id" "$rc $err"
help=$("$MT" top --help)
expect_eq "top --help: under 4 KB, names the keys" "yes yes" \
    "$([ ${#help} -lt 4096 ] && echo yes) $(printf '%s' "$help" | grep -q 'q quits' && echo yes)"

# --- the live view under tmux ---------------------------------------------------
# start_top SESSION NAME: top in a 120x40 pane, by a shell that keeps the
# terminal's mode before and after, and top's exit status, in $T/NAME.*.
start_top() {
    tm new-session -d -s "$1" -x 120 -y 40 \
        "stty -g >$T/$2.before; $MT top $pid; echo \$? >$T/$2.rc; stty -g >$T/$2.after; sleep 600"
}
start_top view view
if ! wait_pane view '^Sites: '; then
    fail "top (tmux): the view shows" "$(pane view)"
    exit 1
fi
screen=$(pane view)
tty=$(tm display-message -p -t view '#{pane_tty}')
expect_match "top (tmux): the terminal is in raw mode while it runs" "-icanon.*-echo " "$(stty -a -F "$tty" 2>&1 | tr '\n' ' ')"
expect_eq "top (tmux): the big row = query --json" "$(truth "$T/q.json" row big)" \
    "$(printf '%s\n' "$screen" | awk '$1 == "big" { $1 = $1; print }')"
expect_eq "top (tmux): sorted by live: big first, big_live the top site" "big big_live" \
    "$(first_row "$screen" CATEGORY | cut -d' ' -f1) $(top_site "$screen")"
contains "top (tmux): the footer names the sort" "sort: live" "$(pane view | tail -1)"
tm send-keys -t view a
wait_pane view 'sort: allocs'
screen=$(pane view)
expect_eq "top (tmux): key a sorts by allocations: the JSON's first category and site" \
    "$(truth "$T/q.json" category allocs) $(truth "$T/q.json" site allocs)" \
    "$(first_row "$screen" CATEGORY | cut -d' ' -f1) $(top_site "$screen")"
expect_eq "top (tmux): ... = the program's (churny, from many_small)" "churny many_small" \
    "$(first_row "$screen" CATEGORY | cut -d' ' -f1) $(top_site "$screen")"
tm send-keys -t view p
wait_pane view 'sort: peak'
screen=$(pane view)
expect_eq "top (tmux): key p sorts by peak bytes: the JSON's first category and site" \
    "$(truth "$T/q.json" category peak) $(truth "$T/q.json" site peak)" \
    "$(first_row "$screen" CATEGORY | cut -d' ' -f1) $(top_site "$screen")"
expect_eq "top (tmux): ... = the program's (spike, from spike)" "spike spike" \
    "$(first_row "$screen" CATEGORY | cut -d' ' -f1) $(top_site "$screen")"
tm send-keys -t view s
wait_pane view 'sort: allocs'
contains "top (tmux): key s goes to the next sort (peak, then allocs)" "sort: allocs" "$(pane view | tail -1)"
tm send-keys -t view l

# The program allocates 2 x 100 KiB more: a later refresh shows 600KB.
touch "$D/go"
wait_file "$D/ready2"
if wait_pane view '^big +600KB +6 '; then pass "top (tmux): refreshed: big now 600KB in 6 blocks, as the program allocated"
else fail "top (tmux): refreshed" "$(pane view)"; fi

# The window shrinks: the view fits it, the footer on its last row.
tm resize-window -t view -x 70 -y 20 2>/dev/null
for ((i = 0; i < 300; i++)); do
    screen=$(pane view)
    [ "$(printf '%s\n' "$screen" | awk 'length($0) > 70' | wc -l)" = 0 ] &&
        printf '%s\n' "$screen" | tail -1 | grep -q 'q quit' && break
    sleep 0.05
done
expect_eq "top (tmux): resized to 70x20: 20 rows, none wider than 70, footer last" "20 0 yes" \
    "$(printf '%s\n' "$screen" | wc -l) $(printf '%s\n' "$screen" | awk 'length($0) > 70' | wc -l) $(printf '%s\n' "$screen" | tail -1 | grep -q 'q quit' && echo yes)"

touch "$D/stop"
if wait_pane view "process $pid has exited"; then pass "top (tmux): the process exits: said on screen"
else fail "top (tmux): the process exits: said on screen" "$(pane view)"; fi
expect_eq "top (tmux): top waits for a key after the exit" "" "$(cat "$T/view.rc" 2>/dev/null)"
contains "top (tmux): the footer says a key quits" "any key: quit" "$(pane view | tail -1)"
tm send-keys -t view q
wait_file "$T/view.after"
expect_eq "top (tmux): q quits, exit 0" "0" "$(cat "$T/view.rc" 2>/dev/null)"
expect_eq "top (tmux): the terminal's mode is restored (stty -g before = after)" "$(cat "$T/view.before")" \
    "$(cat "$T/view.after" 2>/dev/null)"
expect_eq "top (tmux): the screen is given back (top's view is gone)" "" "$(pane view | grep -E 'CATEGORY|q quit')"

# Ctrl-C and SIGTERM end it too, the terminal restored.
mkdir -p "$T/p2"
# (this one in summary mode: categories, no sites)
MEMTRAIL_OPTIONS="output=$T/prog2.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/topprog" "$T/p2" >/dev/null 2>&1 &
pid=$!; pids+=("$pid")
wait_file "$T/p2/ready"
run_mt "$MT" top "$pid"
expect_eq "top on a summary-mode process: its categories (big 400KB in 4 blocks), no sites, exit 0" \
    "0 big 400KB 4 yes" \
    "$rc $(printf '%s\n' "$out" | awk '$1 == "big" { print $1, $2, $3 }') $(printf '%s\n' "$out" | grep -q '^No allocation sites: the process runs in summary mode' && echo yes)"
start_top int int
wait_pane int '^No allocation sites'
tm send-keys -t int C-c
wait_file "$T/int.after"
expect_eq "top (tmux): Ctrl-C quits (status 130), the terminal's mode restored" "130 yes" \
    "$(cat "$T/int.rc" 2>/dev/null) $(cmp -s "$T/int.before" "$T/int.after" && echo yes)"
start_top term term
wait_pane term '^No allocation sites'
toppid=$(pgrep -P "$(tm display-message -p -t term '#{pane_pid}')" -x memtrail)
kill -TERM "$toppid" 2>/dev/null
wait_file "$T/term.after"
expect_eq "top (tmux): SIGTERM ends it (status 143), the terminal's mode restored" "143 yes" \
    "$(cat "$T/term.rc" 2>/dev/null) $(cmp -s "$T/term.before" "$T/term.after" && echo yes)"

# A process that stops answering (SIGSTOP) does not hold the keys: the
# refresh waiting on it is given up for the key (which takes effect with no
# "did not answer" first, as it would after the query's 5 s), then q quits.
# (a program of its own: topprog ends its wait when a signal cuts it short)
mkdir -p "$T/p3"
MEMTRAIL_OPTIONS="output=$T/prog3.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/topprog" "$T/p3" >/dev/null 2>&1 &
pid2=$pid pid=$!
pids+=("$pid")
wait_file "$T/p3/ready"
start_top stopped stopped
wait_pane stopped '^No allocation sites'
kill -STOP "$pid"
sleep 1.5 # a refresh now waits on the stopped process
tm send-keys -t stopped a
wait_pane stopped 'sort: allocs'
expect_eq "top (tmux): a key is taken while the process does not answer (no 5 s wait first)" "allocs no-timeout" \
    "$(pane stopped | grep -o 'sort: allocs' | head -1 | cut -d' ' -f2) $(pane stopped | grep -q 'did not answer' && echo timeout || echo no-timeout)"
tm send-keys -t stopped q
wait_file "$T/stopped.after"
expect_eq "top (tmux): ... and q quits it (status 0), the terminal's mode restored" "0 yes" \
    "$(cat "$T/stopped.rc" 2>/dev/null) $(cmp -s "$T/stopped.before" "$T/stopped.after" && echo yes)"
kill -CONT "$pid"
pid=$pid2

# Ctrl-Z under a shell with job control: the screen is given back while top
# is stopped (the shell's own screen, not top's view), fg takes it again.
tm new-session -d -s job -x 120 -y 40 "env -i PATH=\"$PATH\" HOME=\"$T\" TERM=screen PS1='job$ ' bash --norc --noprofile -i"
wait_pane job '^job\$'
tm send-keys -t job "$MT top $pid" Enter
wait_pane job '^No allocation sites'
tm send-keys -t job C-z
wait_pane job 'Stopped'
expect_eq "top (tmux): Ctrl-Z stops it with the screen given back (the shell's, not top's view)" "Stopped no-view" \
    "$(pane job | grep -o 'Stopped' | head -1) $(pane job | grep -qE '^CATEGORY|q quit' && echo view || echo no-view)"
tm send-keys -t job "fg" Enter
if wait_pane job 'q quit'; then pass "top (tmux): fg: top takes the screen again"
else fail "top (tmux): fg: top takes the screen again" "$(pane job)"; fi
tm send-keys -t job q
tm send-keys -t job "echo rc=\$?" Enter
if wait_pane job '^rc=0'; then pass "top (tmux): after Ctrl-Z and fg, q quits with status 0"
else fail "top (tmux): after Ctrl-Z and fg, q quits with status 0" "$(pane job)"; fi

touch "$T/p2/go" "$T/p2/stop"
wait "$pid" 2>/dev/null
tm kill-server 2>/dev/null

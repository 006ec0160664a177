#!/usr/bin/env bash
# Memory events and their snapshots (mt_memory_info, mt_event_count): the
# index semantics and each event source against the program's own
# arithmetic (tests/agent/meminfo_index.c), snapshots that stay whole while
# four threads raise events and two read (meminfo_stress.c), LIMIT and
# PERIODIC, the stub's answers, and the report's memory_time and info lines
# against what the program read through the API and what the kernel's
# files say, and that the machine-wide figures are read 10 ms to 1 s apart.
. "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }
export MEMTRAIL_OPTIONS="output=$T/exit.%p.mtr"

# field FILE LINE_PREFIX KEY: KEY's value on the first line starting with LINE_PREFIX
field() {
    awk -v p="$2" -v k="$3" 'index($0, p) == 1 { for (i = 2; i <= NF; i++) { n = index($i, "=");
        if (substr($i, 1, n - 1) == k) { print substr($i, n + 1); exit } } }' "$1"
}

# --- index semantics, every source, the API's bad input ---------------------
MEMTRAIL_OPTIONS="output=$T/events.mtr:peak_step=1MB" LD_PRELOAD=$AGENT \
    "$TBIN/meminfo_index" events "$T/dump" "$T/api.mtr" >"$T/events.out" 2>&1
grep -E '^(PASS|FAIL) ' "$T/events.out"
expect_eq "events: the program's checks ran" 0 "$(grep -c '^FAIL' "$T/events.out")"

# --- the report's info lines are what the program read, to the byte ---------
if [ -f "$T/api.mtr" ] && [ -f "$T/dump" ]; then
    expect_eq "report: the six info lines, in order, are the API's snapshots" \
        "$(cat "$T/dump")" "$(grep '^info ' "$T/api.mtr")"
    expect_eq "report: one memory_time line before them" "memory_time" \
        "$(grep -E '^(memory_time|info) ' "$T/api.mtr" | head -1 | cut -d' ' -f1)"
    run=$(field "$T/api.mtr" memory_time run_time_ns)
    last=$(field "$T/api.mtr" "info kind=any" run_time_ns)
    if [ -n "$run" ] && [ "$run" -ge "$last" ] && [ "$last" -gt 0 ]; then pass "report: memory_time's run time is after the last event's"
    else fail "report: memory_time run_time_ns" "'$run' vs last event's '$last'"; fi
    # memory load and total against the files: the cgroup's when its
    # memory.max sets a limit, else the machine's (MemAvailable moves: 5%)
    truth=$(python3 - <<'EOF'
import os
def cg():
    try:
        line = [l for l in open('/proc/self/cgroup').read().splitlines() if l.startswith('0::')][0][3:]
    except Exception:
        return None
    for root in ('/sys/fs/cgroup', '/sys/fs/cgroup/unified'):
        d = root + (line if line != '/' else '')
        try:
            cur = int(open(d + '/memory.current').read())
            mx = open(d + '/memory.max').read().strip()
            return (cur, int(mx)) if mx != 'max' else None
        except Exception:
            continue
    return None
c = cg()
if c:
    print(c[0], c[1], c[1] // 20)
else:
    m = {l.split(':')[0]: int(l.split()[1]) * 1024 for l in open('/proc/meminfo') if l.split()[1:]}
    print(m['MemTotal'] - m['MemAvailable'], m['MemTotal'], m['MemTotal'] // 20)
EOF
)
    set -- $truth
    load=$(field "$T/api.mtr" "info kind=any" memory_load_bytes)
    total=$(field "$T/api.mtr" "info kind=any" total_available_bytes)
    expect_eq "report: total_available_bytes = memory.max or MemTotal" "$2" "$total"
    d=$(( load > $1 ? load - $1 : $1 - load ))
    if [ "$d" -le "$3" ]; then pass "report: memory_load_bytes = memory.current or MemTotal - MemAvailable (5%)"
    else fail "report: memory_load_bytes" "$load vs $1 (tolerance $3)"; fi
else
    fail "report: info lines" "no $T/api.mtr or $T/dump"
fi

# --- consistency under stress: 4 writers, 2 readers -----------------------------
timeout 120 env MEMTRAIL_OPTIONS="output=$T/stress.mtr:peak_step=64KB" LD_PRELOAD=$AGENT \
    "$TBIN/meminfo_stress" 400 1000000 >"$T/stress.out" 2>&1
grep -E '^(PASS|FAIL) ' "$T/stress.out"
expect_eq "stress: ran to the end" 4 "$(grep -c -E '^(PASS|FAIL) stress' "$T/stress.out")"
# the same with PERIODIC events from the agent's thread every millisecond
timeout 120 env MEMTRAIL_OPTIONS="output=$T/stress2.mtr:peak_step=64KB:info_interval=1" LD_PRELOAD=$AGENT \
    "$TBIN/meminfo_stress" 200 500000 >"$T/stress2.out" 2>&1
sed -n 's/^\(PASS\|FAIL\) stress: /\1 stress with info_interval=1: /p' "$T/stress2.out"
p=$(grep -o 'periodic=[0-9]*' "$T/stress2.out" | cut -d= -f2)
if [ "${p:-0}" -gt 0 ]; then pass "stress: PERIODIC events came meanwhile ($p)"; else fail "stress: PERIODIC" "none"; fi
# at exit the report's counts add up too
any=$(field "$T/stress.mtr" "info kind=any" count)
sum=0
for k in peak grow trim limit periodic; do sum=$((sum + $(field "$T/stress.mtr" "info kind=$k" count))); done
if [ "$any" -eq "$sum" ] && [ "$any" -gt 0 ]; then pass "stress: the report's any count is the sum of the kinds' ($any)"
else fail "stress: report counts" "any $any, kinds $sum"; fi

# --- the machine-wide figures are paced: 10 ms to 1 s apart --------------------
# Each snapshot reads the process's /proc/self/statm; /proc/meminfo (or the
# cgroup's memory.max, with memory.high) only 10 ms to 1 s after the last
# such read. strace counts the reads of /proc/meminfo and memory.max (two
# per refresh at most: memory.max of "max" sends it on to /proc/meminfo):
# no more than two per 10 ms step between the first snapshot and the last,
# and, while snapshots keep coming, at least one per 1.5 s (the 1 s cap).
# The bounds come from the span strace saw, so its slowing does not matter.
if command -v strace >/dev/null 2>&1 && strace -o /dev/null true 2>/dev/null; then
    strace -f -ttt -y -e trace=pread64 -o "$T/paced.strace" env \
        MEMTRAIL_OPTIONS="output=$T/paced.mtr:peak_step=64KB" LD_PRELOAD=$AGENT \
        "$TBIN/meminfo_stress" 400 200000 >"$T/paced.out" 2>&1
    read -r fills machine steps secs < <(awk '
        /pread64\([0-9]+<\/proc\/[0-9]+\/statm>/ { n++; if (!first) first = $2; last = $2 }
        /pread64\([0-9]+<(\/proc\/meminfo|[^>]*\/memory\.max)>/ { m++ }
        END { printf "%d %d %d %d\n", n, m, first ? int((last - first) / 0.010) + 1 : 0,
              first ? int((last - first) / 1.5) : 0 }' "$T/paced.strace")
    if [ "$fills" -ge 20 ] && [ "$machine" -ge 1 ] && [ "$machine" -ge "$secs" ] && [ "$machine" -le $((2 * steps)) ]; then
        pass "paced: $fills snapshots read statm, the machine's files $machine times (between $secs and 2 x $steps)"
    else
        fail "paced: machine-wide reads" "$fills snapshots, $machine reads of /proc/meminfo or memory.max; wanted at least 1 and $secs (one per 1.5 s), at most 2 x $steps (10 ms steps)"
    fi
else
    echo "SKIP paced: strace is not installed or cannot trace here (scripts/deps.sh installs it)"
fi

# --- LIMIT once per crossing; PERIODIC every interval -------------------------
MEMTRAIL_OPTIONS="output=$T/limit.mtr:limit=8MB" LD_PRELOAD=$AGENT "$TBIN/meminfo_index" limit 8388608 >"$T/limit.out" 2>&1
grep -E '^(PASS|FAIL) ' "$T/limit.out"
expect_eq "limit: the report says two LIMIT events" "2 limit" \
    "$(field "$T/limit.mtr" "info kind=limit" count) $(field "$T/limit.mtr" "info kind=limit" event)"
MEMTRAIL_OPTIONS="output=$T/nolimit.mtr" LD_PRELOAD=$AGENT "$TBIN/meminfo_index" limit 8388608 >"$T/nolimit.out" 2>&1
expect_eq "limit: none without the option" "0 none" \
    "$(field "$T/nolimit.mtr" "info kind=limit" count) $(field "$T/nolimit.mtr" "info kind=limit" event)"
MEMTRAIL_OPTIONS="output=$T/periodic.mtr:info_interval=50" LD_PRELOAD=$AGENT "$TBIN/meminfo_index" periodic 50 >"$T/periodic.out" 2>&1
grep -E '^(PASS|FAIL) ' "$T/periodic.out"
expect_eq "periodic: none without info_interval" 0 \
    "$(field "$T/nolimit.mtr" "info kind=periodic" count)"

# --- a fork child keeps the counts, and its own PERIODIC thread runs ----------
MEMTRAIL_OPTIONS="output=$T/fork.%p.mtr:info_interval=20" LD_PRELOAD=$AGENT "$TBIN/meminfo_index" fork 20 >"$T/fork.out" 2>&1
grep -E '^(PASS|FAIL) ' "$T/fork.out"
expect_eq "fork: both processes wrote their report" 2 "$(ls "$T"/fork.*.mtr 2>/dev/null | wc -l)"

# --- threads cancelled in their malloc/free loop: a pending cancel never acts
# inside the agent's work (its /proc reads are cancellation points), so no
# block is half freed and no snapshot flag is left held -------------------------
for walk in summary detail:unwind=libunwind; do
    timeout 300 env MEMTRAIL_OPTIONS="output=$T/cancel.mtr:mode=$walk" LD_PRELOAD=$AGENT "$TBIN/cancelled" 20 >"$T/cancel.out" 2>"$T/cancel.err"
    sed "s/^\(PASS\|FAIL\) /\1 $walk: /" "$T/cancel.out" | grep -E '^(PASS|FAIL) '
    read -r _ n_alloc _ n_free < <(grep '^allocs ' "$T/cancel.out")
    expect_eq "cancel ($walk): the category ends at zero, every block freed once, no heap error" \
        "live_bytes=0 live_count=0 allocs=$n_alloc frees=$n_free double_free=0" \
        "$(for k in live_bytes live_count allocs frees; do printf '%s=%s ' $k "$(field "$T/cancel.mtr" "category cancelled " $k)"; done)double_free=$(field "$T/cancel.mtr" errors double_free)"
    expect_eq "cancel ($walk): nothing on stderr" "" "$(cat "$T/cancel.err")"
done

# --- without the agent: the stub -------------------------------------------------
"$TBIN/meminfo_index" noagent | grep -E '^(PASS|FAIL) '

# --- cost, for the record ---------------------------------------------------------
LD_PRELOAD=$AGENT "$TBIN/meminfo_index" cost | sed 's/^/INFO /'
for f in "$T/events.mtr" "$T/stress.mtr"; do
    awk '$1 == "info" { for (i = 2; i <= NF; i++) if ($i ~ /^event_ns=/) print "INFO " FILENAME ": " $2 " " $i }' "$f" |
        sed "s|$T/||"
done

#!/usr/bin/env bash
# Trace mode at scale (issue 18), with DEFAULT trace options: the threaded
# workload bench/tthreads at 1 to 32 threads, its blocks freed on the thread
# that made them, on another one (--cross), or anywhere (--pool, with
# reallocs), and forked (--fork). Independent truths: the ledger tthreads
# prints (its own counts of its calls), a summary-mode run of the same
# deterministic program, and tests/trace/trace_order, which reads the trace
# and checks that every free and realloc follows its allocation and that
# times never go back. Also the traced process's peak RSS against the bare
# run's (VmHWM through /usr/bin/time -f %M, or getrusage).
. "$(dirname "$0")/../lib.sh"

TT=$BUILD/bench/tthreads
ORDER=$BUILD/asan/tests/trace/trace_order
PAIRS=${TT_PAIRS:-200000}

# ledger_get TEXT MODE KEY: KEY of the "ledger mode=MODE ..." line in TEXT.
ledger_get() { printf '%s\n' "$1" | sed -n "s/^ledger mode=$2 .* $3=\([0-9]*\).*/\1/p" | head -n 1; }
# facts JSON SUMMARY_JSON: one line of KEY=VALUE from the analysis (and the
# summary report's totals, s_*): the workload's stacks are those through
# tthreads' functions; its leaks those whose first frame is leak_known.
facts() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
ours = ('table_loop', 'leak_known', 'produce', 'consume', 'pool_loop', 'fork_child')
mine = [s for s in j['hot']['by_count']['stacks'] if any(f['function'] in ours for f in s['frames'])]
leak = [s for s in j['leaks']['stacks'] if s['frames'] and s['frames'][0]['function'] == 'leak_known']
f = dict(complete=j['complete'], lost=j['events_lost'], allocs=j['allocs'], frees=j['frees'],
         reallocs=j['reallocs'], live_count=j['live_count'], live_bytes=j['live_bytes'],
         peak=j['peak']['live_bytes'], frees_unknown=j['frees_unknown'],
         reallocs_unknown=j['reallocs_unknown'], ids_reused=j['ids_reused'],
         our_allocs=sum(s['allocs'] for s in mine), our_reallocs=sum(s['reallocs'] for s in mine),
         leak_count=sum(s['live_count'] for s in leak), leak_bytes=sum(s['live_bytes'] for s in leak))
if sys.argv[2] != '-':
    t = json.load(open(sys.argv[2]))['total']
    for k in ('allocs', 'frees', 'reallocs', 'live_count', 'live_bytes'):
        f['s_' + k] = t[k]
print(' '.join('%s=%s' % kv for kv in f.items()))
EOF
}
get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# lost_line STDERR: "WRITTEN LOST" from the agent's exit line(s), summed.
lost_line() { printf '%s\n' "$1" | awk '/trace: [0-9]+ events, [0-9]+ lost/ { for (i = 1; i < NF; i++) if ($i == "trace:") { n += $(i + 1); m += $(i + 3) } k++ } END { if (k) print n, m; else print "none" }'; }

# check_run NAME MODE TTHREADS-ARGS...: a traced run with the default
# options and (but for --pool) a summary run of the same program, checked
# against each other and against the ledger.
check_run() {
    local name=$1 mode=$2 sjson=-; shift 2
    if [ "$mode" != pool ]; then # --pool's counts depend on how threads interleave
        run_mt "$MT" run -o "$T/s.mtr" -- "$TT" "$@"
        "$MT" report --json "$T/s.mtr" >"$T/s.json" 2>/dev/null
        sjson=$T/s.json
    fi
    run_mt "$MT" run --mode trace -o "$T/t.mtt" -- "$TT" "$@"
    expect_eq "$name: exits 0" 0 "$rc"
    local ledger=$out lost
    lost=$(lost_line "$err")
    expect_eq "$name: the exit line says 0 events lost" 0 "${lost#* }"
    "$MT" analyze --json --top 0 "$T/t.mtt" >"$T/t.json" 2>"$T/t.err"
    local f
    f=$(facts "$T/t.json" "$sjson")
    expect_eq "$name: the trace is complete, its END stats say 0 lost" "True 0" "$(get "$f" complete) $(get "$f" lost)"
    expect_eq "$name: no free or realloc of a block the trace does not hold, no id reused" "0 0 0" \
        "$(get "$f" frees_unknown) $(get "$f" reallocs_unknown) $(get "$f" ids_reused)"
    local l_allocs l_reallocs l_leaked l_bytes
    l_allocs=$(ledger_get "$ledger" "$mode" allocs)
    l_reallocs=$(ledger_get "$ledger" "$mode" reallocs)
    l_leaked=$(ledger_get "$ledger" "$mode" leaked_blocks)
    l_bytes=$(ledger_get "$ledger" "$mode" leaked_bytes)
    if [ -z "$f" ] || [ -z "$l_allocs" ]; then # nothing to compare: say why, go on with the next run
        fail "$name: the analysis and the ledger" "analysis: $(head -c 300 "$T/t.err"); program output: $ledger"
        return
    fi
    # A realloc of a block made at another stack counts as an allocation of
    # its own stack in the analysis's lists: allocs + reallocs by stack.
    expect_eq "$name: the workload's allocs + reallocs (by stack) = the ledger's" "$((l_allocs + l_reallocs))" \
        "$(($(get "$f" our_allocs) + $(get "$f" our_reallocs)))"
    expect_eq "$name: reallocs = the ledger's" "$l_reallocs" "$(get "$f" reallocs)"
    expect_eq "$name: leaks from leak_known (count, bytes) = the ledger's" "$l_leaked $l_bytes" \
        "$(get "$f" leak_count) $(get "$f" leak_bytes)"
    if [ "$sjson" != - ]; then
        local k want=() got=()
        for k in allocs frees reallocs live_count live_bytes; do
            want+=("$(get "$f" "s_$k")"); got+=("$(get "$f" "$k")")
        done
        expect_eq "$name: allocs, frees, reallocs, leaked blocks and bytes = the summary report's" "${want[*]}" \
            "${got[*]}"
        if [ "$mode $1" = "plain 1" ]; then # one thread at a time: the same peak in both runs
            expect_eq "$name: peak = the summary report's (one worker: exact)" \
                "$(json_get "$T/s.json" "j['total']['peak_bytes']")" "$(get "$f" peak)"
        fi
    fi
    # The rest of the program (libc's stdout buffer, threads' TLS) is a few
    # blocks: the whole trace's allocs, frees and live blocks are the
    # ledger's and a few more, the same few of each.
    local l_frees ea ef el
    l_frees=$(ledger_get "$ledger" "$mode" frees)
    ea=$(($(get "$f" allocs) - l_allocs)) ef=$(($(get "$f" frees) - l_frees)) el=$(($(get "$f" live_count) - l_leaked))
    if [ "$ea" -ge 0 ] && [ "$ea" -le 96 ] && [ "$ef" -ge 0 ] && [ "$el" -ge 0 ] && [ $((ef + el)) -eq "$ea" ]; then
        pass "$name: allocs, frees and leaks = the ledger's and libc's $ea allocs, $ef frees, $el live"
    else fail "$name: allocs, frees and leaks = the ledger's and a few of libc's" \
        "trace $(get "$f" allocs) allocs, $(get "$f" frees) frees, $(get "$f" live_count) live; ledger $l_allocs, $l_frees, $l_leaked"; fi
    local minp maxp peak other
    minp=$(ledger_get "$ledger" "$mode" min_peak_bytes)
    if [ -n "$minp" ]; then
        maxp=$(ledger_get "$ledger" "$mode" max_peak_bytes)
        peak=$(get "$f" peak)
        other=$(($(get "$f" live_bytes) - l_bytes + 65536))
        if [ "$peak" -ge "$minp" ] && [ "$peak" -le $((maxp + other)) ]; then
            pass "$name: peak $peak within the ledger's bounds [$minp, $maxp + $other of libc's]"
        else fail "$name: peak within the ledger's bounds" "peak $peak, bounds [$minp, $maxp + $other]"; fi
    fi
    check_order "$name" "$T/t.mtt"
}

# check_order NAME TRACE: the reader sees every free and realloc after its
# allocation, and times that never go back (trace_order reads the file).
check_order() {
    run_mt "$ORDER" "$2"
    expect_match "$1: trace_order: every free and realloc after its allocation" "^ids: ok" \
        "$(printf '%s\n' "$out" | grep -E '^(ids|read):' | tr '\n' ' ')"
    expect_match "$1: trace_order: event times never go back in the file's order" "^time: ok" \
        "$(printf '%s\n' "$out" | grep -E '^(time|read):' | tr '\n' ' ')"
    expect_eq "$1: trace_order: the trace reads whole, to its end record" "" \
        "$(printf '%s\n' "$out" "$err" | grep -E '^read:')"
}

# --- its own blocks: 1 to 32 threads --------------------------------------------
for n in 1 2 4 8 32; do
    check_run "trace_threads: $n threads" plain "$n" "$PAIRS"
done

# --- every block freed on another thread ------------------------------------------
for n in 2 8 32; do
    check_run "trace_threads: --cross $n threads" cross --cross "$n" "$PAIRS"
done

# --- 16 threads on a shared pool, frees and reallocs of each other's blocks ---------
check_run "trace_threads: --pool 16 threads" pool --pool 16 "$PAIRS"

# --- fork while threads run: the child frees inherited blocks ---------------------
run_mt "$MT" run --mode trace -o "$T/fork.%p.mtt" -- "$TT" --fork 4 "$PAIRS"
expect_eq "trace_threads: --fork: exits 0" 0 "$rc"
parent=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p' | head -n 1)
child=""
for f in "$T"/fork.*.mtt; do [ "$f" != "$T/fork.$parent.mtt" ] && child=$f; done
expect_eq "trace_threads: --fork: the parent's and the child's traces" "2 1" \
    "$(ls "$T"/fork.*.mtt 2>/dev/null | wc -l) $([ -n "$parent" ] && [ -s "$T/fork.$parent.mtt" ] && [ -n "$child" ] && echo 1)"
expect_eq "trace_threads: --fork: the exit lines say 0 events lost" "0" "$(lost_line "$err" | cut -d' ' -f2)"
for who in parent child; do
    if [ "$who" = parent ]; then f=$T/fork.$parent.mtt; else f=$child; fi
    "$MT" analyze --json "$f" >"$T/fk.json" 2>/dev/null
    expect_eq "trace_threads: --fork: the $who's trace is complete, 0 lost" "True 0" \
        "$(json_get "$T/fk.json" "'%s %s' % (j['complete'], j['events_lost'])")"
done
check_order "trace_threads: --fork: the parent" "$T/fork.$parent.mtt"
# The child's frees of the 32 blocks it inherited are known (its trace names
# the parent's, whose events up to the fork the analysis replays): no unknown
# frees, at least the 64 inherited, 32 of them still live at the end
# (inherited - 32 freed), and fork_child's 5 leaks.
"$MT" analyze --json "$child" >"$T/fkc.json" 2>/dev/null
expect_eq "trace_threads: --fork: the child's frees of inherited blocks are all known" "0 True 1 1 5" \
    "$(json_get "$T/fkc.json" "'%d %s %d %d %d' % (j['frees_unknown'], j['inherited']['replayed'], int(j['inherited']['live_count'] >= 64), int(j['leaks']['live_count'] >= j['inherited']['live_count'] - 32 + 5), sum(x['live_count'] for x in j['leaks']['stacks'] if any(f['function'] == 'fork_child' for f in x['frames'])))")"
"$MT" report "$T/fork.$parent.mtt" "$child" >"$T/fk.tree" 2>&1
cpid=${child##*fork.}
cpid=${cpid%.mtt}
expect_eq "trace_threads: --fork: the report tree has the child under its parent, both ended by exit" \
    "$cpid $parent exit \\_" "$(awk -v c="$cpid" '$1 == c {print $1, $2, $3, $(NF-1)}' "$T/fk.tree")"

# --- peak RSS: traced minus bare ------------------------------------------------------
# The traced process itself is measured (the agent preloaded directly, no
# memtrail CLI around it): /usr/bin/time -f %M reports the VmHWM of its child.
rss_of() { # OUT CMD...: peak RSS in KiB of CMD into the file OUT
    local o=$1; shift
    if [ -x /usr/bin/time ]; then /usr/bin/time -f %M -o "$o" "$@" >/dev/null 2>"$T/rss.err"
    else python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)' "$o" "$@" 2>"$T/rss.err"
    fi
}
BOUND_KB=$((64 * 1024))
rss_of "$T/bare.rss" "$TT" 4 $((PAIRS * 5))
bare=$(tail -n 1 "$T/bare.rss")
rss_of "$T/traced.rss" env MEMTRAIL_OPTIONS="${MEMTRAIL_OPTIONS:+$MEMTRAIL_OPTIONS:}mode=trace:output=$T/rss.mtt" \
    LD_PRELOAD="$AGENT" "$TT" 4 $((PAIRS * 5))
traced=$(tail -n 1 "$T/traced.rss")
lost=$(lost_line "$(cat "$T/rss.err")")
if [[ $bare =~ ^[0-9]+$ ]] && [[ $traced =~ ^[0-9]+$ ]] && [ $((traced - bare)) -le "$BOUND_KB" ]; then
    pass "trace_threads: peak RSS traced - bare = $((traced - bare)) KiB <= $BOUND_KB KiB (4 threads; events written, lost: $lost)"
else fail "trace_threads: peak RSS traced - bare <= $BOUND_KB KiB" "bare '$bare' KiB, traced '$traced' KiB (events written, lost: $lost)"; fi
expect_eq "trace_threads: the RSS run lost nothing" 0 "${lost#* }"

# --- allocation ids under a signal handler's malloc nested in the id's take -----
# tests/agent/idstep single-steps its mallocs and mallocs in the SIGTRAP
# handler right after the agent's per-thread xadd: every block keeps an id of
# its own (a handler's block taking the id the interrupted malloc drew past its
# block's end showed as ids_reused and frees_unknown).
run_mt "$MT" run --mode trace --no-loss -o "$T/idstep.mtt" -- "$TBIN/idstep" 600
expect_match "trace_threads: idstep nested mallocs in the id's xadd" "600 mallocs, [1-9][0-9]* nested" "$out"
run_mt "$MT" analyze --json "$T/idstep.mtt"
printf '%s' "$out" >"$T/idstep.json"
expect_eq "trace_threads: nested ids unique (ids_reused, frees_unknown, allocs - frees - leaks)" "0 0 0" \
    "$(json_get "$T/idstep.json" "'%d %d %d' % (j['ids_reused'], j['frees_unknown'], j['allocs'] - j['frees'] - j['leaks']['live_count'])")"

# --- an idle dispatcher stays idle when its pages cannot be given back -------------
# tests/agent/mlocked locks its memory (mlockall: MADV_DONTNEED fails with
# EINVAL), makes bursts, then sleeps 1.5 s and counts the dispatcher's clock
# ticks meanwhile (a failed trim retried at every idle turn spun it at 100%).
run_mt "$MT" run --mode trace -o "$T/mlocked.mtt" -- "$TBIN/mlocked"
if [ "$out" = skip ]; then
    echo "SKIP trace_threads: mlockall refused (RLIMIT_MEMLOCK)"
elif [[ $out =~ ticks:\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le 30 ]; then
    pass "trace_threads: locked memory: the idle dispatcher used ${BASH_REMATCH[1]} ticks in 1.5 s (<= 30)"
else fail "trace_threads: locked memory: the idle dispatcher stays idle" "$out"; fi

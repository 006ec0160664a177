#!/usr/bin/env bash
# `memtrail html` of a trace, a reference-set recording and a report with
# memory-info and span data (docs/html.md): pages made from real runs of
# programs whose allocations are known (tests/agent/peak.c: the bytes held
# at the peak; tests/refset/rs_seed.c: the seed's viewport; tests/agent/
# spans.c: its requests by name) and of SQLite (the shared bench's
# workload, when sqlite3 is there), opened in headless Chromium by
# tests/html/browser_trace.py, which checks what the page shows against the
# JSON `memtrail analyze|refset report|info --json` prints and against the
# programs' own counts: no console errors; totals, peak and top site; the
# caveats (a trace begun on demand, tests/agent/held.c); the hottest
# stacks ranked by allocations (tests/agent/tracer.c hot); a timeline point
# per bucket; the flame graph's root, zoom, search; the
# reference-set figures recomputed in the page for a typed and a dragged
# viewport equal `refset report --viewport`. Also the memory bound of
# `memtrail html` on a generated trace. Screenshots: $BUILD/html-screens/.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3 # Debian's, with python3-selenium (not a pyenv shim)
SCREENS=$BUILD/html-screens
RSBIN=$BUILD/tests/refset
GEN=$BUILD/bench/tracegen
for f in "$MT" "$TBIN/peak" "$TBIN/tracer" "$TBIN/spans" "$RSBIN/rs_seed" "$GEN"; do
    [ -e "$f" ] || { fail html-trace-build "$f missing (make tests)"; exit 1; }
done
cd "$T" || exit 1

# --- a trace: peak.c holds 1 MiB in main and 4 x 200000 bytes in workers,
# all live at once at the barrier (category pk); each worker's own array of
# 4000 pointers (32000 bytes) is live then too.
pk=$("$MT" run --mode trace -o peak.mtt -- "$TBIN/peak" 4 2>/dev/null | awk '/^peak /{print $2}')
expect_eq "html trace: peak.c ran" 1848576 "$pk"
"$MT" analyze --json peak.mtt >peak.json
run_mt "$MT" html peak.mtt -o peak.html
expect_eq "html trace: page written" "0 memtrail: wrote peak.html (trace page)" "$rc $err"
printf '{"category": "pk", "category_peak": %d, "function": "worker", "function_bytes": %d}\n' \
    "$pk" $((4 * (200000 + 32000))) >peak.truth
jobs=(trace:peak.html:peak.json:peak.truth)

# --- a trace begun on demand: tests/agent/held.c holds 64 blocks when it
# starts, in no figure: the page says the trace began late, as analyze does.
if [ -e "$AGENT" ] && [ -x "$TBIN/held" ]; then
    mkdir held
    MEMTRAIL_OPTIONS="mode=trace:start=off:output=$T/held/startup.mtt" LD_PRELOAD=$AGENT "$TBIN/held" "$T/held" \
        >held/out 2>&1 &
    hpid=$!
    for _ in $(seq 1500); do [ -e held/ready ] && break; sleep 0.02; done
    "$MT" query "$hpid" start trace -o "$T/held.mtt" >held/query 2>&1
    touch held/go
    wait "$hpid"
    "$MT" analyze --json held.mtt >held.json
    expect_eq "html trace: the on-demand trace began late (analyze --json)" True \
        "$(json_get held.json "bool(j['caveats'] and j['caveats']['began_late'])")"
    "$MT" html held.mtt -o held.html 2>/dev/null
    jobs+=(trace:held.html:held.json)
else
    echo "SKIP html trace: the agent or tests/agent/held not built: no on-demand page"
fi

# --- tracer hot: a stack of 100 allocations, and one of 20 allocations
# grown by 180 reallocs: by number of allocations the first ranks first.
"$MT" run --mode trace -o hot.mtt -- "$TBIN/tracer" hot >/dev/null 2>&1
"$MT" analyze --json hot.mtt >hot.json
"$MT" html hot.mtt -o hot.html 2>/dev/null
jobs+=(trace:hot.html:hot.json)

SQLITE=$(command -v sqlite3 || true)
SQL=${MT_SHARED:-/work/shared}/bench/workload.sql
if [ -n "$SQLITE" ] && [ -f "$SQL" ]; then
    "$MT" run --mode trace --depth 16 -o sql.mtt -- "$SQLITE" :memory: <"$SQL" >/dev/null 2>&1
    "$MT" analyze --json sql.mtt >sql.json 2>/dev/null
    "$MT" html sql.mtt -o sql-trace.html 2>/dev/null
    check "html trace: the SQLite trace's page" test -s sql-trace.html
    jobs+=(trace:sql-trace.html:sql.json)
else
    echo "SKIP html trace: sqlite3 or $SQL missing: no SQLite page"
fi

# --- a reference-set recording of the seed's example: T0 and T1 as the
# program read CLOCK_MONOTONIC, turned into the recording's seconds.
"$MT" refset record -o seed.mtrs -- "$RSBIN/rs_seed" >seed.out 2>seed.err
if [ -s seed.mtrs ]; then
    "$MT" refset report --json seed.mtrs >seed.json
    start=$(json_get seed.json 'j["start_monotonic_ns"]')
    vp=$(awk -v s="$start" '/^T0 /{t0=$2} /^T1 /{t1=$2} END{printf "%d.%09d:%d.%09d", (t0-s)/1e9, (t0-s)%1e9, (t1-s)/1e9, (t1-s)%1e9}' seed.out)
    printf '{"viewport": "%s", "seed": true}\n' "$vp" >seed.truth
    run_mt "$MT" html seed.mtrs -o seed.html
    expect_eq "html refset: page written" "0 memtrail: wrote seed.html (refset page)" "$rc $err"
    jobs+=(refset:seed.html:seed.json:seed.mtrs:seed.truth)
    # two processes, one after the other (sh and rs_seed, page cache shared)
    "$MT" refset record -o two.mtrs -- sh -c "$RSBIN/rs_seed dontneed 100 >/dev/null; $RSBIN/rs_seed munmap 100 >/dev/null" 2>/dev/null
    "$MT" refset report --json two.mtrs >two.json
    "$MT" html two.mtrs -o two.html 2>/dev/null
    jobs+=(refset:two.html:two.json:two.mtrs)
else
    echo "SKIP html refset: refset record could not record here: $(head -c 300 seed.err)"
fi

# --- memory info and spans: spans.c counts its own requests by name.
MEMTRAIL_OPTIONS=peak_step=4KB "$MT" run -o spans.mtr -- "$TBIN/spans" server 2 3000 >spans.out 2>/dev/null
"$MT" info --json spans.mtr >info.json
run_mt "$MT" html --kind info spans.mtr -o spans.html
expect_eq "html info: page written" "0 memtrail: wrote spans.html (info page)" "$rc $err"
awk '/^count /{n[$2]=$3} END{printf "{\"by_name\": {\"get\": %d, \"put\": %d}}\n", n["get"], n["put"]}' spans.out >info.truth
jobs+=(info:spans.html:info.json:info.truth)

# --- the browser ---------------------------------------------------------
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "SKIP html browser: chromium or chromium-driver not installed (scripts/deps.sh)"
else
    mkdir -p "$SCREENS"
    MT=$MT HOME=$T "$PY" -B "$MT_ROOT/tests/html/browser_trace.py" "$SCREENS" "${jobs[@]}"
fi

# --- bounded memory: `memtrail html` of a generated trace with LIVE blocks
# live all along stays within the analysis's bound (32 MB + 12 bytes a
# live block, docs/trace-analysis.md) plus the page: its data (the JSON,
# held once in memory) and the embedded libraries, twice (bench/html.sh
# measures the 100M-event case).
EVENTS=2000000 LIVE=200000
"$GEN" -o gen.mtt -n $EVENTS -l $LIVE -s 5 2>/dev/null
/usr/bin/time -f '%M' -o rss.txt "$MT" html gen.mtt -o gen.html 2>/dev/null
size=$(stat -c %s gen.html)
rss_kb=$(tail -1 rss.txt)
bound_kb=$(((32 * 1048576 + 12 * LIVE + 2 * size) / 1024))
if [ "$rss_kb" -le "$bound_kb" ]; then
    pass "html: a $EVENTS-event trace in bounded memory (${rss_kb} KB <= ${bound_kb} KB: 32 MB + 12 B x $LIVE live + 2 x the page's $size bytes)"
else
    fail "html: bounded memory" "peak RSS ${rss_kb} KB over ${bound_kb} KB"
fi

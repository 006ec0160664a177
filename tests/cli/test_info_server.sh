#!/usr/bin/env bash
# The tail-latency report end to end (issue 17's proof): a request server
# (tests/agent/reqserver.c) runs under the agent with libslowalloc.so
# stalling a known malloc size; every 50th request also maps and unmaps
# memory (GROW and TRIM events). The program keeps the seed's books
# itself — mt_event_count before and after each request, its own clock,
# the stall's real length — and `memtrail info --json` must agree with a
# model built from those books alone: requests, affected and multiple
# counts, each percentile band's requests and affected share (by rank of
# the program's own latencies), and the memory time within 10% of the
# program's own time in its memory calls (at least the injected stalls:
# under load a thread is also preempted inside them, and that time is
# memory time too). Then the same figures live, over the control socket.
source "$(dirname "$0")/../lib.sh"

M=$MT
SERVER=$TBIN/reqserver
SLOW=$TBIN/libslowalloc.so
if [ ! -x "$SERVER" ] || [ ! -f "$SLOW" ] || [ ! -f "$AGENT" ]; then
    fail "info server: programs" "missing $SERVER, $SLOW or $AGENT (make tests)"
    exit 0
fi

N=2000
MEMTRAIL_OPTIONS="output=$T/server.mtr" LD_PRELOAD="$AGENT:$SLOW" "$SERVER" $N >"$T/ledger" 2>"$T/server.err"
check "info server: the server ran" test $? -eq 0
check "info server: its ledger has a line per request" test "$(grep -c '^req ' "$T/ledger")" -eq $N
run_mt "$M" info "$T/server.mtr" --json --percentiles 50,90,99,99.9
check "info server: memtrail info --json exits 0" test "$rc" -eq 0
printf '%s\n' "$out" >"$T/info.json"

compare() { # LABEL JSON: the model of the ledger against the report's figures
    python3 - "$T/ledger" "$2" "$1" <<'EOF'
import json, sys
ledger, doc, label = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
reqs = []
for line in open(ledger):
    w = line.split()
    if w and w[0] == "req":
        reqs.append((int(w[1]), int(w[2]), int(w[3]), int(w[4])))  # latency, events, stall, memory calls
n = len(reqs)
def ok(name, cond, why=""):
    print(("PASS %s: %s" % (label, name)) if cond else ("FAIL %s: %s: %s" % (label, name, why)))
s = doc["spans"]
affected = sum(1 for r in reqs if r[1] >= 1)
multiple = sum(1 for r in reqs if r[1] >= 2)
ok("requests = the program's", s["requests"] == n, "%s vs %d" % (s["requests"], n))
ok("affected = the requests whose mt_event_count moved", s["affected"] == affected,
   "%s vs %d" % (s["affected"], affected))
ok("affected by more than one event = the ledger's", s["multiple_events"] == multiple,
   "%s vs %d" % (s["multiple_events"], multiple))
ok("some requests are affected (the test means something)", 0 < affected < n / 10, str(affected))
# Bands by the program's own ranking: band i = ranks (N*p(i-1)/100, N*p(i)/100].
ranked = sorted(reqs, key=lambda r: r[0])
pct = [0, 50, 90, 99, 99.9, 100]
bands = s["by_percentile"]
ok("five bands", len(bands) == 5, str(len(bands)))
for i, b in enumerate(bands[:5]):
    lo, hi = round(n * pct[i] / 100), round(n * pct[i + 1] / 100)
    mine = ranked[lo:hi]
    a = sum(1 for r in mine if r[1] >= 1)
    name = "band p%g-p%g" % (pct[i], pct[i + 1])
    ok(name + ": requests", abs(b["requests"] - len(mine)) < 1e-6, "%s vs %d" % (b["requests"], len(mine)))
    # The report ranks by its own clock, in buckets of two significant
    # digits: an affected request at a band's edge may fall either side.
    ok(name + ": affected requests in the right band", abs(b["affected"] - a) <= 1,
       "%s vs %d (ledger)" % (b["affected"], a))
    stalls = sum(r[2] for r in mine if r[1] >= 1)
    # Every band: no more memory time than the program spent in its memory
    # calls by its own clock, which brackets the agent's (the span's other
    # work, were it counted, would show here: a band's latency is several
    # times its memory calls' time).
    ok(name + ": memory time within the program's time in its memory calls",
       b["memory_ns"] <= 1.1 * sum(r[3] for r in mine) + 50000,
       "%.0f ns vs %d ns (latency %d ns)" % (b["memory_ns"], sum(r[3] for r in mine), sum(r[0] for r in mine)))
    if stalls:
        # The memory time of the band is the time of its requests' memory
        # calls by the program's clock: the injected stalls, the few
        # hundred ns of each request's small mallocs, and whatever
        # preemption hit a thread inside them.
        mem = sum(r[3] for r in mine)
        ok(name + ": memory time within 10% of the program's own", abs(b["memory_ns"] - mem) <= 0.1 * mem,
           "%.0f ns vs %d ns by the program's clock (%d ns of it injected stalls)" % (b["memory_ns"], mem, stalls))
        ok(name + ": memory time holds the injected stalls", b["memory_ns"] >= 0.9 * stalls,
           "%.0f ns vs %d ns injected" % (b["memory_ns"], stalls))
        share = 100.0 * sum(r[3] for r in mine if r[1] >= 1) / sum(r[0] for r in mine if r[1] >= 1)
        ok(name + ": memory share of the affected within 10% of the program's memory time/latency",
           abs(b["memory_share_percent"] - share) <= 0.1 * share,
           "%s vs %.2f" % (b["memory_share_percent"], share))
# "memory hits my p99 but not my p50"
ok("the median band is not hit, the tail is", bands[0]["affected"] == 0 and bands[4]["affected_percent"] > 50,
   "%s / %s" % (bands[0]["affected"], bands[4]["affected_percent"]))
EOF
}
compare "info server (file)" "$T/info.json"

# The text says the same in words.
run_mt "$M" info "$T/server.mtr"
contains "info server: the text counts the affected requests" \
    "affected by memory events: $(awk '$1 == "req" && $3 >= 1' "$T/ledger" | wc -l) of $N requests" "$out"

# Live, over the control socket: a longer run queried while it serves (the
# figures are what it served so far, and must hang together).
unset XDG_RUNTIME_DIR
MEMTRAIL_OPTIONS="output=$T/live.mtr" LD_PRELOAD="$AGENT:$SLOW" "$SERVER" 200000 >"$T/live.ledger" 2>&1 &
pid=$!
for ((i = 0; i < 200; i++)); do [ "$(grep -c '^req ' "$T/live.ledger" 2>/dev/null)" -gt 500 ] && break; sleep 0.05; done
run_mt "$M" info "$pid" --json
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "info server: info PID --json exits 0" test "$rc" -eq 0
printf '%s\n' "$out" >"$T/live.json"
check "info server: the live report has request spans" \
    python3 -c "import json,sys; d=json.load(open('$T/live.json')); sys.exit(not d['spans']['requests'] > 500)"
check "info server: the live report's bands add up to its requests" \
    python3 -c "import json,sys; d=json.load(open('$T/live.json'))['spans']; sys.exit(abs(sum(b['requests'] for b in d['by_percentile']) - d['requests']) > 1e-6)"

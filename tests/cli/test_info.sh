# memtrail info (and query PID info) on hand-made reports whose expected
# figures are computed here independently: python3 expands every histogram
# bucket into its requests (each with the bucket's mean duration, memory
# time and affected share: the documented proportional split) and assigns
# them to the percentile bands by rank, where memtrail intersects rank
# intervals in 128-bit integers. Also: every field of the snapshots, --kind,
# --percentiles, the JSON against docs/schema/info.schema.json, the
# text, and each error (usage: exit 2; otherwise exit 1).
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] || { fail setup "build first: $MT missing"; exit 1; }
M=$MT
[ -x "$MT_ASAN" ] && M=$MT_ASAN # leaks and undefined behaviour of the printers are found too

INFO_REST() { # the numeric fields of an info line: $1 base value
    local v=$1
    echo "time_ns=$((1763868001000000000 + v)) run_time_ns=$((4000000000 + v)) live_before_bytes=$((9000000 + v)) live_after_bytes=$((8000000 + v)) fragmentation_before_bytes=$((120000 + v)) fragmentation_after_bytes=$((90000 + v)) rss_bytes=$((15000000 + v)) committed_bytes=$((30000000 + v)) memory_load_bytes=$((2000000000 + v)) total_available_bytes=$((25000000000 + v)) alloc_time_ns=$((1100000 + v)) map_time_ns=$((800000 + v)) minor_faults=$((5000 + v)) major_faults=$((2 + v)) overhead_bytes=$((70000 + v)) event_ns=$((12000 + v))"
}
ZERO="time_ns=0 run_time_ns=0 live_before_bytes=0 live_after_bytes=0 fragmentation_before_bytes=0 fragmentation_after_bytes=0 rss_bytes=0 committed_bytes=0 memory_load_bytes=0 total_available_bytes=0 alloc_time_ns=0 map_time_ns=0 minor_faults=0 major_faults=0 overhead_bytes=0 event_ns=0"
head_lines() {
    printf 'memtrail-report 1\npid 4242\nexe /usr/bin/server\ncmdline server --port 80\nmode summary\nreason exit\n'
    printf 'total live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\nerrors double_free=0 bad_canary=0 foreign_free=0\n'
    printf 'memory_time run_time_ns=5000000000 alloc_time_ns=30000000 map_time_ns=20000000\n'
    echo "info kind=any count=14 event=trim index=14 $(INFO_REST 1) categories=malloc:7000000,parser:1000000"
    echo "info kind=peak count=5 event=peak index=5 $(INFO_REST 2) categories=malloc:9000000"
    echo "info kind=grow count=6 event=grow index=6 $(INFO_REST 3) categories=malloc:8500000"
    echo "info kind=trim count=3 event=trim index=3 $(INFO_REST 4) categories=malloc:7000000,parser:1000000"
    echo "info kind=limit count=0 event=none index=0 $ZERO categories="
    echo "info kind=periodic count=0 event=none index=0 $ZERO categories="
}
# One name, 1000 requests, so the default edges are ranks 500, 900, 990, 999:
#   [41us, 42us)   500, none affected           ranks   1-500   p0-p50
#   [50us, 51us)   400, 40 affected             ranks 501-900   p50-p90
#   [1ms, 1.1ms)    95, 19 affected             ranks 901-995   90 in p90-p99, 5 in p99-p99.9
#   [5ms, 5.1ms)     5, all affected, 2 twice   ranks 996-1000  4 in p99-p99.9, 1 in p99.9-p100
# By hand, p99.9-p100 is the last bucket's 1/5: 1 request, 100% affected,
# memory share 20000000/25250000 = 79.208%; p99-p99.9 holds 5/95 of the
# third bucket and 4/5 of the fourth: 0.2632 + 4 affected of 9 requests.
{
    head_lines
    cat <<'EOF'
span_name id=1 count=1000 name=GET\s/x
span id=1 lo_ns=41000 hi_ns=42000 count=500 affected=0 multiple=0 events=0 duration_ns=20750000 memory_ns=500000 faults=0
span id=1 lo_ns=50000 hi_ns=51000 count=400 affected=40 multiple=0 events=40 duration_ns=20200000 memory_ns=2000000 faults=0
span id=1 lo_ns=1000000 hi_ns=1100000 count=95 affected=19 multiple=0 events=19 duration_ns=99750000 memory_ns=9500000 faults=0
span id=1 lo_ns=5000000 hi_ns=5100000 count=5 affected=5 multiple=2 events=12 duration_ns=25250000 memory_ns=20000000 faults=10
span_memory id=1 lo_ns=1000 hi_ns=1100 count=900
span_memory id=1 lo_ns=4000000 hi_ns=4100000 count=100
spans names=1 unmatched_ends=0 dropped=0 faults_counted=0
end
EOF
} >"$T/one.mtr"
# Two names whose buckets share bounds (merged into one histogram: 80
# requests in [41us, 42us), 6 of them affected) and not.
{
    head_lines
    cat <<'EOF'
span_name id=1 count=30 name=GET
span id=1 lo_ns=41000 hi_ns=42000 count=20 affected=0 multiple=0 events=0 duration_ns=830000 memory_ns=10000 faults=0
span id=1 lo_ns=2000000 hi_ns=2100000 count=10 affected=10 multiple=1 events=11 duration_ns=20500000 memory_ns=15000000 faults=0
span_name id=2 count=70 name=POST
span id=2 lo_ns=41000 hi_ns=42000 count=60 affected=6 multiple=0 events=6 duration_ns=2490000 memory_ns=60000 faults=0
span id=2 lo_ns=300000 hi_ns=310000 count=10 affected=0 multiple=0 events=0 duration_ns=3050000 memory_ns=0 faults=0
spans names=2 unmatched_ends=3 dropped=1 faults_counted=0
end
EOF
} >"$T/two.mtr"

# expected FILE PERCENTILES: the figures as python3 models them, one JSON object:
# {"all": VIEW, "names": {NAME: VIEW}}, VIEW = {"total": FIGS, "bands": [FIGS...]}.
expected() {
    python3 - "$1" "$2" <<'PYEOF'
import json, sys
from fractions import Fraction as F
path, pcts = sys.argv[1], [F(p) for p in sys.argv[2].split(",")]
names, buckets = {}, {}
for line in open(path):
    w = line.split()
    if w and w[0] == "span_name":
        f = dict(x.split("=", 1) for x in w[1:])
        names[f["id"]] = line.split("name=", 1)[1].rstrip("\n").replace("\\s", " ")
    if w and w[0] == "span":
        f = dict(x.split("=", 1) for x in w[1:])
        buckets.setdefault(f["id"], []).append({k: int(v) for k, v in f.items()})
def merged(bs):
    """Buckets of the same bounds are one bucket (its requests' order inside is unknown)."""
    out = {}
    for b in bs:
        m = out.setdefault((b["lo_ns"], b["hi_ns"]), dict(b, count=0, affected=0, multiple=0, duration_ns=0, memory_ns=0))
        for k in ("count", "affected", "multiple", "duration_ns", "memory_ns"):
            m[k] += b[k]
    return list(out.values())
def view(bs):
    bs = merged(bs)
    reqs = []   # one entry per request, in latency order, with the bucket's means
    for b in sorted(bs, key=lambda b: b["lo_ns"]):
        c = b["count"]
        for _ in range(c):
            reqs.append({"aff": F(b["affected"], c), "mul": F(b["multiple"], c), "dur": F(b["duration_ns"], c),
                         "mem": F(b["memory_ns"], c), "flt": F(b["faults"], c), "lo": b["lo_ns"], "hi": b["hi_ns"]})
    n = len(reqs)
    edges = [F(0)] + [n * p / 100 for p in pcts] + [F(n)]
    def figs(rs):   # rs: (weight, request)
        req = sum(w for w, _ in rs)
        aff = sum(w * r["aff"] for w, r in rs)
        adur = sum(w * r["aff"] * r["dur"] for w, r in rs)
        amem = sum(w * r["aff"] * r["mem"] for w, r in rs)
        dur = sum(w * r["dur"] for w, r in rs)
        mem = sum(w * r["mem"] for w, r in rs)
        pct = lambda a, b: float(a * 100 / b) if b else 0.0
        return {"requests": float(req), "affected_percent": pct(aff, req), "memory_share_percent": pct(amem, adur),
                "all_memory_share_percent": pct(mem, dur), "multiple_events": float(sum(w * r["mul"] for w, r in rs)),
                "faults": float(sum(w * r["flt"] for w, r in rs)),
                "latency_min_ns": min((r["lo"] for w, r in rs), default=None),
                "latency_max_ns": max((r["hi"] for w, r in rs), default=None)}
    bands = []
    for i in range(len(edges) - 1):
        part = []   # request k occupies ranks (k-1, k]
        for k, r in enumerate(reqs, 1):
            w = min(F(k), edges[i + 1]) - max(F(k - 1), edges[i])
            if w > 0:
                part.append((w, r))
        bands.append(figs(part))
    return {"total": figs([(F(1), r) for r in reqs]), "bands": bands}
print(json.dumps({"all": view([b for bs in buckets.values() for b in bs]),
                  "names": {names[i]: view(bs) for i, bs in buckets.items()}}))
PYEOF
}
# compare LABEL GOT.json WANT.json PERCENTILES: every figure of spans (and by_name).
compare() {
    local out
    out=$(python3 - "$2" "$3" "$4" <<'PYEOF'
import json, sys
got, want, pcts = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3].split(",")
bad = []
def close(a, b):
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 0.0011)
def cmp(where, g, w):
    for k in ("requests", "affected_percent", "memory_share_percent", "all_memory_share_percent", "multiple_events",
              "faults"):
        if not close(g[k], w["total"][k]):
            bad.append("%s %s: got %s, want %s" % (where, k, g[k], w["total"][k]))
    if len(g["by_percentile"]) != len(w["bands"]):
        bad.append("%s: %d bands, want %d" % (where, len(g["by_percentile"]), len(w["bands"])))
        return
    for i, (gb, wb) in enumerate(zip(g["by_percentile"], w["bands"])):
        top = float(pcts[i]) if i < len(pcts) else 100.0
        if not close(gb["percentile"], top):
            bad.append("%s band %d: percentile %s, want %s" % (where, i, gb["percentile"], top))
        for k in wb:
            if not close(gb[k], wb[k]):
                bad.append("%s band %d %s: got %s, want %s" % (where, i, k, gb[k], wb[k]))
s = got["spans"]
cmp("spans", s, want["all"])
if len(want["names"]) > 1:
    gn = {e["name"]: e for e in s.get("by_name", [])}
    for name, w in want["names"].items():
        if name not in gn:
            bad.append("by_name: no %r" % name)
        else:
            cmp("by_name %s" % name, gn[name], w)
elif "by_name" in s:
    bad.append("by_name with a single name")
print("ok" if not bad else "; ".join(bad[:6]))
PYEOF
)
    expect_eq "$1" ok "$out"
}

# --- the figures, against the model --------------------------------------------------
for f in one two; do
    for p in 50,90,99,99.9 25,75 10,99.5 33.333333,66.666666 0.000001,99.999999; do
        args=(); [ $p = 50,90,99,99.9 ] || args=(--percentiles "$p")
        run_mt "$M" info "$T/$f.mtr" --json "${args[@]}"
        echo "$out" >"$T/got.json"
        expected "$T/$f.mtr" "$p" >"$T/want.json"
        expect_eq "info $f.mtr --percentiles $p: exit 0, nothing on stderr" "0 " "$rc $err"
        compare "info $f.mtr --percentiles $p: spans and bands as the model says" "$T/got.json" "$T/want.json" "$p"
    done
done
run_mt "$M" info "$T/one.mtr" --json
echo "$out" >"$T/one.json"
# By hand (see the buckets above): the last band's one request.
expect_eq "one.mtr: p99.9-p100 by hand: 1 request, 100% affected, 79.208% memory share, 5ms-5.1ms" \
    "1 100 79.208 5000000 5100000" \
    "$(json_get "$T/one.json" "' '.join(str(j['spans']['by_percentile'][4][k]) for k in ('requests', 'affected_percent', 'memory_share_percent', 'latency_min_ns', 'latency_max_ns'))")"
expect_eq "one.mtr: p99-p99.9 takes 5 of the straddling 1ms bucket and 4 of the 5ms one (9 requests)" \
    "9 1000000 5100000" \
    "$(json_get "$T/one.json" "' '.join(str(j['spans']['by_percentile'][3][k]) for k in ('requests', 'latency_min_ns', 'latency_max_ns'))")"
# 64 affected of 1000; the affected requests' memory: 0 + 40/400*2e6 + 19/95*9.5e6 + 2e7 = 2.21e7 ns,
# their time 40/400*20.2e6 + 19/95*99.75e6 + 25.25e6 = 47.22e6 ns: 46.802%.
expect_eq "one.mtr: overall by hand: 6.4% affected, 46.802% of their time, 2 hit twice" "6.4 46.802 2" \
    "$(json_get "$T/one.json" "' '.join(str(j['spans'][k]) for k in ('affected_percent', 'memory_share_percent', 'multiple_events'))")"
expect_eq "one.mtr: memory_time: (30ms + 20ms) / 5s = 1%" "1" "$(json_get "$T/one.json" "j['memory_time']['memory_time_percent']")"

# Every field of each snapshot, as the info lines say.
expect_eq "info --json: every field of every kind's last snapshot is the file's" ok "$(python3 - "$T/one.mtr" "$T/one.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[2]))
bad = []
lines = [l.split(" categories=") for l in open(sys.argv[1]) if l.startswith("info ")]
if [k["kind"] for k in j["kinds"]] != ["any", "peak", "grow", "trim", "limit", "periodic"]:
    bad.append("kinds %s" % [k["kind"] for k in j["kinds"]])
for (fields, cats), k in zip(lines, j["kinds"]):
    f = dict(x.split("=", 1) for x in fields.split()[1:])
    last = k["last"]
    if k["kind"] != f["kind"] or k["count"] != int(f["count"]) or last["kind"] != f["event"]:
        bad.append("kind/count/event of %s" % f["kind"])
    for name, v in f.items():
        if name not in ("kind", "count", "event") and last.get(name) != int(v):
            bad.append("%s %s: %s vs %s" % (f["kind"], name, last.get(name), v))
    pct = (int(f["alloc_time_ns"]) + int(f["map_time_ns"])) * 100 / int(f["run_time_ns"]) if int(f["run_time_ns"]) else 0
    if abs(last["memory_time_percent"] - pct) > 0.0011:
        bad.append("memory_time_percent of %s" % f["kind"])
    want = [{"name": c.rsplit(":", 1)[0], "live_bytes": int(c.rsplit(":", 1)[1])} for c in cats.strip().split(",") if c]
    if last["categories"] != want:
        bad.append("categories of %s" % f["kind"])
print("ok" if not bad else "; ".join(bad[:5]))
PYEOF
)"

# --kind
run_mt "$M" info "$T/one.mtr" --json --kind trim
echo "$out" >"$T/trim.json"
expect_eq "--kind trim --json: only the trim snapshot; spans still there" "trim 3 3 1000" \
    "$(json_get "$T/trim.json" "' '.join(str(x) for x in ([k['kind'] for k in j['kinds']] + [j['kinds'][0]['count'], j['kinds'][0]['last']['index'], int(j['spans']['requests'])]))")"
run_mt "$M" info "$T/one.mtr" --kind limit
expect_eq "--kind limit (text): one kind, none yet" "limit none yet" "$(printf '%s\n' "$out" | grep -E '^(any|peak|grow|trim|limit|periodic) ' | tr -s ' ')"

# The text: what a developer reads.
run_mt "$M" info "$T/one.mtr"
expect_eq "text: exit 0" 0 "$rc"
contains "text: who" "memtrail memory info: pid 4242, server --port 80 (written at exit)" "$out"
contains "text: memory time share" "Memory management took 1.00% of the run's 5.000s (allocator 30.000ms, mapping calls 20.000ms)" "$out"
contains "text: any's last event is a trim" "any       14 events; the last: #14, a trim, 4.000s into the run" "$out"
contains "text: sizes with units" "live 8.58MB -> 7.63MB, free in the allocator 117KB -> 87.9KB" "$out"
contains "text: categories" "categories: malloc 6.68MB, parser 977KB" "$out"
contains "text: spans summary" "affected by memory events: 64 of 1000 requests (6.40%); by more than one: 2" "$out"
contains "text: shares" "memory management's share: 46.80% of the affected requests' time" "$out"
expect_match "text: the p99.9 band" "p99\.9-p100 +1 +5\.000ms-5\.100ms +100\.00% +79\.21% +79\.21% +0\.40" "$out"
expect_match "text: the p0-p50 band, none affected" "p0-p50 +500 +41\.000us-42\.000us +0% +- " "$out"
# Percentiles so small that a band holds a sliver of one request (1000 x
# 0.000001% = 0.00001 of the fastest, and of the slowest): not shown as 0
# requests beside a latency range; the percentiles as given, in JSON too.
run_mt "$M" info "$T/one.mtr" --percentiles 0.000001,99.999999
expect_match "text: p0-p0.000001 holds a sliver of a request, not 0" \
    "p0-p0\.000001 +<0\.01 +41\.000us-42\.000us " "$out"
expect_match "text: p99.999999-p100 holds a sliver of a request, not 0" \
    "p99\.999999-p100 +<0\.01 +5\.000ms-5\.100ms " "$out"
run_mt "$M" info "$T/one.mtr" --percentiles 0.000001,99.999999 --json
echo "$out" >"$T/sliver.json"
expect_eq "json: exact percentiles (0.000001, not 0; 99.999999, not 100) and the slivers' requests, not 0" \
    "0 1e-06 1e-05 41000 | 1e-06 99.999999 1000 41000 | 99.999999 100 1e-05 5000000" \
    "$(json_get "$T/sliver.json" "' | '.join(' '.join(str(b[k]) for k in ('percentile_from', 'percentile', 'requests', 'latency_min_ns')) for b in j['spans']['by_percentile'])")"
contains "json: the percentile written as given" '{"percentile": 0.000001, "percentile_from": 0, "requests": 1e-05,' "$out"
run_mt "$M" info "$T/two.mtr"
contains "text, two names: the counts of the spans line" "Request spans: 2 names (3 ends without a begin, 1 spans not recorded)" "$out"
contains "text, two names: one block per name" "  span 'POST':" "$out"

# PID and query PID info print the same (a live program under the agent).
if [ -f "$AGENT" ] && [ -x "$TBIN/live" ]; then
    unset XDG_RUNTIME_DIR
    mkdir -p "$T/live"
    MEMTRAIL_OPTIONS="output=$T/live.mtr" LD_PRELOAD=$AGENT "$TBIN/live" "$T/live" >"$T/live.out" 2>&1 &
    lpid=$!
    for ((i = 0; i < 500; i++)); do [ -e "$T/live/ready1" ] && break; sleep 0.02; done
    # The run time and the time figures move between the two reads.
    unclock() { sed -E 's/ of the run.s [0-9.]+[a-z]+ \(allocator [0-9.]+[a-z]+, mapping calls [0-9.]+[a-z]+\)/ (TIMES)/'; }
    run_mt "$M" info "$lpid" --kind peak; a="$rc|$(unclock <<<"$out")|$err"
    run_mt "$M" query "$lpid" info --kind peak; b="$rc|$(unclock <<<"$out")|$err"
    expect_eq "info PID and query PID info say the same" "$a" "$b"
    expect_match "info PID: read the process's report (its memory info, or that it has none)" \
        "^(0\|memtrail memory info: pid $lpid|1\|\|memtrail: process $lpid: no memory info)" "$a"
    touch "$T/live/go1" "$T/live/go2"
    for ((i = 0; i < 500; i++)); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.02; done
    kill -9 "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null
fi

# --- JSON against the schema --------------------------------------------------------------
"$M" info "$T/two.mtr" --json >"$T/two.json"
if python3 -c 'import jsonschema' 2>/dev/null; then
    for d in one two trim sliver; do
        expect_eq "info --json ($d) validates against info.schema.json" ok "$(python3 - "$MT_ROOT/docs/schema/info.schema.json" "$T/$d.json" <<'PYEOF'
import json, sys, jsonschema
try:
    jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])), cls=jsonschema.Draft202012Validator)
    print("ok")
except jsonschema.ValidationError as e:
    print(e.message[:200])
PYEOF
)"
    done
else
    echo "SKIP info --json schema: no python3 jsonschema"
fi

# --- errors -------------------------------------------------------------------------
run_mt "$M" info "$T/one.mtr" --kind huge
expect_eq "unknown kind: exit 2, one line and the hint" \
    "2 memtrail: --kind: unknown kind 'huge' (accepted: any, peak, grow, trim, limit, periodic)" "$rc $(head -1 "$T/err")"
for bad in 90,50 50,50 0,50 50,100 -5 50,,90 abc 99.1234567 50, ""; do
    run_mt "$M" info "$T/one.mtr" --percentiles "$bad"
    expect_match "bad percentiles '$bad': exit 2, says what is accepted" \
        "^2 memtrail: --percentiles: bad value '$bad' \(accepted: increasing percentiles between 0 and 100" "$rc $err"
done
run_mt "$M" query 1 summary --kind peak
expect_eq "query: --kind with another request is a usage error" \
    "2 memtrail: --kind and --percentiles apply to 'query PID info' only" "$rc $(head -1 "$T/err")"
sleep 0 & gone=$!; wait $gone
[ -e "$gone" ] && rm -f "$gone"
run_mt "$M" info "$gone"
expect_eq "a PID that is gone: exit 1, one line" "1 memtrail: no process with pid $gone" "$rc $err"
run_mt "$M" query "$gone" info
expect_eq "query: a PID that is gone: exit 1, one line" "1 memtrail: no process with pid $gone" "$rc $err"
printf 'hello\n' >"$T/notes.txt"
run_mt "$M" info "$T/notes.txt"
expect_eq "not a report: exit 1, one line" "1 memtrail: $T/notes.txt: not a memtrail report (bad header)" "$rc $err"
grep -vE '^(memory_time|info|span|span_name|span_memory|spans) ' "$T/one.mtr" >"$T/old.mtr"
run_mt "$M" info "$T/old.mtr"
expect_eq "a report without memory info (older agent): exit 1, one line" \
    "1 memtrail: $T/old.mtr: no memory info in this report (written by a memtrail agent older than 'memtrail info')" "$rc $err"
head -n 18 "$T/one.mtr" >"$T/cut.mtr" # cut after the second span line (500 + 400 requests)
run_mt "$M" info "$T/cut.mtr" --json
expect_eq "cut short: what it holds is printed (complete false, 900 requests), then the error, exit 1" \
    "1 False 900 memtrail: $T/cut.mtr: truncated after line 18 (no end marker)" \
    "$rc $(printf '%s' "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["complete"], int(j["spans"]["requests"]))') $err"
sed 's/^span id=1 lo_ns=50000 hi_ns=51000 count=400 affected=40/span id=1 lo_ns=50000 hi_ns=51000 count=400 affected=401/' \
    "$T/one.mtr" >"$T/corrupt.mtr"
run_mt "$M" info "$T/corrupt.mtr"
expect_match "a corrupt span line: exit 1, the line named" \
    "^1 memtrail: $T/corrupt.mtr: line 18: span line for id 1: expected 0 <= multiple <= affected <= count" "$rc $err"
run_mt "$M" info
expect_eq "no argument: exit 2" "2 memtrail: missing the report FILE or the PID of a process" "$rc $(head -1 "$T/err")"
run_mt "$M" info "$T/one.mtr" "$T/two.mtr"
expect_eq "two arguments: exit 2" "2" "$rc"

# --- span names are the program's bytes: shown escaped ---------------------------
# The agent writes a span name as mt_span_begin got it (only space, newline
# and backslash escaped in the report: \s \n \\), so a name may carry a
# terminal's escape sequences (an OSC that sets the window title, a screen
# clear), C1 CSI, bytes that are not UTF-8. The text shows each such byte as
# \xNN (a backslash as \\), keeps printable UTF-8 as it is, and sends no
# control byte to the terminal; the JSON stays valid, each name its bytes
# with JSON's escapes (U+FFFD for what is not UTF-8).
{
    head_lines
    printf 'span_name id=1 count=1 name=\033]0;pwned\007\033[2J\n'
    echo "span id=1 lo_ns=41000 hi_ns=42000 count=1 affected=0 multiple=0 events=0 duration_ns=41500 memory_ns=0 faults=0"
    printf 'span_name id=2 count=1 name=caf\303\251\\s\377\376\302\23331m\n'
    echo "span id=2 lo_ns=41000 hi_ns=42000 count=1 affected=0 multiple=0 events=0 duration_ns=41500 memory_ns=0 faults=0"
    printf 'span_name id=3 count=1 name=back\\\\slash\\nline\n'
    echo "span id=3 lo_ns=41000 hi_ns=42000 count=1 affected=0 multiple=0 events=0 duration_ns=41500 memory_ns=0 faults=0"
    printf 'spans names=3 unmatched_ends=0 dropped=0 faults_counted=0\nend\n'
} >"$T/hostile.mtr"
run_mt "$M" info "$T/hostile.mtr"
expect_eq "hostile span names: text exits 0" 0 "$rc"
expect_eq "hostile span names: each shown escaped, printable UTF-8 kept" \
    "  span '\\x1b]0;pwned\\x07\\x1b[2J':|  span 'café \\xff\\xfe\\xc2\\x9b31m':|  span 'back\\\\slash\\x0aline':" \
    "$(grep "^  span '" "$T/out" | paste -sd'|')"
expect_eq "hostile span names: the text is UTF-8 with no control byte but newlines (C0, DEL, C1)" "ok" \
    "$(python3 -c '
import re, sys
b = open(sys.argv[1], "rb").read()
try:
    t = b.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit(print("not UTF-8: %s" % e))
bad = re.findall("[\x00-\x09\x0b-\x1f\x7f-\x9f]", t)
print("ok" if not bad else "control characters %r" % bad)' "$T/out")"
run_mt "$M" info "$T/hostile.mtr" --json
expect_eq "hostile span names: JSON exits 0" 0 "$rc"
expect_eq "hostile span names: JSON parses, each name its bytes (U+FFFD for the bytes not UTF-8)" \
    "['\\x1b]0;pwned\\x07\\x1b[2J', 'café \\ufffd\\ufffd\\x9b31m', 'back\\\\slash\\nline']" \
    "$(printf '%s' "$out" | python3 -c 'import json,sys; print(ascii([n["name"] for n in json.load(sys.stdin)["spans"]["by_name"]]).replace("\\xe9", "é"))')"

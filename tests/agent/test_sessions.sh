# Event sessions in a live process: the public API (tests/agent/xe_api.c,
# run with the agent preloaded on the program itself), the agent's own
# sessions (memtrail run --session), the control socket's `sessions`
# request and `memtrail sessions PID`. Truth: `memtrail xe plan` and the
# seed's table for sizes, the kernel's /proc/self/maps and RssAnon for the
# memory, the producers' own tallies of mt_event_fire's returns, the
# event_file's bytes read back here in python (docs/events.md's raw
# format), and the program's own list of what it allocated.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$TBIN/xe_api" ] || { fail setup "build first: $MT, $AGENT, $TBIN/xe_api"; exit 1; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
unset XDG_RUNTIME_DIR MEMTRAIL_OPTIONS MEMTRAIL_SESSIONS

api() { MEMTRAIL_OPTIONS=${MEMTRAIL_OPTIONS:-output=$T/xe_api.%p.mtr} LD_PRELOAD=$AGENT "$TBIN/xe_api" "$@"; }
wait_file() { local i; for ((i = 0; i < 3000; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }
# py NAME SCRIPT ARGS...: a python check that prints "ok" or what is wrong.
py() {
    local name=$1 script=$2; shift 2
    local got; got=$(python3 -c "$script" "$@" 2>&1)
    expect_eq "$name" "ok" "$got"
}
CPUS=$(nproc)

# --- (a, b) sizes: the view = memtrail xe plan; the memory is really mapped ---
defs=()
for mode in none per_cpu per_node; do
    for mm in 192KB 637KB 640KB 1MB 4MB 5000KB; do defs+=("max_memory=$mm;memory_partition_mode=$mode"); done
done
defs+=("max_memory=1000KB;memory_partition_mode=per_cpu;strict_max_memory=on"
       "max_memory=4MB;memory_partition_mode=none;strict_max_memory=on"
       "max_memory=1MB;max_event_size=1MB" "max_memory=640KB;memory_partition_mode=per_cpu;max_event_size=3MB")
: >"$T/plan.jsonl"; : >"$T/view-defs"
i=0
for d in "${defs[@]}"; do
    i=$((i + 1))
    mm=${d#max_memory=}; mm=${mm%%;*}
    mode=none; [[ $d =~ memory_partition_mode=([a-z_]+) ]] && mode=${BASH_REMATCH[1]}
    args=(--max-memory "$mm" --mode "$mode")
    [[ $d == *strict_max_memory=on* ]] && args+=(--strict)
    [[ $d =~ max_event_size=([0-9A-Z]+) ]] && args+=(--max-event-size "${BASH_REMATCH[1]}")
    # One JSON line: the plan (its sizes under the seed'"'"'s column names, as the
    # sessions view has them), or why it rejects the size.
    "$MT" xe plan "${args[@]}" --json 2>"$T/plan.err" | python3 -c '
import json, sys
text = sys.stdin.read()
seed = {"regular_buffer_size_bytes": "regular_buffer_size", "total_buffer_size_bytes": "total_buffer_size",
        "large_buffer_size_bytes": "large_buffer_size", "memory_allocated_bytes": "memory_allocated"}
plan = {seed.get(k, k): v for k, v in json.loads(text).items()} if text else None
print(json.dumps(plan if text else {"rejected": open(sys.argv[1]).read().strip()}))' "$T/plan.err" >>"$T/plan.jsonl"
    echo "name=v$i;$d" >>"$T/view-defs"
done
mapfile -t vdefs <"$T/view-defs"
api view "${vdefs[@]}" >"$T/view.jsonl" 2>"$T/view.err"
expect_eq "api view: one line per definition" "0 ${#vdefs[@]}" "$? $(wc -l <"$T/view.jsonl")"
py "api view: each session's sizes = memtrail xe plan's, and what the plan rejects mt_session_create rejects (-EINVAL, same reason) (${#vdefs[@]} definitions: 3 modes, strict, max_event_size)" '
import json, sys
plans = [json.loads(l) for l in open(sys.argv[1])]
views = [json.loads(l) for l in open(sys.argv[2])]
keys = ["total_regular_buffers", "regular_buffer_size", "total_buffer_size", "total_large_buffers",
        "large_buffer_size", "memory_allocated"]
bad = []
for p, v in zip(plans, views):
    if "rejected" in p:
        if v.get("create") != -22 or "memtrail: " + v["why"] != p["rejected"]: bad.append((p, v))
    else:
        bad += [(v.get("name"), k, v.get(k), p[k]) for k in keys if v.get(k) != p[k]]
rejected = sum("rejected" in p for p in plans)
print("ok" if len(plans) == len(views) and not bad and 0 < rejected < len(plans) else bad or (len(plans), len(views)))
' "$T/plan.jsonl" "$T/view.jsonl"
py "api view: the buffers are mapped at the view's size (maps grow by memory_allocated + the session's few pages) and populated (RssAnon grows by the regular buffers)" '
import json, sys
bad = []
for l in open(sys.argv[1]):
    v = json.loads(l)
    if "create" in v: continue
    regular = v["total_regular_buffers"] * (v["regular_buffer_size"] + 205)
    extra = v["create_maps_delta"] - v["memory_allocated"]
    if not 0 < extra <= 65536: bad.append((v["name"], "maps", v["create_maps_delta"], v["memory_allocated"]))
    if not regular <= v["create_rss_delta"] <= regular + 65536: bad.append((v["name"], "rss", v["create_rss_delta"], regular))
    if v["named_buffers"] and v["named_buffers"] != v["memory_allocated"]: bad.append((v["name"], "named", v["named_buffers"]))
    if v["still_mapped_after_drop"] != 0 or v["drop"] != 0: bad.append((v["name"], "drop", v["still_mapped_after_drop"]))
print("ok" if not bad else bad)
' "$T/view.jsonl"
named=$(python3 -c 'import json,sys; print(sum(json.loads(l).get("named_buffers", 0) for l in open(sys.argv[1])))' "$T/view.jsonl")
echo "note: buffers named [anon:memtrail-xe-buffers] in /proc/self/maps: $([ "$named" -gt 0 ] && echo yes || echo "no (this kernel cannot name anonymous mappings; sizes checked by address-space difference)")"

# The live view, through the control socket and the CLI: the seed's rows
# (2 CPUs, PER_CPU, 637..642 KB), transcribed from its table.
D=$T/hold; mkdir -p "$D"
hdefs=(); for kb in 637 638 639 640 641 642; do hdefs+=("name=seed$kb;max_memory=${kb}KB;memory_partition_mode=per_cpu"); done
hdefs+=("name=ring;max_memory=1MB;target=ring_buffer(max_events_limit=4);target=histogram(source=size)")
MEMTRAIL_OPTIONS=output=$T/hold.%p.mtr LD_PRELOAD=$AGENT "$TBIN/xe_api" hold "$D" "${hdefs[@]}" >"$T/hold.out" 2>&1 &
pids+=($!)
if wait_file "$D/ready"; then
    pid=$(cat "$D/ready")
    run_mt "$MT_ASAN" sessions "$pid" --json
    echo "$out" >"$T/live.json"
    expect_eq "sessions --json (ASan CLI): exit 0, nothing on stderr" "0:" "$rc:$err"
    if [ "$CPUS" = 2 ]; then
        py "sessions --json: the seed's rows 637..642 KB per_cpu on 2 CPUs, live" '
import json, sys
seed = {637: (5, 130867, 654335), 638: (5, 130867, 654335), 639: (5, 130867, 654335),
        640: (5, 196403, 982015), 641: (5, 196403, 982015), 642: (5, 196403, 982015)}
s = {x["name"]: x for x in json.load(open(sys.argv[1]))["sessions"]}
got = {kb: (s["seed%d" % kb]["total_regular_buffers"], s["seed%d" % kb]["regular_buffer_size_bytes"],
            s["seed%d" % kb]["total_buffer_size_bytes"]) for kb in seed}
print("ok" if got == seed else got)
' "$T/live.json"
    else
        echo "note: $CPUS CPUs: the seed's 2-CPU rows are checked against memtrail xe plan only"
    fi
    for kb in 637 640; do "$MT" xe plan --max-memory ${kb}KB --mode per_cpu --json >"$T/plan$kb.json"; done
    py "sessions --json: live rows = memtrail xe plan for this machine ($CPUS CPUs)" '
import json, sys
s = {x["name"]: x for x in json.load(open(sys.argv[1]))["sessions"]}
bad = []
for kb, f in ((637, sys.argv[2]), (640, sys.argv[3])):
    p = json.load(open(f))
    for k in ("total_regular_buffers", "regular_buffer_size_bytes", "total_buffer_size_bytes", "memory_allocated_bytes"):
        pk = k  # the plan and the sessions view name a size the same way
        if s["seed%d" % kb][k] != p[pk]: bad.append((kb, k, s["seed%d" % kb][k], p[pk]))
print("ok" if not bad else bad)
' "$T/live.json" "$T/plan637.json" "$T/plan640.json"
    py "sessions --json: every seed column (under its JSON key), state started; targets by name only without --targets" '
import json, sys
j = json.load(open(sys.argv[1]))
cols = ["name", "pending_buffers", "total_regular_buffers", "regular_buffer_size_bytes", "total_large_buffers",
        "large_buffer_size_bytes", "total_buffer_size_bytes", "buffer_policy", "events_dropped",
        "buffers_dropped", "blocked_event_fire_time_ns", "largest_event_dropped_size_bytes", "create_time"]
ring = [x for x in j["sessions"] if x["name"] == "ring"][0]
miss = [(x["name"], c) for x in j["sessions"] for c in cols if c not in x]
ok = not miss and len(j["sessions"]) == 7 and all(x["state"] == "started" for x in j["sessions"]) \
     and ring["targets"] == [{"target": "ring_buffer"}, {"target": "histogram"}]
print("ok" if ok else (miss, ring["targets"]))
' "$T/live.json"
    run_mt "$MT_ASAN" sessions "$pid" --json --targets
    echo "$out" >"$T/live-t.json"
    expect_eq "sessions --json --targets: the targets' data" "ring_buffer 4 histogram size" \
        "$(json_get "$T/live-t.json" "' '.join('%s %s' % (t['target'], t.get('max_events_limit', t.get('source'))) for s in j['sessions'] if s['name'] == 'ring' for t in s['targets'])")"
    run_mt "$MT_ASAN" sessions "$pid"
    expect_eq "sessions (text): exit 0, header + 7 rows" "0 8" "$rc $(printf '%s\n' "$out" | wc -l)"
    expect_match "sessions (text): the seed's columns, in dm_xe_sessions order" \
        '^name +pending_buffers +total_regular_buffers +regular_buffer_size +total_large_buffers +large_buffer_size +total_buffer_size +buffer_policy_desc +dropped_event_count +dropped_buffer_count +blocked_event_fire_time +largest_event_dropped_size +create_time$' \
        "$(printf '%s\n' "$out" | head -1)"
    want=$(json_get "$T/plan640.json" "'seed640 +0 +%d +%d +0 +0 +%d +drop_event +0 +0 +0 +0 +[0-9]{4}-' % (j['total_regular_buffers'], j['regular_buffer_size_bytes'], j['total_buffer_size_bytes'])")
    expect_match "sessions (text): the 640 KB row, as memtrail xe plan sizes it" "^$want" \
        "$(printf '%s\n' "$out" | awk '$1 == "seed640"')"
    run_mt "$MT_ASAN" sessions "$pid" --targets
    contains "sessions --targets (text): each session's targets follow the table" "Session 'ring': 2 targets" "$out"
    touch "$D/go"
else
    fail "sessions: live program starts" "no $D/ready: $(cat "$T/hold.out")"
fi

# Errors, as memtrail query has them.
run_mt "$MT_ASAN" sessions 999999999
expect_eq "sessions: a pid that does not exist: exit 1, one line" "1 memtrail: no process with pid 999999999" "$rc $err"
sleep 30 & sp=$!; pids+=($sp)
run_mt "$MT_ASAN" sessions "$sp"
expect_match "sessions: a process without the agent: not tracked, exit 1" \
    "^1 memtrail: process $sp is not tracked by memtrail \(no control socket" "$rc $err"
kill $sp 2>/dev/null
run_mt "$MT_ASAN" sessions
expect_eq "sessions: no PID: usage, exit 2" "2" "$rc"
run_mt "$MT_ASAN" sessions 1 --bogus
expect_eq "sessions: unknown option: exit 2" "2" "$rc"
run_mt "$MT" sessions --help
expect_match "sessions --help: usage, exit 0" "^0 usage: memtrail sessions PID" "$rc $out"

# --- (c) loss accounting under a flood ----------------------------------------
# The session's event_file is a FIFO nobody reads until the flood is over:
# the dispatcher is stuck on it, so buffers fill and the retention mode
# decides. The FIFO's bytes (read afterwards) are the delivered events.
F=$T/flood; mkdir -p "$F"
RAW_CHECK='
import json, struct, sys
v = json.loads(open(sys.argv[1]).read())
b = open(sys.argv[2], "rb").read()
magic, (ver, rec) = b[:8], struct.unpack_from("<II", b, 8)
n = (len(b) - 16) // rec
keys = set(struct.unpack_from("<QQ", b, 16 + i * rec + 56) for i in range(n))
'
api flood "$F" allow_single_event_loss 2 100000 0 >"$T/single.json" 2>&1
py "flood, ALLOW_SINGLE_EVENT_LOSS: fired = delivered + dropped, exactly; each drop was the producer's -ENOBUFS" "$RAW_CHECK"'
ok = (v["fired"] == 200000 == v["collected"] + v["dropped_nobufs"] and v["dropped_nobufs"] > 0
      and v["dropped_event_count"] == v["dropped_nobufs"] and v["dropped_buffer_count"] == 0
      and v["events_delivered"] == v["collected"] == v["ring_total"] == n and len(keys) == n
      and magic == b"MTXERAW1" and (len(b) - 16) % rec == 0 and v["other"] == 0)
print("ok" if ok else (v, n, len(keys)))
' "$T/single.json" "$F/flood.raw"
api flood "$F" allow_multiple_event_loss 2 100000 0 >"$T/multi.json" 2>&1
py "flood, ALLOW_MULTIPLE_EVENT_LOSS: whole buffers dropped; fired = delivered + dropped, exactly" "$RAW_CHECK"'
ok = (v["fired"] == 200000 == v["collected"] and v["dropped_nobufs"] == 0 and v["dropped_buffer_count"] > 0
      and v["events_delivered"] + v["dropped_event_count"] == v["fired"]
      and v["events_delivered"] == v["ring_total"] == n == len(keys) and v["buffer_policy_desc"] == "drop_full_buffer")
print("ok" if ok else (v, n, len(keys)))
' "$T/multi.json" "$F/flood.raw"
api flood "$F" allow_single_event_loss 2 10 200000 >"$T/big.json" 2>&1
py "flood of events bigger than a buffer: each -EMSGSIZE, largest_event_dropped_size = its size in a buffer" '
import json, sys
v = json.load(open(sys.argv[1]))
size = (80 + 200000 + 7) // 8 * 8   # xe.h: 80-byte fixed part, 8-aligned
ok = v["dropped_size"] == 20 and v["collected"] == 0 and v["largest_event_dropped_size"] == size \
     and v["dropped_event_count"] == 20
print("ok" if ok else v)
' "$T/big.json"

# --- (d) NO_EVENT_LOSS: 4 threads x 200k events, each exactly once ------------
api noloss "$F" 4 200000 >"$T/noloss.json" 2>&1
py "NO_EVENT_LOSS, 4 threads x 200000: every (thread, seq) in the event_file exactly once; producers blocked" '
import json, struct, sys, collections
v = json.load(open(sys.argv[1]))
b = open(sys.argv[2], "rb").read()
ver, rec = struct.unpack_from("<II", b, 8)
n = (len(b) - 16) // rec
seen = collections.Counter(struct.unpack_from("<QQ", b, 16 + i * rec + 56) for i in range(n))
want = {(t, s) for t in range(4) for s in range(200000)}
ok = (b[:8] == b"MTXERAW1" and n == 800000 and set(seen) == want and max(seen.values()) == 1
      and v["collected"] == v["fired"] == v["events_delivered"] == 800000 and v["dropped_event_count"] == 0
      and v["blocked_event_fire_time_ns"] > 0)
print("ok" if ok else (n, len(set(seen) ^ want), max(seen.values() or [0]), v))
' "$T/noloss.json" "$F/noloss.raw"

# --- (e) dispatch latency ---------------------------------------------------------
api latency 1s >"$T/lat.json" 2>&1
py "max_dispatch_latency=1s: nothing at once, all 5 events within the latency plus slack (0.9 to 5 s)" '
import json, sys
v = json.load(open(sys.argv[1]))
print("ok" if v["at_once"] == 0 and v["seen"] == 5 and 0.9 <= v["seconds"] <= 5 else v)
' "$T/lat.json"
api latency infinite >"$T/inf.json" 2>&1
py "max_dispatch_latency=infinite: nothing after 1.5 s; flush delivers; stop delivers the rest" '
import json, sys
v = json.load(open(sys.argv[1]))
ok = v["at_once"] == 0 and v["after_1500ms"] == 0 and v["after_flush"] == 5 and v["before_stop"] == 5 and v["after_stop"] == 8
print("ok" if ok else v)
' "$T/inf.json"

# --- (f) predicates ------------------------------------------------------------------
# Each predicate beside the same condition in python (types: user 0, alloc 1,
# free 2, realloc 3, mmap 4, span_begin 6).
check_pred() { # where python-condition
    api predicate "$1" >"$T/pred.json" 2>&1
    py "predicate '$1': exactly the matching events are collected (rc 1) and reach the ring buffer, in order" '
import json, sys
v = json.load(open(sys.argv[1]))
cond = eval("lambda type, size, key: " + sys.argv[2])
want = [e["value"] for e in v["fired"] if cond(e["type"], e["size"], e["key"])]
rcs = all(e["rc"] == (1 if cond(e["type"], e["size"], e["key"]) else 0) for e in v["fired"])
print("ok" if want and rcs and v["ring"] == want and v["ring_total"] == len(want) else (want, v["ring"]))
' "$T/pred.json" "$2"
}
check_pred 'size >= 4096 && (type == alloc || type == mmap)' 'size >= 4096 and type in (1, 4)'
check_pred '!(key < 5) || size == 1' 'not key < 5 or size == 1'
check_pred 'type != user && size <= 4KB' 'type != 0 and size <= 4096'

# --- (g) the agent's own sessions: memtrail run --session -------------------------
G=$T/agent; mkdir -p "$G"
"$MT" run -o "$G/r.mtr" \
    --session 'name=big;where=size >= 4096;max_dispatch_latency=100ms;target=histogram(source=size_class);target=pair_matching' \
    --session 'name=parser;where=category == "parser";target=event_counter' \
    -- "$TBIN/xe_api" allocs "$G" >"$G/out" 2>&1 &
pids+=($!); runpid=$!
if wait_file "$G/ready"; then
    pid=$(cat "$G/ready")
    # The histogram is asynchronous: ask until it has every event (bounded).
    for ((k = 0; k < 100; k++)); do
        "$MT" sessions "$pid" --json --targets >"$G/s.json" 2>"$G/s.err"
        [ "$(json_get "$G/s.json" "[t['events'] for s in j['sessions'] if s['name'] == 'big' for t in s['targets'] if t['target'] == 'histogram'][0]")" = 17 ] && break
        sleep 0.1
    done
    py "run --session: the histogram by size class = the program's own list of allocs, frees, reallocs, mmaps >= 4096" '
import json, sys, collections
j = json.load(open(sys.argv[1]))
big = [s for s in j["sessions"] if s["name"] == "big"][0]
h = [t for t in big["targets"] if t["target"] == "histogram"][0]
want = collections.Counter(int(l.split()[1]).bit_length() for l in open(sys.argv[2]) if int(l.split()[1]) >= 4096)
got = {b["value"]: b["count"] for b in h["buckets"]}
print("ok" if got == dict(want) and sum(want.values()) == 17 else (got, dict(want)))
' "$G/s.json" "$G/allocs.txt"
    py "run --session: pair_matching's unmatched allocations = the program's leaks (address and size)" '
import json, sys
j = json.load(open(sys.argv[1]))
big = [s for s in j["sessions"] if s["name"] == "big"][0]
pm = [t for t in big["targets"] if t["target"] == "pair_matching"][0]
live = {}
for l in open(sys.argv[2]):
    f = l.split()
    size, addr = int(f[1]), int(f[2], 16)
    if f[0] == "alloc": live[addr] = size
    elif f[0] == "realloc": live.pop(int(f[4], 16), None); live[addr] = size
    elif f[0] == "free": live.pop(addr)
leaks = {(a, s) for a, s in live.items() if s >= 4096}
got = {(u["address"], u["size_bytes"]) for u in pm["unmatched"]}
print("ok" if got == leaks and len(leaks) == 4 and pm["unmatched_begins"] == 4 else (sorted(got), sorted(leaks)))
' "$G/s.json" "$G/allocs.txt"
    py "run --session: a category predicate (category == \"parser\") counts the tagged allocs and frees" '
import json, sys, collections
j = json.load(open(sys.argv[1]))
p = [s for s in j["sessions"] if s["name"] == "parser"][0]
c = p["targets"][0]["events_by_type"]
want = collections.Counter(l.split()[0] for l in open(sys.argv[2]) if l.split()[3] == "parser")
print("ok" if {k: v for k, v in c.items() if v} == dict(want) else (c, dict(want)))
' "$G/s.json" "$G/allocs.txt"
    touch "$G/go"
    wait $runpid
    expect_eq "run --session: the program exits 0; nothing on stderr but the report lines" "0 0" \
        "$? $(grep -vc '^memtrail: \(summary report\|read it with\)' "$G/out")"
else
    fail "run --session: program starts" "no $G/ready: $(cat "$G/out")"
fi

# Bad definitions: one line each, naming the session; the program runs, the
# good session too.
run_mt "$MT" run -o "$T/bad.mtr" --session 'name=small;max_memory=100KB' --session 'name=typo;max_memroy=4MB' \
    --session 'name=ok;target=event_counter' --session 'target=nosuch' \
    --session 'name=dup;max_memory=4MB;max_memory=8MB' -- "$TBIN/xe_api" stub
expect_eq "bad session definitions: the program runs (exit 0)" "0" "$rc"
expect_eq "bad session definitions: one line each" \
    "memtrail: session 'small': max_memory 100 KB gives 3 buffers of 34133 bytes; a buffer needs at least 64 KB (max_memory >= 192 KB); the program runs without it
memtrail: session 'typo': unknown session option 'max_memroy' (name, max_memory, memory_partition_mode, event_retention_mode, max_dispatch_latency, max_event_size, strict_max_memory, events, where, target, start, cpus, nodes); the program runs without it
memtrail: session 'session4': unknown target 'nosuch' (targets: ring_buffer, event_file, histogram, event_counter, pair_matching); the program runs without it
memtrail: session 'dup': session option 'max_memory' given twice; the program runs without it" \
    "$(printf '%s\n' "$err" | grep -v '^memtrail: \(summary report\|read it with\)')"
run_mt "$MT" run --session '' -- true
expect_eq "run --session '': usage error, exit 2" "2 memtrail: --session: empty session definition" "$rc $(echo "$err" | head -1)"
# MEMTRAIL_SESSIONS without memtrail run: one definition per line.
MEMTRAIL_OPTIONS="output=$T/env.mtr" MEMTRAIL_SESSIONS=$'name=one;target=event_counter\n\nname=two;max_memory=50KB' \
    LD_PRELOAD=$AGENT "$TBIN/xe_api" stub >"$T/env.out" 2>"$T/env.err"
expect_eq "MEMTRAIL_SESSIONS: a bad line is one error; the process runs" "0 1" "$? $(grep -c "^memtrail: session 'two': max_memory 50 KB" "$T/env.err")"
# An unnamed definition is called as the docs say (sessionN, N its place
# among the definitions: blank lines do not count), in its error line too.
MEMTRAIL_OPTIONS="output=$T/env2.mtr" MEMTRAIL_SESSIONS=$'target=event_counter\n\nmax_memory=50KB' \
    LD_PRELOAD=$AGENT "$TBIN/xe_api" stub >"$T/env2.out" 2>"$T/env2.err"
expect_eq "MEMTRAIL_SESSIONS: a bad unnamed definition is named session2 (its place), as docs/cli.md says" "0 1" \
    "$? $(grep -c "^memtrail: session 'session2': max_memory 50 KB gives 3 buffers" "$T/env2.err")"
# A target's error names it once (docs/events.md); a predicate cut short
# says what it expected, then where.
MEMTRAIL_OPTIONS="output=$T/tgt.mtr" MEMTRAIL_SESSIONS=$'name=a;target=ring_buffer(foo=1)\nname=b;target=histogram(slots=0)\nname=c;target=histogram(source=nope)\nname=d;target=pair_matching(begin_event=alloc,end_event=alloc)\nname=e;where=size' \
    LD_PRELOAD=$AGENT /bin/true 2>"$T/tgt.err"
expect_eq "MEMTRAIL_SESSIONS: target and predicate errors, each as the docs show" \
    "memtrail: session 'a': ring_buffer: unknown parameter 'foo' (accepted: max_events_limit); the program runs without it
memtrail: session 'b': histogram: slots='0' is not a number from 1 to 1048576; the program runs without it
memtrail: session 'c': histogram: unknown source field 'nope' (fields: type, category, size, address, old_address, site, key, value, tid, cpu, data_len, size_class); the program runs without it
memtrail: session 'd': pair_matching: begin_event and end_event are both alloc; the program runs without it
memtrail: session 'e': predicate: expected a comparison (== != < <= > >=) at column 5; the program runs without it" \
    "$(grep -v '^memtrail: \(summary report\|read it with\)' "$T/tgt.err")"
api view 'name=x;target=ring_buffer(foo=1)' 'name=y;target=pair_matching(begin_event=free,end_event=free)' 'name=z;where=size' >"$T/apierr.jsonl" 2>&1
py "mt_session_create: a target's error names it once, a cut-short predicate reads right" '
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [{"create": -22, "why": "ring_buffer: unknown parameter \x27foo\x27 (accepted: max_events_limit)"},
        {"create": -22, "why": "pair_matching: begin_event and end_event are both free"},
        {"create": -22, "why": "predicate: expected a comparison (== != < <= > >=) at column 5"}]
print("ok" if got == want else got)
' "$T/apierr.jsonl"

# --- (h) fork -------------------------------------------------------------------------
api fork >"$T/fork.jsonl" 2>&1
py "fork: the child's copy of the session fires and dispatches (its events and the parent's still-buffered ones); the parent's is its own" '
import json, sys
child, parent = [json.loads(l) for l in open(sys.argv[1])]
ok = (child["who"] == "child" and child["fired"] == 5 and child["stop"] == 0 and child["child_events"] == 5
      and child["parent_events"] == 3 and child["events_delivered"] == 8
      and parent["child_status"] == 0 and parent["before_events"] == 3 and parent["child_events"] == 0
      and parent["after_events"] == 4 and parent["ring_total"] == 7)
print("ok" if ok else (child, parent))
' "$T/fork.jsonl"

# The agent's own session in a fork child: it still collects (the child's
# blocks) and dispatches there; what the parent had delivered before the
# fork is in the child's copy of the ring buffer.
K=$T/forkagent; mkdir -p "$K"
"$MT" run -o "$K/r.%p.mtr" --session 'name=f;where=size == 12345 && type == alloc;max_dispatch_latency=100ms;target=ring_buffer(max_events_limit=100)' \
    -- "$TBIN/xe_api" forkagent "$K" >"$K/out" 2>&1 &
pids+=($!); runpid=$!
if wait_file "$K/child" && wait_file "$K/parent"; then
    ring_of() { # PID: "events_received tids" of session f's ring buffer, once it has $2 events (bounded wait)
        local k
        for ((k = 0; k < 100; k++)); do
            "$MT" sessions "$1" --json --targets >"$K/s.json" 2>"$K/s.err"
            [ "$(json_get "$K/s.json" "j['sessions'][0]['targets'][0]['events_received']")" -ge "$2" ] 2>/dev/null && break
            sleep 0.1
        done
        json_get "$K/s.json" "'%d %s' % (j['sessions'][0]['targets'][0]['events_received'], ' '.join(sorted(set(str(e['tid']) for e in j['sessions'][0]['targets'][0]['events']))))"
    }
    cpid=$(cat "$K/child"); ppid=$(cat "$K/parent")
    tids=$(printf '%s\n' "$ppid" "$cpid" | LC_ALL=C sort | paste -sd' ')
    expect_eq "fork, agent session: the child's ring = the parent's pre-fork block + its own 3 (tids of both)" "4 $tids" \
        "$(ring_of "$cpid" 4)"
    expect_eq "fork, agent session: the parent's ring has only its own block" "1 $ppid" "$(ring_of "$ppid" 1)"
    touch "$K/go"
    wait $runpid
    expect_eq "fork, agent session: the program exits 0" "0" "$?"
else
    fail "fork, agent session: program starts" "$(cat "$K/out")"
fi

# An agent session writing an event_file, forked before its first dispatch
# (the default latency, 30 s): the child writes FILE.PID with its own
# events only, the parent FILE with the 4242-byte blocks buffered at the
# fork and its own (tests/agent/forkev.c: 1000 each). Before, both made
# FILE and the child's renamed over the parent's, or the other way: one
# process's 1000 events were in no file, and both views said written.
K=$T/forkfile; mkdir -p "$K"
"$MT" run -o "$K/r.%p.mtr" --session "name=ff;where=type == alloc && (size == 4242 || size == 1111 || size == 2222);target=event_file(filename=$K/ev.xel)" \
    -- "$TBIN/forkev" >"$K/out" 2>"$K/err"
frc=$?
cpid=$(awk '/^child/ {print $2}' "$K/out")
py "fork, agent session with an event_file: the parent's file has its 1111s and the 4242s, the child's (ev.xel.$cpid) its 2222s, each once" '
import struct, sys, os
def sizes(path):
    out = {}
    if not os.path.exists(path):
        return "missing"
    d = open(path, "rb").read()
    if d[:8] != b"MTXERAW1" or (len(d) - 16) % 72:
        return "bad file"
    for i in range(16, len(d), 72):
        size = struct.unpack_from("<Q", d, i + 24)[0]
        out[size] = out.get(size, 0) + 1
    return out
k, cpid, rc = sys.argv[1], sys.argv[2], sys.argv[3]
files = sorted(f for f in os.listdir(k) if f.startswith("ev.xel"))
want = ["ev.xel", "ev.xel." + cpid]
got = (rc, files, sizes(os.path.join(k, "ev.xel")), sizes(os.path.join(k, "ev.xel." + cpid)))
print("ok" if got == ("0", want, {4242: 1000, 1111: 1000}, {2222: 1000}) else got)
' "$K" "$cpid" "$frc"

# --- the stub: without the agent every call says so --------------------------------
"$TBIN/xe_api" stub >"$T/stub.json" 2>&1
py "stub (no agent): create -ENOSYS with a reason and a NULL session, the rest -ENOSYS, reads 0" '
import json, sys
v = json.load(open(sys.argv[1]))
ok = (v["create"] == -38 and v["session_null"] == 1 and "agent" in v["why"] and v["ring_read"] == 0 and v["total"] == 0
      and all(v[k] == -38 for k in ("start", "fire", "info", "target_json", "stop", "flush", "drop")))
print("ok" if ok else v)
' "$T/stub.json"
MEMTRAIL_OPTIONS=output=$T/stub.%p.mtr LD_PRELOAD=$AGENT "$TBIN/xe_api" stub >"$T/stub-agent.json" 2>&1
py "the same calls under the agent: create 0, start 0, fire 1 (collected), no ring buffer -ENOENT, flush of a stopped session -EINVAL" '
import json, sys
v = json.load(open(sys.argv[1]))
want = {"create": 0, "session_null": 0, "start": 0, "fire": 1, "info": 0, "target_json": -2, "ring_read": -2,
        "stop": 0, "flush": -22, "drop": 0}
print("ok" if all(v[k] == x for k, x in want.items()) else v)
' "$T/stub-agent.json"

# --- _Fork runs no fork handlers: the child's sessions still get a dispatcher --------
run_mt timeout 30 "$MT" run -o "$T/ufork.%p.mtr" --session "name=s1; event_retention_mode=no_event_loss; target=ring_buffer" -- "$TBIN/xe_ufork"
expect_eq "_Fork child under NO_EVENT_LOSS: fills its buffers many times over and exits (no hang)" "0 child exited" "$rc $(printf '%s' "$out" | tail -1)"

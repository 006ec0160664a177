# The event sessions' JSON against its schema (docs/schema/sessions.schema.json,
# checked with python3-jsonschema): `memtrail sessions PID --json [--targets]`
# on a real program with a target of each kind, and mt_session_target_json()
# for each kind. Truth: what the programs fired (tests/agent/xe_api.c: its
# list of allocations, its own sequence of events), the event file's size on
# disk, and documents broken on purpose, which the schema must reject. A fake
# agent (python on a control socket) checks that the CLI passes 64-bit
# numbers through exactly and refuses answers it cannot read.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -x "$MT_ASAN" ] && [ -f "$AGENT" ] && [ -x "$TBIN/xe_api" ] ||
    { fail setup "build first: $MT, $MT_ASAN, $AGENT, $TBIN/xe_api"; exit 1; }
SCHEMA=$MT_ROOT/docs/schema/sessions.schema.json

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
unset XDG_RUNTIME_DIR MEMTRAIL_OPTIONS MEMTRAIL_SESSIONS

wait_file() { local i; for ((i = 0; i < 3000; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }
# py NAME SCRIPT ARGS...: a python check that prints "ok" or what is wrong;
# `valid(doc, part)` is there: None when doc validates against the schema
# (part: a $defs entry, or the whole document when None), else the error.
py() {
    local name=$1 script=$2; shift 2
    local got; got=$(python3 -c "
import json, sys, collections, jsonschema
SCHEMA = json.load(open('$SCHEMA'))
def valid(doc, part=None):
    s = dict(SCHEMA) if part is None else dict(SCHEMA['\$defs'][part], **{'\$defs': SCHEMA['\$defs']})
    try:
        jsonschema.Draft202012Validator(s).validate(doc)
        return None
    except jsonschema.ValidationError as e:
        return '%s at %s' % (e.message[:200], list(e.absolute_path))
$script" "$@" 2>&1)
    expect_eq "$name" "ok" "$got"
}

py "the schema is a valid draft 2020-12 JSON Schema" '
jsonschema.Draft202012Validator.check_schema(SCHEMA)
print("ok")'

# --- mt_session_target_json: one document per target kind ------------------------
N=100
MEMTRAIL_OPTIONS=output=$T/targets.%p.mtr LD_PRELOAD=$AGENT "$TBIN/xe_api" targets "$T" $N >"$T/targets.jsonl" 2>"$T/targets.err"
expect_eq "xe_api targets: exit 0, 5 documents and the ledger" "0 6" "$? $(wc -l <"$T/targets.jsonl")"
# The program's own sequence: user (key i % 4, size i + 1, value i), span_begin
# (key 1000 + i), span_end (same key) for even i.
SEQ='
seq = []
for i in range(int(sys.argv[2])):
    seq.append(("user", i % 4, i, i + 1))
    seq.append(("span_begin", 1000 + i, i, 0))
    if i % 2 == 0: seq.append(("span_end", 1000 + i, i, 0))
docs = [json.loads(l) for l in open(sys.argv[1])]
ledger = docs.pop()
by = {d.get("target"): d for d in docs}
'
py "mt_session_target_json: each of the 5 kinds validates as a target document (schema key first)" "$SEQ"'
bad = [(d.get("target"), valid(d, "target_document")) for d in docs if valid(d, "target_document")]
bad += [d.get("target") for d in docs if list(d)[:2] != ["schema", "target"]]
print("ok" if not bad and sorted(by) == ["event_counter", "event_file", "histogram", "pair_matching", "ring_buffer"] else bad)
' "$T/targets.jsonl" $N
py "mt_session_target_json: every event collected; a small buffer -ENOSPC (empty), an unknown target -ENOENT" "$SEQ"'
ok = ledger == {"collected": len(seq), "small": -28, "small_text": "", "nosuch": -2}
print("ok" if ok else ledger)
' "$T/targets.jsonl" $N
py "ring_buffer: events_received = events fired; it holds the last 10, in order (type, key, value, size_bytes)" "$SEQ"'
r = by["ring_buffer"]
got = [(e["type"], e["key"], e["value"], e["size_bytes"]) for e in r["events"]]
print("ok" if r["events_received"] == len(seq) and r["max_events_limit"] == 10 and got == seq[-10:] else (r["events_received"], got))
' "$T/targets.jsonl" $N
py "histogram(source=key): one bucket per key with its count, no overflow" "$SEQ"'
h = by["histogram"]
want = collections.Counter(k for _, k, _, _ in seq)
got = {b["value"]: b["count"] for b in h["buckets"]}
print("ok" if got == dict(want) and h["events"] == len(seq) and h["overflow_events"] == 0 and h["source"] == "key" else (got, h["events"]))
' "$T/targets.jsonl" $N
py "event_counter: events and events_by_type = what was fired" "$SEQ"'
c = by["event_counter"]
want = collections.Counter(t for t, _, _, _ in seq)
print("ok" if c["events"] == len(seq) and c["events_by_type"] == dict(want) else c)
' "$T/targets.jsonl" $N
py "pair_matching: begins, ends, matches, and the unmatched begins are the odd spans (oldest first)" "$SEQ"'
p = by["pair_matching"]
odd = [1000 + i for i in range(int(sys.argv[2])) if i % 2]
ok = (p["begins"] == int(sys.argv[2]) and p["ends"] == p["matches"] == len(seq) - 2 * int(sys.argv[2])
      and p["unmatched_begins"] == len(odd) and p["unmatched_ends"] == 0 and p["orphans_dropped"] == 0
      and [e["key"] for e in p["unmatched"]] == odd and all(e["type"] == "span_begin" for e in p["unmatched"]))
print("ok" if ok else p)
' "$T/targets.jsonl" $N
py "event_file: events_written = events fired; written_bytes = the file on disk" "$SEQ"'
import os
f = by["event_file"]
ok = (f["events_written"] == len(seq) and f["events_dropped"] == 0 and f["write_errors"] == 0 and f["last_error"] is None
      and f["files"] == 1 and f["written_bytes"] == os.path.getsize(f["current_file"]) > 0 and f["encoding"] == "raw")
print("ok" if ok else f)
' "$T/targets.jsonl" $N

# --- memtrail sessions PID --json, on the agent's own sessions -------------------
G=$T/live; mkdir -p "$G"
"$MT" run -o "$G/r.mtr" \
    --session "name=all;where=size >= 4096;max_dispatch_latency=100ms;target=ring_buffer(max_events_limit=100);target=histogram(source=size_class);target=event_counter;target=pair_matching;target=event_file(filename=$G/all.xel)" \
    --session 'name=types;where=size >= 4096;memory_partition_mode=per_cpu;event_retention_mode=no_event_loss;max_dispatch_latency=100ms;target=histogram(source=type)' \
    --session 'name=cats;where=size >= 4096;max_dispatch_latency=100ms;target=histogram(source=category)' \
    -- "$TBIN/xe_api" allocs "$G" >"$G/out" 2>&1 &
pids+=($!); runpid=$!
if wait_file "$G/ready"; then
    pid=$(cat "$G/ready")
    # The targets are asynchronous: ask until each has every event (bounded).
    for ((k = 0; k < 100; k++)); do
        "$MT" sessions "$pid" --json --targets >"$G/t.json" 2>"$G/t.err"
        [ "$(json_get "$G/t.json" "sorted(t.get('events_received', t.get('events_written', t.get('events'))) for s in j['sessions'] for t in s['targets'] if t['target'] != 'pair_matching') == [17] * 6")" = True ] && break
        sleep 0.1
    done
    run_mt "$MT_ASAN" sessions "$pid" --json --targets
    echo "$out" >"$G/t.json"
    expect_eq "sessions --json --targets (ASan CLI): exit 0, nothing on stderr" "0:" "$rc:$err"
    run_mt "$MT_ASAN" sessions "$pid" --json
    echo "$out" >"$G/n.json"
    expect_eq "sessions --json (ASan CLI): exit 0, nothing on stderr" "0:" "$rc:$err"
    # The program's list: the events a session with size >= 4096 sees.
    LIST='
j = json.load(open(sys.argv[1]))
s = {x["name"]: x for x in j["sessions"]}
all_t = {t["target"]: t for t in s["all"]["targets"]}
lines = [l.split() for l in open(sys.argv[2]) if int(l.split()[1]) >= 4096]
'
    py "sessions --json --targets: the document validates (5 target kinds with data; histograms by size class, type, category)" "$LIST"'
err = valid(j)
print("ok" if err is None and sorted(all_t) == ["event_counter", "event_file", "histogram", "pair_matching", "ring_buffer"] else err)
' "$G/t.json" "$G/allocs.txt"
    py "sessions --json: the document validates; targets by name only" '
j = json.load(open(sys.argv[1]))
names = [[t for t in s["targets"]] for s in j["sessions"]]
want = [[{"target": t} for t in ("ring_buffer", "histogram", "event_counter", "pair_matching", "event_file")],
        [{"target": "histogram"}], [{"target": "histogram"}]]
print("ok" if valid(j) is None and list(j)[0] == "schema" and names == want else (valid(j), names))
' "$G/n.json"
    py "sessions --json: the session rows say what the definitions asked, lower case; nothing dropped" "$LIST"'
a, n = s["all"], s["types"]
ok = (a["state"] == n["state"] == "started" and a["buffer_policy"] == "drop_event"
      and a["event_retention_mode"] == "allow_single_event_loss" and n["event_retention_mode"] == "no_event_loss"
      and n["buffer_policy"] == "do_not_drop_event" and a["memory_partition_mode"] == "none"
      and n["memory_partition_mode"] == "per_cpu" and n["partitions"] == int(sys.argv[3])
      and a["max_dispatch_latency_ns"] == 100000000 and a["predicate"] == "size >= 4096"
      and a["events_dropped"] == a["buffers_dropped"] == 0 and a["events_delivered"] == len(lines) == 17
      and a["total_buffer_size_bytes"] == a["total_regular_buffers"] * a["regular_buffer_size_bytes"]
      and a["max_memory_bytes"] == 4 << 20)
print("ok" if ok else (a, n))
' "$G/t.json" "$G/allocs.txt" "$(nproc)"
    py "ring_buffer: its events are the program's allocations, frees, reallocs and mappings >= 4096 (type, size_bytes, address)" "$LIST"'
r = all_t["ring_buffer"]
got = collections.Counter((e["type"], e["size_bytes"], e["address"]) for e in r["events"])
want = collections.Counter((l[0], int(l[1]), int(l[2], 16)) for l in lines)
print("ok" if got == want and r["events_received"] == 17 else (sorted(got.items()), sorted(want.items())))
' "$G/t.json" "$G/allocs.txt"
    py "event_counter and histogram(source=type): the program's events by type" "$LIST"'
want = dict(collections.Counter(l[0] for l in lines))
c = all_t["event_counter"]
h = s["types"]["targets"][0]
got = {b["name"]: b["count"] for b in h["buckets"]}
print("ok" if c["events"] == 17 and c["events_by_type"] == want == got else (c, got, want))
' "$G/t.json" "$G/allocs.txt"
    py "histogram(source=category): the parser bucket = the program's parser lines; size_class buckets sum to 17 with their byte bounds" "$LIST"'
h = s["cats"]["targets"][0]
parser = sum(b["count"] for b in h["buckets"] if b["name"] == "parser")
sc = all_t["histogram"]
bounds = all(b["min_size_bytes"] == 1 << (b["value"] - 1) and b["max_size_bytes"] == (1 << b["value"]) - 1 for b in sc["buckets"])
print("ok" if parser == sum(l[3] == "parser" for l in lines) > 0 and sum(b["count"] for b in sc["buckets"]) == 17 and bounds
      else (h["buckets"], sc["buckets"]))
' "$G/t.json" "$G/allocs.txt"
    py "pair_matching: unmatched_begins and unmatched_bytes = the program's leaks" "$LIST"'
live = {}
for f in lines:
    size, addr = int(f[1]), int(f[2], 16)
    if f[0] == "alloc": live[addr] = size
    elif f[0] == "realloc": live.pop(int(f[4], 16), None); live[addr] = size
    elif f[0] == "free": live.pop(addr)
p = all_t["pair_matching"]
got = {(u["address"], u["size_bytes"]) for u in p["unmatched"]}
ok = got == set(live.items()) and p["unmatched_begins"] == len(live) == 4 and p["unmatched_bytes"] == sum(live.values())
print("ok" if ok else (p, live))
' "$G/t.json" "$G/allocs.txt"
    py "event_file: events_written = 17; written_bytes = the file on disk" "$LIST"'
import os
f = all_t["event_file"]
print("ok" if f["events_written"] == 17 and f["written_bytes"] == os.path.getsize(f["current_file"]) else f)
' "$G/t.json" "$G/allocs.txt"
    # The text table: dm_xe_sessions' headers over the JSON keys the docs map them to.
    run_mt "$MT_ASAN" sessions "$pid"
    printf '%s\n' "$out" >"$G/table.txt"
    py "sessions (text): each dm_xe_sessions column holds its JSON key's value (blocked_event_fire_time in ms)" '
j = json.load(open(sys.argv[1]))
rows = [l.split() for l in open(sys.argv[2])]
cols = {"name": "name", "pending_buffers": "pending_buffers", "total_regular_buffers": "total_regular_buffers",
        "regular_buffer_size": "regular_buffer_size_bytes", "total_large_buffers": "total_large_buffers",
        "large_buffer_size": "large_buffer_size_bytes", "total_buffer_size": "total_buffer_size_bytes",
        "buffer_policy_desc": "buffer_policy", "dropped_event_count": "events_dropped",
        "dropped_buffer_count": "buffers_dropped", "blocked_event_fire_time": "blocked_event_fire_time_ns",
        "largest_event_dropped_size": "largest_event_dropped_size_bytes", "create_time": "create_time"}
bad = [] if rows[0] == list(cols) else ["header", rows[0]]
for r in rows[1:]:
    s = [x for x in j["sessions"] if x["name"] == r[0]][0]
    want = [str(s[k] // 1000000 if k.endswith("_ns") else s[k]) for k in cols.values()]
    if r != want: bad.append((r, want))
print("ok" if not bad and len(rows) == 4 else bad)
' "$G/n.json" "$G/table.txt"

    # Documents broken on purpose: the schema must reject each.
    py "the schema rejects broken documents (a key missing, an old key, an upper-case enum, a negative count, an event without size_bytes, an unknown target key, a wrong schema)" '
import copy
j = json.load(open(sys.argv[1]))
def broken(f):
    d = copy.deepcopy(j); f(d); return d
sess = lambda d: [x for x in d["sessions"] if x["name"] == "all"][0]
tgt = lambda d, k: [t for t in sess(d)["targets"] if t["target"] == k][0]
cases = {
    "no schema": broken(lambda d: d.pop("schema")),
    "old key": broken(lambda d: sess(d).update(regular_buffer_size=sess(d).pop("regular_buffer_size_bytes"))),
    "NONE": broken(lambda d: sess(d).update(memory_partition_mode="NONE")),
    "negative": broken(lambda d: sess(d).update(events_dropped=-1)),
    "event size": broken(lambda d: tgt(d, "ring_buffer")["events"][0].pop("size_bytes")),
    "extra key": broken(lambda d: tgt(d, "event_counter").update(total=17)),
    "schema 0": broken(lambda d: d.update(schema="memtrail/0")),
}
accepted = [k for k, d in cases.items() if valid(d) is None]
print("ok" if valid(j) is None and not accepted else ("accepted", accepted))
' "$G/t.json"
    touch "$G/go"
    wait $runpid
    expect_eq "run --session: the program exits 0" "0" "$?"
else
    fail "sessions --json: live program starts" "no $G/ready: $(cat "$G/out")"
fi

# --- the CLI against a fake agent: exact numbers, answers it cannot read ---------
X=$T/xdg; mkdir -p "$X"; chmod 700 "$X"
printf '' >"$T/answer"
XDG_RUNTIME_DIR=$X python3 -c '
import os, socket, sys
d = sys.argv[1] + "/memtrail"; os.makedirs(d, mode=0o700, exist_ok=True); os.umask(0o077)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind("%s/%d.sock" % (d, os.getpid())); s.listen(8)
open(sys.argv[2] + ".ready", "w").write(str(os.getpid()))
while True:
    c, _ = s.accept()
    c.recv(64)
    c.sendall(open(sys.argv[2], "rb").read())
    c.close()
' "$X" "$T/answer" &
fake=$!; pids+=($fake)
if wait_file "$T/answer.ready"; then
    fpid=$(cat "$T/answer.ready")
    # A valid document with the largest 64-bit values where the agent writes them.
    python3 -c '
import json, sys
big = 18446744073709551615
ev = {"type": "alloc", "category": 65535, "category_name": None, "tid": 1, "cpu": 0, "time_ns": big, "size_bytes": big,
      "address": big, "old_address": 0, "site": 0, "key": big - 1, "value": 9007199254740993, "data_bytes": 0}
s = {"name": "fake", "pending_buffers": 0, "total_regular_buffers": 3, "regular_buffer_size_bytes": 65331,
     "total_large_buffers": 0, "large_buffer_size_bytes": 0, "total_buffer_size_bytes": 195993,
     "buffer_policy": "drop_event", "events_dropped": big, "buffers_dropped": 0, "blocked_event_fire_time_ns": 123456789,
     "largest_event_dropped_size_bytes": 0, "create_time": "2026-01-01T00:00:00.000Z", "create_time_ns": 1767225600000000000,
     "state": "started", "event_retention_mode": "allow_single_event_loss", "events_delivered": big,
     "max_memory_bytes": 196608, "memory_allocated_bytes": 196608, "memory_partition_mode": "none", "partitions": 1,
     "strict_max_memory": False, "max_dispatch_latency_ns": None, "predicate": "",
     "targets": [{"target": "ring_buffer", "max_events_limit": 1, "events_received": big, "events": [ev]}]}
open(sys.argv[1], "w").write(json.dumps({"schema": "memtrail/1", "sessions": [s]}, separators=(",", ":")) + "\n")
' "$T/answer"
    cp "$T/answer" "$T/answer.json"
    run_mt "$MT_ASAN" sessions "$fpid" --json --targets
    echo "$out" >"$T/fake.json"
    py "fake agent: --json --targets gives back the same document, 64-bit numbers exact (and it validates)" '
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print("ok" if a == b and valid(b) is None and b["sessions"][0]["targets"][0]["events"][0]["value"] == 9007199254740993 else (a, b))
' "$T/answer.json" "$T/fake.json"
    run_mt "$MT_ASAN" sessions "$fpid"
    expect_match "fake agent: the table shows 18446744073709551615 dropped events and 123 ms blocked, exactly" \
        '^fake +0 +3 +65331 +0 +0 +195993 +drop_event +18446744073709551615 +0 +123 +0 +2026-01-01T00:00:00.000Z$' \
        "$(printf '%s\n' "$out" | sed -n 2p)"
    run_mt "$MT_ASAN" sessions "$fpid" --targets
    contains "fake agent: --targets (text) shows the event's address exactly" "18446744073709551615" "$out"
    head -c 100 "$T/answer.json" >"$T/answer"
    run_mt "$MT_ASAN" sessions "$fpid"
    expect_match "fake agent: a document cut short: exit 1, one line" \
        "^1 memtrail: process $fpid answered with bad JSON \(cut short at byte 100\)" "$rc $err"
    { cat "$T/answer.json"; echo '{}'; } >"$T/answer"
    run_mt "$MT_ASAN" sessions "$fpid" --json
    expect_match "fake agent: text after the document: exit 1, nothing on stdout" \
        "^1 memtrail: process $fpid answered with bad JSON \(text after the document at byte [0-9]+\):$" "$rc $err:$out"
    sed 's#"memtrail/1"#"memtrail/0"#' "$T/answer.json" >"$T/answer"
    run_mt "$MT_ASAN" sessions "$fpid"
    expect_eq "fake agent: another schema: exit 1, one line naming it" \
        "1 memtrail: process $fpid answered with schema \"memtrail/0\", this memtrail reads \"memtrail/1\"; run the memtrail that started it" \
        "$rc $err"
    echo '{"schema":"memtrail/1","sessions":{}}' >"$T/answer"
    run_mt "$MT_ASAN" sessions "$fpid"
    expect_eq "fake agent: no sessions array: exit 1" "1 memtrail: process $fpid answered without a \"sessions\" array" "$rc $err"
else
    fail "fake agent starts" "no $T/answer.ready"
fi
kill $fake 2>/dev/null; wait $fake 2>/dev/null || true

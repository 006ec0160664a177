#!/usr/bin/env bash
# Every --json output of every command against its JSON Schema
# (docs/schema/*.schema.json, draft 2020-12, checked with python3's
# jsonschema): a real program (tests/agent/exact.c, which keeps its own
# ledger) run under the agent in summary, detail and trace modes, and the
# documents of report, report DIR, report detail, diff (summary and detail
# reports), analyze (caveated traces too), export --format json, query PID summary/baseline/
# detail/diff on a running program (tests/agent/live.c), xe plan and info. The
# figures that have an independent truth are compared with it (the
# programs' ledgers); every document starts with "schema": "memtrail/1";
# the schemas are those scripts/json_schemas.py writes; and wrong
# documents (a key missing, a key added, an old key name, an upper-case
# enum, a negative count, another schema version) are rejected, so a
# schema that accepts anything fails here.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }
SCHEMAS=$MT_ROOT/docs/schema

# A python3 with jsonschema (Debian's python3-jsonschema is for /usr/bin/python3).
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import jsonschema; jsonschema.Draft202012Validator' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    echo "SKIP json-schema: no python3 with jsonschema (apt-get install python3-jsonschema)"
    exit 0
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
wait_file() { local i; for ((i = 0; i < 3000; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }
wait_gone() { local i; for ((i = 0; i < 3000; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.02; done; return 1; }
# ledger_field FILE CATEGORY N: field N of the ledger line (1 live bytes, 2 live count, 3 peak,
# 4 allocs, 5 frees, 6 reallocs).
ledger_field() { awk -v c="$2" -v n="$3" '$1 == c { print $(n + 1) }' "$1"; }

# --- the schemas themselves ------------------------------------------------------
"$PY" "$MT_ROOT/scripts/json_schemas.py" "$T/schema"
# (sessions.schema.json, the agent's session engine's, is written by hand:
# tests/agent/test_sessions_json.sh checks it.)
mkdir -p "$T/generated"
for f in "$SCHEMAS"/*.schema.json; do
    [ "$(basename "$f")" = sessions.schema.json ] || cp "$f" "$T/generated/"
done
check "schemas: docs/schema is what scripts/json_schemas.py writes" diff -r "$T/schema" "$T/generated"
expect_eq "schemas: each is a valid draft 2020-12 schema" ok "$("$PY" - "$SCHEMAS"/*.schema.json <<'PYEOF' 2>&1
import json, sys, jsonschema
for f in sys.argv[1:]:
    jsonschema.Draft202012Validator.check_schema(json.load(open(f)))
print("ok")
PYEOF
)"

# want SCHEMA FILE LABEL: validated at the end, in one python3.
: >"$T/want"
want() { echo "$1 $2 $3" >>"$T/want"; }
# run_json SCHEMA LABEL CMD...: runs CMD (exit status EXPECT_RC, default 0), keeps its
# stdout for validation.
n=0
run_json() {
    local schema=$1 label=$2; shift 2
    n=$((n + 1))
    "$@" >"$T/doc$n.json" 2>"$T/doc$n.err"
    local rc=$? want_rc=${EXPECT_RC:-0}
    expect_eq "$label: exits $want_rc" "$want_rc" "$rc$( [ "$rc" = "$want_rc" ] || echo " ($(head -c 300 "$T/doc$n.err"))")"
    want "$schema" "$T/doc$n.json" "$label"
    last=$T/doc$n.json
}

# --- a program with known allocations, in the three modes --------------------------
EXACT=$TBIN/exact
for mode in summary detail trace; do
    ext=mtr; [ $mode = trace ] && ext=mtt
    MEMTRAIL_OPTIONS="mode=$mode:output=$T/exact.$ext.$mode" LD_PRELOAD=$AGENT "$EXACT" "$T/ledger.$mode" \
        >/dev/null 2>"$T/exact.$mode.err"
    check "exact under the agent, $mode mode: ran and wrote its file" test -s "$T/exact.$ext.$mode"
done
mv "$T/exact.mtr.summary" "$T/sum.mtr"; mv "$T/exact.mtr.detail" "$T/det.mtr"; mv "$T/exact.mtt.trace" "$T/tr.mtt"
L=$T/ledger.summary

run_json report "report --json (summary mode)" "$MT" report "$T/sum.mtr" --json
expect_eq "report --json: category exact = the program's ledger" \
    "$(ledger_field "$L" exact 1) $(ledger_field "$L" exact 2) $(ledger_field "$L" exact 3) $(ledger_field "$L" exact 4) $(ledger_field "$L" exact 5) $(ledger_field "$L" exact 6)" \
    "$(json_get "$last" "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'exact' for k in ('live_bytes', 'live_count', 'peak_bytes', 'allocs', 'frees', 'reallocs'))")"
expect_eq "report --json: pid and mode as the file says" "$(awk '$1 == "pid" {print $2}' "$T/sum.mtr") summary" \
    "$(json_get "$last" "'%s %s' % (j['pid'], j['mode'])")"
expect_eq "report --json: resident_bytes of the categories <= rss_bytes" True \
    "$(json_get "$last" "sum(c['resident_bytes'] for c in j['categories']) <= j['process']['rss_bytes']")"

# A report of an older agent (no VM fields, no process line) and one cut short: the
# same document, null where the file has nothing to say.
sed -e 's/ reserved=.*$//' -e '/^process /d' "$T/sum.mtr" >"$T/old.mtr"
run_json report "report --json (an older report file)" "$MT" report "$T/old.mtr" --json
expect_eq "report --json (older file): heap categories reserve what they hold; resident, process null" \
    "$(ledger_field "$L" exact 1) None None" \
    "$(json_get "$last" "' '.join(str(x) for c in j['categories'] if c['name'] == 'exact' for x in (c['reserved_bytes'], c['resident_bytes'], j['process']))")"
head -n 3 "$T/sum.mtr" >"$T/cut.mtr"
EXPECT_RC=1 run_json report "report --json (a file cut short)" "$MT" report "$T/cut.mtr" --json
expect_eq "report --json (cut short): complete false, no categories, total null" "False 0 None" \
    "$(json_get "$last" "'%s %d %s' % (j['complete'], len(j['categories']), j['total'])")"

run_json report-tree "report FILE FILE --json (a process tree)" "$MT" report "$T/sum.mtr" "$T/det.mtr" --json
expect_eq "report tree --json: two processes, live bytes added up" "2 $(( $(ledger_field "$L" exact 1) * 2 ))" \
    "$(json_get "$last" "'%d %d' % (j['total']['processes'], j['total']['live_bytes'])")"

run_json detail "report detail --json (detail mode)" "$MT" report detail "$T/det.mtr" --json --top 1000000000
D=$T/ledger.detail
expect_eq "report detail --json: the sites of category exact add up to the ledger" \
    "$(ledger_field "$D" exact 1) $(ledger_field "$D" exact 2)" \
    "$(json_get "$last" "' '.join(str(sum(s[k] for s in j['sites'] if s['category'] == 'exact')) for k in ('live_bytes', 'live_count'))")"
awk '$1 == "site" { print $2 }' "$T/det.mtr" >"$T/site_ids"
expect_eq "report detail --json: each stack_id is a site of the file; merged_sites add up to its sites" \
    "True $(wc -l <"$T/site_ids")" \
    "$(json_get "$last" "'%s %d' % (all(str(s['stack_id']) in open('$T/site_ids').read().split() for s in j['sites']), sum(s['merged_sites'] for s in j['sites']))")"
expect_eq "report detail --json: a frame has its offset (module-relative), the same frame writer as analyze" True \
    "$(json_get "$last" "all(f['offset'] is not None for s in j['sites'] for f in s['frames'] if f['module'])")"

run_json detail "export --format json" "$MT" export "$T/det.mtr" --format json
cmp -s "$last" "$T/doc$((n - 1)).json"
expect_eq "export --format json: the document report detail --json --top (all) prints" 0 "$?"

run_json detail "report detail --json of a trace" "$MT" report detail "$T/tr.mtt" --json --top 1000000000
TL=$T/ledger.trace
expect_eq "report detail --json (trace): category exact live bytes = the ledger" "$(ledger_field "$TL" exact 1)" \
    "$(json_get "$last" "sum(s['live_bytes'] for s in j['sites'] if s['category'] == 'exact')")"

run_json analyze "analyze --json (trace mode)" "$MT" analyze "$T/tr.mtt" --json --top 0
expect_eq "analyze --json: the leaks of category exact = the ledger's live bytes and count" \
    "$(ledger_field "$TL" exact 1) $(ledger_field "$TL" exact 2)" \
    "$(json_get "$last" "'%d %d' % (sum(s['live_bytes'] for s in j['leaks']['stacks'] if s['category'] == 'exact'), sum(s['live_count'] for s in j['leaks']['stacks'] if s['category'] == 'exact'))")"
expect_eq "analyze --json: live_bytes at the top = leaks' live_bytes; times within first_ns..last_ns" True \
    "$(json_get "$last" "j['live_bytes'] == j['leaks']['live_bytes'] and j['first_ns'] <= j['peak']['time_ns'] <= j['last_ns']")"
run_json analyze "analyze --json --peak (one section)" "$MT" analyze "$T/tr.mtt" --json --peak
expect_eq "analyze --json --peak: only that section" "peak" \
    "$(json_get "$last" "' '.join(k for k in ('peak', 'leaks', 'temporary', 'hot', 'histogram', 'timeline') if k in j)")"

# Caveated traces: every caveat the analysis states validates. Events lost
# (a small buffer, --allow-loss: lost_percent a number), cut short (no end
# record: the losses unknown, lost_percent null), a fork child whose
# parent's trace is gone (began_late).
"$MT" run --mode trace --allow-loss --trace-buffer 192KB -o "$T/lost.mtt" -- "$TBIN/tracer" flood 1000000 \
    >/dev/null 2>&1
run_json analyze "analyze --json of a trace that lost events" "$MT" analyze "$T/lost.mtt" --json --top 1
expect_eq "analyze --json (events lost): lost_percent = events_lost / events_fired, not late" "True True False" \
    "$(json_get "$last" "(lambda c: '%s %s %s' % (c['events_lost'] > 0, abs(c['lost_percent'] - 100.0 * c['events_lost'] / c['events_fired']) < 0.001, c['began_late']))(j['caveats'])")"
head -c "$(($(stat -c %s "$T/lost.mtt") / 2))" "$T/lost.mtt" >"$T/cut.mtt"
EXPECT_RC=1 run_json analyze "analyze --json of a trace cut short" "$MT" analyze "$T/cut.mtt" --json --top 1
expect_eq "analyze --json (cut short): incomplete, the losses unknown (null)" "True None None None" \
    "$(json_get "$last" "(lambda c: '%s %s %s %s' % (c['incomplete'], c['events_lost'], c['events_fired'], c['lost_percent']))(j['caveats'])")"
mkdir -p "$T/fk"
"$MT" run --mode trace -o "$T/fk/t.%p.mtt" -- "$TBIN/forker" "$T/fk.ledger" >"$T/fk.out" 2>/dev/null
fkchild=$(sed -n 's/^child pid //p' "$T/fk.out")
find "$T/fk" -name 't.*.mtt' ! -name "t.$fkchild.mtt" -delete # the parent's trace gone
run_json analyze "analyze --json of a fork child without its parent's trace" "$MT" analyze "$T/fk/t.$fkchild.mtt" --json --top 1
expect_eq "analyze --json (parent's trace gone): began_late, nothing replayed" "True False" \
    "$(json_get "$last" "'%s %s' % (j['caveats']['began_late'], j['inherited']['replayed'])")"

run_json diff "diff --json (summary reports)" "$MT" diff "$T/sum.mtr" "$T/sum.mtr" --json
expect_eq "diff --json of a report with itself: every delta 0" True \
    "$(json_get "$last" "all(v == 0 for c in j['categories'] for k, v in c.items() if k.endswith('_delta'))")"
run_json detail-diff "diff --json (detail reports)" "$MT" diff "$T/det.mtr" "$T/det.mtr" --json
expect_eq "diff --json (detail): base and new stack_id of a site are the same site" True \
    "$(json_get "$last" "all(s['base']['stack_id'] == s['new']['stack_id'] and s['status'] == 'unchanged' for s in j['sites'])")"

# A sampled report (docs/sampling.md), made from det.mtr as the agent writes
# one (tests/report/mksampled.py): "sampling" and each site's samples.
python3 "$MT_ROOT/tests/report/mksampled.py" "$T/det.mtr" "$T/samp.mtr" 524288
run_json report "report --json (sampled)" "$MT" report "$T/samp.mtr" --json
expect_eq "report --json (sampled): sampling.rate_bytes; null for an exact report" "524288 None" \
    "$(json_get "$last" "j['sampling']['rate_bytes']") $(json_get "$T/doc1.json" "j['sampling']")"
run_json detail "report detail --json (sampled)" "$MT" report detail "$T/samp.mtr" --json
expect_eq "report detail --json (sampled): samples and live_samples on every site" True \
    "$(json_get "$last" "all(isinstance(s['samples'], int) and 0 <= s['live_samples'] <= s['samples'] for s in j['sites'])")"
run_json detail-diff "diff --json (sampled against exact)" "$MT" diff "$T/det.mtr" "$T/samp.mtr" --json
expect_eq "diff --json (sampled against exact): each side's sampling" "None 524288" \
    "$(json_get "$last" "'%s %s' % (j['base']['sampling'], j['new']['sampling']['rate_bytes'])")"

run_json xe-plan "xe plan --json" "$MT" xe plan --max-memory 4MB --mode per_cpu --cpus 2 --json
expect_eq "xe plan --json: the partition mode as --mode spells it; 5 buffers (ceil(2.5 x 2))" "per_cpu 5 None" \
    "$(json_get "$last" "'%s %s %s' % (j['partition_mode'], j['total_regular_buffers'], j['max_event_size_bytes'])")"
run_json xe-plan-range "xe plan --range --json" "$MT" xe plan --range 1-1024 --mode per_node --nodes 2 --json
expect_eq "xe plan --range --json: per_node, rows cover 1..1024 KB" "per_node 1 1024" \
    "$(json_get "$last" "'%s %d %d' % (j['partition_mode'], j['rows'][0]['start_memory_range_kb'], j['rows'][-1]['end_memory_range_kb'])")"

# --- memtrail info: a hand-made report with every info and span line (the agent's
# own once it writes them; tests/cli/test_info.sh checks the figures) --------------
zero="time_ns=0 run_time_ns=0 live_before_bytes=0 live_after_bytes=0 fragmentation_before_bytes=0 fragmentation_after_bytes=0 rss_bytes=0 committed_bytes=0 memory_load_bytes=0 total_available_bytes=0 alloc_time_ns=0 map_time_ns=0 minor_faults=0 major_faults=0 overhead_bytes=0 event_ns=0"
{
    grep -vE '^(end|memory_time|info|span|span_name|span_memory|spans)( |$)' "$T/sum.mtr"
    echo "memory_time run_time_ns=5000000000 alloc_time_ns=30000000 map_time_ns=20000000"
    for k in any peak grow trim; do
        echo "info kind=$k count=2 event=$([ $k = any ] && echo trim || echo $k) index=2 ${zero//=0/=7} categories=malloc:7,exact:9"
    done
    echo "info kind=limit count=0 event=none index=0 $zero categories="
    echo "info kind=periodic count=0 event=none index=0 $zero categories="
    echo 'span_name id=1 count=3 name=GET\s/x'
    echo "span id=1 lo_ns=41000 hi_ns=42000 count=2 affected=0 multiple=0 events=0 duration_ns=83000 memory_ns=100 faults=0"
    echo "span id=1 lo_ns=5000000 hi_ns=5100000 count=1 affected=1 multiple=1 events=2 duration_ns=5050000 memory_ns=4000000 faults=0"
    echo "span_name id=2 count=1 name=db"
    echo "span id=2 lo_ns=41000 hi_ns=42000 count=1 affected=1 multiple=0 events=1 duration_ns=41500 memory_ns=9000 faults=0"
    echo "spans names=2 unmatched_ends=0 dropped=0 faults_counted=0"
    echo end
} >"$T/info.mtr"
run_json info "info --json (a report with spans of two names)" "$MT" info "$T/info.mtr" --json
expect_eq "info --json: six kinds, 4 requests, a band per percentile and the last, two names" "6 4 5 2" \
    "$(json_get "$last" "'%d %d %d %d' % (len(j['kinds']), j['spans']['requests'], len(j['spans']['by_percentile']), len(j['spans']['by_name']))")"
run_json info "info --json --kind peak --percentiles 90" "$MT" info "$T/info.mtr" --json --kind peak --percentiles 90
if grep -q '^info ' "$T/sum.mtr"; then
    run_json info "info --json (the agent's own report)" "$MT" info "$T/sum.mtr" --json
fi

# --- memtrail refset report on a recording of the real writer (tests/refset/test_report.sh has the figures)
RSGEN=$BUILD/asan/tests/refset/test_report_model
check "refset: the generator writes a recording" "$RSGEN" --write "$T/seed.rsr"
run_json refset-report "refset report --json" "$MT" refset report "$T/seed.rsr" --json --top 0
run_json refset-report "refset report --json --viewport 1:2" "$MT" refset report "$T/seed.rsr" --json --viewport 1:2
expect_eq "refset report --json: the seed's Impact Size, 10 MB" 10485760 "$(json_get "$last" 'j["impact_size_bytes"]')"

# --- memtrail query on a running program (detail mode: every request works) --------
unset XDG_RUNTIME_DIR
LD=$T/live; mkdir -p "$LD"
MEMTRAIL_OPTIONS="mode=detail:query=on:output=$T/live.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/live" "$LD" >"$T/live.out" 2>&1 &
pid=$!; pids+=("$pid")
if wait_file "$LD/ready1"; then
    run_json report "query PID summary --json" "$MT" query "$pid" summary --json
    expect_eq "query summary --json: category live = the program's books" \
        "$(ledger_field "$LD/phase1" live 1) $(ledger_field "$LD/phase1" live 2)" \
        "$(json_get "$last" "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'live' for k in ('live_bytes', 'live_count'))")"
    run_json report "query PID baseline --json" "$MT" query "$pid" baseline --json
    touch "$LD/go1"
    if wait_file "$LD/ready2"; then
        run_json diff "query PID diff --json" "$MT" query "$pid" diff --json
        expect_eq "query diff --json: live bytes and their change = the program's books" \
            "$(ledger_field "$LD/phase2" live 1) $(( $(ledger_field "$LD/phase2" live 1) - $(ledger_field "$LD/phase1" live 1) ))" \
            "$(json_get "$last" "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'live' for k in ('live_bytes', 'live_bytes_delta'))")"
        run_json detail "query PID detail --json" "$MT" query "$pid" detail --json --top 1000000000
        expect_eq "query detail --json: the sites of category live add up to the books" \
            "$(ledger_field "$LD/phase2" live 1) $(ledger_field "$LD/phase2" live 2)" \
            "$(json_get "$last" "' '.join(str(sum(s[k] for s in j['sites'] if s['category'] == 'live')) for k in ('live_bytes', 'live_count'))")"
    else
        fail "query: live program reaches step 2" "no $LD/ready2: $(cat "$T/live.out")"
    fi
    touch "$LD/go2"
    wait_gone "$pid"
else
    fail "query: live program starts" "no $LD/ready1: $(cat "$T/live.out")"
fi

# --- every document against its schema; wrong documents rejected ------------------------
"$PY" - "$SCHEMAS" "$T/want" <<'PYEOF'
import copy, json, sys
import jsonschema

V = jsonschema.Draft202012Validator
schemas = {}
def schema(name):
    if name not in schemas:
        schemas[name] = json.load(open("%s/%s.schema.json" % (sys.argv[1], name)))
    return schemas[name]

def valid(doc, name):
    try:
        jsonschema.validate(doc, schema(name), cls=V)
        return None
    except jsonschema.ValidationError as e:
        return "%s at %s" % (e.message[:200], "/".join(str(p) for p in e.absolute_path))

docs = {}
for line in open(sys.argv[2]):
    name, path, label = line.rstrip("\n").split(" ", 2)
    try:
        pairs = json.load(open(path), object_pairs_hook=lambda kv: kv)
        doc = json.load(open(path))
    except ValueError as e:
        print("FAIL %s: validates as %s: not JSON (%s)" % (label, name, e))
        continue
    first = pairs[0][0] if pairs else None
    print(("PASS %s: \"schema\" is the first key" if first == "schema" else "FAIL %s: the first key is %r")
          % ((label,) if first == "schema" else (label, first)))
    why = valid(doc, name)
    print("PASS %s: validates as %s" % (label, name) if why is None else "FAIL %s: validates as %s: %s" % (label, name, why))
    docs.setdefault(name, doc)
    if name == "analyze" and doc.get("caveats"):
        docs.setdefault("analyze-caveats", doc)

def rejected(label, name, mutate):
    if name not in docs:
        print("FAIL schema rejects %s: no %s document to start from" % (label, name))
        return
    d = copy.deepcopy(docs[name])
    mutate(d)
    print("PASS schema rejects %s" % label if valid(d, name) else "FAIL schema rejects %s: it validates" % label)

def rename(d, old, new):
    d[new] = d.pop(old)

rejected("a report without \"complete\"", "report", lambda d: d.pop("complete"))
rejected("a report with an unknown key", "report", lambda d: d.update(extra=1))
rejected("a report with another schema version", "report", lambda d: d.update(schema="memtrail/0"))
rejected("a category with the old key \"reserved\"", "report",
         lambda d: rename(d["categories"][0], "reserved_bytes", "reserved"))
rejected("a detail site keyed \"id\"", "detail", lambda d: rename(d["sites"][0], "stack_id", "id"))
rejected("a frame without \"offset\"", "detail", lambda d: d["sites"][0]["frames"][0].pop("offset"))
rejected("analyze's old nested \"live\"", "analyze", lambda d: d.update(live={"bytes": 1, "count": 1}))
rejected("analyze with a negative count", "analyze", lambda d: d.update(allocs=-1))
rejected("a stack keyed \"stack\"", "analyze", lambda d: rename(d["leaks"]["stacks"][0], "stack_id", "stack"))
rejected("caveats without \"began_late\"", "analyze",
         lambda d: d.update(caveats=dict((k, v) for k, v in docs["analyze-caveats"]["caveats"].items() if k != "began_late")))
rejected("a lost_percent over 100", "analyze", lambda d: d.update(caveats=dict(docs["analyze-caveats"]["caveats"], lost_percent=101)))
rejected("refset report with six categories", "refset-report", lambda d: d["categories"].pop())
rejected("refset report's category \"heap\"", "refset-report", lambda d: d["categories"][0].update(name="heap"))
rejected("refset report without \"graph_end_bytes\"", "refset-report", lambda d: d.pop("graph_end_bytes"))
rejected("refset report's viewport in a string", "refset-report", lambda d: d["viewport"].update(start_s="1"))
rejected("xe plan's upper-case \"PER_CPU\"", "xe-plan", lambda d: d.update(partition_mode="PER_CPU"))
rejected("a diff category with a string count", "diff", lambda d: d["categories"][0].update(live_bytes="1"))
rejected("info without \"kinds\"", "info", lambda d: d.pop("kinds"))
rejected("info's upper-case kind \"PEAK\"", "info", lambda d: d["kinds"][1].update(kind="PEAK"))
rejected("an info snapshot without \"live_before_bytes\"", "info", lambda d: d["kinds"][0]["last"].pop("live_before_bytes"))
rejected("info's old key \"live_before\"", "info", lambda d: rename(d["kinds"][0]["last"], "live_before_bytes", "live_before"))
rejected("an info band without \"memory_share_percent\"", "info",
         lambda d: d["spans"]["by_percentile"][0].pop("memory_share_percent"))
rejected("info with a negative affected_percent", "info", lambda d: d["spans"].update(affected_percent=-1))
PYEOF

# memtrail analyze, and report/export of traces, on traces written by the
# synthetic generator (bench/tracegen.c, with the real writer), whose own
# bookkeeping (--expect) is the truth: JSON keys and values, text sections,
# symbolized stacks, section options, exit codes 0/1/2, a cut or damaged
# trace reported as far as it was read with the error naming the chunk and
# its offset.
. "$(dirname "$0")/../lib.sh"

GEN=$BUILD/bench/tracegen
if [ ! -x "$GEN" ]; then
    fail "analyze: tracegen" "$GEN not built (make tests)"
    exit 0
fi
TR=$T/t.mtt
"$GEN" -o "$TR" -n 300000 -l 2000 -c 20000 -s 3 --expect "$T/expect.json" 2>/dev/null
check "analyze: synthetic trace written" test -s "$TR"
exp() { json_get "$T/expect.json" "j['$1']"; }

# --- JSON ---------------------------------------------------------------------
run_mt "$MT" analyze "$TR" --json
expect_eq "analyze --json: exit 0" 0 "$rc"
printf '%s' "$out" >"$T/a.json"
keys=$(json_get "$T/a.json" "','.join(k for k in ['events','events_lost','allocs','frees','reallocs','frees_unknown',
  'reallocs_unknown','ids_reused','mmaps','munmaps','allocated_bytes','first_ns','last_ns','live_bytes','live_count','mapped_bytes','mapped_peak_bytes','peak','leaks',
  'temporary','hot','histogram','timeline','complete','error','file','pid'] if k not in j)")
expect_eq "analyze --json: every documented key" "" "$keys"
expect_eq "analyze --json: peak has live_bytes, live_count, time_ns, stacks" "True" \
    "$(json_get "$T/a.json" "all(k in j['peak'] for k in ['live_bytes','live_count','time_ns','stacks','stacks_total'])")"
expect_eq "analyze --json: complete, no error" "True None" "$(json_get "$T/a.json" "j['complete'], j['error']" | tr -d '(),')"
for k in events allocs frees reallocs frees_unknown; do
    expect_eq "analyze --json: $k as written" "$(exp $k)" "$(json_get "$T/a.json" "j['$k']")"
done
expect_eq "analyze --json: leaks (bytes, count) as left live" "$(exp leak_bytes) $(exp leak_count)" \
    "$(json_get "$T/a.json" "'%d %d' % (j['leaks']['live_bytes'], j['leaks']['live_count'])")"
expect_eq "analyze --json: temporary count as written" "$(exp temporary)" "$(json_get "$T/a.json" "j['temporary']['temporary_count']")"
expect_eq "analyze --json: temporary bytes as written" "$(exp temporary_bytes)" \
    "$(json_get "$T/a.json" "j['temporary']['temporary_bytes']")"
expect_eq "analyze --json: events_lost from the end record" "0" "$(json_get "$T/a.json" "j['events_lost']")"
expect_eq "analyze --json: leak stacks sum to the leaks" "True" \
    "$(json_get "$T/a.json" "sum(s['live_bytes'] for s in j['leaks']['stacks']) == j['leaks']['live_bytes'] and j['leaks']['stacks_total'] <= 10")"
expect_eq "analyze --json: peak at least the live bytes at the end, stacks within it" "True" \
    "$(json_get "$T/a.json" "j['peak']['live_bytes'] >= j['live_bytes'] and sum(s['live_bytes'] for s in j['peak']['stacks']) == j['peak']['live_bytes']")"
expect_eq "analyze --json: temporaries all from the scratch stack" "tracegen_scratch_buffer" \
    "$(json_get "$T/a.json" "j['temporary']['stacks'][0]['frames'][0]['function']")"
expect_eq "analyze --json: frames symbolized (function, file, line, module, address)" "True" \
    "$(json_get "$T/a.json" "all(f['function'].startswith('tracegen_') and f['file'].endswith('tracegen.c') and f['line'] > 0 and f['module'].endswith('tracegen') and f['address'].startswith('0x') for s in j['leaks']['stacks'] for f in s['frames'])")"
expect_eq "analyze --json: histogram counts every allocation and realloc" "True" \
    "$(json_get "$T/a.json" "sum(b['count'] for b in j['histogram']) == j['allocs'] + j['reallocs']")"
expect_eq "analyze --json: timeline buckets in order, within 256" "True" \
    "$(json_get "$T/a.json" "0 < len(j['timeline']['buckets']) <= 256 and all(b['max_live_bytes'] >= b['live_bytes'] for b in j['timeline']['buckets']) and j['timeline']['buckets'][-1]['live_bytes'] == j['live_bytes']")"
expect_eq "analyze --json: timeline by category adds up to live bytes in every bucket" "True" \
    "$(json_get "$T/a.json" "len(j['timeline']['categories']) > 0 and all(len(b['by_category']) == len(j['timeline']['categories']) and sum(b['by_category']) == b['live_bytes'] for b in j['timeline']['buckets'])")"
expect_eq "analyze --json: the tree at the peak: root all = the peak, children within their parent, leaves' sum = the stacks'" "True" \
    "$(json_get "$T/a.json" "(lambda t: t[0]['name'] == 'all' and t[0]['parent'] is None and t[0]['value'] == j['peak']['live_bytes'] and all(n['parent'] < i for i, n in enumerate(t) if i) and all(sum(c['value'] for c in t if c['parent'] == i) <= n['value'] for i, n in enumerate(t)))(j['peak']['tree'])")"
expect_eq "analyze --json: hot stacks by count and by bytes" "True" \
    "$(json_get "$T/a.json" "len(j['hot']['by_count']['stacks']) > 0 and len(j['hot']['by_bytes']['stacks']) > 0")"

run_mt "$MT" analyze "$TR" --json --leaks --top 1
expect_eq "analyze --json --leaks --top 1: only leaks, one stack" "True False False 1" \
    "$(python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print("leaks" in j, "peak" in j, "timeline" in j, len(j["leaks"]["stacks"]))' <<<"$out")"

# --- text ---------------------------------------------------------------------
run_mt "$MT" analyze "$TR"
expect_eq "analyze: exit 0" 0 "$rc"
for s in "Peak: " "Leaks (never freed)" "Temporary allocations" "Hottest stacks by number of allocations" \
         "Hottest stacks by bytes allocated" "Sizes requested" "Live bytes over time" "tracegen_leaky_helper"; do
    contains "analyze: text has '$s'" "$s" "$out"
done
contains "analyze: text names the counts" "allocations $(exp allocs), frees $(exp frees), reallocs $(exp reallocs)" "$out"
run_mt "$MT" analyze "$TR" --temporary
expect_match "analyze --temporary: that section only" "^Trace .*Temporary allocations" "$(printf '%s' "$out" | tr '\n' ' ')"
case $out in *"Peak: "*) fail "analyze --temporary: no peak section" "it has one";; *) pass "analyze --temporary: no peak section";; esac
run_mt "$MT" analyze "$TR" --timeline
lines=$(printf '%s\n' "$out" | grep -c ' s  ')
expect_eq "analyze --timeline alone: every bucket" "$(json_get "$T/a.json" "len(j['timeline']['buckets'])")" "$lines"
[ -t 2 ] || { run_mt "$MT" analyze "$TR" --json; expect_eq "analyze: no progress when stderr is not a terminal" "" "$err"; }

# --- usage and errors ---------------------------------------------------------
run_mt "$MT" analyze --help
expect_eq "analyze --help: exit 0" 0 "$rc"
contains "analyze --help: usage" "usage: memtrail analyze TRACE" "$out"
run_mt "$MT" help analyze
expect_eq "help analyze: exit 0" 0 "$rc"
run_mt "$MT" analyze
expect_eq "analyze without TRACE: exit 2" 2 "$rc"
run_mt "$MT" analyze "$TR" --bogus
expect_eq "analyze --bogus: exit 2" 2 "$rc"
contains "analyze --bogus: says so" "memtrail: unknown option '--bogus'" "$err"
run_mt "$MT" analyze "$TR" --top x
expect_eq "analyze --top x: exit 2" 2 "$rc"
run_mt "$MT" analyze "$TR" "$TR"
expect_eq "analyze with two files: exit 2" 2 "$rc"
run_mt "$MT" analyze "$T/nonexistent.mtt"
expect_eq "analyze of a missing file: exit 1" 1 "$rc"
expect_match "analyze of a missing file: one memtrail: line naming it" "^memtrail: .*nonexistent.mtt" "$err"
printf 'memtrail-report 1\nnot a trace\n' >"$T/notrace"
run_mt "$MT" analyze "$T/notrace"
expect_eq "analyze of a file that is not a trace: exit 1" 1 "$rc"
expect_match "analyze of a file that is not a trace: named" "^memtrail: .*notrace" "$err"

# --- cut short, damaged -------------------------------------------------------
size=$(stat -c %s "$TR")
head -c $((size * 2 / 3)) "$TR" >"$T/cut.mtt"
run_mt "$MT" analyze "$T/cut.mtt" --json
expect_eq "analyze of a cut trace: exit 1" 1 "$rc"
printf '%s' "$out" >"$T/cut.json"
expect_eq "analyze of a cut trace: the report of what was read (incomplete, some events)" "True" \
    "$(json_get "$T/cut.json" "j['complete'] is False and 0 < j['events'] < $(exp events) and j['error'] is not None")"
expect_match "analyze of a cut trace: the error names file, chunk and offset" \
    "^memtrail: .*cut\.mtt.*chunk [0-9]+.*offset [0-9]+" "$err"
run_mt "$MT" analyze "$T/cut.mtt"
expect_eq "analyze of a cut trace (text): exit 1" 1 "$rc"
contains "analyze of a cut trace (text): says it is incomplete" "Incomplete: reading stopped early" "$out"
cp "$TR" "$T/flip.mtt"
flip_byte "$T/flip.mtt" $((size / 2))
run_mt "$MT" analyze "$T/flip.mtt" --json
expect_eq "analyze of a trace with a flipped byte: exit 1" 1 "$rc"
expect_match "analyze of a trace with a flipped byte: the error names the chunk" "^memtrail: .*flip\.mtt.*chunk [0-9]+" "$err"
expect_eq "analyze of a trace with a flipped byte: events before it reported" "True" \
    "$(python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["events"] > 0 and not j["complete"])' <<<"$out")"

# Bytes after the trailer: every event is reported, then the error names
# where they start (exit 1), from a file and from a pipe alike.
cp "$TR" "$T/extra.mtt"
printf 'extra' >>"$T/extra.mtt"
run_mt "$MT" analyze "$T/extra.mtt" --json
expect_eq "analyze of a trace with bytes after its trailer: exit 1" 1 "$rc"
expect_match "analyze of a trace with bytes after its trailer: the error names them and their offset" \
    "^memtrail: .*extra\.mtt: chunk [0-9]+ at offset [0-9]+: 5 bytes after the trailer, from offset $size\$" "$err"
expect_eq "analyze of a trace with bytes after its trailer: every event reported" "True" \
    "$(python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["events"] == '"$(exp events)"' and not j["complete"])' <<<"$out")"
run_mt "$MT" analyze <(cat "$T/extra.mtt")
expect_eq "analyze of a pipe with bytes after the trailer: exit 1" 1 "$rc"
contains "analyze of a pipe with bytes after the trailer: says so" "bytes after the trailer, from offset $size" "$err"

# --- report and export of a trace --------------------------------------------
run_mt "$MT" report "$TR" --json
expect_eq "report of a trace: exit 0" 0 "$rc"
printf '%s' "$out" >"$T/r.json"
expect_eq "report of a trace: totals as analyze's" \
    "$(json_get "$T/a.json" "'%d %d %d %d %d' % (j['allocs'], j['frees'], j['reallocs'], j['live_bytes'], j['live_count'])")" \
    "$(json_get "$T/r.json" "'%d %d %d %d %d' % (j['total']['allocs'], j['total']['frees'], j['total']['reallocs'], j['total']['live_bytes'], j['total']['live_count'])")"
expect_eq "report of a trace: the sites' live bytes sum to the leaks" "$(exp leak_bytes)" \
    "$(json_get "$T/r.json" "sum(s['live_bytes'] for s in j['sites'])")"
run_mt "$MT" report "$TR"
contains "report of a trace (text): its sites, symbolized" "tracegen_cache_insert" "$out"
contains "report of a trace (text): mode trace" "mode trace" "$out"
mkdir "$T/tdir" && cp "$TR" "$T/tdir/t.mtt"
run_mt "$MT" report "$T/tdir"
expect_eq "report DIR holding a trace: exit 0, the trace is a process of the tree" "0 1" \
    "$rc $(printf '%s\n' "$out" | grep -c "^ *$(json_get "$T/a.json" "j['pid']") ")"
contains "report DIR holding a trace: one report" "memtrail process tree: 1 report" "$out"
run_mt "$MT" export "$TR" --format folded
expect_eq "export --format folded of a trace: exit 0" 0 "$rc"
expect_eq "export --format folded of a trace: live bytes sum to the leaks" "$(exp leak_bytes)" \
    "$(printf '%s\n' "$out" | awk '{s += $NF} END {print s}')"
contains "export --format folded of a trace: symbolized stacks" "tracegen_build_index;tracegen_parse_input" "$out"
run_mt "$MT" export "$TR" --format pprof -o "$T/t.pb.gz"
expect_eq "export --format pprof of a trace: exit 0" 0 "$rc"
expect_eq "export --format pprof of a trace: gzip'ed" "1f8b" "$(head -c 2 "$T/t.pb.gz" | od -An -tx1 | tr -d ' \n')"
run_mt "$MT" export "$TR" --format json
expect_eq "export --format json of a trace: exit 0" 0 "$rc"
expect_eq "export --format json of a trace: the sites with frames" "True" \
    "$(python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(len(j["sites"]) > 0 and j["mode"] == "trace")' <<<"$out")"
run_mt "$MT" export "$T/cut.mtt" --format folded
expect_eq "export of a cut trace: exit 1" 1 "$rc"
expect_match "export of a cut trace: the error names the chunk" "^memtrail: .*cut\.mtt.*chunk" "$err"
[ -n "$out" ] && pass "export of a cut trace: what was read is exported" || fail "export of a cut trace: what was read is exported" "no output"
run_mt "$MT" export "$TR" --format json --value allocs
expect_eq "export --format json --value: exit 2" 2 "$rc"

# --- the ASan+UBSan build on the same traces ----------------------------------
if [ -x "$MT_ASAN" ]; then
    run_mt "$MT_ASAN" analyze "$TR" --json
    expect_eq "analyze (ASan): exit 0, same JSON" "0 $(json_get "$T/a.json" "j['leaks']['live_bytes']")" \
        "$rc $(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["leaks"]["live_bytes"])' <<<"$out")"
    run_mt "$MT_ASAN" analyze "$T/flip.mtt"
    expect_eq "analyze (ASan) of a damaged trace: exit 1, no sanitizer report" "1 0" \
        "$rc $(printf '%s' "$err" | grep -c -E 'Sanitizer|runtime error')"
    run_mt "$MT_ASAN" report "$T/cut.mtt"
    expect_eq "report (ASan) of a cut trace: exit 1, no sanitizer report" "1 0" \
        "$rc $(printf '%s' "$err" | grep -c -E 'Sanitizer|runtime error')"
fi

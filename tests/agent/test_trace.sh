#!/usr/bin/env bash
# Trace mode on real programs (tests/agent/tracer.c): the analyzer's totals
# against the same program's summary report, leaks and temporaries against
# what the program is known to do, frees handed between threads, fork
# children, counted losses, and traces cut or damaged anywhere (read with
# the ASan+UBSan build of the CLI).
. "$(dirname "$0")/../lib.sh"

TR=$TBIN/tracer
META=$BUILD/asan/tests/trace/trace_meta # a trace's meta values (tests/trace/trace_meta.c)
py() { python3 -c "$@"; }

# --- the analyzer's totals = the summary report's -----------------------------
run_mt "$MT" run -o "$T/known.mtr" -- "$TR" known
run_mt "$MT" report "$T/known.mtr" --json
printf '%s' "$out" >"$T/known.mtr.json"
run_mt "$MT" run --mode trace --no-loss -o "$T/known.mtt" -- "$TR" known
expect_eq "trace: run exits with the program's status" 0 "$rc"
expect_match "trace: run says where the trace is" "trace of [0-9]+ written to $T/known.mtt" "$err"
expect_match "trace: the agent says what it wrote and lost" "trace: [0-9]+ events, 0 lost, [0-9]+ bytes" "$err"
run_mt "$MT_ASAN" analyze --json "$T/known.mtt"
expect_eq "trace: analyze exits 0" 0 "$rc"
printf '%s' "$out" >"$T/known.json"
for k in allocs frees reallocs; do
    expect_eq "trace: $k = the summary report's" "$(json_get "$T/known.mtr.json" "j['total']['$k']")" \
        "$(json_get "$T/known.json" "j['$k']")"
done
expect_eq "trace: leaked bytes = the summary's live bytes" \
    "$(json_get "$T/known.mtr.json" "j['total']['live_bytes']")" "$(json_get "$T/known.json" "j['leaks']['live_bytes']")"
expect_eq "trace: leaked blocks = the summary's live blocks" \
    "$(json_get "$T/known.mtr.json" "j['total']['live_count']")" "$(json_get "$T/known.json" "j['leaks']['live_count']")"
expect_eq "trace: peak = the summary's peak (one thread: exact)" \
    "$(json_get "$T/known.mtr.json" "j['total']['peak_bytes']")" "$(json_get "$T/known.json" "j['peak']['live_bytes']")"
expect_eq "trace: complete, nothing lost, no unknown frees" "True 0 0" \
    "$(json_get "$T/known.json" "'%s %d %d' % (j['complete'], j['events_lost'], j['frees_unknown'])")"
expect_eq "trace: events = allocs + frees + reallocs + mappings" \
    "$(json_get "$T/known.json" "j['allocs'] + j['frees'] + j['reallocs'] + j['mmaps'] + j['munmaps']")" \
    "$(json_get "$T/known.json" "j['events']")"

# A '%' in the trace's name (the template's %%): the trace is written under
# the name the agent and memtrail run give, a%pb.mtt. Before, the session's
# file target read the %p in that name again: a<pid>b.mtt was written, and
# the file both named did not exist.
mkdir -p "$T/pct"
run_mt "$MT" run --mode trace -o "$T/pct/a%%pb.mtt" -- "$TR" known
expect_eq "trace: a '%' in the file's name: the file is the one named, and the only one" \
    "0 a%pb.mtt|a%pb.mtt" \
    "$rc $(ls "$T/pct" | grep -v '\.mtr$' | paste -sd' ')|$(printf '%s' "$err" | grep -o 'bytes in [^ ]*' | sed 's|.*/||')"

# --- leaks and temporaries, by stack --------------------------------------------
leak_of() { # FUNCTION: "count bytes" of the leak stacks whose first frame is FUNCTION
    json_get "$T/known.json" "(lambda s: '%d %d' % (sum(x['live_count'] for x in s), sum(x['live_bytes'] for x in s)))([x for x in j['leaks']['stacks'] if x['frames'] and x['frames'][0]['function'] == '$1'])"
}
expect_eq "trace: leak_small leaked 10 x 100 bytes" "10 1000" "$(leak_of leak_small)"
expect_eq "trace: leak_big leaked 3 x 5000 bytes" "3 15000" "$(leak_of leak_big)"
expect_eq "trace: no other leak (13 blocks, 16000 bytes)" "13 16000" \
    "$(json_get "$T/known.json" "'%d %d' % (j['leaks']['live_count'], j['leaks']['live_bytes'])")"
expect_eq "trace: make_temporaries' 50 allocations are temporary" "50" \
    "$(json_get "$T/known.json" "sum(x['temporary_count'] for x in j['temporary']['stacks'] if x['frames'] and x['frames'][0]['function'] == 'make_temporaries')")"
expect_eq "trace: the peak holds churn's 3 MiB block" "1" \
    "$(json_get "$T/known.json" "sum(1 for x in j['peak']['stacks'] if x['live_bytes'] == 3 << 20 and x['frames'][0]['function'] == 'churn')")"
run_mt "$MT" analyze "$T/known.mtt"
expect_match "trace: text output names the leak" "leak_small" "$out"

# --- mapping changes -----------------------------------------------------------------
run_mt "$MT" run --mode trace --no-loss -o "$T/maps.mtt" -- "$TR" maps
run_mt "$MT" analyze --json "$T/maps.mtt"
printf '%s' "$out" >"$T/maps.json"
expect_eq "trace: mmap, mremap (unmap + map), munmap and the break: 5 maps, 5 unmaps" "5 5" \
    "$(json_get "$T/maps.json" "'%d %d' % (j['mmaps'], j['munmaps'])")"

# --- temporaries: blocks, a realloc in between resizes, it does not free --------
# tracer temps: 4 x 2000 blocks freed right after they were allocated (80 of
# them realloc'd in between), and 4 blocks realloc'd then leaked.
run_mt "$MT" run --mode trace --no-loss -o "$T/temps.mtt" -- "$TR" temps
run_mt "$MT" analyze --json "$T/temps.mtt"
printf '%s' "$out" >"$T/temps.json"
of_fn() { # FUNCTION EXPR: the sum of EXPR over the temporary stacks whose first frame is FUNCTION
    json_get "$T/temps.json" "sum($2 for x in j['temporary']['stacks'] if x['frames'] and x['frames'][0]['function'] == '$1')"
}
expect_eq "trace: temps: temp_worker's 8000 blocks are temporary, each once (realloc'd or not)" "8000" \
    "$(of_fn temp_worker "x['temporary_count']")"
expect_eq "trace: temps: a block realloc'd and leaked is a leak, not a temporary" "0" \
    "$(of_fn realloc_leak "x['temporary_count']")"
expect_eq "trace: temps: realloc_leak leaked 4 x 300 bytes" "4 1200" \
    "$(json_get "$T/temps.json" "(lambda s: '%d %d' % (sum(x['live_count'] for x in s), sum(x['live_bytes'] for x in s)))([x for x in j['leaks']['stacks'] if x['frames'] and x['frames'][0]['function'] == 'realloc_leak'])")"
expect_eq "trace: temps: no stack more temporaries than its allocations (JSON)" "True" \
    "$(json_get "$T/temps.json" "all(x['temporary_count'] <= x['allocs'] for x in j['temporary']['stacks']) and j['temporary']['temporary_count'] <= j['allocs']")"
run_mt "$MT" analyze "$T/temps.mtt"
hdr=$(printf '%s\n' "$out" | sed -n 's/^ *allocations \([0-9]*\),.*/\1/p')
tmp=$(printf '%s\n' "$out" | sed -n 's/^Temporary allocations.*(.*% of \([0-9]*\) allocations).*/\1/p')
expect_eq "trace: temps: the temporaries' denominator is the header's allocations ($hdr)" "$hdr" "$tmp"
expect_eq "trace: temps: the header's allocations = the JSON's allocs" "$(json_get "$T/temps.json" "j['allocs']")" "$hdr"

# --- the hot lists count allocations as the header does --------------------------
# tracer hot: allocate_many() 100 mallocs; regrow() 20 blocks, each grown
# from NULL by 10 reallocs at one call site: 20 allocations, 180 reallocs.
run_mt "$MT" run --mode trace --no-loss -o "$T/hot.mtt" -- "$TR" hot
run_mt "$MT" analyze --json --hot --top 0 "$T/hot.mtt"
printf '%s' "$out" >"$T/hot.json"
hot_of() { # FUNCTION: "allocs reallocs" of the by_count stacks whose first frame is FUNCTION
    json_get "$T/hot.json" "' '.join('%d %d' % (x['allocs'], x['reallocs']) for x in j['hot']['by_count']['stacks'] if x['frames'] and x['frames'][0]['function'] == '$1')"
}
expect_eq "trace: hot: regrow's stack: 20 allocations, its 180 reallocs apart (JSON)" "20 180" "$(hot_of regrow)"
expect_eq "trace: hot: allocate_many's stack: 100 allocations" "100 0" "$(hot_of allocate_many)"
expect_eq "trace: hot: by number of allocations, allocate_many (100) ranks before regrow (20, and 180 reallocs)" \
    "allocate_many regrow" \
    "$(json_get "$T/hot.json" "' '.join(f for f in (x['frames'][0]['function'] for x in j['hot']['by_count']['stacks'] if x['frames']) if f in ('allocate_many', 'regrow'))")"
expect_eq "trace: hot: the stacks' allocations add up to the header's (no block moved between stacks)" "True" \
    "$(json_get "$T/hot.json" "sum(x['allocs'] for x in j['hot']['by_count']['stacks']) == j['allocs'] and j['hot']['by_count']['stacks_total'] == len(j['hot']['by_count']['stacks'])")"
run_mt "$MT" analyze --hot --top 0 "$T/hot.mtt"
contains "trace: hot: the text says regrow's 20 allocations and 180 reallocs, as the JSON" \
    "20 allocations (180 reallocs)" "$out"
# --- bytes allocated: a block counts once in the total, wherever reallocs move it ---
# tracer reallocs: 100 and 10 bytes allocated, then reallocs growing them by
# 50, 0 (a shrink), 350, 600 and 10: 1120 bytes. Three of the reallocs move
# a block to another stack, where it counts at its new size (docs/trace-
# analysis.md), as detail mode counts it per site: resize_a 150 + 350 + 20,
# resize_b 1000, the two mallocs 110 (1630 over the stacks).
run_mt "$MT" run -o "$T/ra.mtr" -- "$TR" reallocs
run_mt "$MT" report "$T/ra.mtr" --json
printf '%s' "$out" >"$T/ra.mtr.json"
run_mt "$MT" run --mode detail -o "$T/rad.mtr" -- "$TR" reallocs
run_mt "$MT" report detail "$T/rad.mtr" --json --top 1000000000
printf '%s' "$out" >"$T/rad.json"
run_mt "$MT" run --mode trace --no-loss -o "$T/ra.mtt" -- "$TR" reallocs
run_mt "$MT_ASAN" analyze --json --top 0 "$T/ra.mtt"
printf '%s' "$out" >"$T/ra.json"
expect_eq "trace: reallocs: allocs, frees, reallocs, live bytes and blocks = the summary report's" \
    "$(json_get "$T/ra.mtr.json" "' '.join(str(j['total'][k]) for k in ('allocs', 'frees', 'reallocs', 'live_bytes', 'live_count'))")" \
    "$(json_get "$T/ra.json" "' '.join(str(j[k]) for k in ('allocs', 'frees', 'reallocs', 'live_bytes', 'live_count'))")"
expect_eq "trace: reallocs: allocated 1120 bytes: the blocks' sizes and the reallocs' growth, moved or not" \
    "2 1 5 1120" "$(json_get "$T/ra.json" "'%d %d %d %d' % (j['allocs'], j['frees'], j['reallocs'], j['allocated_bytes'])")"
by_fn() { # FILE hot|sites: "function:bytes", the bytes allocated at the hot stacks or the sites, by first frame
    python3 - "$1" "$2" <<'EOF'
import collections, json, sys
j = json.load(open(sys.argv[1]))
c = collections.Counter()
for s in j["sites"] if sys.argv[2] == "sites" else j["hot"]["by_bytes"]["stacks"]:
    f = s["frames"][0]["function"] if s["frames"] else None
    if f in ("main", "reallocs", "resize_a", "resize_b"):
        c[f] += s["allocated_bytes"]
print(" ".join("%s:%d" % kv for kv in sorted(c.items())))
EOF
}
ra_stacks=$(by_fn "$T/ra.json" hot)
expect_match "trace: reallocs: per stack, a block realloc'd in counts at its new size" \
    "^(main|reallocs):110 resize_a:520 resize_b:1000$" "$ra_stacks"
expect_eq "trace: reallocs: per stack as detail mode's sites" "$(by_fn "$T/rad.json" sites)" "$ra_stacks"
run_mt "$MT" analyze "$T/ra.mtt"
contains "trace: reallocs: the text says 1120 bytes allocated" "allocations 2, frees 1, reallocs 5; allocated 1.09KB" "$out"

# --- report and export read traces ------------------------------------------------
run_mt "$MT" export "$T/known.mtt" --format folded
expect_eq "trace: export folded exits 0" 0 "$rc"
expect_match "trace: folded stacks name leak_big" "leak_big" "$out"
# pprof takes the first Mapping for the main binary (go tool pprof's "File:"):
# the program's, though the temps trace lists the dynamic loader's module
# first (its calloc of a new thread's TLS comes before any other allocation)
run_mt "$MT" export "$T/temps.mtt" --format pprof -o "$T/temps.pb.gz"
expect_eq "trace: export pprof: the first mapping is the program's" "0 $TR" "$rc $(python3 - "$T/temps.pb.gz" <<'EOF'
import gzip, sys
def fields(b):  # (number, value) of a protobuf message's varint and length-delimited fields
    i = 0
    while i < len(b):
        def varint():
            nonlocal i
            v = s = 0
            while True:
                v |= (b[i] & 0x7f) << s
                s += 7
                i += 1
                if not b[i - 1] & 0x80:
                    return v
        key = varint()
        if key & 7 == 0:
            yield key >> 3, varint()
        elif key & 7 == 2:
            n = varint()
            yield key >> 3, b[i:i + n]
            i += n
        else:
            raise SystemExit("wire type %d" % (key & 7))
prof = list(fields(gzip.open(sys.argv[1]).read()))
strings = [v.decode() for k, v in prof if k == 6]
mappings = [dict(fields(v)) for k, v in prof if k == 3]
print(strings[mappings[0].get(5, 0)] if mappings else "no mapping")
EOF
)"
if command -v go >/dev/null 2>&1; then
    expect_eq "trace: export pprof: go tool pprof names the program" "File: tracer" \
        "$(go tool pprof -top -symbolize=none "$T/temps.pb.gz" 2>&1 | grep '^File: ')"
fi
run_mt "$MT" report "$T/known.mtt"
expect_eq "trace: report of a trace exits 0" 0 "$rc"
expect_match "trace: report of a trace shows its sites" "leak_small" "$out"

# The meta name the command line and the unwinder (docs/trace-format.md),
# and a report of the trace names the unwinder. Before, neither was
# written: "(stack depth 4, unwinder unknown)".
expect_eq "trace: meta cmdline is the summary report's cmdline line" \
    "$(sed -n 's/^cmdline /cmdline=/p' "$T/known.mtr")" "$("$META" "$T/known.mtt" cmdline)"
run_mt "$MT" run --mode trace --unwind fp -o "$T/fp.mtt" -- "$TR" known 'a b\c'
expect_eq "trace: meta cmdline escapes a space and a backslash as the report does; unwinder fp" \
    "cmdline=$TR known a\\sb\\\\c unwinder=fp" "$("$META" "$T/fp.mtt" cmdline unwinder | paste -sd' ')"
# Longer than a meta value holds (4096 bytes): cut there, but not between
# a backslash and its escape's letter (the escape of the argument's backslash straddles it).
xs=$(python3 -c "print('x' * (4095 - len('$TR known ')))")
run_mt "$MT" run --mode trace -o "$T/long.mtt" -- "$TR" known "$xs\\yyyy"
expect_eq "trace: meta cmdline over 4096 bytes: cut before the escape the cut would split" \
    "cmdline=$TR known $xs" "$("$META" "$T/long.mtt" cmdline)"
run_mt "$MT" report "$T/fp.mtt"
expect_match "trace: report of a trace names its unwinder" "by live bytes \(stack depth [0-9]+, fp\):" "$out"
run_mt "$MT" report "$T/known.mtt"
expect_match "trace: report of a trace names its unwinder (the default)" \
    "by live bytes \(stack depth [0-9]+, $("$META" "$T/known.mtt" unwinder | sed -n 's/^unwinder=//p')\):" "$out"

# --- frees handed between threads arrive after their allocs ---------------------
run_mt "$MT" run --mode trace --no-loss -o "$T/handoff.mtt" -- "$TR" handoff 2
run_mt "$MT" analyze --json "$T/handoff.mtt"
printf '%s' "$out" >"$T/handoff.json"
expect_eq "trace: handoff: no free before its alloc, no id reused" "0 0" \
    "$(json_get "$T/handoff.json" "'%d %d' % (j['frees_unknown'], j['ids_reused'])")"
expect_eq "trace: handoff: nothing handed off leaks" "0" \
    "$(json_get "$T/handoff.json" "sum(x['live_count'] for x in j['leaks']['stacks'] if any(f['function'] == 'producer' for f in x['frames']))")"
expect_eq "trace: handoff: 40000 handed-off allocations" "40000" \
    "$(json_get "$T/handoff.json" "sum(x['allocs'] + x['reallocs'] for x in j['hot']['by_count']['stacks'] if any(f['function'] == 'producer' for f in x['frames']))")"

# --- fork: each process its own trace -------------------------------------------
run_mt "$MT" run --mode trace --no-loss -o "$T/fork.%p.mtt" -- "$TR" fork
nfiles=$(ls "$T"/fork.*.mtt 2>/dev/null | wc -l)
expect_eq "trace: fork: parent and child write a trace each" 2 "$nfiles"
leaks=""
for f in "$T"/fork.*.mtt; do
    "$MT" analyze --json "$f" >"$T/f.json" 2>/dev/null
    leaks="$leaks $(json_get "$T/f.json" "sum(x['live_count'] for x in j['leaks']['stacks'] if x['frames'] and x['frames'][0]['function'] == 'leak_n')")"
done
expect_eq "trace: fork: the parent's 7 and the child's 11 leaks, each in its file" "7 11" \
    "$(echo $leaks | tr ' ' '\n' | sort -n | tr '\n' ' ' | sed 's/ $//')"

# --- children keep quiet: only the process memtrail run started says its
# trace line, a child (forked or exec'd) only when it lost events. A child's
# stderr may be its parent's data ($(cmd 2>&1)); before, every child's line
# went there. -------------------------------------------------------------------
trace_lines() { printf '%s\n' "$1" | grep -c 'memtrail: trace: [0-9]* events'; }
expect_eq "trace: fork: one trace line, the parent's (the child's is quiet)" \
    "1 $(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')" \
    "$(trace_lines "$err") $(printf '%s' "$err" | sed -n 's/.*trace: [0-9]* events, 0 lost, [0-9]* bytes in .*fork\.\([0-9]*\)\.mtt$/\1/p')"
"$TR" known >"$T/cap.truth" 2>&1
run_mt "$MT" run --mode trace --no-loss --follow-exec -o "$T/cap.%p.mtt" -- \
    sh -c 'x=$("$1" known 2>&1); printf "%s\n" "$x" >"$2"' sh "$TR" "$T/cap.data"
expect_eq "trace: an exec'd child's stderr taken as data holds the program's output only" \
    "$(cat "$T/cap.truth")" "$(cat "$T/cap.data")"
capkid=$(ls "$T"/cap.*.mtt.1 | head -1) # the subshell's exec of the tracer (--follow-exec)
expect_eq "trace: the quiet exec'd child still wrote its trace, complete, its 13 leaks" "True 13" \
    "$("$MT" analyze --json "$capkid" 2>/dev/null | json_get /dev/stdin "'%s %d' % (j['complete'], j['leaks']['live_count'])")"
expect_eq "trace: exec'd child: one trace line, the shell's" \
    "1 $(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')" \
    "$(trace_lines "$err") $(printf '%s' "$err" | sed -n 's/.*trace: [0-9]* events, 0 lost, [0-9]* bytes in .*cap\.\([0-9]*\)\.mtt$/\1/p')"
run_mt timeout 120 "$MT" run --mode trace --allow-loss --trace-buffer 192KB -o "$T/fq.%p.mtt" -- "$TR" forkflood 3000000
fqparent=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')
fqkid=$(printf '%s\n' "$err" | sed -n 's/.*trace: [0-9]* events, [1-9][0-9]* lost.* in .*fq\.\([0-9]*\)\.mtt$/\1/p')
if [ -n "$fqkid" ] && [ "$fqkid" != "$fqparent" ]; then
    pass "trace: a forked child that lost events says so ($fqkid)"
else
    fail "trace: a forked child that lost events says so" "$err"
fi

# --- a fork child's dispatcher is the agent's: its writer's mappings are no
# events, and with trace_loss=wait it never waits for its own buffers ----------
run_mt timeout 120 "$MT" run --mode trace --no-loss --trace-buffer 192KB -o "$T/ff.%p.mtt" -- "$TR" forkflood 1000000
expect_eq "trace: fork child flooding with --no-loss: no hang" 0 "$rc"
ffchild=$(ls -S "$T"/ff.*.mtt 2>/dev/null | head -1)
"$MT" analyze --json "$ffchild" >"$T/ff.json" 2>/dev/null
expect_eq "trace: fork child: its events and none of the agent's mappings" "2000000 0" \
    "$(json_get "$T/ff.json" "'%d %d' % (j['allocs'] + j['frees'], j['mmaps'])")"

# --- a fork child's trace holds its own events, not the parent's threads'
# events buffered at the fork (the parent's trace has those) ---------------------
run_mt "$MT" run --mode trace --no-loss -o "$T/fb.%p.mtt" -- "$TR" forkbusy
fbparent=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')
fbkids=""
for f in "$T"/fb.*.mtt; do
    [ "$f" = "$T/fb.$fbparent.mtt" ] && continue
    "$MT" analyze --json "$f" >"$T/fb.json" 2>/dev/null
    fbkids="$fbkids $(json_get "$T/fb.json" "'%d/%d/%d/%s' % (j['allocs'], j['frees'] + j['frees_unknown'], j['leaks']['live_count'] - j['inherited']['live_count'], j['inherited']['replayed'])")"
done
# Its live blocks are its 9 and those it inherited (the busy threads' blocks
# live at the fork, read from the parent's trace), none unknown.
expect_eq "trace: fork of a busy process: each child's trace has its 9 allocations only, and its inherited blocks" \
    " 9/0/9/True 9/0/9/True 9/0/9/True 9/0/9/True 9/0/9/True" "$fbkids"

# The same with a small buffer that loses the parent's events: the children's
# traces do not count the parent's losses.
run_mt "$MT" run --mode trace --allow-loss --trace-buffer 192KB -o "$T/fl.%p.mtt" -- "$TR" forkbusy
flparent=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')
fllost=""
for f in "$T"/fl.*.mtt; do
    [ "$f" = "$T/fl.$flparent.mtt" ] && continue
    "$MT" analyze --json "$f" >"$T/fl.json" 2>/dev/null
    fllost="$fllost $(json_get "$T/fl.json" "int(j['events_lost'] <= 9 - j['allocs'])")"
done
expect_match "trace: fork children's traces count only their own losses (at most their 9)" "^( 1)+$" "$fllost"

# --- chains of forks: each trace's fork meta is its own fork's ------------------
# forkchain (tests/agent/forkchain.c) keeps the books of its blocks (category
# "chain") in every process and writes them in DIR/ledger.PID as it ends:
# "pid ppid live_count live_bytes". fork_check DIR prints one line per
# forked process whose trace disagrees: its meta ppid, or its fork_ns not
# between its parent's and its child's (each fork later than the one that
# made the process), or its analysis (inherited blocks not replayed, a
# free of an unknown block, its blocks at the end not the ledger's, a note
# that the parent's trace cannot be read or is another's).
fork_check() {
    python3 - "$1" "$MT" "$META" <<'PYEOF'
import glob, json, os, subprocess, sys
d, mt, meta = sys.argv[1:4]
books = {}
for l in glob.glob(d + '/ledger.*'):
    pid, ppid, n, b = map(int, open(l).read().split())
    books[pid] = (ppid, n, b)
def fork_ns(pid):
    out = subprocess.run([meta, '%s/c.%d.mtt' % (d, pid), 'fork_ns'], capture_output=True, text=True).stdout
    return int(out.split('=')[1]) if out.startswith('fork_ns=') else None
bad = []
for pid, (ppid, n, b) in sorted(books.items()):
    f = '%s/c.%d.mtt' % (d, pid)
    m = dict(l.split('=', 1) for l in subprocess.run([meta, f, 'ppid', 'began'], capture_output=True,
                                                     text=True).stdout.split('\n') if '=' in l)
    j = json.loads(subprocess.run([mt, 'analyze', '--json', f], capture_output=True, text=True).stdout)
    inh = j['inherited'] or {}
    live = [x for x in j['leaks']['stacks'] if x['category'] == 'chain']
    got = (sum(x['live_count'] for x in live), sum(x['live_bytes'] for x in live))
    note = inh.get('note') or ''
    kids = [k for k, v in books.items() if v[0] == pid]
    if m.get('ppid') != str(ppid) or m.get('began') != 'fork':
        bad.append('%d: meta ppid %s began %s, its parent is %d' % (pid, m.get('ppid'), m.get('began'), ppid))
    for k in kids:
        if not fork_ns(pid) < fork_ns(k):
            bad.append('%d: fork_ns %s, not before its child %d\'s %s' % (pid, fork_ns(pid), k, fork_ns(k)))
    if not inh.get('replayed') or j['frees_unknown'] or got != (n, b):
        bad.append('%d: replayed %s, frees_unknown %d, %d blocks %d bytes at the end; its books: %d %d (%s)' %
                   (pid, inh.get('replayed'), j['frees_unknown'], got[0], got[1], n, b, note))
    if 'cannot be read' in note or 'not the parent' in note:
        bad.append('%d: %s' % (pid, note))
print('%d processes' % len(books))
print('\n'.join(bad))
PYEOF
}
# 20 times in a row, a child that forks at once (before its trace's first
# dispatch) and a grandchild. Before, the child's trace took its fork meta
# when its file began, after its own fork had set them again for the
# grandchild: ppid its own pid, fork_ns the grandchild's, its inherited
# blocks unknown (most rounds of a run).
mkdir -p "$T/chain"
run_mt "$MT" run --mode trace -o "$T/chain/c.%p.mtt" -- "$TBIN/forkchain" "$T/chain" chain 20
expect_eq "trace: a child forking at once, 20 rounds: every child's and grandchild's fork meta and inherited blocks" \
    "40 processes" "$(fork_check "$T/chain")"

# A double fork whose middle process allocates nothing: its trace has no
# event, but the grandchild's names it as its parent's, so it is written
# all the same (began fork, its meta, an end): the grandchild inherits the
# first process's blocks through it. Before, the middle wrote no file and
# the grandchild's inherited blocks were unknown ("the parent's trace
# cannot be read"). Through daemon(1, 1) too: glibc's leaves the middle by
# an _exit no hook saw (the agent's daemon leaves by its own).
for how in middle daemon; do
    mkdir -p "$T/$how"
    run_mt "$MT" run --mode trace -o "$T/$how/c.%p.mtt" -- "$TBIN/forkchain" "$T/$how" "$how"
    for _ in $(seq 500); do # the daemon outlives memtrail run: its ledger, then its exit
        l=$(ls "$T/$how"/ledger.* 2>/dev/null | head -1)
        [ -n "$l" ] && ! kill -0 "$(cut -d' ' -f1 "$l")" 2>/dev/null && break
        sleep 0.02
    done
    gp=$(cut -d' ' -f2 "$l" 2>/dev/null)
    expect_eq "trace: $how: the middle process (a fork child, nothing lost) says nothing" "" \
        "$(printf '%s\n' "$err" | grep "c\.$gp\.mtt")"
    expect_eq "trace: $how: the middle's trace: began fork, complete, no event" "began=fork|True 0" \
        "$("$META" "$T/$how/c.$gp.mtt" began)|$("$MT" analyze --json "$T/$how/c.$gp.mtt" 2>/dev/null |
            json_get /dev/stdin "'%s %d' % (j['complete'], j['events'])")"
    expect_eq "trace: $how: the grandchild inherits the first process's blocks through the middle's trace" \
        "1 processes" "$(fork_check "$T/$how")"
done

# --- exec: the image before keeps its trace, the one after writes its own ------------
run_mt "$MT" run --mode trace --no-loss --follow-exec -o "$T/ex.%p.mtt" -- sh -c "\"$TR\" known; exec \"$TR\" known"
shpid=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')
"$MT" analyze --json "$T/ex.$shpid.mtt" >"$T/ex0.json" 2>/dev/null
"$MT" analyze --json "$T/ex.$shpid.mtt.1" >"$T/ex1.json" 2>/dev/null
expect_eq "trace: exec: the shell's trace is kept, complete" "True" "$(json_get "$T/ex0.json" "j['complete']")"
expect_eq "trace: exec: the exec'd program's trace goes to FILE.1, with its 13 leaks" "True 13" \
    "$(json_get "$T/ex1.json" "'%s %d' % (j['complete'], j['leaks']['live_count'])")"

# --- the agent's numbered names belong to the tree: a fork child's FILE.PID
# (-o without %p), an exec'd image's FILE.1 (same pid); report DIR, html DIR
# and run --follow-exec take them -------------------------------------------------
mkdir -p "$T/rd" "$T/fe"
run_mt "$MT" run --mode trace --no-loss -o "$T/rd/t.mtt" -- "$TBIN/forker" "$T/rd.ledger"
rdparent=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')
rdchild=$(printf '%s' "$out" | sed -n 's/^child pid //p')
expect_eq "trace: a fork child, -o without %p: its trace is FILE.PID" "t.mtt t.mtt.$rdchild" "$(ls "$T/rd" | tr '\n' ' ' | sed 's/ $//')"
run_mt "$MT_ASAN" report --json "$T/rd"
printf '%s' "$out" >"$T/rd.json"
expect_eq "trace: report DIR: the fork child's FILE.PID is a process of the tree, under its parent" \
    "0 $rdparent:None:t.mtt $rdchild:0:t.mtt.$rdchild" \
    "$rc $(json_get "$T/rd.json" "' '.join('%d:%s:%s' % (p['pid'], p['parent_index'], p['file'].split('/')[-1]) for p in j['processes'])")"
expect_eq "trace: report DIR: the child's row is its trace's analysis (live bytes, allocations)" \
    "$("$MT" analyze --json "$T/rd/t.mtt.$rdchild" 2>/dev/null | json_get /dev/stdin "'%d %d' % (j['live_bytes'], j['allocs'])")" \
    "$(json_get "$T/rd.json" "'%d %d' % (j['processes'][1]['live_bytes'], j['processes'][1]['allocs'])")"
run_mt "$MT" html "$T/rd" -o "$T/rd.html"
expect_eq "trace: html DIR: the tree page" "0 memtrail: wrote $T/rd.html (tree page)" "$rc $err"
contains "trace: html DIR: the page holds the fork child's trace" "\"file\": \"$T/rd/t.mtt.$rdchild\"" "$(cat "$T/rd.html")"
run_mt "$MT" run --mode trace --no-loss --follow-exec -o "$T/fe/ex.%p.mtt" -- sh -c "\"$TR\" known; exec \"$TR\" known"
feshell=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p')
contains "trace: run --follow-exec counts the exec'd image's FILE.1 with the child's trace" \
    "memtrail: 2 more traces, from other processes of the tree, in $T/fe" "$err"
contains "trace: run --follow-exec points to the tree" "memtrail: summarise the tree with: memtrail report $T/fe" "$err"
run_mt "$MT_ASAN" report --json "$T/fe"
printf '%s' "$out" >"$T/fe.json"
expect_eq "trace: report DIR of the exec: the shell (ended exec), its child and the exec'd image (FILE.1)" \
    "0 $feshell:exec:ex.$feshell.mtt $feshell:exit:ex.$feshell.mtt.1 1" \
    "$rc $(json_get "$T/fe.json" "' '.join(sorted('%d:%s:%s' % (p['pid'], p['reason'], p['file'].split('/')[-1]) for p in j['processes'] if p['pid'] == $feshell))") \
$(json_get "$T/fe.json" "sum(1 for p in j['processes'] if p['ppid'] == $feshell and p['reason'] == 'exit')")"

# --- losses are counted and shown -------------------------------------------------
run_mt "$MT" run --mode trace --allow-loss --trace-buffer 192KB -o "$T/flood.mtt" -- "$TR" flood 3000000
lost=$(printf '%s' "$err" | sed -n 's/.*trace: [0-9]* events, \([0-9]*\) lost.*/\1/p')
if [ -n "$lost" ] && [ "$lost" -gt 0 ]; then pass "trace: a small buffer loses events, and says so ($lost)"
else fail "trace: a small buffer loses events, and says so" "no loss reported: $err"; fi
run_mt "$MT" analyze --json "$T/flood.mtt"
printf '%s' "$out" >"$T/flood.json"
expect_eq "trace: analyze reports the agent's count of lost events" "$lost" "$(json_get "$T/flood.json" "j['events_lost']")"
expect_eq "trace: written + lost = every event fired (6000000 + start-up)" "1" \
    "$(json_get "$T/flood.json" "int(j['events'] + j['events_lost'] >= 6000000)")"

# --- a trace cut or damaged anywhere still analyses -------------------------------
run_mt "$MT" run --mode trace --no-loss -o "$T/big.mtt" -- "$TR" flood 600000
run_mt "$MT" analyze --json "$T/big.mtt"
full=$(printf '%s' "$out" | json_get /dev/stdin "j['events']")
size=$(stat -c %s "$T/big.mtt")
bad=0 seen_err=0
for cut in $(py "import random; r = random.Random(7); print(' '.join(str(r.randrange(1, $size)) for _ in range(12)))") 0 64 $((size - 1)); do
    head -c "$cut" "$T/big.mtt" >"$T/cut.mtt"
    "$MT_ASAN" analyze --json "$T/cut.mtt" >"$T/cut.json" 2>"$T/cut.err"
    r=$?
    if [ "$r" -ne 0 ] && [ "$r" -ne 1 ]; then bad=1; echo "cut at $cut: exit $r"; cat "$T/cut.err"; continue; fi
    if [ "$cut" -ge 64 ]; then
        ev=$(json_get "$T/cut.json" "j['events']" 2>/dev/null)
        if [ -z "$ev" ] || [ "$ev" -gt "$full" ]; then bad=1; echo "cut at $cut: events '$ev' of $full"; fi
    fi
    if [ "$r" -eq 1 ]; then
        seen_err=1
        grep -Eq 'cut\.mtt' "$T/cut.err" || { bad=1; echo "cut at $cut: error without the file: $(cat "$T/cut.err")"; }
    fi
done
expect_eq "trace: cut at random offsets: a report of what was read, exit 0 or 1, never a crash" 0 "$bad"
expect_eq "trace: a cut trace is reported as an error" 1 "$seen_err"
head -c $((size / 2)) "$T/big.mtt" >"$T/half.mtt"
run_mt "$MT_ASAN" analyze "$T/half.mtt"
expect_eq "trace: half a trace: exit 1" 1 "$rc"
expect_match "trace: half a trace: the error names the file, the chunk and the offset" \
    "half\.mtt.*chunk [0-9]+.*offset [0-9]+" "$err"
expect_match "trace: half a trace: what was read is reported" "Peak" "$out"
cp "$T/big.mtt" "$T/flip.mtt"
flip_byte "$T/flip.mtt" $((size / 3))
run_mt "$MT_ASAN" analyze --json "$T/flip.mtt"
expect_eq "trace: a flipped byte: exit 1" 1 "$rc"
expect_match "trace: a flipped byte: the error names the chunk" "chunk [0-9]+" "$err"
printf 'not a trace at all, just text\n' >"$T/text.mtt"
run_mt "$MT_ASAN" analyze "$T/text.mtt"
expect_eq "trace: not a trace: exit 1" 1 "$rc"

# --- a killed writer leaves every whole chunk ---------------------------------------
MEMTRAIL_OPTIONS="mode=trace:output=$T/killed.mtt" LD_PRELOAD=$AGENT "$TR" flood 2000000000 2>/dev/null &
victim=$!
sleep 3
kill -9 "$victim"
wait "$victim" 2>/dev/null
run_mt "$MT_ASAN" analyze --json "$T/killed.mtt"
printf '%s' "$out" >"$T/killed.json"
expect_eq "trace: killed: analyze reports what was written (exit 0 or 1)" 1 "$([ "$rc" -le 1 ] && echo 1 || echo 0)"
expect_eq "trace: killed: incomplete, with events" "False 1" \
    "$(json_get "$T/killed.json" "'%s %d' % (j['complete'], int(j['events'] > 1000))")"
expect_eq "trace: killed: the count of events lost is unknown, not 0 (events_lost, caveats.lost_percent null)" \
    "None None True" \
    "$(json_get "$T/killed.json" "'%s %s %s' % (j['events_lost'], j['caveats']['lost_percent'], j['caveats']['incomplete'])")"
if command -v chromium >/dev/null; then
    "$MT" html "$T/killed.mtt" -o "$T/killed.html" >/dev/null 2>&1
    dom=$(timeout 60 chromium --headless=new --no-sandbox --disable-gpu --dump-dom "file://$T/killed.html" 2>/dev/null |
        sed 's/<[^>]*>/ /g' | tr -s ' \n' ' ')
    expect_eq "trace: killed: the html page says the count lost is unknown, not '0 events lost'" "1 0" \
        "$(grep -c 'number of events lost is unknown' <<<"$dom") $(grep -c ' 0 events lost' <<<"$dom")"
else
    echo "SKIP trace: killed: no chromium for the html page"
fi

# --- a crash: the trace gets what was buffered, the crash report goes beside it ------
run_mt "$MT" run --mode trace -o "$T/crash.mtt" -- "$TBIN/crasher" segv "$T/crash.ledger"
expect_eq "trace: crash: the program's signal is passed on" 139 "$rc"
expect_match "trace: crash: the crash report goes beside the trace" "crash report written to $T/crash.mtt.mtr" "$err"
run_mt "$MT" analyze --json "$T/crash.mtt"
printf '%s' "$out" >"$T/crash.json"
read -r _ lbytes lcount _ <"$T/crash.ledger"
expect_eq "trace: crash: the trace is complete, and holds the blocks live at the crash" "True $lcount $lbytes" \
    "$(json_get "$T/crash.json" "'%s %d %d' % (j['complete'], sum(x['live_count'] for x in j['leaks']['stacks'] if x['category'] == 'crashcat'), sum(x['live_bytes'] for x in j['leaks']['stacks'] if x['category'] == 'crashcat'))")"

# --- mt_report_write(NULL): the report goes beside the trace, as a crash's -------------
# tracer apireport N leaks 6 x 600 bytes in category apicat and writes a
# report; N threads then write reports without end while main exits. Before,
# the report went to the configured output, the trace's own path: one call's
# report was replaced by the trace (returned 0, went nowhere), and reports
# racing the exit replaced the trace.
for n in 0 4; do
    mkdir -p "$T/api$n"
    run_mt "$MT" run --mode trace --no-loss -o "$T/api$n/r.%p.mtt" -- "$TR" apireport $n
    pid=$(printf '%s' "$err" | sed -n 's/.*trace of \([0-9]*\) written.*/\1/p' | head -1)
    expect_eq "trace: mt_report_write(NULL), $n threads: the program exits 0, the call returns 0" "0 rc=0" "$rc $out"
    run_mt "$MT_ASAN" analyze --json "$T/api$n/r.$pid.mtt"
    printf '%s' "$out" >"$T/api$n.json"
    expect_eq "trace: mt_report_write(NULL), $n threads: the trace stays whole (complete, nothing lost)" "0 True 0" \
        "$rc $(json_get "$T/api$n.json" "'%s %d' % (j['complete'], j['events_lost'])")"
    expect_eq "trace: mt_report_write(NULL), $n threads: the trace holds apicat's 6 x 600 bytes" "6 3600" \
        "$(json_get "$T/api$n.json" "'%d %d' % (sum(x['live_count'] for x in j['leaks']['stacks'] if x['category'] == 'apicat'), sum(x['live_bytes'] for x in j['leaks']['stacks'] if x['category'] == 'apicat'))")"
    run_mt "$MT" report "$T/api$n/r.$pid.mtt.mtr" --json
    printf '%s' "$out" >"$T/api$n.mtr.json"
    expect_eq "trace: mt_report_write(NULL), $n threads: the report is beside the trace (OUTPUT.mtr), reason api, apicat's figures" \
        "0 api live_bytes=3600 live_count=6 allocs=6" \
        "$rc $(json_get "$T/api$n.mtr.json" "j['reason'] + ' ' + ' '.join('%s=%s' % (k, c[k]) for c in j['categories'] if c['name'] == 'apicat' for k in ('live_bytes','live_count','allocs'))")"
done

# --- a library loaded where another was unloaded -------------------------------------
# detail_dl calls f of libdl_a.so (1001 bytes, kept), unloads it, then f of
# libdl_b.so (2002 bytes) loaded at the same addresses, from the same call
# site: the same return addresses. The trace names each block's library.
# dl_blocks NAME ARGS...: runs detail_dl ARGS in trace mode and prints, for
# the leak stacks whose first frame is in a test library, "library
# bytes-per-block bytes" summed by library and block size: a stack holding
# both libraries' blocks shows as a size neither has.
dl_blocks() {
    local name=$1
    shift
    run_mt "$MT" run --mode trace --no-loss -o "$T/$name.mtt" "$@"
    run_mt "$MT_ASAN" analyze --json --top 0 "$T/$name.mtt"
    printf '%s' "$out" >"$T/$name.json"
    python3 -c 'import collections, json, re, sys
j = json.load(open(sys.argv[1]))
c = collections.Counter()
for x in j["leaks"]["stacks"]:
    if x["frames"] and x["live_count"] and re.search(r"/(libdl_[ab]|plugin)\.so$", x["frames"][0]["module"]):
        c[(x["frames"][0]["module"].rsplit("/", 1)[-1], "%g" % (x["live_bytes"] / x["live_count"]))] += x["live_bytes"]
print(" ".join("%s %s %d" % (k[0], k[1], v) for k, v in sorted(c.items())))' "$T/$name.json"
}
for u in cfi libunwind; do
    for cycles in 0 15; do
        expect_eq "trace: dlclose ($u, $cycles cycles): 1001 bytes by libdl_a.so's f, 2002 by libdl_b.so's" \
            "libdl_a.so 1001 1001 libdl_b.so 2002 2002" \
            "$(dl_blocks dl --unwind "$u" -- "$TBIN/detail_dl" "$TBIN/dl" "$cycles")"
    done
done
# a plugin host: libdl_a.so and libdl_b.so loaded in turn, 300 loads
expect_eq "trace: 300 loads in turn: 150 x 1001 bytes in libdl_a.so's f, 150 x 2002 in libdl_b.so's" \
    "libdl_a.so 1001 150150 libdl_b.so 2002 300300" "$(dl_blocks dlalt -- "$TBIN/detail_dl" "$TBIN/dl" 300 alt)"
# unloads, reloads and new sites racing on three threads (test_detail)
expect_eq "trace: dlclose on three threads: f's live bytes by library" \
    "libdl_a.so 1001 500500 libdl_b.so 2002 1001000" "$(dl_blocks dlthreads -- "$TBIN/detail_dl" "$TBIN/dl" 500 threads)"
# one path to two builds in turn (the file at the path is the second build
# by then: the analyzer names the first one's frames module+offset, as its
# build-id differs)
mkdir -p "$T/swap" && cp "$TBIN"/dl/*.so "$T/swap/"
expect_eq "trace: one path to two builds in turn: no stack holds both builds' blocks" \
    "plugin.so 1001 5005 plugin.so 2002 10010" "$(dl_blocks dlswap -- "$TBIN/detail_dl" "$T/swap" 10 swap)"
# more retired stacks than the agent records the frames of, then the
# library back (test_detail): the program and the trace's flush go on
run_mt timeout 300 "$MT" run --mode trace --depth 64 -o "$T/dlrec.mtt" -- "$TBIN/detail_dl" "$TBIN/dl" 18 records
expect_eq "trace: 262,144 stacks retired then the library back: the program exits 0" 0 "$rc"
run_mt "$MT_ASAN" analyze --json "$T/dlrec.mtt"
expect_eq "trace: 262,144 stacks retired then the library back: the trace is complete" "True" \
    "$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["complete"])')"
run_mt "$MT" export "$T/dlalt.mtt" --format folded
expect_eq "trace: export of the plugin host's trace: f's blocks under main;call;f" "450450" \
    "$(awk '$1 ~ /(^|;)main;call;f$/ { s += $2 } END { print s + 0 }' <<<"$out")"

# --- options ------------------------------------------------------------------------
run_mt "$MT" run --mode trace --trace-buffer 1KB -- true
expect_eq "trace: --trace-buffer too small: usage error" 2 "$rc"
run_mt "$MT" run --no-loss -- true
expect_eq "trace: --no-loss without trace mode: usage error" 2 "$rc"
out=$(MEMTRAIL_OPTIONS="mode=trace:trace_loss=maybe" LD_PRELOAD=$AGENT "$TR" known 2>&1)
expect_match "trace: a bad trace_loss is one clear line" "bad value 'maybe' for trace_loss \(accepted: drop, wait\)" "$out"

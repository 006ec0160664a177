# Agent tests on real programs: every count in a report is compared with
# the ledger the test program kept itself (tests/agent/ledger.h), or with
# what the program's own output and the kernel say.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }

# report_json MTR JSON: the CLI's JSON view of a report.
report_json() { "$MT" report --json "$1" >"$2"; }
canary_and_double() { # a report's JSON: "bad_canary double_free"
    json_get "$1" "'%d %d' % (j['errors']['bad_canary'], j['errors']['double_free'])"
}

# compare_ledger NAME JSON LEDGER CATEGORY [fields...]: each ledger field
# must equal the report's value for that category.
compare_ledger() {
    local name=$1 json=$2 ledger=$3 cat=$4
    local line; line=$(grep "^$cat " "$ledger") || { fail "$name" "no ledger line for $cat"; return; }
    set -- $line
    local want="live_bytes=$2 live_count=$3 peak_bytes=$4 allocs=$5 frees=$6 reallocs=$7"
    local got
    got=$(json_get "$json" "' '.join('%s=%s' % (k, c[k]) for c in j['categories'] if c['name'] == '$cat' for k in ('live_bytes','live_count','peak_bytes','allocs','frees','reallocs'))")
    expect_eq "$name" "$want" "$got"
}

# --- exact accounting through every entry point ---------------------------
out=$(MEMTRAIL_OPTIONS="output=$T/exact.mtr" LD_PRELOAD=$AGENT "$TBIN/exact" "$T/exact.ledger" 2>&1)
echo "$out" | grep -E '^(PASS|FAIL) '
report_json "$T/exact.mtr" "$T/exact.json"
compare_ledger "exact: every entry point, to the byte" "$T/exact.json" "$T/exact.ledger" exact
expect_eq "exact: total = sum of program categories" \
    "$(json_get "$T/exact.json" "sum(c['live_bytes'] for c in j['categories'] if c['kind']=='malloc')")" \
    "$(json_get "$T/exact.json" "j['total']['live_bytes']")"
expect_eq "exact: overhead category always present" "1" \
    "$(json_get "$T/exact.json" "sum(1 for c in j['categories'] if c['kind']=='overhead' and c['live_bytes'] > 0)")"
expect_eq "exact: no heap errors" "0 0 0" \
    "$(json_get "$T/exact.json" "'%d %d %d' % (j['errors']['double_free'], j['errors']['bad_canary'], j['errors']['foreign_free'])")"

# --- canary=fit: the canary costs glibc nothing ---------------------------
# For every size from 6 to 2100 bytes, glibc's chunk under the agent's
# block (its own size word) is the chunk glibc gives a request of size +
# 16 (block.h's mt_tail_tight: the canary takes what room there is), or
# of size + 18 with canary=full (the default); the blocks, resized and
# freed with and without a category of the program's own, report no
# canary, and the agent's overhead nets out to what the same program
# leaves without them.
tightfit() { # canary option, [idle|full]: its stdout
    local canary=$1; shift
    GLIBC_TUNABLES=glibc.malloc.tcache_count=0 MEMTRAIL_OPTIONS="output=$T/tf${1:+-$1}.mtr:canary=$canary" \
        LD_PRELOAD=$AGENT "$TBIN/tightfit" "$@" 2>"$T/tf.err"
}
overhead_live() { json_get "$1" "sum(c['live_bytes'] for c in j['categories'] if c['kind'] == 'overhead')"; }
out=$(tightfit fit); rc=$?
expect_eq "tightfit, canary=fit: every size's chunk is glibc's for size + 16" "0 fit 2095 sizes" "$rc $out"
report_json "$T/tf.mtr" "$T/tf.json"
expect_eq "tightfit, canary=fit: no canary reported" "0 0" "$(canary_and_double "$T/tf.json")"
out=$(tightfit fit idle); rc=$?
report_json "$T/tf-idle.mtr" "$T/tf-idle.json"
expect_eq "tightfit, canary=fit: the overhead of 2095 sizes, resized and freed, nets out" \
    "$(overhead_live "$T/tf-idle.json")" "$(overhead_live "$T/tf.json")"
out=$(tightfit full full); rc=$?
expect_eq "tightfit, canary=full: every size's chunk is glibc's for size + 18" "0 fit 2095 sizes" "$rc $out"
report_json "$T/tf-full.mtr" "$T/tf.json"
expect_eq "tightfit, canary=full: no canary reported" "0 0" "$(canary_and_double "$T/tf.json")"

# --- errno: the hooks leave it as the allocator left it -------------------
# In trace mode with the smallest buffer and the slowest encoder (one
# thread, zstd level 19), eight threads produce far faster than it
# encodes, 64 MB of records against the buffers' few MB on any machine:
# they wait for buffers and wake the dispatcher, futex calls that set
# errno on their way (without the engine's restore, 110-120 calls a run
# changed it here). First without the agent: glibc itself must keep it.
out=$("$TBIN/errno_keep" 4 100000 2>&1)
if ! printf '%s' "$out" | grep -q "errno kept"; then
    echo "SKIP errno: glibc alone changes errno on a successful call here: $(echo "$out" | head -1)"
else
    for m in summary detail sample; do
        out=$(MEMTRAIL_OPTIONS="mode=$m:output=$T/errno.$m.out" LD_PRELOAD=$AGENT "$TBIN/errno_keep" 4 100000 2>&1)
        expect_match "errno: $m mode keeps it through 400000 calls" "calls 400000 errno kept" "$(echo "$out" | grep -v '^memtrail:' | tr '\n' ' ')"
    done
    out=$(MEMTRAIL_OPTIONS="mode=trace:trace_buffer=192KB:trace_level=19:trace_threads=1:output=$T/errno.mtt" \
        LD_PRELOAD=$AGENT "$TBIN/errno_keep" 8 100000 2>&1)
    expect_match "errno: trace mode keeps it through 800000 calls, producers waiting for buffers" \
        "calls 800000 errno kept" "$(echo "$out" | grep -v '^memtrail:' | tr '\n' ' ')"
fi

# --- the report on request (mt_report_write) -------------------------------
MEMTRAIL_OPTIONS="output=$T/api-exit.mtr" LD_PRELOAD=$AGENT "$TBIN/exact" "$T/api.ledger" "$T/api-%p.mtr" >/dev/null 2>&1
api=$(ls "$T"/api-*.mtr 2>/dev/null | head -1)
if [ -n "$api" ]; then
    report_json "$api" "$T/api.json"
    expect_eq "api: mt_report_write writes a report with reason api" "api" "$(json_get "$T/api.json" "j['reason']")"
    compare_ledger "api: the on-request report matches the ledger" "$T/api.json" "$T/api.ledger" exact
else
    fail "api: mt_report_write" "no report at $T/api-<pid>.mtr"
fi

# --- realloc's common path while the program has no category of its own ---
# (the quick count), between two on-request reports: the malloc category's
# change is the program's ledger, and every realloc kept the bytes.
MEMTRAIL_OPTIONS="output=$T/rsolo-exit.mtr" LD_PRELOAD=$AGENT "$TBIN/realloc_solo" "$T/rsolo.ledger" \
    "$T/rsolo-a.mtr" "$T/rsolo-b.mtr" | grep -E '^(PASS|FAIL) '
if [ -f "$T/rsolo-a.mtr" ] && [ -f "$T/rsolo-b.mtr" ] && [ -f "$T/rsolo.ledger" ]; then
    report_json "$T/rsolo-a.mtr" "$T/rsolo-a.json"
    report_json "$T/rsolo-b.mtr" "$T/rsolo-b.json"
    fields="' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'malloc' for k in ('live_bytes','live_count','allocs','frees','reallocs'))"
    before=($(json_get "$T/rsolo-a.json" "$fields")) after=($(json_get "$T/rsolo-b.json" "$fields"))
    line=($(grep "^delta " "$T/rsolo.ledger"))
    expect_eq "realloc, no categories: the malloc category moved by the ledger (live, count, allocs, frees, reallocs)" \
        "${line[1]} ${line[2]} ${line[4]} ${line[5]} ${line[6]}" \
        "$((after[0] - before[0])) $((after[1] - before[1])) $((after[2] - before[2])) $((after[3] - before[3])) $((after[4] - before[4]))"
    expect_eq "realloc, no categories: one category only (the quick count's case)" "malloc" \
        "$(json_get "$T/rsolo-b.json" "' '.join(c['name'] for c in j['categories'] if c['kind'] == 'malloc')")"
    report_json "$T/rsolo-exit.mtr" "$T/rsolo-exit.json"
    expect_eq "realloc, no categories: no heap errors (every canary intact at its free)" "0 0 0" \
        "$(json_get "$T/rsolo-exit.json" "'%d %d %d' % (j['errors']['double_free'], j['errors']['bad_canary'], j['errors']['foreign_free'])")"
else
    fail "realloc, no categories" "missing reports or ledger: $(ls "$T" | grep rsolo | tr '\n' ' ')"
fi

# --- threads: 8 threads x 1M mixed operations balance exactly --------------
MEMTRAIL_OPTIONS="output=$T/threads.mtr" LD_PRELOAD=$AGENT "$TBIN/threads" "$T/threads.ledger" 8 1000000 | grep -E '^(PASS|FAIL) '
report_json "$T/threads.mtr" "$T/threads.json"
for cat in t-odd t-even; do
    line=($(grep "^$cat " "$T/threads.ledger"))
    expect_eq "threads: $cat balances (live, count, allocs, frees, reallocs)" \
        "${line[1]} ${line[2]} ${line[4]} ${line[5]} ${line[6]}" \
        "$(json_get "$T/threads.json" "' '.join(str(c[k]) for c in j['categories'] if c['name']=='$cat' for k in ('live_bytes','live_count','allocs','frees','reallocs'))")"
    lo=$(awk '/^max_thread_peak /{print $2}' "$T/threads.ledger")
    hi=$(( ${line[3]} + 8 * 256 * 1024 ))
    peak=$(json_get "$T/threads.json" "[c['peak_bytes'] for c in j['categories'] if c['name']=='$cat'][0]")
    if [ "$peak" -ge "$lo" ] && [ "$peak" -le "$hi" ]; then pass "threads: $cat peak within [largest thread peak, sum of peaks + flush slack]"
    else fail "threads: $cat peak" "$peak not in [$lo, $hi]"; fi
done
compare_ledger "threads: main thread's held blocks exact" "$T/threads.json" "$T/threads.ledger" main-held

# --- fork: the child writes its own report with what it inherited ----------
# _Fork runs no fork handlers, and a raw clone system call is seen by
# neither glibc nor the agent (exec.c's mt_claim_process: the kernel tells
# such a child from a vfork child): each child still writes its report.
for how in fork _Fork clone; do
    rm -f "$T"/fork.*.mtr "$T/fork.ledger"
    out=$(MEMTRAIL_OPTIONS="output=$T/fork.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/forker" "$T/fork.ledger" $how)
    echo "$out" | grep -E '^(PASS|FAIL) '
    child=$(echo "$out" | sed -n 's/^child pid //p')
    parent=$(ls "$T"/fork.*.mtr | grep -v "fork.$child.mtr" | head -1)
    if [ -f "$T/fork.$child.mtr" ] && [ -n "$parent" ]; then
        report_json "$T/fork.$child.mtr" "$T/child.json"
        report_json "$parent" "$T/parent.json"
        sed 's/^child-family /family /' "$T/fork.ledger" >"$T/child.ledger"
        sed 's/^parent-family /family /' "$T/fork.ledger" >"$T/parent.ledger"
        compare_ledger "$how: child report = inherited + own blocks" "$T/child.json" "$T/child.ledger" family
        compare_ledger "$how: parent report lacks the child's blocks" "$T/parent.json" "$T/parent.ledger" family
        compare_ledger "$how: child report has the blocks another parent thread held" "$T/child.json" "$T/fork.ledger" worker
        expect_eq "$how: child report names its own pid" "$child" "$(json_get "$T/child.json" "j['pid']")"
        expect_eq "$how: two reports" "2" "$(ls "$T"/fork.*.mtr | wc -l)"
    else
        fail "$how: one report per process" "expected fork.$child.mtr and the parent's; have: $(ls "$T")"
    fi
    [ "$how" = _Fork ] || continue
    # A _Fork child's trace inherits the parent's blocks at the fork point
    # the wrapper takes: it ends with the live blocks its report counted.
    rm -f "$T"/fork.*.mtt
    out=$(MEMTRAIL_OPTIONS="mode=trace:output=$T/fork.%p.mtt" LD_PRELOAD=$AGENT "$TBIN/forker" "$T/fork.ledger" $how 2>/dev/null)
    tchild=$(echo "$out" | sed -n 's/^child pid //p')
    "$MT" analyze --json "$T/fork.$tchild.mtt" >"$T/tchild.json" 2>/dev/null
    expect_eq "_Fork: the child's trace replays its parent's: live at the end as its report's, nothing unknown" \
        "$(json_get "$T/child.json" "'%d %d' % (j['total']['live_bytes'], j['total']['live_count'])") True None" \
        "$(json_get "$T/tchild.json" "'%d %d %s %s' % (j['live_bytes'], j['live_count'], j['inherited']['replayed'], j['caveats'])")"
done

# --- heap errors are reported, never a crash ---------------------------------
heaperr() { # case, extra options
    MEMTRAIL_OPTIONS="output=$T/he.mtr${2:+:$2}" LD_PRELOAD=$AGENT "$TBIN/heaperr" "$1" >"$T/he.out" 2>"$T/he.err"
}
heaperr double; rc=$?
expect_eq "double free: program continues" "0 survived double" "$rc $(cat "$T/he.out")"
expect_match "double free: reported with size and category" \
    "memtrail: double free: block at 0x[0-9a-f]+, 100 bytes, category victim" "$(cat "$T/he.err")"
report_json "$T/he.mtr" "$T/he.json"
expect_eq "double free: counted in the report" "1" "$(json_get "$T/he.json" "j['errors']['double_free']")"
expect_eq "double free: the block was counted freed once" "0 1 1" \
    "$(json_get "$T/he.json" "' '.join(str(c[k]) for c in j['categories'] if c['name']=='victim' for k in ('live_bytes','allocs','frees'))")"

heaperr double-big; rc=$?
expect_eq "double free of an unmapped 5 MiB block: program continues" "0" "$rc"
expect_match "double free of an unmapped block: reported" "double free \(block already unmapped\)" "$(cat "$T/he.err")"

heap_error() { # label, heaperr's case, what stderr must say
    heaperr "$2"; rc=$?
    expect_eq "$1: program continues" "0 survived $2" "$rc $(cat "$T/he.out")"
    expect_match "$1: reported with size and category" "$3" "$(cat "$T/he.err")"
}

# Blocks whose header glibc reuses once they are freed: the tombstone must
# still tell a second free (glibc alone aborts on these).
for case in tiny:1 largebin:3000 realloc-old:100 realloc-top:307200; do
    name=${case%%:*} size=${case#*:}
    heap_error "double free ($name)" "$name" "double free: block at 0x[0-9a-f]+, $size bytes, category victim"
done

heaperr realloc-fail; rc=$?
expect_eq "realloc refused: program continues, blocks as they were" "0 survived realloc-fail" "$rc $(cat "$T/he.out")"
report_json "$T/he.mtr" "$T/he.json"
expect_eq "realloc refused: their frees report nothing (canaries put back)" "0 0" "$(canary_and_double "$T/he.json")"
# Below 64 KiB, in a program with no category of its own (HEAPERR_SOLO):
# the agent's common path of realloc.
HEAPERR_SOLO=1 heaperr realloc-fail-quick; rc=$?
expect_eq "realloc below 64 KiB refused: program continues, blocks as they were" "0 survived realloc-fail-quick" \
    "$rc $(cat "$T/he.out")"
report_json "$T/he.mtr" "$T/he.json"
expect_eq "realloc below 64 KiB refused: their frees report nothing" "0 0" "$(canary_and_double "$T/he.json")"
expect_eq "realloc below 64 KiB refused: every block counted freed, none resized" "0 0" \
    "$(json_get "$T/he.json" "' '.join(str(c[k]) for c in j['categories'] if c['name']=='malloc' for k in ('live_bytes','reallocs'))")"

# The same errors in a program with no category of its own: its blocks
# take the common paths of malloc, free and realloc, which must leave the
# same tombstones and catch the same overrun.
for case in double:100 tiny:1 largebin:3000 realloc-old:100; do
    name=${case%%:*} size=${case#*:}
    HEAPERR_SOLO=1 heap_error "double free ($name, no category of its own)" "$name" \
        "double free: block at 0x[0-9a-f]+, $size bytes, category malloc"
done
for case in overflow:40 overflow-zero:40 overflow-odd:39 overflow-page:9000 overflow-mapped-small:1000; do
    name=${case%%:*} size=${case#*:}
    HEAPERR_SOLO=1 heap_error "$name (no category of its own)" "$name" \
        "canary after the block was overwritten: block at 0x[0-9a-f]+, $size bytes, category malloc"
    report_json "$T/he.mtr" "$T/he.json"
    expect_eq "$name (no category of its own): counted in the report" "1 0" "$(canary_and_double "$T/he.json")"
done

# One byte past a block: a small one, one whose canary is pages away from
# its header (on the heap), and one in a chunk glibc mapped for itself
# that shares the header's page.
for case in overflow:40 overflow-zero:40 overflow-odd:39 overflow-page:9000 overflow-mapped:100 overflow-mapped-small:1000; do
    name=${case%%:*} size=${case#*:}
    heap_error "$name" "$name" "canary after the block was overwritten: block at 0x[0-9a-f]+, $size bytes, category victim"
    report_json "$T/he.mtr" "$T/he.json"
    expect_eq "$name: counted in the report" "1" "$(json_get "$T/he.json" "j['errors']['bad_canary']")"
done
# canary=fit: one byte past blocks of tight sizes (no canary byte at 40
# and 9000, glibc's next chunk header checked there; one at 39) is caught
# as well; a block whose overrun reached glibc's header is kept, not
# freed, so these programs (whose next chunk is glibc's top) go on.
for solo in 0 1; do
    for case in overflow:40 overflow-zero:40 overflow-odd:39 overflow-page:9000; do
        name=${case%%:*} size=${case#*:}
        if [ $solo = 1 ]; then export HEAPERR_SOLO=1; else unset HEAPERR_SOLO; fi
        heaperr "$name" canary=fit; rc=$?
        expect_eq "$name, canary=fit (solo=$solo): program continues" "0 survived $name" "$rc $(cat "$T/he.out")"
        expect_match "$name, canary=fit (solo=$solo): reported" \
            "canary after the block was overwritten: block at 0x[0-9a-f]+, $size bytes" "$(cat "$T/he.err")"
        report_json "$T/he.mtr" "$T/he.json"
        expect_eq "$name, canary=fit (solo=$solo): counted in the report" "1 0" "$(canary_and_double "$T/he.json")"
    done
done
unset HEAPERR_SOLO
# A block of the common range resized into a chunk glibc maps for itself
# (the realloc's common path keeps the quick bit only off such chunks, so
# its free goes the long way): counted freed once with no error, and its
# second free finds the chunk unmapped.
for solo in 0 1; do
    if [ "$solo" = 1 ]; then HEAPERR_SOLO=1 heaperr realloc-mapped; else heaperr realloc-mapped; fi
    rc=$?
    what="realloc into a mapped chunk" cat=victim
    if [ "$solo" = 1 ]; then what+=" (no category of its own)" cat=malloc; fi
    expect_eq "$what: program continues" "0 survived realloc-mapped" "$rc $(cat "$T/he.out")"
    expect_match "$what: the second free reported" "double free \(block already unmapped\)" "$(cat "$T/he.err")"
    report_json "$T/he.mtr" "$T/he.json"
    expect_eq "$what: no overrun, one double free" "0 1" "$(canary_and_double "$T/he.json")"
    expect_eq "$what: the block counted freed once (nothing left live), resized once" "0 0 1" \
        "$(json_get "$T/he.json" "' '.join(str(x) for c in j['categories'] if c['name']=='$cat' for x in (c['live_bytes'], c['allocs'] - c['frees'], c['reallocs']))")"
done

# Where the canary would commit a page the program never touched (a mapped
# chunk shrunk in place), there is none: the kernel's mincore says the
# page stays out, and the block's free reports nothing.
heaperr mapped-tail; rc=$?
expect_eq "mapped chunk: the page past the block's first the agent leaves uncommitted" \
    "0 first page resident, end page not resident survived mapped-tail" "$rc $(tr '\n' ' ' < "$T/he.out" | sed 's/ $//')"
report_json "$T/he.mtr" "$T/he.json"
expect_eq "mapped chunk: its free reports nothing" "0 0" "$(canary_and_double "$T/he.json")"

heaperr double on_error=abort 2>/dev/null; rc=$?
expect_eq "on_error=abort: the program is aborted (SIGABRT)" "134" "$rc"
expect_match "on_error=abort: says so" "aborting \(on_error=abort\)" "$(cat "$T/he.err")"

heaperr foreign; rc=$?
expect_eq "foreign blocks (from the allocator below): free/realloc/usable size pass through" "0 survived foreign" "$rc $(cat "$T/he.out")"
report_json "$T/he.mtr" "$T/he.json"
expect_eq "foreign blocks: 3 foreign frees, none counted as allocs or frees of ours" "3 0 0" \
    "$(json_get "$T/he.json" "'%d %d %d' % ((j['errors']['foreign_free'],) + tuple(sum(c[k] for c in j['categories'] if c['name']=='victim') for k in ('allocs','frees')))")"

# --- blocks at page offsets 0 and 32 (src/agent/edge.h) ------------------------
# free asks the kernel (mincore of 1 page, a 16-byte process_vm_readv) before
# reading a header there, unless the block is a live one the agent handed
# out. strace counts those probes: only the program's double frees may need
# them (at most 2 each), against the hundreds of blocks at those offsets.
if ! command -v strace >/dev/null 2>&1; then
    echo "SKIP edge blocks: strace is not installed (scripts/deps.sh installs it)"
elif ! strace -o /dev/null true >/dev/null 2>&1; then
    echo "SKIP edge blocks: strace cannot trace here (ptrace refused)"
else
    strace -f -o "$T/edge.strace" -e trace=mincore,process_vm_readv -E LD_PRELOAD="$AGENT" \
        -E MEMTRAIL_OPTIONS="output=$T/edge.mtr" "$TBIN/edgeprog" 20000 20 >"$T/edge.out" 2>"$T/edge.err"
    expect_eq "edge blocks: the program runs to its end" "0" "$?"
    edges=$(awk '/^edge /{print $2}' "$T/edge.out")
    read -r _ _ allocs _ frees _ reallocs _ double _ unmapped < <(grep '^ledger ' "$T/edge.out")
    if [ "${edges:-0}" -ge 100 ]; then pass "edge blocks: at least 100 of the pointers sit at offset 0 or 32 ($edges)"
    else fail "edge blocks: enough pointers at offset 0 or 32" "only '${edges:-none}'"; fi
    # (the probe reads the 16-byte header below a page-aligned pointer;
    # the exit report's own reads of whole pages are not probes)
    probes=$(grep -c -E 'mincore\(0x[0-9a-f]+, 1,|process_vm_readv\(.*\[\{iov_base=0x[0-9a-f]*ff0, iov_len=16\}\], 1, 0\)' "$T/edge.strace")
    if [ "$probes" -le $((2 * ${double:-0})) ]; then pass "edge blocks: frees of live blocks ask the kernel nothing ($probes probes, for the $double double frees)"
    else fail "edge blocks: probes" "$probes mincore/process_vm_readv probes for $edges edge pointers (at most 2 for each of the ${double:-?} double frees)"; fi
    expect_eq "edge blocks: every double free reported (unmapped, moved by mremap, page-aligned, heap)" \
        "${double:-?}" "$(grep -c 'memtrail: double free' "$T/edge.err")"
    expect_eq "edge blocks: those of blocks glibc had mapped reported as already unmapped" \
        "${unmapped:-?}" "$(grep -c 'memtrail: double free (block already unmapped)' "$T/edge.err")"
    report_json "$T/edge.mtr" "$T/edge.json"
    expect_eq "edge blocks: the report's edge category equals the program's ledger, errors counted" \
        "0 $allocs $frees $reallocs $double" \
        "$(json_get "$T/edge.json" "' '.join(str(c[k]) for c in j['categories'] if c['name']=='edge' for k in ('live_bytes','allocs','frees','reallocs')) + ' %d' % j['errors']['double_free']")"
fi

# --- ways out of the process ---------------------------------------------------
MEMTRAIL_OPTIONS="output=$T/alt.mtr" LD_PRELOAD=$AGENT "$TBIN/exit_paths" altstack; rc=$?
expect_eq "_exit from a handler on an 8 KiB alternate stack: exit status kept" "3" "$rc"
if [ -f "$T/alt.mtr" ]; then
    report_json "$T/alt.mtr" "$T/alt.json"
    expect_eq "_exit from a handler on an 8 KiB alternate stack: complete report" "True exit" \
        "$(json_get "$T/alt.json" "'%s %s' % (j['complete'], j['reason'])")"
else
    fail "_exit from a handler on an 8 KiB alternate stack: report" "none written"
fi
for opts in "output=$T/compat.mtr" "mode=off"; do
    label=${opts%%=*}
    out=$(MEMTRAIL_OPTIONS="$opts" LD_PRELOAD=$AGENT "$TBIN/exit_paths" compat 2>&1)
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | while IFS= read -r line; do echo "$line [$label]"; done
done
# A library the program links frees in its destructor what its constructor
# allocated: the exit report must come after that destructor.
printf '#include <stdlib.h>\nstatic void *cache;\n__attribute__((constructor)) static void c(void) { cache = malloc(12345); }\n__attribute__((destructor)) static void d(void) { free(cache); }\n' >"$T/libd.c"
printf 'int main(void) { return 0; }\n' >"$T/usesd.c"
if cc -shared -fPIC -o "$T/libd.so" "$T/libd.c" && cc -o "$T/usesd" "$T/usesd.c" -Wl,--no-as-needed -L"$T" -ld -Wl,-rpath,"$T"; then
    MEMTRAIL_OPTIONS="output=$T/d.mtr" LD_PRELOAD=$AGENT "$T/usesd"
    report_json "$T/d.mtr" "$T/d.json"
    expect_eq "exit report comes after the destructors of linked libraries" "0 0 12345" \
        "$(json_get "$T/d.json" "'%d %d %d' % (j['total']['live_bytes'], j['total']['live_count'], j['total']['peak_bytes'])")"
else
    fail "library destructor test" "could not build it"
fi
mkdir -p "$T/fl"
timeout 120 env MEMTRAIL_OPTIONS="output=$T/fl/%p.mtr" LD_PRELOAD=$AGENT "$TBIN/forklock" | grep -E '^(PASS|FAIL) '

# --- bad options: one clear line, the program runs untracked ----------------
badopt() { # MEMTRAIL_OPTIONS value, expected message regex
    rm -f "$T"/bad.*
    local err rc
    err=$(cd "$T" && MEMTRAIL_OPTIONS="$1" LD_PRELOAD=$AGENT "$TBIN/heaperr" foreign 2>&1 >/dev/null); rc=$?
    expect_eq "bad option '$1': program runs normally" "0" "$rc"
    expect_match "bad option '$1': clear message" "$2" "$err"
    expect_eq "bad option '$1': one line" "1" "$(printf '%s\n' "$err" | grep -c memtrail)"
    expect_eq "bad option '$1': untracked (no report)" "" "$(cd "$T" && ls memtrail.*.mtr 2>/dev/null)"
}
badopt "mode=bogus" "bad value 'bogus' for mode \(accepted: summary, detail, sample, trace, off\); running untracked"
badopt "output=x.mtr:colour=red" "unknown key 'colour' \(accepted: mode, depth, unwind, output, trace_buffer, [^)]*\); running untracked"
badopt "on_error=explode" "bad value 'explode' for on_error \(accepted: report, abort\)"
badopt "mode" "'mode' is not key=value"
out=$(cd "$T" && MEMTRAIL_OPTIONS="mode=off" LD_PRELOAD=$AGENT "$TBIN/exact" "$T/off.ledger" 2>&1)
expect_match "mode=off: the API says inactive, nothing written" "exact.c:[0-9]+: mt_tag_push failed \(agent active: 0\)" "$out"
expect_eq "mode=off: no report" "" "$(cd "$T" && ls memtrail.*.mtr 2>/dev/null)"
out=$(cd "$T" && MEMTRAIL_OPTIONS='output=a\:b.%p.mtr' LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_eq "output: '\\:' escapes a colon, %p expands" "1" "$(cd "$T" && ls a:b.*.mtr 2>/dev/null | wc -l)"

# --- real programs -------------------------------------------------------------
if command -v sqlite3 >/dev/null; then
    sql="$MT_ROOT/../shared/bench/workload.sql"
    [ -f "$sql" ] || { printf 'CREATE TABLE t(x);\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<50000) INSERT INTO t SELECT printf("%%08d",x) FROM c;\nSELECT count(*), sum(length(x)) FROM t;\n' >"$T/w.sql"; sql=$T/w.sql; }
    bare=$(sqlite3 :memory: ".read $sql" 2>&1)
    traced=$(MEMTRAIL_OPTIONS="output=$T/sq.mtr" LD_PRELOAD=$AGENT sqlite3 :memory: ".read $sql" 2>&1)
    expect_eq "sqlite3: same output under the agent" "$bare" "$traced"
    report_json "$T/sq.mtr" "$T/sq.json"
    allocs=$(json_get "$T/sq.json" "j['total']['allocs']")
    if [ "$allocs" -gt 100000 ]; then pass "sqlite3: allocations tracked ($allocs)"; else fail "sqlite3: allocations tracked" "only $allocs"; fi
    # SQLite counts its own heap (.stats): its peak is a lower bound of ours;
    # ours may add SQLite's 8-byte size prefix per block and the shell's own
    # small allocations.
    stats=$(MEMTRAIL_OPTIONS="output=$T/st.mtr" LD_PRELOAD=$AGENT sqlite3 :memory: ".stats on" ".read $sql" 2>&1)
    sq_max=$(printf '%s\n' "$stats" | sed -n 's/^Memory Used: *[0-9]* (max \([0-9]*\)) bytes/\1/p' | sort -n | tail -1)
    sq_cnt=$(printf '%s\n' "$stats" | sed -n 's/^Number of Outstanding Allocations: *[0-9]* (max \([0-9]*\))/\1/p' | sort -n | tail -1)
    report_json "$T/st.mtr" "$T/st.json"
    peak=$(json_get "$T/st.json" "j['total']['peak_bytes']")
    if [ -n "$sq_max" ] && [ -n "$sq_cnt" ] && [ "$peak" -ge "$sq_max" ] && [ "$peak" -le $((sq_max + 8 * sq_cnt + 262144)) ]; then
        pass "sqlite3: peak $peak within SQLite's own high-water mark $sq_max + prefixes of $sq_cnt blocks + 256 KiB"
    else
        fail "sqlite3: peak against SQLite's own statistics" "peak=$peak sqlite max=$sq_max outstanding max=$sq_cnt"
    fi
else
    fail "sqlite3" "sqlite3 is not installed (scripts/deps.sh installs it)"
fi
# The interpreter itself: a wrapper script that execs it (pyenv's shim)
# would leave it untracked, since exec'd programs are not followed by default.
py=$(python3 -c 'import sys; print(sys.executable)')
pyprog='import json; print(len(json.dumps([{"k": i} for i in range(100000)])))'
bare=$("$py" -c "$pyprog" 2>&1)
out=$(MEMTRAIL_OPTIONS="output=$T/py.%p.mtr" LD_PRELOAD=$AGENT "$py" -c "$pyprog" 2>&1)
expect_eq "python3: same output under the agent" "$bare" "$out"
n=$(ls "$T"/py.*.mtr 2>/dev/null | wc -l)
if [ "$n" -ge 1 ]; then pass "python3: report written"; else fail "python3: report written" "none"; fi
expect_match "python3: the report is the interpreter's" "^exe .*python" "$(grep -h '^exe ' "$T"/py.*.mtr 2>/dev/null | head -1)"
if [ -x "$TBIN/cxx_new" ]; then
    out=$(MEMTRAIL_OPTIONS="output=$T/cxx.mtr" LD_PRELOAD=$AGENT "$TBIN/cxx_new" "$T/cxx.ledger" 2>&1)
    echo "$out" | grep -E '^(PASS|FAIL) '
    report_json "$T/cxx.mtr" "$T/cxx.json"
    compare_ledger "c++: new/delete, new[]/delete[], aligned new reach the agent" "$T/cxx.json" "$T/cxx.ledger" cxx
fi

# --- the peak across threads: within 1% of the true one, any thread count --
# With PEAK_SOLO, the same with no category of the program's own: the
# threads count on the hooks' common paths, in malloc's slot, with libc's
# few blocks (the threads' own, stdio's) inside the 1%.
for solo in "" 1; do
    for n in 2 8 64; do
        if [ -n "$solo" ]; then cat=malloc what=", no category of its own"; else cat=pk what=""; fi
        want=$(PEAK_SOLO=$solo MEMTRAIL_OPTIONS="output=$T/pk.$n.mtr" LD_PRELOAD=$AGENT "$TBIN/peak" "$n" | awk '{print $2}')
        "$MT" report --json "$T/pk.$n.mtr" >"$T/pk.json"
        got=$(json_get "$T/pk.json" "[c['peak_bytes'] for c in j['categories'] if c['name']=='$cat'][0]")
        if python3 -c "import sys; sys.exit(0 if abs($got - $want) <= $want / 100 else 1)"; then
            pass "peak, $n threads at a barrier$what: $got within 1% of the true $want"
        else
            fail "peak, $n threads at a barrier$what" "$got, true $want"
        fi
        [ -n "$solo" ] && continue
        # The program's total at the barrier: pk's blocks and the threads'
        # arrays of pointers (in malloc's category), counted on the common
        # paths of a program with categories of its own (the total's slot
        # as well as the category's).
        total_want=$((want + n * 8 * (200000 / 50)))
        got=$(json_get "$T/pk.json" "j['total']['peak_bytes']")
        if python3 -c "import sys; sys.exit(0 if abs($got - $total_want) <= $total_want / 100 else 1)"; then
            pass "peak, $n threads at a barrier: the total's $got within 1% of the true $total_want"
        else
            fail "peak, $n threads at a barrier: the total's" "$got, true $total_want"
        fi
    done
done

# --- the agent's own overhead: its peak, when blocks are mostly overhead ----
# zeroalloc: 100000 malloc(0) live at once (a 16-byte header and 8 bytes of
# room each: 2400000 bytes of overhead), while the program's bytes stay 0.
MEMTRAIL_OPTIONS="output=$T/za.mtr" LD_PRELOAD=$AGENT "$TBIN/zeroalloc"
"$MT" report --json "$T/za.mtr" >"$T/za.json"
got=$(json_get "$T/za.json" "[c['peak_bytes'] for c in j['categories'] if c['name']=='memtrail'][0]")
if [ "$got" -ge 2400000 ]; then
    pass "overhead peak: $got >= the 100000 malloc(0) blocks' 2400000 bytes"
else
    fail "overhead peak" "$got < 2400000 (the 100000 malloc(0) blocks' headers)"
fi

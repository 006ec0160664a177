#!/usr/bin/env bash
# `memtrail diff`, the virtual memory fields of `memtrail report`, and the
# process-tree summary of `memtrail report DIR|FILE...`. Fixtures are
# written by hand following docs/report-format.md; the truth is deltas
# computed by hand and, for every field, by an independent python3 reader
# of the same fixtures; real reports come from a test program that calls
# mt_report_write() at chosen moments and keeps its own ledger, and from
# the forker test program (a parent and a child). Every CLI call runs the
# ASan+UBSan build.
. "$(dirname "$0")/../lib.sh"

[ -x "$MT_ASAN" ] || { fail diff-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }

lacks() {
    if printf '%s' "$3" | grep -Fq -- "$2"; then fail "$1" "unexpected '$2' in: $3"; else pass "$1"; fi
}
# jq_py NAME EXPECTED FILE EXPR: a python3 expression over the JSON in FILE.
jq_py() { expect_eq "$1" "$2" "$(json_get "$3" "$4" 2>&1)"; }

# --- fixtures: a baseline and a later snapshot of one process ----------------
# base: written by mt_report_write() at 3 s; new: at exit at 5 s.
cat >"$T/base.mtr" <<'EOF'
memtrail-report 1
pid 100
ppid 99
exe /usr/bin/app
cmdline app --build\s1
mode summary
start_ns 1000000000
end_ns 3000000000
reason api
category malloc kind=malloc live_bytes=10240 live_count=10 peak_bytes=20480 allocs=100 frees=90 reallocs=5 reserved=0 committed=0 resident=0 mappings=0
category parser kind=malloc live_bytes=4096 live_count=4 peak_bytes=8192 allocs=40 frees=36 reallocs=0 reserved=1048576 committed=524288 resident=65536 mappings=2
category cache kind=malloc live_bytes=2048 live_count=1 peak_bytes=2048 allocs=1 frees=0 reallocs=0 reserved=0 committed=0 resident=0 mappings=0
category memtrail kind=overhead live_bytes=480 live_count=15 peak_bytes=960 allocs=141 frees=126 reallocs=0 reserved=262144 committed=131072 resident=65536 mappings=3
category heap kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 reserved=8388608 committed=4194304 resident=2097152 mappings=2
category stacks kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 reserved=8388608 committed=8384512 resident=32768 mappings=1
category other kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 reserved=8192 committed=8192 resident=4096 mappings=1
total live_bytes=16384 live_count=15 peak_bytes=30720 allocs=141 frees=126 reallocs=5
process rss_bytes=2269184 peak_rss_bytes=3145728 reserved=18096128 committed=13242368 resident=2265088
errors double_free=0 bad_canary=0 foreign_free=0
end
EOF
cat >"$T/new.mtr" <<'EOF'
memtrail-report 1
pid 100
ppid 99
exe /usr/bin/app
cmdline app --build\s1
mode summary
start_ns 1000000000
end_ns 5000000000
reason exit
category malloc kind=malloc live_bytes=20480 live_count=15 peak_bytes=40960 allocs=150 frees=135 reallocs=7 reserved=0 committed=0 resident=0 mappings=0
category parser kind=malloc live_bytes=0 live_count=0 peak_bytes=8192 allocs=44 frees=44 reallocs=0 reserved=2097152 committed=1048576 resident=131072 mappings=3
category memtrail kind=overhead live_bytes=720 live_count=18 peak_bytes=960 allocs=197 frees=179 reallocs=0 reserved=262144 committed=131072 resident=98304 mappings=3
category heap kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 reserved=16777216 committed=8388608 resident=4194304 mappings=3
category stacks kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 reserved=8388608 committed=8384512 resident=32768 mappings=1
category other kind=vm live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0 reserved=8192 committed=8192 resident=8192 mappings=1
category fresh kind=malloc live_bytes=3072 live_count=3 peak_bytes=3072 allocs=3 frees=0 reallocs=0 reserved=0 committed=0 resident=0 mappings=0
total live_bytes=23552 live_count=18 peak_bytes=40960 allocs=197 frees=179 reallocs=7
process rss_bytes=4476928 peak_rss_bytes=5242880 reserved=27533312 committed=17960960 resident=4472832
errors double_free=0 bad_canary=0 foreign_free=1
end
EOF

# --- report: VM fields in text and JSON --------------------------------------
run_mt "$MT_ASAN" report "$T/new.mtr"
expect_eq "report vm: exits 0" 0 "$rc"
# Sums of the categories: reserved 27533312 = 26888KB, committed 17960960 =
# 17540KB, resident 4464640 = 4360KB.
contains "report vm: total line" "Total: reserved=26888KB, committed=17540KB, resident=4360KB" "$out"
contains "report vm: malloc totals" "       malloc: live=23KB (18 blocks), peak=40KB, allocs=197, frees=179, reallocs=7" "$out"
contains "report vm: parser block" "-                    parser (reserved=2048KB, committed=1024KB, resident=128KB, mappings=3)" "$out"
contains "report vm: heap block" "-                      heap (reserved=16384KB, committed=8192KB, resident=4096KB, mappings=3)" "$out"
# explained = resident of all but other = 131072+98304+4194304+32768 = 4456448
# = 4352KB; 4456448 / 4476928 = 99.54%.
contains "report vm: process line" "Process: rss=4372KB, peak rss=5120KB (reserved=26888KB, committed=17540KB, resident=4368KB)" "$out"
contains "report vm: explained share" "the categories explain 4352KB of it (99.5%; 'other' not counted)" "$out"
"$MT_ASAN" report --json "$T/new.mtr" >"$T/new.json"
jq_py "report vm json: parser VM fields" "2097152 1048576 131072 3" "$T/new.json" \
    "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'parser' for k in ('reserved_bytes','committed_bytes','resident_bytes','mappings'))"
jq_py "report vm json: process" "4476928 5242880 27533312 17960960 4472832 4456448" "$T/new.json" \
    "' '.join(str(j['process'][k]) for k in ('rss_bytes','peak_rss_bytes','reserved_bytes','committed_bytes','resident_bytes','explained_bytes'))"
jq_py "report vm json: total sums" "27533312 17960960 4464640" "$T/new.json" \
    "' '.join(str(j['total'][k]) for k in ('reserved_bytes','committed_bytes','resident_bytes'))"
sed -e 's/ reserved=.*$//' -e '/^process /d' "$T/new.mtr" >"$T/old.mtr"
"$MT_ASAN" report --json "$T/old.mtr" >"$T/old.json"
jq_py "report old json: process null, resident null, reserved = live" "None None 20480" "$T/old.json" \
    "' '.join(str(x) for x in (j['process'], j['categories'][0]['resident_bytes'], j['categories'][0]['reserved_bytes']))"

# --- diff: text against hand-computed deltas ---------------------------------
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/new.mtr"
expect_eq "diff: exits 0" 0 "$rc"
expect_eq "diff: nothing on stderr" "" "$err"
contains "diff: names both sides" "base: pid 100, app '--build 1' (written by mt_report_write(), after 2.000s)" "$out"
contains "diff: new side" "new:  pid 100, app '--build 1' (written at exit, after 4.000s)" "$out"
contains "diff: time between" "(new written 2.000s after base)" "$out"
# Totals: reserved 18096128 -> 27533312 (+9437184 = +9216KB), committed
# 13242368 -> 17960960 (+4718592 = +4608KB), resident 2265088 -> 4464640
# (+2199552 = +2148KB).
contains "diff: total VM" "Total: reserved=26888KB +9216KB, committed=17540KB +4608KB, resident=4360KB +2148KB" "$out"
contains "diff: total malloc" "malloc: live=23KB +7KB (18 +3 blocks), peak=40KB +10KB, allocs=197 +56, frees=179 +53, reallocs=7 +2" "$out"
contains "diff: parser header" "-                    parser (reserved=2048KB +1024KB, committed=1024KB +512KB, resident=128KB +64KB, mappings=3 +1)" "$out"
contains "diff: parser malloc" "(malloc=0KB -4KB #0 -4) (peak=8KB)" "$out"
contains "diff: parser counts" "(allocs=44 +4 frees=44 +8)" "$out"
contains "diff: malloc counts with reallocs" "(allocs=150 +50 frees=135 +45 reallocs=7 +2)" "$out"
contains "diff: gone category" "-                     cache (reserved=0KB, committed=0KB, resident=0KB, mappings=0)
                            (gone: not in the new report)
                            (malloc=0KB -2KB #0 -1) (peak=0KB -2KB)" "$out"
contains "diff: new category" "-                     fresh (reserved=0KB, committed=0KB, resident=0KB, mappings=0)
                            (new: not in the base report)
                            (malloc=3KB +3KB #3 +3) (peak=3KB +3KB)" "$out"
contains "diff: unchanged category without deltas" "-                    stacks (reserved=8192KB, committed=8188KB, resident=32KB, mappings=1)" "$out"
contains "diff: process" "Process: rss=4372KB +2156KB, peak rss=5120KB +2048KB" "$out"
contains "diff: errors" "foreign_free=1 +1" "$out"
order=$(printf '%s\n' "$out" | grep -E '^- ' | awk '{print $2}' | tr '\n' ' ')
# |change of committed + live|: heap 4194304, parser 520192, malloc 10240,
# fresh 3072, cache 2048, stacks and other 0 (by size now); memtrail last.
expect_eq "diff: ordered by size of change, overhead last" "heap parser malloc fresh cache stacks other memtrail " "$order"
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/new.mtr" --scale MB
# 27533312 B = 26.26MB (+9437184 = 9MB), 17960960 = 17.13MB (+4718592 = 4.5MB),
# 4464640 = 4.258MB (+2199552 = 2.098MB)
contains "diff: --scale MB" "Total: reserved=26.3MB +9MB, committed=17.1MB +4.50MB, resident=4.26MB +2.10MB" "$out"

# --- diff: JSON, every field against an independent reader ------------------
cat >"$T/ref.py" <<'EOF'
# Independent reference: reads two .mtr files and checks memtrail diff's JSON
# field by field. Prints "ok" or the first mismatch.
import json, sys
def read(path):
    cats, total, proc = {}, None, None
    order = []
    for line in open(path):
        w = line.split()
        if not w: continue
        if w[0] == 'category':
            d = dict(x.split('=', 1) for x in w[2:])
            cats[w[1]] = {k: (v if k == 'kind' else int(v)) for k, v in d.items()}
            order.append(w[1])
        elif w[0] == 'total':
            total = {k: int(v) for k, v in (x.split('=', 1) for x in w[1:])}
        elif w[0] == 'process':
            proc = {k: int(v) for k, v in (x.split('=', 1) for x in w[1:])}
    return cats, order, total, proc
bc, bo, bt, bp = read(sys.argv[1])
nc, no, nt, np_ = read(sys.argv[2])
j = json.load(open(sys.argv[3]))
problems = []
def same(what, got, want):
    if got != want: problems.append('%s: got %r, want %r' % (what, got, want))
names = no + [n for n in bo if n not in nc]
same('category order', [c['name'] for c in j['categories']], names)
# VM fields: a value when the new report has them, a change when both do.
bvm = any('reserved' in c for c in bc.values()); nvm = any('reserved' in c for c in nc.values())
# the file's reserved=/committed=/resident= are the JSON's *_bytes
ren = {'reserved': 'reserved_bytes', 'committed': 'committed_bytes', 'resident': 'resident_bytes'}
for c in j['categories']:
    n = c['name']
    b, cur = bc.get(n, {}), nc.get(n, {})
    same(n + ' status', c['status'], 'both' if n in bc and n in nc else 'new' if n in nc else 'gone')
    same(n + ' kind', c['kind'], (cur or b)['kind'])
    for k in ('live_bytes','live_count','peak_bytes','allocs','frees','reallocs','reserved','committed','resident','mappings'):
        jk = ren.get(k, k)
        vm = k in ('reserved','committed','resident','mappings')
        same(n + ' ' + jk, c[jk], cur.get(k, 0) if nvm or not vm else None)
        same(n + ' ' + jk + '_delta', c[jk + '_delta'], cur.get(k, 0) - b.get(k, 0) if (nvm and bvm) or not vm else None)
for k in ('live_bytes','live_count','peak_bytes','allocs','frees','reallocs'):
    same('total ' + k, j['total'][k], nt[k]); same('total delta ' + k, j['total'][k + '_delta'], nt[k] - bt[k])
for k in ('reserved','committed','resident'):
    s_new = sum(c.get(k, 0) for c in nc.values()); s_base = sum(c.get(k, 0) for c in bc.values())
    same('total ' + k, j['total'][ren.get(k, k)], s_new if nvm else None)
    same('total delta ' + k, j['total'][ren.get(k, k) + '_delta'], s_new - s_base if nvm and bvm else None)
if np_ is None:
    same('process', j['process'], None)
else:
    for k in ('rss_bytes','peak_rss_bytes','reserved','committed','resident'):
        jk = ren.get(k, k)
        same('process ' + k, j['process'][jk], np_[k])
        same('process delta ' + k, j['process'][jk + '_delta'], np_[k] - bp[k] if bp else None)
print('ok' if not problems else problems[0] + ' (%d problems)' % len(problems))
EOF
"$MT_ASAN" diff --json "$T/base.mtr" "$T/new.mtr" >"$T/d.json" 2>"$T/err"
expect_eq "diff json: exits 0" 0 "$?"
expect_eq "diff json: every field matches the reference reader" ok "$(python3 "$T/ref.py" "$T/base.mtr" "$T/new.mtr" "$T/d.json" 2>&1)"
jq_py "diff json: hand-computed parser deltas" "0 -4096 3 1 1048576 524288 65536" "$T/d.json" \
    "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'parser' for k in ('live_bytes','live_bytes_delta','mappings','mappings_delta','reserved_bytes_delta','committed_bytes_delta','resident_bytes_delta'))"
jq_py "diff json: gone category" "gone 0 -2048 -1" "$T/d.json" \
    "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'cache' for k in ('status','live_bytes','live_bytes_delta','live_count_delta'))"
jq_py "diff json: new category" "new 3072 3072" "$T/d.json" \
    "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'fresh' for k in ('status','live_bytes','live_bytes_delta'))"
jq_py "diff json: sides" "100 100 3000000000 5000000000 api exit" "$T/d.json" \
    "' '.join(str(x) for x in (j['base']['pid'], j['new']['pid'], j['base']['end_ns'], j['new']['end_ns'], j['base']['reason'], j['new']['reason']))"
jq_py "diff json: process deltas" "2207744 2097152" "$T/d.json" \
    "str(j['process']['rss_bytes_delta']) + ' ' + str(j['process']['peak_rss_bytes_delta'])"
"$MT_ASAN" diff --json "$T/new.mtr" "$T/base.mtr" >"$T/d2.json" 2>/dev/null
expect_eq "diff json: reversed diff matches the reference too" ok "$(python3 "$T/ref.py" "$T/new.mtr" "$T/base.mtr" "$T/d2.json" 2>&1)"

# Two reports without VM fields (an older agent): heap figures only.
sed -e 's/ reserved=.*$//' -e '/^process /d' "$T/base.mtr" >"$T/old_base.mtr"
run_mt "$MT_ASAN" diff "$T/old_base.mtr" "$T/old.mtr"
expect_eq "diff old: exits 0" 0 "$rc"
contains "diff old: heap figures" "-                    malloc (reserved=20KB +10KB, committed=20KB +10KB)" "$out"
lacks "diff old: no VM" "resident" "$out"
"$MT_ASAN" diff --json "$T/old_base.mtr" "$T/old.mtr" >"$T/d3.json"
jq_py "diff old json: VM null, process null" "None None None" "$T/d3.json" \
    "' '.join(str(x) for x in (j['categories'][0]['reserved_bytes'], j['categories'][0]['reserved_bytes_delta'], j['process']))"

# --- diff: usage and bad input -----------------------------------------------
run_mt "$MT_ASAN" diff --help
expect_eq "diff usage: --help exits 0" 0 "$rc"
contains "diff usage: --help" "usage: memtrail diff BASE NEW" "$out"
run_mt "$MT_ASAN" help diff
contains "diff usage: help diff" "usage: memtrail diff BASE NEW" "$out"
run_mt "$MT_ASAN" --help
contains "diff usage: listed in top-level help" "  diff " "$out"
run_mt "$MT_ASAN" diff "$T/base.mtr"
expect_eq "diff usage: one report exits 2" 2 "$rc"
contains "diff usage: one report message" "memtrail: missing the NEW report" "$err"
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/new.mtr" "$T/new.mtr"
expect_eq "diff usage: three reports exit 2" 2 "$rc"
run_mt "$MT_ASAN" diff --scale TB "$T/base.mtr" "$T/new.mtr"
expect_eq "diff usage: bad scale exits 2" 2 "$rc"
run_mt "$MT_ASAN" diff --frob "$T/base.mtr" "$T/new.mtr"
expect_eq "diff usage: unknown option exits 2" 2 "$rc"
contains "diff usage: hint" "memtrail diff --help" "$err"

run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/missing.mtr"
expect_eq "diff bad: missing file exits 1" 1 "$rc"
expect_eq "diff bad: missing file is one line naming it" "memtrail: $T/missing.mtr: cannot open: No such file or directory" "$err"
expect_eq "diff bad: missing file prints no diff" "" "$out"
run_mt "$MT_ASAN" diff /bin/sh "$T/new.mtr"
expect_eq "diff bad: not a report exits 1" 1 "$rc"
expect_eq "diff bad: not a report message" "memtrail: /bin/sh: not a memtrail report (bad header)" "$err"
sed 's/^category parser kind=malloc live_bytes=0 /category parser kind=malloc live_bytes=zero /' "$T/new.mtr" >"$T/corrupt.mtr"
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/corrupt.mtr"
expect_eq "diff bad: corrupt exits 1" 1 "$rc"
expect_eq "diff bad: corrupt names file and line" \
    "memtrail: $T/corrupt.mtr: line 11: bad value 'zero' for live_bytes (expected an integer)" "$err"
expect_eq "diff bad: corrupt prints no diff" "" "$out"
head -n 12 "$T/base.mtr" >"$T/cut.mtr"
run_mt "$MT_ASAN" diff "$T/cut.mtr" "$T/new.mtr"
expect_eq "diff truncated: exits 1" 1 "$rc"
expect_eq "diff truncated: warns naming file and line" "memtrail: $T/cut.mtr: truncated after line 12 (no end marker)" "$err"
contains "diff truncated: diffs what it holds" "(malloc=20KB +10KB #15 +5) (peak=40KB +20KB)" "$out"
contains "diff truncated: cache was read" "cache (" "$out"
contains "diff truncated: says so" "Incomplete: the base report was cut short after line 12" "$out"
contains "diff truncated: total unknown" "not in the base report (the file was cut short before it)" "$out"
"$MT_ASAN" diff --json "$T/cut.mtr" "$T/new.mtr" >"$T/d4.json" 2>/dev/null
expect_eq "diff truncated: json exits 1" 1 "$?"
jq_py "diff truncated json: base incomplete, total deltas null, heap new" "False None new" "$T/d4.json" \
    "' '.join(str(x) for x in (j['base']['complete'], j['total']['live_bytes_delta'], [c['status'] for c in j['categories'] if c['name'] == 'heap'][0]))"
"$MT_ASAN" diff - "$T/new.mtr" <"$T/base.mtr" >"$T/d5.json" --json
expect_eq "diff: base from stdin" ok "$(python3 "$T/ref.py" "$T/base.mtr" "$T/new.mtr" "$T/d5.json" 2>&1)"

# --- diff: a real baseline and later snapshot of one process ----------------
# The program writes a baseline with mt_report_write(), then changes
# category "work" by amounts its own ledger records, then a second report.
cat >"$T/snap.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "memtrail.h"
int main(int argc, char **argv)
{
    static void *keep[64];
    long live = 0, count = 0, allocs = 0, frees = 0;
    if (argc != 3 || mt_tag_push("work") != 0)
        return 2;
    for (int i = 0; i < 8; i++) {           /* before the baseline: 8 x 1000 */
        keep[i] = malloc(1000);
        live += 1000, count++, allocs++;
    }
    long b_live = live, b_count = count, b_allocs = allocs, b_frees = frees;
    if (mt_report_write(argv[1]) != 0)
        return 3;
    for (int i = 8; i < 20; i++) {          /* after: 12 x 3000, 5 freed, one 64 KiB mapping */
        keep[i] = malloc(3000);
        live += 3000, count++, allocs++;
    }
    for (int i = 0; i < 5; i++) {
        free(keep[i]);
        live -= 1000, count--, frees++;
    }
    char *map = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return 4;
    for (int i = 0; i < 65536; i += 4096)
        map[i] = 1;
    if (mt_report_write(argv[2]) != 0)
        return 5;
    printf("%ld %ld %ld %ld\n", live - b_live, count - b_count, allocs - b_allocs, frees - b_frees);
    fflush(stdout);
    mt_tag_pop();
    return 0;
}
EOF
if cc -std=gnu11 -I"$MT_ROOT/include" -o "$T/snap" "$T/snap.c" -L"$BUILD/lib" -lmemtrail-stub \
       -Wl,-rpath,"$BUILD/lib" 2>"$T/cc.err"; then
    "$MT" run -o "$T/snap.exit.mtr" -- "$T/snap" "$T/snap.base.mtr" "$T/snap.later.mtr" >"$T/ledger" 2>"$T/run.err"
    expect_eq "real pair: program ran under the agent" 0 "$?"
    "$MT_ASAN" diff --json "$T/snap.base.mtr" "$T/snap.later.mtr" >"$T/real.json" 2>"$T/err"
    expect_eq "real pair: diff exits 0" 0 "$?"
    jq_py "real pair: work deltas match the program's ledger" "$(cat "$T/ledger")" "$T/real.json" \
        "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'work' for k in ('live_bytes_delta','live_count_delta','allocs_delta','frees_delta'))"
    jq_py "real pair: one process, later snapshot" "True True api api" "$T/real.json" \
        "' '.join(str(x) for x in (j['base']['pid'] == j['new']['pid'], j['new']['end_ns'] >= j['base']['end_ns'], j['base']['reason'], j['new']['reason']))"
    expect_eq "real pair: every field matches the reference reader" ok \
        "$(python3 "$T/ref.py" "$T/snap.base.mtr" "$T/snap.later.mtr" "$T/real.json" 2>&1)"
    if [ "$(json_get "$T/real.json" "[c for c in j['categories'] if c['name'] == 'work'][0]['reserved_bytes']")" != None ]; then
        # The agent writes VM fields: the 64 KiB mapping made while "work" was tagged.
        jq_py "real pair: work's new mapping" "65536 65536 65536" "$T/real.json" \
            "' '.join(str(c[k]) for c in j['categories'] if c['name'] == 'work' for k in ('reserved_bytes_delta','committed_bytes_delta','resident_bytes_delta'))"
    fi
    run_mt "$MT_ASAN" diff "$T/snap.base.mtr" "$T/snap.later.mtr"
    expect_eq "real pair: text exits 0" 0 "$rc"
    # 8000 -> 39000 live bytes: 7.81KB -> 38.1KB (+31000 = +30.3KB); 8 -> 15 blocks
    contains "real pair: text shows work's change" "(malloc=38.1KB +30.3KB #15 +7)" "$out"
else
    fail "real pair: build the snapshot program" "$(head -c 300 "$T/cc.err")"
fi

# --- report on a process tree --------------------------------------------------
mkdir -p "$T/tree"
"$MT" run -o "$T/tree/memtrail.%p.mtr" -- "$TBIN/forker" "$T/tree/ledger" >"$T/forker.out" 2>"$T/forker.err"
expect_eq "tree: forker ran" 0 "$?"
child=$(sed -n 's/^child pid //p' "$T/forker.out")
parent=$(ls "$T/tree" | sed -n 's/^memtrail\.\([0-9]*\)\.mtr$/\1/p' | grep -vx "$child" | head -n 1)
expect_eq "tree: two reports written" 2 "$(ls "$T/tree" | grep -c '\.mtr$')"
touch "$T/tree/memtrail.1.mtr.tmp" "$T/tree/x.tmp.7.mtr"     # a writer's temporaries: ignored
"$MT_ASAN" report --json "$T/tree" >"$T/tree.json" 2>"$T/err"
expect_eq "tree json: exits 0" 0 "$?"
expect_eq "tree json: nothing on stderr" "" "$(cat "$T/err")"
jq_py "tree json: parent first, child under it" "$parent $child None 0 0 1" "$T/tree.json" \
    "' '.join(str(x) for x in (j['processes'][0]['pid'], j['processes'][1]['pid'], j['processes'][0]['parent_index'], j['processes'][1]['parent_index'], j['processes'][0]['depth'], j['processes'][1]['depth']))"
jq_py "tree json: the child's ppid is the parent" True "$T/tree.json" "j['processes'][1]['ppid'] == j['processes'][0]['pid']"
# Each row against the process's own report, and the totals against the rows.
for p in "$parent" "$child"; do
    "$MT_ASAN" report --json "$T/tree/memtrail.$p.mtr" >"$T/one.$p.json"
done
jq_py "tree json: rows match each report's total" "True" "$T/tree.json" \
    "all(p[k] == json.load(open('$T/one.%d.json' % p['pid']))['total'][k] for p in j['processes'] for k in ('live_bytes','live_count','peak_bytes','allocs','frees'))"
jq_py "tree json: totals are the sums" "True" "$T/tree.json" \
    "all(j['total'][k] == sum(p[k] for p in j['processes']) for k in ('live_bytes','live_count','peak_bytes','allocs','frees')) and j['total']['processes'] == 2"
run_mt "$MT_ASAN" report "$T/tree"
expect_eq "tree text: exits 0" 0 "$rc"
contains "tree text: title" "memtrail process tree: 2 reports" "$out"
expect_match "tree text: child indented under the parent" "^ +$child +$parent +exit .*  \\\\_ .*forker" "$out"
expect_match "tree text: parent not indented" "^ +$parent +[0-9]+ +exit .*  [^ \\\\].*forker" "$out"
contains "tree text: totals row" "total: 2 processes" "$out"

# The same as a list of files, in any order; a bad file is named and the rest shown.
echo "not a report" >"$T/tree/junk.mtr"
head -n 4 "$T/tree/memtrail.$child.mtr" >"$T/tree/cut.mtr"
run_mt "$MT_ASAN" report --json "$T/tree/memtrail.$child.mtr" "$T/tree/memtrail.$parent.mtr"
expect_eq "tree files: exits 0" 0 "$rc"
expect_eq "tree files: same order as the directory" "$parent $child" \
    "$(printf '%s' "$out" | python3 -c 'import json,sys; print(" ".join(str(p["pid"]) for p in json.load(sys.stdin)["processes"]))')"
run_mt "$MT_ASAN" report "$T/tree"
expect_eq "tree bad: exits 1" 1 "$rc"
contains "tree bad: names the bad file" "memtrail: $T/tree/junk.mtr: not a memtrail report (bad header)" "$err"
contains "tree bad: names the truncated file" "memtrail: $T/tree/cut.mtr: truncated after line 4 (no end marker)" "$err"
expect_eq "tree bad: two error lines" 2 "$(printf '%s\n' "$err" | wc -l)"
contains "tree bad: others still summarised" "memtrail process tree: 3 reports" "$out"
contains "tree bad: truncated shown as such" "(cut short after line 4)" "$out"
run_mt "$MT_ASAN" report "$T/tree/memtrail.$parent.mtr" "$T/tree/nonexistent.mtr"
expect_eq "tree bad: missing file exits 1" 1 "$rc"
contains "tree bad: missing file named" "memtrail: $T/tree/nonexistent.mtr: cannot open" "$err"
contains "tree bad: the other still shown" "memtrail process tree: 1 report" "$out"
mkdir -p "$T/none"
run_mt "$MT_ASAN" report "$T/none"
expect_eq "tree bad: directory without reports exits 1" 1 "$rc"
contains "tree bad: directory without reports message" "memtrail: $T/none: no report files (*.mtr, *.mtt) in this directory" "$err"
run_mt "$MT_ASAN" report "$T/tree/memtrail.$parent.mtr"
contains "tree: a single file keeps the summary" "memtrail native memory summary: pid $parent" "$out"

# VM fixtures in a tree: RSS columns, and a process whose parent is in the set.
mkdir -p "$T/vmtree"
cp "$T/new.mtr" "$T/vmtree/a.mtr"
sed -e 's/^pid 100$/pid 101/' -e 's/^ppid 99$/ppid 100/' -e 's/^reason exit$/reason signal SIGSEGV/' "$T/new.mtr" >"$T/vmtree/b.mtr"
run_mt "$MT_ASAN" report "$T/vmtree"
expect_match "tree vm: RSS columns" "^ +100 +99 +exit +23KB +40KB +197 +4372KB +5120KB  app" "$out"
expect_match "tree vm: reason with a signal name" "^ +101 +100 +signal SIGSEGV +23KB .*  \\\\_ app" "$out"
"$MT_ASAN" report --json "$T/vmtree" >"$T/vt.json"
jq_py "tree vm json: rss sums" "8953856 10485760" "$T/vt.json" \
    "str(j['total']['rss_bytes']) + ' ' + str(j['total']['peak_rss_bytes'])"
expect_eq "diff old json: every field matches the reference reader" ok \
    "$(python3 "$T/ref.py" "$T/old_base.mtr" "$T/old.mtr" "$T/d3.json" 2>&1)"
run_mt "$MT_ASAN" report - "$T/new.mtr"
expect_eq "tree usage: stdin among several exits 2" 2 "$rc"
contains "tree usage: stdin among several message" "- (stdin) reads a single report" "$err"
# Reused pids can make two reports each other's parent: both still shown, once.
mkdir -p "$T/cycle"
printf 'memtrail-report 1\npid 5\nppid 6\ntotal live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\nend\n' >"$T/cycle/a.mtr"
printf 'memtrail-report 1\npid 6\nppid 5\ntotal live_bytes=2 live_count=1 peak_bytes=2 allocs=1 frees=0\nend\n' >"$T/cycle/b.mtr"
"$MT_ASAN" report --json "$T/cycle" >"$T/cyc.json"
jq_py "tree: a pid cycle is shown once per report" "[5, 6] 3" "$T/cyc.json" \
    "str(sorted(p['pid'] for p in j['processes'])) + ' ' + str(j['total']['live_bytes'])"

# --- a summary report against a trace of the same program: the trace has no
# address-space figures, so its VM categories neither came nor went
run_mt "$MT" run -o "$T/vm.mtr" -- "$TBIN/tracer" known
run_mt "$MT" run --mode trace -o "$T/novm.mtt" -- "$TBIN/tracer" known
run_mt "$MT" diff "$T/vm.mtr" "$T/novm.mtt"
expect_match "diff report vs trace: a VM category is not comparable, the new side has no address-space figures (no figures shown for it)" \
    "-  +heap \(not comparable: the new report has no address-space figures\)" "$out"
case $out in *"heap (reserved"*"(gone: not in the new report)"*"malloc ("*) fail "diff report vs trace: heap not called gone" "it is";;
*) pass "diff report vs trace: heap not called gone";; esac
run_mt "$MT" diff "$T/novm.mtt" "$T/vm.mtr"
expect_match "diff trace vs report: the base side has no address-space figures" \
    "\(not comparable: the base report has no address-space figures\)" "$out"
# Not zeros either (the review of a708898: NEW's code category printed
# reserved=0KB, committed=0KB above the note, its JSON 3 MB).
case $out in *"code (reserved=0KB"*) fail "diff trace vs report: no zeros for NEW's address space" "$out" ;;
*) pass "diff trace vs report: no zeros for NEW's address space" ;; esac
run_mt "$MT" diff "$T/vm.mtr" "$T/novm.mtt" --json
jq_py "diff report vs trace, JSON: the VM categories' status is not_comparable, as the text says" "not_comparable" "$T/out" \
    "' '.join(sorted(set(c['status'] for c in j['categories'] if c['kind'] == 'vm')))"
# memtrail's own overhead: every report the agent writes has it, a trace
# none (memtrail does not trace itself): not comparable either, not gone
run_mt "$MT" diff "$T/vm.mtr" "$T/novm.mtt"
expect_match "diff report vs trace: the overhead is not comparable, the new side has no overhead figures" \
    "-  +memtrail \(not comparable: the new report has no overhead figures\)" "$out"
case $out in *"(gone: not in the new report)"*) fail "diff report vs trace: nothing called gone" "$out" ;;
*) pass "diff report vs trace: nothing called gone" ;; esac
run_mt "$MT" diff "$T/novm.mtt" "$T/vm.mtr"
expect_match "diff trace vs report: the overhead is not comparable, the base side has no overhead figures" \
    "-  +memtrail \(not comparable: the base report has no overhead figures\)" "$out"
case $out in *"(new: not in the base report)"*) fail "diff trace vs report: nothing called new" "$out" ;;
*) pass "diff trace vs report: nothing called new" ;; esac
run_mt "$MT" diff "$T/vm.mtr" "$T/novm.mtt" --json
printf '%s' "$out" >"$T/ovh.json"
jq_py "diff report vs trace, JSON: the overhead not_comparable, no figure for the new side, no change (not a drop to 0)" \
    "not_comparable None None None" "$T/ovh.json" \
    "' '.join(str(x) for c in j['categories'] if c['kind'] == 'overhead' for x in (c['status'], c['live_bytes'], c['live_bytes_delta'], c['allocs_delta']))"
run_mt "$MT" diff "$T/novm.mtt" "$T/vm.mtr" --json
printf '%s' "$out" >"$T/ovh2.json"
jq_py "diff trace vs report, JSON: the overhead not_comparable, NEW's figures, no change" "not_comparable True None" \
    "$T/ovh2.json" \
    "' '.join(str(x) for c in j['categories'] if c['kind'] == 'overhead' for x in (c['status'], c['live_bytes'] > 0, c['live_bytes_delta']))"
# two summary reports both have the overhead: compared as ever
run_mt "$MT" diff "$T/vm.mtr" "$T/vm.mtr" --json
printf '%s' "$out" >"$T/ovh3.json"
jq_py "diff of two reports: the overhead in both, its change 0" "both 0" "$T/ovh3.json" \
    "' '.join(str(x) for c in j['categories'] if c['kind'] == 'overhead' for x in (c['status'], c['live_bytes_delta']))"

#!/usr/bin/env bash
# Detail mode in the agent: every site's counters against the test
# program's own ledger, attributed by an independent reader
# (detail_check.py: the report parsed in Python, frames mapped to functions
# with nm); stacks under both unwinders, depth limits, threads, fork,
# realloc moving a block between sites, options, and real programs.
. "$(dirname "$0")/../lib.sh"
CHECK="python3 $(dirname "$0")/detail_check.py"

# run_detail NAME OPTIONS PROGRAM ARGS...: report in $T/NAME.mtr, stdout
# (the ledger) in $T/NAME.out.
run_detail() {
    local name=$1 opts=$2
    shift 2
    MEMTRAIL_OPTIONS="mode=detail:output=$T/$name.mtr${opts:+:$opts}" LD_PRELOAD=$AGENT "$@" >"$T/$name.out" 2>"$T/$name.err"
}

# ledger_ok NAME: every function of the ledger matches the report's sites.
ledger_ok() {
    local res
    res=$($CHECK ledger "$T/$1.mtr" "$T/$1.out")
    while read -r fn verdict; do
        expect_eq "$1: $fn's sites match its ledger" "ok" "$verdict"
    done <<<"$res"
    [ -n "$res" ] || fail "$1: ledger" "no functions compared"
    read -r _ a b _ c d <<<"$($CHECK invariant "$T/$1.mtr")"
    expect_eq "$1: the sites' live bytes add up to the total's" "$b" "$a"
    expect_eq "$1: the sites' live blocks add up to the total's" "$d" "$c"
}

# Static, shared-library and inlined functions, churn, realloc moving a
# block to another site, 4 threads and a recursion, default depth (4).
run_detail plain "" "$TBIN/detail" threads 4 recurse 12
expect_eq "plain: mode line" "mode detail" "$(grep '^mode' "$T/plain.mtr")"
expect_eq "plain: stack_depth line" "stack_depth 4" "$(grep '^stack_depth' "$T/plain.mtr")"
expect_eq "plain: report complete" "end" "$(tail -n1 "$T/plain.mtr")"
ledger_ok plain
expect_match "plain: the library is a module" "^module [0-9]+ .*path=.*/libdetail_lib\.so$" "$(grep '^module' "$T/plain.mtr")"
expect_match "plain: the main program is a module with its build-id" "^module [0-9]+ bias=0x[0-9a-f]+ start=0x[0-9a-f]+ end=0x[0-9a-f]+ buildid=[0-9a-f]{40} path=$TBIN/detail$" "$(grep '^module' "$T/plain.mtr")"
stack=$($CHECK stack "$T/plain.mtr" recurse)
expect_eq "depth 4: the recursion's stack is 4 frames of recurse" "recurse recurse recurse recurse" \
    "$(tr ' ' '\n' <<<"$stack" | sed 's/.*://' | tr '\n' ' ' | sed 's/ $//')"
expect_match "the innermost frame of a library function's site is in the library" "^libdetail_lib\.so\+0x[0-9a-f]+:detail_lib_alloc detail\+0x[0-9a-f]+:main" \
    "$($CHECK stack "$T/plain.mtr" detail_lib_alloc)"
expect_eq "sites line counts the site lines" "$(grep -c '^site ' "$T/plain.mtr")" \
    "$(sed -n 's/^sites count=\([0-9]*\) dropped=0$/\1/p' "$T/plain.mtr")"

# One malloc call reached by paths that differ only one frame up, from
# the same stack pointer, and from below allocas that leave that pointer
# the same but the frames above it not (detail_memo.c): the walks' memo
# must not give one path's site to another. Each path gets exactly its
# own allocations, in one site.
run_detail memo "" "$TBIN/detail_memo" 3000
expect_eq "memo: program exits 0" "0" "$?"
while read -r _ fn _ k _ n _ b; do
    expect_eq "memo: leaf's site under $fn (frame $k) has its allocations" "$fn allocs $n bytes $b sites 1" \
        "$($CHECK callers "$T/memo.mtr" leaf "$k" | grep "^$fn ")"
done <"$T/memo.out"
expect_eq "memo: leaf has a site per path, no more" "6" \
    "$($CHECK callers "$T/memo.mtr" leaf | awk '{ n += $NF } END { print n + 0 }')"

# Deep stacks: depth 64 sees the whole recursion and main below it; depth 1
# one frame.
run_detail deep "depth=64" "$TBIN/detail" recurse 40
ledger_ok deep
frames=$($CHECK stack "$T/deep.mtr" recurse | tr ' ' '\n')
expect_eq "depth 64: 40 frames in recurse" "40" "$(grep -c ':recurse$' <<<"$frames")"
expect_eq "depth 64: then main" "main" "$(sed -n 41p <<<"$frames" | sed 's/.*://')"
run_detail one "depth=1" "$TBIN/detail" recurse 5
ledger_ok one
expect_eq "depth 1: every site has one frame" "" "$(grep '^site ' "$T/one.mtr" | grep 'frames=.*,' )"

# Frame-pointer walk on a build with frame pointers: the same stacks as
# libunwind's where every frame has one (the recursion, 8 deep), the same
# innermost frames elsewhere; auto keeps libunwind's stacks either way.
run_detail fp_lu "depth=8:unwind=libunwind" "$TBIN/detail_fp" threads 2 recurse 20
run_detail fp_fp "depth=8:unwind=fp" "$TBIN/detail_fp" threads 2 recurse 20
run_detail fp_auto "depth=8:unwind=auto" "$TBIN/detail_fp" threads 2 recurse 20
expect_eq "unwind=fp: unwinder line" "unwinder fp" "$(grep '^unwinder' "$T/fp_fp.mtr")"
expect_eq "unwind=libunwind: unwinder line" "unwinder libunwind" "$(grep '^unwinder' "$T/fp_lu.mtr")"
ledger_ok fp_fp
lu=$($CHECK stack "$T/fp_lu.mtr" recurse)
expect_match "libunwind: 8 frames of the recursion" "^(detail_fp\+0x[0-9a-f]+:recurse ?){8}$" "$lu"
expect_eq "unwind=fp: the recursion's stack equals libunwind's" "$lu" "$($CHECK stack "$T/fp_fp.mtr" recurse)"
for fn in from_static thread_work regrow; do
    expect_eq "unwind=fp: $fn's two innermost frames equal libunwind's" \
        "$($CHECK stack "$T/fp_lu.mtr" $fn | cut -d' ' -f1-2)" "$($CHECK stack "$T/fp_fp.mtr" $fn | cut -d' ' -f1-2)"
done
ledger_ok fp_auto
for fn in from_static inline_host detail_lib_alloc thread_work regrow recurse; do
    expect_eq "unwind=auto: $fn's stack equals libunwind's" "$($CHECK stack "$T/fp_lu.mtr" $fn)" "$($CHECK stack "$T/fp_auto.mtr" $fn)"
done

# memtrail's own CFI walk (the default where frame pointers are missing)
# against libunwind on the same program: the same stacks, whole (depth 64),
# through a shared library, threads (and the agent's thread trampoline),
# a deep recursion and a signal handler (the kernel's signal frame, where
# the CFI walk hands over to libunwind).
for prog in detail detail_fp; do
    run_detail "${prog}_cfi" "depth=64:unwind=cfi" "$TBIN/$prog" threads 3 recurse 30 signal 1
    run_detail "${prog}_lu64" "depth=64:unwind=libunwind" "$TBIN/$prog" threads 3 recurse 30 signal 1
    expect_eq "unwind=cfi ($prog): unwinder line" "unwinder cfi" "$(grep '^unwinder' "$T/${prog}_cfi.mtr")"
    ledger_ok "${prog}_cfi"
    for fn in from_static inline_host detail_lib_alloc churn regrow thread_work recurse on_signal; do
        lu=$($CHECK stack "$T/${prog}_lu64.mtr" $fn)
        [ -n "$lu" ] || fail "unwind=libunwind ($prog): $fn has a site" "none"
        expect_eq "unwind=cfi ($prog): $fn's whole stack equals libunwind's" "$lu" "$($CHECK stack "$T/${prog}_cfi.mtr" $fn)"
    done
done
expect_match "signal handler: the stack goes through the signal frame into main" \
    "^detail\+0x[0-9a-f]+:on_signal libc\.so\.6\+0x[0-9a-f]+:[^ ]* .*detail\+0x[0-9a-f]+:main" \
    "$($CHECK stack "$T/detail_lu64.mtr" on_signal)"
# Every site of a real program (SQLite) has the same stack under both.
if command -v sqlite3 >/dev/null; then
    q="create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<3000) insert into t select x, hex(randomblob(40)) from c; select count(*) from t;"
    MEMTRAIL_OPTIONS="mode=detail:depth=16:unwind=cfi:output=$T/sq_cfi.mtr" LD_PRELOAD=$AGENT sqlite3 :memory: "$q" >/dev/null
    MEMTRAIL_OPTIONS="mode=detail:depth=16:unwind=libunwind:output=$T/sq_lu.mtr" LD_PRELOAD=$AGENT sqlite3 :memory: "$q" >/dev/null
    $CHECK sites "$T/sq_cfi.mtr" >"$T/sq_cfi.sites"
    $CHECK sites "$T/sq_lu.mtr" >"$T/sq_lu.sites"
    expect_match "sqlite3: many stacks compared" "^[0-9]{2,}$" "$(wc -l <"$T/sq_lu.sites")"
    expect_eq "sqlite3: unwind=cfi gives every site libunwind gives, with the same counts" "" \
        "$(diff "$T/sq_lu.sites" "$T/sq_cfi.sites" | head -5)"
fi

# Through the CLI, and the bad options.
out=$(cd "$T" && "$MT" run --mode detail --depth 6 -o "$T/cli.mtr" -- "$TBIN/detail" threads 1 2>&1 >"$T/cli.out")
expect_match "run --mode detail: announces a detail report" "detail report of [0-9]+ written to .*cli\.mtr" "$out"
expect_eq "run --depth 6: stack_depth line" "stack_depth 6" "$(grep '^stack_depth' "$T/cli.mtr")"
$CHECK ledger "$T/cli.mtr" "$T/cli.out" | grep -qv ' ok$' && fail "run --mode detail: ledger" "$($CHECK ledger "$T/cli.mtr" "$T/cli.out")" || pass "run --mode detail: ledger"
err=$("$MT" run --depth 5 -- true 2>&1); rc=$?
expect_eq "run --depth without detail mode: usage error" "2" "$rc"
expect_match "run --depth without detail mode: says so" "--depth is for detail, sample and trace modes: add --mode detail, --mode sample or --mode trace" "$err"
err=$("$MT" run --mode detail --depth 65 -- true 2>&1); rc=$?
expect_eq "run --depth 65: usage error" "2" "$rc"
expect_match "run --depth 65: names the range" "--depth: bad value '65' \(accepted: 1 to 64 frames\)" "$err"
err=$("$MT" run --mode detail --unwind dwarf -- true 2>&1); rc=$?
expect_match "run --unwind dwarf: names the accepted values" "--unwind: bad value 'dwarf' \(accepted: auto, cfi, libunwind, fp\)" "$err"
for bad in depth=0 depth=65 depth=4x unwind=dwarf; do
    err=$(cd "$T" && MEMTRAIL_OPTIONS="mode=detail:$bad" LD_PRELOAD=$AGENT "$TBIN/detail" 2>&1 >/dev/null)
    expect_match "option $bad: one clear line, untracked" "^memtrail: MEMTRAIL_OPTIONS: bad value '[^']*' for (depth|unwind) \(accepted: [^)]*\); running untracked$" "$err"
done

# Across fork: parent and child each write a report whose sites add up.
MEMTRAIL_OPTIONS="mode=detail:output=$T/fork.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/forker" "$T/fork.ledger" >/dev/null 2>&1
n=0
for f in "$T"/fork.[0-9]*.mtr; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    read -r _ a b _ c d <<<"$($CHECK invariant "$f")"
    expect_eq "fork: $(basename "$f"): sites' live bytes add up to the total's" "$b" "$a"
    expect_eq "fork: $(basename "$f"): sites' live blocks add up" "$d" "$c"
done
[ "$n" -ge 2 ] && pass "fork: parent and child reports ($n)" || fail "fork: reports" "found $n"

# Forks while four other threads churn through their hooks: every child's
# sites add up to its totals. The fork waits for hooks between a block's
# count and its site's (before, 26 to 32 of 50 children did not add up).
# A thread meeting the hold waits outside its bracket: the fork and it
# waited for each other 2 s before (40 forks took 80 s and more).
mkdir -p "$T/fs"
# (A hang guard, not a timing: 40 forks take under a second; with the
# two waiting for each other they took 123 s, past the timeout.)
MEMTRAIL_OPTIONS="mode=detail:output=$T/fs/c.%p.mtr" timeout 60 env LD_PRELOAD="$AGENT" "$TBIN/forksites" 40 >/dev/null 2>"$T/fs.err"
expect_eq "fork amid churning threads: exits 0 (no fork left waiting for a thread, nor it for the fork), nothing on stderr" \
    "0:" "$?:$(cat "$T/fs.err")"
n=0 off=""
for f in "$T"/fs/c.*.mtr; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    read -r _ a b _ c d <<<"$($CHECK invariant "$f")"
    [ "$a $c" = "$b $d" ] || off="$off $(basename "$f"):$a/$b,$c/$d"
done
expect_eq "fork amid churning threads: 41 reports (the parent and 40 children)" 41 "$n"
expect_eq "fork amid churning threads: every report's sites add up to its totals (bytes, blocks)" "" "$off"

# Real programs: same output as without the agent, and sites that add up.
if command -v sqlite3 >/dev/null; then
    q="create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<20000) insert into t select x, hex(randomblob(40)) from c; select count(*), sum(length(b)) from t;"
    want=$(sqlite3 :memory: "$q")
    got=$(MEMTRAIL_OPTIONS="mode=detail:depth=8:output=$T/sqlite.mtr" LD_PRELOAD=$AGENT sqlite3 :memory: "$q")
    expect_eq "sqlite3 under detail mode: same output" "$want" "$got"
    read -r _ a b _ c d <<<"$($CHECK invariant "$T/sqlite.mtr")"
    expect_eq "sqlite3: sites' live bytes add up to the total's" "$b" "$a"
    expect_match "sqlite3: many sites, none dropped" "^sites count=[0-9]{2,} dropped=0$" "$(grep '^sites' "$T/sqlite.mtr")"
fi
# The interpreter itself, not a wrapper that execs it (a pyenv shim): the
# wrapper would be the tracked process.
py=$(python3 -c 'import sys; print(sys.executable)')
want=$("$py" -c 'import json; print(len(json.dumps([{"k": i} for i in range(20000)])))')
got=$(MEMTRAIL_OPTIONS="mode=detail:output=$T/py.mtr" LD_PRELOAD=$AGENT "$py" -c 'import json; print(len(json.dumps([{"k": i} for i in range(20000)])))')
expect_eq "python3 under detail mode: same output" "$want" "$got"
read -r _ a b _ c d <<<"$($CHECK invariant "$T/py.mtr")"
expect_eq "python3: sites' live bytes add up to the total's" "$b" "$a"
expect_eq "python3: sites' live blocks add up to the total's" "$d" "$c"

# A live query of a process in detail mode: its sites now, symbolized,
# against the program's books (tests/agent/live.c: 10 x 1000 bytes in
# category "live" at step 1).
unset XDG_RUNTIME_DIR
D=$T/live; mkdir -p "$D"
MEMTRAIL_OPTIONS="mode=detail:output=$T/live.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/live" "$D" >"$T/live.out" 2>&1 &
lpid=$!
for ((i = 0; i < 3000; i++)); do [ -e "$D/ready1" ] && break; sleep 0.02; done
"$MT_ASAN" query "$lpid" detail --json >"$T/qd.json" 2>"$T/qd.err"
expect_eq "query detail (ASan build): exits 0, nothing on stderr" "0:" "$?:$(cat "$T/qd.err")"
expect_eq "query detail: the sites of category live hold the program's live bytes and blocks" \
    "$(awk '$1 == "live" { print $2, $3 }' "$D/phase1")" \
    "$(json_get "$T/qd.json" "'%d %d' % (sum(s['live_bytes'] for s in j['sites'] if s['category'] == 'live'), sum(s['live_count'] for s in j['sites'] if s['category'] == 'live'))")"
expect_eq "query detail: the sites add up to the total" "$(json_get "$T/qd.json" "j['total']['live_bytes']")" \
    "$(json_get "$T/qd.json" "sum(s['live_bytes'] for s in j['sites'])")"
expect_match "query detail: frames are symbolized (the live program's main)" "main" \
    "$(json_get "$T/qd.json" "' '.join(f['function'] or '' for s in j['sites'] if s['category'] == 'live' for f in s['frames'])")"
"$MT" query "$lpid" detail --top 1 >"$T/qd.txt" 2>&1
expect_match "query detail --top 1: text, one site shown" "Allocation sites: 1 of [0-9]+" "$(cat "$T/qd.txt")"
"$MT" query "$lpid" summary --json >"$T/qs.json" 2>&1
expect_eq "query summary of a detail-mode process: no sites in it" "False" "$(json_get "$T/qs.json" "'sites' in j")"
out=$("$MT" query "$lpid" summary --top 3 2>&1); rc=$?
expect_eq "query summary --top: usage error" "2" "$rc"
# Let it finish (a kill would leave its socket behind, for a later process
# with the same pid to be mistaken for it).
touch "$D/go1" "$D/go2"
wait "$lpid" 2>/dev/null
expect_eq "query detail: the live program then exits 0" "0" "$?"
expect_eq "query detail: its socket is gone" "" "$(ls "/tmp/memtrail-$(id -u)/$lpid.sock" 2>/dev/null)"

# Unwind rules, and sites, must not outlive the code they describe: a
# library's f is unloaded, another library with the same code offsets and
# a larger frame is loaded at its place after 0, 15 (the count where a
# 4-bit generation would wrap) or 31 more dlopen/dlclose cycles, and its f
# called from the same line. Each f's site must be f, call, main — not the
# stale rule's frames — in its own library: the first one's 1001 bytes in
# libdl_a.so, the second one's 2002 in libdl_b.so (not one site of 3003 in
# the first library, as when the sites outlived the unload).
for u in cfi libunwind; do
    for cycles in 0 15 31; do
        run_detail "dl_${u}_$cycles" "unwind=$u" "$TBIN/detail_dl" "$TBIN/dl" "$cycles"
        st=$($CHECK stackb "$T/dl_${u}_$cycles.mtr" f)
        expect_eq "dlclose ($u, $cycles more cycles): f's sites, each in its own library, f <- call <- main" \
            "1 1" \
            "$(grep -cE '^1001 libdl_a\.so\+0x[0-9a-f]+:f detail_dl\+0x[0-9a-f]+:call detail_dl\+0x[0-9a-f]+:main ' <<<"$st") $(grep -cE '^2002 libdl_b\.so\+0x[0-9a-f]+:f detail_dl\+0x[0-9a-f]+:call detail_dl\+0x[0-9a-f]+:main ' <<<"$st")"
        # memtrail's own reader and symbolizer say the same
        "$MT" report detail --json "$T/dl_${u}_$cycles.mtr" >"$T/dl_${u}_$cycles.json" 2>/dev/null
        expect_eq "dlclose ($u, $cycles more cycles): memtrail report names each f's library" \
            "[(1001, 'libdl_a.so'), (2002, 'libdl_b.so')]" \
            "$(json_get "$T/dl_${u}_$cycles.json" "sorted((s['live_bytes'], s['frames'][0]['module'].rsplit('/', 1)[-1]) for s in j['sites'] if s['frames'] and s['frames'][0]['function'] == 'f')")"
    done
done

# dl_host NAME WHAT UNWIND LOADS MODE: runs detail_dl DIR LOADS MODE, whose
# libdl_a.so's f keeps LOADS/2 blocks of 1001 bytes and libdl_b.so's
# LOADS/2 of 2002 (alt) or LOADS of each (threads), checks f's bytes by
# library, and leaves f's sites ($CHECK stackb) in $st
dl_host() {
    local name=$1 what=$2 u=$3 loads=$4 mode=$5 each
    each=$([ "$mode" = alt ] && echo $((loads / 2)) || echo "$loads")
    run_detail "$name" "unwind=$u" "$TBIN/detail_dl" "$TBIN/dl" "$loads" "$mode"
    st=$($CHECK stackb "$T/$name.mtr" f)
    expect_eq "$what ($u): f's live bytes by library" "libdl_a.so $((each * 1001)) libdl_b.so $((each * 2002))" \
        "$(awk '{ split($2, m, "+"); b[m[1]] += $1 } END { for (k in b) print k, b[k] }' <<<"$st" | sort | tr '\n' ' ' | sed 's/ $//')"
}

# A plugin host loading two libraries in turn at one place, 300 times: each
# library's blocks in its own site, named after it (a module table entry
# serves the same file each time it comes back, and so do the sites made
# through it the time before: the tables stay small).
# Then unloads, reloads and new sites racing: two threads each load, call
# and unload libdl_a.so or libdl_b.so 500 times while a third loads and
# unloads libdl_c.so (a library is often mapped where another was unmapped
# an instant before, by another thread). Every block in its own library's f.
for u in cfi libunwind; do
    dl_host "dl_alt_$u" "dlclose, 300 loads in turn" "$u" 300 alt
    n=$(grep -c . <<<"$st") # 2 where the loader puts each library at one place every time
    expect_eq "dlclose, 300 loads in turn ($u): a reloaded library's sites serve again ($n sites for f, not 300)" 1 \
        "$([ "$n" -lt 10 ] && echo 1 || echo 0)"
    n=$(grep -c '^module ' "$T/dl_alt_$u.mtr")
    expect_eq "dlclose, 300 loads in turn ($u): the module table stays small ($n entries)" 1 \
        "$([ "$n" -lt 40 ] && echo 1 || echo 0)"
    dl_host "dl_threads_$u" "dlclose on three threads" "$u" 500 threads
    n=$(grep -c . <<<"$st")
    expect_eq "dlclose on three threads ($u): f's sites serve again ($n sites for 1000 loads)" 1 \
        "$([ "$n" -lt 50 ] && echo 1 || echo 0)"
done

# The same through one path, plugin.so, linked to each library in turn (a
# plugin rebuilt and reloaded): told apart by build-id, each keeps its site.
mkdir -p "$T/swap" && cp "$TBIN"/dl/*.so "$T/swap/"
run_detail dl_swap "unwind=cfi" "$TBIN/detail_dl" "$T/swap" 10 swap
expect_eq "dlclose, one path to two builds in turn: one site for each build's f, 5 x 1001 and 5 x 2002 bytes" \
    "5005 plugin.so 10010 plugin.so" \
    "$($CHECK stackb "$T/dl_swap.mtr" f | awk '{ split($2, m, "+"); print $1, m[1] }' | sort -n | tr '\n' ' ' | sed 's/ $//')"
# Without build-ids the two builds cannot be told apart: no load takes
# another's module entry or sites back (each block in a site of its own).
mkdir -p "$T/swapnb" && cp "$TBIN"/dlnb/*.so "$T/swapnb/"
run_detail dl_swapnb "unwind=cfi" "$TBIN/detail_dl" "$T/swapnb" 10 swap
expect_eq "dlclose, one path to two builds without build-ids: no site holds both builds' blocks" \
    "1001 1001 1001 1001 1001 2002 2002 2002 2002 2002" \
    "$($CHECK stackb "$T/dl_swapnb.mtr" f | awk '{ print $1 }' | sort -n | tr '\n' ' ' | sed 's/ $//')"

# More retired sites than the agent records the frames of (2^18 stacks 64
# deep through one library), then the library loaded again: the program
# runs on, and the report is written.
run_detail dl_records "unwind=cfi:depth=64" "$TBIN/detail_dl" "$TBIN/dl" 18 records
expect_eq "dlclose, 262,144 stacks retired then the library back: the program exits 0" 0 "$?"
expect_eq "dlclose, 262,144 stacks retired then the library back: the report is read" 0 \
    "$("$MT" report detail "$T/dl_records.mtr" >/dev/null 2>&1; echo $?)"

# A server spawning helpers while a thread loads and unloads a plugin: 60
# children forked, each exec'ing /bin/true or calling _exit, and writing
# its report first. glibc does not reset the loader's list lock in a fork
# child, so a child forked while a dlclose held it must list the loaded
# objects without it; and libunwind's own locks, held by a walk on another
# thread at the fork, stay held in the child (with every signal blocked),
# so no child calls libunwind. No child may hang (one stuck 10 s is
# killed), and every report lists the same objects as the parent's (but
# the plugin, unloaded or not at the fork): those no frame lies in, such
# as the agent's own library, only that listing notes.
for m in detail:cfi sample:cfi detail:libunwind; do
    for how in exec exit; do
        d="$T/forks_${m%:*}_${m#*:}_$how"
        mkdir -p "$d"
        out=$(MEMTRAIL_OPTIONS="mode=${m%:*}:unwind=${m#*:}:output=$d/%p.mtr" LD_PRELOAD=$AGENT "$TBIN/detail_dl" "$TBIN/dl" 60 forks "$how" 2>"$d.err")
        expect_eq "fork during dlclose ($m, children $how): every child exits 0" "60 children, 0 did not exit 0" "$out"
        expect_eq "fork during dlclose ($m, children $how): 61 complete reports" 61 \
            "$(for f in "$d"/*.mtr; do tail -n1 "$f"; done | grep -c '^end$')"
        expect_eq "fork during dlclose ($m, children $how): each lists the agent's library" 61 \
            "$(grep -l '^module [0-9]* .*path=.*/libmemtrail\.so$' "$d"/*.mtr | wc -l)"
        expect_eq "fork during dlclose ($m, children $how): every report lists the parent's objects" 1 \
            "$(for f in "$d"/*.mtr; do grep '^module ' "$f" | sed 's/.*path=//' | grep -v '/libdl_a\.so$' | sort | md5sum; done | sort -u | wc -l)"
        want="60 cfi 1 libunwind"
        [ "${m#*:}" = cfi ] && want="61 cfi"
        expect_eq "fork during dlclose ($m, children $how): the children walk with cfi, the parent with ${m#*:}" \
            "$want" "$(grep -h '^unwinder' "$d"/*.mtr | sort | uniq -c | sort -rn | awk '{ print $1, $3 }' | tr '\n' ' ' | sed 's/ $//')"
    done
done

# Stacks that are not the thread's own: a handler on an 8 KiB alternate
# signal stack allocating, or calling _exit; a makecontext coroutine. Under
# every unwinder the program must run as without memtrail, and the block
# must be in its function's site.
for u in auto cfi fp libunwind; do
    run_detail "alt_$u" "unwind=$u" "$TBIN/detail_signal" alt 8192
    expect_eq "alternate stack ($u): malloc in the handler, program exits 0" "0" "$?"
    ledger_ok "alt_$u"
    MEMTRAIL_OPTIONS="mode=detail:unwind=$u:output=$T/altexit_$u.mtr" LD_PRELOAD=$AGENT "$TBIN/detail_signal" altexit 8192 >/dev/null 2>&1
    expect_eq "alternate stack ($u): _exit in the handler exits 3" "3" "$?"
    expect_eq "alternate stack ($u): _exit in the handler, the report is complete" "end" "$(tail -n1 "$T/altexit_$u.mtr" 2>/dev/null)"
    run_detail "coro_$u" "unwind=$u" "$TBIN/detail_signal" coro
    expect_eq "coroutine stack ($u): program exits 0" "0" "$?"
    ledger_ok "coro_$u"
done

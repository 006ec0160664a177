#!/usr/bin/env bash
# Detail reports on the command line: `memtrail report detail` (symbolized
# sites, --depth merging, --top, --sort, JSON), the detail part of
# `memtrail diff`, and the symbolizer's fallbacks (stripped binary, rebuilt
# binary, missing file, separate debug info via .gnu_debuglink).
#
# Fixtures are real: build/tests/detail/sites (tests/detail/sites.c)
# captures its own call stacks with backtrace() in known functions — a
# static one, an always_inline one inlined into another, one of a C++
# shared library, one helper reached from two callers, a recursion — and
# prints its module map; tests/detail/mkfixture.py turns that into a .mtr
# with chosen counters. The truth for every frame in our own modules is
# binutils' `addr2line -i -f -C` (function and file:line through inlined
# calls) and elfutils' `eu-addr2line -f -C`; `nm -D -C` for the stripped
# library's names; python3 parses the JSON and recomputes the merged and
# diffed numbers from the fixture. Every CLI call runs the ASan+UBSan build.
. "$(dirname "$0")/../lib.sh"

D=$BUILD/tests/detail
MKFIX=$MT_ROOT/tests/detail/mkfixture.py
for f in "$MT_ASAN" "$D/sites" "$D/sites.stripped" "$D/sites.v2" "$D/libmtplugin.stripped.so"; do
    [ -e "$f" ] || { fail detail-build "$f missing (make tests)"; exit 1; }
done
for tool in addr2line eu-addr2line nm objcopy python3; do
    command -v "$tool" >/dev/null || { fail detail-tools "$tool not installed (scripts/deps.sh)"; exit 1; }
done
unset DEBUGINFOD_URLS   # no network look-ups for debug info

lacks() {
    if printf '%s' "$3" | grep -Fq -- "$2"; then fail "$1" "unexpected '$2' in: $3"; else pass "$1"; fi
}
# py NAME EXPECTED SCRIPT ARGS...: runs a python3 script, compares its output.
py() { local n=$1 want=$2 code=$3; shift 3; expect_eq "$n" "$want" "$(python3 -c "$code" "$@" 2>&1)"; }

SITES=$(cd "$D" && pwd)/sites
PLUGIN=$(cd "$D" && pwd)/libmtplugin.so
check "detail: test program runs" "$D/sites" >"$T/caps"
"$D/sites" >"$T/caps2"      # a second run: other load addresses (ASLR)

# name=live_bytes,live_count,peak_bytes,allocs,frees,allocated_bytes[,category]
COUNTS="parse_config=4096,1,8192,3,2,12288;fill_cache=1000,2,1500,5,3,5000;grow_buffer_from_read_rows=300,3,300,3,0,90000"
COUNTS="$COUNTS;grow_buffer_from_write_rows=200,1,400,4,3,2048;plugin=50,2,64,7,5,350,plugin;recurse=10,1,10,1,0,65536"
python3 "$MKFIX" "$T/caps" "$COUNTS" >"$T/d.mtr"
# The same sites as an older agent wrote them: no allocated_bytes.
OLDCOUNTS="parse_config=4096,1,8192,3,2;fill_cache=1000,2,1500,5,3;grow_buffer_from_read_rows=300,3,300,3,0"
OLDCOUNTS="$OLDCOUNTS;grow_buffer_from_write_rows=200,1,400,4,3;plugin=50,2,64,7,5,plugin;recurse=10,1,10,1,0"
python3 "$MKFIX" "$T/caps" "$OLDCOUNTS" >"$T/old.mtr"
py "fixtures: d.mtr has allocated_bytes on every site, old.mtr on none" "6 0" '
import sys
n = lambda p: sum("allocated_bytes=" in l for l in open(p) if l.startswith("site "))
print(n(sys.argv[1]), n(sys.argv[2]))' "$T/d.mtr" "$T/old.mtr"

# --- every frame in our modules against addr2line / eu-addr2line -----------
run_mt "$MT_ASAN" report detail "$T/d.mtr" --json
expect_eq "detail json: exit 0" 0 "$rc"
check "detail json: parses" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out"
cp "$T/out" "$T/d.json"

# Our symbolized chain per recorded address, in the order addr2line -i prints.
python3 - "$T/d.json" "$SITES" "$PLUGIN" >"$T/ours" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
seen = set()
for s in j['sites']:
    for f in s['frames']:
        if f['module'] not in sys.argv[2:]:
            continue
        key = (f['module'], f['offset'])
        # addr2line's way of saying unknown: ?? and ??:?
        print("%s %s %s %s:%s" % (f['module'], f['address'], f['offset'], f['function'] or '??', f['line'] or '?'),
              f['file'] or '??')
EOF
# The truth: addr2line -i -f -C at offset-1, one chain per address.
true_chains() {
    python3 - "$T/d.json" "$SITES" "$PLUGIN" <<'EOF' | while read -r mod addr off; do
import json, sys
j = json.load(open(sys.argv[1]))
done_ = set()
for s in j['sites']:
    for f in s['frames']:
        if f['module'] in sys.argv[2:] and (f['module'], f['address']) not in done_:
            done_.add((f['module'], f['address']))
            print(f['module'], f['address'], f['offset'])
EOF
        addr2line -i -f -C -e "$mod" "$(printf '0x%x' $((off - 1)))" | sed 's/ (discriminator [0-9]*)//' |
            paste - - | while IFS=$'\t' read -r fn loc; do
                echo "$mod $addr $off $fn:${loc##*:} ${loc%:*}"
            done
    done
}
true_chains >"$T/truth"
py "detail: addr2line checked some frames" yes 'import sys; print("yes" if len(open(sys.argv[1]).read().splitlines()) >= 12 else "no")' "$T/truth"
ours_sorted=$(sort -u "$T/ours")
truth_sorted=$(sort -u "$T/truth")
expect_eq "detail: function and file:line of every frame (incl. inlined) equal addr2line -i -f -C" \
    "$truth_sorted" "$ours_sorted"

# eu-addr2line (elfutils' own tool): the innermost function and file:line.
ok=1
while read -r mod addr off rest; do
    want=$(eu-addr2line -f -C -e "$mod" "$(printf '0x%x' $((off - 1)))" | head -2 | tr '\n' ' ' |
        sed -E 's/ inlined at [^ ]* in [^ ]*//; s/:[0-9]+ $//; s/ $//')
    got=$(python3 - "$T/d.json" "$addr" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for s in j['sites']:
    for f in s['frames']:
        if f['address'] == sys.argv[2]:
            print("%s %s" % (f['function'] or '??', "%s:%s" % (f['file'], f['line']) if f['file'] else '??'))
            sys.exit(0)
EOF
)
    [ "$want" = "$got" ] || { ok=0; echo "    eu-addr2line $mod $off: '$want' vs ours '$got'"; }
done < <(sort -u -k2,2 "$T/truth")
expect_eq "detail: innermost function and file:line equal eu-addr2line -f -C" 1 "$ok"

# The functions by design (tests/detail/sites.c).
py "detail: frame 0 of each site is the capturing function" \
    "parse_config|fill_cache+build_index|grow_buffer|grow_buffer|plugin::capture(void**, int)|recurse" '
import json, sys
j = json.load(open(sys.argv[1]))
by_id = sorted(j["sites"], key=lambda s: s["stack_id"])
names = []
for s in by_id:
    first = [f for f in s["frames"] if f["address"] == s["frames"][0]["address"]]
    names.append("+".join(f["function"] for f in first))
print("|".join(names))' "$T/d.json"
py "detail: the inlined frame is marked, its caller is not" "True False" '
import json, sys
j = json.load(open(sys.argv[1]))
s = [s for s in j["sites"] if s["stack_id"] == 2][0]
print(s["frames"][0]["inlined"], s["frames"][1]["inlined"])' "$T/d.json"
py "detail: recursion keeps every recorded frame" "recurse recurse 7" '
import json, sys
j = json.load(open(sys.argv[1]))
s = [s for s in j["sites"] if s["stack_id"] == 6][0]
print(s["frames"][0]["function"], s["frames"][1]["function"], sum(f["function"] == "recurse" for f in s["frames"]))' "$T/d.json"

# --- the numbers: equal to the fixture's, sorted by live bytes ------------
py "detail json: sites, counters and order equal the fixture" \
    "1:4096,1,8192,3,2 2:1000,2,1500,5,3 3:300,3,300,3,0 4:200,1,400,4,3 5:50,2,64,7,5 6:10,1,10,1,0" '
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join("%d:%d,%d,%d,%d,%d" % (s["stack_id"], s["live_bytes"], s["live_count"], s["peak_bytes"], s["allocs"], s["frees"])
               for s in j["sites"]))' "$T/d.json"
py "detail json: allocated_bytes per site equal the fixture's site lines" "True 6" '
import json, sys
j = json.load(open(sys.argv[1]))
want = {int(l.split()[1]): int(dict(kv.split("=", 1) for kv in l.split()[2:])["allocated_bytes"])
        for l in open(sys.argv[2]) if l.startswith("site ")}
print(all(s["allocated_bytes"] == want[s["stack_id"]] for s in j["sites"]), len(j["sites"]))' "$T/d.json" "$T/d.mtr"
py "detail json: category, address string, summary fields kept" "plugin 0x True 4242 5656" '
import json, sys
j = json.load(open(sys.argv[1]))
s = [s for s in j["sites"] if s["stack_id"] == 5][0]
print(s["category"], s["frames"][0]["address"][:2], isinstance(s["frames"][0]["line"], int), j["pid"], j["total"]["live_bytes"])' "$T/d.json"
py "detail json: frame keys" "address,file,function,inlined,line,module,offset" '
import json, sys
j = json.load(open(sys.argv[1]))
print(",".join(sorted(j["sites"][0]["frames"][0])))' "$T/d.json"

# --- text -------------------------------------------------------------------
run_mt "$MT_ASAN" report detail "$T/d.mtr"
expect_eq "detail text: exit 0" 0 "$rc"
a0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sites"][0]["frames"][0]["address"])' "$T/d.json")
line0=$(addr2line -e "$SITES" "$(printf '0x%x' $(( $(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["sites"][0]["frames"][0]["offset"],16))' "$T/d.json") - 1 )))" | sed 's/ (discriminator [0-9]*)//')
contains "detail text: [address] function (file:line) module" \
    "$(printf '[0x%016x] parse_config (%s) sites' "$a0" "$line0")" "$out"
# 4096+1000+300+200+50+10 = 5656 B = 5.52KB
contains "detail text: summary first" "Total: live=5.52KB (10 blocks)" "$out"
contains "detail text: counters line" "(malloc: live=4KB (1 blocks), peak=8KB, allocs=3, frees=2, reallocs=0, allocated=12KB)" "$out"
contains "detail text: inlined marker" "fill_cache [inlined] (" "$out"
contains "detail text: demangled C++ name" "plugin::capture(void**, int) (" "$out"
contains "detail text: header" "Allocation sites: 6, by live bytes (stack depth 10, libunwind)" "$out"
expect_eq "detail text: no warnings for modules with debug info" "" "$(printf '%s' "$err" | grep -F -e sites: -e libmtplugin || true)"

# --- --depth merges, --top, --sort -----------------------------------------
for depth in 1 2; do
    run_mt "$MT_ASAN" report detail "$T/d.mtr" --json --depth "$depth"
    # Independent grouping of the fixture's site lines by category + first N frames.
    want=$(python3 - "$T/d.mtr" "$depth" <<'EOF'
import sys
n = int(sys.argv[2]); groups = {}
for l in open(sys.argv[1]):
    if not l.startswith("site "): continue
    f = dict(kv.split("=", 1) for kv in l.split()[2:])
    key = (f["category"], tuple(f["frames"].split(",")[:n]))
    g = groups.setdefault(key, [0, 0, 0, 0, 0, 0, 0])
    for i, k in enumerate(["live_bytes", "live_count", "peak_bytes", "allocs", "frees", "allocated_bytes"]):
        g[i] += int(f[k])
    g[6] += 1
print(" ".join(sorted("%s:%s" % (k[1][0], ",".join(map(str, v))) for k, v in groups.items())))
EOF
)
    got=$(python3 - "$T/out" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join(sorted("%s:%d,%d,%d,%d,%d,%d,%d" % (s["frames"][0]["address"], s["live_bytes"], s["live_count"], s["peak_bytes"],
                                                 s["allocs"], s["frees"], s["allocated_bytes"], s["merged_sites"]) for s in j["sites"])))
EOF
)
    expect_eq "detail --depth $depth: merged sites and summed counters equal an independent grouping" "$want" "$got"
done
run_mt "$MT_ASAN" report detail "$T/d.mtr" --json --depth 1
py "detail --depth 1: grow_buffer's two callers merged (300+200 bytes)" "500 2 1" '
import json, sys
j = json.load(open(sys.argv[1]))
s = [s for s in j["sites"] if s["frames"][0]["function"] == "grow_buffer"]
print(s[0]["live_bytes"], s[0]["merged_sites"], len(s))' "$T/out"
run_mt "$MT_ASAN" report detail "$T/d.mtr" --json --depth 2
py "detail --depth 2: at most 2 recorded frames per site" "True" '
import json, sys
j = json.load(open(sys.argv[1]))
print(all(len({f["address"] for f in s["frames"]}) <= 2 for s in j["sites"]))' "$T/out"
run_mt "$MT_ASAN" report detail "$T/d.mtr" --depth 1
contains "detail text --depth 1: merge noted" "; 2 sites merged)" "$out"
contains "detail text --depth 1: header" "first 1 frames, 6 sites merged into 5" "$out"

run_mt "$MT_ASAN" report detail "$T/d.mtr" --json --top 2
py "detail --top 2: the two largest" "1,2 6" '
import json, sys
j = json.load(open(sys.argv[1]))
print(",".join(str(s["stack_id"]) for s in j["sites"]), j["sites_total"])' "$T/out"
run_mt "$MT_ASAN" report detail "$T/d.mtr" --top 1
expect_eq "detail text --top 1: one counters line" 1 "$(printf '%s\n' "$out" | grep -c '^ *(malloc: live=\|^ *(plugin: live=')"
# --sort allocated: by allocated bytes (largest first, then live bytes, then
# id), the order computed here from the fixture's site lines.
want=$(python3 - "$T/d.mtr" <<'EOF'
import sys
rows = []
for l in open(sys.argv[1]):
    if l.startswith("site "):
        f = dict(kv.split("=", 1) for kv in l.split()[2:])
        rows.append((-int(f["allocated_bytes"]), -int(f["live_bytes"]), int(l.split()[1])))
print(",".join(str(r[2]) for r in sorted(rows)))
EOF
)
expect_eq "detail --sort allocated: the python order is not the live or allocs order" "3,6,1,2,4,5" "$want"
run_mt "$MT_ASAN" report detail "$T/d.mtr" --json --sort allocated
py "detail --sort allocated: by allocated bytes" "$want allocated_bytes" '
import json, sys
j = json.load(open(sys.argv[1]))
print(",".join(str(s["stack_id"]) for s in j["sites"]), j["sorted_by"])' "$T/out"
run_mt "$MT_ASAN" report detail "$T/d.mtr" --sort allocated --top 2
contains "detail text --sort allocated: header" "Allocation sites: 2 of 6, by allocated bytes (stack depth 10" "$out"
# 300 B = 0.293KB, 90000 B = 87.9KB
contains "detail text --sort allocated: largest first" "(malloc: live=0.293KB (3 blocks), peak=0.293KB, allocs=3, frees=0, reallocs=0, allocated=87.9KB)" "$out"
run_mt "$MT_ASAN" report detail "$T/d.mtr" --json --sort allocated --depth 1
py "detail --sort allocated --depth 1: merged grow_buffer (90000+2048) first" "grow_buffer 92048 2" '
import json, sys
s = json.load(open(sys.argv[1]))["sites"][0]
print(s["frames"][0]["function"], s["allocated_bytes"], s["merged_sites"])' "$T/out"

# An older report without allocated_bytes: --sort allocated falls back to
# the allocation count and says so; no allocated= in text, null in JSON.
run_mt "$MT_ASAN" report detail "$T/old.mtr" --json --sort allocated
expect_eq "old report: exit 0" 0 "$rc"
py "old report --sort allocated: by allocation count" "5,2,4,1,3,6 allocs True" '
import json, sys
j = json.load(open(sys.argv[1]))
print(",".join(str(s["stack_id"]) for s in j["sites"]), j["sorted_by"], all(s["allocated_bytes"] is None for s in j["sites"]))' "$T/out"
run_mt "$MT_ASAN" report detail "$T/old.mtr" --sort allocated
contains "old report text: header says why" "by allocations (the report has no allocated bytes per site)" "$out"
contains "old report text: counters line without allocated" "(malloc: live=4KB (1 blocks), peak=8KB, allocs=3, frees=2, reallocs=0)" "$out"
lacks "old report text: no allocated=" "allocated=" "$out"
run_mt "$MT_ASAN" report detail "$T/old.mtr" --json --depth 1
py "old report --depth 1: merged allocated_bytes still null" "None" '
import json, sys
print([s for s in json.load(open(sys.argv[1]))["sites"] if s["merged_sites"] == 2][0]["allocated_bytes"])' "$T/out"

# --- stripped binary and library: module+offset, dynsym names --------------
python3 "$MKFIX" "$T/caps" "$COUNTS" "$SITES=$SITES.stripped" "$PLUGIN=${PLUGIN%.so}.stripped.so" >"$T/s.mtr"
run_mt "$MT_ASAN" report detail "$T/s.mtr" --json
expect_eq "stripped: exit 0" 0 "$rc"
contains "stripped: warning names the binary" "$SITES.stripped: no debug info" "$err"
py "stripped binary: no function, module+offset equal the unstripped offsets" "None None True" '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
fa = [f for s in a["sites"] for f in s["frames"] if f["module"].endswith("sites.stripped")]
fb = {f["address"]: f["offset"] for s in b["sites"] for f in s["frames"]}
print(fa[0]["function"], fa[0]["file"], all(f["offset"] == fb[f["address"]] for f in fa) and len(fa) > 5)' "$T/out" "$T/d.json"
dyn=$(nm -D -C --defined-only "${PLUGIN%.so}.stripped.so" | grep -o 'plugin::capture(void\*\*, int)')
py "stripped library: the function from .dynsym (nm -D), no file:line" "$dyn None" '
import json, sys
j = json.load(open(sys.argv[1]))
f = [s for s in j["sites"] if s["stack_id"] == 5][0]["frames"][0]
print(f["function"], f["line"])' "$T/out"
run_mt "$MT_ASAN" report detail "$T/s.mtr"
contains "stripped text: module+offset" "] sites.stripped+0x" "$out"

# --- rebuilt binary (other build-id) and a missing file --------------------
python3 "$MKFIX" "$T/caps" "$COUNTS" "$SITES=$SITES.v2" "$PLUGIN=/nonexistent/libmtplugin.so" >"$T/v.mtr"
run_mt "$MT_ASAN" report detail "$T/v.mtr" --json
expect_eq "rebuilt: exit 0" 0 "$rc"
contains "rebuilt: build-id warning" "$SITES.v2: build-id differs: rebuilt since the run?" "$err"
contains "missing: warning" "/nonexistent/libmtplugin.so: no such file" "$err"
py "rebuilt and missing: module+offset only" "None None None" '
import json, sys
j = json.load(open(sys.argv[1]))
a = [f for s in j["sites"] for f in s["frames"] if f["module"].endswith("sites.v2")][0]
b = [f for s in j["sites"] for f in s["frames"] if f["module"] == "/nonexistent/libmtplugin.so"][0]
print(a["function"], a["line"], b["function"])' "$T/out"
py "rebuilt: warnings in the JSON too" "2" '
import json, sys
print(len(json.load(open(sys.argv[1]))["symbol_warnings"]))' "$T/out"

# --- separate debug info through .gnu_debuglink ----------------------------
mkdir "$T/dl"
objcopy --only-keep-debug "$SITES" "$T/dl/sites.debug"
objcopy --strip-debug --add-gnu-debuglink="$T/dl/sites.debug" "$SITES" "$T/dl/sites"
python3 "$MKFIX" "$T/caps" "$COUNTS" "$SITES=$T/dl/sites" >"$T/dl.mtr"
run_mt "$MT_ASAN" report detail "$T/dl.mtr" --json
lacks "debuglink: no warning" "$T/dl/sites" "$err"
py "debuglink: file:line from the separate debug file equal the unstripped binary's" "True" '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
fa = [(f["function"], f["file"], f["line"]) for s in a["sites"] for f in s["frames"] if f["module"].endswith("dl/sites")]
fb = [(f["function"], f["file"], f["line"]) for s in b["sites"] for f in s["frames"] if f["module"].endswith("detail/sites")]
print(fa == fb and len(fa) > 5)' "$T/out" "$T/d.json"

# --- summary reports, truncated and corrupt detail reports -----------------
grep -v -E '^(stack_depth|unwinder|module|site|sites) ' "$T/d.mtr" | sed 's/^mode detail/mode summary/' >"$T/sum.mtr"
run_mt "$MT_ASAN" report detail "$T/sum.mtr"
expect_eq "summary report: report detail exits 1" 1 "$rc"
contains "summary report: clear error" "sum.mtr: not a detail report (mode summary" "$err"
expect_eq "summary report: nothing on stdout" "" "$out"
run_mt "$MT_ASAN" report "$T/d.mtr"
expect_eq "detail report: plain report exits 0" 0 "$rc"
contains "detail report: plain report hints at report detail" "memtrail report detail $T/d.mtr' shows its 6 allocation sites" "$out"
lacks "detail report: plain report shows no sites" "[0x" "$out"

cutline=$(grep -n '^site 2 ' "$T/d.mtr" | cut -d: -f1)
head -n "$cutline" "$T/d.mtr" >"$T/cut.mtr"    # up to the second site line
printf 'site 3 category=malloc live_by' >>"$T/cut.mtr"
run_mt "$MT_ASAN" report detail "$T/cut.mtr" --json
expect_eq "truncated: exit 1" 1 "$rc"
contains "truncated: error names the file" "cut.mtr: truncated after line $cutline" "$err"
py "truncated: the sites before the cut, complete false" "1,2 False" '
import json, sys
j = json.load(open(sys.argv[1]))
print(",".join(str(s["stack_id"]) for s in j["sites"]), j["complete"])' "$T/out"
run_mt "$MT_ASAN" report detail "$T/cut.mtr"
contains "truncated text: partial sites shown" "parse_config (" "$out"
contains "truncated text: incomplete note" "Incomplete: the report file was cut short after line $cutline" "$out"

sed 's/frames=0x\([0-9a-f]*\),/frames=0x\1,0xZZ,/; t; ' "$T/d.mtr" >"$T/bad.mtr"
badline=$(grep -n '0xZZ' "$T/bad.mtr" | head -1 | cut -d: -f1)
run_mt "$MT_ASAN" report detail "$T/bad.mtr"
expect_eq "corrupt: exit 1" 1 "$rc"
contains "corrupt: file, line and field named" "bad.mtr: line $badline: bad value '0xZZ' for frame 2" "$err"
expect_eq "corrupt: nothing on stdout" "" "$out"

# --- usage ------------------------------------------------------------------
run_mt "$MT_ASAN" report detail "$T/d.mtr" --depth 0
expect_eq "usage: --depth 0 exits 2" 2 "$rc"
contains "usage: --depth 0 message" "bad value '0' for --depth" "$err"
run_mt "$MT_ASAN" report detail "$T/d.mtr" --sort size
expect_eq "usage: --sort size exits 2" 2 "$rc"
run_mt "$MT_ASAN" report "$T/d.mtr" --top 3
expect_eq "usage: --top without detail exits 2" 2 "$rc"
contains "usage: --top without detail message" "apply to 'report detail' only" "$err"
run_mt "$MT_ASAN" report --help
contains "usage: help mentions report detail" "memtrail report detail FILE [--depth N] [--top N]" "$out"

# --- detail diff --------------------------------------------------------------
# BASE from the first run; NEW from the second run (other load addresses):
# sites must match by symbolized stack. parse_config shrank, fill_cache
# grew, write_rows' site is gone, recurse is new, plugin is unchanged.
BASEC="parse_config=4096,1,8192,3,2,12288;fill_cache=1000,2,1500,5,3,5120;grow_buffer_from_write_rows=200,1,400,4,3,2048;plugin=50,2,64,7,5,350,plugin"
NEWC="parse_config=1024,1,8192,9,8,30000;fill_cache=3000,6,3000,11,5,16384;plugin=50,2,64,7,5,350,plugin;recurse=640,4,640,4,0,2560"
python3 "$MKFIX" "$T/caps" "$BASEC" >"$T/base.mtr"
python3 "$MKFIX" "$T/caps2" "$NEWC" >"$T/new.mtr"
py "diff: the two runs have other addresses" "True" '
import sys
a = [l for l in open(sys.argv[1]) if l.startswith("site 1 ")][0].split("frames=")[1]
b = [l for l in open(sys.argv[2]) if l.startswith("site 1 ")][0].split("frames=")[1]
print(a != b)' "$T/base.mtr" "$T/new.mtr"
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/new.mtr" --json
expect_eq "diff json: exit 0" 0 "$rc"
py "diff json: statuses and live/allocs deltas by hand, largest change first" \
    "changed:parse_config:-3072,6 changed:fill_cache:2000,6 new:recurse:640,4 gone:grow_buffer:-200,-4 unchanged:plugin::capture(void**, int):0,0" '
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join("%s:%s:%d,%d" % (s["status"], s["frames"][0]["function"], s["delta"]["live_bytes"], s["delta"]["allocs"]) for s in j["sites"]))' "$T/out"
py "diff json: base/new sides, frees delta, category diff kept" "1000 3000 2 True -632" '
import json, sys
j = json.load(open(sys.argv[1]))
s = j["sites"][1]
g = [s for s in j["sites"] if s["status"] == "gone"][0]
print(s["base"]["live_bytes"], s["new"]["live_bytes"], s["delta"]["frees"], g["new"] is None, j["categories"][0]["live_bytes_delta"] if "categories" in j else "?")' "$T/out"
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/new.mtr"
expect_eq "diff text: exit 0" 0 "$rc"
contains "diff text: counts" "1 grew, 1 shrank, 1 new, 1 gone, 1 unchanged (not shown)" "$out"
# 3000 B = 2.93KB (+2000 = 1.95KB), peak +1500 = 1.46KB
contains "diff text: a grown site's deltas" "(malloc: live=2.93KB +1.95KB (6 +4 blocks), peak=2.93KB +1.46KB, allocs=11 +6, frees=5 +2, allocated=16KB +11KB)" "$out"
# 2560 B = 2.50KB
contains "diff text: new marked" "allocs=4 +4, frees=0, allocated=2.50KB +2.50KB) [new]" "$out"
contains "diff text: gone site's allocated delta" "frees=0 -3, allocated=0KB -2KB) [gone]" "$out"
contains "diff text: gone marked" "[gone]" "$out"
lacks "diff text: unchanged not shown" "plugin::capture" "$out"
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/new.mtr" --json
# allocated_bytes deltas recomputed from the two fixtures' counts, matched by function
want=$(python3 - "$BASEC" "$NEWC" <<'EOF'
import sys
def sides(spec):
    return {i.split("=")[0]: int(i.split("=")[1].split(",")[5]) for i in spec.split(";")}
b, c = sides(sys.argv[1]), sides(sys.argv[2])
fn = {"parse_config": "parse_config", "fill_cache": "fill_cache", "grow_buffer_from_write_rows": "grow_buffer",
      "plugin": "plugin::capture(void**, int)", "recurse": "recurse"}
print(" ".join(sorted("%s:%d" % (fn[k], c.get(k, 0) - b.get(k, 0)) for k in set(b) | set(c))))
EOF
)
py "diff json: allocated_bytes delta per site equals the fixtures'" "$want" '
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join(sorted("%s:%d" % (s["frames"][0]["function"], s["delta"]["allocated_bytes"]) for s in j["sites"])))' "$T/out"
py "diff json: sides carry allocated_bytes" "5120 16384 True" '
import json, sys
j = json.load(open(sys.argv[1]))
s = [s for s in j["sites"] if s["frames"][0]["function"] == "fill_cache"][0]
g = [s for s in j["sites"] if s["status"] == "gone"][0]
print(s["base"]["allocated_bytes"], s["new"]["allocated_bytes"], g["new"] is None)' "$T/out"
# An old base (no allocated_bytes) against a new report: values, no delta.
python3 "$MKFIX" "$T/caps" "$(printf '%s' "$BASEC" | sed -E 's/(=[0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+),[0-9]+/\1/g')" >"$T/oldbase.mtr"
py "diff: the old base has no allocated_bytes" "0" '
import sys
print(sum("allocated_bytes" in l for l in open(sys.argv[1])))' "$T/oldbase.mtr"
run_mt "$MT_ASAN" diff "$T/oldbase.mtr" "$T/new.mtr" --json
py "diff old base json: delta null, new side known, base side null" "None 16384 None" '
import json, sys
j = json.load(open(sys.argv[1]))
s = [s for s in j["sites"] if s["frames"][0]["function"] == "fill_cache"][0]
print(s["delta"]["allocated_bytes"], s["new"]["allocated_bytes"], s["base"]["allocated_bytes"])' "$T/out"
run_mt "$MT_ASAN" diff "$T/oldbase.mtr" "$T/new.mtr"
contains "diff old base text: allocated without a delta" "frees=5 +2, allocated=16KB)" "$out"
run_mt "$MT_ASAN" diff "$T/base.mtr" "$T/new.mtr" --json --top 2
py "diff --top 2" "2" 'import json, sys; print(len(json.load(open(sys.argv[1]))["sites"]))' "$T/out"
# Against a summary report: the category diff only.
run_mt "$MT_ASAN" diff "$T/sum.mtr" "$T/new.mtr" --json
py "diff with a summary side: no sites key" "False" 'import json, sys; print("sites" in json.load(open(sys.argv[1])))' "$T/out"

# --- end to end: a real detail report of the agent -------------------------
# tests/agent/detail prints its own ledger per function; report detail's
# sites, attributed by the function that holds their first frame (the
# non-inlined entry of frame 0), must add up to it.
if [ -x "$TBIN/detail" ] && [ -e "$AGENT" ]; then
    "$MT" run --mode detail --depth 6 -o "$T/real.mtr" -- "$TBIN/detail" threads 3 recurse 5 >"$T/real.ledger" 2>/dev/null
    expect_eq "real: run exits 0" 0 "$?"
    run_mt "$MT_ASAN" report detail "$T/real.mtr" --json
    expect_eq "real: report detail exits 0" 0 "$rc"
    want=$(awk '$1 == "fn" { a = "?"; for (i = 2; i < NF; i++) if ($i == "allocated_bytes") a = $(i + 1); print $2, $4, $6, $8, a }' "$T/real.ledger" | sort)
    got=$(python3 - "$T/out" "$T/real.ledger" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
fns = {l.split()[1] for l in open(sys.argv[2]) if l.startswith("fn ")}
# the ledger gives allocated_bytes for some functions: "?" for the others, as the awk above
has_alloc = {l.split()[1] for l in open(sys.argv[2]) if l.startswith("fn ") and "allocated_bytes" in l.split()}
sums = {}
for s in j["sites"]:
    first = [f for f in s["frames"] if f["address"] == s["frames"][0]["address"]]
    fn = first[-1]["function"]
    if fn in fns:
        t = sums.setdefault(fn, [0, 0, 0, 0])
        t[0] += s["live_bytes"]; t[1] += s["live_count"]; t[2] += s["allocs"]; t[3] += s["allocated_bytes"]
for fn in sorted(sums):
    print(fn, *sums[fn][:3], sums[fn][3] if fn in has_alloc else "?")
EOF2
)
    expect_eq "real: symbolized sites per function (live, count, allocs, allocated bytes) equal the program's ledger" "$want" "$got"
    py "real: the ledger gives allocated_bytes for at least 5 functions (realloc growth among them)" "True" '
import sys
fl = [l.split() for l in open(sys.argv[1]) if l.startswith("fn ")]
print(sum("allocated_bytes" in f for f in fl) >= 5)' "$T/real.ledger"
    run_mt "$MT_ASAN" report detail "$T/real.mtr" --json --sort allocated
    py "real --sort allocated: by allocated bytes, descending" "allocated_bytes True" '
import json, sys
j = json.load(open(sys.argv[1]))
a = [s["allocated_bytes"] for s in j["sites"]]
print(j["sorted_by"], len(a) > 3 and a == sorted(a, reverse=True))' "$T/out"
    py "real: the always-inlined allocator shows as inlined into inline_host" "inlined_alloc True inline_host" '
import json, sys
j = json.load(open(sys.argv[1]))
for s in j["sites"]:
    f = s["frames"]
    if len(f) > 1 and f[1]["function"] == "inline_host" and f[0]["address"] == f[1]["address"]:
        print(f[0]["function"], f[0]["inlined"], f[1]["function"]); break' "$T/out"
    py "real: the sites add up to the total" "True" '
import json, sys
j = json.load(open(sys.argv[1]))
print(sum(s["live_bytes"] for s in j["sites"]) == j["total"]["live_bytes"])' "$T/out"
    # The same run recorded at --depth 2: diffed against the depth-6 one,
    # every site must match on its first 2 frames, unchanged (before: none
    # matched, every site new or gone, and nothing said why). The count of
    # sites is report detail's own at --depth 2.
    "$MT" run --mode detail --depth 2 -o "$T/real2.mtr" -- "$TBIN/detail" threads 3 recurse 5 >/dev/null 2>&1
    run_mt "$MT_ASAN" report detail "$T/real2.mtr" --json --depth 2
    nsites=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["sites"]))' "$T/out")
    run_mt "$MT_ASAN" diff "$T/real2.mtr" "$T/real.mtr"
    contains "diff at different stack depths: every site matched, unchanged ($nsites)" \
        "0 grew, 0 shrank, 0 new, 0 gone, $nsites unchanged (not shown)" "$out"
    contains "diff at different stack depths: says so" \
        "recorded at different stack depths (base 2, new 6): sites are matched on their first 2 frames" "$out"
    run_mt "$MT_ASAN" diff "$T/real.mtr" "$T/real2.mtr" --json
    py "diff at different stack depths, JSON: matched_frames 2, every site unchanged" "2 True" '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["matched_frames"], len(j["sites"]) > 3 and all(s["status"] == "unchanged" for s in j["sites"]))' "$T/out"
    # A --depth deeper than the shallower report's cuts nothing there: the
    # shallower depth still applies (the review: 4 matched nothing).
    run_mt "$MT_ASAN" diff "$T/real2.mtr" "$T/real.mtr" --depth 4
    contains "diff at different stack depths, --depth 4: still matched on 2 frames, every site unchanged" \
        "0 grew, 0 shrank, 0 new, 0 gone, $nsites unchanged (not shown)" "$out"
    contains "diff at different stack depths, --depth 4: says the --depth given was not the one used" \
        "as with --depth 2 (not the --depth given)" "$out"
    run_mt "$MT_ASAN" diff "$T/real.mtr" "$T/real.mtr" --json
    py "diff at one stack depth: matched_frames null" "None" 'import json, sys; print(json.load(open(sys.argv[1]))["matched_frames"])' "$T/out"
else
    fail "real: detail program" "$TBIN/detail or $AGENT missing (make tests)"
fi

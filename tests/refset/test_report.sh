# memtrail refset report on a recording written by the real writer
# (test_report_model --write: the seed's example in pid 100, file pages
# pid 101 references first at 2.2 s and pid 100 at 2.5 s): the text and
# JSON figures the recording's construction fixes, the stacks symbolized,
# and the error cases (cut file, viewport, missing and foreign files).
source "$(dirname "$0")/../lib.sh"
GEN=$BUILD/asan/tests/refset/test_report_model
[ -x "$MT" ] && [ -x "$GEN" ] || { fail setup "build first: $MT or $GEN missing"; exit 1; }
R=$T/seed.mtr
check "the generator writes a recording" "$GEN" --write "$R"
MB=1048576

# The seed's example, viewport 1:2 (text)
run_mt "$MT" refset report "$R" --viewport 1:2
expect_eq "text: exit 0" 0 "$rc"
contains "text: Size 30MB and its impact types" "Size                30MB (impacting 10MB, transient 10MB, persistent 10MB)" "$out"
contains "text: Impact Size +10MB" "Impact Size         +10MB" "$out"
contains "text: graph at T0 10MB" "Graph at T0         10MB" "$out"
contains "text: graph at T1 20MB" "Graph at T1         20MB" "$out"
contains "text: peak at 1.6 s" "Peak                30MB at 1.600s" "$out"
contains "text: steady state: the file pages stay after exit" "Steady state        40KB" "$out"
contains "text: the viewport" "Viewport: 1.000s to 2.000s" "$out"
contains "text: lost samples said" "Lost: 5 page-fault samples" "$out"
expect_match "text: the process row" "100 seed +30MB +\+10MB +10MB +20MB +10MB +10MB +10MB" "$out"

# JSON: the same figures, and the contract's keys
"$MT" refset report "$R" --viewport 1:2 --json >"$T/v12.json"
expect_eq "json: exit 0" 0 "$?"
expect_eq "json: schema" "memtrail/1" "$(json_get "$T/v12.json" 'j["schema"]')"
expect_eq "json: seed figures" "$((10 * MB)) $((20 * MB)) $((30 * MB)) $((10 * MB))" \
    "$(json_get "$T/v12.json" '"%d %d %d %d" % (j["graph_start_bytes"], j["graph_end_bytes"], j["size_bytes"], j["impact_size_bytes"])')"
expect_eq "json: impact types 10 MB each" "$((10 * MB)) $((10 * MB)) $((10 * MB))" \
    "$(json_get "$T/v12.json" '"%d %d %d" % tuple(j["impact_types"][k] for k in ("impacting_bytes", "transient_bytes", "persistent_bytes"))')"
expect_eq "json: viewport and start" "1.0 2.0 5000000000" \
    "$(json_get "$T/v12.json" '"%s %s %d" % (j["viewport"]["start_s"], j["viewport"]["end_s"], j["start_monotonic_ns"])')"
expect_eq "json: seven categories, named" "Heap:Dynamic VirtualAlloc:Dynamic UserStack:Dynamic PFMappedSection:Dynamic CopyOnWriteImage:File Image:File MapFile:File" \
    "$(json_get "$T/v12.json" '" ".join(c["name"] + ":" + c["class"] for c in j["categories"])')"
expect_eq "json: peak and steady state" "$((30 * MB)) 1.6 40960" \
    "$(json_get "$T/v12.json" '"%d %s %d" % (j["peak"]["bytes"], j["peak"]["time_s"], j["steady_state_bytes"])')"
expect_eq "json: the timeline's points add up" "ok" \
    "$(json_get "$T/v12.json" '"ok" if all(sum(p["by_process"]) == p["bytes"] == sum(p["by_category"].values()) for p in j["timeline"]) and j["timeline"][0]["bytes"] == j["graph_start_bytes"] and j["timeline"][-1]["bytes"] == j["graph_end_bytes"] else j["timeline"]')"
expect_eq "json: stacks symbolized" "touch_buffers touch_heap" \
    "$(json_get "$T/v12.json" '" ".join(s["frames"][0]["function"] or "?" for s in j["stacks"]["impacting"])')"

# page_data (what memtrail html recomputes viewports from): the whole
# recording's report, recomputed here for 1:2 and 2.4:3 by the documented
# rules, equals the report made for each viewport.
"$MT" refset report "$R" --json >"$T/all.json"
"$MT" refset report "$R" --viewport 2.4:3 --json >"$T/v243.json"
for v in "1 2 v12" "2.4 3 v243"; do
    set -- $v
    expect_eq "json: page_data recomputes viewport $1:$2 as refset report --viewport does" "ok" "$(python3 - "$T/all.json" "$T/$3.json" "$1" "$2" <<'PYEOF'
import json, sys
a, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t0, t1 = round(float(sys.argv[3]) * 1e9), round(float(sys.argv[4]) * 1e9)
ps, inf = a["page_size_bytes"], float("inf")
def zero():
    return dict(size_bytes=0, graph_start_bytes=0, graph_end_bytes=0, zero_page_bytes=0,
                impacting_bytes=0, transient_bytes=0, persistent_bytes=0)
total, procs, cats = zero(), [zero() for _ in a["processes"]], [zero() for _ in a["categories"]]
for p, c, ref, rel, z, n in a["page_data"]["references"]:
    ref = -inf if ref is None else ref
    rel = inf if rel is None else rel
    if ref > t1 or rel <= t0:
        continue
    kind = "transient" if ref > t0 and rel <= t1 else "persistent" if ref <= t0 and rel > t1 else "impacting"
    for f in (total, procs[p], cats[c]):
        f["size_bytes"] += n * ps
        f[kind + "_bytes"] += n * ps
        f["zero_page_bytes"] += n * ps if z else 0
for p, c, start, end, n in a["page_data"]["spans"]:
    start = -inf if start is None else start
    end = inf if end is None else end
    for f in (total, procs[p], cats[c]):
        f["graph_start_bytes"] += n * ps if start <= t0 < end else 0
        f["graph_end_bytes"] += n * ps if start <= t1 < end else 0
def theirs(r):
    f = {k: r[k] for k in ("size_bytes", "graph_start_bytes", "graph_end_bytes", "zero_page_bytes")}
    f.update(r["impact_types"])
    return f
rows = [(total, want)] + list(zip(procs, want["processes"])) + list(zip(cats, want["categories"]))
bad = [(m, theirs(r)) for m, r in rows if m != theirs(r)]
print("ok" if not bad and a["page_data"]["references"] else bad[:2])
PYEOF
)"
done

# Sharing (no PFNs: the file's device, inode and offset): 2:3
"$MT" refset report "$R" --viewport 2:3 --json >"$T/v23.json"
expect_eq "share: Size in each process" "$((20 * MB + 40960)) 40960" \
    "$(json_get "$T/v23.json" '" ".join(str(p["size_bytes"]) for p in j["processes"])')"
expect_eq "share: Impact Size once, for the first (pid 101)" "$((-10 * MB)) 40960 $((-10 * MB + 40960))" \
    "$(json_get "$T/v23.json" '" ".join(str(p["impact_size_bytes"]) for p in j["processes"]) + " " + str(j["impact_size_bytes"])')"
run_mt "$MT" refset report "$R" --viewport 2:3 --by category
expect_match "text --by category: MapFile row" "MapFile \(File\) +80KB +\+40KB +0B +40KB" "$out"
run_mt "$MT" refset report "$R" --by class
expect_match "text --by class: File row" "File +80KB +\+40KB" "$out"
run_mt "$MT" refset report "$R" --by stack --top 1
contains "text --by stack: the top stack symbolized" "touch_buffers (" "$out"
expect_eq "text --by stack --top 1: one stack a list" 2 "$(printf '%s\n' "$out" | grep -c '^  #')"
run_mt "$MT" refset report "$R" --viewport 2.5:
contains "viewport T0: to the end" "Viewport: 2.500s to 3.200s" "$out"

# Viewport errors: exit 2 and one clear line
run_mt "$MT" refset report "$R" --viewport 5:9
expect_eq "viewport outside: exit 2" 2 "$rc"
contains "viewport outside: said" "viewport 5:9 lies outside the recording (0 to 3.2 s)" "$err"
run_mt "$MT" refset report "$R" --viewport 2:1
expect_eq "viewport reversed: exit 2" 2 "$rc"
contains "viewport reversed: said" "ends before it starts" "$err"
run_mt "$MT" refset report "$R" --viewport 1-2
expect_eq "viewport malformed: exit 2" 2 "$rc"
contains "viewport malformed: said" "'1-2' is not T0:T1" "$err"
run_mt "$MT" refset report "$R" --by size
expect_eq "--by unknown: exit 2" 2 "$rc"

# Files: missing, not a recording, cut short
run_mt "$MT" refset report "$T/none.mtr"
expect_eq "missing file: exit 1" 1 "$rc"
contains "missing file: said" "refset report: $T/none.mtr: No such file or directory" "$err"
printf 'hello, not a recording\n' >"$T/text.mtr"
run_mt "$MT" refset report "$T/text.mtr"
expect_eq "not a recording: exit 1" 1 "$rc"
contains "not a recording: said" "not a memtrail reference-set recording" "$err"
size=$(stat -c %s "$R")
head -c $((size * 2 / 3)) "$R" >"$T/cut.mtr"
run_mt "$MT" refset report "$T/cut.mtr" --json
expect_eq "cut: exit 1" 1 "$rc"
expect_match "cut: where it stopped and what the report covers" \
    "^memtrail: refset report: $T/cut.mtr: stopped at offset [0-9]+: .*; the report covers the first [0-9.]+ s$" "$err"
printf '%s\n' "$out" >"$T/cut.json"
expect_eq "cut: the report of what was read" "False 100" \
    "$(json_get "$T/cut.json" '"%s %d" % (j["complete"], j["processes"][0]["pid"])')"
covered=$(printf '%s' "$err" | sed -E 's/.*the first ([0-9.]+) s$/\1/')
expect_eq "cut: the covered time ($covered s) is the report's duration" "True" \
    "$(json_get "$T/cut.json" "j['duration_s'] == float('$covered') < 3.2")"

# A recording of a million page references (8 processes, shared file pages,
# releases) reports in seconds: no quadratic step (the limit leaves room for
# a loaded machine).
check "big: the generator writes a million page references" "$GEN" --write-big "$T/big.rsr" 1000000
start=$(date +%s%N)
run_mt "$MT" refset report "$T/big.rsr" --json
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "big: exit 0" 0 "$rc"
[ "$ms" -lt 20000 ] && pass "big: reported in ${ms} ms (< 20 s)" || fail "big: reported in < 20 s" "${ms} ms"

# An attached recording with physical frames (test_report_model --write-attach):
# pid 200's 8 pages from before, 4 released at 1 s; pid 201 maps the same
# frames at 0.5 s, reads 2 zero pages, references one page twice; exits at 2 s.
check "attach: the generator writes a recording" "$GEN" --write-attach "$T/att.rsr"
run_mt "$MT" refset report "$T/att.rsr"
contains "attach: the note on pages present at the start" "Attached: pages present when recording began are counted as referenced before the scenario" "$out"
contains "attach: zero-page bytes said" "Zero page: 8KB of Size" "$out"
contains "attach: the duplicate said" "Duplicates: 1 page references" "$out"
"$MT" refset report "$T/att.rsr" --json --viewport 0.2:1.5 >"$T/att.json"
expect_eq "attach json: physical pages, attached" "True True" "$(json_get "$T/att.json" '"%s %s" % (j["physical_pages"], j["attached"])')"
# 200: 4 pages persistent, 4 released inside (impacting); 201: 8 shared + 2 zero pages referenced inside, kept.
expect_eq "attach json: Size per process (sharing counts in each)" "32768 40960" \
    "$(json_get "$T/att.json" '" ".join(str(p["size_bytes"]) for p in j["processes"])')"
expect_eq "attach json: before pages persistent/impacting; the shared frames owned by the first (200)" \
    "16384 16384 0 0 32768 32768" \
    "$(json_get "$T/att.json" '"%d %d %d %d %d %d" % (j["processes"][0]["impact_types"]["persistent_bytes"], j["processes"][0]["impact_types"]["impacting_bytes"], j["processes"][1]["impact_size_bytes"], j["impact_size_bytes"], j["graph_start_bytes"], j["graph_end_bytes"])')"
expect_eq "attach json: zero pages in Size only" "8192 1" "$(json_get "$T/att.json" '"%d %d" % (j["zero_page_bytes"], j["duplicate_references"])')"

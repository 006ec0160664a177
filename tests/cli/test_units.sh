#!/usr/bin/env bash
# Sizes and times as the text of every command prints them (docs/cli.md
# "Sizes and times"): a program holding blocks of known sizes (1000 B,
# 900 KiB, 3 MiB + 5 B, one category each) checked in `report --scale
# KB|MB|GB` and in `analyze`, against values worked out by hand from the
# documented rule; and the times of a trace with a known sleep: every time
# `analyze` and `report` print is the trace's own timestamp (read through
# `analyze --json`) from the one origin, the trace's start.
. "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$TBIN/units" ] || { fail units-build "build first (make tests)"; exit 1; }

# The "(malloc=SIZE #N) (peak=SIZE)" line of category $2 in report text $1.
malloc_line() { printf '%s\n' "$1" | awk -v c="$2" '$1 == "-" && $2 == c { getline; sub(/^ +/, ""); print; exit }'; }

# --- sizes in the summary: --scale KB, MB, GB ---------------------------------
MEMTRAIL_OPTIONS="output=$T/hold.mtr" LD_PRELOAD=$AGENT "$TBIN/units" hold >/dev/null
expect_eq "units hold: runs" 0 "$?"
for scale in KB MB GB; do
    run_mt "$MT_ASAN" report "$T/hold.mtr" --scale $scale
    expect_eq "report --scale $scale: exit 0" 0 "$rc"
    # 1000 B = 0.9765625 KB = 0.00095367 MB = 0.00000093132 GB;
    # 900 KiB = 900 KB = 0.87890625 MB = 0.00085831 GB;
    # 3 MiB + 5 B = 3072.0049 KB = 3.0000048 MB = 0.0029296921 GB.
    case $scale in
    KB) small=0.977KB medium=900KB large=3072KB ;;
    MB) small=0.000954MB medium=0.879MB large=3.00MB ;;
    GB) small=0.000000931GB medium=0.000858GB large=0.00293GB ;;
    esac
    expect_eq "report --scale $scale: 1000 B" "(malloc=$small #1) (peak=$small)" "$(malloc_line "$out" small)"
    expect_eq "report --scale $scale: 900 KiB" "(malloc=$medium #1) (peak=$medium)" "$(malloc_line "$out" medium)"
    expect_eq "report --scale $scale: 3 MiB + 5 B" "(malloc=$large #1) (peak=$large)" "$(malloc_line "$out" large)"
done
# The JSON, the truth the text is checked against, holds the bytes.
"$MT" report --json "$T/hold.mtr" >"$T/hold.json"
expect_eq "report --json: the three categories to the byte" "1000 921600 3145733" \
    "$(json_get "$T/hold.json" "' '.join(str(c[k]) for n in ('small', 'medium', 'large') for c in j['categories'] if c['name'] == n for k in [[x for x in c if x.startswith('live') and 'byte' in x][0]])")"

# --- sizes in analyze ---------------------------------------------------------
MEMTRAIL_OPTIONS="mode=trace:output=$T/hold.mtt" LD_PRELOAD=$AGENT "$TBIN/units" hold >/dev/null
expect_eq "units hold, trace mode: runs" 0 "$?"
run_mt "$MT_ASAN" analyze "$T/hold.mtt" --leaks --top 0
expect_eq "analyze: exit 0" 0 "$rc"
# Bytes exact below 1 KB, then the largest unit reached, three digits.
contains "analyze: 1000 B leaked" "1000B in 1 block (small, stack" "$out"
contains "analyze: 900 KiB leaked" "900KB in 1 block (medium, stack" "$out"
contains "analyze: 3 MiB + 5 B leaked" "3.00MB in 1 block (large, stack" "$out"
lacks_kib() { if printf '%s' "$2" | grep -Eq 'KiB|MiB|GiB| B\b'; then fail "$1" "old units in: $2"; else pass "$1"; fi; }
lacks_kib "analyze: one set of labels (KB, MB; no KiB)" "$out"

# --- times: one origin --------------------------------------------------------
MEMTRAIL_OPTIONS="mode=trace:output=$T/sleep.mtt" LD_PRELOAD=$AGENT "$TBIN/units" sleep
expect_eq "units sleep: runs" 0 "$?"
"$MT" analyze --json "$T/sleep.mtt" >"$T/sleep.json"
run_mt "$MT_ASAN" analyze "$T/sleep.mtt" --peak --top 1
expect_eq "analyze (sleep): exit 0" 0 "$rc"
# The trace's times (ns from its start), and the documented duration format.
times=$(python3 - "$T/sleep.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
first = j["first_ns"]
last = j["last_ns"]
peak = j["peak"]["time_ns"]
def fmt(ns):
    if ns < 1000:
        return "%dns" % ns
    units = [(1000, "us"), (10**6, "ms"), (10**9, "s")]
    k = 0
    while k + 1 < len(units) and ns >= units[k + 1][0]:
        k += 1
    v = (ns * 1000 * 2 + units[k][0]) // (2 * units[k][0])
    if v >= 10**6 and k + 1 < len(units):
        k += 1
        v = (ns * 1000 * 2 + units[k][0]) // (2 * units[k][0])
    return "%d.%03d%s" % (v // 1000, v % 1000, units[k][1])
print(fmt(first), fmt(last), fmt(peak), int(first <= peak <= last), int(peak - first >= 199 * 10**6))  # 1 ms: the clock's calibration
EOF
)
read -r first last peak ordered slept <<<"$times"
expect_eq "trace (sleep): first <= peak <= last, in the trace's own times" 1 "$ordered"
expect_eq "trace (sleep): the peak comes after the 200 ms sleep" 1 "$slept"
contains "analyze: the events' span, both ends from the start" "events from $first to $last after the start" "$out"
contains "analyze: the peak's time from the same start" "first reached at $peak" "$out"
run_mt "$MT_ASAN" report "$T/sleep.mtt"
contains "report of the trace: its duration is the last event's time from the same start" "after $last)" "$out"

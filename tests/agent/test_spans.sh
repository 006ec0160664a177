# Request spans (mt_span_begin/end) against the books of a synthetic
# request server (tests/agent/spans.c): its threads serve "get" and "put"
# requests, some nested, and some hit a stall of known length inside
# malloc, injected by libslowalloc.so preloaded after the agent (the
# agent's real malloc, so the stall is inside the timed call). The span
# lines of the report file (docs/report-format.md) are parsed here with
# python3 and compared with what the program counted and measured.
source "$(dirname "$0")/../lib.sh"
SLOW=$TBIN/libslowalloc.so
[ -x "$TBIN/spans" ] && [ -f "$AGENT" ] && [ -f "$SLOW" ] || { fail setup "build first: $TBIN/spans, $AGENT, $SLOW"; exit 1; }

# spancheck REPORT LEDGER CHECK: runs one named check over the parsed
# report (r: its span data) and ledger (l); prints PASS/FAIL/SKIP lines.
spancheck() { python3 - "$@" <<'EOF'
import sys
report, ledger, check = sys.argv[1], sys.argv[2], sys.argv[3]

def fields(line):
    out = {}
    for w in line.split()[1:]:
        k, _, v = w.partition("=")
        out[k] = v
    return out

r = {"names": {}, "span": {}, "memory": {}, "spans": None, "memory_time": None, "info": False}
for line in open(report):
    line = line.rstrip("\n")
    kind = line.split(" ", 1)[0]
    if kind == "span_name":
        head, _, name = line.partition(" name=")
        f = fields(head)
        r["names"][name] = (int(f["id"]), int(f["count"]))
    elif kind in ("span", "span_memory"):
        f = {k: int(v) for k, v in fields(line).items()}
        r["span" if kind == "span" else "memory"].setdefault(f["id"], []).append(f)
    elif kind == "spans":
        r["spans"] = fields(line)
    elif kind == "memory_time":
        r["memory_time"] = {k: int(v) for k, v in fields(line).items()}
    elif kind == "info":
        r["info"] = True

l = {}
slow = {}
for line in open(ledger):
    w = line.split()
    if len(w) == 3 and w[0] in ("count", "stalled", "injected"):
        l[(w[0], w[1])] = int(w[2])
    elif len(w) == 3 and w[0] == "slow":
        slow.setdefault(w[1], []).append(int(w[2]))
    elif len(w) == 2 and w[1].isdigit():
        l[w[0]] = int(w[1])

def ok(name, cond, why):
    print(("PASS %s" % name) if cond else ("FAIL %s: %s" % (name, why)))

def buckets(name):
    return r["span"].get(r["names"][name][0], []) if name in r["names"] else []

def bounds(v):
    """The bucket [lo, hi) of v ns, as docs/report-format.md defines it."""
    if v < 10:
        return v, v + 1
    if v >= 10**13:
        return 10**13, 2**63 - 1
    e = 0
    while v >= 100:
        v //= 10
        e += 1
    return v * 10**e, (v + 1) * 10**e

STALL = 5000000
if check == "server":
    for name in ("get", "put"):
        b = buckets(name)
        ok("spans: %s count equals the requests served" % name,
           name in r["names"] and r["names"][name][1] == l[("count", name)],
           "report %s, ledger %s" % (r["names"].get(name), l[("count", name)]))
        ok("spans: %s buckets add up to the name's count" % name,
           sum(x["count"] for x in b) == l[("count", name)], str(sum(x["count"] for x in b)))
        mem = r["memory"].get(r["names"][name][0], [])
        ok("spans: %s memory histogram holds every span" % name,
           sum(x["count"] for x in mem) == l[("count", name)], str(sum(x["count"] for x in mem)))
        bad = [x for x in b + mem if bounds(x["lo_ns"]) != (x["lo_ns"], x["hi_ns"])]
        bad += [x for x in b if not x["lo_ns"] * x["count"] <= x["duration_ns"] < x["hi_ns"] * x["count"]]
        ok("spans: %s buckets have the documented bounds and hold their durations" % name, not bad, str(bad[:3]))
        ok("spans: %s buckets ascend" % name, [x["lo_ns"] for x in b] == sorted(x["lo_ns"] for x in b), "order")
        # Every stalled request lasts at least the stall. Another one can
        # too, when it lost its CPU that long inside its span: then the
        # program measured it that long as well. So the requests at or
        # above the stall are at least the stalled ones and at most those
        # the program measured that long (20 us of slack: the clocks'
        # calibration, below).
        stalled = [x for x in b if x["lo_ns"] >= STALL]
        got = sum(x["count"] for x in stalled)
        measured = sum(1 for v in slow.get(name, []) if v >= STALL - 20000)
        ok("spans: %s stalled requests are the ones at or above %d ns" % (name, STALL),
           l[("stalled", name)] <= got <= measured,
           "report %d, ledger %d stalled, program measured %d that long" % (got, l[("stalled", name)], measured))
        # ... each in the bucket of its latency as the program measured it
        # (around begin and end, so a little longer than the agent's).
        mine = sorted(v for v in slow.get(name, []) if v >= STALL)
        theirs = sorted(x["lo_ns"] for x in stalled for _ in range(x["count"]))
        # The program also lists requests it saw last that long for another
        # reason (a preemption between its clock and the span): each stalled
        # bucket entry must match a distinct measured latency.
        wrong, free = [], list(mine)
        for lo in theirs:
            # The agent's clock is the TSC at a rate calibrated over the run:
            # at a bucket's edge its duration may exceed the program's
            # clock_gettime one by the calibration's error (0.01% = 0.5 us
            # at 5 ms seen): 20 us of slack below the bucket. Above it, the
            # program's measure also holds whatever preempted it between
            # its clock and the span (a CI run saw 250 us): 1 ms.
            hit = next((p for p in free if lo - 20000 <= p < bounds(lo)[1] + 1000000), None)
            if hit is None:
                wrong.append(lo)
            else:
                free.remove(hit)
        ok("spans: %s stalled requests land in the buckets of their measured latency" % name,
           len(mine) >= len(theirs) and not wrong, "program %s vs buckets %s; unmatched %s" % (mine, theirs, wrong))
        memory = sum(x["memory_ns"] for x in stalled)
        inj = l[("injected", name)]
        ok("spans: %s memory time of the stalled requests within 10%% of the injected stalls" % name,
           inj > 0 and abs(memory - inj) <= inj / 10 and inj >= STALL * l[("stalled", name)],
           "memory_ns %d, injected %d (%d stalls)" % (memory, inj, l[("stalled", name)]))
        fast = [x for x in b if x["lo_ns"] < STALL]
        ok("spans: %s requests without a stall spent less than half their time in memory calls" % name,
           sum(x["memory_ns"] for x in fast) < sum(x["duration_ns"] for x in fast),
           "memory %d of %d" % (sum(x["memory_ns"] for x in fast), sum(x["duration_ns"] for x in fast)))
    inj = l[("injected", "get")] + l[("injected", "put")]
    if r["memory_time"] is None:
        print("SKIP spans: alloc_time_ns holds the stalls: no memory_time line (memory info not merged)")
    else:
        ok("spans: alloc_time_ns holds the stalls", r["memory_time"]["alloc_time_ns"] >= inj * 0.9,
           "%s vs %d" % (r["memory_time"], inj))
    s = r["spans"] or {}
    ok("spans: the summary line counts 2 names, the extra end and the 17th level",
       s.get("names") == "2" and s.get("unmatched_ends") == "1" and s.get("dropped") == "1"
       and s.get("faults_counted") == "0", str(s))
elif check == "map":
    b = buckets("put")
    ok("spans: map requests counted", sum(x["count"] for x in b) == l[("count", "put")], str(b[:2]))
    memory = sum(x["memory_ns"] for x in b)
    ok("spans: time inside mmap/munmap is the span's memory time (within 10%)",
       abs(memory - l["map_ns"]) <= l["map_ns"] / 10, "memory_ns %d, program %d" % (memory, l["map_ns"]))
    faults = sum(x["faults"] for x in b)
    n = l[("count", "put")]
    ok("spans: span_faults=on counts the populated pages", faults >= n * 4096 and r["spans"]["faults_counted"] == "1",
       "faults %d for %d spans of 4096 pages" % (faults, n))
    if r["memory_time"] is None:
        print("SKIP spans: map_time_ns holds the mapping calls' time: no memory_time line (memory info not merged)")
    else:
        ok("spans: map_time_ns holds the mapping calls' time", r["memory_time"]["map_time_ns"] >= memory * 0.9,
           "%s vs %d" % (r["memory_time"], memory))
    # Each request maps (GROW) and unmaps (TRIM) anonymous memory.
    if not r["info"]:
        print("SKIP spans: map requests are affected by GROW and TRIM: no info lines (memory events not merged)")
    else:
        aff = sum(x["affected"] for x in b)
        mult = sum(x["multiple"] for x in b)
        ev = sum(x["events"] for x in b)
        ok("spans: map requests are affected by GROW and TRIM", aff == n and mult == n and ev >= 2 * n,
           "affected %d multiple %d events %d of %d" % (aff, mult, ev, n))
elif check == "limits":
    s = r["spans"] or {}
    ok("spans: 64 names, the 65th dropped, two unmatched ends",
       s.get("names") == "64" and s.get("dropped") == "1" and s.get("unmatched_ends") == "2", str(s))
    ok("spans: the outer span stayed balanced around NULL, empty and 65th names",
       r["names"].get("outer", (0, 0))[1] == 1, str(r["names"].get("outer")))
    ok("spans: a name of 63 bytes is kept whole; 64 and 70 are refused, not cut (no span under their first 63)",
       r["names"].get("x" * 63, (0, 0))[1] == 1 and not [n for n in r["names"] if n[0] in "xy" and n != "x" * 63],
       str([(n, c) for n, (i, c) in r["names"].items() if n[0] in "xy"]))
    ok("spans: a name with a space is escaped, and told from the name its buffer held before",
       r["names"].get("two\\swords", (0, 0))[1] == 1, str(list(r["names"])[:4]))
    ok("spans: a known name is found again", r["names"].get("n05", (0, 0))[1] == 2, str(r["names"].get("n05")))
elif check == "fork":
    who = ledger.rsplit("/", 1)[-1].split(".")[0]
    ok("spans: the open span goes on in the %s" % who,
       r["names"].get("outer", (0, 0))[1] == 1, str(r["names"]))
    ok("spans: the %s's unmatched ends are its own" % who,
       (r["spans"] or {}).get("unmatched_ends") == str(l.get("unmatched")), str(r["spans"]))
elif check == "empty":
    ok("spans: a report without spans still has the spans line",
       r["spans"] == {"names": "0", "unmatched_ends": "0", "dropped": "0", "faults_counted": "0"}
       and not r["names"], str(r["spans"]))
EOF
}

# The request server: 4 threads x 500 requests, 80 of them stalled 5 ms.
MEMTRAIL_OPTIONS="output=$T/server.mtr" LD_PRELOAD=$AGENT:$SLOW "$TBIN/spans" server 4 500 >"$T/server.ledger"
rc=$?
expect_eq "spans: the server saw the return codes it expected" "0" "$rc"
grep '^rc ' "$T/server.ledger" | head -5
spancheck "$T/server.mtr" "$T/server.ledger" server

# The same with every allocator call timed, in spans or not.
MEMTRAIL_OPTIONS="output=$T/all.mtr:alloc_timing=all" LD_PRELOAD=$AGENT:$SLOW "$TBIN/spans" server 2 300 >"$T/all.ledger"
expect_eq "spans: alloc_timing=all: the server ran" "0" "$?"
spancheck "$T/all.mtr" "$T/all.ledger" server | sed 's/^\(PASS\|FAIL\|SKIP\) spans:/\1 spans (alloc_timing=all):/'

# Mapping calls inside spans (16 MiB, populated), with the page faults.
MEMTRAIL_OPTIONS="output=$T/map.mtr:span_faults=on" LD_PRELOAD=$AGENT "$TBIN/spans" map 20 >"$T/map.ledger"
expect_eq "spans: the map requests ran" "0" "$?"
spancheck "$T/map.mtr" "$T/map.ledger" map

# Limits and bad input: return codes checked by the program, counts here.
MEMTRAIL_OPTIONS="output=$T/limits.mtr" LD_PRELOAD=$AGENT "$TBIN/spans" limits >"$T/limits.ledger"
expect_eq "spans: limits and bad names return their documented codes" "0" "$?"
grep '^rc ' "$T/limits.ledger" | head -5
spancheck "$T/limits.mtr" "$T/limits.ledger" limits

# Fork inside an open span: the child ends its copy and one more.
MEMTRAIL_OPTIONS="output=$T/fork.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/spans" fork >"$T/fork.ledger"
expect_eq "spans: fork inside a span" "0" "$?"
parent=$(sed -n 's/^pid //p' "$T/fork.ledger")
n=0
for f in "$T"/fork.*.mtr; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    if [ "$(sed -n 's/^pid //p' "$f")" = "$parent" ]; then who=parent; ends=0; else who=child; ends=1; fi
    echo "unmatched $ends" >"$T/$who.ledger"
    spancheck "$f" "$T/$who.ledger" fork
done
expect_eq "spans: parent and child wrote a report each" "2" "$n"

# Span histograms make reports long: the control socket's baseline keeps
# one of a few hundred KiB whole (its buffer grows), and diff sends it back.
mkdir -p "$T/wide"
MEMTRAIL_OPTIONS="output=$T/wide.mtr" LD_PRELOAD=$AGENT "$TBIN/spans" wide "$T/wide" &
wpid=$!
for ((i = 0; i < 3000; i++)); do [ -e "$T/wide/ready" ] && break; sleep 0.02; done
"$MT" query "$wpid" baseline --json >"$T/wide.json" 2>"$T/wide.err"
expect_eq "spans: query baseline of a report over 64 KiB: exits 0" "0" "$?"
expect_eq "spans: ... and the baseline is the report (reason baseline)" "baseline" "$(json_get "$T/wide.json" "j['reason']" 2>&1)"
"$MT" query "$wpid" diff >"$T/wide.diff" 2>&1
expect_eq "spans: query diff after that baseline: exits 0" "0" "$?"
touch "$T/wide/stop"
wait "$wpid"
size=$(wc -c <"$T/wide.mtr")
lines=$(grep -c '^span ' "$T/wide.mtr")
check "spans: the wide report is over 64 KiB ($size bytes, $lines span lines)" test "$size" -gt 65536

# No spans at all.
MEMTRAIL_OPTIONS="output=$T/none.mtr" LD_PRELOAD=$AGENT /bin/true
spancheck "$T/none.mtr" /dev/null empty

# The bench mode runs (its figures are bench/info.sh's business: timings
# are not pass/fail here), and says what it measured.
for faults in off on; do
    MEMTRAIL_OPTIONS="output=$T/bench.mtr:span_faults=$faults" LD_PRELOAD=$AGENT "$TBIN/spans" bench 100000 >"$T/bench.out"
    check "spans: bench mode (span_faults=$faults) prints its pair cost" grep -Eq '^pair_ns [0-9.]+$' "$T/bench.out"
done

# Span names are the program's bytes: a name that is a terminal's escape
# sequence (window title, screen clear) or not UTF-8 reaches memtrail info's
# text escaped (\xNN), printable UTF-8 as it is; the JSON gives the names back.
MEMTRAIL_OPTIONS="output=$T/named.mtr" LD_PRELOAD=$AGENT "$TBIN/spans" named \
    $'\e]0;pwned\a\e[2J' $'caf\xc3\xa9 \xff' plain >"$T/named.ledger"
expect_eq "spans: named spans ran" "0" "$?"
run_mt "$MT" info "$T/named.mtr"
expect_eq "spans: info shows the names escaped, no escape byte reaches the terminal" \
    "0|  span '\\x1b]0;pwned\\x07\\x1b[2J':|  span 'café \\xff':|  span 'plain':|0" \
    "$rc|$(grep "^  span '" "$T/out" | paste -sd'|')|$(tr -cd '\000-\011\013-\037\177' <"$T/out" | wc -c)"
run_mt "$MT" info "$T/named.mtr" --json
expect_eq "spans: info --json parses and gives the names (U+FFFD for a byte not UTF-8)" \
    "0 ['\\x1b]0;pwned\\x07\\x1b[2J', 'caf\\xe9 \\ufffd', 'plain']" \
    "$rc $(printf '%s' "$out" | python3 -c 'import json,sys; print(ascii([n["name"] for n in json.load(sys.stdin)["spans"]["by_name"]]))')"

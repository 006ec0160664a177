#!/usr/bin/env bash
# `memtrail xe plan`: the seed's two tables (transcribed from seed 000) as
# text and JSON, row for row; other machine shapes, strict mode, large
# buffers and the advice against an independent python3 recomputation of
# the rules (brute force: every KB value, no step formula); rejected sizes
# (exit 1 with the reason), usage errors (exit 2) and --help. Every call
# runs the ASan+UBSan build.
. "$(dirname "$0")/../lib.sh"

[ -x "$MT_ASAN" ] || { fail xe-plan-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }
XP() { "$MT_ASAN" xe plan "$@"; }

# --- the seed's NONE range table, 1..4096 KB (NULL: rejected) ----------------
cat >"$T/seed_none.txt" <<'EOF'
1 191 NULL NULL NULL
192 383 3 130867 392601
384 575 3 196403 589209
576 767 3 261939 785817
768 959 3 327475 982425
960 1151 3 393011 1179033
1152 1343 3 458547 1375641
1344 1535 3 524083 1572249
1536 1727 3 589619 1768857
1728 1919 3 655155 1965465
1920 2111 3 720691 2162073
2112 2303 3 786227 2358681
2304 2495 3 851763 2555289
2496 2687 3 917299 2751897
2688 2879 3 982835 2948505
2880 3071 3 1048371 3145113
3072 3263 3 1113907 3341721
3264 3455 3 1179443 3538329
3456 3647 3 1244979 3734937
3648 3839 3 1310515 3931545
3840 4031 3 1376051 4128153
4032 4096 3 1441587 4324761
EOF
# The seed's 2-core PER_CPU table: input_memory_kb, buffers, size, total.
cat >"$T/seed_per_cpu.txt" <<'EOF'
637 5 130867 654335
638 5 130867 654335
639 5 130867 654335
640 5 196403 982015
641 5 196403 982015
642 5 196403 982015
EOF

# table_rows FILE: the data rows of a text range table, single-spaced.
table_rows() { awk '/^[0-9]/ { print $1, $2, $3, $4, $5 }' "$1"; }

run_mt XP --range 1-4096
expect_eq "range none 1-4096: exit 0" 0 "$rc"
expect_eq "range none 1-4096: header has the seed's columns" \
    "start_memory_range_kb end_memory_range_kb total_regular_buffers regular_buffer_size total_buffer_size" \
    "$(head -1 "$T/out" | tr -s ' ')"
table_rows "$T/out" >"$T/none_rows.txt"
expect_eq "range none 1-4096: 22 rows as the seed" 22 "$(wc -l <"$T/none_rows.txt")"
n=0
while read -r want; do
    n=$((n + 1))
    expect_eq "range none text row $n (${want%% *} KB..)" "$want" "$(sed -n "${n}p" "$T/none_rows.txt")"
done <"$T/seed_none.txt"
contains "range none 1-4096: advice for the end" "advice for 4096 KB (the range's end): any MAX_MEMORY from 4032 to 4223 KB" "$out"

XP --range 1-4096 --json >"$T/none.json"
expect_eq "range none json: same rows as the seed" "ok" "$(python3 - "$T/none.json" "$T/seed_none.txt" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
keys = ["start_memory_range_kb", "end_memory_range_kb", "total_regular_buffers", "regular_buffer_size_bytes",
        "total_buffer_size_bytes"]
seed = [[None if v == "NULL" else int(v) for v in l.split()] for l in open(sys.argv[2])]
got = [[r[k] for k in keys] for r in j["rows"]]
bad = [(i, g, s) for i, (g, s) in enumerate(zip(got, seed)) if g != s]
if len(got) != len(seed) or bad or any(sorted(r) != sorted(keys) for r in j["rows"]):
    print("mismatch", len(got), len(seed), bad[:3])
else:
    print("ok")
EOF
)"
expect_eq "range none json: step_end_kb of 4096 KB" "4032 4223 4224" \
    "$(json_get "$T/none.json" '"%s %s %s" % (j["step_start_kb"], j["step_end_kb"], j["next_step_kb"])')"

# --- the seed's PER_CPU table, 2 CPUs --------------------------------------------
run_mt XP --range 637-642 --mode per_cpu --cpus 2
expect_eq "range per_cpu 2 CPUs 637-642: the seed's step at 640 KB" \
    "637 639 5 130867 654335|640 642 5 196403 982015" "$(table_rows "$T/out" | paste -sd'|')"
while read -r kb bufs size total; do
    XP --max-memory "$kb" --mode per_cpu --cpus 2 --json >"$T/one.json"
    expect_eq "per_cpu 2 CPUs $kb KB (seed row)" "$bufs $size $total" \
        "$(json_get "$T/one.json" '"%d %d %d" % (j["total_regular_buffers"], j["regular_buffer_size_bytes"], j["total_buffer_size_bytes"])')"
done <"$T/seed_per_cpu.txt"
XP --max-memory 639 --mode per_cpu --cpus 2 --json >"$T/one.json"
expect_eq "per_cpu 2 CPUs 639 KB: the top of its step, 640 KB steps up" "320 639 640 196403" \
    "$(json_get "$T/one.json" '"%s %s %s %s" % (j["step_start_kb"], j["step_end_kb"], j["next_step_kb"], j["next_regular_buffer_size_bytes"])')"

# The seed's large machines: 64 CPUs per_cpu = 160 buffers, 8 nodes per_node = 24.
XP --max-memory 16MB --mode per_cpu --cpus 64 --json >"$T/one.json"
expect_eq "per_cpu 64 CPUs: 160 buffers (seed)" 160 "$(json_get "$T/one.json" 'j["total_regular_buffers"]')"
XP --max-memory 16MB --mode per_node --nodes 8 --json >"$T/one.json"
expect_eq "per_node 8 nodes: 24 buffers (seed)" 24 "$(json_get "$T/one.json" 'j["total_regular_buffers"]')"

# --- an independent recomputation of the rules ---------------------------------------
cat >"$T/ref.py" <<'EOF'
import json, math, sys

def buffers(mode, cpus, nodes):
    return {"none": 3, "per_node": 3 * nodes, "per_cpu": math.ceil(2.5 * cpus)}[mode]

def plan(mm, mode, cpus, nodes, strict, mes):
    n = buffers(mode, cpus, nodes)
    share = mm // n
    if share < 65536 or (mes and mes < mm):
        return None
    k = share // 65536 + (0 if strict else 1)
    d = {"total_regular_buffers": n, "chunks_per_buffer": k, "regular_buffer_size": k * 65536 - 205,
         "regular_buffer_alloc": k * 65536, "total_buffer_size": n * (k * 65536 - 205)}
    large = -(-(mes + 205) // 65536) * 65536 if mes else 0
    d.update(total_large_buffers=2 if mes else 0, large_buffer_alloc=large,
             large_buffer_size=large - 205 if mes else 0, memory_allocated=n * k * 65536 + 2 * large)
    return d

SEED = ("total_regular_buffers", "regular_buffer_size", "total_buffer_size")
def key(d):
    return None if d is None else tuple(d[k] for k in SEED)

def rows(a, b, *shape):
    out = []
    for kb in range(a, b + 1):
        r = key(plan(kb * 1024, *shape))
        if out and out[-1][2] == r:
            out[-1][1] = kb
        else:
            out.append([kb, kb, r])
    return out

def advice(mm, *shape):
    """Brute force: walk KB values down and up from max_memory while the buffers stay the same."""
    here = key(plan(mm, *shape))
    if here is None:
        return None
    lo = mm // 1024
    while lo > 1 and key(plan((lo - 1) * 1024, *shape)) == here:
        lo -= 1
    hi = mm // 1024
    while key(plan((hi + 1) * 1024, *shape)) == here:
        hi += 1
    nxt = plan((hi + 1) * 1024, *shape)
    strict = plan(mm, shape[0], shape[1], shape[2], True, shape[4])
    return {"step_start_kb": lo, "step_end_kb": hi, "next_step_kb": hi + 1,
            "next_regular_buffer_size": nxt and nxt["regular_buffer_size"],
            "next_total_buffer_size": nxt and nxt["total_buffer_size"],
            "next_memory_allocated": nxt and nxt["memory_allocated"],
            "strict_regular_buffer_size": strict["regular_buffer_size"],
            "strict_memory_allocated": strict["memory_allocated"]}

cmd, f, mode, cpus, nodes, strict, mes = sys.argv[1:8]
shape = (mode, int(cpus), int(nodes), strict == "1", int(mes))
# The model says the seed's column names; the JSON gives bytes the _bytes suffix.
SEED_NAME = {"regular_buffer_size_bytes": "regular_buffer_size", "regular_buffer_alloc_bytes": "regular_buffer_alloc",
             "total_buffer_size_bytes": "total_buffer_size", "large_buffer_size_bytes": "large_buffer_size",
             "large_buffer_alloc_bytes": "large_buffer_alloc", "memory_allocated_bytes": "memory_allocated",
             "next_regular_buffer_size_bytes": "next_regular_buffer_size",
             "next_total_buffer_size_bytes": "next_total_buffer_size",
             "next_memory_allocated_bytes": "next_memory_allocated",
             "strict_regular_buffer_size_bytes": "strict_regular_buffer_size",
             "strict_memory_allocated_bytes": "strict_memory_allocated"}
def seed_names(d):
    return {SEED_NAME.get(k, k): v for k, v in d.items()}
j = seed_names(json.load(open(f)))
if "rows" in j:
    j["rows"] = [seed_names(r) for r in j["rows"]]
bad = []
if cmd == "range":
    a, b = int(sys.argv[8]), int(sys.argv[9])
    want = [{"start_memory_range_kb": s, "end_memory_range_kb": e,
             **{k: (None if r is None else r[i]) for i, k in enumerate(SEED)}} for s, e, r in rows(a, b, *shape)]
    if j["rows"] != want:
        bad.append("rows differ: %d got, %d expected; first got %s want %s" % (
            len(j["rows"]), len(want), j["rows"][:2], want[:2]))
    mm = b * 1024
else:
    mm = int(sys.argv[8])
    want = plan(mm, *shape)
    for k, v in want.items():
        if j.get(k) != v:
            bad.append("%s: got %s, expected %s" % (k, j.get(k), v))
adv = advice(mm, *shape)
for k, v in (adv or {"step_end_kb": None, "step_start_kb": None}).items():
    if j.get(k) != v:
        bad.append("%s: got %s, expected %s" % (k, j.get(k), v))
if j["min_max_memory_kb"] != buffers(*shape[:3]) * 64:
    bad.append("min_max_memory_kb %s" % j["min_max_memory_kb"])
print("; ".join(bad) if bad else "ok")
EOF

# range_vs_ref NAME A B MODE CPUS NODES STRICT MES_BYTES [extra options...]
range_vs_ref() {
    local name=$1 a=$2 b=$3 mode=$4 cpus=$5 nodes=$6 strict=$7 mes=$8
    shift 8
    XP --range "$a-$b" --mode "$mode" --cpus "$cpus" --nodes "$nodes" "$@" --json >"$T/r.json"
    expect_eq "$name" ok "$(python3 "$T/ref.py" range "$T/r.json" "$mode" "$cpus" "$nodes" "$strict" "$mes" "$a" "$b" 2>&1)"
}
range_vs_ref "range none 1-8192 = python"                  1 8192   none 1 1 0 0
range_vs_ref "range per_cpu 1 CPU 1-3000 = python"         1 3000   per_cpu 1 1 0 0
range_vs_ref "range per_cpu 3 CPUs 1-6000 = python"        1 6000   per_cpu 3 1 0 0
range_vs_ref "range per_cpu 64 CPUs 9000-40000 = python"   9000 40000 per_cpu 64 1 0 0
range_vs_ref "range per_node 2 nodes 1-5000 = python"      1 5000   per_node 1 2 0 0
range_vs_ref "range per_node 8 nodes 1000-9000 = python"   1000 9000 per_node 1 8 0 0
range_vs_ref "range none strict 1-4096 = python"           1 4096   none 1 1 1 0 --strict
range_vs_ref "range per_cpu 7 strict 500-9000 = python"    500 9000 per_cpu 7 1 1 0 --strict
range_vs_ref "range none max_event_size 1000 KB = python"  100 2000 none 1 1 0 1024000 --max-event-size 1000
range_vs_ref "range ends below the minimum = python"       1 100    per_cpu 2 1 0 0

# one_vs_ref NAME MODE CPUS NODES STRICT MES_BYTES MAX_MEMORY_BYTES [extra options...]
one_vs_ref() {
    local name=$1 mode=$2 cpus=$3 nodes=$4 strict=$5 mes=$6 mm=$7
    shift 7
    XP --max-memory "${mm}B" --mode "$mode" --cpus "$cpus" --nodes "$nodes" "$@" --json >"$T/o.json"
    expect_eq "$name" ok "$(python3 "$T/ref.py" one "$T/o.json" "$mode" "$cpus" "$nodes" "$strict" "$mes" "$mm" 2>&1)"
}
one_vs_ref "576 KB none = python"                       none 1 1 0 0 589824
one_vs_ref "1000000 bytes none = python"                none 1 1 0 0 1000000
one_vs_ref "4 MB per_cpu 2 = python"                    per_cpu 2 1 0 0 4194304
one_vs_ref "12345678 bytes per_cpu 6 = python"          per_cpu 6 1 0 0 12345678
one_vs_ref "50 MB per_node 4 strict = python"           per_node 1 4 1 0 52428800 --strict
one_vs_ref "640 KB per_cpu 2 + 4 MB events = python"    per_cpu 2 1 0 4194304 655360 --max-event-size 4MB
one_vs_ref "1000 KB none, events 1000 KB: end clipped"  none 1 1 0 1024000 1024000 --max-event-size 1000
one_vs_ref "976 KB strict, events 1000000 B = python"   none 1 1 1 1000000 999424 --strict --max-event-size 1000000B

# Strict never allocates more than MAX_MEMORY, over every KB of a range.
XP --range 1-8192 --mode per_cpu --cpus 5 --strict --json >"$T/s.json"
expect_eq "strict per_cpu 5: total buffer memory <= max_memory on every row" ok "$(json_get "$T/s.json" '
"ok" if all(r["total_regular_buffers"] is None or
            r["total_regular_buffers"] * (r["regular_buffer_size_bytes"] + 205) <= r["start_memory_range_kb"] * 1024
            for r in j["rows"]) else "over"')"

# --- the text of one configuration ---------------------------------------------------
run_mt XP --max-memory 576
expect_eq "576 KB text: exit 0" 0 "$rc"
field() { awk -v k="$1" '$1 == k { print $2 }' "$T/out"; }
expect_eq "576 KB text: seed's columns" "3 261939 785817 0 0" \
    "$(field total_regular_buffers) $(field regular_buffer_size) $(field total_buffer_size) $(field total_large_buffers) $(field large_buffer_size)"
expect_eq "576 KB text: memory_allocated" 786432 "$(field memory_allocated)"
contains "576 KB text: advice names the step" "any MAX_MEMORY from 576 to 767 KB gives these buffers" "$out"
contains "576 KB text: advice names the next step" "768 KB steps up to 3 x 327475 bytes" "$out"
contains "576 KB text: advice offers --strict" "--strict keeps within max_memory: 3 x 196403 bytes (576 KB allocated)" "$out"
run_mt XP --max-memory 4MB --mode per_cpu --cpus 2 --max-event-size 8MB
expect_eq "4 MB per_cpu + 8 MB events text: large buffers (129 chunks)" "2 8453939" \
    "$(field total_large_buffers) $(field large_buffer_size)"
contains "4 MB text: memory_allocated split" "5 x 851968 regular + 2 x 8454144 large" "$out"

# Defaults: this machine's CPUs and NUMA nodes, mode none.
XP --max-memory 64MB --mode per_cpu --json >"$T/d.json"
expect_eq "default --cpus is this machine's" "$(getconf _NPROCESSORS_CONF)" "$(json_get "$T/d.json" 'j["cpus"]')"
nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
[ "$nodes" -ge 1 ] || nodes=1
expect_eq "default --nodes is this machine's" "$nodes" "$(json_get "$T/d.json" 'j["nodes"]')"
XP --max-memory 64MB --json >"$T/d.json"
expect_eq "default mode is none" "none 3" "$(json_get "$T/d.json" '"%s %d" % (j["partition_mode"], j["total_regular_buffers"])')"

# --- rejected sizes: exit 1, the reason on stderr, nothing on stdout ----------------------
run_mt XP --max-memory 191
expect_eq "191 KB none: exit 1" 1 "$rc"
expect_eq "191 KB none: the reason" \
    "memtrail: max_memory 191 KB gives 3 buffers of 65194 bytes; a buffer needs at least 64 KB (max_memory >= 192 KB)" "$err"
expect_eq "191 KB none: no output" "" "$out"
run_mt XP --max-memory 10239 --mode per_cpu --cpus 64 --json
expect_eq "10239 KB per_cpu 64: exit 1" 1 "$rc"
contains "10239 KB per_cpu 64: the reason" "160 buffers (PER_CPU, 64 CPUs)" "$err"
contains "10239 KB per_cpu 64: the minimum" "max_memory >= 10240 KB" "$err"
run_mt XP --max-memory 10240 --mode per_cpu --cpus 64
expect_eq "10240 KB per_cpu 64: accepted" 0 "$rc"
run_mt XP --max-memory 300 --max-event-size 200
expect_eq "max_event_size below max_memory: exit 1" 1 "$rc"
contains "max_event_size below max_memory: the reason" "memtrail: max_event_size must be at least max_memory" "$err"
run_mt XP --max-memory 0
expect_eq "max_memory 0: exit 1" 1 "$rc"
run_mt XP --max-memory 191 --strict
expect_eq "191 KB strict: exit 1" 1 "$rc"
run_mt XP --max-memory 16000000GB
expect_eq "16000000 GB: exit 1, too large" "1 yes" "$rc $(printf '%s' "$err" | grep -q 'too large' && echo yes)"

# --- usage errors: exit 2 ---------------------------------------------------------------------
usage_case() { # NAME NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    run_mt "$MT_ASAN" "$@"
    expect_eq "usage: $name: exit 2" 2 "$rc"
    contains "usage: $name: message" "$needle" "$err"
}
usage_case "unknown option"          "unknown option '--frobnicate'"   xe plan --max-memory 576 --frobnicate
usage_case "bad size"                "'12XB' is not a size"            xe plan --max-memory 12XB
usage_case "negative size"           "'-5' is not a size"              xe plan --max-memory=-5
usage_case "size too big"            "is too big"                      xe plan --max-memory 99999999999999999999
usage_case "bad max-event-size"      "--max-event-size: '1.5MB'"       xe plan --max-memory 576 --max-event-size 1.5MB
usage_case "bad mode"                "unknown partition mode 'percpu'" xe plan --max-memory 576 --mode percpu
usage_case "bad range (no dash)"     "'5' is not a range"              xe plan --range 5
usage_case "bad range (letters)"     "'a-b' is not a range"            xe plan --range a-b
usage_case "bad range (open end)"    "'1-' is not a range"             xe plan --range 1-
usage_case "bad range (from 0)"      "needs 1 <= A <= B"               xe plan --range 0-10
usage_case "bad range (reversed)"    "needs 1 <= A <= B"               xe plan --range 10-5
usage_case "range and max-memory"    "drop --max-memory"               xe plan --range 1-10 --max-memory 5
# Every KB value of a range is planned: a range wider than 2^24 values is
# refused at once (timeout: a hang detector; unbounded, it ran for minutes).
run_mt timeout 60 "$MT_ASAN" xe plan --range 1-99999999999
expect_eq "usage: range too wide: exit 2" 2 "$rc"
contains "usage: range too wide: message" "spans 99999999999 KB values; a table covers at most 16777216" "$err"
run_mt timeout 60 "$MT_ASAN" xe plan --range 1-16777217
expect_eq "usage: range one value too wide: exit 2" 2 "$rc"
contains "usage: range one value too wide: message" "spans 16777217 KB values" "$err"
run_mt timeout 60 "$MT_ASAN" xe plan --range 2-16777217
expect_eq "range of 16777216 values: exit 0" 0 "$rc"
contains "range of 16777216 values: ends with the advice for its end" "advice for 16777217 KB" "$out"
usage_case "missing --max-memory"    "missing --max-memory"            xe plan --mode per_cpu
usage_case "--cpus 0"                "--cpus: '0' is not a count"      xe plan --max-memory 576 --cpus 0
usage_case "--nodes x"               "--nodes: 'x' is not a count"     xe plan --max-memory 576 --nodes x
# --cpus and --nodes take what a session's cpus= and nodes= take (1 to
# 65536, XE_MAX_COUNT; tests/xe/test_session.c checks the same ends there).
usage_case "--cpus 65537"            "--cpus: '65537' is not a count from 1 to 65536" \
    xe plan --max-memory 576 --cpus 65537
usage_case "--nodes 0"               "--nodes: '0' is not a count from 1 to 65536" xe plan --max-memory 576 --nodes 0
usage_case "--nodes 65537"           "--nodes: '65537' is not a count from 1 to 65536" \
    xe plan --max-memory 576 --nodes 65537
buffers_of() { printf '%s' "$out" >"$T/c.json" && json_get "$T/c.json" 'j["total_regular_buffers"]'; }
run_mt "$MT_ASAN" xe plan --max-memory 192KB --mode per_cpu --cpus 1 --json
expect_eq "--cpus 1: the least, 3 buffers (ceil 2.5)" "0 3" "$rc $(buffers_of)"
run_mt "$MT_ASAN" xe plan --max-memory 10GB --mode per_cpu --cpus 65536 --json
expect_eq "--cpus 65536: the most, 163840 buffers" "0 163840" "$rc $(buffers_of)"
run_mt "$MT_ASAN" xe plan --max-memory 192KB --mode per_node --nodes 1 --json
expect_eq "--nodes 1: the least, 3 buffers" "0 3" "$rc $(buffers_of)"
run_mt "$MT_ASAN" xe plan --max-memory 12GB --mode per_node --nodes 65536 --json
expect_eq "--nodes 65536: the most, 196608 buffers" "0 196608" "$rc $(buffers_of)"
usage_case "--mode without value"    "needs a value"                   xe plan --max-memory 576 --mode
usage_case "stray argument"          "unexpected argument 'extra'"     xe plan --max-memory 576 extra
usage_case "xe alone"                "missing the xe command"          xe
usage_case "xe unknown command"      "unknown xe command 'size'"       xe size

# --- help ----------------------------------------------------------------------------------------
run_mt "$MT_ASAN" xe plan --help
expect_eq "xe plan --help: exit 0" 0 "$rc"
contains "xe plan --help: options" "--max-memory SIZE" "$out"
contains "xe plan --help: range" "--range A-B" "$out"
run_mt "$MT_ASAN" xe --help
expect_eq "xe --help: exit 0, names plan" "0 yes" "$rc $(printf '%s' "$out" | grep -q '^  plan' && echo yes)"
run_mt "$MT_ASAN" help xe
expect_eq "help xe: exit 0" 0 "$rc"
run_mt "$MT_ASAN" --help
contains "memtrail --help lists xe" "xe       plan event-session buffers" "$out"

#!/usr/bin/env bash
# Sample mode in the agent (docs/sampling.md): the sampled sites'
# estimates against independent truth, the test program's own ledger
# (sampleprog.c) and an exact detail run of the same program, read from
# the raw report lines by sample_check.py. Bounds are the sampling
# theory's: 3 standard errors (sqrt of sum s^2 (1-p)/p, p = 1 - exp(-s/R))
# for the seeded single-threaded runs; 4.5 for the 8 threads' 72
# per-thread checks (at 3, one run in five would fail some check by
# chance). Every seeded run is deterministic: sampleprog's threads make
# their first allocation in turn, so each has the same generator each run.
. "$(dirname "$0")/../lib.sh"
CHECK="python3 $(dirname "$0")/sample_check.py"
[ -x "$TBIN/sampleprog" ] || { fail setup "build first: $TBIN/sampleprog missing"; exit 1; }

# run NAME OPTIONS ARGS...: sampleprog ARGS with MEMTRAIL_OPTIONS, report(s)
# in $T/NAME.PID.mtr, ledger in $T/NAME.ledger.
run() {
    local name=$1 opts=$2
    shift 2
    MEMTRAIL_OPTIONS="output=$T/$name.%p.mtr:$opts" LD_PRELOAD=$AGENT "$TBIN/sampleprog" "$1" "$T/$name.ledger" \
        >"$T/$name.out" 2>"$T/$name.err"
}
report_of() { ls "$T/$1".*.mtr | head -1; }

# The exact run: detail mode, its live sites equal to the ledger.
run exact mode=detail one
expect_eq "exact run: clean exit" "" "$(cat "$T/exact.err")"
$CHECK exact "$(report_of exact)" "$T/exact.ledger" "exact"

# Sampled runs, 512 KiB (the default) and 64 KiB.
for r in 512KiB:524288:11 64KiB:65536:5; do
    IFS=: read -r rate bytes seed <<<"$r"
    run "s$bytes" "mode=sample:sample_rate=$rate:sample_seed=$seed" one
    rep=$(report_of "s$bytes")
    expect_eq "rate $rate: clean exit" "" "$(cat "$T/s$bytes.err")"
    expect_eq "rate $rate: mode line" "mode sample" "$(grep '^mode' "$rep")"
    expect_eq "rate $rate: sample_rate line after unwinder" "unwinder cfi sample_rate $bytes" \
        "$(grep -A1 '^unwinder' "$rep" | tr '\n' ' ' | sed 's/ $//')"
    expect_eq "rate $rate: every site line has samples= and live_samples= after allocated_bytes" "" \
        "$(grep '^site ' "$rep" | grep -v ' allocated_bytes=[0-9]* samples=[0-9]* live_samples=[0-9]* frames=')"
    $CHECK estimates "$rep" "$T/s$bytes.ledger" "rate $rate"
    $CHECK summary "$rep" "$(report_of exact)" "rate $rate"
    # The checks catch wrong weights: the same report with its estimates
    # doubled fails them.
    doubled=$($CHECK estimates "$rep" "$T/s$bytes.ledger" "doubled" --scale 2 | grep -c '^FAIL')
    [ "$doubled" -ge 3 ] && pass "rate $rate: estimates doubled fail the checks ($doubled)" ||
        fail "rate $rate: doubled estimates" "only $doubled checks failed"
done
expect_eq "the exact report's site lines have no samples=" "" "$(grep '^site .*samples=' "$(report_of exact)")"
expect_eq "the exact report has no sample_rate line" "" "$(grep '^sample_rate' "$(report_of exact)")"

# Rate 1: every block sampled with weight 1, so the sites are exact
# detail's, to the byte (the program's, libc's, and custom-API blocks).
run rate1 "mode=sample:sample_rate=1" one
$CHECK rate1 "$(report_of rate1)" "$(report_of exact)" "sampleprog"
MEMTRAIL_OPTIONS="output=$T/cp1.mtr:mode=sample:sample_rate=1" LD_PRELOAD=$AGENT "$TBIN/custompool" "$T/cp1.ledger" >/dev/null
MEMTRAIL_OPTIONS="output=$T/cp2.mtr:mode=detail" LD_PRELOAD=$AGENT "$TBIN/custompool" "$T/cp2.ledger" >/dev/null
$CHECK rate1 "$T/cp1.mtr" "$T/cp2.mtr" "custom allocator API"

# The same seed twice: the same sites, the same estimates.
run again "mode=sample:sample_rate=64KiB:sample_seed=5" one
$CHECK same "$(report_of s65536)" "$(report_of again)" "seed 5"
run other "mode=sample:sample_rate=64KiB:sample_seed=6" one
out=$($CHECK same "$(report_of s65536)" "$(report_of other)" "x")
expect_match "another seed samples other allocations" "^FAIL" "$out"

# The default rate is 512 KiB; seed 0 (the default) draws a random seed.
run dflt "mode=sample" one
expect_eq "default rate: 524288" "sample_rate 524288" "$(grep '^sample_rate' "$(report_of dflt)")"
run dflt2 "mode=sample" one
out=$($CHECK same "$(report_of dflt)" "$(report_of dflt2)" "x")
expect_match "seed 0: two runs sample differently" "^FAIL" "$out"

# 8 threads x 1M mixed ops: each thread's sites (told apart by the thread
# function in their stacks) within bound.
run thr "mode=sample:sample_rate=64KiB:sample_seed=3" threads
expect_eq "8 threads: clean exit" "" "$(cat "$T/thr.err")"
$CHECK estimates "$(report_of thr)" "$T/thr.ledger" "8 threads" --by-thread --nsigma 4.5

# Fork: the child samples on; its report has its own sampled sites.
run fork "mode=sample:sample_rate=64KiB:sample_seed=9" fork
parent=$(grep -l "^ppid $$\$" "$T"/fork.*.mtr 2>/dev/null | head -1)
[ -n "$parent" ] || parent=$(ls -tr "$T"/fork.*.mtr | tail -1)
child=$(ls "$T"/fork.*.mtr | grep -vxF "$parent" | head -1)
expect_eq "fork: two reports" "2" "$(ls "$T"/fork.*.mtr | wc -l)"
if [ -n "$child" ]; then
    $CHECK sites "$child" "$T/fork.ledger" "fork child" site_child 1
    $CHECK sites "$parent" "$T/fork.ledger" "fork parent" site_child 0
    $CHECK estimates "$child" "$T/fork.ledger.child" "fork child" | grep -v 'sites holding'
fi

# Heap errors are still caught in sample mode, on sampled blocks (rate 1:
# every block is sampled) and on the others.
for rate in 1 1GiB; do
    MEMTRAIL_OPTIONS="output=$T/he.mtr:mode=sample:sample_rate=$rate" LD_PRELOAD=$AGENT "$TBIN/heaperr" double \
        >"$T/he.out" 2>"$T/he.err"
    expect_match "sample_rate=$rate: double free reported" \
        "memtrail: double free: block at 0x[0-9a-f]+, 100 bytes, category victim" "$(cat "$T/he.err")"
    expect_match "sample_rate=$rate: counted" "^errors double_free=1 " "$(grep '^errors' "$T/he.mtr")"
    MEMTRAIL_OPTIONS="output=$T/he.mtr:mode=sample:sample_rate=$rate" LD_PRELOAD=$AGENT "$TBIN/heaperr" overflow \
        >"$T/he.out" 2>"$T/he.err"
    expect_match "sample_rate=$rate: overwritten canary reported" \
        "canary after the block was overwritten: block at 0x[0-9a-f]+, 40 bytes" "$(cat "$T/he.err")"
done

# Recording on demand: start=off, then `start sample` for phase 2 only.
mkdir -p "$T/ph"
MEMTRAIL_OPTIONS="output=$T/ph.%p.mtr:mode=sample:sample_rate=4KiB:sample_seed=2:start=off" LD_PRELOAD=$AGENT \
    "$TBIN/sampleprog" phases "$T/ph" >"$T/ph.out" 2>"$T/ph.err" &
pid=$!
for _ in $(seq 500); do [ -f "$T/ph/ready1" ] && break; sleep 0.01; done
out=$("$MT" query "$pid" start detail 2>&1); rc=$?
expect_eq "sample mode: 'start detail' refused" \
    "1 memtrail: process $pid: this process samples (sample mode): exact and sampled sites do not mix; use 'start sample'" \
    "$rc $out"
out=$("$MT" query "$pid" start sample 2>&1); rc=$?
expect_match "sample mode: 'start sample'" "^0 sampled recording on" "$rc $out"
touch "$T/ph/go2"
for _ in $(seq 500); do [ -f "$T/ph/ready2" ] && break; sleep 0.01; done
live=$("$MT" query "$pid" detail --json 2>&1); rc=$?
expect_eq "sample mode: live 'query PID detail' answers" "0" "$rc"
expect_eq "sample mode: live 'query PID detail' has the rate" "{'rate_bytes': 4096}" \
    "$(printf '%s' "$live" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sampling"])' 2>&1)"
# The summary replies (summary, metrics, baseline) carry no sites, so no rate.
for q in summary metrics baseline; do
    out=$("$MT" query "$pid" $q 2>&1); rc=$?
    expect_eq "sample mode: live 'query PID $q' answers" "0 0" "$rc $(printf '%s' "$out" | grep -c 'sample_rate')"
done
out=$("$MT" query "$pid" stop 2>&1); rc=$?
expect_match "sample mode: 'stop'" "^0 sampled recording off" "$rc $out"
touch "$T/ph/go3"
wait "$pid"
rep=$(ls "$T"/ph.*.mtr | head -1)
$CHECK sites "$rep" "$T/ph/ledger" "on demand" site_mid 1
$CHECK sites "$rep" "$T/ph/ledger" "on demand: before start" site_small 0
$CHECK sites "$rep" "$T/ph/ledger" "on demand: after stop" site_calloc 0

# A detail-mode process refuses `start sample`.
MEMTRAIL_OPTIONS="output=$T/pd.%p.mtr:mode=detail:start=off" LD_PRELOAD=$AGENT \
    "$TBIN/sampleprog" phases "$T/pd" >/dev/null 2>&1 &
pid=$!
mkdir -p "$T/pd"
for _ in $(seq 500); do [ -f "$T/pd/ready1" ] && break; sleep 0.01; done
out=$("$MT" query "$pid" start sample 2>&1); rc=$?
expect_eq "detail mode: 'start sample' refused" \
    "1 memtrail: process $pid: this process records exact sites (detail mode): sampled and exact sites do not mix; use 'start detail', or start it in sample mode" \
    "$rc $out"
touch "$T/pd/go2" "$T/pd/go3"
wait "$pid"

# Options: memtrail run --mode sample --sample-rate; bad values refused.
run_mt "$MT" run --mode sample --sample-rate 64KiB -o "$T/run.%p.mtr" -- "$TBIN/sampleprog" one "$T/run.ledger"
contains "run --mode sample: the command it suggests reads the report (report detail)" \
    "memtrail: read it with: memtrail report detail $T/run." "$err"
expect_eq "run --mode sample --sample-rate 64KiB: the report's rate" "0 sample_rate 65536" \
    "$rc $(grep -h '^sample_rate' "$T"/run.*.mtr)"
run_mt "$MT" run --sample-rate 64KiB -o "$T/x.mtr" -- /bin/true
expect_eq "run --sample-rate without --mode sample: usage error" \
    "2 memtrail: --sample-rate is for sample mode: add --mode sample" "$rc $(echo "$err" | head -1)"
run_mt "$MT" run --mode sample --sample-rate 2GiB -o "$T/x.mtr" -- /bin/true
expect_match "run --sample-rate 2GiB: out of range" "^2 memtrail: --sample-rate: bad value '2GiB'" \
    "$rc $(echo "$err" | head -1)"
err=$(MEMTRAIL_OPTIONS="output=$T/o.mtr:mode=sample:sample_rate=0" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_match "sample_rate=0 refused by the agent" "bad value '0' for sample_rate" "$err"

# Blocks of the rate or more are exact: bigrealloc has only such blocks,
# one of them resized three times at one site, so the sampled run's sites
# carry the exact run's counters, site for site (matched by their counter
# tuples: the two runs' addresses differ).
sites_of() { # REPORT: the sites' counters, sorted
    grep '^site ' "$1" | sed -E 's/ (samples|live_samples|frames)=[^ ]*//g; s/^site [0-9]+ //' | sort
}
MEMTRAIL_OPTIONS="output=$T/bx.mtr:mode=detail" LD_PRELOAD=$AGENT "$TBIN/bigrealloc"
MEMTRAIL_OPTIONS="output=$T/bs.mtr:mode=sample:sample_seed=3" LD_PRELOAD=$AGENT "$TBIN/bigrealloc"
expect_eq "blocks >= rate: the exact run has the program's three sites" 3 "$(sites_of "$T/bx.mtr" | grep -c .)"
expect_eq "blocks >= rate: site_grow's 20 blocks grew by 2 MiB each in 40 reallocs there" 1 \
    "$(sites_of "$T/bx.mtr" | grep -c 'allocs=20 frees=20 reallocs=40 allocated_bytes=83886080$')"
expect_eq "blocks >= rate: every sampled site equals the exact run's" "$(sites_of "$T/bx.mtr")" "$(sites_of "$T/bs.mtr")"

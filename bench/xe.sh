#!/usr/bin/env bash
# What one fired event costs in memtrail's event engine (src/xe, issue 6),
# per partition mode (NONE, PER_NODE, PER_CPU), from 1 and 2 producer
# threads, against peers run in the same invocation:
#   mutex   a pthread mutex around appending the same 80-byte record into a
#           buffer, full buffers swapped to a consumer thread that walks and
#           recycles them (the dispatcher's work): the usual alternative
#   spin    the same with a pthread spinlock around the append
#   lttng   LTTng-UST tracing the same fields into an active session
#           (bench/lttng/run.sh), when liblttng-ust-dev and lttng-tools
#           are installed and a session daemon can run
# Passes: BURST (every event fits in the session's memory: the producers'
# own cost; 2 threads unpinned and pinned to CPUs 0 and 1), SUSTAINED (10x
# more events than the memory holds: with NO_EVENT_LOSS the dispatcher's
# pace counts too; unpinned, producers pinned, producers and consumer
# pinned), with a ring_buffer target, and with ALLOW_SINGLE_EVENT_LOSS.
# Ratios are peer / memtrail on the min of runs (> 1: memtrail is cheaper).
# It builds first (make bench-xe, make bench-lttng). It prints figures and
# asserts nothing about them.
#
# Usage: bench/xe.sh [--quick] [--runs N] [--events N] [--no-lttng] [--no-pin]
#                    [--no-loss-pass] [--keep-raw FILE]
#   --quick         2 runs of 2M events per thread (a smoke test, not a result)
#   --runs N        runs per configuration (default 5); min and median shown
#   --events N      events per producer thread (default 10000000)
#   --no-lttng      skip the LTTng column
#   --no-pin        skip the pinned 2-thread passes
#   --no-loss-pass  skip the ALLOW_SINGLE_EVENT_LOSS pass (against LTTng's
#                   discard mode)
#   --keep-raw F    also write every RUN/RESULT line to F
# Environment: BUILD (default build).
# Exit status: 0; 1 when a build fails; 2 on bad usage.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD:-build}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
XE_FIRE=$BUILD_DIR/bench/xe_fire
LTTNG_FIRE=$BUILD_DIR/bench/lttng_fire

runs=5 events=10000000 quick=0 use_lttng=1 use_pin=1 loss_pass=1 keep_raw=""
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
bad_usage() { echo "xe.sh: $*" >&2; echo "try: bench/xe.sh --help" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1 ;;
        --runs) [ $# -ge 2 ] || bad_usage "--runs needs a number"; runs=$2; shift ;;
        --events) [ $# -ge 2 ] || bad_usage "--events needs a number"; events=$2; shift ;;
        --no-lttng) use_lttng=0 ;;
        --no-pin) use_pin=0 ;;
        --no-loss-pass) loss_pass=0 ;;
        --keep-raw) [ $# -ge 2 ] || bad_usage "--keep-raw needs a file"; keep_raw=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) bad_usage "unknown option '$1'" ;;
    esac
    shift
done
if [ "$quick" = 1 ]; then runs=2 events=2000000; fi
[[ $runs =~ ^[1-9][0-9]*$ ]] || bad_usage "--runs wants a positive integer, not '$runs'"
[[ $events =~ ^[1-9][0-9]*$ ]] || bad_usage "--events wants a positive integer, not '$events'"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-xebench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
RAW=$TMP/raw

# ---- build -------------------------------------------------------------------
make_args=(-C "$ROOT" --no-print-directory BUILD="$BUILD_DIR")
if ! make "${make_args[@]}" bench-xe >"$TMP/make.log" 2>&1; then
    cat "$TMP/make.log" >&2
    echo "xe.sh: building $XE_FIRE failed (make bench-xe)" >&2
    exit 1
fi
lttng_note=""
if [ "$use_lttng" = 1 ]; then
    if [ ! -f /usr/include/lttng/tracepoint.h ] && ! echo '#include <lttng/tracepoint.h>' |
        cc -E -x c - >/dev/null 2>&1; then
        lttng_note="LTTng: skipped: <lttng/tracepoint.h> not found (apt-get install liblttng-ust-dev lttng-tools, or scripts/deps.sh --bench)"
        use_lttng=0
    elif ! make "${make_args[@]}" bench-lttng >"$TMP/make-lttng.log" 2>&1; then
        lttng_note="LTTng: skipped: building $LTTNG_FIRE failed: $(tail -3 "$TMP/make-lttng.log" | tr '\n' ' ' | cut -c1-300)"
        use_lttng=0
    fi
else
    lttng_note="LTTng: skipped (--no-lttng)"
fi

ncpu=$(getconf _NPROCESSORS_ONLN)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "xe.sh: $events events per thread, $runs runs per configuration, $ncpu CPUs (load average $load_before)" >&2

# ---- runs ------------------------------------------------------------------------
: >"$RAW"
xe_pass() { # LABEL ARGS...: one xe_fire invocation; its lines go to RAW
    local label=$1 rc=0 limit=$((120 + runs * events * 30 / 1000000))
    shift
    echo "xe.sh: pass $label ..." >&2
    # A generous limit: a producer that never returns (an engine livelock)
    # must not hang the benchmark.
    timeout -k 5 "$limit" "$XE_FIRE" --events "$events" --runs "$runs" --label "$label" "$@" \
        >"$TMP/pass" 2>"$TMP/pass.err" || rc=$?
    cat "$TMP/pass" >>"$RAW"
    if [ "$rc" = 3 ]; then return 0; fi   # SKIP line written
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "xe.sh: xe_fire $label did not finish in ${limit} s: killed (a producer stuck in the engine?)" >&2
        echo "NOTE label=$label xe_fire did not finish in ${limit} s and was killed; its last line: $(tail -1 "$TMP/pass")" >>"$RAW"
        return 0
    fi
    if [ "$rc" != 0 ]; then
        echo "xe.sh: xe_fire $label exited $rc: $(tr '\n' ' ' <"$TMP/pass.err")" >&2
        echo "NOTE label=$label xe_fire exited $rc: $(tr '\n' ' ' <"$TMP/pass.err" | cut -c1-300)" >>"$RAW"
    fi
}

# Burst: every event fits in the session's memory (512 MB), so no producer
# ever waits for the dispatcher: the producers' own cost per event.
# Sustained: 10x more events than 64 MB holds; with NO_EVENT_LOSS the
# producers wait for free buffers, so the dispatcher's (consumer's) pace
# is in the figure.
burst_events=2000000 burst_mb=512 burst_runs=$((2 * runs + 1))
if [ "$quick" = 1 ]; then burst_events=500000 burst_mb=256; fi
burst=(--events "$burst_events" --runs "$burst_runs" --max-memory "$burst_mb")
xe_pass burst --threads 1,2 "${burst[@]}"
if [ "$use_pin" = 1 ] && [ "$ncpu" -ge 2 ]; then xe_pass burstP --threads 2 --pin-producers "${burst[@]}"; fi
xe_pass free --threads 1,2
if [ "$use_pin" = 1 ] && [ "$ncpu" -ge 2 ]; then
    xe_pass pinP --threads 2 --pin-producers
    xe_pass pinPC --threads 2 --pin-producers --pin-consumer 0
fi
xe_pass ring --threads 1,2 --target ring_buffer
if [ "$loss_pass" = 1 ]; then xe_pass loss --threads 1,2 --retention single_loss; fi

if [ "$use_lttng" = 1 ]; then
    echo "xe.sh: LTTng passes ..." >&2
    lrc=0
    : >"$TMP/lttng"
    lttng_pass() { # run.sh ARGS...; stops at the first failure or skip
        [ "$lrc" = 0 ] || return 0
        bash "$ROOT/bench/lttng/run.sh" --bin "$LTTNG_FIRE" "$@" >>"$TMP/lttng" 2>>"$TMP/lttng.err" || lrc=$?
    }
    lttng_pass --tag burst --events "$burst_events" --runs "$burst_runs" --max-memory "$burst_mb" --threads "1 2" --modes blocking
    if [ "$use_pin" = 1 ] && [ "$ncpu" -ge 2 ]; then
        lttng_pass --tag burstP --events "$burst_events" --runs "$burst_runs" --max-memory "$burst_mb" --threads 2 \
            --modes blocking --pin
    fi
    lt_modes="blocking"
    [ "$loss_pass" = 0 ] || lt_modes="blocking discard"
    lttng_pass --events "$events" --runs "$runs" --threads "1 2" --modes "$lt_modes"
    if [ "$use_pin" = 1 ] && [ "$ncpu" -ge 2 ]; then
        lttng_pass --events "$events" --runs "$runs" --threads 2 --modes blocking --pin
    fi
    cat "$TMP/lttng" >>"$RAW"
    if grep -q '^LTTNG_SKIP' "$TMP/lttng"; then
        lttng_note="LTTng: skipped: $(sed -n 's/^LTTNG_SKIP reason=//p' "$TMP/lttng" | head -1)"
    elif [ "$lrc" != 0 ]; then
        lttng_note="LTTng: failed (exit $lrc): $(tr '\n' ' ' <"$TMP/lttng.err" | cut -c1-300)"
    else
        lttng_note="LTTng: $(sed -n 's/^INFO lttng: lttng (LTTng Trace Control) \([^;]*\);.*/lttng-tools \1/p' "$TMP/lttng" | head -1),"
        lttng_note+=" $(sed -n 's/^INFO lttng: \(started\|using\)/\1/p' "$TMP/lttng" | head -1);"
        lttng_note+=" LTTng ran after the memtrail passes, not interleaved with them"
    fi
fi
[ -z "$keep_raw" ] || cp "$RAW" "$keep_raw"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the table ---------------------------------------------------------------------
nodes=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' 2>/dev/null | wc -l)
[ "$nodes" -ge 1 ] || nodes=1
awk -v ncpu="$ncpu" -v nodes="$nodes" -v bevents="$burst_events" -v bmb="$burst_mb" -v bruns="$burst_runs" -v runs="$runs" -v events="$events" -v lnote="$lttng_note" \
    -v load0="$load_before" -v load1="$load_after" '
function kv(line, key,    n, i, w) {
    n = split(line, w, " ")
    for (i = 1; i <= n; i++) if (index(w[i], key "=") == 1) return substr(w[i], length(key) + 2)
    return ""
}
# min (median); "*" when the runs spread over more than 1.5x (listed below the tables)
function cell(k) {
    if (!(k in mn)) return "-"
    return sprintf("%.1f (%.1f)%s", mn[k], md[k], (mn[k] > 0 && mx[k] / mn[k] > 1.5) ? "*" : "")
}
function spread(k, what) { if ((k in mn) && mn[k] > 0 && mx[k] / mn[k] > 1.5) spreads = spreads sprintf("  %s: %.1f .. %.1f ns over the runs (median %.1f)\n", what, mn[k], mx[k], md[k]) }
function ratio(peer, me) { return ((peer in mn) && (me in mn) && mn[me] > 0) ? sprintf("%.2f", mn[peer] / mn[me]) : "-" }
/^RESULT / {
    impl = kv($0, "impl"); lab = kv($0, "label"); t = kv($0, "threads")
    if (impl == "memtrail") k = lab SUBSEP "memtrail" SUBSEP kv($0, "mode") SUBSEP t
    else if (impl == "lttng") k = "lttng" SUBSEP lab SUBSEP kv($0, "pin") SUBSEP t
    else k = lab SUBSEP impl SUBSEP t
    mn[k] = kv($0, "min"); md[k] = kv($0, "median"); mx[k] = kv($0, "max")
    if (impl != "lttng") {
        cnt[k] = kv($0, "delivered") "/" kv($0, "dropped") (kv($0, "exact") == "yes" ? "" : " NOT EXACT")
        blk[k] = kv($0, "blocked_ms")
        if (kv($0, "exact") != "yes") inexact++
    } else {
        cnt[k] = kv($0, "discarded") (kv($0, "discarded_unreadable") != "" ? "+?" : "")
        if (kv($0, "discarded_bit63_runs") != "") { cnt[k] = cnt[k] "^"; bit63 = 1 }
    }
}
/^SKIP / { skip[kv($0, "label")] = $0 }
/^NOTE / { notes = notes "  " $0 "\n" }
function target_line(lab, what,    k) {
    k = lab SUBSEP "memtrail" SUBSEP "PER_CPU" SUBSEP (lab == "burstP" ? "2" : "1")
    if (k in mn) printf "  %-40s %5.1f ns (min), %5.1f ns (median): %s\n", what, mn[k], md[k], (md[k] + 0 <= 30 ? "within" : "NOT within")
}
function section(lab, title, threads_list, lt_mode, lt_pin,    nt, ts, i, m, t, km, kx, ks, kl, modes, k, found) {
    if (lab in skip) { printf "\n%s\n  skipped: %s\n", title, substr(skip[lab], index(skip[lab], "reason=") + 7); return }
    for (k in mn) if (index(k, lab SUBSEP "memtrail" SUBSEP) == 1) found = 1
    if (!found) return   # pass not run
    printf "\n%s\n", title
    printf "  %-8s %3s  %-15s %-15s %6s  %-15s %6s  %-16s %6s  %s\n", "mode", "thr", "memtrail ns", "mutex ns", "ratio",
        "spin ns", "ratio", "lttng ns", "ratio", "delivered/dropped (blocked ms)"
    nt = split(threads_list, ts, ",")
    split("NONE,PER_NODE,PER_CPU", modes, ",")
    for (i = 1; i <= nt; i++) for (m = 1; m <= 3; m++) {
        t = ts[i]
        km = lab SUBSEP "memtrail" SUBSEP modes[m] SUBSEP t
        if (!(km in mn)) continue
        kx = lab SUBSEP "mutex" SUBSEP t; ks = lab SUBSEP "spin" SUBSEP t
        kl = (lt_mode == "") ? "none" : "lttng" SUBSEP lt_mode SUBSEP lt_pin SUBSEP t
        printf "  %-8s %3s  %-15s %-15s %6s  %-15s %6s  %-16s %6s  %s (%s)\n", modes[m], t, cell(km), cell(kx),
            ratio(kx, km), cell(ks), ratio(ks, km), cell(kl), ratio(kl, km), cnt[km], blk[km]
        spread(km, lab ": memtrail " modes[m] " " t " thr")
        if (m == 1) { spread(kx, lab ": mutex " t " thr"); spread(ks, lab ": spin " t " thr"); spread(kl, lab ": lttng " t " thr") }
    }
    for (i = 1; i <= nt; i++) {
        t = ts[i]; kx = lab SUBSEP "mutex" SUBSEP t; ks = lab SUBSEP "spin" SUBSEP t
        kl = "lttng" SUBSEP lt_mode SUBSEP lt_pin SUBSEP t
        line = ""
        if (kx in cnt) line = line sprintf(" mutex %s", cnt[kx])
        if (ks in cnt) line = line sprintf(", spin %s", cnt[ks])
        if (lt_mode != "" && (kl in cnt)) line = line sprintf(", lttng discarded %s", cnt[kl])
        if (line != "") printf "  %3s threads, peers delivered/dropped:%s\n", t, line
    }
}
END {
    printf "memtrail event engine (src/xe): cost per fired event, ns per event per thread\n"
    printf "min of the runs (median in parentheses); ratio = peer / memtrail on the min (> 1: memtrail cheaper)\n", runs
    printf "allocation-like events (type alloc, size, address, no data); MAX_DISPATCH_LATENCY infinite; the baselines get\n"
    printf "the same memory (in 4 buffers) and write the same 80-byte record.\n"
    printf "machine: %d CPUs, load average %s before, %s after. ", ncpu, load0, load1
    if (ncpu <= 2) printf "With 2 producers, the dispatcher (or the\nbaselines\047 consumer) is a third busy thread on %d CPUs: the 2-thread rows are oversubscribed.\n", ncpu
    else printf "\n"
    section("burst", "BURST: " bevents " events per thread into " bmb " MB, every event fits: the producers\047 own cost (the dispatcher still walks sealed buffers meanwhile). NO_EVENT_LOSS, no target, unpinned; " bruns " runs; lttng = blocking channel, " bmb " MB",
        "1,2", "burst-blocking", "none")
    section("burstP", "BURST, 2 producers pinned to CPUs 0 and 1 (really concurrent): as above; lttng = blocking, producers pinned",
        "2", "burstP-blocking", "producers")
    printf "\nSUSTAINED: %d events per thread into 64 MB (more than it holds): with NO_EVENT_LOSS the producers wait for\nthe dispatcher to free buffers (blocked ms), so its pace is part of the figure.\n", events
    section("free", "NO_EVENT_LOSS (every event recorded: fired = delivered), no target, threads unpinned; " runs " runs; lttng = blocking channel",
        "1,2", "blocking", "none")
    section("pinP", "2 producers pinned to CPUs 0 and 1, dispatcher/consumer unpinned; NO_EVENT_LOSS, no target; lttng = blocking, producers pinned",
        "2", "blocking", "producers")
    section("pinPC", "2 producers pinned to CPUs 0 and 1, dispatcher/consumer pinned to CPU 0; NO_EVENT_LOSS, no target",
        "2", "", "")
    section("ring", "NO_EVENT_LOSS with a ring_buffer target (max_events_limit=1000; the baselines copy each record into a 1000-event ring); lttng = blocking, writing its trace to disk",
        "1,2", "blocking", "none")
    section("loss", "ALLOW_SINGLE_EVENT_LOSS (events dropped when no buffer is free), no target, unpinned; lttng = discard channel",
        "1,2", "discard", "none")
    printf "\ntarget (issue 6): <= 30 ns/event uncontended in PER_CPU mode:\n"
    target_line("burst", "burst, 1 thread")
    target_line("burstP", "burst, 2 threads pinned (per thread)")
    target_line("free", "sustained, 1 thread")
    if (spreads != "") printf "\n* runs of these rows spread over more than 1.5x (min shown, so read the median too):\n%s", spreads
    if (inexact) printf "WARNING: %d configurations whose counts do not add up (fired != delivered + dropped): see NOT EXACT\n", inexact
    if (bit63) printf "^ lttng list printed some runs\047 discarded-events count with bit 63 set; counted without that bit\n"
    if (notes != "") printf "notes:\n%s", notes
    if (lnote != "") printf "%s\n", lnote
    if (nodes == 1) printf "PER_NODE on this machine (one NUMA node) has one partition, like NONE (3 buffers).\n"
}' "$RAW"

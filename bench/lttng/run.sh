#!/usr/bin/env bash
# LTTng-UST's cost per event, for bench/xe.sh's table: runs lttng_fire
# (bench/lttng/lttng_fire.c) inside a real LTTng session with tracing
# active, one fresh session per run (so the trace on disk never grows past
# one run's), in two channel modes:
#   blocking  --blocking-timeout=inf (and LTTNG_UST_ALLOW_BLOCKING=1): no
#             event is lost, like the engine's NO_EVENT_LOSS
#   discard   LTTng's default: events are dropped when the sub-buffers are
#             full, like ALLOW_SINGLE_EVENT_LOSS
# The channel gets the same memory as the engine's session (MB across all
# CPUs' buffers) and the vtid context (memtrail records the thread id).
# If no session daemon runs, one is started (lttng-sessiond --daemonize
# --no-kernel) and killed at the end, by its pid; a daemon that was already
# running is used and left alone.
#
# Usage: bench/lttng/run.sh --bin PATH [--events N] [--runs R] [--threads "1 2"]
#                           [--modes "blocking discard"] [--max-memory MB] [--pin] [--tag T]
# Prints "RUN ..." and "RESULT impl=lttng label=[T-]MODE threads=T min=.. median=..
# fired=.. discarded=.." lines; when LTTng cannot run, one line
# "LTTNG_SKIP reason=..." and exit status 3. Other errors: status 1.
set -euo pipefail
export LC_ALL=C

bin="" events=10000000 runs=5 threads="1 2" modes="blocking discard" mem_mb=64 pin="" pin_label=none tag=""
skip() { echo "LTTNG_SKIP reason=\"$*\""; exit 3; }
die() { echo "lttng/run.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$2; shift ;;
        --events) events=$2; shift ;;
        --runs) runs=$2; shift ;;
        --threads) threads=$2; shift ;;
        --modes) modes=$2; shift ;;
        --max-memory) mem_mb=$2; shift ;;
        --pin) pin=--pin pin_label=producers ;;
        --tag) tag=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "lttng/run.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$bin" ] || die "--bin PATH (build/bench/lttng_fire) is required"
[ -x "$bin" ] || skip "$bin is not built (make bench-lttng needs liblttng-ust-dev)"
command -v lttng >/dev/null 2>&1 || skip "the lttng command is missing (apt-get install lttng-tools)"
command -v lttng-sessiond >/dev/null 2>&1 || skip "lttng-sessiond is missing (apt-get install lttng-tools)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-lttng.XXXXXX")
# A private LTTNG_HOME: the lttng client's current-session file and, for a
# non-root user, the session daemon's sockets live there, not in ~/.lttng.
export HOME=${HOME:-$TMP} LTTNG_HOME=$TMP/home
mkdir -p "$LTTNG_HOME"
if [ "$(id -u)" -eq 0 ]; then rundir=/var/run/lttng; else rundir=$LTTNG_HOME/.lttng; fi

daemon_pid="" session=""
cleanup() {
    if [ -n "$session" ]; then lttng destroy "$session" >/dev/null 2>&1 || true; fi
    if [ -n "$daemon_pid" ]; then
        kill "$daemon_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

running_pid() { # the pid of a live session daemon in $rundir, if any
    local p
    p=$(cat "$rundir/lttng-sessiond.pid" 2>/dev/null) || return 1
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null &&
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = lttng-sessiond ] && echo "$p"
}

if p=$(running_pid); then
    echo "INFO lttng: using the session daemon already running (pid $p); it is left running"
else
    if ! lttng-sessiond --daemonize --no-kernel >"$TMP/sessiond.log" 2>&1; then
        skip "lttng-sessiond --daemonize failed: $(tr '\n' ' ' <"$TMP/sessiond.log" | cut -c1-200)"
    fi
    for _ in $(seq 50); do p=$(running_pid) && break; sleep 0.1; done
    [ -n "${p:-}" ] || skip "lttng-sessiond started but wrote no pid file in $rundir"
    daemon_pid=$p
    echo "INFO lttng: started a session daemon (pid $daemon_pid), killed at the end"
fi

# Sub-buffers: 1 MiB each, a power of two of them per CPU, mem_mb in all.
ncpu=$(getconf _NPROCESSORS_ONLN)
per_cpu=$((mem_mb / ncpu)); nsub=1
while [ $((nsub * 2)) -le "$per_cpu" ]; do nsub=$((nsub * 2)); done
[ "$nsub" -ge 2 ] || nsub=2
echo "INFO lttng: $(lttng --version | head -1); channel: $ncpu CPUs x $nsub x 1 MiB sub-buffers, vtid context"

lt() { # lttng command, quiet unless it fails
    local out
    if ! out=$(lttng "$@" 2>&1); then
        echo "lttng/run.sh: lttng $* failed: $out" >&2
        return 1
    fi
}

min_median_max() { # numbers on stdin -> "min median max"
    sort -g | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f %.2f %.2f\n", v[1], m, v[NR] }'
}

for mode in $modes; do
    case $mode in blocking|discard) ;; *) die "--modes wants blocking and/or discard, not '$mode'" ;; esac
    for t in $threads; do
        : >"$TMP/ns"
        discarded=0 odd_count="" flagged=0
        for r in $(seq "$runs"); do
            session=mtbench$$-$mode-$t-$r
            lt create "$session" --output="$TMP/trace" || skip "lttng create failed (see above)"
            chan=(--subbuf-size=1M --num-subbuf="$nsub")
            env=()
            if [ "$mode" = blocking ]; then chan+=(--blocking-timeout=inf); env=(LTTNG_UST_ALLOW_BLOCKING=1); fi
            lt enable-channel -u -s "$session" "${chan[@]}" ch || skip "lttng enable-channel failed"
            lt enable-event -u -s "$session" -c ch 'memtrail_bench:*' || skip "lttng enable-event failed"
            lt add-context -u -s "$session" -c ch -t vtid || skip "lttng add-context failed"
            lt start "$session" || skip "lttng start failed"
            if ! out=$(env "${env[@]+"${env[@]}"}" "$bin" --events "$events" --threads "$t" --runs 1 \
                    --label "${tag:+$tag-}$mode" $pin 2>&1); then
                skip "lttng_fire failed: $(echo "$out" | tr '\n' ' ' | cut -c1-200)"
            fi
            lt stop "$session" || true
            # "Discarded events: N" in the channel's statistics. LTTng 2.13.9
            # has been seen to print it with bit 63 set (9223372036857861414).
            d=$(lttng list "$session" -c ch 2>/dev/null | awk '/Discarded events:/ { print $3; exit }')
            lt destroy "$session" || true
            session=""
            rm -rf "$TMP/trace"
            ns=$(echo "$out" | awk '/^RUN / { for (i = 1; i <= NF; i++) if ($i ~ /^ns=/) print substr($i, 4) }')
            [ -n "$ns" ] || die "lttng_fire printed no RUN line: $out"
            echo "$ns" >>"$TMP/ns"
            echo "RUN impl=lttng label=${tag:+$tag-}$mode threads=$t run=$r ns=$ns discarded=${d:-?}"
            if [[ ${d:-x} =~ ^9[0-9]{18}$ ]] && command -v python3 >/dev/null 2>&1; then
                # With bit 63 set the low bits are a plausible count: counted, and flagged.
                d=$(python3 -c 'import sys; v = int(sys.argv[1]); print(v - 2**63 if v >= 2**63 else v)' "$d")
                flagged=$((flagged + 1))
            fi
            if [[ ${d:-x} =~ ^[0-9]{1,18}$ ]]; then discarded=$((discarded + d)); else odd_count+="${d:-none} "; fi
        done
        read -r mn md mx < <(min_median_max <"$TMP/ns")
        note=""
        [ -z "$odd_count" ] || note=" discarded_unreadable=\"${odd_count% }\""
        [ "$flagged" = 0 ] || note+=" discarded_bit63_runs=$flagged"
        echo "RESULT impl=lttng label=${tag:+$tag-}$mode threads=$t pin=$pin_label min=$mn median=$md max=$mx" \
            "fired=$((events * t * runs)) discarded=$discarded$note"
    done
done

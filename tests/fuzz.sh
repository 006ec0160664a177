#!/usr/bin/env bash
# Runs every fuzz target (`make fuzz` builds them) for FUZZ_SECONDS each
# (default 60), one after the other, starting from its committed corpus.
# What a target finds new is kept in build/fuzz/NAME.new/; a crash, leak
# or timeout stops the run with the input as build/fuzz/NAME-crash-* (fix
# it, then commit the input to the corpus as crash-WHAT), and the exit
# status is 1. FUZZ_ONLY=NAME runs one target. FUZZ_MERGE=1 then adds what
# the runs found that covers more to the committed corpus, as fuzz-SHA1
# (libFuzzer's -set_cover_merge=1: a small set of inputs that keeps the
# coverage).
#
# The corpora (committed, replayed by `make check`):
#   fuzz_read      tests/trace/corpus/          traces (make trace-corpus writes the seeds)
#   fuzz_report    tests/report/fuzz/corpus/    .mtr reports, with printers and exporters
#   fuzz_options   tests/agent/fuzz/corpus/     MEMTRAIL_OPTIONS strings
#   fuzz_sessions  tests/xe/fuzz/corpus_sessions/  MEMTRAIL_SESSIONS definitions
#   fuzz_pred      tests/xe/fuzz/corpus_pred/   session predicates
#   fuzz_refset    tests/refset/corpus/         reference-set recordings (make refset-corpus writes the seeds)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SECONDS_EACH=${FUZZ_SECONDS:-60}
status=0

run() { # NAME CORPUS MAX_LEN
    local name=$1 corpus=$2 max_len=$3
    [ -n "${FUZZ_ONLY:-}" ] && [ "$FUZZ_ONLY" != "$name" ] && return 0
    local bin=$BUILD/fuzz/$name new=$BUILD/fuzz/$name.new
    if [ ! -x "$bin" ]; then
        echo "fuzz: $bin missing (make fuzz-build)" >&2
        status=1
        return
    fi
    mkdir -p "$new"
    echo "fuzz: $name for ${SECONDS_EACH}s from $corpus"
    if "$bin" -max_total_time="$SECONDS_EACH" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$BUILD/fuzz/$name-" "$new" "$corpus" \
        >"$BUILD/fuzz/$name.log" 2>&1; then
        echo "fuzz: $name: no finding ($(grep -E '^stat::number_of_executed_units' "$BUILD/fuzz/$name.log" |
            awk '{print $2}') runs, $(ls "$new" | wc -l) new inputs in $new)"
    else
        echo "fuzz: $name: FINDING (log: $BUILD/fuzz/$name.log)"
        grep -E 'ERROR|SUMMARY|Test unit written' "$BUILD/fuzz/$name.log" | head -5 | sed 's/^/    /'
        status=1
        return
    fi
    [ "${FUZZ_MERGE:-0}" = 1 ] || return 0
    local merged=$BUILD/fuzz/$name.merged f sum added=0
    rm -rf "$merged"
    mkdir -p "$merged"
    "$bin" -set_cover_merge=1 -max_len="$max_len" "$merged" "$corpus" "$new" >"$BUILD/fuzz/$name.merge.log" 2>&1
    declare -A have=()
    for f in "$corpus"/*; do have[$(sha1sum <"$f" | cut -c1-40)]=1; done
    for f in "$merged"/*; do
        [ -f "$f" ] || continue
        sum=$(sha1sum <"$f" | cut -c1-40)
        [ -n "${have[$sum]+x}" ] && continue
        cp "$f" "$corpus/fuzz-$sum"
        added=$((added + 1))
    done
    echo "fuzz: $name: $added inputs added to $corpus"
}

run fuzz_read tests/trace/corpus 65536
run fuzz_report tests/report/fuzz/corpus 65536
run fuzz_options tests/agent/fuzz/corpus 8192
run fuzz_sessions tests/xe/fuzz/corpus_sessions 8192
run fuzz_pred tests/xe/fuzz/corpus_pred 4096
run fuzz_refset tests/refset/corpus 65536
exit $status

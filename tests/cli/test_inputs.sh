#!/usr/bin/env bash
# Inputs that are not regular files: every command that reads reports or
# traces (report, report detail, report summary of a trace, diff, export,
# analyze) reads a pipe (process substitution, `<(cat FILE)`), a FIFO and
# stdin (`-`) exactly as it reads the regular file: same output (the input's
# name aside), same exit status. The truth is the command's own output on
# the regular file, recorded from real runs (a summary report, a detail
# report, a trace). A pipe can be read once only, and a FIFO whose writer
# has gone blocks whoever opens it again: every run is bounded by `timeout`
# (a hang detector, not a timing). Every CLI call runs the ASan+UBSan build.
. "$(dirname "$0")/../lib.sh"

[ -x "$MT_ASAN" ] || { fail inputs-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }
[ -x "$TBIN/detail" ] || { fail inputs-build "$TBIN/detail missing (make tests)"; exit 1; }
unset DEBUGINFOD_URLS

# --- fixtures: real runs -------------------------------------------------------
"$MT" run -o "$T/s1.mtr" -- "$TBIN/detail" >/dev/null 2>&1
"$MT" run -o "$T/s2.mtr" -- /bin/true >/dev/null 2>&1
"$MT" run --mode detail -o "$T/d1.mtr" -- "$TBIN/detail" >/dev/null 2>&1
"$MT" run --mode detail --depth 8 -o "$T/d2.mtr" -- "$TBIN/detail" >/dev/null 2>&1
"$MT" run --mode trace -o "$T/t.mtt" -- "$TBIN/detail" >/dev/null 2>&1
for f in s1.mtr s2.mtr d1.mtr d2.mtr t.mtt; do
    [ -s "$T/$f" ] || { fail inputs-fixtures "the run did not write $f"; exit 1; }
done
pass inputs-fixtures

LIMIT=60    # seconds; a reader that waits on a FIFO for ever is stopped here

# run_as MODE OUT CMD...: runs CMD with each argument @NAME replaced by the
# fixture $T/NAME given as MODE: file (its path), pipe (/dev/fd/N of a
# process substitution), fifo (a FIFO a background cat writes into) or
# stdin (- for the first @ argument, the file piped in; the others as
# files). Sets rc; stdout goes to OUT, with the input names replaced by IN;
# stderr to OUT.err.
run_as() {
    local mode=$1 out=$2; shift 2
    local args=() names=() writers=() fds=() a src k=0 stdin_src=""
    for a in "$@"; do
        if [ "${a#@}" = "$a" ]; then args+=("$a"); continue; fi
        src=$T/${a#@}
        k=$((k + 1))
        case $mode in
            file) args+=("$src"); names+=("$src") ;;
            pipe)
                local fd
                exec {fd}< <(cat "$src")
                fds+=("$fd"); args+=("/dev/fd/$fd"); names+=("/dev/fd/$fd") ;;
            fifo)
                rm -f "$T/fifo$k"; mkfifo "$T/fifo$k"
                cat "$src" >"$T/fifo$k" 2>/dev/null &
                writers+=("$!"); args+=("$T/fifo$k"); names+=("$T/fifo$k") ;;
            stdin)
                if [ -z "$stdin_src" ]; then stdin_src=$src; args+=(-); names+=("(stdin)")
                else args+=("$src"); names+=("$src"); fi ;;
        esac
    done
    if [ -n "$stdin_src" ]; then
        cat "$stdin_src" | timeout "$LIMIT" "${args[@]}" >"$out.raw" 2>"$out.err"
        rc=${PIPESTATUS[1]}
    else
        timeout "$LIMIT" "${args[@]}" >"$out.raw" 2>"$out.err"
        rc=$?
    fi
    local w fd
    for w in "${writers[@]+"${writers[@]}"}"; do kill "$w" 2>/dev/null; wait "$w" 2>/dev/null; done
    for fd in "${fds[@]+"${fds[@]}"}"; do exec {fd}<&-; done
    # the input's name as the command shows it, in text and JSON
    local sedargs=() n
    for n in "${names[@]+"${names[@]}"}"; do sedargs+=(-e "s#$(printf '%s' "$n" | sed 's/[][\.*^$#]/\\&/g')#IN#g"); done
    sedargs+=(-e "s#memtrail report detail -'#memtrail report detail IN'#g")
    sed "${sedargs[@]}" "$out.raw" >"$out"
}

# same_as_file NAME CMD...: the command on pipes, FIFOs and stdin prints
# what it prints on the files, with the same exit status.
same_as_file() {
    local name=$1; shift
    run_as file "$T/want" "$@"
    local want_rc=$rc
    if [ "$want_rc" -ne 0 ] && [ "$want_rc" -ne 1 ]; then
        fail "$name-file" "status $want_rc on the regular file: $(head -c 300 "$T/want.err")"
        return
    fi
    if [ ! -s "$T/want" ]; then
        fail "$name-file" "no output on the regular file: $(head -c 300 "$T/want.err")"
        return
    fi
    local mode
    for mode in pipe fifo stdin; do
        run_as "$mode" "$T/got" "$@"
        if [ "$rc" -eq 124 ]; then
            fail "$name-$mode" "still running after ${LIMIT}s (waiting on its input?)"
        elif [ "$rc" -ne "$want_rc" ]; then
            fail "$name-$mode" "status $rc, $want_rc on the file: $(head -c 300 "$T/got.err")"
        elif ! cmp -s "$T/want" "$T/got"; then
            fail "$name-$mode" "output differs from the file's: $(diff "$T/want" "$T/got" | head -5)"
        else
            pass "$name-$mode"
        fi
    done
}

same_as_file inputs-report-summary "$MT_ASAN" report @s1.mtr
same_as_file inputs-report-json "$MT_ASAN" report @s1.mtr --json
same_as_file inputs-report-detail "$MT_ASAN" report detail @d1.mtr --top 5
same_as_file inputs-report-detail-json "$MT_ASAN" report detail @d1.mtr --json
same_as_file inputs-report-detail-default "$MT_ASAN" report @d1.mtr
same_as_file inputs-report-trace "$MT_ASAN" report @t.mtt --top 3
same_as_file inputs-report-trace-summary "$MT_ASAN" report summary @t.mtt
same_as_file inputs-diff "$MT_ASAN" diff @s2.mtr @s1.mtr
same_as_file inputs-diff-json "$MT_ASAN" diff @s2.mtr @s1.mtr --json
same_as_file inputs-diff-detail "$MT_ASAN" diff @d1.mtr @d2.mtr --top 5
same_as_file inputs-export-folded "$MT_ASAN" export @d1.mtr --format folded
same_as_file inputs-export-json "$MT_ASAN" export @d1.mtr --format json
same_as_file inputs-export-trace "$MT_ASAN" export @t.mtt --format folded --value allocs
same_as_file inputs-analyze "$MT_ASAN" analyze @t.mtt --top 3
same_as_file inputs-analyze-json "$MT_ASAN" analyze @t.mtt --json

# pprof to a file: the profile read from a pipe decodes to the same samples.
run_as file "$T/p" "$MT_ASAN" export @d1.mtr --format pprof -o "$T/file.pb.gz"
run_as pipe "$T/p" "$MT_ASAN" export @d1.mtr --format pprof -o "$T/pipe.pb.gz"
if [ "$rc" -eq 0 ] && gzip -t "$T/pipe.pb.gz" 2>/dev/null &&
   [ "$(gzip -dc "$T/file.pb.gz" | wc -c)" -gt 0 ] &&
   [ "$(gzip -dc "$T/pipe.pb.gz" | grep -c -a 'memtrail')" -eq "$(gzip -dc "$T/file.pb.gz" | grep -c -a 'memtrail')" ]; then
    pass inputs-export-pprof-pipe
else
    fail inputs-export-pprof-pipe "status $rc: $(head -c 300 "$T/p.err")"
fi

# A stream cut short: the error names the input and says it ended, and
# what came before is still shown (exit 1), as for a file cut short.
head -c "$(($(stat -c %s "$T/d1.mtr") / 2))" "$T/d1.mtr" >"$T/cut.mtr"
run_as pipe "$T/c" "$MT_ASAN" report detail @cut.mtr --top 1
expect_eq inputs-cut-pipe-status 1 "$rc"
contains inputs-cut-pipe-message "truncated after line" "$(cat "$T/c.err")"
head -c 600 "$T/t.mtt" >"$T/cut.mtt"
run_as pipe "$T/c" "$MT_ASAN" analyze @cut.mtt
expect_eq inputs-cut-trace-status 1 "$rc"
contains inputs-cut-trace-message "the input ends after" "$(cat "$T/c.err")"

# Not a report, not a trace: one clear line, nothing else read.
printf 'hello\n' >"$T/hello.txt"
run_as pipe "$T/h" "$MT_ASAN" report @hello.txt
expect_eq inputs-not-report-status 1 "$rc"
contains inputs-not-report-message "not a memtrail report (bad header)" "$(cat "$T/h.err")"
run_as fifo "$T/h" "$MT_ASAN" analyze @hello.txt
expect_eq inputs-not-trace-status 1 "$rc"
contains inputs-not-trace-message "not a memtrail trace" "$(cat "$T/h.err")"
: >"$T/empty"
run_as stdin "$T/h" "$MT_ASAN" report @empty
contains inputs-empty-stdin "(stdin): empty file" "$(cat "$T/h.err")"

# A directory of reports holding a FIFO named like a report: the FIFO is
# named and skipped (nothing writes to it: opening it would wait for ever),
# the other reports are shown, exit 1.
mkdir -p "$T/dir"
cp "$T/s1.mtr" "$T/dir/a.mtr"
mkfifo "$T/dir/b.mtr"
run_mt timeout "$LIMIT" "$MT_ASAN" report "$T/dir"
expect_eq inputs-dir-fifo-status 1 "$rc"
contains inputs-dir-fifo-named "$T/dir/b.mtr: not a regular file; skipped" "$err"
contains inputs-dir-fifo-others-shown "memtrail process tree: 1 report" "$out"

# A report whose module path names a FIFO (nothing writes to it): the
# symbolizer and the pprof exporter do not open it (they would wait for
# ever); the module's frames stay module+offset, with a warning.
rm -f "$T/modfifo"; mkfifo "$T/modfifo"
cat >"$T/fifomod.mtr" <<EOT
memtrail-report 1
pid 1
mode detail
total live_bytes=16 live_count=1 peak_bytes=16 allocs=1 frees=0 reallocs=0
stack_depth 4
module 1 bias=0x400000 start=0x400000 end=0x500000 buildid=- path=$T/modfifo
site 1 category=malloc live_bytes=16 live_count=1 peak_bytes=16 allocs=1 frees=0 reallocs=0 allocated_bytes=16 frames=0x401234
sites count=1 dropped=0
end
EOT
run_mt timeout "$LIMIT" "$MT_ASAN" report detail "$T/fifomod.mtr"
expect_eq inputs-module-fifo-status 0 "$rc"
contains inputs-module-fifo-warning "$T/modfifo: not a regular file; frames in it shown as module+offset" "$err"
contains inputs-module-fifo-offset "[0x0000000000401234] modfifo+0x1234" "$out"
run_mt timeout "$LIMIT" "$MT_ASAN" export "$T/fifomod.mtr" --format pprof -o "$T/fifomod.pb.gz"
expect_eq inputs-module-fifo-pprof 0 "$rc"

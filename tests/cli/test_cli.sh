#!/usr/bin/env bash
# CLI behaviour of `memtrail` (src/cli/, src/report/): help and usage
# errors, `report` on handwritten .mtr fixtures (text, JSON read back by
# python3, scaling, truncated and corrupt files), and `run`'s checks and exit
# status passthrough. Everything that does not need the real agent runs the
# ASan+UBSan build; `run` gets a do-nothing stand-in agent so these checks do
# not depend on libmemtrail.so. One end-to-end check uses the real agent.
. "$(dirname "$0")/../lib.sh"

[ -x "$MT_ASAN" ] || { fail cli-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }


# --- help, version, usage errors --------------------------------------------
run_mt "$MT_ASAN" --help
expect_eq "help: --help exits 0" 0 "$rc"
contains "help: lists run" "  run " "$out"
contains "help: lists report" "  report " "$out"
for sub in run report; do
    run_mt "$MT_ASAN" "$sub" --help
    expect_eq "help: $sub --help exits 0" 0 "$rc"
    contains "help: $sub --help shows usage" "usage: memtrail $sub" "$out"
    run_mt "$MT_ASAN" help "$sub"
    expect_eq "help: help $sub exits 0" 0 "$rc"
    contains "help: help $sub shows usage" "usage: memtrail $sub" "$out"
done
run_mt "$MT_ASAN" --version
expect_eq "version" "memtrail 0.1.0" "$out"
run_mt "$MT_ASAN"
expect_eq "usage: no command exits 2" 2 "$rc"
run_mt "$MT_ASAN" frobnicate
expect_eq "usage: unknown command exits 2" 2 "$rc"
contains "usage: unknown command named" "memtrail: unknown command 'frobnicate'" "$err"
contains "usage: hint to --help" "memtrail --help" "$err"
run_mt "$MT_ASAN" --frob
expect_eq "usage: unknown top-level option exits 2" 2 "$rc"
run_mt "$MT_ASAN" help frobnicate
expect_eq "usage: help of unknown command exits 2" 2 "$rc"
run_mt "$MT_ASAN" report --bogus x.mtr
expect_eq "usage: report unknown option exits 2" 2 "$rc"
contains "usage: report unknown option named" "memtrail: unknown option '--bogus'" "$err"
contains "usage: report hint" "memtrail report --help" "$err"
run_mt "$MT_ASAN" report
expect_eq "usage: report without file exits 2" 2 "$rc"
run_mt "$MT_ASAN" report flame x.mtr
expect_eq "usage: report flame (unknown view) exits 2" 2 "$rc"
contains "usage: report flame names accepted" "(accepted: summary, detail)" "$err"
run_mt "$MT_ASAN" report x.mtr --scale XB
expect_eq "usage: bad --scale exits 2" 2 "$rc"
contains "usage: bad --scale message" "memtrail: --scale: unknown scale 'XB' (accepted: KB, MB, GB)" "$err"
run_mt "$MT_ASAN" run --mode flame -- true
expect_eq "usage: run --mode flame exits 2" 2 "$rc"
contains "usage: run --mode message" "memtrail: --mode: unknown mode 'flame' (accepted: summary, detail, sample, trace)" "$err"
run_mt "$MT_ASAN" run --frob -- true
expect_eq "usage: run unknown option exits 2" 2 "$rc"
run_mt "$MT_ASAN" run
expect_eq "usage: run without command exits 2" 2 "$rc"
contains "usage: run without command message" "missing the command" "$err"
run_mt "$MT_ASAN" run -o
expect_eq "usage: run -o without value exits 2" 2 "$rc"
run_mt "$MT_ASAN" run -o 'r.%x.mtr' -- true
expect_eq "usage: run -o with unknown %x exits 2" 2 "$rc"
contains "usage: run -o %x message" "(accepted: %p, %e, %%)" "$err"

# --- report: a good fixture -------------------------------------------------
cat >"$T/good.mtr" <<'EOF'
memtrail-report 1
pid 4242
ppid 4241
exe /usr/bin/sqlite3
cmdline sqlite3 :memory: .read\sworkload.sql a"b\\c\nd
mode summary
start_ns 1763868000123456789
end_ns 1763868001123456789
reason exit
category malloc kind=malloc live_bytes=1048 live_count=3 peak_bytes=90000 allocs=1900000 frees=1899997 reallocs=12
category parser kind=malloc live_bytes=20480 live_count=30 peak_bytes=40960 allocs=100 frees=70 newfield=5
category idle kind=malloc live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0
category memtrail kind=overhead live_bytes=54 live_count=3 peak_bytes=3000 allocs=1900010 frees=1900007
total live_bytes=21528 live_count=33 peak_bytes=90000 allocs=1900100 frees=1900067
future_line anything
errors double_free=0 bad_canary=0 foreign_free=2
end
EOF
run_mt "$MT_ASAN" report "$T/good.mtr"
expect_eq "report: good exits 0" 0 "$rc"
expect_eq "report: good says nothing on stderr" "" "$err"
contains "report: title" "memtrail native memory summary: pid 4242, sqlite3 :memory: '.read workload.sql'" "$out"
# 21528 B = 21.02KB, 90000 B = 87.89KB: three significant digits
contains "report: total line" "Total: live=21.0KB (33 blocks), peak=87.9KB, allocs=1900100, frees=1900067" "$out"
contains "report: parser block" "-                    parser (reserved=20KB, committed=20KB)" "$out"
contains "report: parser malloc line" "                            (malloc=20KB #30) (peak=40KB)" "$out"
contains "report: parser counts" "                            (allocs=100 frees=70)" "$out"
contains "report: reallocs shown" "(allocs=1900000 frees=1899997 reallocs=12)" "$out"
contains "report: overhead labelled" "memtrail's own overhead" "$out"
contains "report: errors section" "foreign_free=2" "$out"
order=$(printf '%s\n' "$out" | grep -E '^- ' | awk '{print $2}' | tr '\n' ' ')
expect_eq "report: sorted by live bytes, unused hidden, overhead last" "parser malloc memtrail " "$order"
run_mt "$MT_ASAN" report summary "$T/good.mtr"
expect_eq "report: explicit summary exits 0" 0 "$rc"

"$MT_ASAN" report "$T/good.mtr" --json >"$T/good.json" 2>"$T/err"
expect_eq "json: exits 0" 0 "$?"
if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/good.json" 2>"$T/pyerr"; then
    pass "json: python3 parses it"
    expect_eq "json: pid" 4242 "$(json_get "$T/good.json" "j['pid']")"
    expect_eq "json: ppid" 4241 "$(json_get "$T/good.json" "j['ppid']")"
    expect_eq "json: cmdline" "['sqlite3', ':memory:', '.read workload.sql', 'a\"b\\\\c\\nd']" \
        "$(json_get "$T/good.json" "j['cmdline']")"
    expect_eq "json: complete" True "$(json_get "$T/good.json" "j['complete']")"
    expect_eq "json: start_ns exact" 1763868000123456789 "$(json_get "$T/good.json" "j['start_ns']")"
    expect_eq "json: categories in file order" "malloc parser idle memtrail" \
        "$(json_get "$T/good.json" "' '.join(c['name'] for c in j['categories'])")"
    expect_eq "json: parser numbers" "20480 30 40960 100 70 0 20480 20480" \
        "$(json_get "$T/good.json" "' '.join(str(j['categories'][1][k]) for k in ('live_bytes','live_count','peak_bytes','allocs','frees','reallocs','reserved_bytes','committed_bytes'))")"
    expect_eq "json: malloc reallocs" 12 "$(json_get "$T/good.json" "j['categories'][0]['reallocs']")"
    expect_eq "json: overhead kind" overhead "$(json_get "$T/good.json" "j['categories'][3]['kind']")"
    expect_eq "json: total" "21528 33 90000 1900100 1900067" \
        "$(json_get "$T/good.json" "' '.join(str(j['total'][k]) for k in ('live_bytes','live_count','peak_bytes','allocs','frees'))")"
    expect_eq "json: errors" "0 0 2" \
        "$(json_get "$T/good.json" "' '.join(str(j['errors'][k]) for k in ('double_free','bad_canary','foreign_free'))")"
else
    fail "json: python3 parses it" "$(cat "$T/pyerr")"
fi

# Control characters and bytes that are not UTF-8 still give valid JSON.
printf 'memtrail-report 1\npid 1\nexe /odd\001\377name\ncmdline x\\ny\ntotal live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0\nend\n' >"$T/odd.mtr"
"$MT_ASAN" report --json "$T/odd.mtr" >"$T/odd.json" 2>/dev/null
expect_eq "json: control char and bad UTF-8 escaped" "True True" \
    "$(json_get "$T/odd.json" "str(j['exe'] == '/odd\\x01\\ufffdname') + ' ' + str(j['cmdline'] == ['x\\ny'])" 2>&1)"

# --- report: scaling --------------------------------------------------------
cat >"$T/scale.mtr" <<'EOF'
memtrail-report 1
pid 1
category big kind=malloc live_bytes=1572864 live_count=1 peak_bytes=1572863 allocs=1 frees=0
total live_bytes=1572864 live_count=1 peak_bytes=1572863 allocs=1 frees=0
end
EOF
run_mt "$MT_ASAN" report "$T/scale.mtr" --scale MB
expect_eq "scale: MB exits 0" 0 "$rc"
# 1572864 B = 1.5MB, 1572863 B = 1.4999990MB: three significant digits each
contains "scale: MB with three significant digits" "Total: live=1.50MB (1 blocks), peak=1.50MB" "$out"
contains "scale: MB in category" "(reserved=1.50MB, committed=1.50MB)" "$out"
run_mt "$MT_ASAN" report "$T/scale.mtr" --scale=gb
# 1572864 B = 0.00146484375GB: not 0
contains "scale: lowercase gb" "Total: live=0.00146GB" "$out"
run_mt "$MT_ASAN" report "$T/scale.mtr"
contains "scale: default KB" "Total: live=1536KB (1 blocks), peak=1536KB" "$out"
"$MT_ASAN" report --scale MB --json "$T/scale.mtr" >"$T/scale.json"
expect_eq "scale: JSON stays in bytes" 1572864 "$(json_get "$T/scale.json" "j['total']['live_bytes']")"

# --- report: bad input -------------------------------------------------------
run_mt "$MT_ASAN" report "$T/nonexistent.mtr"
expect_eq "bad: missing file exits 1" 1 "$rc"
contains "bad: missing file message" "memtrail: $T/nonexistent.mtr: cannot open: No such file or directory" "$err"
# A directory is a process tree (tests/cli/test_diff.sh); one without reports is an error.
mkdir -p "$T/noreports"
run_mt "$MT_ASAN" report "$T/noreports"
expect_eq "bad: directory exits 1" 1 "$rc"
contains "bad: directory message" "$T/noreports: no report files (*.mtr, *.mtt) in this directory" "$err"
run_mt "$MT_ASAN" html "$T/noreports"
contains "bad: html of a directory without reports names both kinds" "no report files (*.mtr, *.mtt) in this directory" "$err"
run_mt "$MT_ASAN" report --help
contains "report --help: a directory's reports and traces" "(every *.mtr and *.mtt in it, and the agent's FILE.N and" "$out"
: >"$T/empty.mtr"
run_mt "$MT_ASAN" report "$T/empty.mtr"
expect_eq "bad: empty file exits 1" 1 "$rc"
contains "bad: empty file message" "empty file" "$err"
run_mt "$MT_ASAN" report /bin/sh
expect_eq "bad: a binary exits 1" 1 "$rc"
contains "bad: a binary is not a report" "memtrail: /bin/sh: not a memtrail report (bad header)" "$err"
printf 'memtrail-report 7\npid 1\nend\n' >"$T/v7.mtr"
run_mt "$MT_ASAN" report "$T/v7.mtr"
expect_eq "bad: future version exits 1" 1 "$rc"
contains "bad: future version message" "version 7 is newer than this memtrail reads (version 1)" "$err"

head -n 11 "$T/good.mtr" >"$T/cut.mtr"
run_mt "$MT_ASAN" report "$T/cut.mtr"
expect_eq "truncated: exits 1" 1 "$rc"
contains "truncated: error on stderr" "memtrail: $T/cut.mtr: truncated after line 11 (no end marker)" "$err"
contains "truncated: prints what it holds" "-                    parser (reserved=20KB, committed=20KB)" "$out"
contains "truncated: says it is incomplete" "Incomplete:" "$out"
"$MT_ASAN" report --json "$T/cut.mtr" >"$T/cut.json" 2>/dev/null
expect_eq "truncated: json exits 1" 1 "$?"
expect_eq "truncated: json complete=false, 2 categories, no total" "False 2 None" \
    "$(json_get "$T/cut.json" "' '.join(str(x) for x in (j['complete'], len(j['categories']), j['total']))")"

sed 's/^category parser kind=malloc live_bytes=20480/category parser kind=malloc live_bytes=20x480/' \
    "$T/good.mtr" >"$T/corrupt.mtr"
run_mt "$MT_ASAN" report "$T/corrupt.mtr"
expect_eq "corrupt: exits 1" 1 "$rc"
contains "corrupt: names file, line and field" \
    "memtrail: $T/corrupt.mtr: line 11: bad value '20x480' for live_bytes (expected an integer)" "$err"
expect_eq "corrupt: prints no report" "" "$out"
sed 's/^pid 4242$/pid 99999999999999999999/' "$T/good.mtr" >"$T/overflow.mtr"
run_mt "$MT_ASAN" report "$T/overflow.mtr"
expect_eq "corrupt: overflow exits 1" 1 "$rc"
contains "corrupt: overflow message" "line 2: value '99999999999999999999' for pid does not fit in a signed 64-bit integer" "$err"

# --- run: checks before starting ---------------------------------------------
# A stand-in agent that tracks nothing, so these checks need no libmemtrail.so.
printf 'int mt_stand_in_agent;\n' >"$T/standin.c"
cc -shared -fPIC -o "$T/standin.so" "$T/standin.c"
export MEMTRAIL_LIB=$T/standin.so

printf '#include <stdlib.h>\nint main(void) { return malloc(1) == 0; }\n' >"$T/static.c"
if cc -static -o "$T/static_prog" "$T/static.c" 2>"$T/cc.err"; then
    run_mt "$MT_ASAN" run -o "$T/s.%p.mtr" -- "$T/static_prog"
    expect_eq "run: static binary refused with 1" 1 "$rc"
    contains "run: static binary message" "is statically linked: malloc cannot be interposed in a static binary" "$err"
    printf '#!%s\n' "$T/static_prog" >"$T/static_script"
    chmod +x "$T/static_script"
    run_mt "$MT_ASAN" run -- "$T/static_script"
    expect_eq "run: script with a static interpreter refused" 1 "$rc"
else
    fail "run: static binary refused" "cannot build a static test program (cc -static; is the static libc, libc6-dev's libc.a, installed?): $(head -c 300 "$T/cc.err")"
fi

# A program with a malloc of its own (an allocator linked into it): its
# calls, and its libraries', go there before any preloaded library's, so
# `run` refuses it, as a static one, and does not start it. A program that
# only takes malloc's address (its .dynsym names malloc, undefined, as
# python3's does) is not refused; nor one whose section headers lie (the
# check cannot tell: the agent says so at run time).
cat >"$T/ownmalloc.c" <<'EOF2'
#include <stdio.h>
#include <stdlib.h>
extern void *__libc_malloc(size_t), __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
int main(void) { free(malloc(1)); puts("own malloc ran"); return 0; }
EOF2
printf '#include <stdio.h>\n#include <stdlib.h>\nvoid *(*volatile f)(size_t) = malloc;\nint main(void) { free(f(1)); puts("address ran"); return 0; }\n' >"$T/addr.c"
if cc -o "$T/ownmalloc" "$T/ownmalloc.c" && cc -no-pie -o "$T/addr_nopie" "$T/addr.c" && cc -o "$T/addr_pie" "$T/addr.c"; then
    run_mt "$MT_ASAN" run -o "$T/om.%p.mtr" -- "$T/ownmalloc"
    expect_eq "run: a program with its own malloc refused with 1, not started" "1 " "$rc $out"
    contains "run: own malloc message" "memtrail: $T/ownmalloc defines malloc itself (an allocator linked into it): its calls, and its libraries', go to that malloc before any preloaded library's, so nothing could be tracked" "$err"
    printf '#!%s\n' "$T/ownmalloc" >"$T/own_script"
    chmod +x "$T/own_script"
    run_mt "$MT_ASAN" run -- "$T/own_script"
    expect_eq "run: script with an own-malloc interpreter refused" 1 "$rc"
    for v in nopie pie; do
        run_mt "$MT_ASAN" run -o "$T/ad.%p.mtr" -- "$T/addr_$v"
        expect_eq "run: a program that takes malloc's address ($v) is not refused" "0 address ran" "$rc $out"
    done
    # Section headers pointing outside the file: dynsym's link (the string
    # table's index) far out, then the section table's offset past the end.
    python3 - "$T/ownmalloc" "$T/own_badlink" "$T/own_badshoff" <<'EOF2'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
shoff, = struct.unpack_from('<Q', b, 0x28)
shentsize, shnum = struct.unpack_from('<HH', b, 0x3a)
for k in range(shnum):
    o = shoff + k * shentsize
    if struct.unpack_from('<I', b, o + 4)[0] == 11:  # SHT_DYNSYM
        struct.pack_into('<I', b, o + 40, 0x7fffffff)  # sh_link
open(sys.argv[2], 'wb').write(b)
struct.pack_into('<Q', b, 0x28, len(b) + 4096)  # e_shoff past the end
open(sys.argv[3], 'wb').write(b)
EOF2
    for v in badlink badshoff; do
        chmod +x "$T/own_$v"
        run_mt "$MT_ASAN" run -o "$T/ob.%p.mtr" -- "$T/own_$v"
        expect_eq "run: own malloc, section headers out of bounds ($v): cannot tell, runs it" "0 own malloc ran" "$rc $out"
    done
else
    fail "run: own malloc refused" "cannot build the test programs with cc"
fi

cp "$(type -P true)" "$T/suid_true"
chmod u+s "$T/suid_true"
run_mt "$MT_ASAN" run -- "$T/suid_true"
expect_eq "run: setuid program refused with 1" 1 "$rc"
contains "run: setuid message" "memtrail: $T/suid_true is setuid/setgid: the loader ignores LD_PRELOAD, so nothing could be tracked" "$err"

run_mt "$MT_ASAN" run -- no-such-command-memtrail
expect_eq "run: unknown command exits 127, as shells do" 127 "$rc"
contains "run: unknown command message" "memtrail: no-such-command-memtrail: command not found" "$err"
printf 'x' >"$T/not-executable"; chmod 644 "$T/not-executable"
run_mt "$MT_ASAN" run -- "$T/not-executable"
expect_eq "run: a file that cannot be executed exits 126, as shells do" 126 "$rc"

MEMTRAIL_LIB=$T/no-agent.so run_mt "$MT_ASAN" run -- true
expect_eq "run: missing agent exits 1" 1 "$rc"
contains "run: missing agent message" "agent library $T/no-agent.so not found" "$err"

# --- run: exit status, signals, environment ------------------------------------
cd "$T" || exit 1
run_mt "$MT_ASAN" run -- false
expect_eq "run: exit status 1 passed through" 1 "$rc"
contains "run: says when no report was written" "memtrail: no report from" "$err"
run_mt "$MT_ASAN" run false
expect_eq "run: CMD without -- works" 1 "$rc"
run_mt "$MT_ASAN" run -- sh -c 'exit 7'
expect_eq "run: exit status 7 passed through" 7 "$rc"
run_mt "$MT_ASAN" run -- sh -c 'kill -TERM $$'
expect_eq "run: killed by SIGTERM gives 143" 143 "$rc"
run_mt "$MT_ASAN" run -- sh -c 'kill -INT $PPID; sleep 0.2; exit 3'
expect_eq "run: memtrail ignores SIGINT while waiting" 3 "$rc"

cc -shared -fPIC -o "$T/other.so" "$T/standin.c"
LD_PRELOAD=$T/other.so MEMTRAIL_OPTIONS=on_error=abort \
    "$MT" run -o "$T/a:b\\c.%p.mtr" -- sh -c 'printf "%s\n%s\n%s\n" "$LD_PRELOAD" "$MEMTRAIL_OPTIONS" $$' >"$T/env.out" 2>/dev/null
expect_eq "run: agent prepended to LD_PRELOAD" "$T/standin.so:$T/other.so" "$(sed -n 1p "$T/env.out")"
expect_eq "run: options appended, path escaped, the program's pid last (run_pid)" \
    'on_error=abort:mode=summary:output='"${T//:/\\:}"'/a\:b\\c.%p.mtr:run_pid='"$(sed -n 3p "$T/env.out")" \
    "$(sed -n 2p "$T/env.out")"
run_mt "$MT_ASAN" run -o rel.mtr -- sh -c 'echo "$MEMTRAIL_OPTIONS $$"'
expect_eq "run: relative output made absolute" "mode=summary:output=${T//:/\\:}/rel.mtr:run_pid=${out##* } ${out##* }" "$out"

echo old >"$T/stale.mtr"
run_mt "$MT_ASAN" run -o "$T/stale.mtr" -- true
contains "run: an old file is not taken for this run's report" "is from an earlier run" "$err"

# --- end to end with the real agent ------------------------------------------
unset MEMTRAIL_LIB
if [ -f "$AGENT" ]; then
    run_mt "$MT" run -o "$T/r.%p.mtr" -- true
    expect_eq "e2e: run -- true exits 0" 0 "$rc"
    contains "e2e: run names the report" "memtrail: summary report of" "$err"
    f=$(ls "$T"/r.*.mtr 2>/dev/null | head -n 1)
    if [ -n "$f" ]; then
        pid=${f##*/r.}; pid=${pid%.mtr}
        contains "e2e: stderr names the file" "written to $f" "$err"
        "$MT_ASAN" report --json "$f" >"$T/r.json" 2>"$T/r.err"
        expect_eq "e2e: report --json exits 0" 0 "$?"
        expect_eq "e2e: json pid and complete" "$pid True" \
            "$(json_get "$T/r.json" "str(j['pid']) + ' ' + str(j['complete'])" 2>&1)"
    else
        fail "e2e: report written" "no $T/r.*.mtr after run; stderr: $err"
    fi
else
    fail "e2e: run writes a report" "$AGENT is missing (make $AGENT); the agent is needed for this check"
fi

# The commands' one argument parser (src/cli/parse_options.c), through
# real commands: --opt=VALUE, options anywhere, "--", values that start
# with '-', unknown options, missing values, values given to flags,
# numbers out of range, too few or too many arguments (exit 2, the message,
# and the line pointing to --help), and memtrail run stopping at the
# program's name. The ASan build runs them.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT_ASAN" ] || { fail setup "build first: $MT_ASAN missing"; exit 1; }

cat >"$T/r.mtr" <<'EOF2'
memtrail-report 1
pid 4242
ppid 4241
exe /usr/bin/app
cmdline app
mode summary
start_ns 1763868000000000000
end_ns 1763868001000000000
reason exit
category malloc kind=malloc live_bytes=3145728 live_count=3 peak_bytes=3145728 allocs=5 frees=2
category memtrail kind=overhead live_bytes=54 live_count=3 peak_bytes=54 allocs=5 frees=2
total live_bytes=3145728 live_count=3 peak_bytes=3145728 allocs=5 frees=2
errors double_free=0 bad_canary=0 foreign_free=0
end
EOF2

# usage_error NAME MESSAGE CMD ARGS... (CMD: the command the message names): exit 2, nothing on stdout, and
# stderr exactly "memtrail: MESSAGE" then the pointer to CMD's --help.
usage_error() {
    local name=$1 msg=$2 cmd=${3:+ $3}
    shift 3
    run_mt "$MT_ASAN" "$@"
    expect_eq "$name: exit 2, nothing on stdout" "2 " "$rc $out"
    expect_eq "$name: the message" "memtrail: $msg
Try 'memtrail$cmd --help' for usage." "$err"
}

# --- values: --opt VALUE, --opt=VALUE, options anywhere ------------------------------------
run_mt "$MT_ASAN" report "$T/r.mtr"
kb=$out
contains "scale: KB by default" "live=3072KB" "$kb"
run_mt "$MT_ASAN" report "$T/r.mtr" --scale MB
mb=$out
contains "--scale MB: in MB" "live=3MB" "$mb"
run_mt "$MT_ASAN" report "$T/r.mtr" --scale=MB
expect_eq "--scale=MB is --scale MB" "$mb" "$out"
run_mt "$MT_ASAN" report --scale MB "$T/r.mtr"
expect_eq "an option before the argument is the same option" "$mb" "$out"
run_mt "$MT_ASAN" xe plan --max-memory=4MB --mode=per_cpu --cpus=8 --json
a=$out
run_mt "$MT_ASAN" xe plan --max-memory 4MB --mode per_cpu --cpus 8 --json
expect_eq "xe plan: --opt=VALUE and --opt VALUE give the same plan" "$a" "$out"
expect_eq "xe plan: the values reached the plan" "True" \
    "$(printf '%s' "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["max_memory_bytes"] == 4 << 20 and j["cpus"] == 8 and j["total_regular_buffers"] == 20)')"

# A value the check accepts but too long to pass on whole (leading zeros)
# is refused, not cut into another value for the agent.
run_mt "$MT_ASAN" run --mode trace --trace-buffer "$(printf '0%.0s' $(seq 150))1024KB" -- true
expect_eq "run: an over-long --trace-buffer is refused, not cut" "2 values too long" \
    "$rc $(grep -o 'values too long' "$T/err")"

# --- unknown options, missing values, flags with values ------------------------------------
usage_error "unknown option" "unknown option '--bogus'" report report "$T/r.mtr" --bogus
usage_error "unknown short option" "unknown option '-x'" analyze analyze -x "$T/r.mtr"
usage_error "no abbreviations" "unknown option '--sca'" report report "$T/r.mtr" --sca MB
usage_error "missing value at the end" "option '--scale' needs a value" report report "$T/r.mtr" --scale
usage_error "missing value of --opt=" "--scale: unknown scale '' (accepted: KB, MB, GB)" report report "$T/r.mtr" --scale=
usage_error "a flag takes no value" "option '--json' takes no value" report report "$T/r.mtr" --json=yes
usage_error "the word after an option is its value, even --json" \
    "--scale: unknown scale '--json' (accepted: KB, MB, GB)" report report "$T/r.mtr" --scale --json
usage_error "a value may start with '-'" \
    "--max-memory: '-5' is not a size (a number of KB, or with a unit: B, KB, MB, GB)" "xe plan" xe plan --max-memory -5
usage_error "choice: the accepted ones named" "--format: unknown format 'svg' (accepted: folded, pprof, json)" \
    export export "$T/r.mtr" --format svg
usage_error "run: unknown option, with the hint" "unknown option '--frob' (put the command after '--')" run \
    run --frob -- /bin/true
usage_error "top level: unknown option" "unknown option '--frob'" "" --frob

# --- numbers out of range ------------------------------------------------------------------
usage_error "int: under the range" "bad value '0' for --depth (expected an integer from 1 to 1024)" report \
    report detail "$T/r.mtr" --depth 0
usage_error "int: over the range" "bad value '1025' for --depth (expected an integer from 1 to 1024)" report \
    report detail "$T/r.mtr" --depth=1025
usage_error "int: not a number" "bad value '3x' for --top (expected an integer from 1 to 1000000000)" report \
    report detail "$T/r.mtr" --top 3x
usage_error "int: overflow" "bad value '99999999999999999999' for --top (expected an integer from 0 to 1000000000)" \
    analyze analyze "$T/r.mtr" --top 99999999999999999999
usage_error "int: negative" "bad value '-1' for --top (expected an integer from 0 to 1000000000)" analyze \
    analyze "$T/r.mtr" --top -1
usage_error "int with a noun" "--timeout: '3601' is not a number of seconds from 1 to 3600" query \
    query 1 --timeout 3601
usage_error "int with a noun (xe)" "--cpus: '0' is not a count from 1 to 65536" "xe plan" \
    xe plan --max-memory 576 --cpus 0
# run's flags that become agent options: the agent's table gives the range.
usage_error "run --depth 65: the option table's range" "--depth: bad value '65' (accepted: 1 to 64 frames)" run \
    run --mode detail --depth 65 -- /bin/true
usage_error "run --mode off: not a mode of run" "--mode: unknown mode 'off' (accepted: summary, detail, sample, trace)" run \
    run --mode off -- /bin/true
usage_error "run --unwind: the table's choices" "--unwind: bad value 'dwarf' (accepted: auto, cfi, libunwind, fp)" run \
    run --mode detail --unwind=dwarf -- /bin/true

# --- arguments: too few, too many, "--", "-" -----------------------------------------------
usage_error "too many arguments" "too many arguments ('$T/r.mtr'; expected one TRACE)" analyze \
    analyze "$T/r.mtr" "$T/r.mtr"
usage_error "too few arguments" "missing the NEW report" diff diff "$T/r.mtr"
usage_error "no argument" "missing the report FILE" report report --json
usage_error "xe plan takes none" "unexpected argument 'extra'" "xe plan" xe plan extra --max-memory 576
usage_error "options takes none" "unknown argument 'x'" options options x
cp "$T/r.mtr" "$T/--json"
run_mt sh -c 'cd "$1" && "$2" report -- --json' sh "$T" "$MT_ASAN"
expect_eq "--: what follows is an argument (a file named --json)" "0 $kb" "$rc $out"
run_mt sh -c '"$1" report --scale MB - <"$2"' sh "$MT_ASAN" "$T/r.mtr"
expect_eq "-: an argument (stdin), options around it" "0 $mb" "$rc $out"

# --- help ----------------------------------------------------------------------------------
run_mt "$MT_ASAN" report "$T/r.mtr" --scale MB --help
expect_match "--help after other words: the help, exit 0" "^0 usage: memtrail report " "$rc $out"
expect_eq "--help: nothing on stderr" "" "$err"
run_mt "$MT_ASAN" diff -h
expect_match "-h: the help" "^0 usage: memtrail diff " "$rc $out"
# The help lists exactly what the parser accepts: each option of --help is
# accepted (a usage error, if any, is not "unknown option").
for cmd in report diff query export analyze sessions "xe plan" run options; do
    for o in $("$MT_ASAN" $cmd --help | awk '/^Options:/ { on = 1; next } on && /^$/ { exit } on' |
               grep -oE '^  (-[a-z], )?--[a-z-]+' | grep -oE -- '--[a-z-]+' | grep -vx -- --help); do
        run_mt "$MT_ASAN" $cmd "$o" x y z
        case $err in *"unknown option"*) fail "help: $cmd $o is accepted" "$err" ;; *) pass "help: $cmd $o is accepted" ;; esac
    done
done

# run's flags that become agent options: help, range and default come from
# the agent's option table, which memtrail options prints.
help=$("$MT_ASAN" run --help | tr -s ' \n' '  ')
for key in depth trace_buffer; do
    values=$("$MT_ASAN" options | awk -v k="$key" '$0 == k { on = 1; next } on && /values:/ { sub(/^ *values: /, ""); v = $0 } on && /default:/ { sub(/^ *default: /, ""); print v "; default " $0; exit }')
    contains "run --help: --${key/_/-} from the option table" "($values)" "$help"
done
for u in auto cfi libunwind fp; do contains "run --help: --unwind lists $u" " $u (" "$help"; done
contains "run --help: --unwind's default" "default auto." "$help"
case $help in *" off ("*) fail "run --help: --mode does not offer off" "it does" ;; *) pass "run --help: --mode does not offer off" ;; esac

# --- memtrail run stops at the program's name ----------------------------------------------
if [ -f "$AGENT" ]; then
    run_mt "$MT" run -o "$T/a.%p.mtr" /bin/echo --mode trace -- --help
    expect_eq "run: the program's arguments are its own" "0 --mode trace -- --help" "$rc $out"
    run_mt "$MT" run -o "$T/b.%p.mtr" -- /bin/echo -o x
    expect_eq "run: after --, the same" "0 -o x" "$rc $out"
    for form in "-o$T/c.mtr" "--output=$T/c.mtr"; do
        rm -f "$T/c.mtr"
        run_mt "$MT" run "$form" /bin/true
        expect_eq "run $form: the report is written there" "0 yes" "$rc $([ -s "$T/c.mtr" ] && echo yes)"
    done
    rm -f "$T"/a.*.mtr "$T"/b.*.mtr
else
    fail "run: stops at the program's name" "$AGENT missing (make)"
fi

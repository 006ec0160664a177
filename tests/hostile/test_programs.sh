# Hostile programs under the agent: every program in tests/hostile/ (fd
# games, signal games, resource limits, thread and fork storms, the rest of
# the malloc API, other allocators preloaded beside the agent, Rust and cgo)
# is run bare, then under LD_PRELOAD of the agent in each mode (summary,
# detail, sample at a 64-byte rate so that most blocks are sampled, trace), and each agent run must match the bare one: the same
# stdout, the same exit status, no crash, no hang (every run is killed after
# 60 s). In summary mode the report must exist and `memtrail report` must
# read it. One PASS/FAIL line per (program, mode); "SKIP name: why" where
# what a case needs is not installed.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }
H=$BUILD/tests/hostile
MODES="summary detail sample trace"
# The options of mode $1: sample mode samples about every 64 bytes, so its
# stack walks run in the programs' signal handlers, threads and forks too.
mode_opts() { if [ "$1" = sample ]; then echo "mode=sample:sample_rate=64"; else echo "mode=$1"; fi; }

skip() { echo "SKIP $1: $2"; }

# run_case PREFIX PRELOAD OPTIONS CMD...: runs CMD under `timeout -s KILL
# 60` with exactly that LD_PRELOAD and MEMTRAIL_OPTIONS (none when empty),
# stdin from /dev/null; leaves PREFIX.out, .err, .rc and .pid (the pid CMD
# ran as: the shell records its own pid, then execs env, which execs CMD).
run_case() {
    local pre=$1 preload=$2 opts=$3; shift 3
    local envs=()
    [ -n "$preload" ] && envs+=("LD_PRELOAD=$preload")
    [ -n "$opts" ] && envs+=("MEMTRAIL_OPTIONS=$opts")
    timeout -s KILL 60 sh -c 'echo $$ >"$0"; exec "$@"' "$pre.pid" \
        env -u LD_PRELOAD -u MEMTRAIL_OPTIONS "${envs[@]+"${envs[@]}"}" "$@" \
        >"$pre.out" 2>"$pre.err" </dev/null
    echo $? >"$pre.rc"
}

# describe_rc RC: a word on an exit status.
describe_rc() {
    case $1 in
        137) echo "137 (SIGKILL: hung past the 60 s timeout, or killed)" ;;
        12[89]|1[3-9][0-9]|2[0-5][0-9]) echo "$1 (signal $(($1 - 128)): $(kill -l $(($1 - 128)) 2>/dev/null))" ;;
        *) echo "$1" ;;
    esac
}

# compare NAME BARE RUN MODE [NOTE]: the run at prefix RUN against the bare
# run at prefix BARE; in summary mode the run's report (output pattern
# RUN.%p.mtr) must exist and be read by `memtrail report`. NOTE is added to a
# failure's message.
compare() {
    local name=$1 bare=$2 run=$3 mode=$4 note=${5:-}
    local why=() brc rrc
    brc=$(cat "$bare.rc"); rrc=$(cat "$run.rc")
    [ "$brc" = "$rrc" ] || why+=("exit status $(describe_rc "$rrc"), bare $(describe_rc "$brc")")
    if ! cmp -s "$bare.out" "$run.out"; then
        why+=("stdout differs from the bare run's: $(diff "$bare.out" "$run.out" | head -n 6 | tr '\n' '|')")
    fi
    if [ "$mode" = summary ]; then
        local pid report
        pid=$(cat "$run.pid" 2>/dev/null)
        report=$run.$pid.mtr
        if [ ! -s "$report" ]; then
            why+=("no report $report")
        elif ! "$MT" report "$report" >"$run.report" 2>&1; then
            why+=("memtrail report cannot read $report: $(head -c 300 "$run.report")")
        fi
    fi
    if [ "${#why[@]}" -eq 0 ]; then
        pass "$name"
    else
        local msg
        msg=$(printf '%s; ' "${why[@]}")
        [ -s "$run.err" ] && msg+="stderr: $(tail -n 4 "$run.err" | tr '\n' '|' | head -c 600)"
        [ -n "$note" ] && msg+=" [$note]"
        fail "$name" "$msg"
    fi
}

# out_for MODE PREFIX: the agent's output option for a mode.
out_for() {
    if [ "$1" = trace ]; then echo "$2.%p.mtt"; else echo "$2.%p.mtr"; fi
}

# hostile NAME CMD...: bare once, then every mode, one line per mode.
hostile() {
    local name=$1; shift
    local note=
    run_case "$T/$name.bare" "" "" "$@"
    local m
    for m in $MODES; do
        run_case "$T/$name.$m" "$AGENT" "$(mode_opts "$m"):output=$(out_for "$m" "$T/$name.$m")" "$@"
        local n=$note
        [ "$m" = trace ] || n=
        compare "hostile: $name [$m]" "$T/$name.bare" "$T/$name.$m" "$m" "$n"
    done
}

# --- the C programs ---------------------------------------------------------
hostile closefds "$H/closefds" "$T/closefds.scratch"
hostile dup2err-restore "$H/dup2err" restore
hostile dup2err-file "$H/dup2err" file "$T/dup2err.scratch"
hostile dup2err-brokenpipe "$H/dup2err" brokenpipe
hostile sigblock "$H/sigblock"
hostile segv "$H/segv"
hostile limits-nofile "$H/limits" nofile
hostile limits-as "$H/limits" as
hostile limits-as-headroom "$H/limits" as-headroom
hostile threads2000 "$H/threads2000"
hostile cancel "$H/cancel"
hostile forkthreads "$H/forkthreads"
hostile sigalloc "$H/sigalloc"
hostile mallocapi "$H/mallocapi"

# --- Rust and cgo (built by the Makefile when rustc / go are installed) -----
# lang_case NAME TOOL: runs $H/NAME, or skips when TOOL is not installed.
lang_case() {
    local name=$1 tool=$2 m
    if [ -x "$H/$name" ]; then
        hostile "$name" "$H/$name"
    elif ! command -v "$tool" >/dev/null 2>&1; then
        for m in $MODES; do skip "hostile: $name [$m]" "$tool is not installed"; done
    else
        fail "hostile: $name" "$tool is installed but $H/$name was not built (make tests)"
    fi
}
lang_case rust rustc

# Go leaves by a raw exit_group, which only memtrail run (the program's
# parent) can hold for the agent's report at exit: cgo runs through it.
if [ -x "$H/cgo" ]; then
    run_case "$T/cgo.bare" "" "" "$H/cgo"
    for m in $MODES; do
        ext=mtr; [ "$m" = trace ] && ext=mtt
        run_case "$T/cgo.$m" "" "" "$MT" run --mode "$m" -o "$T/cgo.$m.%p.$ext" -- "$H/cgo"
        f=$(ls "$T"/cgo."$m".[0-9]*."$ext" 2>/dev/null | head -1)
        if [ -n "$f" ]; then
            f=${f#"$T/cgo.$m."}; echo "${f%."$ext"}" >"$T/cgo.$m.pid"
        fi
        compare "hostile: cgo through memtrail run [$m]" "$T/cgo.bare" "$T/cgo.$m" "$m"
        if [ "$m" = trace ]; then
            if [ -n "$f" ] && "$MT" analyze --json "$T/cgo.trace.${f%."$ext"}.mtt" >"$T/cgo.a.json" 2>/dev/null &&
                [ "$(json_get "$T/cgo.a.json" "j['complete'] and j['allocs'] > 1000")" = True ]; then
                pass "hostile: cgo through memtrail run [trace]: a complete trace with its C allocations"
            else
                fail "hostile: cgo through memtrail run [trace]" "no complete trace with the C allocations: $(ls "$T" | grep cgo.trace)"
            fi
        fi
    done
elif ! command -v go >/dev/null 2>&1; then
    for m in $MODES; do skip "hostile: cgo [$m]" "go is not installed"; done
else
    fail "hostile: cgo" "go is installed but $H/cgo was not built (make tests)"
fi

# --- other allocators preloaded beside the agent, in both orders ------------
# Each program runs with the allocator alone (the reference), then with the
# agent before it and after it in LD_PRELOAD, in every mode.
LIBDIR=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
first_of() { local f; for f in "$@"; do [ -e "$f" ] && { echo "$f"; return; }; done; }
allocator_case() { # LABEL LIB NAME CMD...
    local label=$1 lib=$2 name=$3; shift 3
    local base=$T/alloc.$label.$name m order preload
    run_case "$base.ref" "$lib" "" "$@"
    for order in agent-first agent-second; do
        if [ "$order" = agent-first ]; then preload="$AGENT $lib"; else preload="$lib $AGENT"; fi
        for m in $MODES; do
            run_case "$base.$order.$m" "$preload" "$(mode_opts "$m"):output=$(out_for "$m" "$base.$order.$m")" "$@"
            if [ "$order" = agent-first ]; then
                compare "allocators: $name with $label, $order [$m]" "$base.ref" "$base.$order.$m" "$m"
            else
                # The allocator before the agent gets every malloc call: the
                # agent must run untracked and say why (no report).
                compare "allocators: $name with $label, $order [$m]" "$base.ref" "$base.$order.$m" none
                contains "allocators: $name with $label, $order [$m]: says it runs untracked" \
                    "preloaded before the agent" "$(cat "$base.$order.$m.err")"
            fi
        done
    done
}
for spec in "jemalloc:$LIBDIR/libjemalloc.so.2" \
            "tcmalloc:$(first_of "$LIBDIR/libtcmalloc_minimal.so.4" "$LIBDIR/libtcmalloc.so.4")" \
            "mimalloc:$LIBDIR/libmimalloc.so.2"; do
    label=${spec%%:*} lib=${spec#*:}
    if [ -z "$lib" ] || [ ! -e "$lib" ]; then
        skip "allocators: $label" "not installed (${lib:-no libtcmalloc_minimal.so.4 or libtcmalloc.so.4 in $LIBDIR})"
        continue
    fi
    allocator_case "$label" "$lib" allocprog "$H/allocprog"
    if command -v sqlite3 >/dev/null 2>&1; then
        allocator_case "$label" "$lib" sqlite3 sqlite3 :memory: 'select 1' \
            "select count(*), sum(length(x)) from (with recursive c(i) as (select 1 union all select i + 1 from c where i < 20000) select printf('%0100d', i) as x from c)"
    else
        skip "allocators: sqlite3 with $label" "sqlite3 is not installed"
    fi
done

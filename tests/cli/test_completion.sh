# The bash completion the build makes (build/completion/memtrail, from the
# commands' --help by scripts/helpdoc.py), run by bash itself: sourced, then
# its function called with COMP_WORDS/COMP_CWORD set as readline sets them,
# COMPREPLY compared with what `memtrail --help` and each `memtrail CMD
# --help` list (read here from the help text, not from the generator), the
# pids of tracked processes (a running tests/agent/topprog), and files.
source "$(dirname "$0")/../lib.sh"
C=$BUILD/completion/memtrail
[ -x "$MT" ] && [ -f "$C" ] && [ -x "$TBIN/topprog" ] || { fail setup "build first: $MT / $C / $TBIN/topprog missing"; exit 1; }
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
unset XDG_RUNTIME_DIR

# shellcheck source=/dev/null
source "$C"
expect_eq "completion: sourcing it registers _memtrail for memtrail" "complete -F _memtrail memtrail" "$(complete -p memtrail 2>&1)"

# comp WORD...: COMPREPLY for the command line WORD... (the last word is the
# one being completed), sorted, on one line.
comp() {
    COMP_WORDS=(memtrail "$@")
    COMP_CWORD=$#
    COMP_LINE="memtrail $*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _memtrail
    printf '%s\n' "${COMPREPLY[@]}" | grep -v '^$' | sort | tr '\n' ' ' | sed 's/ $//'
}
sorted() { printf '%s\n' "$@" | grep -v '^$' | sort | tr '\n' ' ' | sed 's/ $//'; }
commands() { printf '%s\n' "$1" | awk '/^Commands:$/ { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }'; }
options() {
    printf '%s\n' "$1" | awk '/^Options:$/ { on = 1; next } on && /^$/ { exit } on && /^  -/ { print }' |
        grep -oE '^  (-[A-Za-z], )?--[a-z0-9-]+' | grep -oE -- '-[A-Za-z]\b|--[a-z0-9-]+'
}

cmds=$(commands "$("$MT" --help)")
expect_eq "completion: memtrail <TAB> = the commands of memtrail --help, and help" "$(sorted $cmds help)" "$(comp "")"
expect_eq "completion: memtrail - <TAB> = its own options" "$(sorted $(options "$("$MT" --help)"))" "$(comp -)"
expect_eq "completion: memtrail to<TAB> = top" "top" "$(comp to)"
expect_eq "completion: memtrail help q<TAB> = query" "query" "$(comp help q)"
for c in $cmds; do
    help=$("$MT" "$c" --help)
    expect_eq "completion: memtrail $c -<TAB> = the options of 'memtrail $c --help'" \
        "$(sorted $(options "$help"))" "$(comp "$c" -)"
    subs=$(commands "$help")
    [ -n "$subs" ] && expect_eq "completion: memtrail $c <TAB> = its subcommands" "$(sorted $subs)" "$(comp "$c" "")"
    for s in $subs; do
        expect_eq "completion: memtrail $c $s -<TAB> = the options of 'memtrail $c $s --help'" \
            "$(sorted $(options "$("$MT" "$c" "$s" --help)"))" "$(comp "$c" "$s" -)"
    done
done

# Option values: the choices the usage gives; none for a number.
expect_eq "completion: top --sort <TAB>" "allocs live peak" "$(comp top --sort "")"
expect_eq "completion: run --mode <TAB>" "detail sample summary trace" "$(comp run --mode "")"
expect_eq "completion: report --scale <TAB>" "GB KB MB" "$(comp report --scale "")"
expect_eq "completion: xe plan --mode <TAB>" "none per_cpu per_node" "$(comp xe plan --mode "")"
expect_eq "completion: top --top <TAB>: a number, nothing offered" "" "$(comp top --top "")"

# Files where a command takes them.
mkdir -p "$T/files/sub" && cd "$T/files" && touch a.mtr b.mtt
expect_eq "completion: report <TAB>: its requests and the files here" "a.mtr b.mtt detail sub summary" "$(comp report "")"
expect_eq "completion: diff a.mtr <TAB>: files" "a.mtr b.mtt sub" "$(comp diff a.mtr "")"
expect_eq "completion: report --json a.mtr b<TAB>: more files (FILE...)" "b.mtt" "$(comp report --json a.mtr b)"
expect_eq "completion: run -o <TAB>: files" "a.mtr b.mtt sub" "$(comp run -o "")"
expect_eq "completion: run ls -<TAB>: the program's own words, none of memtrail's options" "" "$(comp run ls -)"
cd "$T"

# Pids: those of tracked processes, where a command takes a PID.
D=$T/prog; mkdir -p "$D"
MEMTRAIL_OPTIONS="output=$T/prog.%p.mtr" LD_PRELOAD=$AGENT "$TBIN/topprog" "$D" >/dev/null 2>&1 &
pid=$!; pids+=("$pid")
for ((i = 0; i < 1500; i++)); do [ -e "$D/ready" ] && break; sleep 0.02; done
for c in top query sessions info; do
    got=" $(comp "$c" "") "
    if [[ $got == *" $pid "* ]] && [[ $got != *" $$ "* ]]; then pass "completion: $c <TAB> offers the tracked process's pid, not an untracked one"
    else fail "completion: $c <TAB> offers the tracked pid $pid (not $$)" "got:$got"; fi
done
expect_eq "completion: query PID <TAB> = its requests" "baseline detail diff info metrics start stop summary" \
    "$(comp query "$pid" "")"
expect_eq "completion: query PID start <TAB>" "detail sample trace" "$(comp query "$pid" start "")"
expect_eq "completion: query --timeout 3 PID <TAB>: an option's value is not a positional word" \
    "baseline detail diff info metrics start stop summary" "$(comp query --timeout 3 "$pid" "")"
touch "$D/go" "$D/stop"
wait "$pid" 2>/dev/null

# The check can fail: a completion that lost an option is caught.
sed 's/ --interval / /' "$C" >"$T/stale"
got=$(bash -c 'source "$1"; COMP_WORDS=(memtrail top -); COMP_CWORD=2; _memtrail; printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " " | sed "s/ $//"' _ "$T/stale")
if [ "$got" != "$(sorted $(options "$("$MT" top --help)"))" ]; then pass "completion: a script without --interval is caught as drifted"
else fail "completion: a script without --interval is caught as drifted" "the comparison did not see it: $got"; fi

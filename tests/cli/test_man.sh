# The man pages the build makes (build/man: scripts/helpdoc.py from the
# commands' --help and docs/man/*.scd, rendered by scdoc): a page for every
# command `memtrail --help` lists, memtrail(1) and libmemtrail(3); each
# renders with man(1) without a warning; every option a command's --help
# (and its subcommands') lists appears in its page, so they cannot drift;
# libmemtrail(3) names every function of include/memtrail*.h. The lists
# are read here from the help text itself, not from the generator.
source "$(dirname "$0")/../lib.sh"
M=$BUILD/man
[ -x "$MT" ] && [ -d "$M" ] || { fail setup "build first: $MT / $M missing"; exit 1; }

# commands HELP: the names of a "Commands:" section.
commands() { printf '%s\n' "$1" | awk '/^Commands:$/ { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }'; }
# options HELP: every option an "Options:" line starts with (-o and --output of "-o, --output FILE").
options() {
    printf '%s\n' "$1" | awk '/^Options:$/ { on = 1; next } on && /^$/ { exit } on && /^  -/ { print }' |
        grep -oE '^  (-[A-Za-z], )?--[a-z0-9-]+' | grep -oE -- '-[A-Za-z]\b|--[a-z0-9-]+'
}
# render PAGE: the page as man shows it, hyphenation off and words broken
# after a hyphen (memtrail-\nquery(1)) joined again; its warnings in $T/warn.
render() (
    set -o pipefail
    if command -v man >/dev/null; then
        MANWIDTH=100 MANROFFOPT=-rHY=0 man --warnings -E UTF-8 -l "$1" 2>"$T/warn"
    else
        groff -man -Tutf8 -rHY=0 -ww "$1" 2>"$T/warn"
    fi | sed -E ':a;/[a-z]-$/{N;s/-\n[[:space:]]*/-/;ba}'
)
# missing_options PAGE_TEXT HELP: the options of HELP not in PAGE_TEXT.
missing_options() {
    local o
    for o in $(options "$2"); do
        printf '%s\n' "$1" | grep -qE -- "(^|[^a-z-])$o([^a-z0-9-]|$)" || printf '%s ' "$o"
    done
}

command -v man >/dev/null || command -v groff >/dev/null || { fail setup "neither man nor groff (scripts/deps.sh installs man-db)"; exit 1; }
top_help=$("$MT" --help)
cmds=$(commands "$top_help")
expect_match "memtrail --help lists the commands (top among them)" "top" "$(echo $cmds)"
for page in "$M/memtrail.1" "$M/libmemtrail.3" $(for c in $cmds; do echo "$M/memtrail-$c.1"; done); do
    name=${page##*/}
    if [ ! -f "$page" ]; then
        fail "man: $name exists" "no $page"
        continue
    fi
    text=$(render "$page")
    expect_eq "man: $name renders without a warning" "0:" "$?:$(cat "$T/warn")"
done

main_page=$(render "$M/memtrail.1")
for c in $cmds; do
    [ -f "$M/memtrail-$c.1" ] || continue
    page=$(render "$M/memtrail-$c.1")
    help=$("$MT" "$c" --help)
    summary=$(printf '%s\n' "$top_help" | awk -v c="$c" '/^Commands:$/ { on = 1; next } on && $1 == c { $1 = ""; sub(/^ /, ""); print; exit }')
    contains "man memtrail-$c: NAME is the command's summary" "memtrail $c - $summary" "$(printf '%s\n' "$page" | tr -s ' \n' '  ')"
    expect_eq "man memtrail-$c: every option of 'memtrail $c --help' is in the page" "" "$(missing_options "$page" "$help")"
    for s in $(commands "$help"); do
        expect_eq "man memtrail-$c: every option of 'memtrail $c $s --help' is in the page" "" \
            "$(missing_options "$page" "$("$MT" "$c" "$s" --help)")"
    done
    contains "man memtrail(1) lists memtrail-$c(1)" "memtrail-$c(1)" "$main_page"
done
expect_eq "man memtrail(1): its own options (--version, --help) are in it" "" "$(missing_options "$main_page" "$top_help")"

# The checks themselves: a page with a roff mistake warns; a page that lost
# an option is caught.
printf '.TH X 1\n.SH NAME\nx \\- \\fBbold\n.nosuchrequest\n' >"$T/bad.1"
render "$T/bad.1" >/dev/null
expect_match "man: a page with a roff mistake does warn" "nosuchrequest|warning" "$(cat "$T/warn")"
help=$("$MT" top --help)
stale=$(render "$M/memtrail-top.1" | grep -v -- '--interval')
expect_eq "man: a page without --interval is caught as drifted" "--interval " "$(missing_options "$stale" "$help")"

lib=$(render "$M/libmemtrail.3")
missing=""
for f in $(grep -ohE '\bmt_[a-z_]+\(' "$MT_ROOT"/include/memtrail*.h | tr -d '(' | sort -u); do
    printf '%s\n' "$lib" | grep -q "\b$f\b" || missing+="$f "
done
expect_eq "man libmemtrail(3): names every function of include/memtrail*.h" "" "$missing"
contains "man libmemtrail(3): how to link" "pkg-config --cflags --libs memtrail" "$lib"

# Every command's --help and its section of docs/cli.md name the same
# options: the synopsis (usage lines) is the same text, and the options
# --help lists are those the section's synopsis and option tables name.
# --help is generated from the commands' option declarations
# (src/cli/parse_options.h), so this keeps the docs true to the code.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] || { fail setup "build first: $MT missing"; exit 1; }
DOC=$MT_ROOT/docs/cli.md

# The section "## `memtrail CMD`" of docs/cli.md, up to the next "## ".
section() { awk -v h="## \`memtrail $1\`" '$0 == h { on = 1; next } on && /^## / { exit } on' "$DOC"; }
# Its synopsis: the first fenced block.
doc_usage() { section "$1" | awk '/^```/ { if (on) exit; on = 1; next } on'; }
# The usage lines of --help, without "usage:".
help_usage() { "$MT" $1 --help | awk 'NR == 1 || (on && /^ /) { on = 1; print; next } { exit }' | sed 's/^usage://'; }
squash() { tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }
# Option names (--long and -s) in text, one a line, sorted, without -h/--help.
names() { grep -oE -- '(^|[^A-Za-z0-9_-])--?[A-Za-z][A-Za-z-]*' | sed 's/^[^-]*//' | grep -vxE -- '-h|--help' | sort -u; }
# The option lines of --help (under "Options:"), each cut to its names
# ("-o, --output FILE" -> "-o, --output").
help_lines() { "$MT" $1 --help | awk '/^Options:/ { on = 1; next } on && /^$/ { exit } on' | grep -E '^  -' | sed -E 's/^  //; s/  .*//; s/ [^-][^ ]*$//' | grep -vx -- '-h, --help'; }
help_options() { help_lines "$1" | names; }
# The options the section's tables name: the first cell of each row.
doc_table_options() { section "$1" | grep -E '^\| *`?-' | cut -d'|' -f2 | names; }

commands=(run report diff query top exporter info html export analyze sessions options "xe plan" "refset record" "refset report")
for cmd in "${commands[@]}"; do
    [ -n "$(section "$cmd")" ] || { fail "docs: $cmd" "no section '## \`memtrail $cmd\`' in docs/cli.md"; continue; }
    expect_eq "$cmd: the synopsis of --help is docs/cli.md's" "$(doc_usage "$cmd" | squash)" "$(help_usage "$cmd" | squash)"
    h=$(help_options "$cmd")
    [ -n "$h" ] || [ "$cmd" = xe ] || fail "$cmd: --help lists options" "none found"
    # The synopsis names each option by one of its names (-o for -o, --output).
    syn=$(doc_usage "$cmd" | names)
    missing=$(help_lines "$cmd" | while read -r line; do
        printf '%s\n' "$line" | names | grep -qxF -- "$syn" || echo "$line"; done)
    expect_eq "$cmd: every option of --help is in the docs' synopsis" "" "$missing"
    expect_eq "$cmd: every option of the docs' synopsis is in --help" "" "$(printf '%s\n' "$syn" | grep -vxF -- "$h")"
    expect_eq "$cmd: the options of --help are those of the docs' option tables" "$(doc_table_options "$cmd")" "$h"
done

# Every command of memtrail --help is checked here (and has a section).
listed=$("$MT" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' | sort)
expect_eq "every command of memtrail --help is compared" "$(printf '%s\n' "${commands[@]}" | sed 's/ .*$//' | sort -u)" "$listed"

# The checks can fail: docs without analyze's --top row, or with another
# synopsis, differ from --help.
sed '/^| `--top N` | stacks per list/d; s/^memtrail analyze TRACE \[--json\]/memtrail analyze TRACE [--jsn]/' "$DOC" >"$T/cli.md"
DOC=$T/cli.md
[ "$(doc_table_options analyze)" != "$(help_options analyze)" ] && pass "check: a row the docs lack is seen" \
    || fail "check: a row the docs lack is seen" "not seen"
[ "$(doc_usage analyze | squash)" != "$(help_usage analyze | squash)" ] && pass "check: another synopsis is seen" \
    || fail "check: another synopsis is seen" "not seen"

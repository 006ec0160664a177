# The agent's options come from one table (src/common/options_table.c):
# the README's table is what `memtrail options --markdown` prints from it;
# the agent accepts every key at its documented default and names exactly
# the table's keys when it refuses one; memtrail run's flags that become
# options are checked the same way.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }

readme=$(sed -n '/^<!-- generated: memtrail options --markdown/,/^$/p' "$MT_ROOT/README.md" | sed '1d;$d')
expect_eq "README's options table is memtrail options --markdown" "$("$MT" options --markdown)" "$readme"

keys=$("$MT" options --markdown | sed -n 's/^| `\([a-z_]*\)` |.*/\1/p')
n=0
while IFS='|' read -r _ key _ _ dflt _; do
    key=$(echo "$key" | tr -d ' `'); dflt=$(echo "$dflt" | sed 's/^ *`//; s/` *$//')
    [ -n "$key" ] && [ "$key" != key ] && [ "$key" != "---" ] || continue
    [ "$key" = output ] && dflt="$T/default.%p.mtr"
    n=$((n + 1))
    err=$(MEMTRAIL_OPTIONS="output=$T/o.%p.mtr:$key=$dflt" LD_PRELOAD=$AGENT /bin/true 2>&1)
    expect_eq "the agent takes $key=$dflt, its documented default" "" "$err"
done < <("$MT" options --markdown | tail -n +3)
[ "$n" -ge 13 ] && pass "options: $n keys checked" || fail "options: keys" "only $n"

err=$(MEMTRAIL_OPTIONS="output=$T/o.mtr:colour=red" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_eq "the agent's unknown-key error lists the table's keys" \
    "memtrail: MEMTRAIL_OPTIONS: unknown key 'colour' (accepted: $(echo $keys | sed 's/ /, /g')); running untracked" "$err"

run_mt "$MT" run --trace-buffer 100KB --mode trace -o "$T/t.mtt" -- /bin/true
expect_eq "run --trace-buffer 100KB: a usage error from the table's range" \
    "2 memtrail: --trace-buffer: bad value '100KB' (accepted: a size from 192KB to 64GB, a number of MB or with a unit)" \
    "$rc $(echo "$err" | head -1)"

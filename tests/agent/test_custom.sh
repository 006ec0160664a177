# A program's own allocator reported through memtrail_alloc.h
# (mt_alloc_report, mt_free_report, mt_realloc_report): a pool allocator
# that never calls malloc, exact against its own ledger in summary, detail
# and trace modes; and the header's weak wrappers in a program linked with
# nothing of memtrail's, with and without the agent.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }

figures() { # MTR CATEGORY
    "$MT" report --json "$1" >"$T/c.json" &&
        json_get "$T/c.json" "' '.join(str(c[k]) for c in j['categories'] if c['name']=='$2' for k in ('live_bytes','live_count','peak_bytes','allocs','frees','reallocs'))"
}
for mode in summary detail; do
    MEMTRAIL_OPTIONS="mode=$mode:output=$T/cp.$mode.mtr" LD_PRELOAD=$AGENT "$TBIN/custompool" "$T/cp.ledger"
    expect_eq "custom allocator, $mode: runs" 0 "$?"
    for cat in pool custom; do
        want=$(awk -v c=$cat '$1 == c {print $2, $3, $4, $5, $6, $7}' "$T/cp.ledger")
        expect_eq "custom allocator, $mode: category $cat to the byte (live, count, peak, allocs, frees, reallocs)" \
            "$want" "$(figures "$T/cp.$mode.mtr" $cat)"
    done
done
"$MT" report detail "$T/cp.detail.mtr" >"$T/cp.detail.txt" 2>&1
contains "custom allocator, detail: the stacks go through the pool's own function" "pool_get" "$(cat "$T/cp.detail.txt")"

MEMTRAIL_OPTIONS="mode=trace:output=$T/cp.mtt" LD_PRELOAD=$AGENT "$TBIN/custompool" "$T/cp.ledger" 2>/dev/null
"$MT" analyze --json "$T/cp.mtt" >"$T/cp.json"
want=$(awk '{b += $2; n += $3} END {print b, n}' "$T/cp.ledger")
expect_eq "custom allocator, trace: live at the end is the pool's and the untagged blocks' (bytes, blocks), reallocs 500" \
    "$want 500" "$(json_get "$T/cp.json" "'%d %d %d' % (j['live_bytes'], j['live_count'], j['reallocs'])")"

# The weak wrappers: nothing linked.
cat >"$T/weak.c" <<'C'
#include <stdio.h>
#include "memtrail_alloc.h"
static char pool[4096];
int main(void) { MT_ALLOC(pool, 1000); MT_REALLOC(pool, pool + 2048, 1500); MT_ALLOC(pool + 1024, 24); MT_FREE(pool + 1024); puts("weak ok"); return 0; }
C
gcc -I"$MT_ROOT/include" -o "$T/weak" "$T/weak.c"
expect_eq "memtrail_alloc.h: links with nothing and runs without the agent" "weak ok" "$("$T/weak")"
expect_eq "memtrail_alloc.h: nothing of memtrail's is linked" "" "$(ldd "$T/weak" | grep memtrail)"
MEMTRAIL_OPTIONS="output=$T/weak.mtr" LD_PRELOAD=$AGENT "$T/weak" >/dev/null
expect_eq "memtrail_alloc.h: with the agent, the untagged blocks in 'custom' (live, count, peak, allocs, frees, reallocs)" \
    "1500 1 1524 2 1 1" "$(figures "$T/weak.mtr" custom)"

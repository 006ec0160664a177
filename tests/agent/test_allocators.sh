# The agent over other allocators: Debian's jemalloc, tcmalloc and mimalloc
# preloaded after the agent (counted exactly, their mappings as heap, no
# false heap errors) and before it (no hang, the same output as without
# the agent, a message saying why nothing is tracked); jemalloc's own API
# (mallocx and friends) counted to the byte; interposers before the agent
# that forward to the next malloc, and a program with a malloc of its own:
# no hang, the program's own output; and Redis, which links
# jemalloc, under redis-benchmark and a background save: no error line,
# and the agent's live bytes move exactly as Redis's own used_memory.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }
LIBDIR=/usr/lib/x86_64-linux-gnu

# ledger_eq NAME MTR LEDGER CATEGORY: the report's figures for CATEGORY are
# the ledger's, to the byte.
ledger_eq() {
    "$MT" report --json "$2" >"$T/l.json" || { fail "$1" "cannot read $2"; return; }
    local line; line=($(grep "^$4 " "$3"))
    expect_eq "$1" "live=${line[1]} count=${line[2]} peak=${line[3]} allocs=${line[4]} frees=${line[5]} reallocs=${line[6]}" \
        "$(json_get "$T/l.json" "' '.join('%s=%s' % (k, c[f]) for c in j['categories'] if c['name']=='$4' for k, f in (('live','live_bytes'),('count','live_count'),('peak','peak_bytes'),('allocs','allocs'),('frees','frees'),('reallocs','reallocs')))")"
}
errors_zero() { # NAME MTR
    "$MT" report --json "$2" >"$T/e.json"
    expect_eq "$1" "0 0 0" "$(json_get "$T/e.json" "'%d %d %d' % (j['errors']['double_free'], j['errors']['bad_canary'], j['errors']['foreign_free'])")"
}

bare=$(timeout -s KILL 60 "$TBIN/plainmix")
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
    if [ ! -f "$LIBDIR/$lib" ]; then fail "$lib" "not installed (scripts/deps.sh installs it)"; continue; fi
    # After the agent: it forwards to the allocator and counts everything.
    for mode in summary detail trace; do
        ext=mtr; [ $mode = trace ] && ext=mtt
        out=$(timeout -s KILL 60 env MEMTRAIL_OPTIONS="mode=$mode:on_error=abort:output=$T/ex.$mode.$ext" \
            LD_PRELOAD="$AGENT:$LIBDIR/$lib" "$TBIN/exact" "$T/ex.ledger" 2>&1)
        rc=$?
        expect_eq "$lib after the agent, $mode: exact runs clean (on_error=abort)" "0" "$rc"
        if [ $mode != trace ]; then
            [ -f "$T/ex.ledger" ] && ledger_eq "$lib after the agent, $mode: every entry point counted to the byte" "$T/ex.$mode.mtr" "$T/ex.ledger" exact
            errors_zero "$lib after the agent, $mode: no heap errors" "$T/ex.$mode.mtr"
        fi
        got=$(timeout -s KILL 60 env MEMTRAIL_OPTIONS="mode=$mode:on_error=abort:output=$T/pm.$mode.$ext" \
            LD_PRELOAD="$AGENT:$LIBDIR/$lib" "$TBIN/plainmix" 2>"$T/pm.err")
        expect_eq "$lib after the agent, $mode: 4 threads, every entry point, same output" "$bare" "$got"
    done
    "$MT" report --json "$T/ex.summary.mtr" >"$T/h.json"
    heap=$(json_get "$T/h.json" "[c.get('reserved_bytes', 0) for c in j['categories'] if c['name']=='heap'][0]")
    if [ "${heap:-0}" -gt 0 ]; then pass "$lib after the agent: its mappings count as heap ($heap bytes)"
    else fail "$lib after the agent: heap category" "reserved=${heap:-none}"; fi
    # Before the agent: its malloc gets the program's calls; the agent must
    # not hang at start-up, nor hand its blocks to another allocator.
    for mode in summary detail trace; do
        got=$(timeout -s KILL 60 env MEMTRAIL_OPTIONS="mode=$mode:output=$T/first.%p" \
            LD_PRELOAD="$LIBDIR/$lib:$AGENT" "$TBIN/plainmix" 2>"$T/first.err")
        rc=$?
        expect_eq "$lib before the agent, $mode: no hang, same output" "0 $bare" "$rc $got"
        contains "$lib before the agent, $mode: says why nothing is tracked" "preloaded before the agent" "$(cat "$T/first.err")"
    done
done

# An allocator whose every block starts a mapping above a PROT_NONE page
# (tests/agent/lib/guardalloc.c), after the agent: what libc allocates
# while the agent runs its own code (pthread_getattr_np's cpuset, when a
# thread starts) reaches the agent's free without a header; the agent
# must see that the page below cannot be read, not fault reading it.
G=$BUILD/tests/agent/libguardalloc.so
if [ -f "$G" ]; then
    for mode in summary detail trace; do
        out=$(timeout -s KILL 60 env MEMTRAIL_OPTIONS="mode=$mode:on_error=abort:output=$T/ga.$mode" \
            LD_PRELOAD="$AGENT:$G" "$TBIN/threads" "$T/ga.ledger" 8 200 2>&1)
        rc=$?
        expect_eq "blocks above PROT_NONE pages, $mode: 8 threads run clean" "0" "$rc"
        contains "blocks above PROT_NONE pages, $mode: the program's own checks pass" "PASS threads: 0 failures" "$out"
        if grep -q "crash report" <<<"$out"; then fail "blocks above PROT_NONE pages, $mode: no crash" "$out"
        else pass "blocks above PROT_NONE pages, $mode: no crash"; fi
    done
else
    fail "guardalloc" "not built: $G"
fi

# Interposers before the agent that allocate nothing themselves but hand
# each call on to the next malloc (dlsym(RTLD_NEXT)), which is the agent's:
# the agent must send it on to libc, once, not back to the interposer (the
# two then handed it to each other until the stack overflowed: glibc's own
# libmemusage.so, the memusage tool's, took the program down with SIGSEGV).
# Our interposer (tests/agent/lib/fwdalloc.c) and glibc's, every mode: the
# program's output as without them, no hang, the message saying why
# nothing is tracked; and memusage counts the same calls with the agent
# behind it as without (each call seen once).
F=$BUILD/tests/agent/libfwdalloc.so
MU=$LIBDIR/libmemusage.so
mu_calls() { sed 's/\x1b\[[0-9;]*m//g' "$1" | awk -F'|' '/^ *(malloc|realloc|calloc|free)\|/ {split($2, c, " "); printf "%s=%s ", $1, c[1]}'; }
if [ -f "$MU" ]; then
    LD_PRELOAD="$MU" "$TBIN/plainmix" >/dev/null 2>"$T/mu.alone"
    mu_alone=$(mu_calls "$T/mu.alone")
fi
for spec in "fwdalloc:$F" "libmemusage:$MU"; do
    label=${spec%%:*} lib=${spec#*:}
    if [ ! -f "$lib" ]; then fail "forwarder $label" "missing: $lib"; continue; fi
    for mode in summary detail trace; do
        got=$(timeout -s KILL 60 env MEMTRAIL_OPTIONS="mode=$mode:output=$T/fw.%p" \
            LD_PRELOAD="$lib:$AGENT" "$TBIN/plainmix" 2>"$T/fw.err")
        rc=$?
        expect_eq "$label (forwards to the next malloc) before the agent, $mode: runs, same output" "0 $bare" "$rc $got"
        contains "$label before the agent, $mode: says why nothing is tracked" "preloaded before the agent" \
            "$(cat "$T/fw.err")"
        if [ "$label" = libmemusage ]; then
            expect_eq "libmemusage before the agent, $mode: counts each call once, as without the agent" \
                "$mu_alone" "$(mu_calls "$T/fw.err")"
        fi
    done
done

# An allocator with a heap of its own and no memalign, valloc or pvalloc
# (tests/agent/lib/ownheap.c), before the agent: the program's calls of
# those reach the agent, which must serve them from that heap (its
# posix_memalign), or its free aborts on the block. (Without the agent,
# glibc's memalign serves them and the program aborts.)
OH=$BUILD/tests/agent/libownheap.so
if [ -f "$OH" ]; then
    for mode in summary detail trace; do
        got=$(timeout -s KILL 60 env MEMTRAIL_OPTIONS="mode=$mode:output=$T/oh.%p" \
            LD_PRELOAD="$OH:$AGENT" "$TBIN/plainmix" 2>"$T/oh.err")
        rc=$?
        expect_eq "an allocator lacking memalign, valloc, pvalloc before the agent, $mode: their blocks are its own" \
            "0 $bare" "$rc $got"
    done
else
    fail "ownheap" "not built: $OH"
fi

# A program with a malloc of its own (tests/agent/ownmalloc.c: defined in
# the executable, as a statically linked allocator): its calls never reach
# the agent, which must say so, naming the program, and keep out of the
# way. With OWNMALLOC_FORWARD=1 its malloc hands each call on to the next
# definition, the agent's, which must send it on to libc, not back.
own_count() { local c=${1#ownmalloc: }; echo "${c%% calls*}"; }
own_name=$(cd "$TBIN" && pwd -P)/ownmalloc
for fwd in 0 1; do
    own_bare=$(OWNMALLOC_FORWARD=$fwd "$TBIN/ownmalloc")
    for mode in summary detail trace; do
        got=$(timeout -s KILL 60 env OWNMALLOC_FORWARD=$fwd MEMTRAIL_OPTIONS="mode=$mode:output=$T/ownrep.%p" \
            LD_PRELOAD="$AGENT" "$TBIN/ownmalloc" 2>"$T/own.err")
        rc=$?
        expect_eq "a malloc of the program's own (forward=$fwd), $mode: runs, same data" "0 ${own_bare##*, }" \
            "$rc ${got##*, }"
        # each call once; the agent's start-up may add a few of its own
        # through the program's malloc (dlsym's, when the program resolves)
        local_bare=$(own_count "$own_bare") local_got=$(own_count "$got")
        if [ -n "$local_got" ] && [ "$local_got" -ge "$local_bare" ] 2>/dev/null && [ "$local_got" -le $((local_bare + 4)) ]; then
            pass "a malloc of the program's own (forward=$fwd), $mode: each call seen once ($local_got, bare $local_bare)"
        else
            fail "a malloc of the program's own (forward=$fwd), $mode: each call seen once" "$local_got calls, bare $local_bare"
        fi
        contains "a malloc of the program's own (forward=$fwd), $mode: says the program serves malloc itself" \
            "malloc is served by the program itself ($own_name defines malloc" "$(cat "$T/own.err")"
    done
done
if ls "$T"/ownrep.* >/dev/null 2>&1; then fail "a malloc of the program's own: no report" "$(ls "$T"/ownrep.*)"
else pass "a malloc of the program's own: no report (nothing was tracked)"; fi

# jemalloc's API in a program linked with it.
if [ -x "$TBIN/jemalloc/allocx" ]; then
    for mode in summary detail; do
        out=$(timeout -s KILL 60 env MEMTRAIL_OPTIONS="mode=$mode:on_error=abort:output=$T/ax.$mode.mtr" \
            LD_PRELOAD="$AGENT" "$TBIN/jemalloc/allocx" "$T/ax.ledger" 2>&1)
        expect_eq "allocx, $mode: runs clean" "0" "$?"
        ledger_eq "allocx, $mode: mallocx rallocx xallocx sallocx dallocx sdallocx counted to the byte" \
            "$T/ax.$mode.mtr" "$T/ax.ledger" allocx
    done
else
    fail "allocx" "not built: $TBIN/jemalloc/allocx"
fi

# Redis (Debian's redis-server links libjemalloc2).
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    fail redis "redis-server / redis-benchmark not installed (scripts/deps.sh installs them)"
    exit 0
fi
# On a unix socket: no TCP port to collide with another program's.
sock=$T/redis.sock
cli() { timeout 20 redis-cli -s "$sock" "$@"; }
mkdir -p "$T/redis"
MEMTRAIL_OPTIONS=on_error=abort timeout -s KILL 120 "$MT" run --follow-exec -o "$T/redis/r.%p.mtr" -- \
    redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save "" --dir "$T/redis" >"$T/redis.log" 2>&1 &
runner=$!
for _ in $(seq 100); do [ "$(cli ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
pid=$(cli info server | tr -d '\r' | awk -F: '/^process_id:/ {print $2}')
if [ -z "$pid" ]; then
    fail redis "did not start: $(tail -5 "$T/redis.log")"
    kill "$runner" 2>/dev/null
    exit 0
fi
# (live bytes - used_memory): what Redis allocates outside its own
# accounting (libc, OpenSSL, its start-up) is fixed; everything it
# allocates through zmalloc the agent counts with the same sizes.
gap() {
    local a b l
    a=$(cli info memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}')
    "$MT" query "$pid" summary --json >"$T/q.json" || return 1
    b=$(cli info memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}')
    [ "$a" = "$b" ] || { echo "moving"; return 0; }
    l=$(json_get "$T/q.json" "j['total']['live_bytes']")
    echo "$((l - a)) $a"
}
# The same gap twice in a row: a reading can land while another thread of
# Redis is between its malloc and zmalloc's count, or in the middle of a
# flush of its shard into the globals (counters.h), once in a while.
stable_gap() {
    local g prev=""
    for _ in 1 2 3 4 5 6 7 8; do
        g=$(gap) || return 1
        [ "$g" != moving ] && [ "$g" = "$prev" ] && break
        prev=$g
        sleep 0.2
    done
    echo "$g"
}
g0=$(stable_gap)
redis-benchmark -s "$sock" -q -n 20000 -t set,get,lpush,sadd -P 16 -d 200 >/dev/null 2>&1
cli bgsave >/dev/null
for _ in $(seq 100); do
    cli info persistence | grep -q '^rdb_bgsave_in_progress:0' && break; sleep 0.1
done
g1=$(stable_gap)
used0=${g0#* }; used1=${g1#* }
if [ "${used1:-0}" -gt $(( ${used0:-0} + 100000 )) ]; then pass "redis: the benchmark grew used_memory ($used0 -> $used1)"
else fail "redis: benchmark" "used_memory $used0 -> $used1"; fi
expect_eq "redis: live bytes move exactly as used_memory (live - used_memory before and after)" "${g0%% *}" "${g1%% *}"
cli shutdown nosave >/dev/null 2>&1
wait "$runner"
rc=$?
expect_eq "redis: exits 0 under on_error=abort" "0" "$rc"
expect_eq "redis: no memtrail error line" "" "$(grep 'memtrail: ' "$T/redis.log" | grep -v -E 'report of|read it with|more report|summarise the tree' | head -3)"
n=0
for f in "$T"/redis/r.*.mtr; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    errors_zero "redis: no heap errors in $(basename "$f")" "$f"
done
if [ "$n" -ge 2 ]; then pass "redis: the server and its background-save child wrote reports ($n)"
else fail "redis: reports" "$n report(s): $(ls "$T/redis")"; fi

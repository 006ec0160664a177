#!/usr/bin/env bash
# The agent's messages to `memtrail refset record` (option refset_fd,
# src/agent/refset_events.c) against what the program knows it did:
# refset_listen plays the recorder (the socketpair, every message as a
# line), refset_prog maps, unmaps, discards, remaps, mallocs blocks glibc
# maps for itself (one freed, one grown and shrunk by realloc), trims,
# starts a thread, maps shared memory and a file,
# moves its break, forks and execs itself, printing the message each must
# produce. In summary, detail and trace modes the two streams must be the
# same, line for line; the allocation stacks must hold the program's own
# calls (their functions' extents from nm). Then what must not disturb the
# program: a descriptor that is no socket, closed, of the wrong type,
# closed by the program, and a recorder that goes away.
. "$(dirname "$0")/../lib.sh"
PROG=$TBIN/refset_prog
LISTEN=$TBIN/refset_listen
[ -x "$PROG" ] && [ -x "$LISTEN" ] || { fail setup "build first: $PROG / $LISTEN missing"; exit 1; }
export RS_AGENT=$AGENT

# fn_extent NAME: "start size" (hex, as nm prints them) of a function of refset_prog.
fn_extent() { nm -S --defined-only "$PROG" | awk -v n="$1" '$4 == n { print $1, $2; exit }'; }
read -r do_mmap_at do_mmap_size <<<"$(fn_extent rs_do_mmap)"
read -r start_thread_at start_thread_size <<<"$(fn_extent rs_start_thread)"
read -r main_at main_size <<<"$(fn_extent main)"

# has_frame_in MSGLINE RUNTIME_ADDR_OF_rs_do_mmap STATIC_START SIZE: one of
# the line's frames lies in the function at STATIC_START (+SIZE), moved by
# the program's load bias.
has_frame_in() {
    python3 - "$@" <<'EOF'
import sys
line, rt, st, size = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3], 16), int(sys.argv[4], 16)
bias = rt - int(sys.argv[5], 16)
frames = [int(f, 16) for f in line.split("frames=")[1].split(",") if f]
sys.exit(0 if any(st + bias <= f < st + bias + size for f in frames) else 1)
EOF
}

for mode in summary detail trace; do
    RS_OPTIONS="output=$T/$mode.%p.out:mode=$mode:follow_exec=on:depth=8" \
        "$LISTEN" "$T/$mode.msgs" -- "$PROG" >"$T/$mode.prog" 2>"$T/$mode.err"
    expect_eq "$mode: the listener ran" 0 $?
    expect_eq "$mode: the program's stderr is empty (trace mode: its line at exec)" "" \
        "$(grep -v '^memtrail: trace: [0-9]* events, 0 lost' "$T/$mode.err")"
    expect_eq "$mode: the program exits as its exec'd image does (3)" "EXIT 3" "$(tail -1 "$T/$mode.msgs")"
    expect_eq "$mode: every message keeps the contract (magic, size, time)" "" "$(grep '^BAD' "$T/$mode.msgs")"
    want=$(grep -v '^FN ' "$T/$mode.prog")
    # Where the program could not read a block's range cleanly it says
    # "? ?"; the message at that place may carry any range there.
    got=$(grep -v -e '^EXIT' -e '^BAD' "$T/$mode.msgs" | cut -d' ' -f1-5 |
        awk 'NR == FNR { w[FNR] = $0; next }
             { split(w[FNR], f, " "); if (f[3] == "?" && f[4] == "?") { $3 = "?"; $4 = "?" } print }' \
            <(printf '%s\n' "$want") -)
    n=$(printf '%s\n' "$want" | wc -l)
    [ "$n" -ge 22 ] && pass "$mode: the program did all it does ($n messages due)" ||
        fail "$mode: the program did all it does" "only $n: $(cat "$T/$mode.prog")"
    expect_eq "$mode: the messages are the program's own account, in order (kind pid addr len category)" "$want" "$got"

    pid=$(awk '/^HELLO/ { print $2; exit }' "$T/$mode.prog")
    child=$(awk -v p="$pid" '$1 == "MAP" && $2 != p { print $2; exit }' "$T/$mode.prog")
    [ -n "$child" ] && pass "$mode: the fork child's messages carry its pid ($child)" || fail "$mode: fork child" "no message of another pid"
    expect_eq "$mode: HELLO twice from pid $pid (start, and the exec'd image)" 2 "$(grep -c "^HELLO $pid " "$T/$mode.msgs")"
    expect_eq "$mode: the thread's STACK comes from the thread (tid != pid)" 1 \
        "$(awk -v p="$pid" '$1 == "STACK" && $6 != "tid=" p' "$T/$mode.msgs" | wc -l)"
    expect_eq "$mode: the other messages come from the main threads (tid = pid)" "" \
        "$(awk '$1 != "STACK" && $1 != "EXIT" && $6 != "tid=" $2' "$T/$mode.msgs")"
    expect_eq "$mode: only MAP, BLOCK and STACK carry frames" "" \
        "$(awk '$1 != "MAP" && $1 != "BLOCK" && $1 != "STACK" && $1 != "EXIT" && $7 != "frames="' "$T/$mode.msgs")"

    rt=$(awk '$1 == "FN" && $2 == "rs_do_mmap" { print $3 }' "$T/$mode.prog")
    map1=$(grep -m1 '^MAP ' "$T/$mode.msgs")
    check "$mode: the 1 MiB MAP's stack holds rs_do_mmap (the call to mmap)" \
        has_frame_in "$map1" "$rt" "$do_mmap_at" "$do_mmap_size" "$do_mmap_at"
    check "$mode: ... and main above it" has_frame_in "$map1" "$rt" "$main_at" "$main_size" "$do_mmap_at"
    check "$mode: the BLOCK's stack holds main (the call to malloc)" \
        has_frame_in "$(grep -m1 '^BLOCK ' "$T/$mode.msgs")" "$rt" "$main_at" "$main_size" "$do_mmap_at"
    check "$mode: the STACK's stack holds rs_start_thread (the call to pthread_create)" \
        has_frame_in "$(grep -m1 '^STACK ' "$T/$mode.msgs")" "$rt" "$start_thread_at" "$start_thread_size" "$do_mmap_at"
    read -r on_usr1_at on_usr1_size <<<"$(fn_extent on_usr1)"
    sigmap=$(awk -v p="$pid" '$1 == "MAP" && $2 == p && $4 == 8192 && $5 == 1' "$T/$mode.msgs")
    check "$mode: a MAP from a signal handler on an alternate stack holds rs_do_mmap" \
        has_frame_in "$sigmap" "$rt" "$do_mmap_at" "$do_mmap_size" "$do_mmap_at"
    check "$mode: ... and the handler" has_frame_in "$sigmap" "$rt" "$on_usr1_at" "$on_usr1_size" "$do_mmap_at"
    nf=$(awk -F'frames=' '$1 ~ /^MAP / { print $2; exit }' "$T/$mode.msgs" | tr ',' '\n' | grep -c .)
    [ "$nf" -ge 3 ] && [ "$nf" -le 8 ] && pass "$mode: a MAP carries up to depth=8 frames ($nf)" ||
        fail "$mode: frames per MAP" "$nf (depth=8)"
done

# Threads mapping at once: every message arrives, from its own thread, and
# each thread's MAP and UNMAP alternate on the same range.
RS_OPTIONS="output=$T/th.%p.out:mode=detail" "$LISTEN" "$T/th.msgs" -- "$PROG" threads >"$T/th.prog" 2>&1
expect_eq "threads: the program exits 0" "EXIT 0" "$(tail -1 "$T/th.msgs")"
verdict=$(python3 - "$T/th.msgs" <<'EOF'
import sys, collections
per = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] in ("MAP", "UNMAP"):
        per[f[5]].append((f[0], f[2], f[3]))
bad = [t for t, ms in per.items() if len(ms) != 400 or any(
    ms[i][0] != "MAP" or ms[i + 1][0] != "UNMAP" or ms[i][1:] != ms[i + 1][1:] for i in range(0, len(ms), 2))]
print(len(per), "threads", "bad: " + " ".join(bad) if bad else "all paired")
EOF
)
expect_eq "threads: 4 threads, 200 MAP/UNMAP pairs each, in order" "4 threads all paired" "$verdict"
expect_eq "threads: a STACK from each" 4 "$(grep -c '^STACK' "$T/th.msgs")"

# BLOCK comes from glibc's chunk headers only: over jemalloc (after the
# agent) a big malloc is no BLOCK, and jemalloc's own mappings are MAPs of
# category Heap.
RS_OPTIONS="output=$T/big.%p.out" "$LISTEN" "$T/big.msgs" -- "$PROG" big >/dev/null 2>&1
expect_eq "glibc: a 4 MiB malloc and free are one BLOCK and one BLOCK_FREE, of the same range" "BLOCK BLOCK_FREE 1" \
    "$(awk '$1 ~ /^BLOCK/ { k = k $1 " "; r[$3 " " $4] = 1 } END { n = 0; for (x in r) n++; print k n }' "$T/big.msgs")"
JE=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
if [ -f "$JE" ]; then
    RS_AGENT="$AGENT:$JE" RS_OPTIONS="output=$T/je.%p.out" "$LISTEN" "$T/je.msgs" -- "$PROG" big >/dev/null 2>&1
    expect_eq "jemalloc: the program exits 0" "EXIT 0" "$(tail -1 "$T/je.msgs")"
    expect_eq "jemalloc: no BLOCK (glibc's headers are not read)" 0 "$(grep -c '^BLOCK' "$T/je.msgs")"
    nmap=$(grep -c '^MAP ' "$T/je.msgs")
    [ "$nmap" -ge 1 ] && pass "jemalloc: its mappings are MAPs ($nmap)" || fail "jemalloc: its mappings are MAPs" "none"
    expect_eq "jemalloc: ... all of category Heap" "" "$(awk '$1 == "MAP" && $5 != 0' "$T/je.msgs")"
else
    echo "SKIP jemalloc: $JE not installed"
fi

# The default depth (4) bounds the frames too.
RS_OPTIONS="output=$T/d4.%p.out" "$LISTEN" "$T/d4.msgs" -- "$PROG" >"$T/d4.prog" 2>&1
nf=$(awk -F'frames=' '$1 ~ /^MAP / { print $2; exit }' "$T/d4.msgs" | tr ',' '\n' | grep -c .)
expect_eq "default depth: a MAP carries 4 frames" 4 "$nf"
expect_eq "follow_exec=off: the exec'd image sends nothing (one HELLO)" 1 "$(grep -c '^HELLO' "$T/d4.msgs")"

# ---- what must not disturb the program ---------------------------------------
# The full account the program prints (FN lines aside), for comparison.
full=$(grep -v '^FN ' "$T/summary.prog" | wc -l)

MEMTRAIL_OPTIONS="output=$T/ns.%p.out:refset_fd=0" LD_PRELOAD=$AGENT "$PROG" </dev/null >"$T/ns.prog" 2>"$T/ns.err"
expect_eq "refset_fd on /dev/null: the program exits as it would (3)" 3 $?
expect_eq "refset_fd on /dev/null: one line on stderr" "memtrail: refset_fd=0 is not a socket; page events off" "$(cat "$T/ns.err")"
expect_eq "refset_fd on /dev/null: the program did all it does" "$full" "$(grep -vc '^FN ' "$T/ns.prog")"

MEMTRAIL_OPTIONS="output=$T/cl.%p.out:refset_fd=57" LD_PRELOAD=$AGENT "$PROG" >"$T/cl.prog" 2>"$T/cl.err" 57>&-
expect_eq "refset_fd closed: the program exits as it would (3)" 3 $?
expect_eq "refset_fd closed (a program closing what it inherits): nothing in its output" "" "$(cat "$T/cl.err")"

python3 - "$AGENT" "$PROG" "$T" >"$T/st.prog" 2>"$T/st.err" <<'EOF'
import os, socket, subprocess, sys
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
env = dict(os.environ, LD_PRELOAD=sys.argv[1], MEMTRAIL_OPTIONS="output=%s/st.%%p.out:refset_fd=%d" % (sys.argv[3], b.fileno()))
sys.exit(subprocess.run([sys.argv[2]], env=env, pass_fds=[b.fileno()]).returncode)
EOF
expect_eq "refset_fd a stream socket: the program exits as it would (3)" 3 $?
expect_match "refset_fd a stream socket: one line on stderr" \
    '^memtrail: refset_fd=[0-9]+ is not a SOCK_SEQPACKET socket; page events off$' "$(cat "$T/st.err")"

# The program closes the socket (a daemon closing its descriptors): HELLO,
# then the next send fails and page events stop; the exec'd image finds
# the number closed and says nothing into the program's output.
RS_OPTIONS="output=$T/cf.%p.out:follow_exec=on" "$LISTEN" "$T/cf.msgs" -- "$PROG" close-fd >"$T/cf.prog" 2>"$T/cf.err"
expect_eq "program closes the socket: it exits as it would (3)" "EXIT 3" "$(tail -1 "$T/cf.msgs")"
expect_eq "program closes the socket: HELLO only" "HELLO" "$(grep -v '^EXIT' "$T/cf.msgs" | cut -d' ' -f1)"
expect_eq "program closes the socket: the program did all it does" "$full" "$(grep -vc '^FN ' "$T/cf.prog")"
expect_eq "program closes the socket: nothing in the program's output" "" "$(cat "$T/cf.err")"

# The recorder goes away after 3 messages: no SIGPIPE, no message, the
# program finishes everything and exits with its own status.
RS_OPTIONS="output=$T/q.%p.out:follow_exec=on" "$LISTEN" "$T/q.msgs" --quit-after 3 -- "$PROG" >"$T/q.prog" 2>"$T/q.err"
expect_eq "recorder gone: the program exits as it would (3), not of SIGPIPE" "EXIT 3" "$(tail -1 "$T/q.msgs")"
expect_eq "recorder gone: 3 messages were read" 3 "$(grep -vc '^EXIT' "$T/q.msgs")"
expect_eq "recorder gone: the program did all it does" "$full" "$(grep -vc '^FN ' "$T/q.prog")"
expect_eq "recorder gone: nothing on stderr" "" "$(cat "$T/q.err")"

# Option checks: the table's range.
err=$(MEMTRAIL_OPTIONS="output=$T/o.mtr:refset_fd=-2" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_match "refset_fd=-2 is refused with the accepted values" "bad value '-2' for refset_fd \(accepted: an open SOCK_SEQPACKET socket's descriptor, or -1 \(off\)\)" "$err"
err=$(MEMTRAIL_OPTIONS="output=$T/o.mtr:refset_fd=-1" LD_PRELOAD=$AGENT /bin/true 2>&1)
expect_eq "refset_fd=-1: off, silently" "" "$err"

# Clients that connect to the control socket and send nothing must not hold
# the program (tests/agent/stall.c, a single-threaded loop that times its
# own longest gap), nor keep a well-behaved `memtrail query` from being
# answered. Run with query=on (the handler runs on the program's thread)
# and query=thread. Clients are python3 sockets; figures are checked
# against the program's own books and clock.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] && [ -x "$TBIN/stall" ] || { fail setup "build first: $MT / $AGENT / $TBIN/stall missing"; exit 1; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

wait_file() { local i; for ((i = 0; i < 3000; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }
wait_gone() { local i; for ((i = 0; i < 3000; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.02; done; return 1; }
cat_json() { json_get "$1" "[c['$3'] for c in j['categories'] if c['name'] == '$2'][0]"; }

# silent SOCK N SECONDS READY: opens N connections that send nothing, creates
# READY, holds them SECONDS, then closes them.
silent() { python3 - "$@" <<'EOF'
import socket, sys, time
path, n, hold, ready = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
conns = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    conns.append(s)
open(ready, "w").close()
time.sleep(hold)
for s in conns:
    s.close()
EOF
}
# slow SOCK DELAY: connects, waits DELAY seconds, then sends "summary\n";
# prints the reply's reason line.
slow() { python3 - "$@" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
time.sleep(float(sys.argv[2]))
s.sendall(b"summ"); time.sleep(0.05); s.sendall(b"ary\n")
s.settimeout(10)
data = b""
while True:
    b = s.recv(65536)
    if not b: break
    data += b
print(" ".join(l for l in data.decode(errors="replace").splitlines() if l.startswith("reason ") or l == "end"))
EOF
}

export XDG_RUNTIME_DIR=$T/xdg
mkdir -m 0700 "$XDG_RUNTIME_DIR"

for mode in on thread; do
    tag="[query=$mode]"
    D=$T/$mode; mkdir -p "$D"
    MEMTRAIL_OPTIONS="query=$mode:output=$T/$mode.mtr" LD_PRELOAD=$AGENT "$TBIN/stall" "$D" >"$T/$mode.out" 2>&1 &
    pid=$!; pids+=("$pid")
    if ! wait_file "$D/ready"; then
        fail "stall $tag: program starts" "no $D/ready; output: $(cat "$T/$mode.out")"
        continue
    fi
    sock=$XDG_RUNTIME_DIR/memtrail/$pid.sock
    wait_file "$sock"
    fds_before=$(ls "/proc/$pid/fd" | wc -l)

    # Five silent connections, held 3 s; a query meanwhile is answered.
    silent "$sock" 5 3 "$D/held" & holder=$!; pids+=("$holder")
    wait_file "$D/held"
    sleep 0.3
    "$MT" query "$pid" summary --json --timeout 2 >"$T/during.json" 2>"$T/during.err"
    expect_eq "stall $tag: query summary during 5 silent connections exits 0" "0:" "$?:$(cat "$T/during.err")"
    want=$(awk '$1 == "stall" { print $2, $3 }' "$D/books")
    expect_eq "stall $tag: and its live bytes and count are the program's books" "$want" \
        "$(cat_json "$T/during.json" stall live_bytes 2>/dev/null) $(cat_json "$T/during.json" stall live_count 2>/dev/null)"
    expect_eq "stall $tag: a client that sends its request late (0.5 s, in two parts) is answered" \
        "reason query end" "$(slow "$sock" 0.5 2>&1)"
    wait "$holder"

    "$MT" query "$pid" summary --json >"$T/after.json" 2>"$T/after.err"
    expect_eq "stall $tag: query summary after the silent clients left exits 0" "0:" "$?:$(cat "$T/after.err")"
    expect_eq "stall $tag: and it is the process's report, reason query, with its books" "$pid query $want" \
        "$(json_get "$T/after.json" "'%s %s' % (j['pid'], j['reason'])") $(cat_json "$T/after.json" stall live_bytes) $(cat_json "$T/after.json" stall live_count)"
    # The silent connections are closed once their clients have gone.
    for ((i = 0; i < 100; i++)); do [ "$(ls "/proc/$pid/fd" | wc -l)" = "$fds_before" ] && break; sleep 0.02; done
    expect_eq "stall $tag: no descriptor left open for the silent clients" "$fds_before" "$(ls "/proc/$pid/fd" | wc -l)"

    touch "$D/stop"
    wait_file "$D/result" || fail "stall $tag: result" "no $D/result; output: $(cat "$T/$mode.out")"
    read -r gap iterations <"$D/result"
    echo "NOTE $tag longest gap of the program's loop: $gap ms ($iterations iterations)"
    check "stall $tag: the program was never held 1 s or more (longest gap ${gap} ms)" test "${gap:-99999}" -lt 1000
    wait_gone "$pid"
    wait "$pid"
    expect_eq "stall $tag: the program ran to its end" "0" "$?"
done

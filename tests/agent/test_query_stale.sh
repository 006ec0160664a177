# Sockets left in the control socket directory by processes that are gone
# (killed by a signal, say) are removed when a tracked process makes its
# own; nothing else there is touched. The directory is a private
# XDG_RUNTIME_DIR; files are planted with python3 and checked with stat(1).
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
wait_file() { local i; for ((i = 0; i < 3000; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done; return 1; }

# plant PATH...: a socket file at each PATH that nobody listens on.
plant() { python3 - "$@" <<'EOF'
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(p)
    s.close()
EOF
}

export XDG_RUNTIME_DIR=$T/xdg
S=$XDG_RUNTIME_DIR/memtrail
mkdir -m 0700 "$XDG_RUNTIME_DIR" "$S"

nopid=$(cat /proc/sys/kernel/pid_max)   # pids are below pid_max: never running
true & gone=$!; wait "$gone"            # a process that has exited
sleep 120 & alive=$!; pids+=("$alive")  # a running process (without the agent)
stale=("$nopid.sock" "$nopid.sock.new" "$gone.sock")
plant "${stale[@]/#/$S/}"
# Not ours to remove: names not of our pattern, a running pid, a regular
# file and a symbolic link with a dead pid's name.
kept=("$alive.sock" "x$nopid.sock" "0$nopid.sock" "$nopid.socket" "$nopid.sock.old")
plant "${kept[@]/#/$S/}"
echo notes >"$S/notes.txt"; kept+=(notes.txt)
echo data >"$S/$((nopid + 1)).sock"; kept+=("$((nopid + 1)).sock")
plant "$T/elsewhere.sock"
ln -s "$T/elsewhere.sock" "$S/$((nopid + 2)).sock"; kept+=("$((nopid + 2)).sock")
if [ "$(id -u)" = 0 ]; then
    # Another user's socket with a dead pid's name: not ours either.
    plant "$S/$((nopid + 3)).sock" && chown 65534 "$S/$((nopid + 3)).sock" && kept+=("$((nopid + 3)).sock")
fi
# A dead pid's name, but a process listens on it (one in another pid
# namespace sharing the directory would): not stale.
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[2], "w").close(); time.sleep(120)' "$S/$((nopid + 4)).sock" "$T/listening" & listener=$!; pids+=("$listener")
wait_file "$T/listening" && kept+=("$((nopid + 4)).sock")
before=$(cd "$S" && for f in "${kept[@]}"; do stat -c '%n %F %u %i' "$f"; done)

MEMTRAIL_OPTIONS="output=$T/run.mtr" LD_PRELOAD=$AGENT sleep 60 >"$T/run.out" 2>&1 & pid=$!; pids+=("$pid")
if wait_file "$S/$pid.sock"; then
    left=""
    for f in "${stale[@]}"; do [ -e "$S/$f" ] || [ -L "$S/$f" ] && left="$left $f"; done
    expect_eq "stale sockets: those of processes that are gone are removed" "" "$left"
    expect_eq "stale sockets: everything else in the directory is untouched" "$before" \
        "$(cd "$S" && for f in "${kept[@]}"; do stat -c '%n %F %u %i' "$f" 2>&1; done)"
    check "stale sockets: the symbolic link's target is untouched" test -S "$T/elsewhere.sock"
    "$MT" query "$pid" summary --json >"$T/q.json" 2>"$T/q.err"
    expect_eq "stale sockets: the new process answers on its own socket" "0 $pid" \
        "$? $(json_get "$T/q.json" "j['pid']" 2>&1)"
    expect_eq "stale sockets: the program said nothing on stderr" "" "$(cat "$T/run.out")"
else
    fail "stale sockets: program starts" "no $S/$pid.sock; output: $(cat "$T/run.out")"
fi
kill "$pid" "$alive" "$listener"
wait 2>/dev/null

#!/usr/bin/env bash
# The agent's own files (reports, crash reports, traces) where writing them
# is hostile or hard, with the agent preloaded directly (no CLI to check
# the name first): a symbolic link planted at the name (to a file, dangling),
# device nodes, a FIFO (with and without a reader), a directory, another
# user's file, a hard link; and programs that make the report hard to
# write: a worker that drops root (setuid to nobody, alone and inside a
# chroot), a program that chroots, one that closes every descriptor, and
# real nginx with `user nobody;` workers. The truth: the file system before
# and after (stat, md5sum), the pids each program prints and the bytes it
# keeps live, nginx's own pid file and worker list (its master's children).
# Checks that need root are skipped, with a SKIP line, when not root.
. "$(dirname "$0")/../lib.sh"

P=$TBIN/outputs
[ -x "$P" ] || { fail outputs-build "$P missing (make tests)"; exit 1; }
is_root=0; [ "$(id -u)" = 0 ] && is_root=1
skip() { echo "SKIP $1: $2"; }

fingerprint() {
    local p=$1
    if [ -L "$p" ]; then echo "link -> $(readlink "$p")"; return; fi
    [ -e "$p" ] || { echo absent; return; }
    local s; s=$(stat -c '%F %t:%T %U %i %s' "$p")
    if [ -f "$p" ]; then echo "$s $(md5sum <"$p" | cut -d' ' -f1)"; else echo "$s"; fi
}
# agent OPTIONS CMD...: the program with the agent preloaded; rc, out, err.
agent() { local o=$1; shift; run_mt timeout 60 env MEMTRAIL_OPTIONS="$o" LD_PRELOAD="$AGENT" "$@"; }
# field FILE KEY: a report's line KEY's first value ("pid", "reason").
field() { awk -v k="$2" '$1 == k { print $2; exit }' "$1" 2>/dev/null; }
# live FILE: the report's total live_bytes.
live() { sed -n 's/^total live_bytes=\([0-9]*\) .*/\1/p' "$1" 2>/dev/null; }
# kept_ok FILE PID PPID BYTES: the report of PID (child of PPID; - for
# any), at exit, with at least BYTES and less than BYTES + 64 KiB live.
kept_ok() {
    local f=$1 l
    l=$(live "$f")
    [ "$(field "$f" pid)" = "$2" ] && { [ "$3" = - ] || [ "$(field "$f" ppid)" = "$3" ]; } &&
        [ "$(field "$f" reason)" = exit ] &&
        [ -n "$l" ] && [ "$l" -ge "$4" ] && [ "$l" -lt $(($4 + 65536)) ]
}

# --- '%' in a path template: %p, %e and %% only, alike in the agent and the CLI
# (before, the agent kept an unknown '%q' as it was and memtrail run dropped
# its '%', so run named a file the agent never wrote) ---------------------------
D=$T/tmpl; mkdir -p "$D"
agent "output=$D/end.mtr" "$P" template "$D/q%q.mtr" "$D/trail%" "$D/pct%%.%p.%e.mtr"
expect_eq "template: mt_report_write refuses %q and a trailing %, writes %% and %p, %e" "-22 -22 0" "$out"
expect_eq "template: the files written: %% as %, %p the pid, %e the program; nothing for the bad ones" \
    "end.mtr pct%.$(field "$D/end.mtr" pid).outputs.mtr" "$(ls "$D" | sort | tr '\n' ' ' | sed 's/ $//')"
expect_eq "template: one clear line for each refused template" \
    "memtrail: cannot write the report: the path '$D/q%q.mtr' has '%q', which is not %p, %e or %% (a '%' is written %%)
memtrail: cannot write the report: the path '$D/trail%' has '%', which is not %p, %e or %% (a '%' is written %%)" "$err"
agent "output=$D/opt%q.mtr" "$P" template "$D/x.mtr"
expect_match "template: MEMTRAIL_OPTIONS output with %q: the agent says so and runs untracked" \
    "^memtrail: MEMTRAIL_OPTIONS: bad value '$D/opt%q.mtr' for output .*; running untracked$" "$err"
run_mt "$MT" run -o "$D/run%q.mtr" -- "$P" template "$D/y.mtr"
expect_eq "template: memtrail run -o with %q: a usage error, nothing run" \
    "2 memtrail: -o: unknown '%q' in '$D/run%q.mtr' (accepted: %p, %e, %%)" "$rc $(printf '%s' "$err" | head -1)"

# --- hostile names -------------------------------------------------------------
D=$T/names; mkdir -p "$D"
echo "precious data" >"$D/victim"
ln -s "$D/victim" "$D/link.mtr"
ln -s "$D/victim" "$D/link.mtt"
ln -s "$D/made-through-link" "$D/dangling.mtt"
mkfifo "$D/fifo.mtr" "$D/fifo.mtt"
mkdir "$D/dir.mtr"
names="link.mtr link.mtt dangling.mtt fifo.mtr fifo.mtt dir.mtr"
if [ "$is_root" = 1 ]; then
    mknod "$D/full.mtr" c 1 7; mknod "$D/null.mtr" c 1 3; mknod "$D/null.mtt" c 1 3
    echo "another user's" >"$D/theirs.mtr"; cp "$D/theirs.mtr" "$D/theirs.mtt"
    chown 65534:65534 "$D/theirs.mtr" "$D/theirs.mtt"
    names="$names full.mtr null.mtr null.mtt theirs.mtr theirs.mtt"
else
    skip "outputs: device nodes, another user's file" "not root (mknod, chown)"
fi
for n in $names; do
    mode=summary; [ "${n##*.}" = mtt ] && mode=trace
    before=$(fingerprint "$D/$n")
    agent "mode=$mode:output=$D/$n" /bin/sh -c 'echo hello'
    expect_eq "$mode to $n: the program is unharmed (exit 0, its output)" "0 hello" "$rc $out"
    expect_eq "$mode to $n: left as it was" "$before" "$(fingerprint "$D/$n")"
    if [ $mode = summary ]; then
        expect_match "$mode to $n: one line naming the file and why" \
            "^memtrail: cannot write the report to $D/$n: (is a symbolic link \(not followed\)|is a directory|is not a regular file|is another user's file \(not replaced\))" "$err"
    fi
done
expect_eq "no report or trace went through a link" "precious data absent" \
    "$(head -c 40 "$D/victim" | tr -c '[:print:]\n' '?') $(fingerprint "$D/made-through-link")"
expect_eq "no temporary left behind" "" "$(ls "$D" | grep '\.tmp\.' || true)"

# A crash report (trace mode writes it beside the trace, OUTPUT.mtr) at a planted link.
ln -s "$D/victim" "$D/crash.mtt.mtr"
agent "mode=trace:output=$D/crash.mtt" "$TBIN/crasher" segv "$D/crash.ledger"
expect_match "crash report at a planted link: refused, says why" \
    "cannot write the report to $D/crash.mtt.mtr: is a symbolic link \(not followed\)" "$err"
expect_eq "crash report at a planted link: link and victim untouched" "link -> $D/victim precious data" \
    "$(fingerprint "$D/crash.mtt.mtr") $(cat "$D/victim")"

# A trace streams into a FIFO its reader has open, and is whole there.
rm -f "$D/fifo.mtt"; mkfifo "$D/fifo.mtt"
timeout 60 cat "$D/fifo.mtt" >"$D/from-fifo.mtt" & reader=$!
agent "mode=trace:output=$D/fifo.mtt" /bin/sh -c 'echo hello'
wait $reader
run_mt "$MT" analyze "$D/from-fifo.mtt" --json
expect_eq "trace into a FIFO being read: the reader gets a whole trace" "0 True" \
    "$rc $(printf '%s' "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["complete"] and j["allocs"] > 0)' 2>&1)"

# Files of our own are replaced by a new file, never truncated or written
# through: a hard link to the old one keeps the old content.
for ext in mtr mtt; do
    mode=summary; [ $ext = mtt ] && mode=trace
    echo old >"$D/mine.$ext"; ln "$D/mine.$ext" "$D/mine.$ext.hard"
    agent "mode=$mode:output=$D/mine.$ext" /bin/sh -c 'echo hello'
    expect_eq "$mode over a file of ours: replaced; its hard link still holds the old content" \
        "0 old" "$rc $(head -c 40 "$D/mine.$ext.hard" | tr -c '[:print:]\n' '?')"
done
expect_eq "report over a file of ours: the new report" "memtrail-report" "$(head -c 15 "$D/mine.mtr")"
expect_eq "trace over a file of ours: the new trace" "MTTRACE" "$(head -c 7 "$D/mine.mtt")"

# --- programs that make the report hard to write ---------------------------------
if [ "$is_root" = 1 ]; then
    # $T is 0700 (root's): a process that drops to nobody can neither
    # reach nor create anything in R.
    R=$T/reports; mkdir -p "$R" "$T/jail" "$T/jail2"; chmod 700 "$T"
    agent "output=$R/setid.%p.mtr" "$P" setid 3000000 2000000
    parent=$(awk '$1 == "parent" { print $2 }' <<<"$out"); child=$(awk '$1 == "child" { print $2 }' <<<"$out")
    expect_eq "setid: the program ran, parent and child" "0 yes" "$rc $([ -n "$parent" ] && [ -n "$child" ] && echo yes)"
    check "setid: the parent's report (3000000 bytes kept)" kept_ok "$R/setid.$parent.mtr" "$parent" - 3000000
    check "setid: the report of the child that dropped to nobody (2000000 bytes kept)" \
        kept_ok "$R/setid.$child.mtr" "$child" "$parent" 2000000
    expect_eq "setid: no error line" "" "$(grep memtrail <<<"$err" || true)"

    # Trace mode: the trace file is opened before the drop.
    agent "mode=trace:output=$R/tsetid.%p.mtt" "$P" setid 3000000 2000000
    parent=$(awk '$1 == "parent" { print $2 }' <<<"$out"); child=$(awk '$1 == "child" { print $2 }' <<<"$out")
    for p in "$parent" "$child"; do
        want=3000000 who="the parent"
        [ "$p" = "$child" ] && want=2000000 who="the child that dropped to nobody"
        run_mt "$MT" analyze "$R/tsetid.$p.mtt" --json
        expect_eq "setid, trace mode: the trace of $who, whole, with the $want bytes it keeps" "0 $p True" \
            "$rc $(printf '%s' "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); w=int(sys.argv[1]); print(j["pid"], j["complete"] and w <= j["live_bytes"] < w + 65536)' "$want" 2>&1)"
    done

    agent "output=$R/jail.%p.mtr" "$P" jail "$T/jail" 3000000 2000000
    parent=$(awk '$1 == "parent" { print $2 }' <<<"$out"); child=$(awk '$1 == "child" { print $2 }' <<<"$out")
    check "jail: the parent's report" kept_ok "$R/jail.$parent.mtr" "$parent" - 3000000
    check "jail: the report of the child that chrooted, then dropped to nobody" \
        kept_ok "$R/jail.$child.mtr" "$child" "$parent" 2000000
    expect_eq "jail: nothing written inside the chroot" "" "$(ls -A "$T/jail")"

    agent "output=$R/chroot.%p.mtr" "$P" chroot "$T/jail2" 3000000
    pid=$(awk '$1 == "parent" { print $2 }' <<<"$out")
    check "chroot: the report reaches the directory outside the new root" kept_ok "$R/chroot.$pid.mtr" "$pid" - 3000000
    expect_eq "chroot: nothing written inside it" "" "$(ls -A "$T/jail2")"
else
    skip "outputs: setid, jail, chroot" "not root"
fi
agent "output=$T/closeall.%p.mtr" "$P" closeall 3000000
pid=$(awk '$1 == "parent" { print $2 }' <<<"$out")
check "closeall: the report, after every descriptor was closed and reused" kept_ok "$T/closeall.$pid.mtr" "$pid" - 3000000

# --- nginx: a root master, workers as nobody -------------------------------------
# nginx_run MODE EXT: nginx under memtrail run in that mode, one page
# served, stopped with SIGQUIT; every process (master and workers) must
# leave its file.
nginx_run() {
    local mode=$1 ext=$2 N=$T/nginx-$1 dest=$T/ng-$1 page master workers p f who runner
    mkdir -p "$N" "$dest"
    cat >"$N/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 2;
user nobody nogroup;
pid $N/nginx.pid;
error_log $N/error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $N/body;
    proxy_temp_path $N/proxy;
    fastcgi_temp_path $N/fastcgi;
    uwsgi_temp_path $N/uwsgi;
    scgi_temp_path $N/scgi;
    server {
        listen unix:$N/http.sock; # no TCP port another program could take first
        location / { return 200 "hello from nginx\n"; }
    }
}
EOF
    timeout 120 "$MT" run --mode "$mode" -o "$dest/nginx.%p.$ext" -- "$NGINX" -c "$N/nginx.conf" -p "$N/" \
        -e "$N/error.log" >"$N/run.out" 2>&1 &
    runner=$!
    page=
    for _ in $(seq 100); do
        page=$(curl -s --unix-socket "$N/http.sock" "http://localhost/") && [ -n "$page" ] && break
        sleep 0.1
    done
    expect_eq "nginx ($mode): serves the page" "hello from nginx" "$page"
    master=$(cat "$N/nginx.pid" 2>/dev/null)
    workers=$(pgrep -P "${master:-0}" | sort -n | tr '\n' ' ')
    expect_eq "nginx ($mode): 2 workers, running as nobody" "2 nobody nobody" \
        "$(wc -w <<<"$workers") $(for p in $workers; do ps -o user= -p "$p"; done | tr '\n' ' ' | sed 's/ $//')"
    [ -n "$master" ] && kill -QUIT "$master"
    wait $runner
    expect_eq "nginx ($mode): stopped gracefully (SIGQUIT), memtrail run exits 0" 0 "$?"
    for p in $master $workers; do
        who=worker; [ "$p" = "$master" ] && who=master
        f=$dest/nginx.$p.$ext
        if [ "$mode" = trace ]; then
            run_mt "$MT" analyze "$f" --json
            expect_eq "nginx ($mode) $who: its trace, whole, with its events" "0 $p True" \
                "$rc $(printf '%s' "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["pid"], j["complete"] and j["allocs"] > 0)' 2>&1)"
        else
            expect_eq "nginx ($mode) $who: its report, written at exit" "$p exit" "$(field "$f" pid) $(field "$f" reason)"
        fi
    done
    expect_eq "nginx ($mode): no file for anyone else, no temporary" "$(($(wc -w <<<"$workers") + 1))" \
        "$(ls "$dest" | wc -l)"
    expect_eq "nginx ($mode): no memtrail error in its log or on stderr" "" \
        "$(grep -h 'memtrail: cannot' "$N/error.log" "$N/run.out" || true)"
}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ "$is_root" != 1 ]; then
    skip "outputs: nginx" "not root"
elif [ ! -x "$NGINX" ]; then
    fail "outputs: nginx" "nginx missing (scripts/deps.sh installs it)"
else
    nginx_run summary mtr
    nginx_run trace mtt
fi

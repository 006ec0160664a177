#!/usr/bin/env bash
# Where the CLI writes, and what it does when it cannot: `run -o` and
# `export -o` at hostile targets (a symbolic link planted at the name, a
# dangling one, device nodes, a FIFO, a directory, another user's file, a
# full file system, a read-only one) and standard output that fails
# (`> /dev/full`, closed). The truth is the file system itself: each
# target's type, device numbers, owner, inode and content before and after
# (stat and md5sum), and what the program run did (a marker file). Device
# nodes are copies made with mknod in the scratch directory, never the
# system's own. Checks that need root (mknod, chown, mount) are skipped,
# with a SKIP line, when not root. CLI calls run the ASan+UBSan build.
. "$(dirname "$0")/../lib.sh"

[ -x "$MT_ASAN" ] || { fail outputs-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }
export MEMTRAIL_LIB=$AGENT
is_root=0; [ "$(id -u)" = 0 ] && is_root=1
skip() { echo "SKIP $1: $2"; }
mounts=()
cleanup() { local m; for m in "${mounts[@]+"${mounts[@]}"}"; do umount "$m" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# What a name holds: type, device numbers, owner, inode, and the content's
# sum for a regular file (a symbolic link: where it points).
fingerprint() {
    local p=$1
    if [ -L "$p" ]; then echo "link -> $(readlink "$p")"; return; fi
    [ -e "$p" ] || { echo absent; return; }
    local s; s=$(stat -c '%F %t:%T %U %i %s' "$p")
    if [ -f "$p" ]; then echo "$s $(md5sum <"$p" | cut -d' ' -f1)"; else echo "$s"; fi
}

# Fixtures: real reports of a real program.
"$MT" run -o "$T/s.mtr" -- /bin/ls / >/dev/null 2>&1
"$MT" run --mode detail -o "$T/d.mtr" -- /bin/ls / >/dev/null 2>&1
[ -s "$T/s.mtr" ] && [ -s "$T/d.mtr" ] || { fail outputs-fixtures "memtrail run wrote no reports"; exit 1; }

# Hostile targets in DIR. victim: the file a planted link points at.
make_targets() {
    local d=$1
    mkdir -p "$d"
    echo "precious data" >"$d/victim"
    ln -s "$d/victim" "$d/link"
    ln -s "$d/created-through-link" "$d/dangling"
    mkfifo "$d/fifo"
    mkdir "$d/dir"
    if [ "$is_root" = 1 ]; then
        mknod "$d/full" c 1 7
        mknod "$d/null" c 1 3
        echo "another user's" >"$d/theirs"
        chown 65534:65534 "$d/theirs"
    fi
}
targets="link dangling fifo dir"
[ "$is_root" = 1 ] && targets="$targets full null theirs"
[ "$is_root" = 1 ] || skip "outputs: device nodes, another user's file" "not root (mknod, chown)"

# --- memtrail run -o TARGET: refused before the program runs ------------------
make_targets "$T/run"
for t in $targets; do
    before=$(fingerprint "$T/run/$t")
    rm -f "$T/ran"
    run_mt timeout 30 "$MT_ASAN" run -o "$T/run/$t" -- /bin/sh -c "touch '$T/ran'"
    expect_eq "run -o $t: exit 1" 1 "$rc"
    expect_match "run -o $t: one line naming the file and why" \
        "^memtrail: cannot write the report to $T/run/$t: (is a symbolic link|is a directory|is not a regular file|is another user's file)" "$err"
    expect_eq "run -o $t: left as it was" "$before" "$(fingerprint "$T/run/$t")"
    expect_eq "run -o $t: the program did not run" "absent" "$(fingerprint "$T/ran")"
done
expect_eq "run -o link: the link's target untouched" "precious data" "$(cat "$T/run/victim")"
expect_eq "run -o dangling: nothing created through the link" absent "$(fingerprint "$T/run/created-through-link")"
before=$(fingerprint "$T/run/link")
run_mt "$MT_ASAN" run --mode trace -o "$T/run/link" -- /bin/ls /
expect_eq "run --mode trace -o link: exit 1, says why, link and victim untouched" \
    "1 memtrail: cannot write the trace to $T/run/link: is a symbolic link (not followed) $before precious data" \
    "$rc $err $(fingerprint "$T/run/link") $(cat "$T/run/victim")"
run_mt "$MT_ASAN" run -o - -- /bin/true
expect_match "run -o -: refused as bad usage (standard output is the program's)" "^2 memtrail: -o: '-'" "$rc $err"
# A file of the user's own is replaced, whole; a hard link to it keeps the old content.
echo old >"$T/run/mine.mtr"
ln "$T/run/mine.mtr" "$T/run/mine.hard"
run_mt "$MT_ASAN" run -o "$T/run/mine.mtr" -- /bin/true
expect_eq "run -o own file: replaced by the report, the hard link untouched" "0 memtrail-report 1 old" \
    "$rc $(head -1 "$T/run/mine.mtr") $(cat "$T/run/mine.hard")"
expect_eq "run: no temporary left behind" "" "$(ls "$T/run" | grep '\.tmp\.' || true)"

# --- memtrail export -o TARGET -------------------------------------------------
make_targets "$T/exp"
for fmt in pprof folded json; do
    for t in $targets; do
        before=$(fingerprint "$T/exp/$t")
        run_mt timeout 30 "$MT_ASAN" export "$T/d.mtr" --format $fmt -o "$T/exp/$t"
        expect_match "export $fmt -o $t: exit 1, one line naming the file and why" \
            "^1 memtrail: cannot write $T/exp/$t: (is a symbolic link|is a directory|is not a regular file|is another user's file)" \
            "$rc $err"
        expect_eq "export $fmt -o $t: left as it was" "$before" "$(fingerprint "$T/exp/$t")"
    done
done
expect_eq "export -o link: the link's target untouched" "precious data" "$(cat "$T/exp/victim")"
expect_eq "export -o dangling: nothing created through the link" absent "$(fingerprint "$T/exp/created-through-link")"
# The default pprof name (FILE.pb.gz) is held to the same rules.
cp "$T/d.mtr" "$T/exp/rep.mtr"
ln -s "$T/exp/victim" "$T/exp/rep.pb.gz"
run_mt "$MT_ASAN" export "$T/exp/rep.mtr" --format pprof
expect_eq "export pprof, default name a planted link: exit 1, victim untouched" \
    "1 memtrail: cannot write $T/exp/rep.pb.gz: is a symbolic link (not followed) precious data" \
    "$rc $err $(cat "$T/exp/victim")"
# A new file, then the same name again (the user's own: replaced); valid
# gzip each time, and no temporary left.
run_mt "$MT_ASAN" export "$T/d.mtr" --format pprof -o "$T/exp/new.pb.gz"
check "export pprof -o new file: a valid gzip" gzip -t "$T/exp/new.pb.gz"
echo stale >"$T/exp/again.json"
run_mt "$MT_ASAN" export "$T/d.mtr" --format json -o "$T/exp/again.json"
expect_eq "export json -o own file: replaced by the JSON" "0 True" \
    "$rc $(python3 -c 'import json,sys; print("sites" in json.load(open(sys.argv[1])))' "$T/exp/again.json" 2>&1)"
expect_eq "export: no temporary left behind" "" "$(ls "$T/exp" | grep '\.tmp\.' || true)"

# --- full and read-only file systems ------------------------------------------
if [ "$is_root" = 1 ] && mkdir "$T/small" && mount -t tmpfs -o size=64k tmpfs "$T/small" 2>/dev/null; then
    mounts+=("$T/small")
    # An older export there, then the disk filled to the last block.
    "$MT_ASAN" export "$T/d.mtr" --format folded -o "$T/small/old.folded" 2>/dev/null
    head -c 1000 /dev/urandom >"$T/small/old.folded"
    before=$(fingerprint "$T/small/old.folded")
    dd if=/dev/zero of="$T/small/fill" bs=4k 2>/dev/null || true
    run_mt "$MT_ASAN" export "$T/d.mtr" --format json -o "$T/small/old.folded"
    expect_eq "export to a full disk: exit 1, names the file and ENOSPC" \
        "1 memtrail: cannot write $T/small/old.folded: No space left on device" "$rc $(head -1 "$T/err")"
    expect_eq "export to a full disk: the older file is still there, unchanged" "$before" \
        "$(fingerprint "$T/small/old.folded")"
    expect_eq "export to a full disk: no temporary left behind" "fill old.folded" "$(ls "$T/small" | tr '\n' ' ' | sed 's/ $//')"
    rm -f "$T/small/fill" "$T/small/old.folded"
    # Full while the agent writes: the report is refused whole, the older one
    # kept. (sh, not ls: ls closes stderr at exit, before the agent can speak.)
    cp "$T/s.mtr" "$T/small/run.mtr"
    before=$(fingerprint "$T/small/run.mtr")
    dd if=/dev/zero of="$T/small/fill" bs=4k 2>/dev/null || true
    run_mt "$MT_ASAN" run --mode detail -o "$T/small/run.mtr" -- /bin/sh -c "echo hello"
    expect_match "run onto a full disk: the agent names the file and ENOSPC" \
        "memtrail: cannot write the report to $T/small/run.mtr: No space left on device" "$err"
    expect_eq "run onto a full disk: the older report is still there, unchanged; no temporary" \
        "$before fill run.mtr" "$(fingerprint "$T/small/run.mtr") $(ls "$T/small" | tr '\n' ' ' | sed 's/ $//')"
else
    skip "outputs: full disk" "not root or no tmpfs mount"
fi
if [ "$is_root" = 1 ] && mkdir "$T/ro" && mount -t tmpfs -o size=64k,ro tmpfs "$T/ro" 2>/dev/null; then
    mounts+=("$T/ro")
    run_mt "$MT_ASAN" export "$T/d.mtr" --format pprof -o "$T/ro/x.pb.gz"
    expect_eq "export to a read-only file system: exit 1, says so" \
        "1 memtrail: cannot write $T/ro/x.pb.gz: Read-only file system" "$rc $err"
    run_mt "$MT_ASAN" run -o "$T/ro/x.mtr" -- /bin/true
    expect_match "run -o on a read-only file system: exit 1 before running, says so" \
        "^1 memtrail: cannot write the report in $T/ro: Read-only file system" "$rc $err"
else
    skip "outputs: read-only file system" "not root or no tmpfs mount"
fi

# --- standard output that fails ------------------------------------------------
"$MT" run --mode trace -o "$T/t.mtt" -- /bin/ls / >/dev/null 2>&1
cmds=(
    "--help" "--version" "help run" "run --help" "report --help"
    "report $T/s.mtr" "report $T/s.mtr --json" "report $T/d.mtr" "report detail $T/d.mtr"
    "report detail $T/d.mtr --json" "diff $T/s.mtr $T/s.mtr" "diff $T/s.mtr $T/s.mtr --json"
    "diff $T/d.mtr $T/d.mtr" "xe plan --max-memory 4MB" "xe plan --max-memory 4MB --json" "xe plan --help"
    "export $T/d.mtr --format folded" "export $T/d.mtr --format json" "export $T/d.mtr --format pprof -o -"
    "analyze $T/t.mtt" "analyze $T/t.mtt --json" "report $T/t.mtt" "sessions --help" "query --help"
)
if [ -w /dev/full ]; then
    for c in "${cmds[@]}"; do
        # shellcheck disable=SC2086 # the command's words
        "$MT_ASAN" $c >/dev/full 2>"$T/err"
        rc=$?
        n=$(grep -c 'cannot write to standard output: No space left on device' "$T/err")
        expect_eq "memtrail $c > /dev/full: exit 1, said once" "1 1" "$rc $n"
    done
else
    skip "outputs: > /dev/full" "no writable /dev/full"
fi
# Closed standard output: a command that prints fails; one that prints
# nothing (run) is not hurt by it.
"$MT_ASAN" report "$T/s.mtr" >&- 2>"$T/err"
expect_eq "report with stdout closed: exit 1, says why" \
    "1 memtrail: cannot write to standard output: Bad file descriptor" "$? $(cat "$T/err")"
"$MT_ASAN" run -o "$T/closed.mtr" -- /bin/true >&- 2>"$T/err"
expect_eq "run with stdout closed: the program's status (0)" 0 "$?"

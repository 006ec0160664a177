# Shared helpers for the shell tests. Source it; it sets MT (the CLI),
# MT_ASAN (the ASan+UBSan build of the CLI), AGENT and T (a scratch dir).
set -u
MT_ROOT=${MT_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$MT_ROOT/$BUILD ;; esac
MT=$BUILD/bin/memtrail
MT_ASAN=$BUILD/asan/bin/memtrail
AGENT=$BUILD/lib/libmemtrail.so
TBIN=$BUILD/tests/agent
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
# check NAME COMMAND...: passes when the command succeeds.
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n" "command failed: $*"; fi; }
# expect_eq NAME EXPECTED ACTUAL
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected '$2', got '$3'"; fi; }
# expect_match NAME REGEX TEXT
expect_match() { if printf '%s' "$3" | grep -Eq -- "$2"; then pass "$1"; else fail "$1" "'$3' does not match /$2/"; fi; }
# json_get FILE EXPR: evaluates a Python expression over the parsed JSON `j`
# (python3 is the independent JSON parser here).
json_get() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
# flip_byte FILE OFFSET: inverts every bit of the byte at OFFSET, so the file
# always changes (writing a fixed value does nothing where the byte had it).
flip_byte() {
    python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1)[0]; f.seek(int(sys.argv[2])); f.write(bytes([b ^ 0xff]))' "$1" "$2"
}
# run_mt CMD...: runs it; sets rc, out and err (its stdout and stderr).
run_mt() {
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    out=$(cat "$T/out")
    err=$(cat "$T/err")
}
# contains NAME NEEDLE TEXT: passes when TEXT holds NEEDLE (a fixed string).
# A needle of several lines must appear whole, as one piece of text (grep
# -F alone takes each line for a pattern of its own, and any one would do).
contains() {
    local found=""
    case "$2" in
    *$'\n'*) [[ "$3" == *"$2"* ]] && found=1 ;;
    *) printf '%s' "$3" | grep -Fq -- "$2" && found=1 ;;
    esac
    if [ -n "$found" ]; then pass "$1"; else fail "$1" "no '$2' in: $(printf '%s' "$3" | head -c 2000)"; fi
}

# end_status OUT ERR [VAR=VALUE...] CMD...: runs CMD with stdout/stderr to
# files and prints how it ended: "signal SIGSEGV" or "exit N" (or "hung"
# after 60 s, so that a hang fails instead of blocking the suite). Leading
# VAR=VALUE words go to CMD's environment only; IGNORE=SIGNAME starts CMD
# with that signal ignored. CMD gets SIGPIPE and SIGXFSZ at the default
# (python, which runs it, ignores them for itself).
end_status() {
    python3 - "$@" <<'EOF'
import os, signal, subprocess, sys
out, err, args = sys.argv[1], sys.argv[2], sys.argv[3:]
env = dict(os.environ)
ignore = None
while args and '=' in args[0] and not args[0].startswith('/'):
    k, v = args.pop(0).split('=', 1)
    if k == 'IGNORE':
        ignore = getattr(signal, v)
    else:
        env[k] = v
def pre():
    for s in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(s, signal.SIG_DFL)
    if ignore:
        signal.signal(ignore, signal.SIG_IGN)
try:
    r = subprocess.run(args, env=env, stdout=open(out, 'w'), stderr=open(err, 'w'), timeout=60, preexec_fn=pre)
except subprocess.TimeoutExpired:
    print('hung'); sys.exit()
print('signal ' + signal.Signals(-r.returncode).name if r.returncode < 0 else 'exit %d' % r.returncode)
EOF
}

# Go programs leave by a raw exit_group: no exit handler runs, so the
# agent alone would never write a report. memtrail run holds that call
# (run_exit.c) until the agent has written it. A cgo program allocates
# known amounts in C; every mode must give its report, with exact figures,
# the program's output and exit status unchanged.
source "$(dirname "$0")/../lib.sh"
[ -x "$MT" ] && [ -f "$AGENT" ] || { fail setup "build first: $MT / $AGENT missing"; exit 1; }
command -v go >/dev/null || { fail go "go not installed (scripts/deps.sh installs golang-go)"; exit 0; }

mkdir -p "$T/src"
cp "$MT_ROOT/tests/agent/go/main.go" "$MT_ROOT/tests/agent/go/go.mod" "$T/src/"
if ! (cd "$T/src" && GOCACHE="$T/gocache" GOPATH="$T/gopath" GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=1 \
      CGO_CFLAGS="-I$MT_ROOT/include" CGO_LDFLAGS="-L$BUILD/lib -lmemtrail-stub -Wl,-rpath,$BUILD/lib" \
      go build -o "$T/gocgo" . >"$T/build.log" 2>&1); then
    fail "go: build the cgo program" "$(tail -5 "$T/build.log")"
    exit 0
fi
pass "go: build the cgo program"

bare=$("$T/gocgo" 3); bare_rc=$?
for mode in summary detail trace; do
    out=$(timeout -s KILL 60 "$MT" run --mode "$mode" -o "$T/g.$mode" -- "$T/gocgo" 3 2>"$T/err.$mode")
    rc=$?
    expect_eq "go, $mode: output and exit status as bare" "$bare_rc $bare" "$rc $out"
    if [ ! -f "$T/g.$mode" ]; then
        fail "go, $mode: report at exit" "none; stderr: $(cat "$T/err.$mode")"
        continue
    fi
    pass "go, $mode: report at exit"
    if [ "$mode" = trace ]; then
        "$MT" analyze --json "$T/g.trace" >"$T/a.json" 2>"$T/a.err"
        expect_eq "go, trace: the trace is complete (end record), the C part's 100 allocations in it" "True 0" \
            "$(json_get "$T/a.json" "'%s %d' % (j['complete'], j['events_lost'])")"
        continue
    fi
    "$MT" report --json "$T/g.$mode" >"$T/g.json"
    expect_eq "go, $mode: the C part's blocks to the byte" "50000 50 100 50 100000" \
        "$(json_get "$T/g.json" "' '.join(str(c[k]) for c in j['categories'] if c['name']=='go-c' for k in ('live_bytes','live_count','allocs','frees','peak_bytes'))")"
    expect_eq "go, $mode: reason exit" "exit" "$(json_get "$T/g.json" "j['reason']")"
done

# Without memtrail run the call is not held: the agent cannot know.
MEMTRAIL_OPTIONS="output=$T/plain.mtr" LD_PRELOAD=$AGENT "$T/gocgo" >/dev/null 2>&1
if [ -f "$T/plain.mtr" ]; then fail "go: LD_PRELOAD alone" "a report appeared: the test cannot tell run's hold from the agent's own"
else pass "go: with LD_PRELOAD alone, no report (the hold is memtrail run's)"; fi

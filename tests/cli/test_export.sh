#!/usr/bin/env bash
# `memtrail export FILE --format folded|pprof`. Fixtures are detail reports
# whose frames are real return addresses: tests/export/stackprog.c (built
# here with -O0 -g, with its shared library) records them in known call
# chains (one through an inlined function, one into the library) along with
# its modules' load biases, spans and build-ids, and
# tests/export/make_fixture.py writes the .mtr and the truth (per site its
# counters, frames and the functions of its chain by construction). The
# folded output is compared with stacks and sums computed from that truth;
# the pprof file is read back by two decoders independent of memtrail's
# encoder — protoc --decode with tests/export/profile.proto and
# `go tool pprof -raw` — and compared with the same truth and, for line
# numbers, with addr2line. Every CLI call runs the ASan+UBSan build.
. "$(dirname "$0")/../lib.sh"

X=$MT_ROOT/tests/export
[ -x "$MT_ASAN" ] || { fail export-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }


# --- the test program and its fixtures ------------------------------------------
mkdir -p "$T/bin"
if ! cc -O0 -g -fPIC -shared -o "$T/bin/libstacklib.so" "$X/stacklib.c" ||
   ! cc -O0 -g -o "$T/bin/stackprog" "$X/stackprog.c" -L"$T/bin" -lstacklib -Wl,-rpath,'$ORIGIN'; then
    fail export-stackprog "cannot build tests/export/stackprog.c"
    exit 1
fi
"$T/bin/stackprog" >"$T/prog.out" || { fail export-stackprog "stackprog failed"; exit 1; }
check export-stackprog-output grep -q '^module lib ' "$T/prog.out"
python3 "$X/make_fixture.py" "$T/prog.out" "$T/app.mtr" "$T/app.json"
cp "$T/bin/stackprog" "$T/bin/stackprog.stripped"
strip "$T/bin/stackprog.stripped"
python3 "$X/make_fixture.py" "$T/prog.out" "$T/stripped.mtr" "$T/stripped.json" --prog-path "$T/bin/stackprog.stripped"
python3 "$X/make_fixture.py" "$T/prog.out" "$T/cut.mtr" "$T/cut.json" --truncate
# an older agent's report: no allocated_bytes on its site lines
python3 "$X/make_fixture.py" "$T/prog.out" "$T/old.mtr" "$T/old.json" --no-allocated
# the library's module listed before the program's (a trace lists ld.so first)
python3 "$X/make_fixture.py" "$T/prog.out" "$T/libfirst.mtr" "$T/libfirst.json" --lib-first
expect_eq export-fixtures-allocated "7 0" \
    "$(grep -c '^site .* allocated_bytes=' "$T/app.mtr") $(grep -c 'allocated_bytes' "$T/old.mtr")"

# folded_truth TRUTH COUNTER: the folded lines the truth implies: the
# chains' names root first, the counter summed over sites with the same
# names, non-positive sums left out, sorted by stack (bytewise).
folded_truth() {
    python3 - "$1" "$2" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
sums = {}
for s in t["sites"]:
    k = ";".join(s["names"])
    sums[k] = sums.get(k, 0) + s[sys.argv[2]]
for k in sorted(sums, key=lambda x: x.encode()):
    if sums[k] > 0:
        print("%s %d" % (k, sums[k]))
PY
}
# the sum of a folded file's values, and the report's total line's live_bytes
folded_sum() { python3 -c 'import sys; print(sum(int(l.rsplit(None, 1)[1]) for l in open(sys.argv[1])))' "$1"; }
report_total() { sed -n 's/^total live_bytes=\([0-9]*\) .*/\1/p' "$1"; }

# --- folded ------------------------------------------------------------------
run_mt "$MT_ASAN" export "$T/app.mtr" --format folded
expect_eq export-folded-rc 0 "$rc"
expect_eq export-folded-stacks "$(folded_truth "$T/app.json" live_bytes)" "$out"
expect_eq export-folded-no-stderr "" "$err"
printf '%s\n' "$out" >"$T/app.folded"
expect_eq export-folded-total "$(report_total "$T/app.mtr")" "$(folded_sum "$T/app.folded")"
# the two call sites of parse_config (and its two categories) fold into one line
expect_eq export-folded-merged "main;load_settings;parse_config 5120" \
    "$(grep '^main;load_settings;parse_config ' "$T/app.folded")"
expect_eq export-folded-inlined "main;build_index;index_insert 1099511627779" \
    "$(grep 'index_insert' "$T/app.folded")"
expect_eq export-folded-no-module "0x10 16" "$(grep '^0x' "$T/app.folded")"
expect_eq export-folded-no-frames "[unknown] 32" "$(grep '^\[unknown\]' "$T/app.folded")"
# the library's site has no live bytes: left out
expect_eq export-folded-zero-left-out "" "$(grep lib_alloc "$T/app.folded")"
for v in live_count allocs frees reallocs peak_bytes allocated_bytes; do
    run_mt "$MT_ASAN" export "$T/app.mtr" --format folded --value "$v"
    expect_eq "export-folded-value-$v" "0 $(folded_truth "$T/app.json" "$v")" "$rc $out"
done
expect_eq export-folded-lib-allocated "main;lib_make_buffer;lib_alloc 5632" \
    "$("$MT_ASAN" export "$T/app.mtr" --format folded --value allocated_bytes | grep lib_alloc)"
# the older report: the same stacks; --value allocated_bytes refused (exit 1)
run_mt "$MT_ASAN" export "$T/old.mtr" --format folded
expect_eq export-folded-old "0 $(folded_truth "$T/old.json" live_bytes)" "$rc $out"
run_mt "$MT_ASAN" export "$T/old.mtr" --format folded --value allocated_bytes
expect_eq export-folded-old-allocated-rc "1 " "$rc $out"
contains export-folded-old-allocated-message "old.mtr: its sites have no allocated_bytes" "$err"
expect_eq export-folded-lib-allocs "main;lib_make_buffer;lib_alloc 11" \
    "$("$MT_ASAN" export "$T/app.mtr" --format folded --value=allocs | grep lib_alloc)"
# frames are each a stack's per-line sum: every line's value is a sum of site values
run_mt "$MT_ASAN" export "$T/app.mtr" --format folded -o "$T/o.folded"
expect_eq export-folded-o "0 $(cat "$T/app.folded")" "$rc $(cat "$T/o.folded")"
run_mt "$MT_ASAN" export - --format folded <"$T/app.mtr"
expect_eq export-folded-stdin "0 $(cat "$T/app.folded")" "$rc $out"

# A stripped program: its frames are MODULE+0xOFFSET (the ELF address), the
# library's still named.
run_mt "$MT_ASAN" export "$T/stripped.mtr" --format folded
expect_eq export-folded-stripped "0 $(folded_truth "$T/stripped.json" live_bytes)" "$rc $out"
contains export-folded-stripped-offset "stackprog.stripped+0x" "$out"

# A module whose file is gone: its frames are MODULE+0xOFFSET, a warning
# names it, and the export still succeeds.
sed "s|path=$T/bin/stackprog\$|path=$T/bin/gone|" "$T/app.mtr" >"$T/gone.mtr"
run_mt "$MT_ASAN" export "$T/gone.mtr" --format folded
expect_eq export-folded-gone-rc 0 "$rc"
contains export-folded-gone-warning "memtrail: warning: $T/bin/gone" "$err"
contains export-folded-gone-offset "gone+0x" "$out"

# --- pprof -----------------------------------------------------------------------
run_mt "$MT_ASAN" export "$T/app.mtr" --format pprof
expect_eq export-pprof-rc 0 "$rc"
check export-pprof-default-name test -s "$T/app.pb.gz"
contains export-pprof-says-where "$T/app.pb.gz" "$err"
check export-pprof-gzip gzip -t "$T/app.pb.gz"
gzip -dc "$T/app.pb.gz" | protoc --proto_path="$X" --decode=perftools.profiles.Profile profile.proto \
    >"$T/app.protoc" 2>"$T/protoc.err"
expect_eq export-pprof-protoc-decodes "0 " "${PIPESTATUS[1]} $(cat "$T/protoc.err")"
python3 "$X/check_pprof.py" protoc "$T/app.protoc" "$T/app.json" export-pprof-protoc --addr2line
# the program's module last in the report: its Mapping still first (pprof's
# main binary), the Locations' mapping ids following it
run_mt "$MT_ASAN" export "$T/libfirst.mtr" --format pprof -o "$T/libfirst.pb.gz"
gzip -dc "$T/libfirst.pb.gz" | protoc --proto_path="$X" --decode=perftools.profiles.Profile profile.proto \
    >"$T/libfirst.protoc" 2>"$T/protoc.err"
python3 "$X/check_pprof.py" protoc "$T/libfirst.protoc" "$T/libfirst.json" export-pprof-libfirst-protoc --addr2line

if command -v go >/dev/null 2>&1; then
    go tool pprof -raw -symbolize=none "$T/app.pb.gz" >"$T/app.raw" 2>"$T/go.err"
    expect_eq export-pprof-go-reads "0" "$?"
    python3 "$X/check_pprof.py" goraw "$T/app.raw" "$T/app.json" export-pprof-go
    # inlined frames: two Lines in one Location, innermost first
    expect_match export-pprof-inline-lines 'index_insert .* build_index ' \
        "$(grep -A1 ' index_insert ' "$T/app.raw" | tr '\n' ' ')"
    # go's own totals per sample type equal the report's
    total=$(report_total "$T/app.mtr")
    expect_match export-pprof-go-total "Total samples = ${total}B" \
        "$(go tool pprof -top -unit=byte -sample_index=inuse_space -symbolize=none "$T/app.pb.gz" 2>&1)"
    allocs=$(sed -n 's/^total .* allocs=\([0-9]*\) .*/\1/p' "$T/app.mtr")
    expect_match export-pprof-go-allocs "Total samples = $allocs " \
        "$(go tool pprof -top -sample_index=alloc_objects -symbolize=none "$T/app.pb.gz" 2>&1)"
    allocated=$(python3 -c 'import json,sys; print(sum(s["allocated_bytes"] for s in json.load(open(sys.argv[1]))["sites"]))' "$T/app.json")
    expect_match export-pprof-go-alloc-space "Total samples = ${allocated}B" \
        "$(go tool pprof -top -unit=byte -sample_index=alloc_space -symbolize=none "$T/app.pb.gz" 2>&1)"
    # --value picks the default sample type
    run_mt "$MT_ASAN" export "$T/app.mtr" --format pprof --value live_count -o "$T/count.pb.gz"
    expect_match export-pprof-default-type 'inuse_objects/count\[dflt\]' \
        "$(go tool pprof -raw -symbolize=none "$T/count.pb.gz" 2>&1 | grep dflt)"
    run_mt "$MT_ASAN" export "$T/app.mtr" --format pprof --value allocated_bytes -o "$T/alloc.pb.gz"
    expect_eq export-pprof-allocated-rc 0 "$rc"
    expect_match export-pprof-default-alloc-space 'alloc_space/bytes\[dflt\]' \
        "$(go tool pprof -raw -symbolize=none "$T/alloc.pb.gz" 2>&1 | grep dflt)"
    # go's per-function flat alloc_space equals the truth's sums by innermost function
    # (go marks an inlined one "NAME (inline)")
    top=$(go tool pprof -top -unit=byte -nodefraction=0 -sample_index=alloc_space -symbolize=none "$T/app.pb.gz" 2>&1 |
        sed 's/ (inline)$//')
    while read -r fn want; do
        expect_match "export-pprof-go-alloc-space-$fn" "^ *${want}B .* $fn\$" "$(grep " $fn\$" <<<"$top")"
    done < <(python3 - "$T/app.json" <<'PY'
import json, sys
sums = {}
for s in json.load(open(sys.argv[1]))["sites"]:
    leaf = s["names"][-1]
    if not leaf.startswith("0x") and not leaf.startswith("["):
        sums[leaf] = sums.get(leaf, 0) + s["allocated_bytes"]
for k in sorted(sums):
    print(k, sums[k])
PY
)
    # the older report: no alloc_space, the rest as before
    "$MT_ASAN" export "$T/old.mtr" --format pprof -o "$T/old.pb.gz" 2>/dev/null
    go tool pprof -raw -symbolize=none "$T/old.pb.gz" >"$T/old.raw" 2>&1
    python3 "$X/check_pprof.py" goraw "$T/old.raw" "$T/old.json" export-pprof-old-go
    # the stripped program: its locations carry no lines, the library's do
    "$MT_ASAN" export "$T/stripped.mtr" --format pprof -o "$T/stripped.pb.gz" 2>/dev/null
    go tool pprof -raw -symbolize=none "$T/stripped.pb.gz" >"$T/stripped.raw" 2>&1
    python3 "$X/check_pprof.py" goraw "$T/stripped.raw" "$T/stripped.json" export-pprof-stripped
    # the program's module last in the report: go tool pprof names the program
    go tool pprof -raw -symbolize=none "$T/libfirst.pb.gz" >"$T/libfirst.raw" 2>&1
    python3 "$X/check_pprof.py" goraw "$T/libfirst.raw" "$T/libfirst.json" export-pprof-libfirst-go
    expect_eq export-pprof-libfirst-go-file "File: stackprog" \
        "$(go tool pprof -top -symbolize=none "$T/libfirst.pb.gz" 2>&1 | grep '^File: ')"
else
    echo "SKIP export-pprof-go: no go (scripts/deps.sh installs golang-go)"
    pass export-pprof-go-skipped-visibly
fi

# --- truncated, summary-only, errors ---------------------------------------------
run_mt "$MT_ASAN" export "$T/cut.mtr" --format folded
expect_eq export-truncated-rc 1 "$rc"
expect_eq export-truncated-folded "$(folded_truth "$T/cut.json" live_bytes)" "$out"
contains export-truncated-message "cut.mtr" "$err"
run_mt "$MT_ASAN" export "$T/cut.mtr" --format pprof
expect_eq export-truncated-pprof-rc 1 "$rc"
gzip -dc "$T/cut.pb.gz" | protoc --proto_path="$X" --decode=perftools.profiles.Profile profile.proto >"$T/cut.protoc"
python3 "$X/check_pprof.py" protoc "$T/cut.protoc" "$T/cut.json" export-truncated-pprof

# an older report through protoc: three sample types, a comment saying why
run_mt "$MT_ASAN" export "$T/old.mtr" --format pprof
expect_eq export-pprof-old-rc 0 "$rc"
gzip -dc "$T/old.pb.gz" | protoc --proto_path="$X" --decode=perftools.profiles.Profile profile.proto >"$T/old.protoc"
python3 "$X/check_pprof.py" protoc "$T/old.protoc" "$T/old.json" export-pprof-old-protoc
run_mt "$MT_ASAN" export "$T/old.mtr" --format pprof --value allocated_bytes -o "$T/old2.pb.gz"
expect_eq export-pprof-old-allocated-rc 1 "$rc"
contains export-pprof-old-allocated-message "its sites have no allocated_bytes" "$err"
check export-pprof-old-allocated-no-output test ! -e "$T/old2.pb.gz"

cat >"$T/summary.mtr" <<'EOF2'
memtrail-report 1
pid 7
ppid 1
exe /bin/true
cmdline true
mode summary
start_ns 1
end_ns 2
reason exit
category malloc kind=malloc live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0
total live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 reallocs=0
errors double_free=0 bad_canary=0 foreign_free=0
end
EOF2
run_mt "$MT_ASAN" export "$T/summary.mtr" --format pprof
expect_eq export-summary-rc 1 "$rc"
contains export-summary-message "summary.mtr: not a detail report" "$err"
check export-summary-no-output test ! -e "$T/summary.pb.gz"
run_mt "$MT_ASAN" export "$T/summary.mtr" --format folded
expect_eq export-summary-folded "1 " "$rc $out"

run_mt "$MT_ASAN" export "$T/app.mtr" --format svg
expect_eq export-unknown-format-rc 2 "$rc"
contains export-unknown-format-message "unknown format 'svg'" "$err"
run_mt "$MT_ASAN" export "$T/app.mtr"
expect_eq export-no-format 2 "$rc"
run_mt "$MT_ASAN" export --format folded
expect_eq export-no-file 2 "$rc"
run_mt "$MT_ASAN" export "$T/app.mtr" --format folded --value bogus
expect_eq export-bad-value 2 "$rc"
run_mt "$MT_ASAN" export "$T/app.mtr" --format pprof --value peak_bytes
expect_eq export-pprof-bad-value 2 "$rc"
run_mt "$MT_ASAN" export - --format pprof <"$T/app.mtr"
expect_eq export-pprof-stdin-needs-o 2 "$rc"
run_mt "$MT_ASAN" export "$T/app.mtr" --format pprof -o "$T/no/such/dir/x.pb.gz"
expect_eq export-unwritable-rc 1 "$rc"
contains export-unwritable-message "$T/no/such/dir/x.pb.gz" "$err"
run_mt "$MT_ASAN" export "$T/missing.mtr" --format folded
expect_eq export-missing-input "1" "$rc"
contains export-missing-input-message "missing.mtr" "$err"
run_mt "$MT_ASAN" export --help
expect_eq export-help "0" "$rc"
contains export-help-text "--format folded|pprof" "$out"
run_mt "$MT_ASAN" help export
expect_eq export-help-command "0" "$rc"

# --- end to end: a real detail report -------------------------------------------
# tests/agent/detail.c allocates from known functions and prints its ledger
# ("fn NAME live_bytes N live_count N allocs N"); the exports, attributed by
# their innermost function (an inlined helper counts for the function it was
# inlined into), must give the ledger's numbers, and their totals the
# report's total.
if [ -x "$TBIN/detail" ] && [ -e "$AGENT" ]; then
    "$MT" run --mode detail -o "$T/e2e.mtr" -- "$TBIN/detail" threads 2 recurse 3 >"$T/e2e.ledger" 2>/dev/null
    expect_eq e2e-run-complete "end" "$(tail -n1 "$T/e2e.mtr")"
    # by_leaf FOLDED: "NAME SUM" per innermost function
    by_leaf() {
        python3 - "$1" "$T/e2e.ledger" "$2" <<'PY'
import sys
sums = {}
for line in open(sys.argv[1]):
    stack, value = line.rsplit(None, 1)
    frames = stack.split(";")
    leaf = frames[-1]
    if leaf == "inlined_alloc" and len(frames) > 1:
        leaf = frames[-2]
    sums[leaf] = sums.get(leaf, 0) + int(value)
for line in open(sys.argv[2]):
    f = line.split()
    if sys.argv[3] not in f:    # the ledger gives allocated_bytes for some functions only
        continue
    want = int(f[f.index(sys.argv[3]) + 1])
    print("%s %s" % (f[1], "ok" if sums.get(f[1], 0) == want else "ledger %d, export %d" % (want, sums.get(f[1], 0))))
PY
    }
    for v in live_bytes allocs allocated_bytes; do
        "$MT_ASAN" export "$T/e2e.mtr" --format folded --value "$v" -o "$T/e2e.$v.folded"
        expect_eq "e2e-folded-$v-rc" 0 "$?"
        while read -r fn verdict; do
            expect_eq "e2e-folded-$v-$fn" ok "$verdict"
        done < <(by_leaf "$T/e2e.$v.folded" "$v")
    done
    expect_eq e2e-folded-total "$(report_total "$T/e2e.mtr")" "$(folded_sum "$T/e2e.live_bytes.folded")"
    expect_eq e2e-folded-inlined "main;inline_host;inlined_alloc 2100" \
        "$(grep -o 'main;inline_host;inlined_alloc [0-9]*$' "$T/e2e.live_bytes.folded")"
    "$MT_ASAN" export "$T/e2e.mtr" --format pprof 2>/dev/null
    expect_eq e2e-pprof-rc 0 "$?"
    gzip -dc "$T/e2e.pb.gz" | protoc --proto_path="$X" --decode=perftools.profiles.Profile profile.proto >"$T/e2e.protoc"
    expect_eq e2e-pprof-protoc-samples "$(grep -c '^site ' "$T/e2e.mtr")" "$(grep -c '^sample {' "$T/e2e.protoc")"
    if command -v go >/dev/null 2>&1; then
        top=$(go tool pprof -top -unit=byte -nodefraction=0 -symbolize=none "$T/e2e.pb.gz" 2>&1)
        expect_match e2e-pprof-go-total "Total samples = $(report_total "$T/e2e.mtr")B" "$top"
        for fn in from_static detail_lib_alloc regrow thread_work recurse; do
            want=$(awk -v f="$fn" '$2 == f { print $4 }' "$T/e2e.ledger")
            expect_match "e2e-pprof-go-flat-$fn" "^ *${want}B .* $fn\$" "$(grep " $fn\$" <<<"$top")"
        done
        # alloc_space: go's flat bytes per innermost function equal the ledger's allocated_bytes
        # (every function whose ledger line has it and that no inlined helper hides)
        top=$(go tool pprof -top -unit=byte -nodefraction=0 -sample_index=alloc_space -symbolize=none "$T/e2e.pb.gz" 2>&1)
        expect_match e2e-pprof-go-alloc-space-type "Type: alloc_space" "$top"
        n=0
        while read -r fn want; do
            n=$((n + 1))
            expect_match "e2e-pprof-go-alloc-space-$fn" "^ *${want}B .* $fn\$" "$(grep " $fn\$" <<<"$top")"
        done < <(awk '$1 == "fn" && $2 != "inline_host" { for (i = 2; i < NF; i++) if ($i == "allocated_bytes") print $2, $(i + 1) }' "$T/e2e.ledger")
        [ "$n" -ge 5 ] && pass e2e-pprof-go-alloc-space-functions || fail e2e-pprof-go-alloc-space-functions "only $n ledger lines with allocated_bytes"
    fi
else
    echo "SKIP e2e: $TBIN/detail or the agent not built"
fi

# --- traces with caveats ----------------------------------------------------------
# Real traces the figures of which cannot be exact: events lost (tests/agent/
# tracer.c flood through a small buffer: the agent's exit line counts them),
# begun on demand while tests/agent/held.c holds 64 blocks, and one cut short
# (a complete trace's file cut at 2/3). Every format states each caveat on
# stderr, one CAUTION line each as `memtrail analyze` words it (its text,
# unwrapped), and pprof's comments hold the same lines (read back by protoc
# and, when there, go tool pprof -comments). A complete trace has none.
# caveats_of ERR: the CAUTION lines of an export's stderr, without the prefix
caveats_of() { printf '%s\n' "$1" | sed -n 's/^memtrail: [^ ]*: \(CAUTION: .*\)$/\1/p'; }
# comments_of FILE.pb.gz: the profile's comments, one a line (protoc's decoding)
comments_of() {
    gzip -dc "$1" | protoc --proto_path="$X" --decode=perftools.profiles.Profile profile.proto >"$T/c.protoc" &&
        python3 "$X/check_pprof.py" comments "$T/c.protoc"
}
# flat TEXT: analyze's text with its CAUTIONs' wrapping undone
flat() { printf '%s\n' "$1" | tr '\n' ' ' | sed 's/  */ /g'; }
# export_caveats NAME TRACE WANT_RC: runs every format on TRACE; checks the
# exit status and that each prints the same CAUTION lines (kept in
# $T/NAME.caveats), and that pprof's comments end with them.
export_caveats() {
    local name=$1 tr=$2 want_rc=$3 f
    run_mt "$MT_ASAN" export "$tr" --format folded
    caveats_of "$err" >"$T/$name.caveats"
    expect_eq "export-caveats-$name-folded-rc" "$want_rc" "$rc"
    for f in pprof json; do
        run_mt "$MT_ASAN" export "$tr" --format "$f" -o "$T/$name.$f"
        expect_eq "export-caveats-$name-$f-rc" "$want_rc" "$rc"
        expect_eq "export-caveats-$name-$f-same-lines" "$(cat "$T/$name.caveats")" "$(caveats_of "$err")"
    done
    expect_eq "export-caveats-$name-pprof-comments" "$(cat "$T/$name.caveats")" \
        "$(comments_of "$T/$name.pprof" | grep '^CAUTION: ')"
    # memtrail report of the trace, as a detail report (its default), as a
    # summary and as JSON: the same lines (before, none)
    run_mt "$MT_ASAN" report "$tr"
    expect_eq "report-caveats-$name-detail-same-lines" "$(cat "$T/$name.caveats")" "$(caveats_of "$err")"
    run_mt "$MT_ASAN" report summary "$tr"
    expect_eq "report-caveats-$name-summary-same-lines" "$(cat "$T/$name.caveats")" "$(caveats_of "$err")"
    run_mt "$MT_ASAN" report --json "$tr"
    expect_eq "report-caveats-$name-json-same-lines" "$(cat "$T/$name.caveats")" "$(caveats_of "$err")"
    if command -v go >/dev/null 2>&1; then
        expect_eq "export-caveats-$name-go-pprof-comments" "$(cat "$T/$name.caveats")" \
            "$(go tool pprof -comments "$T/$name.pprof" 2>/dev/null | grep '^CAUTION: ')"
    fi
}
if [ -e "$AGENT" ] && [ -x "$TBIN/tracer" ] && [ -x "$TBIN/held" ]; then
    # events lost: the count the agent gave as the program ended
    run_mt "$MT" run --mode trace --allow-loss --trace-buffer 192KB -o "$T/lost.mtt" -- "$TBIN/tracer" flood 3000000
    lost=$(printf '%s' "$err" | sed -n 's/.*trace: [0-9]* events, \([0-9]*\) lost.*/\1/p')
    written=$(printf '%s' "$err" | sed -n 's/.*trace: \([0-9]*\) events, [0-9]* lost.*/\1/p')
    if [ -n "$lost" ] && [ "$lost" -gt 0 ]; then
        export_caveats lost "$T/lost.mtt" 0
        expect_match export-caveats-lost-count \
            "^CAUTION: $lost of $((written + lost)) events \([0-9.]+%\) were lost while recording; " \
            "$(grep 'were lost' "$T/lost.caveats")"
        "$MT" analyze --json "$T/lost.mtt" >"$T/lost.json" 2>/dev/null
        # the frees of blocks whose allocation was lost, as analyze counts them
        fu=$(json_get "$T/lost.json" "'%d %d' % (j['frees_unknown'], j['reallocs_unknown'])")
        if [ "$fu" != "0 0" ]; then
            expect_match export-caveats-lost-unknown "^CAUTION: ${fu% *} frees and ${fu#* } reallocs name blocks the trace does not hold" \
                "$(grep 'name blocks' "$T/lost.caveats")"
        else
            expect_eq export-caveats-lost-no-unknown "" "$(grep 'name blocks' "$T/lost.caveats")"
        fi
        expect_eq export-caveats-lost-lines "$([ "$fu" != "0 0" ] && echo 2 || echo 1)" "$(wc -l <"$T/lost.caveats")"
        a=$(flat "$("$MT" analyze "$T/lost.mtt" 2>/dev/null)")
        contains export-caveats-lost-as-analyze "$(grep -o '^CAUTION: .* were lost while recording' "$T/lost.caveats")" "$a"
        [ "$fu" = "0 0" ] || contains export-caveats-unknown-as-analyze "$(grep 'name blocks' "$T/lost.caveats")" "$a"
    else
        fail export-caveats-lost "the small buffer lost no event: $err"
    fi

    # begun on demand while the program held 64 blocks
    mkdir -p "$T/held"
    MEMTRAIL_OPTIONS="mode=trace:start=off:output=$T/held/startup.mtt" LD_PRELOAD=$AGENT "$TBIN/held" "$T/held" \
        >"$T/held/out" 2>&1 &
    hpid=$!
    for _ in $(seq 1500); do [ -e "$T/held/ready" ] && break; sleep 0.02; done
    "$MT" query "$hpid" start trace -o "$T/late.mtt" >"$T/held/query" 2>&1
    touch "$T/held/go"
    wait "$hpid"
    export_caveats late "$T/late.mtt" 0
    expect_eq export-caveats-late-line \
        "CAUTION: the trace began on demand (memtrail query PID start trace), after the program had run: blocks allocated before it began are in no figure (their frees, if any, are frees of unknown blocks), so live, leaks and the peak may be lower than the program's by an amount the trace cannot tell" \
        "$(cat "$T/late.caveats")"
    contains export-caveats-late-as-analyze "$(cat "$T/late.caveats")" "$(flat "$("$MT" analyze "$T/late.mtt" 2>/dev/null)")"

    # cut short: every whole chunk exported, the caveat, then the error (exit 1)
    run_mt "$MT" run --mode trace --no-loss -o "$T/whole.mtt" -- "$TBIN/tracer" flood 600000
    size=$(stat -c %s "$T/whole.mtt")
    head -c $((size * 2 / 3)) "$T/whole.mtt" >"$T/cut.mtt"
    export_caveats cut "$T/cut.mtt" 1
    expect_eq export-caveats-cut-line \
        "CAUTION: the trace is incomplete (no end record, or reading stopped early): the events after what was read, and the count of events lost, are unknown; live and leaks may hold blocks freed later, and every figure covers only the events read" \
        "$(cat "$T/cut.caveats")"
    run_mt "$MT_ASAN" export "$T/cut.mtt" --format folded
    expect_match export-caveats-cut-then-error "^memtrail: $T/cut\.mtt: CAUTION: the trace is incomplete .*memtrail: $T/cut\.mtt: chunk [0-9]+" \
        "$(printf '%s\n' "$err" | tail -n 2 | tr '\n' ' ')"

    # the complete trace: no caveat
    export_caveats whole "$T/whole.mtt" 0
    expect_eq export-caveats-whole-none "" "$(cat "$T/whole.caveats")"
    expect_eq export-caveats-whole-trace-comment "memtrail trace $T/whole.mtt" "$(comments_of "$T/whole.pprof" | head -1)"
else
    echo "SKIP export-caveats: the agent, $TBIN/tracer or $TBIN/held not built"
fi

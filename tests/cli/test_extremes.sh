#!/usr/bin/env bash
# Extreme values through every printer: a report whose integers are the
# limits of int64 (INT64_MIN start, INT64_MAX end, counters at both ends,
# the largest site ID) is read and shown by report (text, JSON), report
# detail (text, JSON), diff (against itself and against an ordinary
# report), the process tree, and export (folded, pprof, json), all in the
# ASan+UBSan build, which stops at any signed overflow. The JSON must give
# the file's numbers back exactly (python3 reads them), differences that do
# not fit must saturate, and pprof's duration (end - start, 2^64 - 1 here)
# must be clamped to INT64_MAX (read back by protoc with
# tests/export/profile.proto, an independent decoder).
. "$(dirname "$0")/../lib.sh"

[ -x "$MT_ASAN" ] || { fail extremes-build "$MT_ASAN missing (make build/asan/bin/memtrail)"; exit 1; }
MIN=-9223372036854775808
MAX=9223372036854775807
unset DEBUGINFOD_URLS

cat >"$T/x.mtr" <<EOF
memtrail-report 1
pid $MAX
ppid $MAX
exe /x
cmdline x
mode detail
start_ns $MIN
end_ns $MAX
reason exit
category big kind=malloc live_bytes=$MAX live_count=$MIN peak_bytes=$MAX allocs=$MIN frees=$MAX reallocs=$MIN reserved=$MAX committed=$MIN resident=$MAX mappings=$MIN
category neg kind=vm live_bytes=$MIN live_count=$MAX peak_bytes=$MIN allocs=$MAX frees=$MIN reallocs=$MAX reserved=$MIN committed=$MAX resident=$MIN mappings=$MAX
category memtrail kind=overhead live_bytes=$MAX live_count=1 peak_bytes=$MAX allocs=1 frees=0 reallocs=0 reserved=$MAX committed=$MAX resident=$MAX mappings=1
total live_bytes=$MAX live_count=$MIN peak_bytes=$MAX allocs=$MAX frees=$MIN reallocs=$MAX
process rss_bytes=$MAX peak_rss_bytes=$MIN reserved=$MAX committed=$MIN resident=$MAX
errors double_free=$MAX bad_canary=$MIN foreign_free=$MAX
stack_depth 4
unwinder cfi
module 0 bias=0xffffffffffffffff start=0x0 end=0xffffffffffffffff buildid=- path=/nonexistent/x
site 1 category=big live_bytes=$MAX live_count=$MAX peak_bytes=$MAX allocs=$MAX frees=$MIN reallocs=$MIN allocated_bytes=$MAX frames=0xffffffffffffffff,0x0,0x1
site $MAX category=big live_bytes=$MIN live_count=$MIN peak_bytes=$MIN allocs=$MIN frees=$MAX reallocs=$MAX allocated_bytes=$MIN frames=0x1
sites count=2 dropped=$MAX
end
EOF
cat >"$T/plain.mtr" <<'EOF'
memtrail-report 1
pid 1
mode detail
start_ns 1000
end_ns 2000
reason exit
category big kind=malloc live_bytes=-5 live_count=1 peak_bytes=1 allocs=1 frees=0 reallocs=0 reserved=0 committed=0 resident=0 mappings=0
total live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 reallocs=0
stack_depth 4
site 1 category=big live_bytes=-5 live_count=1 peak_bytes=1 allocs=1 frees=0 reallocs=0 allocated_bytes=1 frames=0x1
sites count=1 dropped=0
end
EOF

# every_printer NAME CMD...: exit 0 and some output, under ASan+UBSan.
every_printer() {
    local name=$1; shift
    run_mt timeout 60 "$MT_ASAN" "$@"
    if [ "$rc" -eq 0 ] && [ -s "$T/out" ]; then pass "$name"
    else fail "$name" "status $rc: $(head -c 400 "$T/err")"; fi
}
every_printer extremes-report report "$T/x.mtr"
every_printer extremes-report-gb report "$T/x.mtr" --scale GB
every_printer extremes-report-json report "$T/x.mtr" --json
cp "$T/out" "$T/x.json"
every_printer extremes-detail report detail "$T/x.mtr"
every_printer extremes-detail-json report detail "$T/x.mtr" --json --sort allocated
every_printer extremes-diff-self diff "$T/x.mtr" "$T/x.mtr"
every_printer extremes-diff-json diff "$T/plain.mtr" "$T/x.mtr" --json
cp "$T/out" "$T/d.json"
every_printer extremes-diff-back diff "$T/x.mtr" "$T/plain.mtr" --json
every_printer extremes-tree report "$T/x.mtr" "$T/plain.mtr" "$T/x.mtr" --json
every_printer extremes-folded export "$T/x.mtr" --format folded --value allocated_bytes
every_printer extremes-export-json export "$T/x.mtr" --format json
run_mt timeout 60 "$MT_ASAN" export "$T/x.mtr" --format pprof -o "$T/x.pb.gz"
expect_eq extremes-pprof-status 0 "$rc"

# The numbers come back exactly.
expect_eq extremes-json-exact \
    "$MAX $MIN $MAX $MIN $MAX $MIN $MAX $MIN" \
    "$(json_get "$T/x.json" '" ".join(str(v) for v in (j["pid"], j["start_ns"], j["end_ns"], j["total"]["live_count"], j["process"]["rss_bytes"], j["process"]["peak_rss_bytes"], j["errors"]["double_free"], j["errors"]["bad_canary"]))')"
# A difference that does not fit saturates: plain -> x, live bytes
# -5 -> INT64_MAX is INT64_MAX (not a wrapped negative number).
expect_eq extremes-diff-saturates "$MAX" \
    "$(json_get "$T/d.json" '[c["live_bytes_delta"] for c in j["categories"] if c["name"] == "big"][0]')"
# pprof: time_nanos is the start, duration_nanos end - start clamped.
if gzip -dc "$T/x.pb.gz" >"$T/x.pb" 2>/dev/null &&
   protoc --decode=perftools.profiles.Profile -I"$MT_ROOT/tests/export" profile.proto <"$T/x.pb" >"$T/x.txt" 2>"$T/protoc.err"; then
    expect_eq extremes-pprof-time "time_nanos: $MIN" "$(grep -E '^time_nanos:' "$T/x.txt")"
    expect_eq extremes-pprof-duration "duration_nanos: $MAX" "$(grep -E '^duration_nanos:' "$T/x.txt")"
else
    fail extremes-pprof-decode "no profile to decode (status $rc): $(head -c 300 "$T/protoc.err" 2>/dev/null)"
fi

#!/usr/bin/env bash
# Sampled detail reports on the reading side (docs/sampling.md "Report
# format" and "What the CLI shows"): `report detail` (the Sampled line, the
# samples per site, --json's "sampling" and samples), `report` (summary),
# the reader's errors for a bad or missing sample_rate, `export --format
# pprof` (period_type space/bytes, period = the rate, values the
# estimates) and folded, and `diff` (same rate, sampled against exact,
# two rates).
#
# Fixtures come from a real run: tests/agent/detail in exact detail mode,
# turned into the sampled report the agent writes by
# tests/report/mksampled.py (mode sample, sample_rate, samples= and
# live_samples= on every site), so the addresses are this build's. The
# truth for the site figures is the .mtr file itself, read by awk and
# python3; the pprof profile is decoded by protoc (and by go tool pprof
# when Go is there), not by memtrail. CLI calls run the ASan+UBSan build.
. "$(dirname "$0")/../lib.sh"

X=$MT_ROOT/tests/export
MKS=$MT_ROOT/tests/report/mksampled.py
for f in "$MT" "$MT_ASAN" "$AGENT" "$TBIN/detail"; do
    [ -e "$f" ] || { fail sampled-build "$f missing (make tests)"; exit 1; }
done
command -v python3 >/dev/null || { fail sampled-tools "python3 not installed"; exit 1; }
lacks() {
    if printf '%s' "$3" | grep -Fq -- "$2"; then fail "$1" "unexpected '$2' in: $(printf '%s' "$3" | head -c 600)"; else pass "$1"; fi
}

"$MT" run --mode detail -o "$T/d.mtr" -- "$TBIN/detail" threads 2 >/dev/null 2>&1
check "sampled: a real detail report" test -s "$T/d.mtr"
python3 "$MKS" "$T/d.mtr" "$T/s.mtr" 524288
python3 "$MKS" "$T/d.mtr" "$T/s64.mtr" 65536
expect_eq "sampled: the fixture is a sampled report (mode, rate line, samples on every site)" "1 1 $(grep -c '^site ' "$T/d.mtr")" \
    "$(grep -c '^mode sample$' "$T/s.mtr") $(grep -c '^sample_rate 524288$' "$T/s.mtr") $(grep -c '^site .* samples=[0-9]* live_samples=[0-9]* frames=' "$T/s.mtr")"
SAMPLED_LINE="Sampled: one sample per 512KB allocated on average; site figures are estimates (the category totals above are exact)"

# --- report detail (text) ----------------------------------------------------------
run_mt "$MT_ASAN" report detail "$T/s.mtr"
expect_eq "report detail sampled: exit 0, nothing on stderr" "0 " "$rc $err"
contains "report detail sampled: the Sampled line" "$SAMPLED_LINE" "$out"
contains "report detail sampled: mode sample in the header" "mode sample" "$out"
expect_eq "report detail sampled: the Sampled line follows the categories, before the sites" True \
    "$(printf '%s\n' "$out" | awk -v s="$SAMPLED_LINE" '$0 == s { a = NR } /^-/ { c = NR } /^Allocation sites:/ { b = NR }
        END { print (a > c && a < b) ? "True" : "False" }')"
# Each site's "samples=N (M live)" against the file's site lines (as a multiset:
# the text is sorted by live bytes).
want=$(awk '$1 == "site" { s = l = ""; for (i = 3; i <= NF; i++) { if ($i ~ /^samples=/) s = substr($i, 9); if ($i ~ /^live_samples=/) l = substr($i, 14) }
        print s " " l }' "$T/s.mtr" | sort)
got=$(printf '%s\n' "$out" | sed -n 's/.*, samples=\([0-9]*\) (\([0-9]*\) live).*/\1 \2/p' | sort)
expect_eq "report detail sampled: every site's samples and live samples, as in the file" "$want" "$got"
run_mt "$MT_ASAN" report detail "$T/d.mtr"
expect_eq "report detail exact: exit 0" 0 "$rc"
lacks "report detail exact: no Sampled line" "Sampled:" "$out"
lacks "report detail exact: no samples column" "samples=" "$out"

# --- report (summary) ----------------------------------------------------------------
run_mt "$MT_ASAN" report "$T/s.mtr"
expect_eq "report sampled: exit 0" 0 "$rc"
contains "report sampled: mode sample" "mode sample" "$out"
contains "report sampled: the Sampled line" "$SAMPLED_LINE" "$out"
run_mt "$MT_ASAN" report "$T/d.mtr"
lacks "report exact: no Sampled line" "Sampled:" "$out"
run_mt "$MT_ASAN" report "$T/s64.mtr"
contains "report sampled at 64 KiB: the rate in the line" "Sampled: one sample per 64KB allocated on average" "$out"

# --- --json -----------------------------------------------------------------------------
"$MT_ASAN" report detail "$T/s.mtr" --json >"$T/s.json"
"$MT_ASAN" report detail "$T/d.mtr" --json >"$T/d.json"
"$MT_ASAN" report "$T/s.mtr" --json >"$T/ssum.json"
expect_eq "report detail --json sampled: sampling.rate_bytes; summary too; null when exact" "524288 524288 None" \
    "$(json_get "$T/s.json" "j['sampling']['rate_bytes']") $(json_get "$T/ssum.json" "j['sampling']['rate_bytes']") $(json_get "$T/d.json" "j['sampling']")"
# Each site's samples, live_samples and counters, by stack_id, against the file.
py_sites='
import json, sys
j = json.load(open(sys.argv[1]))
sites = {}
for line in open(sys.argv[2]):
    w = line.split()
    if w and w[0] == "site":
        sites[int(w[1])] = dict(x.split("=", 1) for x in w[2:])
bad = [s["stack_id"] for s in j["sites"] if s["merged_sites"] != 1 or
       any(s[k] != int(sites[s["stack_id"]][k]) for k in ("samples", "live_samples", "live_bytes", "allocs", "allocated_bytes"))]
print(len(j["sites"]) == len(sites), bad)'
expect_eq "report detail --json sampled: samples, live_samples and the estimates of every site, as in the file" "True []" \
    "$(python3 -c "$py_sites" "$T/s.json" "$T/s.mtr")"
expect_eq "report detail --json exact: no samples on the sites" False \
    "$(json_get "$T/d.json" "any('samples' in s or 'live_samples' in s for s in j['sites'])")"
"$MT_ASAN" report detail "$T/s.mtr" --json --depth 1 >"$T/s1.json"
expect_eq "report detail --json --depth 1: merged sites add up their samples" \
    "$(awk '$1 == "site" { for (i = 3; i <= NF; i++) if ($i ~ /^samples=/) n += substr($i, 9) } END { print n }' "$T/s.mtr")" \
    "$(json_get "$T/s1.json" "sum(s['samples'] for s in j['sites'])")"

# --- the reader's errors -----------------------------------------------------------------
grep -v '^sample_rate ' "$T/s.mtr" >"$T/norate.mtr"
run_mt "$MT_ASAN" report detail "$T/norate.mtr"
expect_eq "missing sample_rate: exit 1, one line naming the file" \
    "1 memtrail: $T/norate.mtr: no sample_rate line (the mode line says sample)" "$rc $err"
rate_line=$(grep -n '^sample_rate ' "$T/s.mtr" | cut -d: -f1)
for bad in 0 -4096 512KiB 99999999999999999999 ''; do
    sed "s/^sample_rate .*/sample_rate $bad/" "$T/s.mtr" >"$T/bad.mtr"
    run_mt "$MT_ASAN" report detail "$T/bad.mtr"
    case $bad in
    0 | -4096) want="sample_rate $bad out of range (expected a positive number of bytes)" ;;
    9*) want="value '$bad' for sample_rate does not fit in a signed 64-bit integer" ;;
    *) want="bad value '$bad' for sample_rate (expected an integer)" ;;
    esac
    expect_eq "bad sample_rate '$bad': exit 1, the line named" "1 memtrail: $T/bad.mtr: line $rate_line: $want" "$rc $err"
done
sed 's/ live_samples=[0-9]*//' "$T/s.mtr" >"$T/half.mtr"
run_mt "$MT_ASAN" report "$T/half.mtr"
expect_match "a site with samples but no live_samples: the line named" \
    "^memtrail: $T/half.mtr: line [0-9]+: site [0-9]+ line lacks field live_samples \\(it has samples\\)$" "$err"
sed 's/^mode sample$/mode detail/' "$T/s.mtr" >"$T/ratedetail.mtr"
run_mt "$MT_ASAN" report "$T/ratedetail.mtr"
expect_eq "a sample_rate line in a detail report: an error" \
    "1 memtrail: $T/ratedetail.mtr: a sample_rate line in a report of mode detail (expected mode sample)" "$rc $err"

# --- export --format pprof --------------------------------------------------------------
for f in s d; do
    run_mt "$MT_ASAN" export "$T/$f.mtr" --format pprof -o "$T/$f.pb.gz"
    expect_eq "export pprof ($f): exit 0" 0 "$rc"
done
# python3 over protoc's text: period, period_type's strings, and each
# sample's values (inuse_space, inuse_objects, alloc_space, alloc_objects)
# against the file's site lines in order.
py_pprof='
import re, sys
text, mtr = open(sys.argv[1]).read(), open(sys.argv[2]).read()
strings = re.findall(r"^string_table: \"(.*)\"$", text, re.M)
m = re.search(r"^period_type \{\s*type: (\d+)\s*unit: (\d+)\s*\}", text, re.M)
pt = (strings[int(m.group(1))], strings[int(m.group(2))]) if m else None
period = re.search(r"^period: (\d+)$", text, re.M)
samples = [[int(v) for v in re.findall(r"^\s+value: (-?\d+)$", b, re.M)]
           for b in re.findall(r"^sample \{\n(.*?)^\}", text, re.M | re.S)]
want = []
for line in mtr.splitlines():
    w = line.split()
    if w and w[0] == "site":
        f = dict(x.split("=", 1) for x in w[2:])
        want.append([int(f[k]) for k in ("live_bytes", "live_count", "allocated_bytes", "allocs")])
comments = [strings[int(i)] for i in re.findall(r"^comment: (\d+)$", text, re.M)]
print(pt, period.group(1) if period else None, samples == want, any("sampled" in c for c in comments))'
if command -v protoc >/dev/null; then
    for f in s d; do
        gzip -dc "$T/$f.pb.gz" | protoc --proto_path="$X" --decode=perftools.profiles.Profile profile.proto >"$T/$f.protoc"
    done
    expect_eq "export pprof sampled (protoc): period_type space/bytes, period the rate, values the estimates, a comment" \
        "('space', 'bytes') 524288 True True" "$(python3 -c "$py_pprof" "$T/s.protoc" "$T/s.mtr")"
    expect_eq "export pprof exact (protoc): period 1, no sampled comment" \
        "('space', 'bytes') 1 True False" "$(python3 -c "$py_pprof" "$T/d.protoc" "$T/d.mtr")"
else
    echo "SKIP export pprof (protoc): protoc not installed (protobuf-compiler)"
fi
if command -v go >/dev/null 2>&1; then
    raw=$(go tool pprof -raw -symbolize=none "$T/s.pb.gz" 2>&1)
    expect_eq "export pprof sampled (go tool pprof): PeriodType and Period" "PeriodType: space bytes|Period: 524288" \
        "$(printf '%s\n' "$raw" | grep -E '^(PeriodType|Period):' | paste -sd '|')"
    top=$(go tool pprof -top -unit=byte -sample_index=inuse_space -symbolize=none "$T/s.pb.gz" 2>&1)
    want_total=$(awk '$1 == "site" { for (i = 3; i <= NF; i++) if ($i ~ /^live_bytes=/) n += substr($i, 12) } END { print n }' "$T/s.mtr")
    expect_match "export pprof sampled (go tool pprof -top): the total is the sum of the estimates, not scaled again" \
        "of ${want_total}B total" "$top"
else
    echo "SKIP export pprof (go tool pprof): go not installed"
fi

# --- export --format folded --------------------------------------------------------------
run_mt "$MT_ASAN" export "$T/s.mtr" --format folded
expect_eq "export folded sampled: exit 0, the caveat on stderr" \
    "0 memtrail: $T/s.mtr is sampled (one sample per 512KB allocated on average): the values are estimates" "$rc $err"
expect_eq "export folded sampled: the lines sum to the sites' estimated live bytes" "$want_total" \
    "$(printf '%s\n' "$out" | awk '{ n += $NF } END { print n }')"
run_mt "$MT_ASAN" export "$T/d.mtr" --format folded
expect_eq "export folded exact: no caveat" "0 " "$rc $err"

# --- diff ----------------------------------------------------------------------------------
run_mt "$MT_ASAN" diff "$T/s.mtr" "$T/s.mtr"
expect_eq "diff sampled, one rate: exit 0" 0 "$rc"
contains "diff sampled, one rate: says the sites are estimates, at which rate" \
    "Sampled: both reports, one sample per 512KB allocated on average; site figures are estimates" "$out"
lacks "diff sampled, one rate: no warning" "Warning:" "$out"
run_mt "$MT_ASAN" diff "$T/d.mtr" "$T/s.mtr"
contains "diff exact against sampled: a warning line" \
    "Warning: the new report is sampled (one sample per 512KB) and the base one exact: site figures are not directly comparable" "$out"
# Apart from that line, the same diff as of two exact reports (same figures).
"$MT_ASAN" diff "$T/d.mtr" "$T/d.mtr" >"$T/dd.txt"
grep -v '^Warning: ' "$T/out" >"$T/ds.txt"
check "diff exact against sampled: the categories and sites compared as for two exact reports" cmp -s "$T/dd.txt" "$T/ds.txt"
run_mt "$MT_ASAN" diff "$T/s.mtr" "$T/d.mtr"
contains "diff sampled against exact: the warning names the base" \
    "Warning: the base report is sampled (one sample per 512KB) and the new one exact" "$out"
run_mt "$MT_ASAN" diff "$T/s.mtr" "$T/s64.mtr"
contains "diff at two rates: a warning with both rates" \
    "Warning: the reports are sampled at different rates (base one sample per 512KB, new one per 64KB): site figures are estimates with different errors, not directly comparable" "$out"
run_mt "$MT_ASAN" diff "$T/d.mtr" "$T/d.mtr"
lacks "diff exact: no Sampled line" "Sampled:" "$out"
lacks "diff exact: no warning" "Warning:" "$out"
"$MT_ASAN" diff "$T/s.mtr" "$T/s64.mtr" --json >"$T/diff.json"
expect_eq "diff --json: each side's sampling" "524288 65536" \
    "$(json_get "$T/diff.json" "'%d %d' % (j['base']['sampling']['rate_bytes'], j['new']['sampling']['rate_bytes'])")"
# Each side's site rows carry that report's samples (the file's own
# samples= fields), an exact side none.
py_diff_sides='
import json, sys
j = json.load(open(sys.argv[1]))
def samples_of(path):
    out = {}
    for line in open(path):
        w = line.split()
        if w and w[0] == "site":
            f = dict(x.split("=", 1) for x in w[2:])
            out[int(w[1])] = (int(f["samples"]), int(f["live_samples"])) if "samples" in f else None
    return out
sides = {"base": samples_of(sys.argv[2]), "new": samples_of(sys.argv[3])}
bad, seen = [], 0
for s in j["sites"]:
    for side, want in sides.items():
        row = s[side]
        if row is None:
            continue
        seen += 1
        got = (row["samples"], row["live_samples"]) if "samples" in row else None
        if row["merged_sites"] != 1 or got != want[row["stack_id"]]:
            bad.append((side, row["stack_id"], got))
print(seen > 0, bad)'
expect_eq "diff --json at two rates: each side's samples and live_samples, as in its file" "True []" \
    "$(python3 -c "$py_diff_sides" "$T/diff.json" "$T/s.mtr" "$T/s64.mtr")"
"$MT_ASAN" diff "$T/d.mtr" "$T/s.mtr" --json >"$T/diffds.json"
expect_eq "diff --json exact against sampled: samples on the new side only, as in its file" "True []" \
    "$(python3 -c "$py_diff_sides" "$T/diffds.json" "$T/d.mtr" "$T/s.mtr")"
"$MT_ASAN" diff "$T/d.mtr" "$T/d.mtr" --json >"$T/diffd.json"
expect_eq "diff --json exact: sampling null on both sides" "None None" \
    "$(json_get "$T/diffd.json" "'%s %s' % (j['base']['sampling'], j['new']['sampling'])")"

# --- a report the agent wrote in sample mode (once the agent has it) ----------------------
MEMTRAIL_OPTIONS="mode=sample:sample_rate=4096:sample_seed=7:output=$T/agent.mtr" LD_PRELOAD=$AGENT \
    "$TBIN/detail" threads 2 >/dev/null 2>&1
if grep -qx 'mode sample' "$T/agent.mtr" 2>/dev/null; then
    run_mt "$MT_ASAN" report detail "$T/agent.mtr" --json
    expect_eq "agent's sampled report: read, rate 4096" "0 4096" "$rc $(json_get "$T/out" "j['sampling']['rate_bytes']")"
    expect_eq "agent's sampled report: every site's samples as in the file" "True []" \
        "$(python3 -c "$py_sites" "$T/out" "$T/agent.mtr")"
else
    echo "SKIP sampled: the agent does not write sample-mode reports yet (mode=sample)"
fi

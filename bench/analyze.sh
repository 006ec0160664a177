#!/usr/bin/env bash
# The analyzer on a synthetic trace of EVENTS events with LIVE blocks live
# all along (bench/tracegen.c): events per second, and the peak RSS of
# `memtrail analyze` against its bound, 32 MB + 12 bytes per live block.
# The analysis's figures are checked against the generator's own.
#
# Usage: bash bench/analyze.sh [EVENTS] [LIVE]     (default 100000000 1000000)
# Needs: make all tracegen. Writes the trace to $TMPDIR (about 3.2 bytes an event).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
EVENTS=${1:-100000000}
LIVE=${2:-1000000}
MT=$BUILD/bin/memtrail
GEN=$BUILD/bench/tracegen
for f in "$MT" "$GEN"; do
    [ -x "$f" ] || { echo "bench/analyze.sh: $f is missing: make all tracegen" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trace=$dir/synthetic.mtt

"$GEN" -o "$trace" -n "$EVENTS" -l "$LIVE" --expect "$dir/expect.json"
bytes=$(stat -c %s "$trace")
/usr/bin/time -f '%e %M' -o "$dir/time" "$MT" analyze "$trace" --json >"$dir/out.json"
read -r secs rss_kb <"$dir/time"
python3 - "$dir/expect.json" "$dir/out.json" "$secs" "$rss_kb" "$bytes" "$LIVE" <<'EOF'
import json, sys
exp, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
secs, rss_kb, size, live = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
bound = 32 * 2**20 + 12 * live
same = all(out[k] == exp[k] for k in ("events", "allocs", "frees", "reallocs", "frees_unknown")) and \
    out["leaks"]["count"] == exp["leak_count"] and out["leaks"]["bytes"] == exp["leak_bytes"] and \
    out["temporary"]["count"] == exp["temporary"]
print("trace: %d events, %d live, %.1f MB (%.2f bytes/event)" % (out["events"], live, size / 1e6, size / out["events"]))
print("memtrail analyze --json: %.2f s, %.1f M events/s" % (secs, out["events"] / secs / 1e6))
print("peak RSS: %.1f MB; bound 32 MB + 12 B x %d live = %.1f MB: %s" %
      (rss_kb * 1024 / 2**20, live, bound / 2**20, "within" if rss_kb * 1024 <= bound else "OVER"))
print("figures as generated: %s" % ("yes" if same else "NO"))
sys.exit(0 if same and rss_kb * 1024 <= bound else 1)
EOF

#!/usr/bin/env bash
# `memtrail html` on a large trace: a synthetic trace of EVENTS events with
# LIVE blocks live all along (bench/tracegen.c, as bench/analyze.sh), turned
# into a page. Prints the time and peak RSS of `memtrail analyze --json` and
# of `memtrail html` beside it, the page's size, and the time headless
# Chromium takes to open the page from disk until it has drawn
# (body[data-ready]), measured by selenium and by the page's own clock.
#
# The bound: `memtrail html` runs the analysis (32 MB + 12 bytes a live
# block, docs/trace-analysis.md) and holds the page's data, the analysis's
# JSON, in memory while it writes the page (the libraries are in the
# binary): 32 MB + 12 B x LIVE + 2 x the page's size (the JSON and the page
# being written). The goal for opening: under 2 s.
#
# Usage: bash bench/html.sh [EVENTS] [LIVE]     (default 100000000 1000000)
# Needs: make all tracegen; chromium, chromium-driver, python3-selenium
# (scripts/deps.sh). Writes the trace to $TMPDIR (about 3.2 bytes an event).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
EVENTS=${1:-100000000}
LIVE=${2:-1000000}
MT=$BUILD/bin/memtrail
GEN=$BUILD/bench/tracegen
for f in "$MT" "$GEN"; do
    [ -x "$f" ] || { echo "bench/html.sh: $f is missing: make all tracegen" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trace=$dir/synthetic.mtt

"$GEN" -o "$trace" -n "$EVENTS" -l "$LIVE" 2>/dev/null
bytes=$(stat -c %s "$trace")
/usr/bin/time -f '%e %M' -o "$dir/time.analyze" "$MT" analyze "$trace" --json >"$dir/a.json"
/usr/bin/time -f '%e %M' -o "$dir/time.html" "$MT" html "$trace" -o "$dir/page.html" 2>/dev/null
read -r a_secs a_kb <"$dir/time.analyze"
read -r h_secs h_kb <"$dir/time.html"
page=$(stat -c %s "$dir/page.html")
json=$(stat -c %s "$dir/a.json")
bound=$((32 * 1048576 + 12 * LIVE + 2 * page))
echo "trace: $EVENTS events, $LIVE live, $((bytes / 1000000)) MB"
printf 'memtrail analyze --json: %.2f s, peak RSS %.1f MB (the JSON: %d bytes)\n' "$a_secs" "$(echo "$a_kb / 1024" | bc -l)" "$json"
printf 'memtrail html:           %.2f s, peak RSS %.1f MB; the page %d bytes\n' "$h_secs" "$(echo "$h_kb / 1024" | bc -l)" "$page"
printf 'bound: 32 MB + 12 B x %d live + 2 x %d bytes of page = %.1f MB: %s\n' "$LIVE" "$page" \
    "$(echo "$bound / 1048576" | bc -l)" "$([ $((h_kb * 1024)) -le $bound ] && echo within || echo OVER)"

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "chromium: not installed (scripts/deps.sh): no opening time"
    exit 0
fi
HOME=$dir /usr/bin/python3 - "$dir/page.html" <<'EOF'
import sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
o = webdriver.ChromeOptions()
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
    o.add_argument(a)
o.binary_location = "/usr/bin/chromium"
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
try:
    d.get("about:blank")  # the browser's own start-up is not the page's
    runs = []
    for _ in range(3):
        t0 = time.time()
        d.get("file://" + sys.argv[1])
        while not d.execute_script("return document.body && document.body.dataset.ready === '1'"):
            if time.time() - t0 > 60:
                print("chromium: not drawn in 60 s")
                sys.exit(1)
            time.sleep(0.01)
        wall = time.time() - t0
        # the page's clock: from navigation start to now (drawn)
        own = d.execute_script("return performance.now();") / 1000
        runs.append((wall, own))
    best = min(runs)
    print("chromium: opened and drawn in %.2f s (selenium, best of 3; %s), %.2f s by the page's clock: %s the 2 s goal"
          % (best[0], ", ".join("%.2f" % r[0] for r in runs), best[1], "within" if best[0] < 2 else "OVER"))
finally:
    d.quit()
EOF

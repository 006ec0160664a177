#!/usr/bin/env bash
# `memtrail html` (docs/html.md): pages made from real runs of test programs
# whose allocations are known (tests/agent/detail.c, exact.c) and of SQLite
# (the shared bench's workload, when sqlite3 is there), opened in headless
# Chromium by tests/html/browser.py, which checks what the page shows
# against the JSON `memtrail report|analyze|diff --json` prints for the same
# input (no console errors; totals, peak, top site; flame graph root, zoom,
# search; table sort and filter). Also: the command's defaults, its errors,
# and that every kind of input makes a page (those without a page file yet
# show their JSON); every page, a 15 MB one of 4,096 sites too, is drawn in
# under 2 s. Screenshots go to $BUILD/html-screens/.
. "$(dirname "$0")/../lib.sh"

SCREENS=$BUILD/html-screens
PY=/usr/bin/python3 # Debian's, with python3-selenium (not a pyenv shim)
for f in "$MT" "$TBIN/detail" "$TBIN/exact" "$BUILD/tests/html/many_sites"; do
    [ -e "$f" ] || { fail html-build "$f missing (make tests)"; exit 1; }
done

cd "$T" || exit 1
# --- real inputs -------------------------------------------------------
"$MT" run -o s.mtr -- "$TBIN/exact" >/dev/null 2>&1
"$MT" run --mode detail -o d1.mtr -- "$TBIN/detail" threads 2 >/dev/null 2>&1
"$MT" run --mode detail -o d2.mtr -- "$TBIN/detail" threads 4 recurse 6 >/dev/null 2>&1
"$MT" run --mode trace -o t.mtt -- "$TBIN/detail" threads 2 >/dev/null 2>&1
mkdir tree
"$MT" run --follow-exec -o 'tree/memtrail.%p.mtr' -- sh -c "$TBIN/exact; $TBIN/detail threads 1" >/dev/null 2>&1
SQLITE=$(command -v sqlite3 || true)
SQL=${MT_SHARED:-/work/shared}/bench/workload.sql
if [ -n "$SQLITE" ] && [ -f "$SQL" ]; then
    "$MT" run --mode detail -o sql.mtr -- "$SQLITE" :memory: <"$SQL" >/dev/null 2>&1
fi
# A large detail report: 4,096 sites of 16-frame stacks (a 15 MB page).
"$MT" run --mode detail --depth 16 -o big.mtr -- "$BUILD/tests/html/many_sites" 12 >/dev/null 2>&1
for f in s.mtr d1.mtr d2.mtr t.mtt big.mtr; do
    [ -s "$f" ] || { fail "html inputs" "memtrail run did not write $f"; exit 1; }
done

# --- the command ---------------------------------------------------------
run_mt "$MT" html s.mtr
expect_eq "html: summary page written" "0 memtrail: wrote s.html (summary page)" "$rc $err"
[ -s s.html ] && pass "html: default output is INPUT's name with .html" || fail "html: default output" "no s.html"
run_mt "$MT" html d1.mtr d2.mtr
expect_eq "html: BASE NEW makes the diff page" "0 memtrail: wrote d2-diff.html (diff page)" "$rc $err"
run_mt "$MT" html tree/ -o tree.html
expect_eq "html: a directory makes the tree page" "0 memtrail: wrote tree.html (tree page)" "$rc $err"
run_mt "$MT" html d1.mtr -o d1.html
expect_eq "html: a detail report makes the detail page" "0 memtrail: wrote d1.html (detail page)" "$rc $err"
run_mt "$MT" html t.mtt
expect_eq "html: a trace makes the trace page" "0 memtrail: wrote t.html (trace page)" "$rc $err"
run_mt "$MT" html --kind info s.mtr -o info.html
expect_eq "html: --kind info" "0 memtrail: wrote info.html (info page)" "$rc $err"
run_mt "$MT" html s.mtr -o -
expect_match "html: -o - writes the page to stdout" '^<!DOCTYPE html>' "$out"
[ -n "$SQLITE" ] && [ -s sql.mtr ] && { "$MT" html sql.mtr -o sql.html 2>/dev/null || fail "html: sqlite page" "exit $?"; }

# A report cut short: a page of what it holds, the reason, exit 1.
head -c "$(($(wc -c <d1.mtr) / 2))" d1.mtr >cut.mtr
run_mt "$MT" html cut.mtr -o cut.html
expect_match "html: a report cut short is named" "^memtrail: cut.mtr: truncated after line [0-9]+" "$err"
expect_eq "html: ... its page is written, exit 1" "1 yes" "$rc $([ -s cut.html ] && echo yes)"
# The ASan+UBSan build on every kind (the capture of each command's output).
if [ -x "$MT_ASAN" ]; then
    for args in "s.mtr" "d1.mtr" "d1.mtr d2.mtr" "tree/" "t.mtt" "--kind info s.mtr"; do
        run_mt "$MT_ASAN" html $args -o asan.html
        expect_match "html (ASan+UBSan): $args" "^0 memtrail: wrote asan.html \\([a-z]+ page\\)$" "$rc $err"
    done
fi

# Errors: one line each, nothing written.
echo "hello" >notreport.txt
run_mt "$MT" html notreport.txt -o bad.html
expect_eq "html: not a report is named" "1 memtrail: notreport.txt: not a memtrail report (bad header)" "$rc $err"
[ -e bad.html ] && fail "html: nothing written for a bad input" "bad.html exists" || pass "html: nothing written for a bad input"
run_mt "$MT" html missing.mtr
expect_eq "html: a missing file" "1 memtrail: missing.mtr: cannot open: No such file or directory" "$rc $err"
run_mt "$MT" html s.mtr --kind diff
expect_match "html: --kind diff needs two inputs" "^memtrail: --kind diff: needs two inputs" "$err"
expect_eq "html: usage error status" 2 "$rc"
run_mt "$MT" html --kind tree s.mtr -o kt.html
expect_match "html: --kind tree needs a directory" "^memtrail: --kind tree: needs a directory of reports" "$err"
cp s.mtr s2.mtr
run_mt "$MT" html s2.mtr -o s2.mtr
expect_match "html: -o naming an input is refused" "^memtrail: -o s2.mtr: that is an input" "$err"
cmp -s s.mtr s2.mtr && pass "html: ... and the input is left alone" || fail "html: -o an input" "s2.mtr changed"
run_mt sh -c "cd tree && '$MT' html ."
expect_eq "html: a directory given as . is named by its own name" "0 memtrail: wrote tree.html (tree page)" "$rc $err"
rm -f tree/tree.html
run_mt "$MT" html - -o x.html
expect_match "html: stdin is refused with a reason" "must be files" "$err"
# A FIFO: its kind would be told by reading it, and the page's command
# would then open it again and wait for a writer that has gone. Without
# --kind it is a usage error naming it, at once (the FIFO not opened: its
# writer still waits); with --kind it is read once, by that command.
mkfifo t.fifo s.fifo
cat t.mtt >t.fifo 2>/dev/null &
writer=$!
start=$(date +%s)
run_mt timeout 20 "$MT" html t.fifo -o fifo.html
expect_eq "html: a FIFO without --kind: usage error, its name and the way out" \
    "2 memtrail: t.fifo: not a regular file (a pipe or FIFO is read once): its kind cannot be told before the page is made; give --kind summary, detail, trace, refset or info" \
    "$rc $(head -n 1 <<<"$err")"
[ $(($(date +%s) - start)) -lt 10 ] && [ ! -e fifo.html ] && pass "html: ... at once, nothing written" ||
    fail "html: a FIFO without --kind" "took $(($(date +%s) - start)) s, fifo.html $([ -e fifo.html ] && echo written)"
run_mt timeout 20 "$MT" html --kind trace t.fifo -o fifo.html
expect_eq "html: a FIFO with --kind trace: the trace page" "0 memtrail: wrote fifo.html (trace page)" "$rc $err"
kill "$writer" 2>/dev/null; wait "$writer" 2>/dev/null
run_mt timeout 20 "$MT" html <(cat s.mtr) -o pipe.html
expect_match "html: a pipe without --kind: usage error" "^2 memtrail: /dev/fd/[0-9]+: not a regular file" "$rc $err"
run_mt timeout 20 "$MT" html --kind summary <(cat s.mtr) -o pipe.html
expect_eq "html: a pipe with --kind summary: the summary page" "0 memtrail: wrote pipe.html (summary page)" "$rc $err"
n=$("$MT" html --help | wc -c)
[ "$n" -lt 4096 ] && pass "html: --help under 4 KB" || fail "html: --help under 4 KB" "$n bytes"

# The page: self-contained (no URL fetched), the libraries' licenses in it.
if grep -Eq '<(script|link|img)[^>]+(src|href)=' s.html; then fail "html: self-contained" "an external src/href"; else pass "html: self-contained"; fi
# (d3's ISC text names no license, but its author; uPlot's is MIT.)
for lic in "Mike Bostock" "Apache License" "MIT License"; do
    grep -q "$lic" s.html && pass "html: carries the license text: $lic" || fail "html: license" "no '$lic' in the page"
done

# --- the browser ------------------------------------------------------------
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "SKIP html browser: chromium or chromium-driver not installed (scripts/deps.sh)"
    exit 0
fi
"$MT" report --json s.mtr >s.json
"$MT" report detail --json d1.mtr >d1.json
"$MT" diff --json d1.mtr d2.mtr >diff.json
"$MT" report --json tree/ >tree.json
"$MT" analyze --json t.mtt >t.json
"$MT" info --json s.mtr >info.json
jobs=(summary:s.html:s.json detail:d1.html:d1.json diff:d2-diff.html:diff.json tree:tree.html:tree.json
      trace:t.html:t.json info:info.html:info.json)
# Two summary reports (no sites: the diff page without its site parts),
# and a trace shown as a detail report (its stacks are the sites).
"$MT" run -o s3.mtr -- "$TBIN/detail" threads 1 >/dev/null 2>&1
"$MT" html s.mtr s3.mtr -o sdiff.html 2>/dev/null
"$MT" diff --json s.mtr s3.mtr >sdiff.json
"$MT" html --kind detail t.mtt -o tdetail.html 2>/dev/null
"$MT" report detail --json t.mtt >tdetail.json 2>/dev/null
jobs+=(diff:sdiff.html:sdiff.json detail:tdetail.html:tdetail.json)
# A summary report against a trace: the trace has no address-space figures
# and no overhead ones, so those categories are not comparable (not gone).
"$MT" html s3.mtr t.mtt -o tdiff.html 2>/dev/null
"$MT" diff --json s3.mtr t.mtt >tdiff.json
expect_eq "html: a report against a trace: memtrail's overhead not comparable (JSON)" "not_comparable" \
    "$(json_get tdiff.json "' '.join(c['status'] for c in j['categories'] if c['kind'] == 'overhead')")"
jobs+=(diff:tdiff.html:tdiff.json)
"$MT" html big.mtr 2>/dev/null
"$MT" report detail --json big.mtr >big.json
jobs+=(detail:big.html:big.json)
# A command line that would end the data block or the page's script if it
# were pasted in raw (and the JavaScript line separators, and non-ASCII):
# the page must still parse, draw and hold the same JSON.
hostile=$(printf '</script><!--<script>alert(1)</script>"\x27 \xe2\x80\xa8\xe2\x80\xa9 \xc3\xa9')
"$MT" run -o hostile.mtr -- sh -c 'exit 0' "$hostile" >/dev/null 2>&1
"$MT" html hostile.mtr -o hostile.html 2>/dev/null
"$MT" report --json hostile.mtr >hostile.json
grep -q 'alert(1)' hostile.json && pass "html: the hostile command line is in the report" ||
    fail "html: hostile command line" "not in the report's JSON"
jobs+=(summary:hostile.html:hostile.json)
# Sampled reports (docs/sampling.md), made from d1.mtr and d2.mtr as the
# agent writes them (tests/report/mksampled.py): the detail page's label,
# and the diff page's for one rate and for a sampled against an exact report.
python3 "$MT_ROOT/tests/report/mksampled.py" d1.mtr ds1.mtr 524288
python3 "$MT_ROOT/tests/report/mksampled.py" d2.mtr ds2.mtr 524288
"$MT" html ds1.mtr -o ds1.html 2>/dev/null
"$MT" report detail --json ds1.mtr >ds1.json
"$MT" html ds1.mtr ds2.mtr -o dsdiff.html 2>/dev/null
"$MT" diff --json ds1.mtr ds2.mtr >dsdiff.json
"$MT" html d1.mtr ds2.mtr -o dxdiff.html 2>/dev/null
"$MT" diff --json d1.mtr ds2.mtr >dxdiff.json
jobs+=(detail:ds1.html:ds1.json diff:dsdiff.html:dsdiff.json diff:dxdiff.html:dxdiff.json)
if [ -s sql.html ]; then
    "$MT" report detail --json sql.mtr >sql.json 2>/dev/null
    jobs+=(detail:sql.html:sql.json)
fi
rm -rf "$SCREENS"
HOME=$T "$PY" "$MT_ROOT/tests/html/browser.py" "$SCREENS" "${jobs[@]}"

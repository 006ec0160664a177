#!/usr/bin/python3
"""browser.py — opens `memtrail html` pages in headless Chromium (selenium,
Debian's chromium-driver) and checks what a reader sees against the JSON the
CLI printed for the same input (an independent file, parsed here by Python).

Usage: browser.py SCREENS_DIR KIND:PAGE.html:CLI.json ...
Prints one PASS/FAIL line per check (tests/lib.sh's format), or one SKIP
when no Chromium can be started. The ids and classes it reads are listed
in web/src/common.js's header comment.
"""
import json
import os
import re
import sys
import time

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError as e:  # the caller checked; say why anyway
    print("SKIP html browser: selenium missing (%s)" % e)
    sys.exit(0)

FAILED = []


def ok(name):
    print("PASS html %s" % name)


def bad(name, why):
    FAILED.append(name)
    print("FAIL html %s: %s" % (name, why))


def expect(name, cond, why):
    (ok if cond else (lambda n: bad(n, why)))(name)


def start_browser():
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def browser_or_skip(screens):
    """The screenshots' directory made and a headless Chromium started, or
    None after a SKIP line when no usable Chromium starts."""
    os.makedirs(screens, exist_ok=True)
    try:
        return start_browser()
    except Exception as e:  # no usable Chromium
        print("SKIP html browser: cannot start headless Chromium: %s" % str(e).splitlines()[0])
        return None


def page_data(path):
    """The envelope embedded in the page, read from the file's text."""
    html = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="mt-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1)) if m else None


def wait_ready(d, name, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if d.execute_script("return document.body && document.body.dataset.ready === '1'"):
            return True
        time.sleep(0.05)
    bad(name + ": drawn", "body[data-ready] never set in %ds" % timeout)
    return False


def poll(get, cond, timeout=5.0):
    """get() until cond(value) holds or timeout seconds pass (transitions
    and debounced inputs take their time on a busy machine); the last value."""
    end = time.time() + timeout
    v = get()
    while not cond(v) and time.time() < end:
        time.sleep(0.05)
        v = get()
    return v


def console_errors(d):
    return [e for e in d.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def js(d, script, *args):
    return d.execute_script(script, *args)


def card(d, key):
    """The exact figure shown on the card `key` (its digits, as text)."""
    v = js(d, "var c = document.querySelector('.mt-card[data-key=\"' + arguments[0] + '\"] .mt-exact');"
              "return c ? c.textContent : null;", key)
    return int(re.sub(r"[^0-9-]", "", v)) if v else None


def flame_checks(d, name, box_id, expect_root, search_term):
    """Root value, click-to-zoom, search highlight and reset of one flame graph."""
    # The root frame's value as d3-flame-graph computed it (its bound datum).
    root = js(d, """var v = null;
        d3.select('#' + arguments[0] + ' svg').selectAll('g.frame').each(function (n) { if (n.depth === 0) v = n.value; });
        return v;""", box_id)
    expect(name + ": flame graph root equals the total", root is not None and int(root) == expect_root,
           "root %s, expected %d" % (root, expect_root))
    # Click the widest frame below the root: it must fill the width after zooming.
    target = js(d, """
        var svg = document.querySelector('#' + arguments[0] + ' svg');
        var best = null, bw = 0;
        d3.select(svg).selectAll('g.frame').each(function (n) {
            var w = this.querySelector('rect').getBBox().width;
            if (n.depth === 2 && w > bw && w < svg.getBBox().width * 0.98) { best = this; bw = w; }
            else if (!best && n.depth === 1 && w > bw && w < svg.getBBox().width * 0.98) { best = this; bw = w; }
        });
        if (!best) d3.select(svg).selectAll('g.frame').each(function (n) { if (n.depth === 1 && !best) best = this; });
        return best;""", box_id)
    if target is None:
        bad(name + ": flame graph has frames", "no frame below the root")
        return
    tname = target.get_attribute("name")
    width = js(d, "return document.querySelector('#' + arguments[0] + ' svg').getAttribute('width');", box_id)
    width_of = lambda: js(d, "return arguments[0].querySelector('rect').getAttribute('width');", target)
    w0 = width_of()
    js(d, "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}));", target)
    w = poll(width_of, lambda v: v is not None and float(v) >= float(width) * 0.97)
    expect(name + ": clicking a frame zooms to it", w is not None and float(w) >= float(width) * 0.97,
           "frame %r is %s wide after the click, the graph %s" % (tname, w, width))
    js(d, "document.querySelector('#' + arguments[0] + ' .mt-reset').click();", box_id)
    if w0 is not None and float(w0) >= float(width) * 0.97:
        # one stack: every frame is the graph's width, zoomed or not
        ok(name + ": reset zoom (a single stack: nothing narrower to return to)")
    else:
        w = poll(width_of, lambda v: v is not None and float(v) < float(width) * 0.97)
        expect(name + ": reset zoom", w is not None and float(w) < float(width) * 0.97,
               "frame %r still %s wide after reset" % (tname, w))
    box = d.find_element(By.ID, box_id)
    field = box.find_element(By.CSS_SELECTOR, ".mt-search")
    field.clear()
    field.send_keys(search_term)
    names = js(d, """var r = [];
        document.querySelectorAll('#' + arguments[0] + ' g.frame').forEach(function (g) { r.push(g.getAttribute('name')); });
        return r;""", box_id)
    want = [n for n in names if search_term.lower() in n.lower()]
    matched = poll(lambda: js(d, """var r = [];
        document.querySelectorAll('#' + arguments[0] + ' g.frame.mt-match').forEach(function (g) { r.push(g.getAttribute('name')); });
        return r;""", box_id), lambda v: sorted(v) == sorted(want))
    expect(name + ": search highlights the matching frames",
           matched and sorted(matched) == sorted(want),
           "search %r highlighted %r; frames holding it: %r" % (search_term, matched, want))
    field.clear()
    field.send_keys(" \b")
    poll(lambda: js(d, "return document.querySelectorAll('#' + arguments[0] + ' g.frame.mt-match').length;", box_id),
         lambda v: v == 0)


def table_checks(d, name, table_id, key, values, filter_text, filter_count):
    """Sorting by `key` (both ways) and the filter's row count."""
    th = d.find_element(By.CSS_SELECTOR, "#%s th[data-key='%s']" % (table_id, key))
    col = js(d, "return Array.prototype.indexOf.call(arguments[0].parentNode.children, arguments[0]);", th)

    def column():
        return [int(x) for x in js(d, """var r = [], id = arguments[0], col = arguments[1];
            document.querySelectorAll('#' + id + ' tbody tr').forEach(function (tr) {
                r.push(tr.children[col].dataset.value); });
            return r;""", table_id, col)]
    th.click()
    first = column()
    th.click()
    second = column()
    # (a long table shows its first rows only: the first of the sorted values)
    asc, desc = sorted(values)[:len(first)], sorted(values, reverse=True)[:len(second)]
    expect(name + ": table sorts by " + key, first and ((first == asc and second == desc) or (first == desc and second == asc)),
           "column after two clicks: %r then %r; values %r" % (first[:8], second[:8], desc[:8]))
    f = d.find_element(By.CSS_SELECTOR, "#%s" % table_id).find_element(By.XPATH, "../..").find_element(
        By.CSS_SELECTOR, ".mt-filter")
    f.send_keys(filter_text)
    shown = min(filter_count, 500)  # (500 rows at a time)
    n = poll(lambda: js(d, "return document.querySelectorAll('#' + arguments[0] + ' tbody tr').length;", table_id),
             lambda v: v == shown)
    expect(name + ": table filter %r keeps %d rows" % (filter_text, filter_count), n == shown, "%d rows shown" % n)
    f.clear()
    f.send_keys(" \b")


def check_summary(d, name, j):
    t = j["total"]
    for key in ("live_bytes", "peak_bytes", "committed_bytes", "resident_bytes"):
        expect("%s: total %s shown" % (name, key), card(d, key) == t[key], "card %s, JSON %s" % (card(d, key), t[key]))
    if j.get("process"):
        p = j["process"]
        expect(name + ": RSS shown", card(d, "rss_bytes") == p["rss_bytes"], "card %s, JSON %s" % (card(d, "rss_bytes"), p["rss_bytes"]))
        parts = js(d, """var r = {};
            document.querySelectorAll('#mt-rss div[data-name]').forEach(function (e) { r[e.dataset.name] = +e.dataset.value; });
            return r;""")
        explained = sum(v for k, v in parts.items() if k != "other")
        expect(name + ": RSS explained: the parts drawn add up to explained_bytes", explained == p["explained_bytes"],
               "parts %r add up to %d, JSON %d" % (parts, explained, p["explained_bytes"]))
    bars = js(d, """var r = {};
        document.querySelectorAll('#mt-categories g.mt-bar[data-series="live_bytes"]').forEach(function (g) {
            r[g.dataset.name] = +g.dataset.value; });
        return r;""")
    want = {c["name"]: c["live_bytes"] for c in j["categories"]}
    shown = {k: v for k, v in bars.items()}
    expect(name + ": each category's live bytes drawn", all(shown.get(k) == v for k, v in want.items() if k in shown)
           and len(shown) > 0, "bars %r, JSON %r" % (shown, want))
    top = max(j["categories"], key=lambda c: (c["kind"] != "overhead", c["committed_bytes"] + c["live_bytes"]))
    first = js(d, "var r = document.querySelector('#mt-category-table tbody tr'); return r ? r.dataset.name : null;")
    expect(name + ": top category first", first == top["name"], "first row %r, expected %r" % (first, top["name"]))


def sampled_note(d, name, rates):
    """The #mt-sampling label: present exactly when a report of the JSON is
    sampled (docs/sampling.md), naming its rate; for two reports at one rate
    it says the sites are estimates, else that they are not comparable.
    rates: each report's rate_bytes, or None for an exact one."""
    note = js(d, "var e = document.getElementById('mt-sampling'); return e ? e.textContent : null;")
    if not any(rates):
        expect(name + ": no sampled label on exact reports", note is None, "label %r" % note)
        return
    # the rate as the page writes sizes ("512 KB", "1 MB")
    per = ["%d MB" % (r >> 20) if r % (1 << 20) == 0 else "%d KB" % (r >> 10) for r in rates if r]
    same = len(rates) == len(per) and len(set(rates)) == 1
    ok = note is not None and all(p in note for p in per) and (
        note.startswith("sampled, one sample per " + per[0]) and "site figures are estimates" in note if same
        else "not directly comparable" in note)
    expect(name + ": sampled label", ok, "label %r, rates %r" % (note, rates))


def check_detail(d, name, j):
    sampled_note(d, name, [(j.get("sampling") or {}).get("rate_bytes")])
    sites = j["sites"]
    live = sum(s["live_bytes"] for s in sites)
    alloc = sum(s.get("allocated_bytes", 0) for s in sites)
    expect(name + ": total live bytes shown", card(d, "live_bytes") == j["total"]["live_bytes"],
           "card %s, JSON %s" % (card(d, "live_bytes"), j["total"]["live_bytes"]))
    expect(name + ": peak shown", card(d, "peak_bytes") == j["total"]["peak_bytes"],
           "card %s, JSON %s" % (card(d, "peak_bytes"), j["total"]["peak_bytes"]))
    top = max(sites, key=lambda s: s["live_bytes"])
    first = js(d, "var r = document.querySelector('#mt-sites tbody tr'); return r ? r.dataset.name : null;")
    topname = top["frames"][0]["function"] if top["frames"] and top["frames"][0].get("function") else None
    expect(name + ": top site first in the table", first is not None and topname is not None and first.startswith(topname),
           "first row %r, JSON's top site %r" % (first, topname))
    flame_checks(d, name + " live", "mt-flame-live", live, topname or "main")
    d.find_element(By.CSS_SELECTOR, "button[data-tab='mt-tab-allocated']").click()
    top_alloc = max(sites, key=lambda s: s.get("allocated_bytes", 0))
    flame_checks(d, name + " allocated", "mt-flame-allocated", alloc, frame_name(top_alloc["frames"][0]))
    d.find_element(By.CSS_SELECTOR, "button[data-tab='mt-tab-live']").click()
    # The filter keeps the sites whose function, category, source or stack
    # holds the text: counted here from the JSON.
    some = (topname or "main").lower()
    nf = sum(1 for s in sites if any(some in frame_name(f).lower() for f in s["frames"]) or
             some in s["category"].lower() or (s["frames"] and some in frame_source(s["frames"][0]).lower()))
    table_checks(d, name, "mt-sites", "live_bytes", [s["live_bytes"] for s in sites], some, nf)


def frame_name(f):
    if f.get("function"):
        return f["function"]
    return (f.get("module") or "?").split("/")[-1] + "+" + (f.get("offset") or f.get("address") or "?")


def frame_source(f):
    if f.get("file"):
        return f["file"].split("/")[-1] + ":" + str(f["line"]) + (" (inlined)" if f.get("inlined") else "")
    return (f.get("module") or "?").split("/")[-1] + "+" + (f.get("offset") or "?")


def check_diff(d, name, j):
    sampled_note(d, name, [(j[k].get("sampling") or {}).get("rate_bytes") for k in ("base", "new")])
    t = j["total"]
    expect(name + ": live bytes change shown", card(d, "live_bytes_delta") == t["live_bytes_delta"],
           "card %s, JSON %s" % (card(d, "live_bytes_delta"), t["live_bytes_delta"]))
    bars = js(d, """var r = {};
        document.querySelectorAll('#mt-diff-categories g.mt-bar').forEach(function (g) { r[g.dataset.name] = +g.dataset.value; });
        return r;""")
    want = {c["name"]: c["live_bytes_delta"] for c in j["categories"] if c["live_bytes_delta"]}
    expect(name + ": categories' changes drawn", bars == want, "bars %r, JSON %r" % (bars, want))
    # A category one side has no figures for (address space, memtrail's
    # overhead, against a trace): its status said, its change n/a, not a drop.
    rows = js(d, """var keys = [], r = {};
        document.querySelectorAll('#mt-diff-category-table thead th').forEach(function (th) { keys.push(th.dataset.key); });
        document.querySelectorAll('#mt-diff-category-table tbody tr').forEach(function (tr) {
            var s = tr.children[keys.indexOf('status')], d = tr.children[keys.indexOf('live_bytes_delta')];
            r[tr.dataset.name] = [s.textContent, d.dataset.value, d.title]; });
        return r;""")
    for c in j["categories"]:
        if c["status"] == "not_comparable":
            row = rows.get(c["name"]) or ["", "", ""]
            expect("%s: %s (%s) not comparable, its change n/a" % (name, c["name"], c["kind"]),
                   row[0] == "not_comparable" and row[1] == "null" and row[2].startswith("not comparable: ") and
                   ("overhead" in row[2]) == (c["kind"] == "overhead"), "row %r" % row)
    if j.get("sites"):
        sites = j["sites"]
        big = max(sites, key=lambda s: abs(s["delta"]["live_bytes"]))
        first = js(d, "var r = document.querySelector('#mt-diff-sites tbody tr'); return r ? r.dataset.name : null;")
        fn = big["frames"][0].get("function", "")
        expect(name + ": largest site change first", first is not None and first.startswith(fn),
               "first row %r, JSON's %r" % (first, fn))
        new_live = sum(s["new"]["live_bytes"] for s in sites if s.get("new"))
        flame_checks(d, name, "mt-flame-diff", new_live, fn or "main")


def check_tree(d, name, j):
    rows = js(d, "var r = []; document.querySelectorAll('#mt-tree tbody tr').forEach(function (tr) { r.push(tr.dataset.name); }); return r;")
    want = [str(p["pid"]) for p in j["processes"]]
    expect(name + ": one row per process, tree order", rows == want, "rows %r, JSON %r" % (rows, want))
    expect(name + ": total live bytes shown", card(d, "live_bytes") == j["total"]["live_bytes"],
           "card %s, JSON %s" % (card(d, "live_bytes"), j["total"]["live_bytes"]))
    expect(name + ": process count shown", card(d, "processes") == j["total"]["processes"],
           "card %s, JSON %s" % (card(d, "processes"), j["total"]["processes"]))


def same_json(a, b):
    """a (parsed by Python) equals b (parsed by JavaScript, whose numbers
    are doubles: integers past 2^53, the nanosecond times, come rounded)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, int) and not isinstance(a, bool) and abs(a) > 2 ** 53:
        return isinstance(b, (int, float)) and float(a) == float(b)
    return a == b


def check_fallback(d, name, j):
    """A kind whose page file is not written yet shows its data as text."""
    pre = js(d, "var p = document.getElementById('mt-json'); return p ? p.textContent : null;")
    if pre is not None:
        expect(name + ": fallback shows the JSON", same_json(j, json.loads(pre)), "the JSON shown differs")
    else:
        ok(name + ": drawn by its page file")


def screenshot(d, path):
    """The whole page (up to 8000 pixels tall), at the top."""
    js(d, "window.scrollTo(0, 0);")
    h = js(d, "return Math.min(8000, document.documentElement.scrollHeight);")
    d.set_window_size(1400, max(1000, h + 120))
    time.sleep(0.3)
    d.save_screenshot(path)
    d.set_window_size(1400, 1000)


CHECKS = {"summary": check_summary, "detail": check_detail, "diff": check_diff, "tree": check_tree}


def main():
    screens, jobs = sys.argv[1], sys.argv[2:]
    d = browser_or_skip(screens)
    if d is None:
        return 0
    try:
        for job in jobs:
            kind, page, cli = job.split(":", 2)
            name = "%s (%s)" % (kind, os.path.basename(page))
            env = page_data(page)
            j = json.load(open(cli))
            expect(name + ": page data is the CLI's JSON", env is not None and env.get("data") == j and
                   env.get("kind") == kind and env.get("memtrail_html") == 1, "envelope %r" %
                   ({k: v for k, v in (env or {}).items() if k != "data"}))
            d.get_log("browser")
            t0 = time.time()
            d.get("file://" + os.path.abspath(page))
            if not wait_ready(d, name):
                continue
            ms = (time.time() - t0) * 1000
            size = os.path.getsize(page) / 1e6
            # A measurement, not a check (timings belong in benchmarks:
            # bench/html.sh): the 2 s is for the reader to compare.
            print("# %s: a %.1f MB page opened and drew in %.2f s (goal: under 2 s)" % (name, size, ms / 1000))
            fetched = js(d, "return performance.getEntriesByType('resource').map(function (e) { return e.name; });")
            expect(name + ": loads nothing (every script, style and datum inline)", not fetched, "fetched %r" % fetched)
            expect(name + ": page drew without error", not js(d, "return document.body.dataset.error === '1'"),
                   js(d, "var e = document.querySelector('.mt-error'); return e ? e.textContent : '';"))
            try:
                has_page = js(d, "return !!MT.pages[arguments[0]];", kind)
                (CHECKS.get(kind) if has_page and kind in CHECKS else check_fallback)(d, name, j)
            except Exception as e:  # a missing element: a failed check, not a crash
                bad(name + ": checks ran", "%s: %s" % (type(e).__name__, str(e).splitlines()[0]))
            screenshot(d, os.path.join(screens, "%s.png" % os.path.basename(page).rsplit(".", 1)[0]))
            errs = console_errors(d)
            expect(name + ": no console errors", not errs, "; ".join(e["message"] for e in errs)[:600])
    finally:
        d.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())

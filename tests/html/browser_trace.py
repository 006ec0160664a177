#!/usr/bin/python3
"""browser_trace.py — the trace, reference-set and memory-info pages of
`memtrail html` in headless Chromium (browser.py's browser and checks),
against the JSON the CLI printed for the same input and against truths the
test programs printed themselves.

Usage: browser_trace.py SCREENS_DIR JOB...
  trace:PAGE:CLI.json[:TRUTH.json]   TRUTH: {"category": C, "category_peak": B,
                                      "function": F, "function_bytes": N}
  refset:PAGE:CLI.json:RECORDING[:TRUTH.json]   TRUTH: {"viewport": "T0:T1"}
  info:PAGE:CLI.json[:TRUTH.json]    TRUTH: {"by_name": {NAME: requests}}
$MT is the memtrail binary (the refset checks run `refset report --viewport`
for the viewports set in the page). Prints PASS/FAIL lines (tests/lib.sh's
format), or one SKIP when no Chromium starts.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import (By, bad, browser_or_skip, card, console_errors, expect, flame_checks, js, ok, page_data,  # noqa: E402
                     screenshot, wait_ready)


def frame_name(f):
    """common.js's MT.frameName: the function, else module+offset."""
    if f.get("function"):
        return f["function"]
    return "%s+%s" % ((f.get("module") or "?").split("/")[-1], f.get("offset") or f.get("address") or "?")


def check_trace(d, name, j, truth):
    for key, want in (("events", j["events"]), ("allocs", j["allocs"]), ("frees", j["frees"]),
                      ("reallocs", j["reallocs"]), ("allocated_bytes", j["allocated_bytes"]),
                      ("live_bytes", j["live_bytes"]), ("peak_bytes", j["peak"]["live_bytes"]),
                      ("peak_count", j["peak"]["live_count"]),
                      ("temporary_count", j["temporary"]["temporary_count"])):
        expect("%s: %s shown as the JSON's" % (name, key), card(d, key) == want, "card %s, JSON %s" % (card(d, key), want))
    top = j["peak"]["stacks"][0]
    shown = js(d, "var e = document.getElementById('mt-top-site'); return e ? [e.dataset.function, e.dataset.value] : null;")
    expect(name + ": top site at the peak as the JSON's", shown == [frame_name(top["frames"][0]), str(top["live_bytes"])],
           "page %r, JSON %r" % (shown, (frame_name(top["frames"][0]), top["live_bytes"])))
    # The timeline: one point per bucket, each series the JSON's numbers.
    b = j["timeline"]["buckets"]
    tl = js(d, "var u = MT.charts.timeline; return u ? {n: u.data[0].length, live: u.data[1], max: u.data[2],"
               "cats: u.data.slice(3), labels: u.series.map(function (s) { return s.label; })} : null;")
    expect(name + ": timeline has one point per bucket", tl and tl["n"] == len(b), "%s points, %d buckets" % (tl and tl["n"], len(b)))
    expect(name + ": timeline's live and most-in-bucket lines are the JSON's",
           tl and tl["live"] == [x["live_bytes"] for x in b] and tl["max"] == [x["max_live_bytes"] for x in b], "they differ")
    cats = j["timeline"]["categories"]
    expect(name + ": a line per category, the JSON's values",
           tl and tl["labels"][3:] == cats and all(tl["cats"][k] == [x["by_category"][k] for x in b] for k in range(len(cats))),
           "labels %r, categories %r" % (tl and tl["labels"][3:], cats))
    expect(name + ": categories add up to live bytes in every bucket (JSON)",
           all(sum(x["by_category"]) == x["live_bytes"] for x in b), "they do not")
    peak_drawn = max(tl["max"]) if tl else None
    expect(name + ": the timeline reaches the peak", peak_drawn == j["peak"]["live_bytes"],
           "highest point %s, peak %s" % (peak_drawn, j["peak"]["live_bytes"]))
    # What the analysis cannot know is said as analyze says it, or nothing
    # when every figure is exact.
    said = js(d, "var e = document.getElementById('mt-caveats'); return e ? e.textContent : null;")
    if j["caveats"]:
        expect(name + ": the caveats shown (began late: said so)", said is not None and
               ("began after the program had run" in said) == bool(j["caveats"]["began_late"]), "%r" % said)
    else:
        expect(name + ": no caveat (every figure exact)", said is None, "%r" % said)
    tree = j["peak"]["tree"]
    expect(name + ": JSON tree's root is the peak and its first level sums to it",
           tree[0]["value"] == j["peak"]["live_bytes"] and
           sum(n["value"] for n in tree if n["parent"] == 0) <= tree[0]["value"], "root %r" % tree[0])
    if truth.get("category"):
        c = truth["category"]
        at_peak = sum(s["live_bytes"] for s in j["peak"]["stacks"] if s["category"] == c)
        expect(name + ": category %s at the peak as the program counted" % c, at_peak == truth["category_peak"],
               "JSON %d, program %d" % (at_peak, truth["category_peak"]))
    if truth.get("function"):
        f = truth["function"]
        got = js(d, """var s = 0; d3.select('#mt-peak-flame svg').selectAll('g.frame').each(function (n) {
            if (n.data.name === arguments[0]) s += n.value; }); return s;""".replace("arguments[0]", json.dumps(f)))
        expect(name + ": flame graph's %s frames hold what the program allocated there" % f, got == truth["function_bytes"],
               "drawn %s, program %s" % (got, truth["function_bytes"]))
    named = [f["function"] for s in j["peak"]["stacks"] for f in s["frames"] if f.get("function")]
    flame_checks(d, name, "mt-peak-flame", j["peak"]["live_bytes"], truth.get("function") or (named or ["main"])[0])
    for tid, lst in (("mt-leaks", j["leaks"]), ("mt-temporary", j["temporary"]), ("mt-hot-count", j["hot"]["by_count"])):
        n = js(d, "return document.querySelectorAll('#%s tbody tr').length;" % tid)
        expect("%s: table %s has a row per stack listed" % (name, tid), n == len(lst["stacks"]), "%d rows, %d stacks" % (n, len(lst["stacks"])))
    leak_bytes = js(d, """var th = document.querySelector('#mt-leaks th[data-key="live_bytes"]');
        var i = Array.prototype.indexOf.call(th.parentNode.children, th), r = [];
        document.querySelectorAll('#mt-leaks tbody tr').forEach(function (tr) { r.push(+tr.children[i].dataset.value); });
        return r;""")
    expect(name + ": leak table's bytes are the JSON's", sorted(leak_bytes) == sorted(s["live_bytes"] for s in j["leaks"]["stacks"]),
           "%r" % leak_bytes)
    # The hottest stacks by number: ranked by allocations (reallocs apart),
    # the page's order that of the JSON (and of analyze's text).
    hot = js(d, """var th = document.querySelector('#mt-hot-count th[data-key="allocs"]');
        var i = Array.prototype.indexOf.call(th.parentNode.children, th), r = [];
        document.querySelectorAll('#mt-hot-count tbody tr').forEach(function (tr) { r.push(+tr.children[i].dataset.value); });
        return r;""")
    want = [s["allocs"] for s in j["hot"]["by_count"]["stacks"]]
    expect(name + ": hot stacks by allocations in the JSON's order", hot == want and want == sorted(want, reverse=True),
           "page %r, JSON %r" % (hot[:8], want[:8]))
    bars = js(d, "var r = []; document.querySelectorAll('#mt-histogram g.mt-bar').forEach(function (g) { r.push(+g.dataset.value); }); return r;")
    expect(name + ": histogram has a bar per bucket with its count", bars == [h["count"] for h in j["histogram"]],
           "bars %r, JSON %r" % (bars, [h["count"] for h in j["histogram"]]))


FIGS = ["size_bytes", "impact_size_bytes", "graph_start_bytes", "graph_end_bytes", "impacting_bytes",
        "transient_bytes", "persistent_bytes", "zero_page_bytes"]


def figs_of(row):
    f = {k: row[k] for k in ("size_bytes", "impact_size_bytes", "graph_start_bytes", "graph_end_bytes", "zero_page_bytes")}
    f.update(row["impact_types"])
    return f


def page_view(d):
    """The figures the page shows: total cards and every table row."""
    return js(d, """
        var out = {total: {}, rows: {}};
        document.querySelectorAll('#mt-rs-total .mt-card').forEach(function (c) {
            out.total[c.dataset.key] = +c.querySelector('.mt-exact').dataset.value; });
        ['mt-rs-processes', 'mt-rs-process-categories', 'mt-rs-categories', 'mt-rs-classes'].forEach(function (id) {
            var keys = [];
            document.querySelectorAll('#' + id + ' thead th').forEach(function (th) { keys.push(th.dataset.key); });
            document.querySelectorAll('#' + id + ' tbody tr').forEach(function (tr) {
                var f = {};
                for (var i = 0; i < keys.length; i++)
                    if (tr.children[i].dataset.value !== undefined) f[keys[i]] = +tr.children[i].dataset.value;
                out.rows[tr.dataset.name] = f;
            });
        });
        var v = document.getElementById('mt-rs-viewport');
        out.start = +v.dataset.startNs; out.end = +v.dataset.endNs;
        return out;""")


def cli_view(j):
    """The same figures from `refset report --json`, keyed as the page's rows."""
    rows = {}
    for i, p in enumerate(j["processes"]):
        rows["p%d" % i] = figs_of(p)
        for k, c in enumerate(p["categories"]):
            f = figs_of(c)
            if f["size_bytes"] or f["graph_start_bytes"] or f["graph_end_bytes"]:
                rows["p%dc%d" % (i, k)] = f
    for k, c in enumerate(j["categories"]):
        rows["c%d" % k] = figs_of(c)
    for k, c in enumerate(j["classes"]):
        rows["k%d" % k] = figs_of(c)
    return {"total": figs_of(j), "rows": rows}


def seconds(ns):
    return "%d.%09d" % (ns // 1000000000, ns % 1000000000)


def refset_viewport(d, name, rec, label):
    """The page's figures for its current viewport against the CLI's."""
    v = page_view(d)
    arg = "%s:%s" % (seconds(v["start"]), seconds(v["end"]))
    out = subprocess.run([os.environ["MT"], "refset", "report", rec, "--viewport", arg, "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        bad("%s: %s: refset report --viewport %s" % (name, label, arg), out.stderr.strip())
        return None
    c = cli_view(json.loads(out.stdout))
    diff = [k for k in FIGS if v["total"].get(k) != c["total"][k]]
    expect("%s: %s (%s): totals recomputed in the page equal refset report --viewport" % (name, label, arg), not diff,
           "page %r, CLI %r" % ({k: v["total"].get(k) for k in diff}, {k: c["total"][k] for k in diff}))
    rdiff = [r for r in set(v["rows"]) | set(c["rows"]) if v["rows"].get(r) != c["rows"].get(r)]
    expect("%s: %s: every process, category and class row equals the CLI's (%d rows)" % (name, label, len(c["rows"])),
           not rdiff, "rows differ: %r" % [(r, v["rows"].get(r), c["rows"].get(r)) for r in rdiff[:3]])
    return v


def check_refset(d, name, j, truth, rec):
    expect(name + ": page data carries the page groups", j.get("page_data") and j["page_data"]["references"] is not None,
           "no page_data")
    # 1: the report's own viewport, as drawn at first.
    refset_viewport(d, name, rec, "the report's viewport")
    expect(name + ": peak shown as the JSON's", card(d, "peak_bytes") == j["peak"]["bytes"],
           "card %s, JSON %s" % (card(d, "peak_bytes"), j["peak"]["bytes"]))
    for key, chart in (("by_process", "byProcess"), ("by_category", "byCategory")):
        n = js(d, "var u = MT.charts.%s; return u ? [u.data[0].length, u.series.length - 1] : null;" % chart)
        want_series = len(j["processes"]) if key == "by_process" else len(j["categories"])
        expect("%s: graph %s: a point per timeline entry, a line per %s" % (name, key, key[3:]),
               n and n[0] in (len(j["timeline"]), len(j["timeline"]) + 1) and n[1] == want_series,
               "%r, timeline %d" % (n, len(j["timeline"])))
    # 2: typed in, as --viewport takes it (the program's own T0 and T1 when given).
    if truth.get("viewport"):
        t0, t1 = truth["viewport"].split(":")
        for fid, val in (("mt-rs-t0", t0), ("mt-rs-t1", t1)):
            f = d.find_element(By.ID, fid)
            f.clear()
            f.send_keys(val)
        d.find_element(By.ID, "mt-rs-apply").click()
        time.sleep(0.2)
        v = refset_viewport(d, name, rec, "the viewport typed in")
        if v and truth.get("seed"):
            mb = 1 << 20
            t = v["total"]
            expect(name + ": the seed's viewport: 10 MB transient, 10 MB or more impacting and persistent",
                   abs(t["transient_bytes"] - 10 * mb) <= mb and t["impacting_bytes"] >= 9 * mb and
                   t["persistent_bytes"] >= 9 * mb, "%r" % t)
    # 3: dragged across the graph by the mouse (uPlot's select).
    from selenium.webdriver.common.action_chains import ActionChains
    over = d.find_element(By.CSS_SELECTOR, "#mt-rs-by-process .u-over")
    w = over.size["width"]
    ActionChains(d).move_to_element_with_offset(over, int(-w * 0.30), 0).click_and_hold() \
        .move_by_offset(int(w * 0.35), 0).release().perform()
    time.sleep(0.3)
    v = page_view(d)
    expect(name + ": a drag on the graph sets the viewport", 0 < v["start"] < v["end"],
           "viewport %r..%r" % (v["start"], v["end"]))
    refset_viewport(d, name, rec, "the viewport dragged")


def check_info(d, name, j, truth):
    for key, want in (("events", j["kinds"][0]["count"]), ("requests", int(j["spans"]["requests"]) if j["spans"] else 0),
                      ("alloc_time_ns", j["memory_time"]["alloc_time_ns"])):
        expect("%s: %s shown as the JSON's" % (name, key), card(d, key) == want, "card %s, JSON %s" % (card(d, key), want))
    circles = js(d, """var r = {}; document.querySelectorAll('#mt-info-events circle.mt-event').forEach(function (c) {
        r[c.dataset.kind] = +c.dataset.runTimeNs; }); return r;""")
    want = {k["kind"]: k["last"]["run_time_ns"] for k in j["kinds"] if k["kind"] != "any" and k["count"]}
    expect(name + ": each kind's last event on the timeline, at its time", circles == want, "drawn %r, JSON %r" % (circles, want))
    rows = js(d, "return document.querySelectorAll('#mt-info-kinds tbody tr').length;")
    expect(name + ": a row per kind", rows == len(j["kinds"]), "%d rows" % rows)
    if not j["spans"]:
        return
    bands = js(d, """var keys = [], r = [];
        document.querySelectorAll('#mt-spans-bands thead th').forEach(function (th) { keys.push(th.dataset.key); });
        document.querySelectorAll('#mt-spans-bands tbody tr').forEach(function (tr) {
            var f = {}; for (var i = 0; i < keys.length; i++) if (tr.children[i].dataset.value !== undefined) f[keys[i]] = +tr.children[i].dataset.value;
            r.push(f); });
        return r;""")
    want = sorted(({"from": b["percentile_from"], **{k: round(b[k], 3) for k in
                   ("requests", "affected_percent", "memory_share_percent", "all_memory_share_percent", "multiple_events")}}
                   for b in j["spans"]["by_percentile"]), key=lambda b: b["from"])
    got = sorted(bands, key=lambda b: b["from"])
    expect(name + ": percentile bands' figures are the JSON's", got == want, "page %r, JSON %r" % (got[:2], want[:2]))
    bars = js(d, """var r = []; document.querySelectorAll('#mt-spans-bars rect.mt-bar').forEach(function (b) {
        r.push([b.dataset.key, +b.dataset.value]); }); return r;""")
    wb = [[k, b[k]] for b in j["spans"]["by_percentile"] for k in ("affected_percent", "memory_share_percent", "all_memory_share_percent")]
    expect(name + ": memory's share drawn per band as the JSON's", sorted(bars) == sorted(wb), "bars %r" % bars[:6])
    share = js(d, "var e = document.getElementById('mt-spans-share'); return e ? [+e.dataset.memory, +e.dataset.all] : null;")
    expect(name + ": memory's share of all requests as the JSON's",
           share == [j["spans"]["memory_share_percent"], j["spans"]["all_memory_share_percent"]], "%r" % share)
    for i, n in enumerate(j["spans"].get("by_name", [])):
        got = js(d, "var c = document.querySelector('#mt-spans-name-%d-cards .mt-card[data-key=\"requests\"] .mt-exact');"
                    "return c ? +c.dataset.value : null;" % i)
        want = truth.get("by_name", {}).get(n["name"], n["requests"])
        expect("%s: span %r: requests as the %s" % (name, n["name"], "program counted" if n["name"] in truth.get("by_name", {}) else "JSON's"),
               got == want and got == n["requests"], "page %s, JSON %s, want %s" % (got, n["requests"], want))


def main():
    screens, jobs = sys.argv[1], sys.argv[2:]
    d = browser_or_skip(screens)
    if d is None:
        return 0
    try:
        for job in jobs:
            parts = job.split(":")
            kind, page, cli = parts[:3]
            rest = parts[3:]
            rec = rest.pop(0) if kind == "refset" else None
            truth = json.load(open(rest[0])) if rest else {}
            name = "%s (%s)" % (kind, os.path.basename(page))
            env = page_data(page)
            j = json.load(open(cli))
            expect(name + ": page data is the CLI's JSON", env is not None and env.get("data") == j and env.get("kind") == kind,
                   "envelope %r" % ({k: v for k, v in (env or {}).items() if k != "data"}))
            d.get_log("browser")
            d.get("file://" + os.path.abspath(page))
            if not wait_ready(d, name):
                continue
            expect(name + ": page drew without error", not js(d, "return document.body.dataset.error === '1'"),
                   js(d, "var e = document.querySelector('.mt-error'); return e ? e.textContent : '';"))
            screenshot(d, os.path.join(screens, "%s.png" % os.path.basename(page).rsplit(".", 1)[0]))
            try:
                if kind == "trace":
                    check_trace(d, name, j, truth)
                elif kind == "refset":
                    check_refset(d, name, j, truth, rec)
                elif kind == "info":
                    check_info(d, name, j, truth)
            except Exception as e:  # a missing element: a failed check, not a crash
                bad(name + ": checks ran", "%s: %s" % (type(e).__name__, str(e).splitlines()[0]))
            errs = console_errors(d)
            expect(name + ": no console errors", not errs, "; ".join(e["message"] for e in errs)[:600])
    finally:
        d.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())

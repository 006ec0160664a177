#!/usr/bin/env python3
"""sample_check.py — test_sample.sh's reader of reports and ledgers.

Reads the raw report lines (docs/report-format.md: key=value site lines)
and sampleprog's ledger (the program's own books), and prints one
"PASS name" or "FAIL name: why" line per check.

  sample_check.py estimates REPORT LEDGER LABEL [--by-thread] [--nsigma K] [--scale F]
      each (thread,) site function holding >= 1% of the ledger's allocated
      bytes: its estimated allocated bytes, allocations and live bytes
      within K standard errors of the ledger's (sampling theory of
      docs/sampling.md: var = sum s^2 (1-p)/p, p = 1 - exp(-s/R)); the
      sums over sites within their bound; sites of blocks >= R exact; the
      samples near sum p (the stack walks). --scale multiplies the
      estimates (to show the checks fail on wrong weights).
  sample_check.py exact REPORT LEDGER LABEL
      an exact detail report against the ledger: live bytes and counts per
      site function equal.
  sample_check.py summary A B LABEL
      the category lines of two reports (the malloc-family counters) equal.
  sample_check.py same A B LABEL
      the site lines of two reports equal, frames taken relative to their
      modules (the runs' addresses differ).
  sample_check.py rate1 SAMPLED EXACT LABEL
      a report sampled at rate 1 (every block sampled, weight 1) has the
      exact report's sites, figure for figure, and samples = allocs.
  sample_check.py sites REPORT LEDGER LABEL NAME PRESENT
      site function NAME has sampled sites (PRESENT=1) or none (0).
"""
import math
import sys


def parse_report(path):
    rep = {"sites": [], "categories": {}, "modules": [], "mode": None, "rate": None}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            word, _, rest = line.partition(" ")
            if word == "mode":
                rep["mode"] = rest
            elif word == "sample_rate":
                rep["rate"] = int(rest)
            elif word == "category":
                name, _, fields = rest.partition(" ")
                rep["categories"][name] = fields
            elif word == "module":
                kv = dict(x.split("=", 1) for x in rest.split(" ")[1:5] if "=" in x)
                path_ = rest.split(" path=", 1)[1] if " path=" in rest else ""
                rep["modules"].append((int(kv["start"], 16), int(kv["end"], 16), int(kv["bias"], 16), path_))
            elif word == "site":
                parts = rest.split(" ")
                site = {"id": int(parts[0])}
                for p in parts[1:]:
                    k, _, v = p.partition("=")
                    if k == "frames":
                        site["frames"] = [int(x, 16) for x in v.split(",") if x]
                    elif k == "category":
                        site[k] = v
                    else:
                        site[k] = int(v)
                rep["sites"].append(site)
    return rep


def parse_ledger(path):
    funcs, rows = {}, []
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == "func":
                funcs[w[1]] = int(w[2], 16)
            elif w[0] == "ledger":
                rows.append((w[1], w[2], int(w[3]), int(w[4]), int(w[5])))
    return funcs, rows


def func_of(addr, funcs):
    """The function (of funcs) that return address addr lies in."""
    best = None
    for name, a in funcs.items():
        if a <= addr < a + 4096 and (best is None or a > funcs[best]):
            best = name
    return best


def group_sites(rep, funcs, by_thread):
    """Sums of the report's sites by (thread, site function)."""
    site_funcs = {k: v for k, v in funcs.items() if k.startswith("site_")}
    thread_funcs = {k: v for k, v in funcs.items() if k.startswith("thread")}
    groups = {}
    for s in rep["sites"]:
        fr = s.get("frames", [])
        if not fr:
            continue
        fn = func_of(fr[0], site_funcs)
        if fn is None:
            continue
        th = "main"
        if by_thread:
            th = None
            for a in fr[1:]:
                th = func_of(a, thread_funcs)
                if th:
                    break
            if th is None:
                continue
        g = groups.setdefault((th, fn), {})
        for k, v in s.items():
            if isinstance(v, int) and k != "id":
                g[k] = g.get(k, 0) + v
    return groups


def prob(s, rate):
    return 1.0 if s >= rate else -math.expm1(-s / rate)


def out(ok, name, why):
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
    return ok


def estimates(argv):
    report, ledger, label = argv[:3]
    by_thread = "--by-thread" in argv
    nsigma = float(argv[argv.index("--nsigma") + 1]) if "--nsigma" in argv else 3.0
    scale = float(argv[argv.index("--scale") + 1]) if "--scale" in argv else 1.0
    rep = parse_report(report)
    funcs, rows = parse_ledger(ledger)
    rate = rep["rate"]
    out(rep["mode"] == "sample" and rate is not None, "%s: a sample report with its rate" % label,
        "mode %s, rate %s" % (rep["mode"], rate))
    if rate is None:
        return
    groups = group_sites(rep, funcs, by_thread)
    truth = {}
    for th, fn, size, na, nf in rows:
        key = (th if by_thread else "main", fn)
        t = truth.setdefault(key, {"alloc": 0, "valloc": 0.0, "n": 0, "vn": 0.0, "live": 0, "vlive": 0.0,
                                   "ps": 0.0, "vps": 0.0, "large": True})
        p = prob(size, rate)
        w = (1 - p) / p
        t["alloc"] += size * na
        t["valloc"] += na * size * size * w
        t["n"] += na
        t["vn"] += na * w
        t["live"] += size * (na - nf)
        t["vlive"] += (na - nf) * size * size * w
        t["ps"] += na * p
        t["vps"] += na * p * (1 - p)
        t["large"] &= size >= rate
    total = sum(t["alloc"] for t in truth.values())
    sums = {"alloc": 0.0, "valloc": 0.0, "est": 0.0, "ps": 0.0, "vps": 0.0, "samples": 0}
    checked = 0
    for key, t in sorted(truth.items()):
        g = groups.get(key, {})
        est_alloc = g.get("allocated_bytes", 0) * scale
        sums["alloc"] += t["alloc"]
        sums["valloc"] += t["valloc"]
        sums["est"] += est_alloc
        sums["ps"] += t["ps"]
        sums["vps"] += t["vps"]
        sums["samples"] += g.get("samples", 0)
        if t["alloc"] < 0.01 * total:
            continue
        checked += 1
        name = "%s: %s%s" % (label, key[1], " of " + key[0] if by_thread else "")
        slack = 2 + len(rep["sites"])  # each site's figures are rounded
        if t["large"]:
            out(est_alloc == t["alloc"] and g.get("allocs", 0) * scale == t["n"]
                and g.get("live_bytes", 0) * scale == t["live"] and g.get("samples", 0) == t["n"],
                name + " (blocks >= rate) is exact",
                "allocated %s/%s allocs %s/%s live %s/%s samples %s" % (est_alloc, t["alloc"], g.get("allocs"),
                                                                      t["n"], g.get("live_bytes"), t["live"],
                                                                      g.get("samples")))
            continue
        for what, est, true, var in (("allocated bytes", est_alloc, t["alloc"], t["valloc"]),
                                     ("allocations", g.get("allocs", 0) * scale, t["n"], t["vn"]),
                                     ("live bytes", g.get("live_bytes", 0) * scale, t["live"], t["vlive"])):
            se = math.sqrt(var)
            bound = nsigma * se + slack
            out(abs(est - true) <= bound, "%s %s within %g standard errors" % (name, what, nsigma),
                "estimate %d, truth %d, |diff| %d > %d (se %.0f)" % (est, true, abs(est - true), bound, se))
    out(checked >= 3, "%s: sites holding >= 1%% of the bytes checked" % label, "only %d" % checked)
    se = math.sqrt(sums["valloc"])
    out(abs(sums["est"] - sums["alloc"]) <= nsigma * se + 2 + len(rep["sites"]),
        "%s: the sum over sites is the total allocated within %g standard errors" % (label, nsigma),
        "estimate %d, truth %d (se %.0f)" % (sums["est"], sums["alloc"], se))
    se = math.sqrt(sums["vps"])
    out(abs(sums["samples"] - sums["ps"]) <= nsigma * se + 1 and sums["samples"] < 0.05 * sum(
        t["n"] for t in truth.values()),
        "%s: stack walks (samples) as the theory says, few" % label,
        "samples %d, expected %.1f (sd %.1f) of %d allocations" % (sums["samples"], sums["ps"], se,
                                                                 sum(t["n"] for t in truth.values())))


def exact(argv):
    report, ledger, label = argv[:3]
    rep = parse_report(report)
    funcs, rows = parse_ledger(ledger)
    groups = group_sites(rep, funcs, False)
    truth = {}
    for th, fn, size, na, nf in rows:
        t = truth.setdefault(fn, [0, 0])
        t[0] += size * (na - nf)
        t[1] += na - nf
    bad = []
    for fn, (live, count) in sorted(truth.items()):
        g = groups.get(("main", fn), {})
        if g.get("live_bytes", 0) != live or g.get("live_count", 0) != count:
            bad.append("%s: live %s/%s count %s/%s" % (fn, g.get("live_bytes"), live, g.get("live_count"), count))
    out(rep["mode"] == "detail" and not bad, "%s: the exact detail report's live sites are the ledger's" % label,
        "; ".join(bad) or "mode %s" % rep["mode"])


def summary(argv):
    a, b, label = argv[:3]
    keys = ("live_bytes", "live_count", "peak_bytes", "allocs", "frees", "reallocs")

    def counts(rep):
        res = {}
        for name, fields in rep["categories"].items():
            kv = dict(x.split("=", 1) for x in fields.split(" ") if "=" in x)
            if kv.get("kind") == "malloc":
                res[name] = tuple(kv.get(k) for k in keys)
        return res

    ca, cb = counts(parse_report(a)), counts(parse_report(b))
    out(ca == cb and ca, "%s: category totals equal an exact run's" % label, "%s vs %s" % (ca, cb))


def relative(rep, addr):
    for start, end, bias, path in rep["modules"]:
        if start <= addr < end:
            return "%s+%x" % (path.rsplit("/", 1)[-1], addr - bias)
    return "?%x" % addr


def same(argv):
    a, b, label = argv[:3]

    def lines(path):
        rep = parse_report(path)
        res = []
        for s in rep["sites"]:
            fields = " ".join("%s=%s" % (k, v) for k, v in sorted(s.items()) if k not in ("id", "frames"))
            res.append(fields + " " + ",".join(relative(rep, x) for x in s.get("frames", [])))
        return sorted(res)

    la, lb = lines(a), lines(b)
    diff = sorted(set(la) ^ set(lb))
    out(la == lb and la, "%s: the same seed gives the same sites" % label,
        "%d lines differ, e.g. %s" % (len(diff), diff[:2]))


def rate1(argv):
    a, b, label = argv[:3]

    def table(path, sampled):
        rep = parse_report(path)
        res = {}
        for s in rep["sites"]:
            key = ",".join(relative(rep, x) for x in s.get("frames", [])) + " " + s.get("category", "")
            if sampled and s.get("samples") != s.get("allocs"):
                res[key] = "samples %s != allocs %s" % (s.get("samples"), s.get("allocs"))
                continue
            res[key] = " ".join("%s=%s" % (k, v) for k, v in sorted(s.items())
                                if k not in ("id", "frames", "samples", "live_samples"))
        return res

    ta, tb = table(a, True), table(b, False)
    diff = sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))
    out(ta == tb and ta, "%s: sampled at rate 1, the sites are the exact run's" % label,
        "%d of %d sites differ, e.g. %s" % (len(diff), len(ta), [(k, ta.get(k), tb.get(k)) for k in diff[:2]]))


def sites(argv):
    report, ledger, label, name, present = argv[:5]
    rep = parse_report(report)
    funcs, _ = parse_ledger(ledger)
    groups = group_sites(rep, funcs, False)
    n = groups.get(("main", name), {}).get("samples", 0)
    want = present == "1"
    out((n > 0) == want, "%s: %s %s" % (label, name, "has sampled sites" if want else "has no site"),
        "%d samples there" % n)


if __name__ == "__main__":
    {"estimates": estimates, "exact": exact, "rate1": rate1, "summary": summary, "same": same, "sites": sites}[sys.argv[1]](
        sys.argv[2:])

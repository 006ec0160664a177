#!/usr/bin/env python3
"""Checks a decoded pprof profile against the truth make_fixture.py wrote.

usage: check_pprof.py protoc|goraw DECODED TRUTH.json PREFIX [--addr2line]
       check_pprof.py comments DECODED   (protoc's text: the profile's comments, one a line)

DECODED is `protoc --decode=perftools.profiles.Profile profile.proto`'s text
(after gzip -dc) or `go tool pprof -raw -symbolize=none`'s dump: two
decoders independent of memtrail's encoder. Both are read into one shape,
then compared with the truth: sample types, one sample per site in order
with its values, category label and return addresses, the function names
of its stack (root first, inlined frames their own), the mappings (the
program's first); with --addr2line also each location's functions and
line numbers against binutils' `addr2line -f -i` at (address - bias - 1).
Prints one "PASS PREFIX-name" or "FAIL PREFIX-name: why" line per check.
"""
import json
import re
import subprocess
import sys

mode, decoded_path = sys.argv[1:3]
if mode != "comments":
    truth_path, prefix = sys.argv[3:5]
    truth = json.load(open(truth_path))
use_addr2line = "--addr2line" in sys.argv
text = open(decoded_path).read()
failures = 0


def check(name, ok, why=""):
    global failures
    if ok:
        print("PASS %s-%s" % (prefix, name))
    else:
        failures += 1
        print("FAIL %s-%s: %s" % (prefix, name, why))


def expect(name, want, got):
    check(name, want == got, "expected %r, got %r" % (want, got))


# --- protoc's text format ------------------------------------------------------
def parse_text(s):
    """protobuf text format -> {field: [values]} with nested dicts."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[{}]|[A-Za-z_][A-Za-z0-9_]*:?|-?\d+', s)
    pos = 0

    def block():
        nonlocal pos
        out = {}
        while pos < len(tokens) and tokens[pos] != "}":
            name = tokens[pos].rstrip(":")
            pos += 1
            if tokens[pos] == "{":
                pos += 1
                val = block()
                pos += 1   # "}"
            else:
                tok = tokens[pos]
                pos += 1
                if tok.startswith('"'):
                    val = bytes(tok[1:-1], "latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8")
                elif tok in ("true", "false"):
                    val = tok == "true"
                else:
                    val = int(tok)
            out.setdefault(name, []).append(val)
        return out
    return block()


def one(msg, field, default=0):
    return msg.get(field, [default])[0]


def from_protoc(s):
    p = parse_text(s)
    st = p.get("string_table", [])
    S = lambda i: st[i] if 0 <= i < len(st) else "<bad string index %d>" % i
    prof = {"string0": st[0] if st else None}
    prof["sample_types"] = [(S(one(v, "type")), S(one(v, "unit"))) for v in p.get("sample_type", [])]
    pt = one(p, "period_type", {})
    prof["period_type"] = (S(one(pt, "type")), S(one(pt, "unit")))
    prof["period"] = one(p, "period")
    prof["time_nanos"] = one(p, "time_nanos")
    prof["duration_nanos"] = one(p, "duration_nanos")
    prof["default"] = S(one(p, "default_sample_type"))
    prof["comments"] = [S(i) for i in p.get("comment", [])]
    funcs = {one(f, "id"): (S(one(f, "name")), S(one(f, "filename"))) for f in p.get("function", [])}
    prof["locations"] = {}
    for l in p.get("location", []):
        lines = [(funcs.get(one(ln, "function_id"), ("<no function>", ""))[0],
                  funcs.get(one(ln, "function_id"), ("", ""))[1], one(ln, "line")) for ln in l.get("line", [])]
        prof["locations"][one(l, "id")] = (one(l, "mapping_id"), one(l, "address"), lines)
    prof["samples"] = []
    for smp in p.get("sample", []):
        labels = {S(one(lb, "key")): S(one(lb, "str")) for lb in smp.get("label", [])}
        prof["samples"].append((smp.get("location_id", []), smp.get("value", []), labels))
    prof["mappings"] = {one(m, "id"): (one(m, "memory_start"), one(m, "memory_limit"), S(one(m, "filename")),
                                       S(one(m, "build_id"))) for m in p.get("mapping", [])}
    prof["mapping_order"] = [one(m, "id") for m in p.get("mapping", [])]
    return prof


# --- go tool pprof -raw ----------------------------------------------------------
def from_goraw(s):
    prof = {"string0": "", "comments": [], "samples": [], "locations": {}, "mappings": {}, "mapping_order": []}
    section = None
    lines = s.splitlines()
    i = 0
    last_loc = None
    while i < len(lines):
        ln = lines[i]
        i += 1
        if ln.startswith("Comment: "):
            prof["comments"].append(ln[len("Comment: "):])
        elif ln.startswith("PeriodType: "):
            prof["period_type"] = tuple(ln.split()[1:3])
        elif ln.startswith("Period: "):
            prof["period"] = int(ln.split()[1])
        elif ln == "Samples:":
            section = "samples"
            types = lines[i].split()
            i += 1
            prof["sample_types"] = [tuple(t.replace("[dflt]", "").split("/")) for t in types]
            prof["default"] = next((t.split("/")[0] for t in types if t.endswith("[dflt]")), "")
        elif ln == "Locations":
            section = "locations"
        elif ln == "Mappings":
            section = "mappings"
        elif section == "samples":
            if ":" in ln and re.match(r"^\s*-?\d", ln):
                vals, locs = ln.split(":", 1)
                prof["samples"].append(([int(x) for x in locs.split()], [int(x) for x in vals.split()], {}))
            elif ln.strip():
                for k, v in re.findall(r"(\S+?):\[([^\]]*)\]", ln):
                    prof["samples"][-1][2][k] = v
        elif section == "locations":
            m = re.match(r"^\s*(\d+): (0x[0-9a-f]+) (?:M=(\d+) )?(.*)$", ln)
            if m:
                last_loc = int(m.group(1))
                prof["locations"][last_loc] = (int(m.group(3) or 0), int(m.group(2), 16), [])
                rest = m.group(4)
            else:
                rest = ln.strip()
            if rest:
                name, fileline, _ = rest.rsplit(" ", 2)
                f, _, line = fileline.rpartition(":")
                prof["locations"][last_loc][2].append((name, f, int(line)))
        elif section == "mappings":
            m = re.match(r"^(\d+): (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S*) (\S*)", ln)
            if m:
                prof["mappings"][int(m.group(1))] = (int(m.group(2), 16), int(m.group(3), 16), m.group(5),
                                                     m.group(6))
                prof["mapping_order"].append(int(m.group(1)))
    return prof


prof = from_goraw(text) if mode == "goraw" else from_protoc(text)
if mode == "comments":
    print("\n".join(prof["comments"]))
    sys.exit(0)

# --- the comparison ------------------------------------------------------------------
# alloc_space (pprof's heap order) only when the report's sites carry allocated_bytes
has_alloc = truth.get("has_allocated", False)
expect("sample-types", [("inuse_space", "bytes"), ("inuse_objects", "count")]
       + ([("alloc_space", "bytes")] if has_alloc else []) + [("alloc_objects", "count")],
       prof.get("sample_types"))
expect("string0", "", prof["string0"])
expect("period-type", ("space", "bytes"), prof.get("period_type"))
expect("period", 1, prof.get("period"))
expect("default-sample-type", truth.get("default", "inuse_space"), prof.get("default"))
if mode == "protoc":
    expect("time", truth["start_ns"], prof["time_nanos"])
    expect("duration", truth["end_ns"] - truth["start_ns"], prof["duration_nanos"])
check("comment", any("alloc_space" in c for c in prof["comments"]) != has_alloc, "comments: %r" % prof["comments"])
sites = truth["sites"]
expect("sample-count", len(sites), len(prof["samples"]))
for site, (locs, values, labels) in zip(sites, prof["samples"]):
    n = "site%d" % site["id"]
    expect(n + "-values", [site["live_bytes"], site["live_count"]]
           + ([site["allocated_bytes"]] if has_alloc else []) + [site["allocs"]], values)
    expect(n + "-category", {"category": site["category"]}, labels)
    missing = [l for l in locs if l not in prof["locations"]]
    check(n + "-locations-exist", not missing, "no location %r" % missing)
    if missing:
        continue
    addrs = [prof["locations"][l][1] for l in locs]
    if site["frames"]:
        expect(n + "-addresses", site["frames"], addrs)
        expect(n + "-mappings", site["modules"], [prof["locations"][l][0] for l in locs])
    names = []
    for l in locs:
        lines = prof["locations"][l][2]
        if lines:
            names += [fn for fn, _, _ in lines]
        else:
            names.append("<unsymbolized>")
    names.reverse()
    want = ["<unsymbolized>" if "+0x" in x or x.startswith("0x") else x for x in site["names"]]
    expect(n + "-functions", want, names)

mods = {m["id"]: (m["start"], m["end"], m["path"], "" if m["buildid"] == "-" else m["buildid"])
        for m in truth["modules"]}
expect("mappings", mods, prof["mappings"])
# pprof takes the first Mapping for the main binary (go tool pprof's "File:")
first = prof["mapping_order"][0] if prof["mapping_order"] else None
expect("main-mapping-first", truth["main"], prof["mappings"].get(first, (0, 0, None))[2])

if use_addr2line:
    by_id = {m["id"]: m for m in truth["modules"]}
    bad = []
    count = 0
    for lid, (mid, addr, lines) in sorted(prof["locations"].items()):
        if not mid or not lines:
            continue
        m = by_id[mid]
        out = subprocess.run(["addr2line", "-f", "-i", "-e", m["path"], "0x%x" % (addr - m["bias"] - 1)],
                             capture_output=True, text=True).stdout.split("\n")
        want = [(out[k], int(out[k + 1].rsplit(":", 1)[1].split()[0])) for k in range(0, len(out) - 1, 2)]
        got = [(fn, line) for fn, _, line in lines]
        count += 1
        if want != got:
            bad.append("0x%x: addr2line %r, profile %r" % (addr, want, got))
    check("addr2line-lines", count > 0 and not bad, "; ".join(bad) or "no symbolized location")
sys.exit(0)

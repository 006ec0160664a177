#!/usr/bin/env python3
"""Independent reader of detail-mode reports for tests/agent/test_detail.sh.

Parses the .mtr itself and attributes each site to a function by its
innermost frame, using `nm -S` symbol tables of the modules the report
lists (not memtrail's symbolizer). Subcommands:
  ledger REPORT LEDGER   compare per-function live bytes/count and allocs
                         (and the peak, for a function with one site) with
                         the program's ledger ("fn NAME live_bytes N
                         live_count N allocs N [peak_bytes N]")
  invariant REPORT       "live_bytes A B live_count C D": sites vs total
  stack REPORT FN        the stack of FN's site: module+offset per frame,
                         and the function each frame lies in
  stackb REPORT FN       the same, after the site's live bytes
  sites REPORT           every site as "category allocs frees stack" with
                         module-relative frames, sorted (to compare runs)
  callers REPORT FN [K]  for FN's sites, by the function of their frame K
                         (default 1, the caller): "CALLER allocs N bytes N
                         sites N", sorted
"""
import os
import subprocess
import sys


def parse(path):
    rep = {"modules": [], "sites": [], "total": {}}
    for line in open(path):
        line = line.rstrip("\n")
        key, _, rest = line.partition(" ")
        if key == "module":
            mid, _, fields = rest.partition(" ")
            head, _, p = fields.partition(" path=")
            m = dict(kv.split("=", 1) for kv in head.split())
            rep["modules"].append({"bias": int(m["bias"], 16), "start": int(m["start"], 16),
                                   "end": int(m["end"], 16), "path": p})
        elif key == "site":
            parts = rest.split()
            f = dict(kv.split("=", 1) for kv in parts[1:])
            frames = [int(x, 16) for x in f["frames"].split(",")] if f.get("frames") else []
            rep["sites"].append({k: (int(v) if k not in ("frames", "category") else v) for k, v in f.items()
                                 if k != "frames"} | {"frames": frames})
        elif key == "total":
            rep["total"] = {k: int(v) for k, v in (kv.split("=", 1) for kv in rest.split())}
        elif key in ("unwinder", "stack_depth", "mode"):
            rep[key] = rest
    return rep


_syms = {}


def symbols(path):
    if path not in _syms:
        out = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True).stdout
        syms = []
        for line in out.splitlines():
            p = line.split()
            if len(p) == 4 and p[2] in "tTwW":
                syms.append((int(p[0], 16), int(p[1], 16), p[3]))
        _syms[path] = syms
    return _syms[path]


def where(rep, addr):
    """(module basename, offset, function or None) of a return address."""
    for m in rep["modules"]:
        if m["start"] <= addr < m["end"]:
            off = addr - m["bias"]
            fn = None
            if os.path.exists(m["path"]):
                for lo, size, name in symbols(m["path"]):
                    if lo <= off - 1 < lo + size:
                        fn = name
                        break
            return os.path.basename(m["path"]), off, fn
    return None, addr, None


def by_function(rep):
    acc = {}
    for s in rep["sites"]:
        if not s["frames"]:
            continue
        fn = where(rep, s["frames"][0])[2]
        a = acc.setdefault(fn, {"live_bytes": 0, "live_count": 0, "allocs": 0, "peak_bytes": 0,
                                "allocated_bytes": 0, "sites": 0})
        for k in a:
            a[k] += s[k] if k != "sites" else 1
    return acc


def main():
    cmd, report = sys.argv[1], parse(sys.argv[2])
    if cmd == "ledger":
        acc = by_function(report)
        for line in open(sys.argv[3]):
            p = line.split()
            if not p or p[0] != "fn":
                continue
            want = {"live_bytes": int(p[3]), "live_count": int(p[5]), "allocs": int(p[7])}
            got = dict(acc.get(p[1], {"live_bytes": 0, "live_count": 0, "allocs": 0, "peak_bytes": 0,
                                      "allocated_bytes": 0, "sites": 0}))
            if len(p) > 11 and p[10] == "allocated_bytes":
                want["allocated_bytes"] = int(p[11])
            else:
                got.pop("allocated_bytes")
            # A site's peak is its own: comparable when the function has one site.
            if len(p) > 9 and p[8] == "peak_bytes" and got["sites"] == 1:
                want["peak_bytes"] = int(p[9])
            else:
                got.pop("peak_bytes")
            got.pop("sites")
            print(p[1], "ok" if got == want else "want %s got %s" % (want, got))
    elif cmd == "invariant":
        t = report["total"]
        print("live_bytes %d %d live_count %d %d" % (
            sum(s["live_bytes"] for s in report["sites"]), t["live_bytes"],
            sum(s["live_count"] for s in report["sites"]), t["live_count"]))
    elif cmd == "stack":
        for s in report["sites"]:
            if s["frames"] and where(report, s["frames"][0])[2] == sys.argv[3]:
                print(" ".join("%s+0x%x:%s" % where(report, a) for a in s["frames"]))
    elif cmd == "stackb":
        for s in report["sites"]:
            if s["frames"] and where(report, s["frames"][0])[2] == sys.argv[3]:
                print(s["live_bytes"], " ".join("%s+0x%x:%s" % where(report, a) for a in s["frames"]))
    elif cmd == "sites":
        rows = []
        for s in report["sites"]:
            frames = " ".join("%s+0x%x" % where(report, a)[:2] for a in s["frames"])
            rows.append("%s %d %d %s" % (s["category"], s["allocs"], s["frees"], frames))
        print("\n".join(sorted(rows)))
    elif cmd == "callers":
        acc = {}
        k = int(sys.argv[4]) if len(sys.argv) > 4 else 1
        for s in report["sites"]:
            if len(s["frames"]) > k and where(report, s["frames"][0])[2] == sys.argv[3]:
                a = acc.setdefault(where(report, s["frames"][k])[2], [0, 0, 0])
                a[0] += s["allocs"]
                a[1] += s["allocated_bytes"]
                a[2] += 1
        for caller in sorted(acc, key=str):
            print("%s allocs %d bytes %d sites %d" % ((caller,) + tuple(acc[caller])))
    else:
        sys.exit("unknown subcommand " + cmd)


main()

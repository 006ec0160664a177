#!/usr/bin/env python3
"""Builds a detail report (.mtr) from what stackprog prints (real return
addresses, load biases, spans and build-ids), and the truth the export
tests compare against: per site its category, counters, frames and the
stack of function names by construction (root first).

usage: make_fixture.py PROG_OUTPUT OUT.mtr OUT.json [--prog-path PATH] [--truncate] [--no-allocated] [--lib-first]
  --prog-path PATH  name another file (a stripped copy) as the program's module
  --truncate        cut the report after its third site (no end marker)
  --no-allocated    no allocated_bytes= on the site lines (an older agent's report)
  --lib-first       the library's module line (ID 1) before the program's (ID 2), as a
                    trace lists the dynamic loader's first

The truth's module ids are the pprof Mappings' the export gives: the
program's (the report's exe) 1, whatever the report's order.
"""
import json
import sys

args = sys.argv[1:]
prog_out, mtr_path, json_path = args[:3]
prog_path = None
truncate = "--truncate" in args
with_allocated = "--no-allocated" not in args
if "--prog-path" in args:
    prog_path = args[args.index("--prog-path") + 1]

modules, stacks = {}, {}
for line in open(prog_out):
    f = line.split()
    if f[0] == "module":
        m = dict(kv.split("=", 1) for kv in f[2:6])
        m["path"] = line.split(" path=", 1)[1].rstrip("\n")
        modules[f[1]] = m
    elif f[0] == "stack":
        stacks[f[1]] = [int(a, 16) for a in f[2].split(",")]
if prog_path:
    modules["prog"]["path"] = prog_path
stacks["nomodule"] = [0x10]
stacks["none"] = []

# The functions each recorded chain passes through, root first, grouped by
# return address (stackprog.c): index_insert is inlined into build_index, so
# build_index's return address gives both.
chains = {
    "config1": [["main"], ["load_settings"], ["parse_config"]],
    "config2": [["main"], ["load_settings"], ["parse_config"]],
    "index": [["main"], ["build_index", "index_insert"]],
    "lib": [["main"], ["lib_make_buffer"], ["lib_alloc"]],
    "nomodule": [["0x10"]],
    "none": [["[unknown]"]],
}
# id, stack, category, live_bytes, live_count, peak_bytes, allocs, frees, reallocs, allocated_bytes
sites = [
    (0, "none", "malloc", 32, 2, 64, 2, 0, 0, 64),
    (1, "config1", "malloc", 4096, 2, 8192, 5, 3, 1, 20480),
    (2, "config1", "parser", 1000, 1, 1000, 1, 0, 0, 1000),
    (3, "config2", "malloc", 24, 3, 48, 3, 0, 2, 72),
    (4, "index", "index", (1 << 40) + 3, 7, (1 << 40) + 3, 9, 2, 0, (1 << 41) + 5),
    (5, "lib", "malloc", 0, 0, 512, 11, 11, 0, 5632),
    (6, "nomodule", "malloc", 16, 1, 16, 1, 0, 0, 16),
]
order = ["lib", "prog"] if "--lib-first" in args else ["prog", "lib"]
mod_id = {"prog": 1, "lib": 2}  # the profile's Mapping ids: the program's first
file_id = {name: i + 1 for i, name in enumerate(order)}  # the report's module IDs


def module_of(addr):
    for name in order:
        m = modules[name]
        if int(m["start"], 16) <= addr < int(m["end"], 16):
            return name
    return None


def stripped_name(addr):
    """A frame in a module without symbols: MODULE_FILE_NAME+0xOFFSET."""
    m = modules[module_of(addr)]
    return "%s+0x%x" % (m["path"].rsplit("/", 1)[-1], addr - int(m["bias"], 16))


truth = {"has_allocated": with_allocated, "main": modules["prog"]["path"], "sites": [], "modules": [], "start_ns": 1700000000000000000, "end_ns": 1700000002500000000}
for name in order:
    m = modules[name]
    truth["modules"].append({"id": mod_id[name], "path": m["path"], "bias": int(m["bias"], 16),
                             "start": int(m["start"], 16), "end": int(m["end"], 16),
                             "buildid": m["buildid"]})
total = [0] * 6
lines = []
for sid, stack, cat, lb, lc, pk, al, fr, rl, ab in sites:
    frames = stacks[stack]
    groups = [list(g) for g in chains[stack]]
    if prog_path:   # the program's frames have no names; its library's still do
        for k, addr in enumerate(frames):      # innermost first; groups are root first
            if module_of(addr) == "prog":
                groups[len(frames) - 1 - k] = [stripped_name(addr)]
    names = [n for g in groups for n in g]
    truth["sites"].append({"id": sid, "stack": stack, "category": cat, "live_bytes": lb, "live_count": lc,
                           "peak_bytes": pk, "allocs": al, "frees": fr, "reallocs": rl,
                           "frames": frames, "names": names,
                           "modules": [mod_id.get(module_of(a), 0) for a in frames]})
    if with_allocated:
        truth["sites"][-1]["allocated_bytes"] = ab
    for i, v in enumerate((lb, lc, pk, al, fr, rl)):
        total[i] += v
    lines.append("site %d category=%s live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=%d reallocs=%d "
                 "%sframes=%s" % (sid, cat, lb, lc, pk, al, fr, rl,
                                  "allocated_bytes=%d " % ab if with_allocated else "",
                                  ",".join("0x%x" % a for a in frames)))

with open(mtr_path, "w") as out:
    out.write("memtrail-report 1\npid 4242\nppid 1\nexe %s\ncmdline stackprog\nmode detail\n"
              "start_ns 1700000000000000000\nend_ns 1700000002500000000\nreason exit\n" % modules["prog"]["path"])
    for cat in ("malloc", "parser", "index"):
        c = [0] * 6
        for s in truth["sites"]:
            if s["category"] == cat:
                for i, k in enumerate(("live_bytes", "live_count", "peak_bytes", "allocs", "frees", "reallocs")):
                    c[i] += s[k]
        out.write("category %s kind=malloc live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=%d "
                  "reallocs=%d\n" % ((cat,) + tuple(c)))
    out.write("total live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=%d reallocs=%d\n" % tuple(total))
    out.write("errors double_free=0 bad_canary=0 foreign_free=0\nstack_depth 4\nunwinder fp\n")
    for name in order:
        m = modules[name]
        out.write("module %d bias=%s start=%s end=%s buildid=%s path=%s\n" % (
            file_id[name], m["bias"], m["start"], m["end"], m["buildid"],
            m["path"].replace("\\", "\\\\").replace("\n", "\\n")))
    for i, line in enumerate(lines):
        if truncate and i == 3:
            break
        out.write(line + "\n")
    if not truncate:
        out.write("sites count=%d dropped=2\nend\n" % len(lines))
if truncate:
    truth["sites"] = truth["sites"][:3]
json.dump(truth, open(json_path, "w"), indent=1)

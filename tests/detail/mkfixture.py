#!/usr/bin/env python3
"""mkfixture.py — writes a detail-mode report (docs/report-format.md,
"Detail mode") from the output of the `sites` test program: its module map
and the stacks it captured, with the counters given here per capture name.

usage: mkfixture.py CAPTURES COUNTS [OLD=NEW ...]
  CAPTURES  the output of build/tests/detail/sites
  COUNTS    name=live_bytes,live_count,peak_bytes,allocs,frees[,allocated_bytes][,category];...
            (captures not named get no site; a site without allocated_bytes
            gets no allocated_bytes= field, as in reports of older agents)
  OLD=NEW   replace module path OLD by NEW (a stripped or rebuilt copy)
The category and total lines are the sums of the sites, as the agent's are.
"""
import sys

lines = open(sys.argv[1]).read().splitlines()
counts = []
for item in sys.argv[2].split(';'):
    name, v = item.split('=')
    f = v.split(',')
    alloc = None
    if len(f) > 5 and f[5].isdigit():
        alloc = int(f.pop(5))
    counts.append((name, [int(x) for x in f[:5]], f[5] if len(f) > 5 else 'malloc', alloc))
subs = dict(a.split('=', 1) for a in sys.argv[3:])
mods = [l.split(' ', 1)[1] for l in lines if l.startswith('module ')]
caps = {l.split(' ')[1]: l.split(' ')[2] for l in lines if l.startswith('capture ')}

out = ["memtrail-report 1", "pid 4242", "ppid 1", "exe /usr/bin/sites", "cmdline sites",
       "mode detail", "start_ns 1000", "end_ns 2000", "reason exit"]
cats = {}
sites = []
for i, (name, c, cat, alloc) in enumerate(counts):
    t = cats.setdefault(cat, [0] * 5)
    for k in range(5):
        t[k] += c[k]
    sites.append("site %d category=%s live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=%d "
                 "reallocs=0 %sframes=%s" % (i + 1, cat, c[0], c[1], c[2], c[3], c[4],
                                             "" if alloc is None else "allocated_bytes=%d " % alloc, caps[name]))
tot = [0] * 5
for cat, t in cats.items():
    out.append("category %s kind=malloc live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=%d "
               "reallocs=0" % ((cat,) + tuple(t)))
    tot = [a + b for a, b in zip(tot, t)]
out.append("total live_bytes=%d live_count=%d peak_bytes=%d allocs=%d frees=%d reallocs=0" % tuple(tot))
out.append("errors double_free=0 bad_canary=0 foreign_free=0")
out.append("stack_depth 10")
out.append("unwinder libunwind")
for i, m in enumerate(mods):
    for old, new in subs.items():
        m = m.replace(' path=' + old, ' path=' + new) if m.endswith(' path=' + old) else m
    out.append("module %d %s" % (i + 1, m))
out += sites
out.append("sites count=%d dropped=0" % len(sites))
out.append("end")
print("\n".join(out))

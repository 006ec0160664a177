#!/usr/bin/env python3
"""mksampled.py -- turns a real detail report (memtrail run --mode detail)
into a sampled one as docs/sampling.md "Report format" writes it, for the
CLI's tests of sampled reports while they are read independently of the
agent that writes them: `mode sample`, a `sample_rate R` line after the
unwinder line, and `samples=N live_samples=M` after allocated_bytes on
every site line. The counters stay what the real run counted (they stand
for the estimates); each site's samples are made up from its figures, so
that the test knows them: samples = allocs // 2 + 1 + id % 3, live_samples
= min(live_count, samples).

Usage: mksampled.py IN.mtr OUT.mtr RATE"""
import sys


def samples_of(fields, site_id):
    allocs = int(fields["allocs"])
    samples = allocs // 2 + 1 + site_id % 3
    return samples, min(int(fields["live_count"]), samples)


def convert(lines, rate):
    out = []
    for line in lines:
        if line == "mode detail":
            line = "mode sample"
        elif line.startswith("site "):
            words = line.split(" ")
            fields = dict(w.split("=", 1) for w in words[2:])
            n, live = samples_of(fields, int(words[1]))
            at = next(i for i, w in enumerate(words) if w.startswith("allocated_bytes=")) + 1
            words[at:at] = ["samples=%d" % n, "live_samples=%d" % live]
            line = " ".join(words)
        out.append(line)
        if line.startswith("unwinder "):
            out.append("sample_rate %s" % rate)
    return out


def main():
    src, dst, rate = sys.argv[1:4]
    with open(src) as f:
        lines = f.read().split("\n")
    if "mode detail" not in lines or not any(l.startswith("unwinder ") for l in lines):
        sys.exit("mksampled.py: %s is not a detail report with an unwinder line" % src)
    with open(dst, "w") as f:
        f.write("\n".join(convert(lines, rate)))


main()

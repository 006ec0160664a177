#!/usr/bin/env python3
"""mkseeds.py -- writes the hand-made seeds of the text fuzz targets into
their corpora (committed; `make fuzz-seeds` runs this again):

  tests/report/fuzz/corpus/seed-*.mtr        reports: every line and field of
      docs/report-format.md, detail mode, sampled detail mode (docs/sampling.md),
      extreme integers, files cut short,
      duplicates, escapes, modules that overlap or are empty
  tests/agent/fuzz/corpus/seed-*             MEMTRAIL_OPTIONS strings: each key
      with good and bad values, escapes, empty fields
  tests/xe/fuzz/corpus_sessions/seed-*       MEMTRAIL_SESSIONS definitions: each
      option and target with its parameters, several per input
  tests/xe/fuzz/corpus_pred/seed-*           predicates: each field, operator,
      unit, nesting, and (after a NUL) bytes for the events they are tried on

Real reports recorded by memtrail itself (seed-real-*.mtr) are kept in the
corpus as they were recorded, not written here."""
import os
import struct
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def write(d, name, data):
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- reports -----------------------------------------------------------------

HEAD = "memtrail-report 1\n"
COUNTS = "live_bytes={lb} live_count={lc} peak_bytes={pb} allocs={a} frees={f} reallocs={r}"
VM = " reserved={rs} committed={cm} resident={rd} mappings={mp}"


def cat_line(name, kind, vm=True, **v):
    d = dict(lb=1048, lc=3, pb=90000, a=1900, f=1897, r=4, rs=1 << 20, cm=1 << 19, rd=65536, mp=2)
    d.update(v)
    s = "category %s kind=%s " % (name, kind) + COUNTS.format(**d)
    return s + (VM.format(**d) if vm else "") + "\n"


def summary(extra_top="", extra_cats="", pid="4242", ppid="4241", start="1763868000123456789",
            end="1763868001123456789", total=None, tail="end\n"):
    t = total or "total live_bytes=1048 live_count=3 peak_bytes=90000 allocs=1910 frees=1907 reallocs=4\n"
    return (HEAD + "pid %s\nppid %s\nexe /usr/bin/app\ncmdline app --x\\sy a\\\\b\\nc\nmode summary\n"
            "start_ns %s\nend_ns %s\nreason exit\n" % (pid, ppid, start, end) + extra_top +
            cat_line("malloc", "malloc") + cat_line("parser", "malloc", lb=0, lc=0) +
            cat_line("memtrail", "overhead") + cat_line("heap", "vm", lb=0, lc=0, pb=0, a=0, f=0, r=0) +
            cat_line("other", "vm", lb=0, lc=0, pb=0, a=0, f=0, r=0) + extra_cats + t +
            "process rss_bytes=9035776 peak_rss_bytes=52428800 reserved=85811200 committed=21842944 "
            "resident=9035776\nerrors double_free=1 bad_canary=0 foreign_free=2\n" + tail)


def detail_part(sites=None, modules=None, depth=4, count=None, dropped=0):
    mods = modules if modules is not None else [
        "module 1 bias=0x55d0c0000000 start=0x55d0c0000000 end=0x55d0c0031000 buildid=5f3e0c1d9a7b44e2 "
        "path=/usr/bin/app",
        "module 2 bias=0x7f3a12000000 start=0x7f3a12000000 end=0x7f3a121c5000 buildid=- "
        "path=/usr/lib/x86_64-linux-gnu/libc.so.6"]
    st = sites if sites is not None else [
        "site 1 category=malloc live_bytes=4096 live_count=1 peak_bytes=8192 allocs=3 frees=2 reallocs=0 "
        "allocated_bytes=12288 frames=0x55d0c0001234,0x55d0c0002345,0x7f3a12029d8f",
        "site 2 category=parser live_bytes=0 live_count=0 peak_bytes=64 allocs=1 frees=1 reallocs=0 "
        "allocated_bytes=64 frames=0x55d0c0001299",
        "site 0 category=malloc live_bytes=16 live_count=1 peak_bytes=16 allocs=1 frees=0 reallocs=0 "
        "allocated_bytes=16 frames="]
    n = count if count is not None else len(st)
    return ("stack_depth %d\nunwinder cfi\n" % depth + "".join(m + "\n" for m in mods) +
            "".join(s + "\n" for s in st) + "sites count=%d dropped=%d\n" % (n, dropped))


def detail(**kw):
    return summary(tail=detail_part(**kw) + "end\n").replace("mode summary", "mode detail")


def sampled(rate="524288", samples=((3, 1), (1, 0), (1, 1)), **kw):
    """A sampled detail report (docs/sampling.md): mode sample, a sample_rate
    line after unwinder (none when rate is None), samples= and live_samples=
    on each default site (a pair (n, None) writes samples= alone)."""
    part = detail_part(**kw)
    if rate is not None:
        part = part.replace("unwinder cfi\n", "unwinder cfi\nsample_rate %s\n" % rate)
    lines = part.split("\n")
    k = 0
    for i, line in enumerate(lines):
        if line.startswith("site ") and k < len(samples):
            n, live = samples[k]
            extra = " samples=%s" % n + ("" if live is None else " live_samples=%s" % live)
            lines[i] = line.replace(" frames=", extra + " frames=")
            k += 1
    return summary(tail="\n".join(lines) + "end\n").replace("mode summary", "mode sample")


def sampled_seeds(d):
    write(d, "seed-sample.mtr", sampled())
    write(d, "seed-sample-no-rate.mtr", sampled(rate=None))
    write(d, "seed-sample-bad-rate.mtr", sampled(rate="0"))
    write(d, "seed-sample-rate-not-int.mtr", sampled(rate="512KiB"))
    write(d, "seed-sample-extreme.mtr", sampled(rate=str(I64_MAX), samples=((I64_MAX, I64_MAX), (I64_MAX, 0),
                                                                            (1, 1))))
    write(d, "seed-sample-half-fields.mtr", sampled(samples=((3, None),)))
    write(d, "seed-sample-live-over.mtr", sampled(samples=((1, 2),)))
    write(d, "seed-sample-rate-in-detail.mtr", sampled().replace("mode sample", "mode detail"))
    write(d, "seed-sample-cut.mtr", sampled()[: sampled().index("site 2")])


def reports():
    d = os.path.join(ROOT, "tests/report/fuzz/corpus")
    sampled_seeds(d)
    write(d, "seed-summary.mtr", summary())
    write(d, "seed-detail.mtr", detail())
    write(d, "seed-old-format.mtr",    # no VM fields, no reallocs, no process line
          HEAD + "pid 1\nmode summary\n" + cat_line("malloc", "malloc", vm=False) +
          "total live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0\nend\n")
    write(d, "seed-unknown-keys.mtr",
          summary(extra_top="future_key whatever it says\n",
                  extra_cats="category new kind=gpu live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 "
                             "colour=blue\n"))
    ext = dict(lb=I64_MAX, lc=I64_MIN, pb=I64_MAX, a=I64_MIN, f=I64_MAX, r=I64_MIN, rs=I64_MAX, cm=I64_MIN,
               rd=I64_MAX, mp=I64_MIN)
    extreme_cats = cat_line("big", "malloc", **ext) + cat_line("neg", "vm", **{k: (I64_MIN if v == I64_MAX else I64_MAX)
                                                                              for k, v in ext.items()})
    tot = "total " + COUNTS.format(lb=I64_MAX, lc=I64_MIN, pb=I64_MAX, a=I64_MAX, f=I64_MIN, r=I64_MAX) + "\n"
    extreme_sites = [
        "site 1 category=big " + COUNTS.format(lb=I64_MAX, lc=I64_MAX, pb=I64_MAX, a=I64_MAX, f=I64_MIN, r=I64_MIN)
        + " allocated_bytes=%d frames=0xffffffffffffffff,0x0,0x1" % I64_MAX,
        "site %d category=big " % I64_MAX + COUNTS.format(lb=I64_MIN, lc=I64_MIN, pb=I64_MIN, a=I64_MIN, f=I64_MAX,
                                                          r=I64_MAX) + " allocated_bytes=%d frames=0x1" % I64_MIN]
    big = summary(extra_cats=extreme_cats, total=tot, pid=str(I64_MAX), ppid=str(I64_MAX),
                  start=str(I64_MIN), end=str(I64_MAX),
                  tail=detail_part(sites=extreme_sites, modules=[
                      "module 0 bias=0xffffffffffffffff start=0x0 end=0xffffffffffffffff buildid=- path=/x"],
                      depth=1024, dropped=I64_MAX) + "end\n").replace("mode summary", "mode detail")
    write(d, "seed-extreme-values.mtr", big)
    write(d, "seed-negative-times.mtr", summary(start=str(I64_MIN), end="-1", pid="-5", ppid=str(I64_MIN)))
    full = summary()
    write(d, "seed-cut-mid-line.mtr", full[: full.index("total") + 17])
    write(d, "seed-no-end.mtr", full[: full.index("end\n")])
    write(d, "seed-end-without-newline.mtr", full[:-1])
    write(d, "seed-data-after-end.mtr", full + "pid 1\n")
    write(d, "seed-dup-category.mtr", summary(extra_cats=cat_line("malloc", "malloc")))
    write(d, "seed-dup-site.mtr", detail(sites=[
        "site 5 category=a live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 frames=0x1",
        "site 5 category=b live_bytes=0 live_count=0 peak_bytes=0 allocs=0 frees=0 frames=0x2"]))
    write(d, "seed-dup-module.mtr", detail(modules=[
        "module 1 bias=0x0 start=0x1000 end=0x2000 buildid=- path=/a",
        "module 1 bias=0x0 start=0x3000 end=0x4000 buildid=- path=/b"]))
    write(d, "seed-modules-overlap.mtr", detail(modules=[
        "module 1 bias=0x0 start=0x1000 end=0x9000 buildid=- path=/a",
        "module 2 bias=0x0 start=0x2000 end=0x3000 buildid=ab path=/b\\\\c\\nd",
        "module 3 bias=0x0 start=0x5000 end=0x5000 buildid=- path=/empty",
        "module 4 bias=0x10 start=0x9000 end=0xa000 buildid=- path=/with space"], sites=[
        "site 1 category=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 frames=0x2001,0x1001,0x5000,0x9fff",
        "site 2 category=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 frames=0x2001,0x1001,0x5001"]))
    write(d, "seed-bad-escape.mtr", summary().replace("cmdline app --x\\sy", "cmdline app --x\\qy"))
    write(d, "seed-bad-header.mtr", "memtrail-report 2\npid 1\nend\n")
    write(d, "seed-binary.mtr", HEAD.encode() + bytes(range(256)) + b"\nend\n")
    write(d, "seed-sites-count-mismatch.mtr", detail(count=7))
    write(d, "seed-too-many-frames.mtr", detail(depth=1))
    many = "".join(cat_line("c%d" % i, "malloc", lb=i, a=i * 3) for i in range(300))
    write(d, "seed-many-categories.mtr", summary(extra_cats=many))
    sites = ["site %d category=c%d live_bytes=%d live_count=1 peak_bytes=%d allocs=%d frees=0 reallocs=0 "
             "allocated_bytes=%d frames=0x55d0c000%04x,0x55d0c0002345,0x7f3a12029d8f"
             % (i, i % 7, i * 16, i * 32, i, i * 48, (i * 37) % 0xffff) for i in range(1, 300)]
    write(d, "seed-many-sites.mtr", detail(sites=sites))
    write(d, "seed-no-allocated.mtr", detail(sites=[
        "site 1 category=malloc live_bytes=1 live_count=1 peak_bytes=1 allocs=1 frees=0 frames=0x55d0c0001234",
        "site 2 category=malloc live_bytes=2 live_count=1 peak_bytes=2 allocs=1 frees=0 allocated_bytes=2 "
        "frames=0x55d0c0001234"]))
    info_seeds(d)


INFO_FIELDS = ("time_ns run_time_ns live_before_bytes live_after_bytes fragmentation_before_bytes "
               "fragmentation_after_bytes rss_bytes committed_bytes memory_load_bytes total_available_bytes "
               "alloc_time_ns map_time_ns minor_faults major_faults overhead_bytes event_ns").split()


def info_part(spans=None, names=None, v=12345, cats="malloc:7000000,parser:1000000"):
    """The memory info and span lines (docs/report-format.md "Memory info and request spans")."""
    s = "memory_time run_time_ns=5012345678 alloc_time_ns=1200345 map_time_ns=845000\n"
    for i, kind in enumerate(("any", "peak", "grow", "trim", "limit", "periodic")):
        n = 0 if kind in ("limit", "periodic") else i + 3
        ev = "none" if n == 0 else ("trim" if kind == "any" else kind)
        s += "info kind=%s count=%d event=%s index=%d " % (kind, n, ev, n)
        s += " ".join("%s=%d" % (f, 0 if n == 0 else v) for f in INFO_FIELDS)
        s += " categories=%s\n" % ("" if n == 0 else cats)
    sp = spans if spans is not None else [
        "span_name id=1 count=832 name=GET\\s/index",
        "span id=1 lo_ns=41000 hi_ns=42000 count=812 affected=0 multiple=0 events=0 duration_ns=33612000 "
        "memory_ns=402000 faults=0",
        "span id=1 lo_ns=5100000 hi_ns=5200000 count=20 affected=20 multiple=2 events=22 duration_ns=103000000 "
        "memory_ns=100100000 faults=3",
        "span_memory id=1 lo_ns=9000 hi_ns=10000 count=812",
        "span_memory id=1 lo_ns=5000000 hi_ns=5100000 count=20",
        "span_name id=2 count=1 name=db",
        "span id=2 lo_ns=3 hi_ns=4 count=1 affected=1 multiple=1 events=2 duration_ns=3 memory_ns=1 faults=0"]
    nn = names if names is not None else sum(1 for x in sp if x.startswith("span_name "))
    return s + "".join(x + "\n" for x in sp) + "spans names=%d unmatched_ends=1 dropped=0 faults_counted=1\n" % nn


def info_seeds(d):
    write(d, "seed-info.mtr", summary(tail=info_part() + "end\n"))
    write(d, "seed-info-detail.mtr",
          summary(tail=info_part() + detail_part() + "end\n").replace("mode summary", "mode detail"))
    write(d, "seed-info-no-spans.mtr", summary(tail=info_part(spans=[]) + "end\n"))
    full = summary(tail=info_part() + "end\n")
    write(d, "seed-info-cut-in-spans.mtr", full[: full.index("span id=1 lo_ns=5100000") + 30])
    write(d, "seed-info-extreme.mtr", summary(tail=info_part(v=I64_MAX, cats="a:%d,b:%d" % (I64_MIN, I64_MAX), spans=[
        "span_name id=%d count=%d name=x" % (I64_MAX, I64_MAX),
        "span id=%d lo_ns=0 hi_ns=%d count=%d affected=%d multiple=%d events=%d duration_ns=%d memory_ns=%d "
        "faults=%d" % ((I64_MAX,) * 9)]) + "end\n"))
    write(d, "seed-info-bucket-disorder.mtr", summary(tail=info_part(spans=[
        "span_name id=1 count=2 name=a",
        "span id=1 lo_ns=50 hi_ns=60 count=1 affected=0 multiple=0 events=0 duration_ns=55 memory_ns=0 faults=0",
        "span id=1 lo_ns=10 hi_ns=11 count=1 affected=0 multiple=0 events=0 duration_ns=10 memory_ns=0 faults=0"])
        + "end\n"))
    write(d, "seed-info-bad-categories.mtr",
          summary(tail=info_part(cats="malloc:1,:2,x") + "end\n"))


# --- MEMTRAIL_OPTIONS -----------------------------------------------------------

def options():
    d = os.path.join(ROOT, "tests/agent/fuzz/corpus")
    seeds = [
        "mode=summary", "mode=detail:depth=16:unwind=cfi", "mode=trace:trace_buffer=1MB:trace_loss=wait",
        "mode=off", "output=/tmp/memtrail.%p.%e.mtr", "output=a\\:b\\\\c.mtr", "depth=64:unwind=fp",
        "unwind=libunwind:unwind=auto", "trace_time_unit=1:trace_level=19:trace_chunk=1024",
        "trace_buffer=192KB", "trace_buffer=64GB", "trace_buffer=4096", "on_error=abort", "on_error=report",
        "crash_report=off", "follow_exec=on", "query=thread", "query=off", "::mode=detail::", "",
        "mode", "=", "mode=", "depth=0", "depth=65", "depth=1x", "trace_level=20", "trace_chunk=1023",
        "trace_time_unit=1000000001", "trace_buffer=1KB", "crash_report=maybe", "colour=blue",
        "mode=detail\nx", "output=" + "p" * 5000, "mode=\x01\x7f", "output=" + "a\\" * 40,
        "trace_buffer=99999999999999999999GB", "depth=-1", "depth=+4", "depth= 4",
    ]
    for i, s in enumerate(seeds):
        write(d, "seed-%02d" % i, s)


# --- MEMTRAIL_SESSIONS ------------------------------------------------------------

def sessions():
    d = os.path.join(ROOT, "tests/xe/fuzz/corpus_sessions")
    seeds = [
        "name=a",
        "name=b; max_memory=640KB; MEMORY_PARTITION_MODE=per_cpu; cpus=4",
        "name=c;memory_partition_mode=per_node;nodes=2;strict_max_memory=on",
        "name=ring;max_memory=1MB;target=ring_buffer(max_events_limit=4);target=histogram(source=size)",
        "name=big;where=size >= 4096;max_dispatch_latency=100ms;target=histogram(source=size_class);"
        "target=pair_matching",
        "name=parser;where=category == \"parser\";target=event_counter",
        "name=p2;target=pair_matching(begin_event=span_begin,end_event=span_end,match_on=key,max_orphans=10)",
        "name=h;target=histogram(source=site,slots=3)",
        "name=f;target=event_file(filename=/nonexistent/x.xel,max_file_size=1MB,max_rollover_files=2)",
        "name=e;events=alloc,free,realloc;event_retention_mode=no_event_loss;start=on",
        "name=l;max_dispatch_latency=INFINITE;max_event_size=8MB;max_memory=4MB",
        "latency=250ms;retention=allow_multiple_event_loss;mode=none",
        "name=one;target=event_counter\n\nname=two;max_memory=50KB",
        "name=x;colour=red", "event_retention_mode=sometimes", "max_dispatch_latency=soon", "name", "name=a b",
        "target=nosuch", "target=ring_buffer(max_events_limit=0)", "target=ring_buffer(", "where=size >>> 1",
        "name=t;" + ";".join("target=%s" % t for t in ["ring_buffer", "histogram", "event_counter",
                                                    "pair_matching", "ring_buffer"]),
        "name=n;where=(size > 1 && (size < 100 || !(type == free)))",
        "max_memory=99999999999999999999", "cpus=65537", "nodes=0", "events=",
        "name=\x01;target=ring_buffer(max_events_limit=\x02)",
    ]
    for i, s in enumerate(seeds):
        # events for the targets follow in the same input as a last line
        ev = b"\n" + bytes((i * 7 + k) % 256 for k in range(48 * 3)) if i % 3 == 0 else b""
        write(d, "seed-%02d" % i, s.encode() + ev)


# --- predicates -------------------------------------------------------------------

def preds():
    d = os.path.join(ROOT, "tests/xe/fuzz/corpus_pred")
    seeds = [
        "size >= 4KB && (category == \"parser\" || !(type == free))", "type == alloc", "type == 'free'",
        "size > 0x10 || size < 1MB", "size_class == 12", "address != 0 && old_address == 0",
        "site == 3 && key <= 10 && value > 2 && tid >= 1 && cpu < 4 && data_len == 0",
        "!(!(!(size == 1)))", "((((size == 1))))", "size == 1GB", "size == 5B", "category == \"net cache\"",
        "category == \"nosuch\"", "sz > 1", "size >> 1", "size = 1", "size 1", "(size == 1", "size == 1)",
        "size == 18446744073709551615", "size == 18446744073709551616", "size == 16GB",
        " && ".join(["size > %d" % i for i in range(40)]),
        "(" * 40 + "size == 1" + ")" * 40, "type == user || type == mmap || type == munmap || "
        "type == span_begin || type == span_end || type == snapshot || type == page_ref || type == realloc",
        "", "   ", "category == parser",
    ]
    for i, s in enumerate(seeds):
        evs = b"".join(struct.pack("<BBBBBxxxQQQQ", k, k, k, k, k, 1 << (k % 64), k * 4096, k, k) for k in range(4))
        write(d, "seed-%02d" % i, s.encode() + (b"\0" + evs if i % 2 == 0 else b""))


if __name__ == "__main__":
    reports()
    options()
    sessions()
    preds()
    sys.exit(0)

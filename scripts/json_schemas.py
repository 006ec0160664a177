#!/usr/bin/env python3
"""Writes docs/schema/*.schema.json: the JSON Schema (draft 2020-12) of
every JSON document the memtrail CLI prints, from the shared pieces below,
so that a key described once is the same in every document that has it.
docs/json.md explains the keys; tests/cli/test_json_schema.sh validates
the commands' output against these files (and checks they are up to date).

Usage: scripts/json_schemas.py [OUTDIR]   (default: docs/schema)"""
import json
import os
import sys

SCHEMA = {"const": "memtrail/1"}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
COUNT = {"type": "integer", "minimum": 0}   # a count or a byte quantity, never negative
INT = {"type": "integer"}                   # a signed figure (a delta), or one read from a file as it is
HEX = {"type": "string", "pattern": "^0x[0-9a-f]+$"}


def null(t):
    return {"oneOf": [t, {"type": "null"}]}


def obj(props, required=None):
    """A closed object: every key listed, none other allowed."""
    return {"type": "object", "properties": props,
            "required": list(props) if required is None else required, "additionalProperties": False}


def arr(items):
    return {"type": "array", "items": items}


def doc(title, description, props):
    s = obj(dict([("schema", SCHEMA)] + list(props.items())))
    return dict([("$schema", "https://json-schema.org/draft/2020-12/schema"), ("title", title),
                 ("description", description)] + list(s.items()))


# Report files are untrusted input: their figures are printed as read (a
# crafted file may hold negative numbers), so the report documents say
# "integer" and the test checks the sign on real runs.
COUNTS = {"live_bytes": INT, "live_count": INT, "peak_bytes": INT, "allocs": INT, "frees": INT, "reallocs": INT}
CMDLINE = null(arr(STR))
WHO = {"pid": null(INT), "ppid": null(INT), "exe": null(STR), "cmdline": CMDLINE}
CATEGORY = obj(dict([("name", STR), ("kind", STR)] + list(COUNTS.items()) + [
    ("reserved_bytes", INT), ("committed_bytes", INT), ("resident_bytes", null(INT)), ("mappings", null(INT))]))
TOTAL = null(obj(dict(list(COUNTS.items()) + [
    ("reserved_bytes", null(INT)), ("committed_bytes", null(INT)), ("resident_bytes", null(INT))])))
PROCESS = null(obj({"rss_bytes": INT, "peak_rss_bytes": INT, "reserved_bytes": INT, "committed_bytes": INT,
                    "resident_bytes": INT, "explained_bytes": INT}))
ERRORS = null(obj({"double_free": INT, "bad_canary": INT, "foreign_free": INT}))
# A sampled report's rate (docs/sampling.md); null for an exact report.
SAMPLING = null(obj({"rate_bytes": {"type": "integer", "minimum": 1}}))
SUMMARY = dict(list(WHO.items()) + [
    ("mode", null(STR)), ("sampling", SAMPLING), ("reason", null(STR)), ("start_ns", null(INT)), ("end_ns", null(INT)),
    ("complete", BOOL), ("categories", arr(CATEGORY)), ("total", TOTAL), ("process", PROCESS), ("errors", ERRORS)])

FRAME = obj({"function": null(STR), "file": null(STR), "line": null(COUNT), "module": null(STR),
             "address": HEX, "offset": null(HEX), "inlined": BOOL})
FRAMES = arr(FRAME)
WARNINGS = arr(STR)
SITE = obj(dict([("stack_id", INT), ("merged_sites", COUNT), ("category", STR)] + list(COUNTS.items()) + [
    ("allocated_bytes", null(INT)), ("samples", COUNT), ("live_samples", COUNT), ("frames", FRAMES)]))
SITE["required"] = [k for k in SITE["required"] if k not in ("samples", "live_samples")]  # sampled reports only
DETAIL = dict(list(SUMMARY.items()) + [
    ("stack_depth", INT), ("unwinder", null(STR)), ("sites_dropped", INT), ("sites_total", COUNT),
    ("sorted_by", {"enum": ["live_bytes", "allocated_bytes", "allocs"]}), ("symbol_warnings", WARNINGS),
    ("sites", arr(SITE))])


def pairs(names):
    """`key` and `key_delta` for each name, both nullable."""
    out = []
    for n in names:
        out += [(n, null(INT)), (n + "_delta", null(INT))]
    return out


VM = ["reserved_bytes", "committed_bytes", "resident_bytes"]
SIDE = obj(dict(list(WHO.items()) + [("reason", null(STR)), ("start_ns", null(INT)), ("end_ns", null(INT)),
                                     ("complete", BOOL), ("sampling", SAMPLING)]))
DIFF_CATEGORY = obj(dict([("name", STR), ("kind", STR), ("status", {"enum": ["new", "gone", "both", "not_comparable"]})]
                         + pairs(list(COUNTS) + VM + ["mappings"])))
DIFF = {
    "base": SIDE, "new": SIDE, "categories": arr(DIFF_CATEGORY),
    "total": null(obj(dict([("present_in_base", BOOL)] + pairs(list(COUNTS) + VM)))),
    "process": null(obj(dict([("present_in_base", BOOL)] + pairs(
        ["rss_bytes", "peak_rss_bytes"] + VM + ["explained_bytes"])))),
    "errors": null(obj(dict([("present_in_base", BOOL)] + pairs(["double_free", "bad_canary", "foreign_free"])))),
}
SITE_SIDE = obj(dict([("stack_id", INT)] + list(COUNTS.items()) + [
    ("allocated_bytes", null(INT)), ("merged_sites", COUNT), ("samples", COUNT), ("live_samples", COUNT)]))
SITE_SIDE["required"] = [k for k in SITE_SIDE["required"] if k not in ("samples", "live_samples")]  # sampled side only
SITE_SIDE = null(SITE_SIDE)
DIFF_SITE = obj({"status": {"enum": ["new", "gone", "changed", "unchanged"]},
                 "category": STR, "stack_key": STR, "base": SITE_SIDE, "new": SITE_SIDE,
                 "delta": obj(dict(list(COUNTS.items()) + [("allocated_bytes", null(INT))])), "frames": FRAMES})
DETAIL_DIFF = dict(list(DIFF.items()) + [
    ("symbol_warnings_base", WARNINGS), ("symbol_warnings_new", WARNINGS), ("matched_frames", null(COUNT)),
    ("sites", arr(DIFF_SITE))])

TREE = {
    "processes": arr(obj({"file": STR, "pid": null(INT), "ppid": null(INT), "parent_index": null(COUNT),
                          "depth": COUNT, "exe": null(STR), "cmdline": CMDLINE, "reason": null(STR),
                          "start_ns": null(INT), "end_ns": null(INT), "complete": BOOL,
                          "live_bytes": null(INT), "live_count": null(INT), "peak_bytes": null(INT),
                          "allocs": null(INT), "frees": null(INT), "rss_bytes": null(INT),
                          "peak_rss_bytes": null(INT)})),
    "total": obj({"processes": COUNT, "live_bytes": null(INT), "live_count": null(INT), "peak_bytes": null(INT),
                  "allocs": null(INT), "frees": null(INT), "rss_bytes": null(INT), "peak_rss_bytes": null(INT)}),
}


# A trace's analysis: computed by memtrail itself, so every figure is >= 0.
def stack_list(figures):
    stack = obj(dict([("stack_id", COUNT), ("category", STR)] + [(f, COUNT) for f in figures] +
                     [("frames", FRAMES)]))
    return [("stacks_total", COUNT), ("stacks", arr(stack))]


def section(head, figures):
    return obj(dict([(k, COUNT) for k in head] + stack_list(figures)))


ANALYZE_PROPS = dict(
    [("file", STR), ("pid", null(COUNT)), ("complete", BOOL), ("error", null(STR)), ("events", COUNT),
     ("events_lost", null(COUNT))]
    + [(k, COUNT) for k in ["allocs", "frees", "reallocs", "frees_unknown", "reallocs_unknown", "ids_reused",
                            "mmaps", "munmaps", "allocated_bytes", "first_ns", "last_ns", "live_bytes",
                            "live_count", "mapped_bytes", "mapped_peak_bytes"]]
    + [("caveats", null(obj({
        "events_lost": null(COUNT), "events_fired": null(COUNT),
        # null without an end record: how many were lost is unknown, not none
        "lost_percent": null({"type": "number", "minimum": 0, "maximum": 100}), "incomplete": BOOL,
        "blocks_unknown": COUNT, "began_late": BOOL, "mean_size_bytes": COUNT, "max_size_bytes": COUNT,
        "figures": arr(obj({"figure": {"enum": ["live", "leaks", "peak", "allocations", "frees", "temporary"]},
                            "over_count": COUNT, "over_bytes": COUNT, "under_count": COUNT,
                            "under_bytes": COUNT, "bounded": BOOL}))}))),
       ("inherited", null(obj({"replayed": BOOL, "ppid": null(COUNT), "parent_trace": null(STR),
                               "live_count": COUNT, "live_bytes": COUNT, "parent_reaches_fork": BOOL,
                               "note": null(STR)})))]
    + [("peak", obj(dict(list(section(["live_bytes", "live_count", "time_ns"],
                                      ["live_bytes", "live_count"])["properties"].items())
                         + [("tree", arr(obj({"name": STR, "value": COUNT, "parent": null(COUNT)})))]))),
       ("leaks", section(["live_bytes", "live_count"], ["live_bytes", "live_count"])),
       ("temporary", section(["temporary_count", "temporary_bytes"],
                             ["temporary_bytes", "temporary_count", "allocs"])),
       ("hot", obj({"by_count": obj(dict(stack_list(["allocated_bytes", "allocs", "reallocs"]))),
                    "by_bytes": obj(dict(stack_list(["allocated_bytes", "allocs", "reallocs"])))})),
       ("histogram", arr(obj({"min_bytes": COUNT, "max_bytes": COUNT, "count": COUNT,
                              "allocated_bytes": COUNT}))),
       ("timeline", obj({"bucket_ns": COUNT, "categories": arr(STR),
                         "buckets": arr(obj({"time_ns": COUNT, "live_bytes": COUNT, "max_live_bytes": COUNT,
                                             "by_category": arr(COUNT)}))}))])

XE_SHAPE = {"partition_mode": {"enum": ["none", "per_node", "per_cpu"]}, "cpus": COUNT, "nodes": COUNT,
            "strict": BOOL, "max_event_size_bytes": null(COUNT)}
XE_ADVICE = {"min_max_memory_kb": COUNT, "step_start_kb": null(COUNT), "step_end_kb": null(COUNT),
             "next_step_kb": null(COUNT), "next_regular_buffer_size_bytes": null(COUNT),
             "next_total_buffer_size_bytes": null(COUNT), "next_memory_allocated_bytes": null(COUNT),
             "strict_regular_buffer_size_bytes": null(COUNT), "strict_memory_allocated_bytes": null(COUNT),
             "advice": STR}
XE_PLAN = dict([("max_memory_bytes", COUNT)] + list(XE_SHAPE.items()) + [
    (k, COUNT) for k in ["total_regular_buffers", "chunks_per_buffer", "regular_buffer_size_bytes",
                         "regular_buffer_alloc_bytes", "total_buffer_size_bytes", "total_large_buffers",
                         "large_buffer_size_bytes", "large_buffer_alloc_bytes", "memory_allocated_bytes"]]
    + list(XE_ADVICE.items()))
XE_RANGE = dict(list(XE_SHAPE.items()) + [
    ("rows", arr(obj({"start_memory_range_kb": COUNT, "end_memory_range_kb": COUNT,
                      "total_regular_buffers": null(COUNT), "regular_buffer_size_bytes": null(COUNT),
                      "total_buffer_size_bytes": null(COUNT)}))),
    ("advice_max_memory_kb", COUNT)] + list(XE_ADVICE.items()))

# Optional analyze sections: present only when asked for (--peak, ...).
ANALYZE = doc("memtrail analyze --json", "The analysis of a trace.", ANALYZE_PROPS)
ANALYZE["required"] = [k for k in ANALYZE["required"]
                       if k not in ("peak", "leaks", "temporary", "hot", "histogram", "timeline")]

# memtrail refset report --json (docs/refset-report.md): seconds are
# decimal numbers (the viewport is given in seconds), each beside its _ns twin.
SECONDS = {"type": "number", "minimum": 0}
RS_TYPES = obj({"impacting_bytes": COUNT, "transient_bytes": COUNT, "persistent_bytes": COUNT})
RS_FIGS = {"size_bytes": COUNT, "impact_size_bytes": INT, "graph_start_bytes": COUNT, "graph_end_bytes": COUNT,
           "impact_types": RS_TYPES, "zero_page_bytes": COUNT}
RS_CATEGORY_NAMES = ["Heap", "VirtualAlloc", "UserStack", "PFMappedSection", "CopyOnWriteImage", "Image", "MapFile"]
RS_CATEGORY = obj(dict([("name", {"enum": RS_CATEGORY_NAMES}), ("class", {"enum": ["Dynamic", "File"]})]
                       + list(RS_FIGS.items())))
RS_CATEGORIES = dict(arr(RS_CATEGORY), minItems=7, maxItems=7)
RS_STACK = obj(dict([("stack_id", COUNT), ("pid", COUNT)] + list(RS_FIGS.items()) + [("frames", FRAMES)]))
REFSET_REPORT = dict([
    ("file", STR), ("complete", BOOL), ("stopped", null(STR)), ("start_monotonic_ns", COUNT),
    ("page_size_bytes", COUNT), ("physical_pages", BOOL), ("agent", BOOL), ("attached", BOOL),
    ("duration_s", SECONDS),
    ("viewport", obj({"start_s": SECONDS, "end_s": SECONDS, "start_ns": COUNT, "end_ns": COUNT}))]
    + list(RS_FIGS.items()) + [
    ("duplicate_references", COUNT), ("lost_samples", COUNT),
    ("peak", obj({"bytes": COUNT, "time_s": SECONDS, "time_ns": COUNT})), ("steady_state_bytes", COUNT),
    ("processes", arr(obj(dict([("pid", COUNT), ("ppid", COUNT), ("program", STR)] + list(RS_FIGS.items())
                               + [("categories", RS_CATEGORIES)])))),
    ("categories", RS_CATEGORIES),
    ("classes", dict(arr(obj(dict([("name", {"enum": ["Dynamic", "File"]})] + list(RS_FIGS.items())))),
                     minItems=2, maxItems=2)),
    ("stacks", obj({"impacting": arr(RS_STACK), "allocation": arr(RS_STACK)})),
    ("timeline", arr(obj({"time_s": SECONDS, "time_ns": COUNT, "bytes": COUNT, "by_process": arr(COUNT),
                          "by_category": obj({k: COUNT for k in RS_CATEGORY_NAMES})}))),
    # [process, category, t_ref, t_rel, zero, pages] and [process, category, start, end, pages];
    # a null time is before the recording (t_ref, start) or never (t_rel, end)
    ("page_data", obj({"references": null(arr(dict(arr(null(INT)), minItems=6, maxItems=6))),
                       "spans": null(arr(dict(arr(null(INT)), minItems=5, maxItems=5)))})),
])

# memtrail info --json (docs/info.md): the last snapshot of each kind of
# memory event, and the request spans' figures; a band may take part of a
# bucket, so request counts there are decimal numbers.
NUMBER = {"type": "number"}
SHARE = {"type": "number", "minimum": 0}
INFO_KINDS = ["any", "peak", "grow", "trim", "limit", "periodic"]
INFO_LAST = obj(dict([("index", INT), ("kind", {"type": "string", "pattern": "^[a-z_]+$"})] + [
    (k, INT) for k in ("time_ns", "run_time_ns", "live_before_bytes", "live_after_bytes",
                       "fragmentation_before_bytes", "fragmentation_after_bytes", "rss_bytes", "committed_bytes",
                       "memory_load_bytes", "total_available_bytes", "alloc_time_ns", "map_time_ns")] + [
    ("memory_time_percent", null(NUMBER))] + [
    (k, INT) for k in ("minor_faults", "major_faults", "overhead_bytes", "event_ns")] + [
    ("categories", arr(obj({"name": STR, "live_bytes": INT})))]))
INFO_FIGS = [(k, SHARE) for k in ("requests", "affected", "affected_percent", "memory_share_percent",
                                  "all_memory_share_percent", "multiple_events", "events", "duration_ns",
                                  "memory_ns", "faults")]
INFO_BAND = obj(dict([("percentile", SHARE), ("percentile_from", SHARE)] + INFO_FIGS + [
    ("latency_min_ns", null(COUNT)), ("latency_max_ns", null(COUNT))]))
INFO_VIEW = INFO_FIGS + [("by_percentile", arr(INFO_BAND))]
INFO_SPANS = obj(dict([("names", COUNT), ("unmatched_ends", COUNT), ("dropped", COUNT), ("faults_counted", BOOL)]
                      + INFO_VIEW + [("by_name", arr(obj(dict([("name", STR)] + INFO_VIEW))))]))
INFO_SPANS["required"].remove("by_name")   # only when there are several span names
INFO = dict(list(WHO.items())[:1] + [("exe", null(STR)), ("cmdline", CMDLINE), ("reason", null(STR)),
                                     ("complete", BOOL),
    ("memory_time", null(obj({"run_time_ns": INT, "alloc_time_ns": INT, "map_time_ns": INT,
                              "memory_time_percent": null(NUMBER)}))),
    ("kinds", arr(obj({"kind": {"enum": INFO_KINDS}, "count": COUNT, "last": INFO_LAST}))),
    ("spans", null(INFO_SPANS))])

DOCS = {
    "report": doc("memtrail report --json", "A summary report (report, query PID summary|baseline).", SUMMARY),
    "report-tree": doc("memtrail report DIR --json", "Several reports as a process tree.", TREE),
    "detail": doc("memtrail report detail --json",
                  "A detail report: the summary and its sites (report detail, export --format json, "
                  "query PID detail).", DETAIL),
    "diff": doc("memtrail diff --json", "Two summary reports compared (diff, query PID diff).", DIFF),
    "detail-diff": doc("memtrail diff --json (detail reports)", "Two detail reports compared, sites too.",
                       DETAIL_DIFF),
    "analyze": ANALYZE,
    "xe-plan": doc("memtrail xe plan --json", "The buffers of one MAX_MEMORY.", XE_PLAN),
    "xe-plan-range": doc("memtrail xe plan --range --json", "The buffers over a range of MAX_MEMORY.", XE_RANGE),
    "info": doc("memtrail info --json", "A report's memory info and request spans (info, query PID info).",
                INFO),
    "refset-report": doc("memtrail refset report --json",
                         "A reference-set recording's figures for one viewport.", REFSET_REPORT),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "docs", "schema")
    os.makedirs(out, exist_ok=True)
    for name, schema in DOCS.items():
        with open(os.path.join(out, name + ".schema.json"), "w") as f:
            json.dump(schema, f, indent=2)
            f.write("\n")


main()

/* info.h — `memtrail info`'s figures and printers (report_info.c): the
 * memory info snapshots of a report (the last event of each kind) and the
 * tail-latency report of its request spans — which share of the requests
 * memory events hit, which share of their time memory management took,
 * overall and by latency percentile band. The report's lines are
 * docs/report-format.md "Memory info and request spans"; the user's
 * guide, with how the bands are cut, is docs/info.md. */
#ifndef MT_REPORT_INFO_H
#define MT_REPORT_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report/report.h"

/* The kinds, in the report's order: "any", "peak", "grow", "trim",
 * "limit", "periodic". */
#define INFO_KINDS 6
extern const char *const info_kind_names[INFO_KINDS];

/* Percentiles are kept in units of 10^-6 percent (so 99.9 is 99900000),
 * so the band edges are exact: percentiles take at most 6 decimals. */
#define INFO_PCT_SCALE 1000000
#define INFO_PCT_100 (100 * INFO_PCT_SCALE)
#define INFO_MAX_PERCENTILES 32

struct info_options {
    int kind; /* the one kind to show (an index of info_kind_names), or -1: all */
    int64_t percentiles[INFO_MAX_PERCENTILES]; /* increasing, in (0, INFO_PCT_100) */
    int npercentiles;
};
/* Every kind, percentiles 50, 90, 99, 99.9. */
void info_options_default(struct info_options *o);
/* "50,90,99,99.9" into o->percentiles: 0, or -EINVAL (not numbers, not
 * increasing, out of (0, 100), more than 6 decimals, more than
 * INFO_MAX_PERCENTILES). `o` is a struct info_options *. */
int info_parse_percentiles(const char *s, void *o);

/* The figures of a set of requests (spans). Counts are doubles: a band
 * takes part of a bucket that straddles its edge. */
struct info_figures {
    double requests, affected, multiple, events;
    double duration_ns, memory_ns; /* summed over the requests */
    /* The affected requests' share of those sums, estimated bucket by
     * bucket in proportion to affected/count (exact in a bucket whose
     * spans are all affected or none). */
    double affected_duration_ns, affected_memory_ns;
    int64_t latency_min_ns, latency_max_ns; /* the bounds of the buckets it draws from; -1 when empty */
};
/* The band (from, to] of the requests ranked by latency. */
struct info_band {
    int64_t from, to; /* percentiles, in 10^-6 percent */
    struct info_figures f;
};

/* The figures of histogram buckets b[0..n) (ascending lo_ns): *total, and
 * bands[0..o->npercentiles] (npercentiles + 1 bands: (0, p1], (p1, p2],
 * ..., (pk, 100]). A band holds the requests ranked (N·p(i-1)/100,
 * N·p(i)/100] by latency; a bucket that straddles an edge is split in
 * proportion to its count. */
void info_bands(const struct report_span_bucket *b, size_t n, const struct info_options *o,
                struct info_figures *total, struct info_band *bands);

/* Every span name's buckets in one histogram (buckets with the same
 * bounds added up), ascending. 0 or -ENOMEM; *out is malloc'd. */
int info_merge_spans(const struct report *r, struct report_span_bucket **out, size_t *n);

/* The text report and the JSON document (docs/info.md, schema
 * docs/schema/info.schema.json). They print whatever r holds. 0, -ENOMEM
 * or -EIO. */
int info_print_text(FILE *out, const struct report *r, const struct info_options *o);
int info_print_json(FILE *out, const struct report *r, const struct info_options *o);

#endif

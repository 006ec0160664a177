/* report_info.c — the figures of `memtrail info` (info.h): its options
 * (kinds, percentiles), the span histograms of a report merged across
 * names, and their split into percentile bands. The printers are in
 * report_info_print.c. */
#include "report/info.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const info_kind_names[INFO_KINDS] = {"any", "peak", "grow", "trim", "limit", "periodic"};

void info_options_default(struct info_options *o)
{
    static const int64_t p[] = {50 * (int64_t)INFO_PCT_SCALE, 90 * (int64_t)INFO_PCT_SCALE,
                                99 * (int64_t)INFO_PCT_SCALE, 999 * (int64_t)INFO_PCT_SCALE / 10};
    memset(o, 0, sizeof *o);
    o->kind = -1;
    memcpy(o->percentiles, p, sizeof p);
    o->npercentiles = 4;
}

/* One percentile: digits, optionally '.' and 1 to 6 digits; in 10^-6 %. */
static int parse_percentile(const char *s, size_t len, int64_t *out)
{
    int64_t whole = 0, frac = 0;
    size_t i = 0, digits = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (whole > 1000)
            return -EINVAL; /* far above 100: no need to read on */
        whole = whole * 10 + (s[i] - '0');
    }
    if (digits == 0)
        return -EINVAL;
    int64_t scale = INFO_PCT_SCALE;
    if (i < len && s[i] == '.') {
        i++;
        size_t fd = 0;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, fd++) {
            if (fd == 6)
                return -EINVAL;
            scale /= 10;
            frac += (s[i] - '0') * scale;
        }
        if (fd == 0)
            return -EINVAL;
    }
    if (i != len)
        return -EINVAL;
    *out = whole * INFO_PCT_SCALE + frac;
    return 0;
}

int info_parse_percentiles(const char *s, void *dest)
{
    struct info_options *o = dest;
    int n = 0;
    int64_t p[INFO_MAX_PERCENTILES];
    for (const char *item = s;;) {
        size_t len = strcspn(item, ",");
        if (n == INFO_MAX_PERCENTILES || parse_percentile(item, len, &p[n]) < 0)
            return -EINVAL;
        if (p[n] <= 0 || p[n] >= INFO_PCT_100 || (n > 0 && p[n] <= p[n - 1]))
            return -EINVAL;
        n++;
        if (item[len] == '\0')
            break;
        item += len + 1;
    }
    memcpy(o->percentiles, p, (size_t)n * sizeof *p);
    o->npercentiles = n;
    return 0;
}

/* frac of bucket b into f. */
static void add_part(struct info_figures *f, const struct report_span_bucket *b, double frac)
{
    double count = (double)b->count;
    double share = b->count > 0 ? (double)b->affected / count : 0;
    f->requests += frac * count;
    f->affected += frac * (double)b->affected;
    f->multiple += frac * (double)b->multiple;
    f->events += frac * (double)b->events;
    f->duration_ns += frac * (double)b->duration_ns;
    f->memory_ns += frac * (double)b->memory_ns;
    f->affected_duration_ns += frac * (double)b->duration_ns * share;
    f->affected_memory_ns += frac * (double)b->memory_ns * share;
    if (f->latency_min_ns < 0)
        f->latency_min_ns = b->lo_ns;
    if (b->hi_ns > f->latency_max_ns)
        f->latency_max_ns = b->hi_ns;
}

static void figures_init(struct info_figures *f)
{
    memset(f, 0, sizeof *f);
    f->latency_min_ns = f->latency_max_ns = -1;
}

/* Ranks are compared exactly: a rank r (1..N) of a bucket and a band edge
 * N·p/100 are both scaled by INFO_PCT_100 (p in 10^-6 %), in 128 bits
 * (N is at most a few 2^63, times 10^8). */
typedef unsigned __int128 rank_t;

void info_bands(const struct report_span_bucket *b, size_t n, const struct info_options *o,
                struct info_figures *total, struct info_band *bands)
{
    int nbands = o->npercentiles + 1;
    figures_init(total);
    for (int i = 0; i < nbands; i++) {
        bands[i].from = i ? o->percentiles[i - 1] : 0;
        bands[i].to = i < o->npercentiles ? o->percentiles[i] : INFO_PCT_100;
        figures_init(&bands[i].f);
    }
    rank_t requests = 0;
    for (size_t j = 0; j < n; j++)
        if (b[j].count > 0)
            requests += (rank_t)b[j].count;
    rank_t below = 0; /* requests in the buckets before this one */
    for (size_t j = 0; j < n; j++) {
        if (b[j].count <= 0)
            continue;
        add_part(total, &b[j], 1.0);
        rank_t lo = below * INFO_PCT_100, hi = (below + (rank_t)b[j].count) * INFO_PCT_100;
        below += (rank_t)b[j].count;
        for (int i = 0; i < nbands; i++) {
            rank_t from = requests * (rank_t)bands[i].from, to = requests * (rank_t)bands[i].to;
            rank_t start = lo > from ? lo : from, end = hi < to ? hi : to;
            if (end > start)
                add_part(&bands[i].f, &b[j], (double)(end - start) / (double)(hi - lo));
        }
    }
}

static int by_bounds(const void *a, const void *b)
{
    const struct report_span_bucket *x = a, *y = b;
    if (x->lo_ns != y->lo_ns)
        return x->lo_ns < y->lo_ns ? -1 : 1;
    return (x->hi_ns > y->hi_ns) - (x->hi_ns < y->hi_ns);
}

int info_merge_spans(const struct report *r, struct report_span_bucket **out, size_t *n)
{
    size_t total = 0;
    for (size_t i = 0; i < r->nspans; i++)
        total += r->spans[i].nbuckets;
    *n = 0;
    *out = malloc((total ? total : 1) * sizeof **out);
    if (!*out)
        return -ENOMEM;
    struct report_span_bucket *all = *out;
    for (size_t i = 0; i < r->nspans; i++) {
        if (r->spans[i].nbuckets == 0)
            continue; /* a name whose spans all ended elsewhere: no buckets, no array */
        memcpy(all + *n, r->spans[i].buckets, r->spans[i].nbuckets * sizeof *all);
        *n += r->spans[i].nbuckets;
    }
    qsort(all, *n, sizeof *all, by_bounds);
    size_t k = 0;
    for (size_t j = 0; j < *n; j++) {
        if (k > 0 && all[k - 1].lo_ns == all[j].lo_ns && all[k - 1].hi_ns == all[j].hi_ns) {
            struct report_span_bucket *m = &all[k - 1];
            m->count = report_add(m->count, all[j].count);
            m->affected = report_add(m->affected, all[j].affected);
            m->multiple = report_add(m->multiple, all[j].multiple);
            m->events = report_add(m->events, all[j].events);
            m->duration_ns = report_add(m->duration_ns, all[j].duration_ns);
            m->memory_ns = report_add(m->memory_ns, all[j].memory_ns);
            m->faults = report_add(m->faults, all[j].faults);
        } else {
            all[k++] = all[j];
        }
    }
    *n = k;
    return 0;
}

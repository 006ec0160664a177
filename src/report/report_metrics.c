/* report_metrics.c — summary reports as Prometheus's text exposition
 * format (metrics.h; the metrics are documented in docs/metrics.md).
 *
 * Names follow Prometheus's conventions: base units (bytes, seconds),
 * `_total` on counters, one family per quantity with labels for its
 * parts. Seconds are written exactly from the report's nanoseconds (no
 * floating point), so two printings of one report are the same bytes. */
#include "report/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const int64_t metrics_span_bounds_ns[METRICS_SPAN_BOUNDS] = {
    1000LL,        2000LL,        5000LL,        10000LL,        20000LL,      50000LL,      100000LL,
    200000LL,      500000LL,      1000000LL,     2000000LL,      5000000LL,    10000000LL,   20000000LL,
    50000000LL,    100000000LL,   200000000LL,   500000000LL,    1000000000LL, 2000000000LL, 5000000000LL,
    10000000000LL, 20000000000LL, 50000000000LL, 100000000000LL,
};

const char *metrics_program(const struct report *r)
{
    const char *path = r->exe && *r->exe ? r->exe : r->argc > 0 ? r->argv[0] : "";
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void metrics_put_label_value(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\xef\xbf\xbd", out); /* U+FFFD: the format wants UTF-8 */
            p++;
        } else if (*p == '\\' || *p == '"') {
            fputc('\\', out);
            fputc(*p++, out);
        } else if (*p == '\n') {
            fputs("\\n", out);
            p++;
        } else {
            fwrite(p, 1, n, out);
            p += n;
        }
    }
}

/* ns as seconds into buf (at least 32 bytes), exactly. */
static const char *seconds_text(char *buf, size_t cap, int64_t ns)
{
    uint64_t mag = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
    uint64_t sec = mag / 1000000000u, frac = mag % 1000000000u;
    int n = snprintf(buf, cap, "%s%" PRIu64, ns < 0 ? "-" : "", sec);
    if (frac != 0 && n > 0 && (size_t)n + 11 <= cap) {
        snprintf(buf + n, cap - (size_t)n, ".%09" PRIu64, frac);
        size_t len = strlen(buf);
        while (buf[len - 1] == '0')
            buf[--len] = '\0';
    }
    return buf;
}

void metrics_put_seconds(FILE *out, int64_t ns)
{
    char buf[32];
    fputs(seconds_text(buf, sizeof buf, ns), out);
}

/* ---- samples ------------------------------------------------------------- */

/* Where a family's samples go, for the report at hand. */
struct emitter {
    FILE *f;
    const struct report *r;
    const char *name; /* the family's */
};

/* NAME[SUFFIX]{pid="..",program=".."[,k1="v1"][,k2="v2"]} and the space
 * before the value. */
static void labels(const struct emitter *e, const char *suffix, const char *k1, const char *v1,
                   const char *k2, const char *v2)
{
    fprintf(e->f, "%s%s{pid=\"", e->name, suffix);
    if (e->r->has & REPORT_HAS_PID)
        fprintf(e->f, "%" PRId64, e->r->pid);
    fputs("\",program=\"", e->f);
    metrics_put_label_value(e->f, metrics_program(e->r));
    fputc('"', e->f);
    if (k1) {
        fprintf(e->f, ",%s=\"", k1);
        metrics_put_label_value(e->f, v1);
        fputc('"', e->f);
    }
    if (k2) {
        fprintf(e->f, ",%s=\"", k2);
        metrics_put_label_value(e->f, v2);
        fputc('"', e->f);
    }
    fputs("} ", e->f);
}

static void sample(const struct emitter *e, const char *k1, const char *v1, int64_t value)
{
    labels(e, "", k1, v1, NULL, NULL);
    fprintf(e->f, "%" PRId64 "\n", value);
}

static void sample_seconds(const struct emitter *e, const char *k1, const char *v1, int64_t ns)
{
    labels(e, "", k1, v1, NULL, NULL);
    metrics_put_seconds(e->f, ns);
    fputc('\n', e->f);
}

/* ---- the families ---------------------------------------------------------- */

/* Which counter of a category, a kind's snapshot or a span a family shows. */
enum field {
    F_LIVE_BYTES,
    F_LIVE_BLOCKS,
    F_PEAK_BYTES,
    F_ALLOCS,
    F_FREES,
    F_REALLOCS,
    F_RESERVED,
    F_COMMITTED,
    F_RESIDENT,
    F_MAPPINGS,
    F_TOTAL_LIVE,
    F_TOTAL_PEAK,
    F_RSS,
    F_PEAK_RSS,
    F_START,
    F_EVENT_TIME,
    F_EVENT_LIVE_BEFORE,
    F_EVENT_LIVE_AFTER,
    F_EVENT_FRAGMENTATION,
    F_LOAD,
    F_AVAILABLE,
    F_SPAN_DURATION,
    F_SPAN_MEMORY,
    F_SPAN_AFFECTED,
    F_SPAN_EVENTS,
    F_UNMATCHED,
    F_DROPPED,
    F_ERRORS,
    F_EVENTS,
    F_RUN_TIME,
    F_MEMORY_TIME,
};

struct family {
    const char *name, *type, *help;
    void (*emit)(const struct emitter *e, enum field which);
    enum field which;
};

/* The program's own categories (malloc and overhead kinds): a vm category
 * holds address space only, never blocks. */
static void emit_category_counts(const struct emitter *e, enum field which)
{
    for (size_t i = 0; i < e->r->ncategories; i++) {
        const struct report_category *c = &e->r->categories[i];
        if (report_category_is(c, "vm"))
            continue;
        const struct report_counts *n = &c->n;
        int64_t v = which == F_LIVE_BYTES    ? n->live_bytes
                    : which == F_LIVE_BLOCKS ? n->live_count
                    : which == F_PEAK_BYTES  ? n->peak_bytes
                    : which == F_ALLOCS      ? n->allocs
                    : which == F_FREES       ? n->frees
                                             : n->reallocs;
        sample(e, "category", c->name, v);
    }
}

static void emit_category_vm(const struct emitter *e, enum field which)
{
    for (size_t i = 0; i < e->r->ncategories; i++) {
        const struct report_category *c = &e->r->categories[i];
        if (!c->has_vm)
            continue;
        int64_t v = which == F_RESERVED    ? c->vm.reserved
                    : which == F_COMMITTED ? c->vm.committed
                    : which == F_RESIDENT  ? c->vm.resident
                                           : c->vm.mappings;
        sample(e, "category", c->name, v);
    }
}

static void emit_process(const struct emitter *e, enum field which)
{
    const struct report *r = e->r;
    if (which == F_TOTAL_LIVE && (r->has & REPORT_HAS_TOTAL))
        sample(e, NULL, NULL, r->total.live_bytes);
    else if (which == F_TOTAL_PEAK && (r->has & REPORT_HAS_TOTAL))
        sample(e, NULL, NULL, r->total.peak_bytes);
    else if (which == F_RSS && (r->has & REPORT_HAS_PROCESS))
        sample(e, NULL, NULL, r->process.rss_bytes);
    else if (which == F_PEAK_RSS && (r->has & REPORT_HAS_PROCESS))
        sample(e, NULL, NULL, r->process.peak_rss_bytes);
    else if (which == F_START && (r->has & REPORT_HAS_START))
        sample_seconds(e, NULL, NULL, r->start_ns);
}

static void emit_errors(const struct emitter *e, enum field which)
{
    (void)which;
    if (!(e->r->has & REPORT_HAS_ERRORS))
        return;
    sample(e, "error", "double_free", e->r->errors.double_free);
    sample(e, "error", "bad_canary", e->r->errors.bad_canary);
    sample(e, "error", "foreign_free", e->r->errors.foreign_free);
}

/* The kinds themselves: "any" is the sum of the others, and a sum over
 * the label must not count events twice. */
static bool own_kind(const struct report_info *in)
{
    return in->kind && strcmp(in->kind, "any") != 0;
}

static void emit_event_counts(const struct emitter *e, enum field which)
{
    (void)which;
    for (size_t i = 0; i < e->r->ninfos; i++)
        if (own_kind(&e->r->infos[i]))
            sample(e, "kind", e->r->infos[i].kind, e->r->infos[i].count);
}

static void emit_last_event(const struct emitter *e, enum field which)
{
    for (size_t i = 0; i < e->r->ninfos; i++) {
        const struct report_info *in = &e->r->infos[i];
        if (!own_kind(in) || in->count <= 0)
            continue;
        if (which == F_EVENT_TIME)
            sample_seconds(e, "kind", in->kind, in->time_ns);
        else
            sample(e, "kind", in->kind,
                   which == F_EVENT_LIVE_BEFORE  ? in->live_before_bytes
                   : which == F_EVENT_LIVE_AFTER ? in->live_after_bytes
                                                 : in->fragmentation_after_bytes);
    }
}

/* The machine's (or cgroup's) figures, as of the last event of any kind. */
static void emit_load(const struct emitter *e, enum field which)
{
    for (size_t i = 0; i < e->r->ninfos; i++) {
        const struct report_info *in = &e->r->infos[i];
        if (in->kind && strcmp(in->kind, "any") == 0 && in->count > 0)
            sample(e, NULL, NULL, which == F_LOAD ? in->memory_load_bytes : in->total_available_bytes);
    }
}

static void emit_memory_time(const struct emitter *e, enum field which)
{
    if (!(e->r->has & REPORT_HAS_MEMORY_TIME))
        return;
    if (which == F_RUN_TIME) {
        sample_seconds(e, NULL, NULL, e->r->memory_time.run_time_ns);
        return;
    }
    sample_seconds(e, "what", "alloc", e->r->memory_time.alloc_time_ns);
    sample_seconds(e, "what", "map", e->r->memory_time.map_time_ns);
}

/* One histogram: the buckets [lo, hi) counted under every bound they lie
 * below (a bucket across a bound, which the agent never writes, counts
 * above it), then +Inf, _sum and _count. */
static void histogram(const struct emitter *e, const char *span, const struct report_span_bucket *b,
                      size_t nb, int64_t sum_ns)
{
    int64_t count = 0;
    for (size_t i = 0; i < nb; i++)
        count = report_add(count, b[i].count);
    char le[32];
    for (int k = 0; k < METRICS_SPAN_BOUNDS; k++) {
        int64_t bound = metrics_span_bounds_ns[k], under = 0;
        for (size_t i = 0; i < nb; i++)
            if (b[i].hi_ns <= bound)
                under = report_add(under, b[i].count);
        labels(e, "_bucket", "span", span, "le", seconds_text(le, sizeof le, bound));
        fprintf(e->f, "%" PRId64 "\n", under);
    }
    labels(e, "_bucket", "span", span, "le", "+Inf");
    fprintf(e->f, "%" PRId64 "\n", count);
    labels(e, "_sum", "span", span, NULL, NULL);
    metrics_put_seconds(e->f, sum_ns);
    fputc('\n', e->f);
    labels(e, "_count", "span", span, NULL, NULL);
    fprintf(e->f, "%" PRId64 "\n", count);
}

static void emit_spans(const struct emitter *e, enum field which)
{
    for (size_t i = 0; i < e->r->nspans; i++) {
        const struct report_span *s = &e->r->spans[i];
        const char *name = s->name ? s->name : "";
        int64_t duration = 0, memory = 0, affected = 0, events = 0;
        for (size_t k = 0; k < s->nbuckets; k++) {
            duration = report_add(duration, s->buckets[k].duration_ns);
            memory = report_add(memory, s->buckets[k].memory_ns);
            affected = report_add(affected, s->buckets[k].affected);
            events = report_add(events, s->buckets[k].events);
        }
        if (which == F_SPAN_DURATION)
            histogram(e, name, s->buckets, s->nbuckets, duration);
        else if (which == F_SPAN_MEMORY)
            histogram(e, name, s->memory, s->nmemory, memory);
        else
            sample(e, "span", name, which == F_SPAN_AFFECTED ? affected : events);
    }
}

static void emit_span_totals(const struct emitter *e, enum field which)
{
    if (e->r->has & REPORT_HAS_SPANS)
        sample(e, NULL, NULL, which == F_UNMATCHED ? e->r->spans_unmatched_ends : e->r->spans_dropped);
}

static const struct family families[] = {
    {"memtrail_live_bytes", "gauge", "Bytes allocated and not freed yet, by category.", emit_category_counts,
     F_LIVE_BYTES},
    {"memtrail_live_blocks", "gauge", "Blocks allocated and not freed yet, by category.",
     emit_category_counts, F_LIVE_BLOCKS},
    {"memtrail_peak_bytes", "gauge", "The highest live bytes of the category so far.", emit_category_counts,
     F_PEAK_BYTES},
    {"memtrail_allocations_total", "counter", "Allocations (malloc, calloc, new, ...) so far, by category.",
     emit_category_counts, F_ALLOCS},
    {"memtrail_frees_total", "counter", "Frees so far, by category.", emit_category_counts, F_FREES},
    {"memtrail_reallocations_total", "counter", "Reallocations (realloc) so far, by category.",
     emit_category_counts, F_REALLOCS},
    {"memtrail_program_live_bytes", "gauge",
     "Bytes the program allocated and did not free yet (every malloc-kind category; the agent's overhead not "
     "included).",
     emit_process, F_TOTAL_LIVE},
    {"memtrail_program_peak_bytes", "gauge", "The highest program_live_bytes so far.", emit_process,
     F_TOTAL_PEAK},
    {"memtrail_reserved_bytes", "gauge", "Address space mapped, by category.", emit_category_vm, F_RESERVED},
    {"memtrail_committed_bytes", "gauge", "The accessible part of the address space mapped, by category.",
     emit_category_vm, F_COMMITTED},
    {"memtrail_resident_bytes", "gauge", "The part of the address space in memory, by category.",
     emit_category_vm, F_RESIDENT},
    {"memtrail_mappings", "gauge", "Address ranges mapped, by category.", emit_category_vm, F_MAPPINGS},
    {"memtrail_rss_bytes", "gauge", "The process's resident set size (VmRSS).", emit_process, F_RSS},
    {"memtrail_peak_rss_bytes", "gauge", "The process's highest resident set size (VmHWM).", emit_process,
     F_PEAK_RSS},
    {"memtrail_start_time_seconds", "gauge", "When the agent started in the process, since the Unix epoch.",
     emit_process, F_START},
    {"memtrail_heap_errors_total", "counter", "Heap misuse the agent caught, by error.", emit_errors,
     F_ERRORS},
    {"memtrail_memory_events_total", "counter", "Memory events (peak, grow, trim, limit, periodic) so far.",
     emit_event_counts, F_EVENTS},
    {"memtrail_last_event_timestamp_seconds", "gauge", "When the last event of the kind happened.",
     emit_last_event, F_EVENT_TIME},
    {"memtrail_last_event_live_before_bytes", "gauge",
     "Live bytes before the last event of the kind (the peak since the previous event).", emit_last_event,
     F_EVENT_LIVE_BEFORE},
    {"memtrail_last_event_live_after_bytes", "gauge", "Live bytes after the last event of the kind.",
     emit_last_event, F_EVENT_LIVE_AFTER},
    {"memtrail_last_event_fragmentation_bytes", "gauge",
     "Free bytes the allocator held after the last event of the kind.", emit_last_event,
     F_EVENT_FRAGMENTATION},
    {"memtrail_memory_load_bytes", "gauge",
     "Memory in use in the process's cgroup (else the machine), as of the last memory event.", emit_load,
     F_LOAD},
    {"memtrail_memory_available_bytes", "gauge",
     "Memory the process's cgroup (else the machine) allows, as of the last memory event.", emit_load,
     F_AVAILABLE},
    {"memtrail_run_time_seconds_total", "counter", "Time since the agent started in the process.",
     emit_memory_time, F_RUN_TIME},
    {"memtrail_memory_time_seconds_total", "counter",
     "Time inside timed allocator calls (what=alloc) and mapping system calls (what=map).", emit_memory_time,
     F_MEMORY_TIME},
    {"memtrail_span_duration_seconds", "histogram", "Durations of the request spans, by span name.",
     emit_spans, F_SPAN_DURATION},
    {"memtrail_span_memory_seconds", "histogram",
     "Time the request spans spent inside allocator and mapping calls, by span name.", emit_spans,
     F_SPAN_MEMORY},
    {"memtrail_span_affected_total", "counter",
     "Spans during which their thread raised at least one memory event, by span name.", emit_spans,
     F_SPAN_AFFECTED},
    {"memtrail_span_memory_events_total", "counter", "Memory events the spans met, by span name.", emit_spans,
     F_SPAN_EVENTS},
    {"memtrail_span_unmatched_ends_total", "counter", "Calls of mt_span_end with no span open.",
     emit_span_totals, F_UNMATCHED},
    {"memtrail_spans_dropped_total", "counter", "Spans not recorded (nested too deep, or too many names).",
     emit_span_totals, F_DROPPED},
};

int metrics_print(FILE *out, const struct report *const *reports, size_t n)
{
    for (size_t k = 0; k < sizeof families / sizeof families[0]; k++) {
        const struct family *fam = &families[k];
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            struct emitter e = {.f = m, .r = reports[i], .name = fam->name};
            fam->emit(&e, fam->which);
        }
        if (fclose(m) != 0) {
            free(buf);
            return -ENOMEM;
        }
        if (len > 0)
            fprintf(out, "# HELP %s %s\n# TYPE %s %s\n%s", fam->name, fam->help, fam->name, fam->type, buf);
        free(buf);
    }
    return ferror(out) ? -EIO : 0;
}

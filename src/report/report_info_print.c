/* report_info_print.c — `memtrail info` as text and as JSON (info.h): the
 * last snapshot of each kind of memory event, the process's time in memory
 * management, and the tail-latency report of the request spans, overall,
 * by percentile band and by span name. The JSON keys are docs/info.md's,
 * the schema docs/schema/info.schema.json. */
#include "report/info.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_out.h"
#include "common/show.h"
#include "common/units.h"

/* Whether `o` asks for info line `in`: its kind, or every known one (a
 * newer writer's kinds are not shown). */
static bool shown(const struct report_info *in, const struct info_options *o)
{
    for (int k = 0; k < INFO_KINDS; k++)
        if (strcmp(in->kind, info_kind_names[k]) == 0)
            return o->kind < 0 || o->kind == k;
    return false;
}

/* part / whole in percent; 0 when whole is 0. */
static double percent(double part, double whole)
{
    return whole > 0 ? part * 100.0 / whole : 0.0;
}

static double memory_time_percent(int64_t alloc_ns, int64_t map_ns, int64_t run_ns)
{
    return percent((double)alloc_ns + (double)map_ns, (double)run_ns);
}

/* The figures of every band, and the total, of a histogram. */
struct spans_view {
    struct info_figures total;
    struct info_band bands[INFO_MAX_PERCENTILES + 1];
    int nbands;
};

static void view_of(const struct report_span_bucket *b, size_t n, const struct info_options *o,
                    struct spans_view *v)
{
    info_bands(b, n, o, &v->total, v->bands);
    v->nbands = o->npercentiles + 1;
}

/* Every span name's buckets merged (*all, to free) and the view of them
 * (*v, to free), for the printers. 0 or -ENOMEM. */
static int spans_view_new(const struct report *r, const struct info_options *o,
                          struct report_span_bucket **all, struct spans_view **v)
{
    size_t n;
    if (info_merge_spans(r, all, &n) < 0)
        return -ENOMEM;
    *v = malloc(sizeof **v);
    if (!*v) {
        free(*all);
        return -ENOMEM;
    }
    view_of(*all, n, o, *v);
    return 0;
}

/* "99.9" for 99900000 (10^-6 %). */
static const char *pct_name(char buf[32], int64_t p)
{
    int n = snprintf(buf, 32, "%" PRId64, p / INFO_PCT_SCALE);
    int64_t frac = p % INFO_PCT_SCALE;
    if (frac) {
        char f[16];
        snprintf(f, sizeof f, "%06" PRId64, frac);
        for (int i = 5; i > 0 && f[i] == '0'; i--)
            f[i] = '\0';
        snprintf(buf + n, (size_t)(32 - n), ".%s", f);
    }
    return buf;
}

/* ---- text --------------------------------------------------------------- */

static const char *size_of(char buf[MT_UNITS_MAX], int64_t bytes)
{
    return mt_size(buf, MT_UNITS_MAX, bytes);
}

static const char *time_of(char buf[MT_UNITS_MAX], int64_t ns)
{
    if (ns < 0) {
        snprintf(buf, MT_UNITS_MAX, "%" PRId64 "ns", ns);
        return buf;
    }
    return mt_duration(buf, MT_UNITS_MAX, (uint64_t)ns);
}

/* A share in percent as the text shows it: "12.34%", "<0.01%", "0%". */
static const char *pct_text(char buf[32], double v)
{
    if (v == 0)
        snprintf(buf, 32, "0%%");
    else if (v > 0 && v < 0.01)
        snprintf(buf, 32, "<0.01%%");
    else
        snprintf(buf, 32, "%.2f%%", v);
    return buf;
}

/* A request count: whole when it is one (a band's may be a fraction);
 * "<0.01" for a sliver of one, which must not read as none (a band of a
 * percentile so small it takes part of the fastest request). */
static const char *count_text(char buf[32], double v)
{
    double whole = v >= 0 && v < 1e15 ? (double)(int64_t)(v + 0.5) : v;
    if (v > 0 && v < 0.005)
        snprintf(buf, 32, "<0.01");
    else if (v - whole < 0.005 && whole - v < 0.005)
        snprintf(buf, 32, "%.0f", v);
    else
        snprintf(buf, 32, "%.2f", v);
    return buf;
}

static void text_info(FILE *out, const struct report_info *in)
{
    char a[MT_UNITS_MAX], b[MT_UNITS_MAX], c[MT_UNITS_MAX], d[32];
    if (in->count == 0) {
        fprintf(out, "%-9s none yet\n", in->kind);
        return;
    }
    fprintf(out, "%-9s %" PRId64 " event%s; the last: #%" PRId64, in->kind, in->count,
            in->count == 1 ? "" : "s", in->index);
    if (strcmp(in->kind, in->event) != 0)
        fprintf(out, ", a %s", in->event);
    fprintf(out, ", %s into the run\n", time_of(a, in->run_time_ns));
    fprintf(out, "          live %s -> %s, free in the allocator %s -> %s\n",
            size_of(a, in->live_before_bytes), size_of(b, in->live_after_bytes),
            size_of(c, in->fragmentation_before_bytes), mt_size(d, sizeof d, in->fragmentation_after_bytes));
    fprintf(out, "          RSS %s, committed %s, memory load %s of %s\n", size_of(a, in->rss_bytes),
            size_of(b, in->committed_bytes), size_of(c, in->memory_load_bytes),
            mt_size(d, sizeof d, in->total_available_bytes));
    char e[32];
    fprintf(out,
            "          allocator %s, mapping calls %s (%s of the run), faults %" PRId64 " minor, %" PRId64
            " major\n",
            time_of(a, in->alloc_time_ns), time_of(b, in->map_time_ns),
            pct_text(e, memory_time_percent(in->alloc_time_ns, in->map_time_ns, in->run_time_ns)),
            in->minor_faults, in->major_faults);
    fprintf(out, "          memtrail's overhead %s, snapshot taken in %s\n", size_of(a, in->overhead_bytes),
            time_of(b, in->event_ns));
    if (in->ncategories) {
        fputs("          categories:", out);
        for (size_t i = 0; i < in->ncategories; i++)
            fprintf(out, "%s %s %s", i ? "," : "", in->categories[i].name,
                    size_of(a, in->categories[i].live_bytes));
        fputc('\n', out);
    }
}

static void text_kinds(FILE *out, const struct report *r, const struct info_options *o)
{
    fputs("memtrail memory info: ", out);
    report_print_who(out, r);
    if (r->reason) {
        fputs(" (", out);
        report_print_reason(out, r->reason);
        fputc(')', out);
    }
    fputc('\n', out);
    if (r->has & REPORT_HAS_MEMORY_TIME) {
        char a[MT_UNITS_MAX], b[MT_UNITS_MAX], c[MT_UNITS_MAX], p[32];
        const struct report_memory_time *m = &r->memory_time;
        fprintf(out, "Memory management took %s of the run's %s (allocator %s, mapping calls %s)\n",
                pct_text(p, memory_time_percent(m->alloc_time_ns, m->map_time_ns, m->run_time_ns)),
                time_of(a, m->run_time_ns), time_of(b, m->alloc_time_ns), time_of(c, m->map_time_ns));
    }
    fputs("\nLast event of each kind:\n", out);
    for (size_t i = 0; i < r->ninfos; i++)
        if (shown(&r->infos[i], o))
            text_info(out, &r->infos[i]);
}

static void text_figures(FILE *out, const char *indent, const struct info_figures *f)
{
    char a[32], b[32], c[32], d[32];
    fprintf(out, "%saffected by memory events: %s of %s requests (%s); by more than one: %s\n", indent,
            count_text(a, f->affected), count_text(b, f->requests),
            pct_text(c, percent(f->affected, f->requests)), count_text(d, f->multiple));
    fprintf(out, "%smemory management's share: %s of the affected requests' time, %s of all requests' time\n",
            indent, pct_text(a, percent(f->affected_memory_ns, f->affected_duration_ns)),
            pct_text(b, percent(f->memory_ns, f->duration_ns)));
}

static void text_bands(FILE *out, const struct spans_view *v)
{
    fputs("    percentiles       requests  latency               affected  memory share  memory share  more "
          "than\n"
          "                                                                of affected   of all        one "
          "event\n",
          out);
    for (int i = 0; i < v->nbands; i++) {
        const struct info_figures *f = &v->bands[i].f;
        char from[32], to[32], name[80], lat[2 * MT_UNITS_MAX + 2], l1[MT_UNITS_MAX], l2[MT_UNITS_MAX];
        char n[32], aff[32], sa[32], sl[32], m[32];
        snprintf(name, sizeof name, "p%s-p%s", pct_name(from, v->bands[i].from),
                 pct_name(to, v->bands[i].to));
        if (f->latency_min_ns >= 0)
            snprintf(lat, sizeof lat, "%s-%s", time_of(l1, f->latency_min_ns),
                     time_of(l2, f->latency_max_ns));
        else
            snprintf(lat, sizeof lat, "-");
        fprintf(out, "    %-16s %9s  %-20s %9s  %12s  %12s  %9s\n", name, count_text(n, f->requests), lat,
                pct_text(aff, percent(f->affected, f->requests)),
                f->affected > 0 ? pct_text(sa, percent(f->affected_memory_ns, f->affected_duration_ns)) : "-",
                pct_text(sl, percent(f->memory_ns, f->duration_ns)), count_text(m, f->multiple));
    }
}

static int text_spans(FILE *out, const struct report *r, const struct info_options *o)
{
    if (!(r->has & REPORT_HAS_SPANS) && r->nspans == 0)
        return 0;
    fprintf(out, "\nRequest spans: %zu name%s", r->nspans, r->nspans == 1 ? "" : "s");
    if (r->spans_unmatched_ends || r->spans_dropped)
        fprintf(out, " (%" PRId64 " ends without a begin, %" PRId64 " spans not recorded)",
                r->spans_unmatched_ends, r->spans_dropped);
    fputc('\n', out);
    if (r->nspans == 0) {
        fputs("  none: the program called no mt_span_begin (docs/info.md)\n", out);
        return 0;
    }
    struct report_span_bucket *all;
    struct spans_view *v;
    if (spans_view_new(r, o, &all, &v) < 0)
        return -ENOMEM;
    text_figures(out, "  ", &v->total);
    text_bands(out, v);
    for (size_t i = 0; r->nspans > 1 && i < r->nspans; i++) {
        const struct report_span *s = &r->spans[i];
        view_of(s->buckets, s->nbuckets, o, v);
        fputs("\n  span '", out);
        mt_show(out, s->name); /* the program's bytes: no escape sequence reaches the terminal */
        fputs("':\n", out);
        text_figures(out, "    ", &v->total);
        text_bands(out, v);
    }
    free(v);
    free(all);
    return 0;
}

int info_print_text(FILE *out, const struct report *r, const struct info_options *o)
{
    text_kinds(out, r, o);
    int rc = text_spans(out, r, o);
    if (rc < 0)
        return rc;
    return ferror(out) ? -EIO : 0;
}

/* ---- JSON --------------------------------------------------------------- */

/* A decimal figure: at most 3 decimals, no trailing zeros (null if it is
 * not a finite number). */
static void json_decimal(mt_json *j, const char *key, double v)
{
    mt_json_key(j, key);
    if (!isfinite(v)) {
        mt_json_null(j);
        return;
    }
    char buf[64];
    if (v >= 1e15 || v <= -1e15) {
        snprintf(buf, sizeof buf, "%.17g", v);
    } else if (v != 0 && v < 0.0005 && v > -0.0005) {
        snprintf(buf, sizeof buf, "%.3g", v); /* 1e-05: 3 decimals would make it 0 */
    } else {
        snprintf(buf, sizeof buf, "%.3f", v);
        char *e = buf + strlen(buf) - 1;
        while (*e == '0')
            *e-- = '\0';
        if (*e == '.')
            *e = '\0';
        if (strcmp(buf, "-0") == 0)
            strcpy(buf, "0");
    }
    mt_json_number(j, buf);
}

static void json_info(mt_json *j, const struct report_info *in)
{
    mt_json_object_begin(j);
    mt_json_kstr(j, "kind", in->kind);
    mt_json_ki64(j, "count", in->count);
    mt_json_key(j, "last");
    mt_json_object_begin(j);
    mt_json_ki64(j, "index", in->index);
    mt_json_kstr(j, "kind", in->event);
    mt_json_ki64(j, "time_ns", in->time_ns);
    mt_json_ki64(j, "run_time_ns", in->run_time_ns);
    mt_json_ki64(j, "live_before_bytes", in->live_before_bytes);
    mt_json_ki64(j, "live_after_bytes", in->live_after_bytes);
    mt_json_ki64(j, "fragmentation_before_bytes", in->fragmentation_before_bytes);
    mt_json_ki64(j, "fragmentation_after_bytes", in->fragmentation_after_bytes);
    mt_json_ki64(j, "rss_bytes", in->rss_bytes);
    mt_json_ki64(j, "committed_bytes", in->committed_bytes);
    mt_json_ki64(j, "memory_load_bytes", in->memory_load_bytes);
    mt_json_ki64(j, "total_available_bytes", in->total_available_bytes);
    mt_json_ki64(j, "alloc_time_ns", in->alloc_time_ns);
    mt_json_ki64(j, "map_time_ns", in->map_time_ns);
    json_decimal(j, "memory_time_percent",
                 memory_time_percent(in->alloc_time_ns, in->map_time_ns, in->run_time_ns));
    mt_json_ki64(j, "minor_faults", in->minor_faults);
    mt_json_ki64(j, "major_faults", in->major_faults);
    mt_json_ki64(j, "overhead_bytes", in->overhead_bytes);
    mt_json_ki64(j, "event_ns", in->event_ns);
    mt_json_key(j, "categories");
    mt_json_array_begin(j);
    for (size_t i = 0; i < in->ncategories; i++) {
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_kstr(j, "name", in->categories[i].name);
        mt_json_ki64(j, "live_bytes", in->categories[i].live_bytes);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
    mt_json_object_end(j);
    mt_json_object_end(j);
}

/* The figures every level shares (the spans, a band, a name). */
static void json_figures(mt_json *j, const struct info_figures *f)
{
    json_decimal(j, "requests", f->requests);
    json_decimal(j, "affected", f->affected);
    json_decimal(j, "affected_percent", percent(f->affected, f->requests));
    json_decimal(j, "memory_share_percent", percent(f->affected_memory_ns, f->affected_duration_ns));
    json_decimal(j, "all_memory_share_percent", percent(f->memory_ns, f->duration_ns));
    json_decimal(j, "multiple_events", f->multiple);
    json_decimal(j, "events", f->events);
    json_decimal(j, "duration_ns", f->duration_ns);
    json_decimal(j, "memory_ns", f->memory_ns);
    json_decimal(j, "faults", f->faults);
}

static void json_view(mt_json *j, const struct spans_view *v)
{
    json_figures(j, &v->total);
    mt_json_key(j, "by_percentile");
    mt_json_array_begin(j);
    for (int i = 0; i < v->nbands; i++) {
        const struct info_band *band = &v->bands[i];
        mt_json_oneline(j);
        mt_json_object_begin(j);
        char pct[32]; /* exact, as the text names the band: 0.000001 is not 0 */
        mt_json_key(j, "percentile");
        mt_json_number(j, pct_name(pct, band->to));
        mt_json_key(j, "percentile_from");
        mt_json_number(j, pct_name(pct, band->from));
        json_figures(j, &band->f);
        mt_json_ki64_or_null(j, "latency_min_ns", band->f.latency_min_ns >= 0, band->f.latency_min_ns);
        mt_json_ki64_or_null(j, "latency_max_ns", band->f.latency_max_ns >= 0, band->f.latency_max_ns);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
}

static int json_spans(mt_json *j, const struct report *r, const struct info_options *o)
{
    mt_json_key(j, "spans");
    if (!(r->has & REPORT_HAS_SPANS) && r->nspans == 0) {
        mt_json_null(j);
        return 0;
    }
    struct report_span_bucket *all;
    struct spans_view *v;
    if (spans_view_new(r, o, &all, &v) < 0)
        return -ENOMEM;
    mt_json_object_begin(j);
    mt_json_ki64(j, "names", (int64_t)r->nspans);
    mt_json_ki64(j, "unmatched_ends", r->spans_unmatched_ends);
    mt_json_ki64(j, "dropped", r->spans_dropped);
    mt_json_kbool(j, "faults_counted", r->span_faults);
    json_view(j, v);
    if (r->nspans > 1) {
        mt_json_key(j, "by_name");
        mt_json_array_begin(j);
        for (size_t i = 0; i < r->nspans; i++) {
            const struct report_span *s = &r->spans[i];
            mt_json_object_begin(j);
            mt_json_kstr(j, "name", s->name);
            view_of(s->buckets, s->nbuckets, o, v);
            json_view(j, v);
            mt_json_object_end(j);
        }
        mt_json_array_end(j);
    }
    mt_json_object_end(j);
    free(v);
    free(all);
    return 0;
}

int info_print_json(FILE *out, const struct report *r, const struct info_options *o)
{
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    mt_json_ki64_or_null(&j, "pid", r->has & REPORT_HAS_PID, r->pid);
    mt_json_kstr(&j, "exe", r->exe);
    mt_json_key(&j, "cmdline");
    report_json_cmdline(&j, r);
    mt_json_kstr(&j, "reason", r->reason);
    mt_json_kbool(&j, "complete", r->complete);
    mt_json_key(&j, "memory_time");
    if (r->has & REPORT_HAS_MEMORY_TIME) {
        const struct report_memory_time *m = &r->memory_time;
        mt_json_oneline(&j);
        mt_json_object_begin(&j);
        mt_json_ki64(&j, "run_time_ns", m->run_time_ns);
        mt_json_ki64(&j, "alloc_time_ns", m->alloc_time_ns);
        mt_json_ki64(&j, "map_time_ns", m->map_time_ns);
        json_decimal(&j, "memory_time_percent",
                     memory_time_percent(m->alloc_time_ns, m->map_time_ns, m->run_time_ns));
        mt_json_object_end(&j);
    } else {
        mt_json_null(&j);
    }
    mt_json_key(&j, "kinds");
    mt_json_array_begin(&j);
    for (size_t i = 0; i < r->ninfos; i++)
        if (shown(&r->infos[i], o))
            json_info(&j, &r->infos[i]);
    mt_json_array_end(&j);
    int rc = json_spans(&j, r, o);
    int jrc = mt_json_document_end(&j);
    return rc < 0 ? rc : jrc;
}

/* analyze_report.c — a trace's analysis as a detail report (report.h), so
 * that everything that shows detail reports shows traces too: `memtrail
 * report [detail] TRACE` (the summary and the sites) and `memtrail export
 * TRACE` (folded, pprof). One site per stack. (`memtrail analyze`
 * symbolizes from the trace's modules directly: analyze_symbols.c.) */
#include "analyze/analyze.h"
#include "report/report.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t clamp64(uint64_t v)
{
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static char *category_name(mt_trace_reader *tr, unsigned id)
{
    const char *name = tr ? mt_trace_category_name(tr, id) : NULL;
    char *s = NULL;
    if (name)
        return strdup(name);
    return asprintf(&s, "category%u", id) < 0 ? NULL : s;
}

static char *hex(const unsigned char *p, unsigned n)
{
    char *s = malloc(2 * (size_t)n + 1);
    if (!s)
        return NULL;
    for (unsigned i = 0; i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = '\0';
    return s;
}

static int add_modules(const struct analyze_result *res, mt_trace_reader *tr, struct report *r)
{
    size_t n;
    const mt_trace_module **ms = analyze_modules(res, tr, &n);
    if (!ms)
        return -ENOMEM;
    if (n && !(r->modules = calloc(n, sizeof *r->modules))) {
        free(ms);
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const mt_trace_module *m = ms[i];
        struct report_module *rm = &r->modules[r->nmodules++];
        rm->id = (int64_t)i;
        rm->bias = m->bias;
        rm->start = m->start;
        rm->end = m->end;
        if (m->build_id && m->build_id_len && !(rm->buildid = hex(m->build_id, m->build_id_len)))
            rc = -ENOMEM;
        else if (!(rm->path = strdup(m->path ? m->path : "")))
            rc = -ENOMEM;
    }
    free(ms);
    return rc;
}

static int add_sites(const struct analyze_result *res, mt_trace_reader *tr, struct report *r)
{
    if (!res->nstacks)
        return 0;
    if (!(r->sites = calloc(res->nstacks, sizeof *r->sites)))
        return -ENOMEM;
    for (size_t i = 0; i < res->nstacks; i++) {
        const struct analyze_stack *s = &res->stacks[i];
        struct report_site *site = &r->sites[r->nsites++];
        site->id = s->id;
        if (!(site->category = category_name(tr, s->category)))
            return -ENOMEM;
        site->n = (struct report_counts){.live_bytes = clamp64(s->live_bytes),
                                         .live_count = clamp64(s->live_count),
                                         .peak_bytes = clamp64(s->max_live_bytes),
                                         .allocs = clamp64(s->allocs),
                                         .frees = clamp64(s->frees),
                                         .reallocs = clamp64(s->reallocs)};
        site->allocated_bytes = clamp64(s->allocated_bytes);
        site->has_allocated = true;
        const mt_trace_stack *st = analyze_stack_frames(res, tr, s->id);
        if (st && st->nframes) {
            if (!(site->frames = malloc(st->nframes * sizeof *site->frames)))
                return -ENOMEM;
            memcpy(site->frames, st->frames, st->nframes * sizeof *site->frames);
            site->nframes = st->nframes;
            if ((int64_t)st->nframes > r->stack_depth)
                r->stack_depth = st->nframes;
        }
    }
    return 0;
}

static int add_categories(const struct analyze_result *res, mt_trace_reader *tr, struct report *r)
{
    size_t n = 0;
    for (unsigned c = 0; c < ANALYZE_CATEGORIES; c++)
        n += res->categories[c].used;
    if (!n)
        return 0;
    if (!(r->categories = calloc(n, sizeof *r->categories)))
        return -ENOMEM;
    for (unsigned c = 0; c < ANALYZE_CATEGORIES; c++) {
        const struct analyze_category *ac = &res->categories[c];
        if (!ac->used)
            continue;
        struct report_category *rc = &r->categories[r->ncategories++];
        if (!(rc->name = category_name(tr, c)) || !(rc->kind = strdup("malloc")))
            return -ENOMEM;
        rc->n = (struct report_counts){.live_bytes = clamp64(ac->live_bytes),
                                       .live_count = clamp64(ac->live_count),
                                       .peak_bytes = clamp64(ac->peak_bytes),
                                       .allocs = clamp64(ac->allocs),
                                       .frees = clamp64(ac->frees),
                                       .reallocs = clamp64(ac->reallocs)};
    }
    return 0;
}

/* What export and report cannot otherwise say about the figures. */
static int add_caveats(const struct analyze_result *res, mt_trace_reader *tr, bool complete, struct report *r)
{
    struct analyze_caveats cv;
    struct analyze_caveat_lines lines;
    analyze_caveats(res, tr, !complete, &cv);
    analyze_caveats_lines(res, &cv, &lines);
    if (!lines.n)
        return 0;
    if (!(r->caveats = calloc(lines.n, sizeof *r->caveats)))
        return -ENOMEM;
    for (size_t i = 0; i < lines.n; i++)
        if (!(r->caveats[r->ncaveats++] = strdup(lines.line[i])))
            return -ENOMEM;
    return 0;
}

int analyze_to_report(const struct analyze_result *res, mt_trace_reader *tr, bool complete, struct report *r)
{
    memset(r, 0, sizeof *r);
    r->has = REPORT_HAS_MODE | REPORT_HAS_TOTAL | REPORT_HAS_SITES;
    r->complete = complete;
    r->lines_read = (long)(res->events > LONG_MAX ? LONG_MAX : res->events);
    r->total = (struct report_counts){.live_bytes = clamp64(res->live_bytes),
                                      .live_count = clamp64(res->live_count),
                                      .peak_bytes = clamp64(res->peak_bytes),
                                      .allocs = clamp64(res->allocs),
                                      .frees = clamp64(res->frees),
                                      .reallocs = clamp64(res->reallocs)};
    if (!(r->mode = strdup("trace")))
        return -ENOMEM;
    if (tr) {
        const mt_trace_file_info *fi = mt_trace_info(tr);
        if (fi) {
            r->pid = fi->pid;
            r->has |= REPORT_HAS_PID;
            if (fi->start_realtime_ns) {
                r->start_ns = clamp64(fi->start_realtime_ns);
                r->end_ns = clamp64(fi->start_realtime_ns + res->last_ns);
                r->has |= REPORT_HAS_START | REPORT_HAS_END_NS;
            }
        }
        const char *exe = mt_trace_meta(tr, "exe");
        if (exe) {
            if (!(r->exe = strdup(exe)))
                return -ENOMEM;
            r->has |= REPORT_HAS_EXE;
        }
        /* a process tree's columns: the parent, and how the trace ended
         * (a summary report's reason is how it came to be written) */
        const char *ppid = mt_trace_meta(tr, "ppid");
        char *end;
        long long pp = ppid && *ppid ? strtoll(ppid, &end, 10) : -1;
        if (ppid && *ppid && !*end && pp >= 0) {
            r->ppid = pp;
            r->has |= REPORT_HAS_PPID;
        }
        const char *ended = mt_trace_meta(tr, "ended");
        if (ended && *ended) {
            if (!(r->reason = strdup(ended)))
                return -ENOMEM;
            r->has |= REPORT_HAS_REASON;
        }
        const char *unwinder = mt_trace_meta(tr, "unwinder");
        if (unwinder && !(r->unwinder = strdup(unwinder)))
            return -ENOMEM;
    }
    int rc = add_categories(res, tr, r);
    if (rc == 0)
        rc = add_modules(res, tr, r);
    if (rc == 0)
        rc = add_sites(res, tr, r);
    if (rc == 0)
        rc = add_caveats(res, tr, complete, r);
    return rc;
}

bool analyze_input_is_trace(const struct report_input *in)
{
    return mt_trace_sniff_bytes(in->head, in->nhead) == 1;
}

int analyze_open_trace(struct report_input *in, unsigned flags, mt_trace_reader **out, char *err,
                       size_t errlen)
{
    int fd = in->fd;
    in->fd = -1;
    if (in->seekable)
        return mt_trace_open_fd(fd, NULL, 0, in->name, flags, out, err, errlen);
    return mt_trace_open_fd(fd, in->head, in->nhead, in->name, flags | MT_TRACE_STREAM, out, err, errlen);
}

int analyze_read_input(struct report_input *in, struct report *r, char *err, size_t errlen)
{
    if (!analyze_input_is_trace(in))
        return report_read_input(in, r, err, errlen);
    const char *path = in->name;
    memset(r, 0, sizeof *r);
    mt_trace_reader *tr = NULL;
    char terr[MT_TRACE_ERR_MAX] = "";
    int rc = analyze_open_trace(in, MT_TRACE_PREFETCH, &tr, terr, sizeof terr);
    if (rc < 0) {
        snprintf(err, errlen, "%s", terr[0] ? terr : strerror(-rc));
        return rc;
    }
    struct analyzer *a = analyze_new(0);
    if (!a) {
        mt_trace_close(tr);
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    analyze_set_file(a, path);
    int arc = analyze_run(a, tr, NULL, NULL);
    if (arc == -ENOMEM) {
        snprintf(err, errlen, "%s: out of memory analysing the trace", path);
        rc = -ENOMEM;
    } else if (analyze_to_report(analyze_result(a), tr, arc == 0 && mt_trace_complete(tr), r) < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -ENOMEM;
    } else if (arc < 0) {
        snprintf(err, errlen, "%s", mt_trace_error(tr));
        rc = -ENODATA; /* stopped early: r holds what was read */
    } else if (!mt_trace_complete(tr)) {
        snprintf(err, errlen,
                 "%s: the trace has no end record (its writer was stopped); every whole chunk was read",
                 path);
        rc = -ENODATA;
    }
    if (rc == -ENOMEM)
        report_free(r);
    analyze_free(a);
    mt_trace_close(tr);
    return rc;
}

int analyze_read_any(const char *path, struct report *r, char *err, size_t errlen)
{
    struct report_input in;
    memset(r, 0, sizeof *r);
    int rc = report_input_open(path, &in, err, errlen);
    if (rc < 0)
        return rc;
    rc = analyze_read_input(&in, r, err, errlen);
    report_input_close(&in);
    return rc;
}

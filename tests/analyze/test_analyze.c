/* test_analyze.c — the analyzer against the brute-force model (model.h):
 * random event sequences written as traces with the real writer (into
 * memory), read back with the real reader and analysed, every figure
 * compared; the same events fed to the analyzer directly; and a trace cut
 * short still analyses the events of its whole chunks. */
#include "analyze/analyze.h"
#include "model.h"
#include "report/report.h"
#include "trace_mem.h"
#include "unit.h"

#include <inttypes.h>
#include <stdio.h>

static int stack_cmp_fail;

/* Every figure of res against the model; prefix names the run. */
static void compare(const char *prefix, const struct analyze_result *res, const struct model *m, size_t n)
{
    char name[160];
#define EQ(what, a, b)                                                                                       \
    do {                                                                                                     \
        snprintf(name, sizeof name, "%s: %s", prefix, what);                                                 \
        if ((uint64_t)(a) != (uint64_t)(b))                                                                  \
            printf("  %s: analyzer %" PRIu64 ", model %" PRIu64 "\n", what, (uint64_t)(a), (uint64_t)(b));   \
        CHECK(name, (uint64_t)(a) == (uint64_t)(b));                                                         \
    } while (0)
    EQ("events", res->events, m->events);
    EQ("allocs", res->allocs, m->allocs);
    EQ("frees", res->frees, m->frees);
    EQ("reallocs", res->reallocs, m->reallocs);
    EQ("frees_unknown", res->frees_unknown, m->frees_unknown);
    EQ("reallocs_unknown", res->reallocs_unknown, m->reallocs_unknown);
    EQ("ids_reused", res->ids_reused, m->ids_reused);
    EQ("mmaps", res->mmaps, m->mmaps);
    EQ("munmaps", res->munmaps, m->munmaps);
    EQ("mapped bytes", res->mapped_bytes, m->mapped);
    EQ("mapped peak", res->mapped_peak, m->mapped_peak);
    EQ("allocated_bytes", res->allocated_bytes, m->allocated);
    EQ("live bytes", res->live_bytes, m->live_bytes);
    EQ("live count", res->live_count, m->live_count);
    EQ("peak bytes", res->peak_bytes, m->peak_bytes);
    EQ("peak count", res->peak_count, m->peak_count);
    EQ("peak time", res->peak_time_ns, m->peak_time);
    EQ("temporary count", res->temp_count, m->temp_count);
    EQ("temporary bytes", res->temp_bytes, m->temp_bytes);
    EQ("first time", res->first_ns, m->first_ns);
    EQ("last time", res->last_ns, m->last_ns);
    EQ("stacks", res->nstacks, m->nst);
    int bad = 0;
    for (int k = 0; k < ANALYZE_HIST; k++)
        bad += res->hist_count[k] != m->hist_count[k] || res->hist_bytes[k] != m->hist_bytes[k];
    EQ("histogram buckets differing", bad, 0);
    bad = 0;
    for (int c = 0; c < 256; c++) {
        const struct analyze_category *ac = &res->categories[c];
        bad += ac->allocs != m->cat_allocs[c] || ac->frees != m->cat_frees[c] ||
               ac->reallocs != m->cat_reallocs[c] || ac->live_bytes != m->cat_live[c] ||
               ac->live_count != m->cat_count[c] || ac->peak_bytes != m->cat_peak[c];
    }
    EQ("categories differing", bad, 0);
    bad = 0;
    for (size_t i = 0; i < m->nst; i++) {
        const struct m_stack *ms = &m->st[i];
        const struct analyze_stack *as = NULL;
        for (size_t j = 0; j < res->nstacks; j++)
            if (res->stacks[j].id == ms->id && res->stacks[j].category == ms->category)
                as = &res->stacks[j];
        int b = !as || as->allocs != ms->allocs || as->frees != ms->frees || as->reallocs != ms->reallocs ||
                as->allocated_bytes != ms->allocated || as->live_bytes != ms->live_bytes ||
                as->live_count != ms->live_count || as->max_live_bytes != ms->max_live ||
                as->peak_bytes != ms->peak_bytes || as->peak_count != ms->peak_count ||
                as->temp_count != ms->temp_count || as->temp_bytes != ms->temp_bytes;
        if (b && stack_cmp_fail++ < 3 && as)
            printf("  stack %u/%u: allocs %" PRIu64 "/%" PRIu64 " frees %" PRIu64 "/%" PRIu64
                   " reallocs %" PRIu64 "/%" PRIu64 " live %" PRIu64 "/%" PRIu64 " peak %" PRIu64 "/%" PRIu64
                   " temp %" PRIu64 "/%" PRIu64 "\n",
                   ms->id, ms->category, as->allocs, ms->allocs, as->frees, ms->frees, as->reallocs,
                   ms->reallocs, as->live_bytes, ms->live_bytes, as->peak_bytes, ms->peak_bytes,
                   as->temp_count, ms->temp_count);
        bad += b;
    }
    EQ("stacks differing", bad, 0);
    /* the timeline, at the width the analyzer ended with */
    uint64_t *end = calloc(res->ntimeline + 1, 8), *max = calloc(res->ntimeline + 1, 8);
    size_t nb = model_timeline(m, n, res->bucket_ns, end, max, res->ntimeline + 1);
    EQ("timeline buckets", res->ntimeline, nb);
    bad = 0;
    for (size_t b = 0; b < nb && b < res->ntimeline; b++)
        bad += res->timeline[b].live_bytes != end[b] || res->timeline[b].max_bytes != max[b];
    EQ("timeline buckets differing", bad, 0);
    snprintf(name, sizeof name, "%s: timeline within its buckets", prefix);
    CHECK(name, res->ntimeline <= ANALYZE_TIMELINE &&
                    (n == 0 || res->ntimeline > ANALYZE_TIMELINE / 2 || res->bucket_ns == 1));
    free(end);
    free(max);
#undef EQ
}

static void direct(const char *prefix, const mt_trace_event *ev, size_t n)
{
    struct model m;
    model_run(&m, ev, n);
    struct analyzer *a = analyze_new(0);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = analyze_event(a, &ev[i]);
    analyze_end(a);
    char name[192];
    snprintf(name, sizeof name, "%s: analysed", prefix);
    CHECK(name, rc == 0);
    compare(prefix, analyze_result(a), &m, n);
    if (n >= 30000) {
        /* the sequence exercises every rule */
        size_t at_peak = 0;
        for (size_t i = 0; i < m.nst; i++)
            at_peak += m.st[i].peak_bytes != m.st[i].live_bytes;
        snprintf(name, sizeof name,
                 "%s: covers temporaries (%" PRIu64 ", %" PRIu64 " realloc'd between), reused ids (%" PRIu64
                 "), unknown frees "
                 "(%" PRIu64 ") and reallocs (%" PRIu64 "), stacks changed since the peak (%zu)",
                 prefix, m.temp_count, m.temp_resized, m.ids_reused, m.frees_unknown, m.reallocs_unknown,
                 at_peak);
        CHECK(name, m.temp_count > 10 && m.temp_resized > 10 && m.ids_reused > 0 && m.frees_unknown > 10 &&
                        m.reallocs_unknown > 10 && at_peak > 3 &&
                        analyze_result(a)->ntimeline > ANALYZE_TIMELINE / 2);
    }
    analyze_free(a);
    model_free(&m);
}

/* The analysis as a detail report (every stack a site, the trace's
 * modules, the totals), and both printers over it (no symbolizer). */
static void report_and_print(const char *prefix, const struct analyze_result *res, mt_trace_reader *r,
                             const struct model *m)
{
    char name[200];
    struct report rep;
    int rc = analyze_to_report(res, r, true, &rep);
    int64_t live = 0, allocs = 0, sites_ok = 1;
    for (size_t i = 0; i < rep.nsites; i++) {
        live += rep.sites[i].n.live_bytes;
        allocs += rep.sites[i].n.allocs;
        const struct analyze_stack *s = &res->stacks[i];
        const mt_trace_stack *st = s->id ? mt_trace_stack_get(r, s->id) : NULL;
        sites_ok &= rep.sites[i].id == s->id && rep.sites[i].n.frees == (int64_t)s->frees &&
                    rep.sites[i].allocated_bytes == (int64_t)s->allocated_bytes &&
                    rep.sites[i].nframes == (st ? st->nframes : 0) &&
                    (!st || rep.sites[i].frames[0] == 0x401000 + 16 * (uint64_t)s->id);
    }
    int64_t model_allocs = 0;
    for (size_t i = 0; i < m->nst; i++)
        model_allocs += (int64_t)m->st[i].allocs;
    snprintf(name, sizeof name, "%s: as a report: totals, one site per stack with its frames, the module",
             prefix);
    CHECK(name, rc == 0 && rep.total.allocs == (int64_t)m->allocs && rep.total.frees == (int64_t)m->frees &&
                    rep.total.reallocs == (int64_t)m->reallocs &&
                    rep.total.live_bytes == (int64_t)m->live_bytes &&
                    rep.total.live_count == (int64_t)m->live_count &&
                    rep.total.peak_bytes == (int64_t)m->peak_bytes && rep.nsites == m->nst &&
                    live == (int64_t)m->live_bytes && allocs == model_allocs && sites_ok &&
                    (m->nst == 0 ||
                     (rep.nmodules == 1 && strcmp(rep.modules[0].path, "/nonexistent/test-program") == 0)) &&
                    rep.pid == 4242 && rep.complete);
    report_free(&rep);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct analyze_view v = {.file = "t.mtt", .reader = r, .show = ANALYZE_SHOW_ALL, .top = 5};
    int jrc = analyze_print_json(f, res, &v);
    int trc = analyze_print_text(f, res, &v);
    fclose(f);
    snprintf(name, sizeof name, "%s: printed as JSON and text", prefix);
    CHECK(name, jrc == 0 && trc == 0 && strstr(buf, "\"events_lost\": 7") && strstr(buf, "\"peak\": {") &&
                    strstr(buf, "Leaks (never freed)"));
    free(buf);
}

/* Written with the writer, read with the reader: the reader's events must
 * be the ones written (times and tids as given) and analyse the same. */
static void through_trace(const char *prefix, const mt_trace_event *ev, size_t n, uint32_t chunk_events)
{
    struct trace_mem tm;
    char name[128];
    snprintf(name, sizeof name, "%s: trace written", prefix);
    CHECK(name, trace_mem_write(&tm, ev, n, chunk_events) == 0);
    mt_trace_reader *r = NULL;
    char err[MT_TRACE_ERR_MAX] = "";
    int orc = trace_mem_open(&tm, MT_TRACE_PREFETCH, &r, err, sizeof err);
    snprintf(name, sizeof name, "%s: trace opened", prefix);
    CHECK(name, orc == 0);
    if (orc != 0) {
        printf("  %s\n", err);
        trace_mem_free(&tm);
        return;
    }
    struct analyzer *a = analyze_new(0);
    int rc = analyze_run(a, r, NULL, NULL);
    snprintf(name, sizeof name, "%s: read to the end", prefix);
    CHECK(name, rc == 0 && mt_trace_complete(r));
    if (rc != 0)
        printf("  %s\n", mt_trace_error(r));
    struct model m;
    model_run(&m, ev, n);
    compare(prefix, analyze_result(a), &m, n);
    report_and_print(prefix, analyze_result(a), r, &m);
    model_free(&m);
    analyze_free(a);
    mt_trace_close(r);

    /* cut at random offsets: the events of the whole chunks before the cut */
    for (int cut = 0; cut < 4; cut++) {
        size_t at = 64 + rnd_below(tm.len - 64);
        struct trace_mem part = tm;
        part.len = at;
        mt_trace_reader *pr = NULL;
        if (trace_mem_open(&part, 0, &pr, err, sizeof err) != 0)
            continue;
        struct analyzer *pa = analyze_new(0);
        int prc = analyze_run(pa, pr, NULL, NULL);
        size_t got = (size_t)analyze_result(pa)->events;
        /* cut in the index after the end record: every event is there */
        bool whole = mt_trace_complete(pr) && got == n && (prc == 0 || strstr(mt_trace_error(pr), "chunk"));
        snprintf(name, sizeof name, "%s: cut at %zu of %zu stops with an error naming the chunk", prefix, at,
                 tm.len);
        CHECK(name,
              whole || (prc == -EBADMSG && !mt_trace_complete(pr) && strstr(mt_trace_error(pr), "chunk")));
        if (!whole && (prc != -EBADMSG || !strstr(mt_trace_error(pr), "chunk")))
            printf("  rc %d, complete %d, %zu events: %s\n", prc, mt_trace_complete(pr), got,
                   mt_trace_error(pr));
        struct model pm;
        model_run(&pm, ev, got);
        char p2[128];
        snprintf(p2, sizeof p2, "%s (cut, %zu events)", prefix, got);
        compare(p2, analyze_result(pa), &pm, got);
        model_free(&pm);
        analyze_free(pa);
        mt_trace_close(pr);
    }
    trace_mem_free(&tm);
}

int main(void)
{
    static const struct {
        size_t n;
        uint32_t first_id;
        unsigned threads;
        uint32_t chunk;
    } runs[] = {
        {0, 1, 1, 0},
        {1, 1, 1, 0},
        {2000, 1, 1, 100},
        {30000, 0xffffffffu - 12000, 4, 0}, /* ids wrap */
        {60000, 123456, 6, 4096},
        {120000, 0x80000000u, 3, 0},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        mt_trace_event *ev = calloc(runs[i].n + 1, sizeof *ev);
        size_t n = gen_events(ev, runs[i].n, runs[i].first_id, runs[i].threads);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "direct %zu", runs[i].n);
        direct(prefix, ev, n);
        snprintf(prefix, sizeof prefix, "trace %zu", runs[i].n);
        through_trace(prefix, ev, n, runs[i].chunk);
        free(ev);
    }
    return failures ? 1 : 0;
}

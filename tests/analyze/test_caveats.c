/* test_caveats.c — what lost events do to the figures: traces written with
 * the real writer whose end record says K events were lost get, before
 * the figures, the caveats with the numbers the events make (K of fired,
 * the largest and mean block size, the bounds K x largest); a clean one
 * gets none; unknown frees and a trace cut short get theirs. */
#include "analyze/analyze.h"
#include "trace_mem.h"
#include "unit.h"

#include <inttypes.h>
#include <stdio.h>

/* 10 allocations of 100, 200, ..., 1000 bytes, then frees of the first 4
 * (and, with unknown, one free of id 99 that the trace never allocated). */
static size_t events(mt_trace_event *ev, bool unknown)
{
    size_t n = 0;
    for (uint32_t i = 1; i <= 10; i++)
        ev[n++] = (mt_trace_event){.type = MT_TRACE_ALLOC,
                                   .thread = 1,
                                   .time_ns = 1000 * i,
                                   .id = i,
                                   .size = 100 * i,
                                   .stack = 1 + i % 3,
                                   .category = (uint8_t)((1 + i % 3) % 3)};
    for (uint32_t i = 1; i <= 4; i++)
        ev[n++] = (mt_trace_event){.type = MT_TRACE_FREE, .thread = 2, .time_ns = 20000 + i, .id = i};
    if (unknown)
        ev[n++] = (mt_trace_event){.type = MT_TRACE_FREE, .thread = 2, .time_ns = 30000, .id = 99};
    return n;
}

struct run {
    struct analyzer *a;
    mt_trace_reader *r;
    struct trace_mem tm;
    char *text, *json; /* the printers' output */
};

/* Writes, reads back, analyses and prints; names/values the end record's,
 * meta the trace's meta records (key, value, ..., NULL; or NULL). */
static int run_meta(struct run *x, bool unknown, const char *const *names, const uint64_t *values,
                    unsigned nstats, const char *error, const char *const *meta)
{
    memset(x, 0, sizeof *x);
    mt_trace_event ev[16];
    size_t n = events(ev, unknown);
    struct trace_mem_opts o = {.pid = 77,
                               .start_ns = TRACE_MEM_START_NS,
                               .stat_names = names,
                               .stat_values = values,
                               .nstats = nstats,
                               .meta = meta};
    char err[MT_TRACE_ERR_MAX];
    if (trace_mem_write_opts(&x->tm, ev, n, &o) < 0 || trace_mem_open(&x->tm, 0, &x->r, err, sizeof err) < 0)
        return -1;
    x->a = analyze_new(0);
    if (analyze_run(x->a, x->r, NULL, NULL) < 0)
        return -1;
    struct analyze_view v = {
        .file = "c.mtt", .reader = x->r, .show = ANALYZE_SHOW_ALL, .top = 3, .error = error};
    size_t len;
    FILE *f = open_memstream(&x->text, &len);
    analyze_print_text(f, analyze_result(x->a), &v);
    fclose(f);
    f = open_memstream(&x->json, &len);
    analyze_print_json(f, analyze_result(x->a), &v);
    fclose(f);
    return 0;
}

static int run(struct run *x, bool unknown, const char *const *names, const uint64_t *values, unsigned nstats,
               const char *error)
{
    return run_meta(x, unknown, names, values, nstats, error, NULL);
}

static void run_free(struct run *x)
{
    analyze_free(x->a);
    mt_trace_close(x->r);
    trace_mem_free(&x->tm);
    free(x->text);
    free(x->json);
}

static const struct analyze_caveat *fig(const struct analyze_caveats *cv, const char *name)
{
    for (size_t i = 0; i < cv->nfig; i++)
        if (!strcmp(cv->fig[i].figure, name))
            return &cv->fig[i];
    return NULL;
}

static bool fig_is(const struct analyze_caveats *cv, const char *name, uint64_t oc, uint64_t ob, uint64_t uc,
                   uint64_t ub, bool bounded)
{
    const struct analyze_caveat *c = fig(cv, name);
    if (!c || c->over_count != oc || c->over_bytes != ob || c->under_count != uc || c->under_bytes != ub ||
        c->bounded != bounded) {
        if (c)
            printf("  %s: over %" PRIu64 "/%" PRIu64 " under %" PRIu64 "/%" PRIu64 " bounded %d\n", name,
                   c->over_count, c->over_bytes, c->under_count, c->under_bytes, c->bounded);
        return false;
    }
    return true;
}

static void lost_events(void)
{
    /* 3 lost of 17 fired: 14 written */
    static const char *names[] = {"events_lost", "events_fired"};
    static const uint64_t values[] = {3, 17};
    struct run x;
    CHECK("lost: trace written and analysed", run(&x, false, names, values, 2, NULL) == 0);
    struct analyze_caveats cv;
    analyze_caveats(analyze_result(x.a), x.r, false, &cv);
    CHECK("lost: caveats: 3 of 17, largest 1000 B, mean 550 B, no unknown blocks",
          cv.any && cv.lost_known && cv.lost == 3 && cv.fired == 17 && cv.max_size == 1000 &&
              cv.mean_size == 550 && cv.unknown == 0 && !cv.incomplete);
    CHECK("lost: live and leaks up to 3 blocks, 3 x 1000 B either way, bounded",
          fig_is(&cv, "live", 3, 3000, 3, 3000, true) && fig_is(&cv, "leaks", 3, 3000, 3, 3000, true));
    CHECK("lost: peak up to 3000 B either way", fig_is(&cv, "peak", 3, 3000, 3, 3000, true));
    CHECK("lost: allocations and frees up to 3 too few", fig_is(&cv, "allocations", 0, 0, 3, 3000, true) &&
                                                             fig_is(&cv, "frees", 0, 0, 3, 0, true) &&
                                                             fig(&cv, "temporary"));
    const char *caution = x.text ? strstr(x.text, "CAUTION: 3 of 17 events (17.65%) were lost") : NULL;
    const char *figures = x.text ? strstr(x.text, "  allocations 10, frees 4") : NULL;
    CHECK("lost: text says it before the figures", caution && figures && caution < figures);
    CHECK("lost: text gives the bounds",
          x.text && strstr(x.text, "each up to 3 blocks and 2.93KB too high (lost frees) or too low") &&
              strstr(x.text, "3 x 1000B, the largest block seen (~1.61KB at the mean size, 550B)") &&
              strstr(x.text, "peak: up to 2.93KB too high or too low") &&
              strstr(x.text, "allocations, frees, temporary allocations: up to 3 too few"));
    CHECK("lost: JSON caveats with the numbers",
          x.json && strstr(x.json, "\"events_lost\": 3") && strstr(x.json, "\"events_fired\": 17") &&
              strstr(x.json, "\"lost_percent\": 17.6471") && strstr(x.json, "\"max_size_bytes\": 1000") &&
              strstr(x.json, "\"mean_size_bytes\": 550") &&
              strstr(x.json,
                     "{\"figure\": \"live\", \"over_count\": 3, \"over_bytes\": 3000, \"under_count\": 3, "
                     "\"under_bytes\": 3000, \"bounded\": true}") &&
              strstr(x.json, "\"inherited\": null"));
    if (!x.text || !strstr(x.text, "3 x 1000B, the") || getenv("SHOW"))
        printf("%s\n%s\n", x.text, x.json);
    run_free(&x);

    /* without events_fired: fired = read + lost */
    static const char *names1[] = {"events_lost"};
    static const uint64_t values1[] = {5};
    CHECK("lost (no events_fired): analysed", run(&x, false, names1, values1, 1, NULL) == 0);
    analyze_caveats(analyze_result(x.a), x.r, false, &cv);
    CHECK("lost (no events_fired): 5 of 19",
          cv.lost == 5 && cv.fired == 19 && fig_is(&cv, "live", 5, 5000, 5, 5000, true));
    CHECK("lost (no events_fired): text",
          x.text && strstr(x.text, "CAUTION: 5 of 19 events (26.32%) were lost"));
    run_free(&x);
}

static void clean(void)
{
    static const char *names[] = {"events_lost", "events_fired"};
    static const uint64_t values[] = {0, 14};
    struct run x;
    CHECK("clean: trace written and analysed", run(&x, false, names, values, 2, NULL) == 0);
    struct analyze_caveats cv;
    analyze_caveats(analyze_result(x.a), x.r, false, &cv);
    CHECK("clean: no caveat", !cv.any && cv.nfig == 0);
    CHECK("clean: text without CAUTION, JSON caveats null",
          x.text && !strstr(x.text, "CAUTION") && !strstr(x.text, "note:") && x.json &&
              strstr(x.json, "\"caveats\": null") && strstr(x.json, "\"events_lost\": 0"));
    run_free(&x);
}

static void unknown_and_cut(void)
{
    static const char *names[] = {"events_lost", "events_fired"};
    static const uint64_t values[] = {0, 15};
    struct run x;
    CHECK("unknown free: analysed", run(&x, true, names, values, 2, NULL) == 0);
    struct analyze_caveats cv;
    analyze_caveats(analyze_result(x.a), x.r, false, &cv);
    CHECK("unknown free: a caveat: 1 unknown block, more than lost: live, leaks, peak unbounded",
          cv.any && cv.unknown == 1 && cv.lost == 0 && fig_is(&cv, "live", 0, 0, 0, 0, false) &&
              fig_is(&cv, "peak", 0, 0, 0, 0, false) && !fig(&cv, "allocations"));
    CHECK("unknown free: text says so before the figures, and that some predate the trace",
          x.text && strstr(x.text, "CAUTION: 1 frees and 0 reallocs name blocks the trace does not hold") &&
              strstr(x.text, "so some were allocated before the trace began") &&
              strstr(x.text, "CAUTION") < strstr(x.text, "  allocations 10"));
    run_free(&x);

    CHECK("cut short: analysed", run(&x, false, names, values, 2, "c.mtt: cut") == 0);
    analyze_caveats(analyze_result(x.a), x.r, true, &cv);
    CHECK("cut short: every figure unbounded", cv.any && cv.incomplete &&
                                                   fig_is(&cv, "live", 0, 0, 0, 0, false) &&
                                                   fig_is(&cv, "allocations", 0, 0, 0, 0, false));
    CHECK("cut short: text and JSON say so", x.text && strstr(x.text, "CAUTION: the trace is incomplete") &&
                                                 x.json && strstr(x.json, "\"incomplete\": true"));
    run_free(&x);
}

/* The widest line from the first CAUTION to the figures (the other
 * CAUTION lines wrap near 80 columns, none past 94). */
static size_t caution_width(const char *text)
{
    const char *p = text ? strstr(text, "  CAUTION") : NULL,
               *end = text ? strstr(text, "  allocations ") : NULL;
    size_t widest = 0;
    for (const char *nl; p && end && p < end && (nl = strchr(p, '\n')); p = nl + 1)
        if ((size_t)(nl - p) > widest)
            widest = (size_t)(nl - p);
    return widest;
}

static void began_on_demand(void)
{
    static const char *names[] = {"events_lost", "events_fired"};
    static const uint64_t values[] = {0, 14};
    static const char *const meta[] = {"began", "query", NULL};
    struct run x;
    CHECK("on demand: analysed", run_meta(&x, false, names, values, 2, NULL, meta) == 0);
    struct analyze_caveats cv;
    analyze_caveats(analyze_result(x.a), x.r, false, &cv);
    CHECK("on demand: began late, nothing lost: live, leaks and the peak unbounded",
          cv.any && cv.before && cv.began_query && cv.lost == 0 && fig_is(&cv, "live", 0, 0, 0, 0, false) &&
              fig_is(&cv, "leaks", 0, 0, 0, 0, false) && fig_is(&cv, "peak", 0, 0, 0, 0, false));
    size_t width = caution_width(x.text);
    CHECK("on demand: the CAUTION says so, wrapped as the others are (no line past 90 columns)",
          x.text &&
              strstr(x.text,
                     "  CAUTION: the trace began on demand (memtrail query PID start trace), after the\n"
                     "    program had run: blocks allocated before it began are in no figure") &&
              width > 0 && width <= 90);
    if (width > 90 || getenv("SHOW"))
        printf("  widest CAUTION line: %zu\n%s\n", width, x.text);
    run_free(&x);
}

int main(void)
{
    lost_events();
    clean();
    unknown_and_cut();
    began_on_demand();
    return failures ? 1 : 0;
}

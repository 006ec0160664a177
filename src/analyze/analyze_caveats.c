/* analyze_caveats.c — what the analysis cannot know, said before the
 * figures: events the recorder lost (the end record's events_lost),
 * blocks the trace does not hold (frees and reallocs of unknown ids), a
 * trace cut short; which figures that touches and by how much they may be
 * off, from what the analysis saw (the largest and the mean block size).
 * And a forked child's inherited blocks (analyze_inherit.c). The bounds'
 * reasoning: docs/trace-analysis.md, "When events are missing". */
#include "analyze/analyze.h"
#include "common/json_out.h"
#include "common/units.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static void add_fig(struct analyze_caveats *cv, const char *figure, uint64_t over, uint64_t under, bool bytes,
                    bool bounded)
{
    if (cv->nfig == ANALYZE_CAVEATS_MAX)
        return;
    struct analyze_caveat *c = &cv->fig[cv->nfig++];
    *c = (struct analyze_caveat){
        .figure = figure, .over_count = over, .under_count = under, .bounded = bounded};
    if (bytes) {
        c->over_bytes = mul_sat(over, cv->max_size);
        c->under_bytes = mul_sat(under, cv->max_size);
    }
}

bool analyze_began_late(const struct analyze_result *res, const mt_trace_reader *r)
{
    const char *began = r ? mt_trace_meta(r, "began") : NULL;
    const struct analyze_inherited *in = &res->inherited;
    /* a child that replayed its parent's trace has only the blocks that
     * trace knew of at the fork */
    return (began && strcmp(began, "query") == 0) || in->state == ANALYZE_INHERIT_FAILED ||
           (in->state == ANALYZE_INHERIT_DONE && (in->parent_short || in->parent_late));
}

void analyze_caveats(const struct analyze_result *res, const mt_trace_reader *r, bool incomplete,
                     struct analyze_caveats *cv)
{
    memset(cv, 0, sizeof *cv);
    int found = 0, ffound = 0;
    uint64_t lost = r ? mt_trace_stat(r, "events_lost", &found) : 0;
    uint64_t fired = r ? mt_trace_stat(r, "events_fired", &ffound) : 0;
    cv->lost_known = found;
    cv->lost = lost;
    cv->fired = ffound && fired >= lost ? fired : res->events + lost;
    cv->incomplete = incomplete;
    cv->unknown = res->frees_unknown + res->reallocs_unknown;
    uint64_t calls = 0, bytes = 0;
    for (int k = 0; k < ANALYZE_HIST; k++) {
        calls += res->hist_count[k];
        bytes += res->hist_bytes[k];
    }
    cv->mean_size = calls ? bytes / calls : 0;
    cv->max_size = res->max_size;
    /* Blocks live when a trace begun late began are in no figure, whether
     * or not the trace sees them freed. */
    const char *began = r ? mt_trace_meta(r, "began") : NULL;
    cv->began_query = began && strcmp(began, "query") == 0;
    cv->before = analyze_began_late(res, r);
    cv->any = lost || incomplete || cv->unknown || cv->before;
    if (!cv->any)
        return;
    /* More unknown blocks than events lost: some were allocated before the
     * trace began, and those never freed are in no figure. */
    bool before = cv->before || cv->unknown > lost;
    bool bounded = !incomplete && !before;
    uint64_t n = lost;
    add_fig(cv, "live", n, n, true, bounded);
    add_fig(cv, "leaks", n, n, true, bounded);
    add_fig(cv, "peak", n, n, true, bounded);
    if (n || incomplete) {
        add_fig(cv, "allocations", 0, n, true, !incomplete);
        add_fig(cv, "frees", 0, n, false, !incomplete);
        add_fig(cv, "temporary", n, n, true, !incomplete);
    }
}

/* --- text ----------------------------------------------------------------- */

static const char *size(char *buf, size_t len, uint64_t b)
{
    return mt_size_u64(buf, len, b);
}

void analyze_caveats_text(FILE *out, const struct analyze_result *res, const struct analyze_caveats *cv)
{
    (void)res;
    if (!cv->any)
        return;
    char a[MT_UNITS_MAX];
    uint64_t n = cv->lost;
    if (n) {
        fprintf(out,
                "  CAUTION: %" PRIu64 " of %" PRIu64
                " events (%.2f%%) were lost while recording; the figures "
                "below miss them:\n",
                n, cv->fired, cv->fired ? 100.0 * (double)n / (double)cv->fired : 100.0);
        uint64_t worst = mul_sat(n, cv->max_size), est = mul_sat(n, cv->mean_size);
        char w[MT_UNITS_MAX], e[MT_UNITS_MAX], mx[MT_UNITS_MAX], mean[MT_UNITS_MAX];
        size(w, sizeof w, worst);
        size(e, sizeof e, est);
        size(mx, sizeof mx, cv->max_size);
        size(mean, sizeof mean, cv->mean_size);
        fprintf(out,
                "    live at the end, leaks: each up to %" PRIu64
                " blocks and %s too high (lost frees) or too "
                "low\n      (lost allocations): %" PRIu64
                " x %s, the largest block seen (~%s at the mean size, %s)\n",
                n, w, n, mx, e, mean);
        fprintf(out, "    peak: up to %s too high or too low (~%s at the mean size)\n", w, e);
        fprintf(out,
                "    allocations, frees, temporary allocations: up to %" PRIu64
                " too few (allocated bytes: up "
                "to %s)\n",
                n, w);
    }
    if (cv->before) /* wrapped after the how, which is long, so no line passes ~90 columns */
        fprintf(
            out,
            "  CAUTION: the trace began %s, after the\n    program had run: blocks allocated before it "
            "began are in no figure (their frees, if\n    any, are frees of unknown blocks), so live, "
            "leaks and the peak may be lower than the\n    program's by an amount the trace cannot tell\n",
            cv->began_query ? "on demand (memtrail query PID start trace)"
                            : "at a fork without all its parent's blocks");
    if (cv->unknown) {
        char mean[MT_UNITS_MAX];
        fprintf(out,
                "  CAUTION: %" PRIu64 " frees and %" PRIu64 " reallocs name blocks the trace does not hold "
                "(allocated\n    before it began, or their allocation lost): their sizes are unknown (~%s at "
                "the mean size, %s)\n",
                res->frees_unknown, res->reallocs_unknown,
                size(a, sizeof a, mul_sat(cv->unknown, cv->mean_size)),
                size(mean, sizeof mean, cv->mean_size));
        if (cv->unknown > n && !cv->before)
            fputs("    more than the events lost, so some were allocated before the trace began: those never "
                  "freed\n    are in no figure, and live, leaks and the peak may be lower than the program's "
                  "by more\n    than the trace can tell\n",
                  out);
    }
    if (cv->incomplete)
        fputs(
            "  CAUTION: the trace is incomplete (see the end): the events after what was read, and the count "
            "of\n    events lost, are unknown; live and leaks may hold blocks freed later, and every figure "
            "covers\n    only the events read\n",
            out);
}

/* --- one line each ---------------------------------------------------------
 * The same caveats where a figure is shown without analyze's text (export's
 * stderr, pprof's comments): the first sentence of each CAUTION above, not
 * wrapped, with the bound that matters most. */

static void add_line(struct analyze_caveat_lines *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_line(struct analyze_caveat_lines *out, const char *fmt, ...)
{
    if (out->n == ANALYZE_CAVEAT_LINES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->line[out->n++], ANALYZE_CAVEAT_LINE_MAX, fmt, ap);
    va_end(ap);
}

void analyze_caveats_lines(const struct analyze_result *res, const struct analyze_caveats *cv,
                           struct analyze_caveat_lines *out)
{
    out->n = 0;
    if (!cv->any)
        return;
    char w[MT_UNITS_MAX], mx[MT_UNITS_MAX], e[MT_UNITS_MAX], mean[MT_UNITS_MAX];
    uint64_t n = cv->lost;
    if (n)
        add_line(out,
                 "CAUTION: %" PRIu64 " of %" PRIu64
                 " events (%.2f%%) were lost while recording; the figures miss them: live bytes, "
                 "leaks and the peak each up to %s too high or too low (%" PRIu64
                 " x %s, the largest block seen), allocations and frees up to %" PRIu64 " too few",
                 n, cv->fired, cv->fired ? 100.0 * (double)n / (double)cv->fired : 100.0,
                 size(w, sizeof w, mul_sat(n, cv->max_size)), n, size(mx, sizeof mx, cv->max_size), n);
    if (cv->before)
        add_line(out,
                 "CAUTION: the trace began %s, after the program had run: blocks allocated before it began "
                 "are in no figure (their frees, if any, are frees of unknown blocks), so live, leaks and "
                 "the peak may be lower than the program's by an amount the trace cannot tell",
                 cv->began_query ? "on demand (memtrail query PID start trace)"
                                 : "at a fork without all its parent's blocks");
    if (cv->unknown)
        add_line(out,
                 "CAUTION: %" PRIu64 " frees and %" PRIu64
                 " reallocs name blocks the trace does not hold (allocated before it began, or their "
                 "allocation lost): their sizes are unknown (~%s at the mean size, %s)",
                 res->frees_unknown, res->reallocs_unknown,
                 size(e, sizeof e, mul_sat(cv->unknown, cv->mean_size)),
                 size(mean, sizeof mean, cv->mean_size));
    if (cv->incomplete)
        add_line(out,
                 "CAUTION: the trace is incomplete (no end record, or reading stopped early): the events "
                 "after what was read, and the count of events lost, are unknown; live and leaks may hold "
                 "blocks freed later, and every figure covers only the events read");
}

void analyze_inherited_text(FILE *out, const struct analyze_result *res)
{
    const struct analyze_inherited *in = &res->inherited;
    if (in->state == ANALYZE_INHERIT_NONE)
        return;
    if (in->state == ANALYZE_INHERIT_DONE) {
        char b[MT_UNITS_MAX];
        fprintf(out, "  inherited at the fork from pid %" PRIu64 " (%s): %" PRIu64 " blocks, %s live then\n",
                in->ppid, in->parent, in->count, mt_size_u64(b, sizeof b, in->bytes));
    }
    if (in->note[0])
        fprintf(out, "  note: %s\n", in->note);
}

/* --- JSON ----------------------------------------------------------------- */

void analyze_caveats_json(struct mt_json *j, const struct analyze_caveats *cv)
{
    mt_json_key(j, "caveats");
    if (!cv->any) {
        mt_json_null(j);
        return;
    }
    mt_json_object_begin(j);
    mt_json_ku64_or_null(j, "events_lost", cv->lost_known, cv->lost);
    mt_json_ku64_or_null(j, "events_fired", cv->lost_known, cv->fired);
    mt_json_key(j, "lost_percent");
    if (cv->lost_known) {
        char pct[32];
        snprintf(pct, sizeof pct, "%.4f", cv->fired ? 100.0 * (double)cv->lost / (double)cv->fired : 0.0);
        mt_json_number(j, pct);
    } else {
        mt_json_null(j); /* no end record: how many were lost is unknown, not none */
    }
    mt_json_kbool(j, "incomplete", cv->incomplete);
    mt_json_ku64(j, "blocks_unknown", cv->unknown);
    mt_json_kbool(j, "began_late", cv->before);
    mt_json_ku64(j, "mean_size_bytes", cv->mean_size);
    mt_json_ku64(j, "max_size_bytes", cv->max_size);
    mt_json_key(j, "figures");
    mt_json_array_begin(j);
    for (size_t i = 0; i < cv->nfig; i++) {
        const struct analyze_caveat *c = &cv->fig[i];
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_kstr(j, "figure", c->figure);
        mt_json_ku64(j, "over_count", c->over_count);
        mt_json_ku64(j, "over_bytes", c->over_bytes);
        mt_json_ku64(j, "under_count", c->under_count);
        mt_json_ku64(j, "under_bytes", c->under_bytes);
        mt_json_kbool(j, "bounded", c->bounded);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
    mt_json_object_end(j);
}

void analyze_inherited_json(struct mt_json *j, const struct analyze_result *res)
{
    const struct analyze_inherited *in = &res->inherited;
    mt_json_key(j, "inherited");
    if (in->state == ANALYZE_INHERIT_NONE) {
        mt_json_null(j);
        return;
    }
    mt_json_object_begin(j);
    mt_json_kbool(j, "replayed", in->state == ANALYZE_INHERIT_DONE);
    mt_json_ku64_or_null(j, "ppid", in->ppid != 0, in->ppid);
    mt_json_kstr(j, "parent_trace", in->parent[0] ? in->parent : NULL);
    mt_json_ku64(j, "live_count", in->count);
    mt_json_ku64(j, "live_bytes", in->bytes);
    mt_json_kbool(j, "parent_reaches_fork", in->state == ANALYZE_INHERIT_DONE && !in->parent_short);
    mt_json_kstr(j, "note", in->note[0] ? in->note : NULL);
    mt_json_object_end(j);
}

/* analyze_print.c — `memtrail analyze` output: the totals, then the
 * sections (peak, leaks, temporary allocations, hottest stacks, size
 * histogram, timeline), as readable text with each stack symbolized, or
 * as one JSON document whose keys docs/json.md lists. */
#include "analyze/analyze.h"
#include "common/units.h"
#include "report/report.h"
#include "symbol/symbol.h"
#include "report/detail.h"
#include "common/json_out.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SYM 16 /* symbolized frames per return address (inlined calls) */

/* --- ranking stacks ------------------------------------------------------- */

enum rank { RANK_PEAK, RANK_LEAKS, RANK_TEMPORARY, RANK_HOT_COUNT, RANK_HOT_BYTES };

/* A stack's figures in a list: bytes and count. The hot lists count
 * allocations as the header does, a realloc resizing a block (its reallocs
 * are shown beside them). */
static void figures(const struct analyze_stack *s, enum rank k, uint64_t *bytes, uint64_t *count)
{
    switch (k) {
    case RANK_PEAK: *bytes = s->peak_bytes, *count = s->peak_count; break;
    case RANK_LEAKS: *bytes = s->live_bytes, *count = s->live_count; break;
    case RANK_TEMPORARY: *bytes = s->temp_bytes, *count = s->temp_count; break;
    default: *bytes = s->allocated_bytes, *count = s->allocs; break;
    }
}

static enum rank sort_rank;

static int cmp_rank(const void *pa, const void *pb)
{
    const struct analyze_stack *a = *(const struct analyze_stack *const *)pa,
                               *b = *(const struct analyze_stack *const *)pb;
    uint64_t ab, ac, bb, bc;
    figures(a, sort_rank, &ab, &ac);
    figures(b, sort_rank, &bb, &bc);
    bool by_count = sort_rank == RANK_TEMPORARY || sort_rank == RANK_HOT_COUNT;
    uint64_t a1 = by_count ? ac : ab, b1 = by_count ? bc : bb;
    uint64_t a2 = by_count ? ab : ac, b2 = by_count ? bb : bc;
    if (a1 != b1)
        return a1 > b1 ? -1 : 1;
    if (a2 != b2)
        return a2 > b2 ? -1 : 1;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return (a->category > b->category) - (a->category < b->category);
}

/* The stacks with a non-zero figure for k, best first; *n of them (all,
 * not cut to top). NULL with *n = 0 when none or out of memory. */
static const struct analyze_stack **ranked(const struct analyze_result *res, enum rank k, size_t *n)
{
    *n = 0;
    const struct analyze_stack **v = malloc((res->nstacks + 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < res->nstacks; i++) {
        uint64_t b, c;
        figures(&res->stacks[i], k, &b, &c);
        if (b || c)
            v[(*n)++] = &res->stacks[i];
    }
    sort_rank = k;
    qsort(v, *n, sizeof *v, cmp_rank);
    return v;
}

static const char *category_of(const struct analyze_view *v, unsigned id, char *buf, size_t len)
{
    const char *name = v->reader ? mt_trace_category_name(v->reader, id) : NULL;
    if (name)
        return name;
    snprintf(buf, len, "category%u", id);
    return buf;
}

static const mt_trace_stack *frames_of(const struct analyze_result *res, const struct analyze_view *v,
                                       const struct analyze_stack *s)
{
    return analyze_stack_frames(res, v->reader, s->id);
}

/* --- text ----------------------------------------------------------------- */

/* Sizes and times as every command prints them (common/units.h). Times
 * are measured from one origin, the trace's start (its header's start_ns):
 * the events' times, the peak's, the timeline's buckets. */
static void text_bytes(FILE *out, uint64_t b)
{
    char buf[MT_UNITS_MAX];
    fputs(mt_size_u64(buf, sizeof buf, b), out);
}

static void text_time(FILE *out, uint64_t ns)
{
    char buf[MT_UNITS_MAX];
    fputs(mt_duration(buf, sizeof buf, ns), out);
}

static void text_frames(FILE *out, const struct analyze_result *res, const struct analyze_view *v,
                        const struct analyze_stack *s)
{
    const mt_trace_stack *st = frames_of(res, v, s);
    if (!st || !st->nframes) {
        fprintf(out, "      [%s]\n", s->id ? "stack not defined in the trace" : "no stack");
        return;
    }
    for (uint32_t i = 0; i < st->nframes; i++) {
        struct sym_frame f[MAX_SYM];
        int k = v->sym ? sym_lookup(v->sym, st->frames[i], f, MAX_SYM) : 0;
        if (k == 0) {
            fprintf(out, "      [0x%016" PRIx64 "] ??\n", st->frames[i]);
            continue;
        }
        for (int j = 0; j < k; j++)
            sym_print_frame(out, "      ", st->frames[i], &f[j]);
    }
}

/* One list of stacks: "#i figures (category)" and the frames. */
static int text_list(FILE *out, const struct analyze_result *res, const struct analyze_view *v, enum rank k,
                     const char *what)
{
    size_t n;
    const struct analyze_stack **list = ranked(res, k, &n);
    if (!list)
        return -ENOMEM;
    size_t shown = v->top > 0 && n > (size_t)v->top ? (size_t)v->top : n;
    if (n == 0)
        fprintf(out, "  (no stacks)\n\n");
    else if (shown < n)
        fprintf(out, "  %s: top %zu of %zu stacks\n", what, shown, n);
    else
        fprintf(out, "  %s: %zu stack%s\n", what, n, n == 1 ? "" : "s");
    for (size_t i = 0; i < shown; i++) {
        const struct analyze_stack *s = list[i];
        char cb[32];
        uint64_t b, c;
        figures(s, k, &b, &c);
        fprintf(out, "  #%zu ", i + 1);
        if (k == RANK_HOT_COUNT || k == RANK_HOT_BYTES) {
            fprintf(out, "%" PRIu64 " allocations (%" PRIu64 " reallocs), ", c, s->reallocs);
            text_bytes(out, b);
            fputs(" allocated", out);
        } else if (k == RANK_TEMPORARY) {
            fprintf(out, "%" PRIu64 " temporary of %" PRIu64 " allocations, ", c, s->allocs);
            text_bytes(out, b);
        } else {
            text_bytes(out, b);
            fprintf(out, " in %" PRIu64 " block%s", c, c == 1 ? "" : "s");
        }
        fprintf(out, " (%s, stack %" PRIu32 ")\n", category_of(v, s->category, cb, sizeof cb), s->id);
        text_frames(out, res, v, s);
        fputc('\n', out);
    }
    free(list);
    return 0;
}

/* The sizes bucket k of the histogram holds: 0 for k = 0, else
 * [2^(k-1), 2^k - 1] (bucket 64 up to the largest size). */
static void hist_bounds(int k, uint64_t *lo, uint64_t *hi)
{
    *lo = k ? (uint64_t)1 << (k - 1) : 0;
    *hi = k == 0 ? 0 : k == 64 ? UINT64_MAX : ((uint64_t)1 << k) - 1;
}

static void text_histogram(FILE *out, const struct analyze_result *res)
{
    uint64_t most = 0, total = 0;
    for (int k = 0; k < ANALYZE_HIST; k++) {
        if (res->hist_count[k] > most)
            most = res->hist_count[k];
        total += res->hist_count[k];
    }
    fputs("Sizes requested (allocations and reallocs), by power of two:\n", out);
    if (!total) {
        fputs("  (none)\n\n", out);
        return;
    }
    for (int k = 0; k < ANALYZE_HIST; k++) {
        if (!res->hist_count[k])
            continue;
        uint64_t lo, hi;
        hist_bounds(k, &lo, &hi);
        char range[64];
        snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, lo, hi);
        int bar = (int)(40 * res->hist_count[k] / most);
        fprintf(out, "  %-28s %12" PRIu64 " %5.1f%% %.*s\n", range, res->hist_count[k],
                100.0 * (double)res->hist_count[k] / (double)total, bar > 0 ? bar : 1,
                "########################################");
    }
    fputc('\n', out);
}

/* The timeline: every bucket with --timeline, else at most 24 rows. */
static void text_timeline(FILE *out, const struct analyze_result *res, bool full)
{
    size_t n = res->ntimeline, per = 1;
    if (!full)
        while (n / per > 24)
            per *= 2;
    fputs("Live bytes over time (", out);
    fprintf(out, "%zu buckets of ", (n + per - 1) / per);
    text_time(out, res->bucket_ns * per);
    fputs("; at the bucket's end, and the most in it):\n", out);
    if (!n) {
        fputs("  (no events)\n\n", out);
        return;
    }
    uint64_t peak = res->peak_bytes ? res->peak_bytes : 1;
    for (size_t i = 0; i < n; i += per) {
        uint64_t end = 0, max = 0;
        for (size_t j = i; j < i + per && j < n; j++) {
            end = res->timeline[j].live_bytes;
            if (res->timeline[j].max_bytes > max)
                max = res->timeline[j].max_bytes;
        }
        fputs("  ", out);
        char t[32];
        snprintf(t, sizeof t, "%.6f", (double)(res->bucket_ns * i) / 1e9);
        fprintf(out, "%12s s  ", t);
        char b1[MT_UNITS_MAX], b2[MT_UNITS_MAX];
        int bar = (int)(40 * max / peak);
        fprintf(out, "%10s %10s  %.*s\n", mt_size_u64(b1, sizeof b1, end), mt_size_u64(b2, sizeof b2, max),
                bar, "########################################");
    }
    fputc('\n', out);
}

int analyze_print_text(FILE *out, const struct analyze_result *res, const struct analyze_view *v)
{
    const mt_trace_file_info *fi = v->reader ? mt_trace_info(v->reader) : NULL;
    fprintf(out, "Trace %s", v->file);
    if (fi)
        fprintf(out, " (pid %" PRIu32 ")", fi->pid);
    fprintf(out, ": %" PRIu64 " events", res->events);
    if (res->events) {
        /* The span as two times from the start, as the peak's is. */
        fputs(" from ", out);
        text_time(out, res->first_ns);
        fputs(" to ", out);
        text_time(out, res->last_ns);
        fputs(" after the start", out);
    }
    fputs(v->error ? ", stopped early (see the end)\n" : "\n", out);
    struct analyze_caveats cv;
    analyze_caveats(res, v->reader, v->error != NULL, &cv);
    analyze_caveats_text(out, res, &cv); /* before the figures they concern */
    analyze_inherited_text(out, res);
    fprintf(out, "  allocations %" PRIu64 ", frees %" PRIu64 ", reallocs %" PRIu64 "; allocated ",
            res->allocs, res->frees, res->reallocs);
    text_bytes(out, res->allocated_bytes);
    fputc('\n', out);
    if (res->frees_unknown || res->reallocs_unknown || res->ids_reused)
        fprintf(out,
                "  of blocks not in the trace: %" PRIu64 " frees, %" PRIu64
                " reallocs; ids reused while live: %" PRIu64 "\n",
                res->frees_unknown, res->reallocs_unknown, res->ids_reused);
    if (res->mmaps || res->munmaps) {
        fprintf(out, "  mappings: %" PRIu64 " mmaps, %" PRIu64 " munmaps; mapped at the end ", res->mmaps,
                res->munmaps);
        text_bytes(out, res->mapped_bytes);
        fputs(", at most ", out);
        text_bytes(out, res->mapped_peak);
        fputc('\n', out);
    }
    fputs("  live at the end: ", out);
    text_bytes(out, res->live_bytes);
    fprintf(out, " in %" PRIu64 " blocks\n\n", res->live_count);

    int rc = 0;
    if (v->show & ANALYZE_SHOW_PEAK) {
        fputs("Peak: ", out);
        text_bytes(out, res->peak_bytes);
        fprintf(out, " (%" PRIu64 " bytes) in %" PRIu64 " blocks, first reached at ", res->peak_bytes,
                res->peak_count);
        text_time(out, res->peak_time_ns);
        fputc('\n', out);
        rc = rc ? rc : text_list(out, res, v, RANK_PEAK, "live at the peak");
    }
    if (v->show & ANALYZE_SHOW_LEAKS) {
        fputs("Leaks (never freed): ", out);
        text_bytes(out, res->live_bytes);
        fprintf(out, " in %" PRIu64 " blocks\n", res->live_count);
        rc = rc ? rc : text_list(out, res, v, RANK_LEAKS, "by stack");
    }
    if (v->show & ANALYZE_SHOW_TEMPORARY) {
        /* blocks, of the blocks allocated: the header's allocations (a realloc resizes a block) */
        uint64_t blocks = res->allocs;
        fprintf(out,
                "Temporary allocations (blocks freed by their thread's next call, reallocs of them aside): "
                "%" PRIu64 " (%.1f%% of %" PRIu64 " allocations), ",
                res->temp_count, blocks ? 100.0 * (double)res->temp_count / (double)blocks : 0.0, blocks);
        text_bytes(out, res->temp_bytes);
        fputc('\n', out);
        rc = rc ? rc : text_list(out, res, v, RANK_TEMPORARY, "by stack");
    }
    if (v->show & ANALYZE_SHOW_HOT) {
        fputs("Hottest stacks by number of allocations:\n", out);
        rc = rc ? rc : text_list(out, res, v, RANK_HOT_COUNT, "allocating");
        fputs("Hottest stacks by bytes allocated:\n", out);
        rc = rc ? rc : text_list(out, res, v, RANK_HOT_BYTES, "allocating");
    }
    if (v->show & ANALYZE_SHOW_HISTOGRAM)
        text_histogram(out, res);
    if (v->show & ANALYZE_SHOW_TIMELINE)
        text_timeline(out, res, v->show == ANALYZE_SHOW_TIMELINE);
    if (v->error)
        fprintf(out,
                "Incomplete: reading stopped early (%s); the figures above are those of the %" PRIu64
                " events before it.\n",
                v->error, res->events);
    if (rc < 0)
        return rc;
    return ferror(out) ? -EIO : 0;
}

/* --- JSON ----------------------------------------------------------------- */

/* The figures of a stack in list k, named for what they are. */
static void json_figures(mt_json *j, const struct analyze_stack *s, enum rank k)
{
    switch (k) {
    case RANK_PEAK:
    case RANK_LEAKS: {
        uint64_t b, c;
        figures(s, k, &b, &c);
        mt_json_ku64(j, "live_bytes", b);
        mt_json_ku64(j, "live_count", c);
        break;
    }
    case RANK_TEMPORARY:
        mt_json_ku64(j, "temporary_bytes", s->temp_bytes);
        mt_json_ku64(j, "temporary_count", s->temp_count);
        mt_json_ku64(j, "allocs", s->allocs);
        break;
    default:
        mt_json_ku64(j, "allocated_bytes", s->allocated_bytes);
        mt_json_ku64(j, "allocs", s->allocs);
        mt_json_ku64(j, "reallocs", s->reallocs);
        break;
    }
}

/* "stacks_total" and "stacks" of list k, into the open object. */
static int json_list(mt_json *j, const struct analyze_result *res, const struct analyze_view *v, enum rank k)
{
    size_t n;
    const struct analyze_stack **list = ranked(res, k, &n);
    if (!list)
        return -ENOMEM;
    size_t shown = v->top > 0 && n > (size_t)v->top ? (size_t)v->top : n;
    mt_json_ku64(j, "stacks_total", n);
    mt_json_key(j, "stacks");
    mt_json_array_begin(j);
    for (size_t i = 0; i < shown; i++) {
        const struct analyze_stack *s = list[i];
        char cb[32];
        mt_json_object_begin(j);
        mt_json_ku64(j, "stack_id", s->id);
        mt_json_kstr(j, "category", category_of(v, s->category, cb, sizeof cb));
        json_figures(j, s, k);
        const mt_trace_stack *st = frames_of(res, v, s);
        mt_json_key(j, "frames");
        detail_json_frames(j, v->sym, st ? st->frames : NULL, st ? st->nframes : 0);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
    free(list);
    return 0;
}

static void json_histogram(mt_json *j, const struct analyze_result *res)
{
    mt_json_key(j, "histogram");
    mt_json_array_begin(j);
    for (int k = 0; k < ANALYZE_HIST; k++) {
        if (!res->hist_count[k])
            continue;
        uint64_t lo, hi;
        hist_bounds(k, &lo, &hi);
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_ku64(j, "min_bytes", lo);
        mt_json_ku64(j, "max_bytes", hi);
        mt_json_ku64(j, "count", res->hist_count[k]);
        mt_json_ku64(j, "allocated_bytes", res->hist_bytes[k]);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
}

static void json_timeline(mt_json *j, const struct analyze_result *res, const struct analyze_view *v)
{
    unsigned used[ANALYZE_CATEGORIES], nused = 0;
    for (unsigned c = 0; c < ANALYZE_CATEGORIES; c++)
        if (res->categories[c].used)
            used[nused++] = c;
    mt_json_key(j, "timeline");
    mt_json_object_begin(j);
    mt_json_ku64(j, "bucket_ns", res->bucket_ns);
    mt_json_key(j, "categories");
    mt_json_oneline(j);
    mt_json_array_begin(j);
    for (unsigned k = 0; k < nused; k++) {
        char cb[32];
        mt_json_str(j, category_of(v, used[k], cb, sizeof cb));
    }
    mt_json_array_end(j);
    mt_json_key(j, "buckets");
    mt_json_array_begin(j);
    for (size_t i = 0; i < res->ntimeline; i++) {
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_ku64(j, "time_ns", res->bucket_ns * i);
        mt_json_ku64(j, "live_bytes", res->timeline[i].live_bytes);
        mt_json_ku64(j, "max_live_bytes", res->timeline[i].max_bytes);
        mt_json_key(j, "by_category");
        mt_json_array_begin(j);
        for (unsigned k = 0; k < nused; k++)
            mt_json_u64(j, res->timeline_cat[i * ANALYZE_CATEGORIES + used[k]]);
        mt_json_array_end(j);
        mt_json_object_end(j);
    }
    mt_json_array_end(j);
    mt_json_object_end(j);
}

int analyze_print_json(FILE *out, const struct analyze_result *res, const struct analyze_view *v)
{
    const mt_trace_file_info *fi = v->reader ? mt_trace_info(v->reader) : NULL;
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    mt_json_kstr(&j, "file", v->file);
    mt_json_ku64_or_null(&j, "pid", fi, fi ? fi->pid : 0);
    mt_json_kbool(&j, "complete", !v->error);
    mt_json_kstr(&j, "error", v->error);
    int found = 0;
    uint64_t lost = v->reader ? mt_trace_stat(v->reader, "events_lost", &found) : 0;
    mt_json_ku64(&j, "events", res->events);
    mt_json_ku64_or_null(&j, "events_lost", found, lost);
    mt_json_ku64(&j, "allocs", res->allocs);
    mt_json_ku64(&j, "frees", res->frees);
    mt_json_ku64(&j, "reallocs", res->reallocs);
    mt_json_ku64(&j, "frees_unknown", res->frees_unknown);
    mt_json_ku64(&j, "reallocs_unknown", res->reallocs_unknown);
    mt_json_ku64(&j, "ids_reused", res->ids_reused);
    mt_json_ku64(&j, "mmaps", res->mmaps);
    mt_json_ku64(&j, "munmaps", res->munmaps);
    mt_json_ku64(&j, "allocated_bytes", res->allocated_bytes);
    mt_json_ku64(&j, "first_ns", res->first_ns);
    mt_json_ku64(&j, "last_ns", res->last_ns);
    mt_json_ku64(&j, "live_bytes", res->live_bytes);
    mt_json_ku64(&j, "live_count", res->live_count);
    mt_json_ku64(&j, "mapped_bytes", res->mapped_bytes);
    mt_json_ku64(&j, "mapped_peak_bytes", res->mapped_peak);
    struct analyze_caveats cv;
    analyze_caveats(res, v->reader, v->error != NULL, &cv);
    analyze_caveats_json(&j, &cv);
    analyze_inherited_json(&j, res);
    int rc = 0;
    if (v->show & ANALYZE_SHOW_PEAK) {
        mt_json_key(&j, "peak");
        mt_json_object_begin(&j);
        mt_json_ku64(&j, "live_bytes", res->peak_bytes);
        mt_json_ku64(&j, "live_count", res->peak_count);
        mt_json_ku64(&j, "time_ns", res->peak_time_ns);
        rc = rc ? rc : json_list(&j, res, v, RANK_PEAK);
        rc = rc ? rc : analyze_tree_json(&j, res, v->reader, v->sym);
        mt_json_object_end(&j);
    }
    if (v->show & ANALYZE_SHOW_LEAKS) {
        mt_json_key(&j, "leaks");
        mt_json_object_begin(&j);
        mt_json_ku64(&j, "live_bytes", res->live_bytes);
        mt_json_ku64(&j, "live_count", res->live_count);
        rc = rc ? rc : json_list(&j, res, v, RANK_LEAKS);
        mt_json_object_end(&j);
    }
    if (v->show & ANALYZE_SHOW_TEMPORARY) {
        mt_json_key(&j, "temporary");
        mt_json_object_begin(&j);
        mt_json_ku64(&j, "temporary_count", res->temp_count);
        mt_json_ku64(&j, "temporary_bytes", res->temp_bytes);
        rc = rc ? rc : json_list(&j, res, v, RANK_TEMPORARY);
        mt_json_object_end(&j);
    }
    if (v->show & ANALYZE_SHOW_HOT) {
        mt_json_key(&j, "hot");
        mt_json_object_begin(&j);
        mt_json_key(&j, "by_count");
        mt_json_object_begin(&j);
        rc = rc ? rc : json_list(&j, res, v, RANK_HOT_COUNT);
        mt_json_object_end(&j);
        mt_json_key(&j, "by_bytes");
        mt_json_object_begin(&j);
        rc = rc ? rc : json_list(&j, res, v, RANK_HOT_BYTES);
        mt_json_object_end(&j);
        mt_json_object_end(&j);
    }
    if (v->show & ANALYZE_SHOW_HISTOGRAM)
        json_histogram(&j, res);
    if (v->show & ANALYZE_SHOW_TIMELINE)
        json_timeline(&j, res, v);
    int jrc = mt_json_document_end(&j);
    return rc < 0 ? rc : jrc;
}

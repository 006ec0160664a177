/* report_tree.c — the summary of a process tree: every traced process
 * writes its own report (memtrail.<pid>.mtr), and `memtrail report DIR` or
 * `memtrail report FILE FILE...` shows one row per report, each child
 * indented under its parent when the parent's report is in the set, and a
 * totals row. Text and JSON (docs/cli.md). */
#include "report/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The reports in display order: depth-first from the roots, siblings by
 * start time, then pid, then file name. */
struct tree {
    size_t *order;      /* indices into reports, display order */
    size_t *depth;      /* per display position */
    long *parent_pos;   /* per display position: the parent's position, or -1 */
    size_t n;
};

struct sort_ctx {
    const struct report *reports;
    const char *const *files;
};

static int64_t start_of(const struct report *r)
{
    return (r->has & REPORT_HAS_START) ? r->start_ns : INT64_MAX;
}

static int compare(const struct sort_ctx *ctx, size_t a, size_t b)
{
    const struct report *x = &ctx->reports[a], *y = &ctx->reports[b];
    if (start_of(x) != start_of(y))
        return start_of(x) < start_of(y) ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return strcmp(ctx->files[a], ctx->files[b]);
}

/* Insertion sort of index arrays (process trees are small; no global
 * context for qsort needed). */
static void sort_indices(const struct sort_ctx *ctx, size_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        size_t x = v[i], j = i;
        for (; j > 0 && compare(ctx, v[j - 1], x) > 0; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Appends report i and, below it, its children not yet placed. */
static void place(struct tree *t, const size_t *sorted, const long *parent, bool *placed, size_t n,
                  size_t i, size_t depth, long parent_pos)
{
    size_t pos = t->n++;
    placed[i] = true;
    t->order[pos] = i;
    t->depth[pos] = depth;
    t->parent_pos[pos] = parent_pos;
    for (size_t k = 0; k < n; k++) {
        size_t c = sorted[k];
        if (!placed[c] && parent[c] == (long)i)
            place(t, sorted, parent, placed, n, c, depth + 1, (long)pos);
    }
}

static int build_tree(struct tree *t, const struct report *reports, const char *const *files, size_t n)
{
    struct sort_ctx ctx = { reports, files };
    size_t *sorted = malloc((n + 1) * sizeof *sorted);
    long *parent = malloc((n + 1) * sizeof *parent);
    bool *placed = calloc(n + 1, sizeof *placed);
    t->order = malloc((n + 1) * sizeof *t->order);
    t->depth = malloc((n + 1) * sizeof *t->depth);
    t->parent_pos = malloc((n + 1) * sizeof *t->parent_pos);
    t->n = 0;
    if (!sorted || !parent || !placed || !t->order || !t->depth || !t->parent_pos) {
        free(sorted);
        free(parent);
        free(placed);
        free(t->order);
        free(t->depth);
        free(t->parent_pos);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        sorted[i] = i;
    sort_indices(&ctx, sorted, n);

    /* The parent: the first report (in sorted order) of the pid that is
     * this one's ppid. Several reports may share a pid (a snapshot and the
     * exit report of one process). */
    for (size_t i = 0; i < n; i++) {
        parent[i] = -1;
        if (!(reports[i].has & REPORT_HAS_PPID))
            continue;
        for (size_t k = 0; k < n; k++) {
            size_t j = sorted[k];
            if (j != i && (reports[j].has & REPORT_HAS_PID) && reports[j].pid == reports[i].ppid) {
                parent[i] = (long)j;
                break;
            }
        }
    }
    for (size_t k = 0; k < n; k++)
        if (parent[sorted[k]] < 0)
            place(t, sorted, parent, placed, n, sorted[k], 0, -1);
    /* What is left is in a cycle (pids reused): each becomes a root. */
    for (size_t k = 0; k < n; k++)
        if (!placed[sorted[k]])
            place(t, sorted, parent, placed, n, sorted[k], 0, -1);
    free(sorted);
    free(parent);
    free(placed);
    return 0;
}

static void free_tree(struct tree *t)
{
    free(t->order);
    free(t->depth);
    free(t->parent_pos);
}

/* The sums of the totals row; a figure no report has stays unknown. */
struct sums {
    int64_t live_bytes, live_count, peak_bytes, allocs, frees, rss, peak_rss;
    size_t with_total, with_process;
};

static void add_up(struct sums *s, const struct report *r)
{
    if (r->has & REPORT_HAS_TOTAL) {
        s->with_total++;
        s->live_bytes = report_add(s->live_bytes, r->total.live_bytes);
        s->live_count = report_add(s->live_count, r->total.live_count);
        s->peak_bytes = report_add(s->peak_bytes, r->total.peak_bytes);
        s->allocs = report_add(s->allocs, r->total.allocs);
        s->frees = report_add(s->frees, r->total.frees);
    }
    if (r->has & REPORT_HAS_PROCESS) {
        s->with_process++;
        s->rss = report_add(s->rss, r->process.rss_bytes);
        s->peak_rss = report_add(s->peak_rss, r->process.peak_rss_bytes);
    }
}

/* --- text ----------------------------------------------------------------- */

/* A scaled size in a 10-column cell, or "-" when unknown. */
static void cell_bytes(FILE *out, bool has, int64_t v, const struct report_scale *sc)
{
    char buf[40];
    if (has)
        snprintf(buf, sizeof buf, "%" PRId64 "%s", report_scaled(v, sc->bytes), sc->unit);
    else
        snprintf(buf, sizeof buf, "-");
    fprintf(out, " %10s", buf);
}

static void cell_count(FILE *out, bool has, int64_t v)
{
    if (has)
        fprintf(out, " %12" PRId64, v);
    else
        fprintf(out, " %12s", "-");
}

int report_tree_print_text(FILE *out, const struct report *reports, const char *const *files, size_t n,
                           const struct report_scale *sc)
{
    struct tree t;
    if (build_tree(&t, reports, files, n) < 0)
        return -ENOMEM;
    fprintf(out, "memtrail process tree: %zu report%s\n\n", n, n == 1 ? "" : "s");
    fprintf(out, "%7s %7s  %-14s %10s %10s %12s %10s %10s  %s\n", "PID", "PPID", "REASON", "LIVE", "PEAK",
            "ALLOCS", "RSS", "PEAK RSS", "COMMAND");
    struct sums s = {0};
    for (size_t pos = 0; pos < t.n; pos++) {
        const struct report *r = &reports[t.order[pos]];
        add_up(&s, r);
        char pid[24] = "?", ppid[24] = "?";
        if (r->has & REPORT_HAS_PID)
            snprintf(pid, sizeof pid, "%" PRId64, r->pid);
        if (r->has & REPORT_HAS_PPID)
            snprintf(ppid, sizeof ppid, "%" PRId64, r->ppid);
        fprintf(out, "%7s %7s  %-14s", pid, ppid, r->reason ? r->reason : "?");
        bool tot = r->has & REPORT_HAS_TOTAL, proc = r->has & REPORT_HAS_PROCESS;
        cell_bytes(out, tot, r->total.live_bytes, sc);
        cell_bytes(out, tot, r->total.peak_bytes, sc);
        cell_count(out, tot, r->total.allocs);
        cell_bytes(out, proc, r->process.rss_bytes, sc);
        cell_bytes(out, proc, r->process.peak_rss_bytes, sc);
        fputs("  ", out);
        for (size_t d = 1; d < t.depth[pos]; d++)
            fputs("   ", out);
        if (t.depth[pos])
            fputs("\\_ ", out);
        if (r->argc)
            report_print_cmdline(out, r);
        else if (r->exe)
            fputs(r->exe, out);
        else
            fputs(files[t.order[pos]], out);
        if (!r->complete)
            fprintf(out, "  (cut short after line %ld)", r->lines_read);
        fputc('\n', out);
    }
    char label[64];
    snprintf(label, sizeof label, "total: %zu process%s", n, n == 1 ? "" : "es");
    fprintf(out, "%-31s", label);
    cell_bytes(out, s.with_total, s.live_bytes, sc);
    cell_bytes(out, s.with_total, s.peak_bytes, sc);
    cell_count(out, s.with_total, s.allocs);
    cell_bytes(out, s.with_process, s.rss, sc);
    cell_bytes(out, s.with_process, s.peak_rss, sc);
    fputs("\n\n(LIVE, PEAK: the program's heap blocks (the total line of each report); the totals\n"
          "row adds up each process's own peak, which need not have been at the same time)\n", out);
    free_tree(&t);
    return ferror(out) ? -EIO : 0;
}

/* --- JSON ----------------------------------------------------------------- */

static void j_int(FILE *out, const char *key, bool has, int64_t v)
{
    if (has)
        fprintf(out, ", \"%s\": %" PRId64, key, v);
    else
        fprintf(out, ", \"%s\": null", key);
}

static void j_str(FILE *out, const char *key, const char *v)
{
    fprintf(out, ", \"%s\": ", key);
    report_json_string(out, v);
}

int report_tree_print_json(FILE *out, const struct report *reports, const char *const *files, size_t n)
{
    struct tree t;
    if (build_tree(&t, reports, files, n) < 0)
        return -ENOMEM;
    struct sums s = {0};
    fputs("{\n  \"processes\": [", out);
    for (size_t pos = 0; pos < t.n; pos++) {
        const struct report *r = &reports[t.order[pos]];
        add_up(&s, r);
        fputs(pos ? ",\n    {\"file\": " : "\n    {\"file\": ", out);
        report_json_string(out, files[t.order[pos]]);
        j_int(out, "pid", r->has & REPORT_HAS_PID, r->pid);
        j_int(out, "ppid", r->has & REPORT_HAS_PPID, r->ppid);
        j_int(out, "parent_index", t.parent_pos[pos] >= 0, t.parent_pos[pos]);
        fprintf(out, ", \"depth\": %zu", t.depth[pos]);
        j_str(out, "exe", r->exe);
        fputs(", \"cmdline\": ", out);
        report_json_cmdline(out, r);
        j_str(out, "reason", r->reason);
        j_int(out, "start_ns", r->has & REPORT_HAS_START, r->start_ns);
        j_int(out, "end_ns", r->has & REPORT_HAS_END_NS, r->end_ns);
        fprintf(out, ", \"complete\": %s", r->complete ? "true" : "false");
        bool tot = r->has & REPORT_HAS_TOTAL, proc = r->has & REPORT_HAS_PROCESS;
        j_int(out, "live_bytes", tot, r->total.live_bytes);
        j_int(out, "live_count", tot, r->total.live_count);
        j_int(out, "peak_bytes", tot, r->total.peak_bytes);
        j_int(out, "allocs", tot, r->total.allocs);
        j_int(out, "frees", tot, r->total.frees);
        j_int(out, "rss_bytes", proc, r->process.rss_bytes);
        j_int(out, "peak_rss_bytes", proc, r->process.peak_rss_bytes);
        fputc('}', out);
    }
    fputs(t.n ? "\n  ],\n" : "],\n", out);
    fprintf(out, "  \"total\": {\"processes\": %zu", n);
    j_int(out, "live_bytes", s.with_total, s.live_bytes);
    j_int(out, "live_count", s.with_total, s.live_count);
    j_int(out, "peak_bytes", s.with_total, s.peak_bytes);
    j_int(out, "allocs", s.with_total, s.allocs);
    j_int(out, "frees", s.with_total, s.frees);
    j_int(out, "rss_bytes", s.with_process, s.rss);
    j_int(out, "peak_rss_bytes", s.with_process, s.peak_rss);
    fputs("}\n}\n", out);
    free_tree(&t);
    return ferror(out) ? -EIO : 0;
}

/* report_tree.c — the summary of a process tree: every traced process
 * writes its own report (memtrail.<pid>.mtr), and `memtrail report DIR` or
 * `memtrail report FILE FILE...` shows one row per report, each child
 * indented under its parent when the parent's report is in the set, and a
 * totals row. Text and JSON (docs/cli.md). */
#include "report/report.h"

#include "common/json_out.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The reports in display order: depth-first from the roots, siblings by
 * start time, then pid, then file name. */
struct tree {
    size_t *order;    /* indices into reports, display order */
    size_t *depth;    /* per display position */
    long *parent_pos; /* per display position: the parent's position, or -1 */
    size_t n;
};

static int64_t start_of(const struct report *r)
{
    return (r->has & REPORT_HAS_START) ? r->start_ns : INT64_MAX;
}

struct sort_ctx {
    const struct report *reports;
    const char *const *files;
};

static int by_display(const void *pa, const void *pb, void *arg)
{
    const struct sort_ctx *ctx = arg;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    const struct report *x = &ctx->reports[a], *y = &ctx->reports[b];
    if (start_of(x) != start_of(y))
        return start_of(x) < start_of(y) ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    int c = strcmp(ctx->files[a], ctx->files[b]);
    return c ? c : (a > b) - (a < b);
}

/* A report with a pid, and its position in display order. */
struct by_pid {
    int64_t pid;
    size_t pos;
};

static int cmp_pid(const void *pa, const void *pb)
{
    const struct by_pid *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* The position in `v` of the first entry with this pid, or n. */
static size_t first_of_pid(const struct by_pid *v, size_t n, int64_t pid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].pid == pid ? lo : n;
}

/* The working arrays of build_tree. */
struct work {
    size_t *sorted; /* report indices in display order */
    long *parent;   /* per report: its parent report, or -1 */
    struct by_pid *pids;
    size_t *child_start; /* per report: its children in `children`, in display order */
    size_t *children;
    size_t *stack; /* depth-first walk: report, and next child to look at */
    size_t *next_child;
    long *pos_of; /* per report: its display position once placed, else -1 */
};

static void work_free(struct work *w)
{
    free(w->sorted);
    free(w->parent);
    free(w->pids);
    free(w->child_start);
    free(w->children);
    free(w->stack);
    free(w->next_child);
    free(w->pos_of);
}

/* Appends report `root` and, below it, its descendants not yet placed
 * (children in display order), without recursion: a chain of processes
 * may be as long as the reports are many. */
static void place(struct tree *t, struct work *w, size_t root, size_t depth0, long parent_pos)
{
    size_t sp = 0;
    w->stack[sp++] = root;
    w->next_child[root] = w->child_start[root];
    w->pos_of[root] = (long)t->n;
    t->order[t->n] = root;
    t->depth[t->n] = depth0;
    t->parent_pos[t->n++] = parent_pos;
    while (sp) {
        size_t i = w->stack[sp - 1];
        if (w->next_child[i] == w->child_start[i + 1]) {
            sp--;
            continue;
        }
        size_t c = w->children[w->next_child[i]++];
        if (w->pos_of[c] >= 0)
            continue;
        w->pos_of[c] = (long)t->n;
        t->order[t->n] = c;
        t->depth[t->n] = depth0 + sp;
        t->parent_pos[t->n++] = w->pos_of[i];
        w->next_child[c] = w->child_start[c];
        w->stack[sp++] = c;
    }
}

static int build_tree(struct tree *t, const struct report *reports, const char *const *files, size_t n)
{
    struct sort_ctx ctx = {reports, files};
    struct work w = {0};
    w.sorted = malloc((n + 1) * sizeof *w.sorted);
    w.parent = malloc((n + 1) * sizeof *w.parent);
    w.pids = malloc((n + 1) * sizeof *w.pids);
    w.child_start = calloc(n + 2, sizeof *w.child_start);
    w.children = malloc((n + 1) * sizeof *w.children);
    w.stack = malloc((n + 1) * sizeof *w.stack);
    w.next_child = malloc((n + 1) * sizeof *w.next_child);
    w.pos_of = malloc((n + 1) * sizeof *w.pos_of);
    t->order = malloc((n + 1) * sizeof *t->order);
    t->depth = malloc((n + 1) * sizeof *t->depth);
    t->parent_pos = malloc((n + 1) * sizeof *t->parent_pos);
    t->n = 0;
    if (!w.sorted || !w.parent || !w.pids || !w.child_start || !w.children || !w.stack || !w.next_child ||
        !w.pos_of || !t->order || !t->depth || !t->parent_pos) {
        work_free(&w);
        free(t->order);
        free(t->depth);
        free(t->parent_pos);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        w.sorted[i] = i;
    qsort_r(w.sorted, n, sizeof *w.sorted, by_display, &ctx);

    /* The parent: the first report (in display order) of the pid that is
     * this one's ppid. Several reports may share a pid (a snapshot and the
     * exit report of one process). */
    size_t np = 0;
    for (size_t k = 0; k < n; k++)
        if (reports[w.sorted[k]].has & REPORT_HAS_PID)
            w.pids[np++] = (struct by_pid){reports[w.sorted[k]].pid, k};
    qsort(w.pids, np, sizeof *w.pids, cmp_pid);
    for (size_t i = 0; i < n; i++) {
        w.parent[i] = -1;
        w.pos_of[i] = -1;
        if (!(reports[i].has & REPORT_HAS_PPID))
            continue;
        size_t f = first_of_pid(w.pids, np, reports[i].ppid);
        if (f < np && w.sorted[w.pids[f].pos] == i)
            f++; /* not its own parent: the next report of that pid, if any */
        if (f < np && w.pids[f].pid == reports[i].ppid)
            w.parent[i] = (long)w.sorted[w.pids[f].pos];
    }
    /* Each report's children, in display order (counted, then placed). */
    for (size_t i = 0; i < n; i++)
        if (w.parent[i] >= 0)
            w.child_start[w.parent[i] + 1]++;
    for (size_t i = 0; i < n; i++)
        w.child_start[i + 1] += w.child_start[i];
    w.child_start[n + 1] = w.child_start[n];
    for (size_t i = 0; i < n; i++)
        w.next_child[i] = w.child_start[i];
    for (size_t k = 0; k < n; k++) {
        size_t c = w.sorted[k];
        if (w.parent[c] >= 0)
            w.children[w.next_child[w.parent[c]]++] = c;
    }
    for (size_t k = 0; k < n; k++)
        if (w.parent[w.sorted[k]] < 0)
            place(t, &w, w.sorted[k], 0, -1);
    /* What is left is in a cycle (pids reused): each becomes a root. */
    for (size_t k = 0; k < n; k++)
        if (w.pos_of[w.sorted[k]] < 0)
            place(t, &w, w.sorted[k], 0, -1);
    work_free(&w);
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

/* A size in a 10-column cell, or "-" when unknown. */
static void cell_bytes(FILE *out, bool has, int64_t v, const struct report_scale *sc)
{
    char buf[40];
    if (has)
        snprintf(buf, sizeof buf, "%s", report_size(v, sc));
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
          "row adds up each process's own peak, which need not have been at the same time)\n",
          out);
    free_tree(&t);
    return ferror(out) ? -EIO : 0;
}

/* --- JSON ----------------------------------------------------------------- */

int report_tree_print_json(FILE *out, const struct report *reports, const char *const *files, size_t n)
{
    struct tree t;
    if (build_tree(&t, reports, files, n) < 0)
        return -ENOMEM;
    struct sums s = {0};
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    mt_json_key(&j, "processes");
    mt_json_array_begin(&j);
    for (size_t pos = 0; pos < t.n; pos++) {
        const struct report *r = &reports[t.order[pos]];
        add_up(&s, r);
        mt_json_oneline(&j);
        mt_json_object_begin(&j);
        mt_json_kstr(&j, "file", files[t.order[pos]]);
        mt_json_ki64_or_null(&j, "pid", r->has & REPORT_HAS_PID, r->pid);
        mt_json_ki64_or_null(&j, "ppid", r->has & REPORT_HAS_PPID, r->ppid);
        mt_json_ki64_or_null(&j, "parent_index", t.parent_pos[pos] >= 0, t.parent_pos[pos]);
        mt_json_ku64(&j, "depth", t.depth[pos]);
        mt_json_kstr(&j, "exe", r->exe);
        mt_json_key(&j, "cmdline");
        report_json_cmdline(&j, r);
        mt_json_kstr(&j, "reason", r->reason);
        mt_json_ki64_or_null(&j, "start_ns", r->has & REPORT_HAS_START, r->start_ns);
        mt_json_ki64_or_null(&j, "end_ns", r->has & REPORT_HAS_END_NS, r->end_ns);
        mt_json_kbool(&j, "complete", r->complete);
        bool tot = r->has & REPORT_HAS_TOTAL, proc = r->has & REPORT_HAS_PROCESS;
        mt_json_ki64_or_null(&j, "live_bytes", tot, r->total.live_bytes);
        mt_json_ki64_or_null(&j, "live_count", tot, r->total.live_count);
        mt_json_ki64_or_null(&j, "peak_bytes", tot, r->total.peak_bytes);
        mt_json_ki64_or_null(&j, "allocs", tot, r->total.allocs);
        mt_json_ki64_or_null(&j, "frees", tot, r->total.frees);
        mt_json_ki64_or_null(&j, "rss_bytes", proc, r->process.rss_bytes);
        mt_json_ki64_or_null(&j, "peak_rss_bytes", proc, r->process.peak_rss_bytes);
        mt_json_object_end(&j);
    }
    mt_json_array_end(&j);
    mt_json_key(&j, "total");
    mt_json_oneline(&j);
    mt_json_object_begin(&j);
    mt_json_ku64(&j, "processes", n);
    mt_json_ki64_or_null(&j, "live_bytes", s.with_total, s.live_bytes);
    mt_json_ki64_or_null(&j, "live_count", s.with_total, s.live_count);
    mt_json_ki64_or_null(&j, "peak_bytes", s.with_total, s.peak_bytes);
    mt_json_ki64_or_null(&j, "allocs", s.with_total, s.allocs);
    mt_json_ki64_or_null(&j, "frees", s.with_total, s.frees);
    mt_json_ki64_or_null(&j, "rss_bytes", s.with_process, s.rss);
    mt_json_ki64_or_null(&j, "peak_rss_bytes", s.with_process, s.peak_rss);
    mt_json_object_end(&j);
    free_tree(&t);
    return mt_json_document_end(&j);
}

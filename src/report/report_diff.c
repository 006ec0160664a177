/* report_diff.c — the difference between two summary reports, like HotSpot's
 * `jcmd PID VM.native_memory summary.diff`: categories matched by name
 * (one present on one side only is "new" or "gone"), each counter and
 * virtual memory field shown as its new value and its change, then the
 * total's and the process's. Used by `memtrail diff BASE NEW` and by the
 * live `memtrail query PID diff`. JSON keys: docs/json.md. */
#include "report/report.h"
#include "common/units.h"

#include "common/json_out.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* NMT's layout, as in the summary: "-" and the name right-aligned in 26
 * columns, details continued under the opening parenthesis. */
#define NAME_COLUMN 26
#define CONTINUE "                            "

/* One category of the diff: present in base, in cur, or in both. */
struct row {
    const struct report_category *base, *cur;
};

static const struct report_category *row_any(const struct row *w)
{
    return w->cur ? w->cur : w->base;
}

/* The figures a report has: address-space ones (a category line with VM
 * fields), memtrail's own overhead (every report the agent writes lists
 * it; a trace has none: memtrail does not trace itself). */
struct has {
    bool vm, overhead;
};

static struct has has_of(const struct report *r)
{
    struct has h = {.vm = r->has & REPORT_HAS_VM};
    for (size_t i = 0; i < r->ncategories && !h.overhead; i++)
        h.overhead = report_category_is(&r->categories[i], "overhead");
    return h;
}

/* A category on one side only because the other report has no figures of
 * its kind (address space, memtrail's overhead: a trace, say): it did not
 * come or go, it cannot be compared. */
static bool not_comparable(const struct row *w, struct has b, struct has c)
{
    if (w->base && w->cur)
        return false;
    const struct report_category *k = row_any(w);
    return (report_category_is(k, "vm") && b.vm != c.vm) ||
           (report_category_is(k, "overhead") && b.overhead != c.overhead);
}

static const char *row_status(const struct row *w, struct has b, struct has c)
{
    return not_comparable(w, b, c) ? "not_comparable" : !w->base ? "new" : !w->cur ? "gone" : "both";
}

static const struct report_counts zero_counts;
static const struct report_vm zero_vm;

static const struct report_counts *counts_of(const struct report_category *c)
{
    return c ? &c->n : &zero_counts;
}

static const struct report_vm *vm_of(const struct report_category *c)
{
    return c ? &c->vm : &zero_vm;
}

/* A report's categories sorted by name (ties by position), for lookups in
 * O(log n): reports may hold very many categories. */
static int by_name(const void *pa, const void *pb, void *ctx)
{
    const struct report *r = ctx;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    int c = strcmp(r->categories[a].name, r->categories[b].name);
    return c ? c : (a > b) - (a < b);
}

static size_t *sorted_by_name(const struct report *r)
{
    size_t *v = malloc((r->ncategories + 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < r->ncategories; i++)
        v[i] = i;
    qsort_r(v, r->ncategories, sizeof *v, by_name, (void *)r);
    return v;
}

/* The first category of r (in file order) named `name`, or NULL. */
static const struct report_category *find_category(const struct report *r, const size_t *sorted,
                                                   const char *name)
{
    size_t lo = 0, hi = r->ncategories;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(r->categories[sorted[mid]].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < r->ncategories && strcmp(r->categories[sorted[lo]].name, name) == 0)
        return &r->categories[sorted[lo]];
    return NULL;
}

/* Every category of cur in file order, then those only in base. The
 * caller frees *rows. */
static int match_rows(const struct report *base, const struct report *cur, struct row **rows, size_t *n)
{
    *n = 0;
    *rows = malloc((base->ncategories + cur->ncategories + 1) * sizeof **rows);
    size_t *sb = sorted_by_name(base), *sc = sorted_by_name(cur);
    if (!*rows || !sb || !sc) {
        free(*rows);
        *rows = NULL;
        free(sb);
        free(sc);
        return -ENOMEM;
    }
    for (size_t i = 0; i < cur->ncategories; i++)
        (*rows)[(*n)++] = (struct row){find_category(base, sb, cur->categories[i].name), &cur->categories[i]};
    for (size_t i = 0; i < base->ncategories; i++)
        if (!find_category(cur, sc, base->categories[i].name))
            (*rows)[(*n)++] = (struct row){&base->categories[i], NULL};
    free(sb);
    free(sc);
    return 0;
}

/* --- text ----------------------------------------------------------------- */

/* "key=VALUE<unit>", then " +DELTA<unit>" when it changed. */
static void t_bytes(FILE *out, const char *key, int64_t cur, int64_t base, bool delta,
                    const struct report_scale *sc)
{
    fprintf(out, "%s%s", key, report_size(cur, sc));
    int64_t d = report_sub(cur, base);
    if (delta && d)
        fprintf(out, " %s%s", d > 0 ? "+" : "", report_size(d, sc));
}

/* "key=VALUE", then " +DELTA" when it changed. */
static void t_count(FILE *out, const char *key, int64_t cur, int64_t base, bool delta)
{
    fprintf(out, "%s%" PRId64, key, cur);
    if (delta && cur != base)
        fprintf(out, " %+" PRId64, report_sub(cur, base));
}

/* A row's position in the text: the overhead last, then by how much it
 * changed (committed + live bytes), then by its size now, then by name. */
static int64_t row_footprint(const struct report_category *c)
{
    return c ? report_add(c->vm.committed, c->n.live_bytes) : 0;
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? (v == INT64_MIN ? INT64_MAX : -v) : v;
}

static int by_change_desc(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    bool ox = report_category_is(row_any(x), "overhead"), oy = report_category_is(row_any(y), "overhead");
    if (ox != oy)
        return ox ? 1 : -1;
    int64_t dx = abs64(report_sub(row_footprint(x->cur), row_footprint(x->base)));
    int64_t dy = abs64(report_sub(row_footprint(y->cur), row_footprint(y->base)));
    if (dx != dy)
        return dx > dy ? -1 : 1;
    int64_t fx = row_footprint(x->cur), fy = row_footprint(y->cur);
    if (fx != fy)
        return fx > fy ? -1 : 1;
    return strcmp(row_any(x)->name, row_any(y)->name);
}

static bool all_zero(const struct report_category *c)
{
    if (!c)
        return true;
    const struct report_counts *n = &c->n;
    const struct report_vm *v = &c->vm;
    return !n->live_bytes && !n->live_count && !n->peak_bytes && !n->allocs && !n->frees && !n->reallocs &&
           !v->reserved && !v->committed && !v->resident && !v->mappings;
}

/* hb, hc: the figures the base and the new report have. */
static void text_row(FILE *out, const struct row *w, struct has hb, struct has hc,
                     const struct report_scale *sc)
{
    const struct report_category *c = row_any(w);
    const struct report_counts *nb = counts_of(w->base), *nc = counts_of(w->cur);
    const struct report_vm *vb = vm_of(w->base), *vc = vm_of(w->cur);
    bool vm = hb.vm && hc.vm;

    /* no figures of the other side to set against: none shown, not zeros */
    if (not_comparable(w, hb, hc)) {
        bool overhead = report_category_is(c, "overhead");
        fprintf(out, "-%*s (not comparable: the %s report has no %s)\n\n", NAME_COLUMN, c->name,
                (overhead ? hb.overhead : hb.vm) ? "new" : "base",
                overhead ? "overhead figures" : "address-space figures");
        return;
    }
    fprintf(out, "-%*s (", NAME_COLUMN, c->name);
    if (vm) {
        t_bytes(out, "reserved=", vc->reserved, vb->reserved, true, sc);
        t_bytes(out, ", committed=", vc->committed, vb->committed, true, sc);
        t_bytes(out, ", resident=", vc->resident, vb->resident, true, sc);
        t_count(out, ", mappings=", vc->mappings, vb->mappings, true);
    } else { /* reports without VM fields: reserved = committed = live bytes */
        t_bytes(out, "reserved=", nc->live_bytes, nb->live_bytes, true, sc);
        t_bytes(out, ", committed=", nc->live_bytes, nb->live_bytes, true, sc);
    }
    fputs(")\n", out);
    if (!w->base)
        fputs(CONTINUE "(new: not in the base report)\n", out);
    else if (!w->cur)
        fputs(CONTINUE "(gone: not in the new report)\n", out);
    if (report_category_is(c, "overhead"))
        fputs(CONTINUE "(memtrail's own overhead)\n", out);
    if (!report_category_is(c, "vm")) {
        fputs(CONTINUE "(", out);
        t_bytes(out, "malloc=", nc->live_bytes, nb->live_bytes, true, sc);
        t_count(out, " #", nc->live_count, nb->live_count, true);
        t_bytes(out, ") (peak=", nc->peak_bytes, nb->peak_bytes, true, sc);
        fputs(")\n" CONTINUE "(", out);
        t_count(out, "allocs=", nc->allocs, nb->allocs, true);
        t_count(out, " frees=", nc->frees, nb->frees, true);
        if (nc->reallocs || nb->reallocs)
            t_count(out, " reallocs=", nc->reallocs, nb->reallocs, true);
        fputs(")\n", out);
    }
    fputc('\n', out);
}

/* "pid N, CMDLINE (written at exit, after 1.000s)" */
static void text_side(FILE *out, const char *label, const struct report *r)
{
    fputs(label, out);
    report_print_who(out, r);
    const char *sep = " (";
    if (r->reason) {
        fputs(sep, out);
        report_print_reason(out, r->reason);
        sep = ", ";
    }
    if ((r->has & REPORT_HAS_START) && (r->has & REPORT_HAS_END_NS) && r->end_ns >= r->start_ns) {
        char d[MT_UNITS_MAX];
        fprintf(out, "%safter %s", sep,
                mt_duration(d, sizeof d, (uint64_t)r->end_ns - (uint64_t)r->start_ns));
        sep = ", ";
    }
    if (!r->complete) {
        fprintf(out, "%scut short after line %ld", sep, r->lines_read);
        sep = ", ";
    }
    fputs(sep[0] == ',' ? ")\n" : "\n", out);
}

static void text_total(FILE *out, const struct report *base, const struct report *cur, bool vm,
                       const struct report_scale *sc)
{
    const struct report_counts *tb = &base->total, *tc = &cur->total;
    bool have = (base->has & REPORT_HAS_TOTAL) && (cur->has & REPORT_HAS_TOTAL);
    if (vm) {
        struct report_vm sb, sc_;
        report_vm_total(base, &sb);
        report_vm_total(cur, &sc_);
        fputs("Total: ", out);
        t_bytes(out, "reserved=", sc_.reserved, sb.reserved, true, sc);
        t_bytes(out, ", committed=", sc_.committed, sb.committed, true, sc);
        t_bytes(out, ", resident=", sc_.resident, sb.resident, true, sc);
        fputs("\n       malloc: ", out);
    } else {
        fputs("Total: ", out);
    }
    if (!have) {
        fprintf(out, "not in the %s report (the file was cut short before it)\n\n",
                !(base->has & REPORT_HAS_TOTAL) ? "base" : "new");
        return;
    }
    t_bytes(out, "live=", tc->live_bytes, tb->live_bytes, true, sc);
    t_count(out, " (", tc->live_count, tb->live_count, true);
    t_bytes(out, " blocks), peak=", tc->peak_bytes, tb->peak_bytes, true, sc);
    t_count(out, ", allocs=", tc->allocs, tb->allocs, true);
    t_count(out, ", frees=", tc->frees, tb->frees, true);
    t_count(out, ", reallocs=", tc->reallocs, tb->reallocs, true);
    fputs("\n\n", out);
}

static void text_process(FILE *out, const struct report *base, const struct report *cur,
                         const struct report_scale *sc)
{
    bool hb = base->has & REPORT_HAS_PROCESS, hc = cur->has & REPORT_HAS_PROCESS;
    if (!hb && !hc)
        return;
    if (!hc) {
        fputs("Process: not in the new report\n\n", out);
        return;
    }
    const struct report_process *pb = &base->process, *pc = &cur->process;
    fputs("Process: ", out);
    t_bytes(out, "rss=", pc->rss_bytes, pb->rss_bytes, hb, sc);
    t_bytes(out, ", peak rss=", pc->peak_rss_bytes, pb->peak_rss_bytes, hb, sc);
    t_bytes(out, " (reserved=", pc->reserved, pb->reserved, hb, sc);
    t_bytes(out, ", committed=", pc->committed, pb->committed, hb, sc);
    t_bytes(out, ", resident=", pc->resident, pb->resident, hb, sc);
    fputs(")\n", out);
    if (!hb)
        fputs("         (the base report has no process line: no changes shown)\n", out);
    if (pc->rss_bytes > 0) {
        int64_t e = report_explained(cur);
        fprintf(out, "         the categories explain %s of it (%.1f%%; 'other' not counted)\n",
                report_size(e, sc), 100.0 * (double)e / (double)pc->rss_bytes);
    }
    fputc('\n', out);
}

/* Sampled reports' sites are estimates: say so, and warn when the two
 * sides' sites are not estimates of the same kind (one exact, or two
 * rates: the errors differ). The categories are exact either way. */
static void text_sampling(FILE *out, const struct report *base, const struct report *cur)
{
    bool sb = report_is_sampled(base), sc = report_is_sampled(cur);
    char rb[MT_UNITS_MAX], rc[MT_UNITS_MAX];
    if (sb)
        mt_size(rb, sizeof rb, base->sample_rate);
    if (sc)
        mt_size(rc, sizeof rc, cur->sample_rate);
    if (sb && sc && base->sample_rate == cur->sample_rate)
        fprintf(out,
                "Sampled: both reports, one sample per %s allocated on average; site figures are estimates "
                "(the category totals are exact)\n",
                rb);
    else if (sb && sc)
        fprintf(out,
                "Warning: the reports are sampled at different rates (base one sample per %s, new one per "
                "%s): site figures are estimates with different errors, not directly comparable\n",
                rb, rc);
    else if (sb || sc)
        fprintf(out,
                "Warning: the %s report is sampled (one sample per %s) and the %s one exact: site figures "
                "are not directly comparable (the category totals are exact in both)\n",
                sb ? "base" : "new", sb ? rb : rc, sb ? "new" : "base");
}

int report_diff_print_text(FILE *out, const struct report *base, const struct report *cur,
                           const struct report_scale *scale)
{
    struct row *rows;
    size_t n;
    if (match_rows(base, cur, &rows, &n) < 0)
        return -ENOMEM;
    /* Address space figures only when both sides have them. */
    struct has figs_b = has_of(base), figs_c = has_of(cur);
    bool hb = figs_b.vm, hc = figs_c.vm, vm = hb && hc;

    fputs("memtrail native memory diff\n", out);
    text_side(out, "base: ", base);
    text_side(out, "new:  ", cur);
    if ((base->has & REPORT_HAS_END_NS) && (cur->has & REPORT_HAS_END_NS) && cur->end_ns >= base->end_ns) {
        char d[MT_UNITS_MAX];
        fprintf(out, "(new written %s after base)\n",
                mt_duration(d, sizeof d, (uint64_t)cur->end_ns - (uint64_t)base->end_ns));
    }
    if (hb != hc)
        fprintf(out, "(the %s report has no virtual memory fields: only heap figures are compared)\n",
                hb ? "new" : "base");
    text_sampling(out, base, cur);
    fputc('\n', out);
    text_total(out, base, cur, vm, scale);

    qsort(rows, n, sizeof *rows, by_change_desc);
    for (size_t i = 0; i < n; i++) {
        const struct row *w = &rows[i];
        if (all_zero(w->base) && all_zero(w->cur) && !report_category_is(row_any(w), "overhead"))
            continue; /* nothing on either side: as the summary, left out of the text */
        text_row(out, w, figs_b, figs_c, scale);
    }
    free(rows);
    text_process(out, base, cur, scale);

    const struct report_errors *eb = &base->errors, *ec = &cur->errors;
    if (ec->double_free || ec->bad_canary || ec->foreign_free || eb->double_free || eb->bad_canary ||
        eb->foreign_free) {
        fputs("Errors detected by memtrail: ", out);
        t_count(out, "double_free=", ec->double_free, eb->double_free, true);
        t_count(out, ", bad_canary=", ec->bad_canary, eb->bad_canary, true);
        t_count(out, ", foreign_free=", ec->foreign_free, eb->foreign_free, true);
        fputs("\n\n", out);
    }
    if (!base->complete)
        fprintf(out,
                "Incomplete: the base report was cut short after line %ld; "
                "the numbers above are what it held.\n",
                base->lines_read);
    if (!cur->complete)
        fprintf(out,
                "Incomplete: the new report was cut short after line %ld; "
                "the numbers above are what it held.\n",
                cur->lines_read);
    return ferror(out) ? -EIO : 0;
}

/* --- JSON ----------------------------------------------------------------- */

/* `"key": CUR, "key_delta": CUR-BASE`, each null when its side is unknown. */
static void j_pair(mt_json *j, const char *key, int64_t cur, bool has_cur, int64_t base, bool has_base)
{
    char delta[64];
    snprintf(delta, sizeof delta, "%s_delta", key);
    mt_json_ki64_or_null(j, key, has_cur, cur);
    mt_json_ki64_or_null(j, delta, has_cur && has_base, report_sub(cur, base));
}

static void j_counts(mt_json *j, const struct report_counts *c, bool hc, const struct report_counts *b,
                     bool hb)
{
    j_pair(j, "live_bytes", c->live_bytes, hc, b->live_bytes, hb);
    j_pair(j, "live_count", c->live_count, hc, b->live_count, hb);
    j_pair(j, "peak_bytes", c->peak_bytes, hc, b->peak_bytes, hb);
    j_pair(j, "allocs", c->allocs, hc, b->allocs, hb);
    j_pair(j, "frees", c->frees, hc, b->frees, hb);
    j_pair(j, "reallocs", c->reallocs, hc, b->reallocs, hb);
}

static void j_vm(mt_json *j, const struct report_vm *c, bool hc, const struct report_vm *b, bool hb,
                 bool mappings)
{
    j_pair(j, "reserved_bytes", c->reserved, hc, b->reserved, hb);
    j_pair(j, "committed_bytes", c->committed, hc, b->committed, hb);
    j_pair(j, "resident_bytes", c->resident, hc, b->resident, hb);
    if (mappings)
        j_pair(j, "mappings", c->mappings, hc, b->mappings, hb);
}

/* Which report a side is: enough to tell two builds or two moments apart. */
static void j_side(mt_json *j, const char *key, const struct report *r)
{
    mt_json_key(j, key);
    mt_json_oneline(j);
    mt_json_object_begin(j);
    mt_json_ki64_or_null(j, "pid", r->has & REPORT_HAS_PID, r->pid);
    mt_json_ki64_or_null(j, "ppid", r->has & REPORT_HAS_PPID, r->ppid);
    mt_json_kstr(j, "exe", r->exe);
    mt_json_key(j, "cmdline");
    report_json_cmdline(j, r);
    mt_json_kstr(j, "reason", r->reason);
    mt_json_ki64_or_null(j, "start_ns", r->has & REPORT_HAS_START, r->start_ns);
    mt_json_ki64_or_null(j, "end_ns", r->has & REPORT_HAS_END_NS, r->end_ns);
    mt_json_kbool(j, "complete", r->complete);
    report_json_sampling(j, r);
    mt_json_object_end(j);
}

int report_json_diff(mt_json *j, const struct report *base, const struct report *cur)
{
    struct row *rows;
    size_t n;
    if (match_rows(base, cur, &rows, &n) < 0)
        return -ENOMEM;
    struct has figs_b = has_of(base), figs_c = has_of(cur);
    bool vb = figs_b.vm, vc = figs_c.vm;

    j_side(j, "base", base);
    j_side(j, "new", cur);

    mt_json_key(j, "categories");
    mt_json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
        const struct row *w = &rows[i];
        const struct report_category *c = row_any(w);
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_kstr(j, "name", c->name);
        mt_json_kstr(j, "kind", c->kind);
        mt_json_kstr(j, "status", row_status(w, figs_b, figs_c));
        /* A category absent on one side counts as zeros there, unless that
         * side has no figures of its kind: null there, and no change. */
        bool nc = not_comparable(w, figs_b, figs_c);
        j_counts(j, counts_of(w->cur), !nc || w->cur, counts_of(w->base), !nc || w->base);
        j_vm(j, vm_of(w->cur), vc, vm_of(w->base), vb, true);
        mt_json_object_end(j);
    }
    free(rows);
    mt_json_array_end(j);

    bool tb = base->has & REPORT_HAS_TOTAL, tc = cur->has & REPORT_HAS_TOTAL;
    mt_json_key(j, "total");
    if (tc) {
        struct report_vm sb, sc;
        report_vm_total(base, &sb);
        report_vm_total(cur, &sc);
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_kbool(j, "present_in_base", tb);
        j_counts(j, &cur->total, true, &base->total, tb);
        j_vm(j, &sc, vc, &sb, vb, false);
        mt_json_object_end(j);
    } else {
        mt_json_null(j);
    }

    bool pb = base->has & REPORT_HAS_PROCESS, pc = cur->has & REPORT_HAS_PROCESS;
    mt_json_key(j, "process");
    if (pc) {
        const struct report_process *b = &base->process, *c = &cur->process;
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_kbool(j, "present_in_base", pb);
        j_pair(j, "rss_bytes", c->rss_bytes, true, b->rss_bytes, pb);
        j_pair(j, "peak_rss_bytes", c->peak_rss_bytes, true, b->peak_rss_bytes, pb);
        j_pair(j, "reserved_bytes", c->reserved, true, b->reserved, pb);
        j_pair(j, "committed_bytes", c->committed, true, b->committed, pb);
        j_pair(j, "resident_bytes", c->resident, true, b->resident, pb);
        j_pair(j, "explained_bytes", report_explained(cur), true, report_explained(base), pb);
        mt_json_object_end(j);
    } else {
        mt_json_null(j);
    }

    const struct report_errors *eb = &base->errors, *ec = &cur->errors;
    bool hb = base->has & REPORT_HAS_ERRORS, hc = cur->has & REPORT_HAS_ERRORS;
    mt_json_key(j, "errors");
    if (hc) {
        mt_json_oneline(j);
        mt_json_object_begin(j);
        mt_json_kbool(j, "present_in_base", hb);
        j_pair(j, "double_free", ec->double_free, true, eb->double_free, hb);
        j_pair(j, "bad_canary", ec->bad_canary, true, eb->bad_canary, hb);
        j_pair(j, "foreign_free", ec->foreign_free, true, eb->foreign_free, hb);
        mt_json_object_end(j);
    } else {
        mt_json_null(j);
    }
    return 0;
}

int report_diff_print_json(FILE *out, const struct report *base, const struct report *cur)
{
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    int rc = report_json_diff(&j, base, cur);
    if (rc < 0)
        return rc;
    return mt_json_document_end(&j);
}

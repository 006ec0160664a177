/* report_pages.c — the report JSON's "page_data": the model's page
 * references and the system view's spans, each grouped by what a viewport
 * needs of them (process, category, times; zero page), with their page
 * counts. From these alone every total, process and category figure of any
 * viewport follows (report_view.c's rules), so `memtrail html` recomputes a
 * viewport the user drags in the page from the report's own data.
 *
 * Bounded: more than RS_PAGE_DATA_MAX groups of either kind give null (the
 * page then shows the report's viewport only). */
#include "refset/report_print.h"
#include "common/json_out.h"

#include <errno.h>
#include <stdlib.h>

#define RS_PAGE_DATA_MAX 200000

struct group {
    int64_t a, b; /* t_ref, t_rel (a span: start, end) */
    uint32_t proc;
    uint8_t cat, zero;
    uint64_t pages;
};

static int by_key(const void *pa, const void *pb)
{
    const struct group *x = pa, *y = pb;
    if (x->proc != y->proc)
        return x->proc < y->proc ? -1 : 1;
    if (x->cat != y->cat)
        return x->cat < y->cat ? -1 : 1;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return (x->zero > y->zero) - (x->zero < y->zero);
}

/* Sorts g and merges equal keys; the number of groups left. */
static size_t merge(struct group *g, size_t n)
{
    if (n == 0)
        return 0;
    qsort(g, n, sizeof *g, by_key);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (by_key(&g[k], &g[i]) == 0)
            g[k].pages += g[i].pages;
        else
            g[++k] = g[i];
    }
    return k + 1;
}

static void json_time(mt_json *j, int64_t t)
{
    if (t == RS_T_BEFORE || t == RS_T_NEVER)
        mt_json_null(j);
    else
        mt_json_i64(j, t);
}

/* One array of groups, [process, category, a, b, (zero,) pages] each. */
static void json_groups(mt_json *j, const char *key, const struct group *g, size_t n, bool zero)
{
    mt_json_key(j, key);
    if (n > RS_PAGE_DATA_MAX) {
        mt_json_null(j);
        return;
    }
    mt_json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
        mt_json_oneline(j);
        mt_json_array_begin(j);
        mt_json_u64(j, g[i].proc);
        mt_json_u64(j, g[i].cat);
        json_time(j, g[i].a);
        json_time(j, g[i].b);
        if (zero)
            mt_json_u64(j, g[i].zero);
        mt_json_u64(j, g[i].pages);
        mt_json_array_end(j);
    }
    mt_json_array_end(j);
}

int rs_print_page_data(mt_json *j, const struct rs_model *m)
{
    size_t n = m->nrefs > m->nspans ? m->nrefs : m->nspans;
    struct group *g = malloc((n ? n : 1) * sizeof *g);
    if (!g)
        return -ENOMEM;
    mt_json_key(j, "page_data");
    mt_json_object_begin(j);
    for (size_t i = 0; i < m->nrefs; i++) {
        const struct rs_pref *r = &m->refs[i];
        g[i] = (struct group){.a = r->t_ref,
                              .b = r->t_rel,
                              .proc = r->proc,
                              .cat = r->cat,
                              .zero = r->id_kind == RS_ID_ZERO,
                              .pages = 1};
    }
    json_groups(j, "references", g, merge(g, m->nrefs), true);
    for (size_t i = 0; i < m->nspans; i++) {
        const struct rs_span *sp = &m->spans[i];
        const struct rs_pref *r = &m->refs[sp->ref];
        g[i] = (struct group){.a = sp->start, .b = sp->end, .proc = r->proc, .cat = r->cat, .pages = 1};
    }
    json_groups(j, "spans", g, merge(g, m->nspans), false);
    mt_json_object_end(j);
    free(g);
    return 0;
}

/* report_view.c — every figure of one viewport (T0, T1] from the model
 * (report_model.h): Size and impact types from the page references, the
 * graph at T0 and T1 (hence Impact Size) from the system view's spans, by
 * process, category, class and stack, and the system graph's timeline. */
#include "refset/report_model.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int rs_impact_type(int64_t t_ref, int64_t t_rel, int64_t t0, int64_t t1)
{
    if (t_ref > t1 || t_rel <= t0)
        return -1; /* not alive in the viewport */
    bool ref_inside = t_ref > t0, rel_inside = t_rel <= t1;
    if (ref_inside && rel_inside)
        return RS_TRANSIENT;
    if (!ref_inside && !rel_inside)
        return RS_PERSISTENT;
    return RS_IMPACTING;
}

/* stack id -> row, open addressing (ids are the recorder's, not dense) */
struct stack_rows {
    struct rs_stack_row *rows;
    size_t n, cap;
    uint32_t *slots; /* row index + 1; 0: empty */
    size_t mask;
};

static bool same_program(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The row of stack `id` in `program` (the same addresses in two programs
 * are different code). */
static struct rs_figs *stack_row(struct stack_rows *s, uint32_t id, uint32_t pid, const char *program)
{
    if (!s->slots || (s->n + 1) * 2 > s->mask + 1) {
        size_t n = s->slots ? (s->mask + 1) * 2 : 256;
        uint32_t *slots = calloc(n, sizeof *slots);
        if (!slots)
            return NULL;
        for (size_t i = 0; i < s->n; i++) {
            size_t h = (s->rows[i].id * 2654435761u) & (n - 1);
            while (slots[h])
                h = (h + 1) & (n - 1);
            slots[h] = (uint32_t)i + 1;
        }
        free(s->slots);
        s->slots = slots;
        s->mask = n - 1;
    }
    size_t h = (id * 2654435761u) & s->mask;
    while (s->slots[h]) {
        const struct rs_stack_row *r = &s->rows[s->slots[h] - 1];
        if (r->id == id && same_program(r->program, program))
            return &s->rows[s->slots[h] - 1].f;
        h = (h + 1) & s->mask;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        void *p = realloc(s->rows, cap * sizeof *s->rows);
        if (!p)
            return NULL;
        s->rows = p;
        s->cap = cap;
    }
    s->rows[s->n] = (struct rs_stack_row){.id = id, .pid = pid, .program = program};
    s->slots[h] = (uint32_t)++s->n;
    return &s->rows[s->n - 1].f;
}

static int by_impact(const void *a, const void *b)
{
    const struct rs_figs *x = &((const struct rs_stack_row *)a)->f, *y = &((const struct rs_stack_row *)b)->f;
    int64_t ax = x->impact < 0 ? -x->impact : x->impact, ay = y->impact < 0 ? -y->impact : y->impact;
    if (ax != ay)
        return ax > ay ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    uint32_t i = ((const struct rs_stack_row *)a)->id, j = ((const struct rs_stack_row *)b)->id;
    return i < j ? -1 : i > j;
}

static void finish_figs(struct rs_figs *f)
{
    f->impact = (int64_t)f->graph_end - (int64_t)f->graph_start;
}

struct tstep {
    int64_t t;
    int32_t delta; /* +1 / -1 page */
    uint32_t proc;
    uint8_t cat;
};

static int by_step_time(const void *a, const void *b)
{
    const struct tstep *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The system graph over the viewport: its value at T0, then at every
 * change, at most RS_TIMELINE_MAX points (the highest of each stretch
 * kept, so the peak is exact). */
static int timeline(const struct rs_model *m, struct rs_view *v)
{
    size_t nsteps = 0;
    struct tstep *s = malloc((2 * m->nspans + 1) * sizeof *s);
    uint64_t *cur_proc = calloc(m->nprocs + 1, sizeof *cur_proc);
    uint64_t cur_cat[RS_NCATEGORIES] = {0};
    int64_t *totals = NULL;
    uint8_t *keep = NULL;
    int rc = -ENOMEM;
    if (!s || !cur_proc)
        goto out;
    uint64_t start_total = 0;
    for (size_t i = 0; i < m->nspans; i++) {
        const struct rs_span *sp = &m->spans[i];
        const struct rs_pref *r = &m->refs[sp->ref];
        if (sp->start <= v->t0 && sp->end > v->t0) {
            cur_proc[r->proc] += m->page_size;
            cur_cat[r->cat] += m->page_size;
            start_total += m->page_size;
        }
        if (sp->start > v->t0 && sp->start <= v->t1)
            s[nsteps++] = (struct tstep){sp->start, 1, r->proc, r->cat};
        if (sp->end > v->t0 && sp->end <= v->t1)
            s[nsteps++] = (struct tstep){sp->end, -1, r->proc, r->cat};
    }
    if (nsteps)
        qsort(s, nsteps, sizeof *s, by_step_time);
    /* the change points: distinct times */
    size_t npts = 1;
    for (size_t i = 0; i < nsteps; i++)
        if (i == 0 || s[i].t != s[i - 1].t)
            npts++;
    totals = malloc(npts * sizeof *totals);
    keep = calloc(npts, 1);
    if (!totals || !keep)
        goto out;
    totals[0] = (int64_t)start_total;
    for (size_t i = 0, k = 0; i < nsteps; i++) {
        if (i == 0 || s[i].t != s[i - 1].t) {
            k++;
            totals[k] = totals[k - 1];
        }
        totals[k] += s[i].delta * (int64_t)m->page_size;
    }
    size_t nkeep = 0;
    if (npts <= RS_TIMELINE_MAX) {
        memset(keep, 1, npts);
        nkeep = npts;
    } else { /* the first, the last, and the highest of each stretch between */
        size_t buckets = RS_TIMELINE_MAX - 2, inner = npts - 2;
        keep[0] = keep[npts - 1] = 1;
        for (size_t b = 0; b < buckets; b++) {
            size_t lo = 1 + b * inner / buckets, hi = 1 + (b + 1) * inner / buckets, best = lo;
            for (size_t i = lo; i < hi; i++)
                if (totals[i] > totals[best])
                    best = i;
            if (lo < hi)
                keep[best] = 1;
        }
        for (size_t i = 0; i < npts; i++)
            nkeep += keep[i];
    }
    v->timeline = calloc(nkeep, sizeof *v->timeline);
    if (!v->timeline)
        goto out;
    size_t out_i = 0;
    for (size_t i = 0, k = 0; k < npts; k++) {
        int64_t t = v->t0;
        if (k > 0) {
            t = s[i].t;
            for (; i < nsteps && s[i].t == t; i++) {
                cur_proc[s[i].proc] += (uint64_t)((int64_t)s[i].delta * m->page_size);
                cur_cat[s[i].cat] += (uint64_t)((int64_t)s[i].delta * m->page_size);
            }
        }
        if (!keep[k])
            continue;
        struct rs_point *p = &v->timeline[out_i++];
        p->time_ns = t;
        p->bytes = (uint64_t)totals[k];
        memcpy(p->by_cat, cur_cat, sizeof cur_cat);
        p->by_proc = malloc((m->nprocs + 1) * sizeof *p->by_proc);
        if (!p->by_proc)
            goto out;
        memcpy(p->by_proc, cur_proc, m->nprocs * sizeof *p->by_proc);
        v->npoints = out_i;
    }
    rc = 0;
out:
    free(s);
    free(cur_proc);
    free(totals);
    free(keep);
    return rc;
}

/* The rows a page reference adds to: the total, its process, the
 * process's category, its category and class, and its impacting and
 * allocation stacks when it has them. The count, or -1 out of memory. */
static int ref_rows(const struct rs_model *m, struct rs_view *v, const struct rs_pref *r,
                    struct stack_rows *imp, struct stack_rows *alloc, struct rs_figs *rows[7])
{
    uint32_t pid = m->procs[r->proc].pid;
    const char *program = m->procs[r->proc].program;
    rows[0] = &v->total;
    rows[1] = &v->procs[r->proc];
    rows[2] = &v->proc_cats[r->proc * RS_NCATEGORIES + r->cat];
    rows[3] = &v->cats[r->cat];
    rows[4] = &v->classes[mt_rs_category_class(r->cat)];
    int n = 5;
    if (r->stack && !(rows[n++] = stack_row(imp, r->stack, pid, program)))
        return -1;
    if (r->alloc_stack && !(rows[n++] = stack_row(alloc, r->alloc_stack, pid, program)))
        return -1;
    return n;
}

int rs_view_compute(const struct rs_model *m, int64_t t0, int64_t t1, struct rs_view *v)
{
    memset(v, 0, sizeof *v);
    v->t0 = t0;
    v->t1 = t1;
    v->procs = calloc(m->nprocs + 1, sizeof *v->procs);
    v->proc_cats = calloc((m->nprocs + 1) * RS_NCATEGORIES, sizeof *v->proc_cats);
    struct stack_rows imp = {0}, alloc = {0};
    int rc = -ENOMEM;
    if (!v->procs || !v->proc_cats)
        goto fail;
    const uint64_t ps = m->page_size;
    for (size_t i = 0; i < m->nrefs; i++) {
        const struct rs_pref *r = &m->refs[i];
        int type = rs_impact_type(r->t_ref, r->t_rel, t0, t1);
        if (type < 0)
            continue;
        struct rs_figs *rows[7];
        int nrows = ref_rows(m, v, r, &imp, &alloc, rows);
        if (nrows < 0)
            goto fail;
        for (int k = 0; k < nrows; k++) {
            rows[k]->size += ps;
            rows[k]->types[type] += ps;
            if (r->id_kind == RS_ID_ZERO)
                rows[k]->zero_page += ps;
        }
    }
    for (size_t i = 0; i < m->nspans; i++) {
        const struct rs_span *sp = &m->spans[i];
        bool at_start = sp->start <= t0 && sp->end > t0, at_end = sp->start <= t1 && sp->end > t1;
        if (!at_start && !at_end)
            continue;
        const struct rs_pref *r = &m->refs[sp->ref];
        struct rs_figs *rows[7];
        int nrows = ref_rows(m, v, r, &imp, &alloc, rows);
        if (nrows < 0)
            goto fail;
        for (int k = 0; k < nrows; k++) {
            rows[k]->graph_start += at_start ? ps : 0;
            rows[k]->graph_end += at_end ? ps : 0;
        }
    }
    finish_figs(&v->total);
    for (size_t i = 0; i < m->nprocs; i++) {
        finish_figs(&v->procs[i]);
        for (int c = 0; c < RS_NCATEGORIES; c++)
            finish_figs(&v->proc_cats[i * RS_NCATEGORIES + c]);
    }
    for (int c = 0; c < RS_NCATEGORIES; c++)
        finish_figs(&v->cats[c]);
    finish_figs(&v->classes[0]);
    finish_figs(&v->classes[1]);
    for (size_t i = 0; i < imp.n; i++)
        finish_figs(&imp.rows[i].f);
    for (size_t i = 0; i < alloc.n; i++)
        finish_figs(&alloc.rows[i].f);
    if (imp.n)
        qsort(imp.rows, imp.n, sizeof *imp.rows, by_impact);
    if (alloc.n)
        qsort(alloc.rows, alloc.n, sizeof *alloc.rows, by_impact);
    v->impacting = imp.rows;
    v->nimpacting = imp.n;
    v->allocation = alloc.rows;
    v->nallocation = alloc.n;
    free(imp.slots);
    free(alloc.slots);
    imp.rows = alloc.rows = NULL;
    rc = timeline(m, v);
    if (rc < 0)
        goto fail;
    return 0;
fail:
    free(imp.rows);
    free(imp.slots);
    free(alloc.rows);
    free(alloc.slots);
    rs_view_free(v);
    return rc;
}

void rs_view_free(struct rs_view *v)
{
    free(v->procs);
    free(v->proc_cats);
    free(v->impacting);
    free(v->allocation);
    for (size_t i = 0; i < v->npoints; i++)
        free(v->timeline[i].by_proc);
    free(v->timeline);
    memset(v, 0, sizeof *v);
}

/* report_detail.c — the allocation sites of a detail-mode report, as
 * `memtrail report detail` and `memtrail diff` show them: sites grouped
 * (by their first --depth frames and category, as NMT aggregates its
 * detail view), sorted, symbolized (symbol.c) and printed as NMT-like text
 * or added to the summary's JSON document. Two reports are compared by
 * symbolized stack, not raw address, so two runs or two builds (with their
 * own load addresses) still match. */
#include "report/detail.h"

#include "common/json_out.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SYM 16 /* symbolized frames per return address (inlined calls) */

struct symbolizer *detail_symbolizer(const struct report *r)
{
    struct sym_module *mods = calloc(r->nmodules + 1, sizeof *mods);
    if (!mods)
        return NULL;
    for (size_t i = 0; i < r->nmodules; i++) {
        const struct report_module *m = &r->modules[i];
        mods[i] = (struct sym_module){
            .path = m->path, .buildid = m->buildid, .bias = m->bias, .start = m->start, .end = m->end};
    }
    struct symbolizer *s = sym_open(mods, r->nmodules);
    free(mods);
    for (size_t i = 0; s && i < r->nsites; i++)
        sym_prepare(s, r->sites[i].frames, r->sites[i].nframes);
    return s;
}

/* Sites merged into one row. */
struct group {
    const char *category;
    const uint64_t *frames; /* the first member's, cut to the depth */
    size_t nframes;
    struct report_counts n; /* summed; peak_bytes is the sum of the members' peaks */
    int64_t allocated;      /* summed allocated_bytes; meaningful when has_allocated */
    bool has_allocated;     /* every member carried allocated_bytes */
    int64_t samples;        /* sampled reports: summed samples= and live_samples= */
    int64_t live_samples;
    size_t nsites;
    int64_t first_id;
    const char *key; /* diff: the symbolized stack (kept by the key table) */
    size_t key_id;   /* diff: its index in the key table */
};

struct grouping {
    struct group *g;
    size_t n;
};

static void grouping_free(struct grouping *gr)
{
    free(gr->g);
    gr->g = NULL;
    gr->n = 0;
}

/* The distinct symbolized stacks of the two sides of a diff, each once:
 * sites are grouped and matched by a stack's index here, so that a key
 * (hundreds of bytes for a deep stack) is compared in full once, when it
 * is added, not at every step of a sort. */
struct key_table {
    char **keys;
    size_t n, cap;
    struct report_index index;
};

static void key_table_free(struct key_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->keys[i]);
    free(t->keys);
    report_index_free(&t->index);
}

/* The index of `key` (taken: freed when already there), or SIZE_MAX on -ENOMEM. */
static size_t key_intern(struct key_table *t, char *key)
{
    uint64_t h = report_hash_str(key);
    for (size_t pos = 0, i; (i = report_index_next(&t->index, h, &pos)) != SIZE_MAX;)
        if (strcmp(t->keys[i], key) == 0) {
            free(key);
            return i;
        }
    if (report_grow(&t->keys, &t->cap, t->n + 1, sizeof *t->keys, 64) < 0 ||
        report_index_add(&t->index, h, t->n) < 0) {
        free(key);
        return SIZE_MAX;
    }
    t->keys[t->n] = key;
    return t->n++;
}

static size_t depth_of(const struct report_site *s, const struct detail_options *o)
{
    return o->depth > 0 && s->nframes > (size_t)o->depth ? (size_t)o->depth : s->nframes;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* --- the symbolized key of a stack (diff matching) ------------------------ */

struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->p, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static void buf_hex(struct buf *b, const char *prefix, uint64_t v)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s0x%" PRIx64, prefix, v);
    buf_str(b, tmp);
}

/* "category|f1;f1inl@module|f2@module|..." */
static char *symbol_key(struct symbolizer *s, const char *category, const uint64_t *frames, size_t n)
{
    struct buf b = {0};
    buf_str(&b, category);
    for (size_t i = 0; i < n; i++) {
        struct sym_frame f[MAX_SYM];
        int k = sym_lookup(s, frames[i], f, MAX_SYM);
        buf_str(&b, "|");
        for (int j = 0; j < k; j++) {
            if (j)
                buf_str(&b, ";");
            if (f[j].function)
                buf_str(&b, f[j].function);
            else if (f[j].module)
                buf_hex(&b, "+", f[j].offset);
            else
                buf_hex(&b, "", f[j].address);
        }
        if (k > 0 && f[0].module) {
            buf_str(&b, "@");
            buf_str(&b, base_name(f[0].module));
        }
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : strdup("");
}

/* --- grouping ------------------------------------------------------------- */

struct keyed {
    const struct report_site *site;
    size_t depth;
    size_t key_id; /* SIZE_MAX: compare raw frames */
};

static int cmp_keyed(const void *pa, const void *pb)
{
    const struct keyed *a = pa, *b = pb;
    if (a->key_id != SIZE_MAX || b->key_id != SIZE_MAX) {
        if (a->key_id != b->key_id)
            return a->key_id < b->key_id ? -1 : 1;
        return (a->site->id > b->site->id) - (a->site->id < b->site->id);
    }
    int c = strcmp(a->site->category, b->site->category);
    if (c)
        return c;
    size_t n = a->depth < b->depth ? a->depth : b->depth;
    for (size_t i = 0; i < n; i++)
        if (a->site->frames[i] != b->site->frames[i])
            return a->site->frames[i] < b->site->frames[i] ? -1 : 1;
    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    return (a->site->id > b->site->id) - (a->site->id < b->site->id);
}

static bool same_group(const struct keyed *a, const struct keyed *b)
{
    if (a->key_id != SIZE_MAX)
        return a->key_id == b->key_id;
    return strcmp(a->site->category, b->site->category) == 0 && a->depth == b->depth &&
           memcmp(a->site->frames, b->site->frames, a->depth * sizeof *a->site->frames) == 0;
}

static void add_counts(struct report_counts *sum, const struct report_counts *c)
{
    sum->live_bytes = report_add(sum->live_bytes, c->live_bytes);
    sum->live_count = report_add(sum->live_count, c->live_count);
    sum->peak_bytes = report_add(sum->peak_bytes, c->peak_bytes);
    sum->allocs = report_add(sum->allocs, c->allocs);
    sum->frees = report_add(sum->frees, c->frees);
    sum->reallocs = report_add(sum->reallocs, c->reallocs);
}

/* Groups r's sites: by raw frames, or (s not NULL) by symbolized stack,
 * the stacks kept in keys. */
static int group_sites(const struct report *r, struct symbolizer *s, struct key_table *keys,
                       const struct detail_options *o, struct grouping *out)
{
    out->g = NULL;
    out->n = 0;
    struct keyed *k = calloc(r->nsites + 1, sizeof *k);
    if (!k)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < r->nsites && rc == 0; i++) {
        k[i].site = &r->sites[i];
        k[i].depth = depth_of(&r->sites[i], o);
        k[i].key_id = SIZE_MAX;
        if (s) {
            char *key = symbol_key(s, r->sites[i].category, r->sites[i].frames, k[i].depth);
            if (!key || (k[i].key_id = key_intern(keys, key)) == SIZE_MAX)
                rc = -ENOMEM;
        }
    }
    if (rc == 0)
        qsort(k, r->nsites, sizeof *k, cmp_keyed);
    if (rc == 0 && !(out->g = calloc(r->nsites + 1, sizeof *out->g)))
        rc = -ENOMEM;
    for (size_t i = 0; i < r->nsites && rc == 0; i++) {
        if (i == 0 || !same_group(&k[i - 1], &k[i])) {
            struct group *g = &out->g[out->n++];
            g->category = k[i].site->category;
            g->frames = k[i].site->frames;
            g->nframes = k[i].depth;
            g->first_id = k[i].site->id;
            g->key_id = k[i].key_id;
            g->key = k[i].key_id != SIZE_MAX ? keys->keys[k[i].key_id] : NULL;
            g->has_allocated = true;
        }
        struct group *g = &out->g[out->n - 1];
        add_counts(&g->n, &k[i].site->n);
        g->allocated = report_add(g->allocated, k[i].site->allocated_bytes);
        g->has_allocated &= k[i].site->has_allocated;
        g->samples = report_add(g->samples, k[i].site->samples);
        g->live_samples = report_add(g->live_samples, k[i].site->live_samples);
        g->nsites++;
    }
    free(k);
    if (rc < 0)
        grouping_free(out);
    return rc;
}

/* What the sites are sorted by: live bytes; with --sort allocated, the
 * bytes allocated when every site has them (newer reports), else the
 * number of allocations. */
enum sort_by { SORT_LIVE, SORT_ALLOCATED_BYTES, SORT_ALLOCS };
static enum sort_by sort_by;

static enum sort_by sort_of(const struct report *r, const struct detail_options *o)
{
    return !o->by_allocs ? SORT_LIVE : report_sites_have_allocated(r) ? SORT_ALLOCATED_BYTES : SORT_ALLOCS;
}

static int cmp_group(const void *pa, const void *pb)
{
    const struct group *a = pa, *b = pb;
    int64_t x1 = sort_by == SORT_ALLOCATED_BYTES ? a->allocated
                 : sort_by == SORT_ALLOCS        ? a->n.allocs
                                                 : a->n.live_bytes;
    int64_t y1 = sort_by == SORT_ALLOCATED_BYTES ? b->allocated
                 : sort_by == SORT_ALLOCS        ? b->n.allocs
                                                 : b->n.live_bytes;
    int64_t x2 = sort_by != SORT_LIVE ? a->n.live_bytes : a->n.allocs,
            y2 = sort_by != SORT_LIVE ? b->n.live_bytes : b->n.allocs;
    if (x1 != y1)
        return x1 > y1 ? -1 : 1;
    if (x2 != y2)
        return x2 > y2 ? -1 : 1;
    return (a->first_id > b->first_id) - (a->first_id < b->first_id);
}

static void sort_groups(struct grouping *gr, const struct report *r, const struct detail_options *o)
{
    sort_by = sort_of(r, o);
    qsort(gr->g, gr->n, sizeof *gr->g, cmp_group);
}

/* --- text ----------------------------------------------------------------- */

#define COUNTS_INDENT 29 /* NMT's column for a site's counters */

static void text_frames(FILE *out, struct symbolizer *s, const uint64_t *frames, size_t n)
{
    if (n == 0)
        fputs("[no frames: allocations counted here when the site table was full]\n", out);
    for (size_t i = 0; i < n; i++) {
        struct sym_frame f[MAX_SYM];
        int k = sym_lookup(s, frames[i], f, MAX_SYM);
        for (int j = 0; j < k; j++)
            sym_print_frame(out, "", frames[i], &f[j]);
    }
}

static void text_counts(FILE *out, const struct group *g, bool sampled, const struct report_scale *sc)
{
    fprintf(out,
            "%*s(%s: live=%s (%" PRId64 " blocks), peak=%s, allocs=%" PRId64 ", frees=%" PRId64
            ", reallocs=%" PRId64,
            COUNTS_INDENT, "", g->category, report_size(g->n.live_bytes, sc), g->n.live_count,
            report_size(g->n.peak_bytes, sc), g->n.allocs, g->n.frees, g->n.reallocs);
    if (g->has_allocated)
        fprintf(out, ", allocated=%s", report_size(g->allocated, sc));
    if (sampled) /* the estimates' basis: few samples, a wide error */
        fprintf(out, ", samples=%" PRId64 " (%" PRId64 " live)", g->samples, g->live_samples);
    if (g->nsites > 1)
        fprintf(out, "; %zu sites merged", g->nsites);
    fputs(")\n\n", out);
}

/* The sites grouped and sorted as `o` says, and how many of them --top
 * lets through. */
static int sorted_groups(const struct report *r, const struct detail_options *o, struct grouping *gr,
                         size_t *shown)
{
    int rc = group_sites(r, NULL, NULL, o, gr);
    if (rc < 0)
        return rc;
    sort_groups(gr, r, o);
    *shown = o->top > 0 && gr->n > (size_t)o->top ? (size_t)o->top : gr->n;
    return 0;
}

int detail_print_text(FILE *out, const struct report *r, struct symbolizer *s, const struct detail_options *o,
                      const struct report_scale *sc)
{
    int rc = report_print_text(out, r, sc);
    if (rc < 0)
        return rc;
    struct grouping gr;
    size_t shown;
    if ((rc = sorted_groups(r, o, &gr, &shown)) < 0)
        return rc;
    fprintf(out, "Allocation sites: %zu", shown);
    if (shown < gr.n)
        fprintf(out, " of %zu", gr.n);
    enum sort_by by = sort_of(r, o);
    fprintf(out, ", by %s (stack depth %" PRId64 ", %s",
            by == SORT_ALLOCATED_BYTES ? "allocated bytes"
            : by == SORT_ALLOCS        ? "allocations (the report has no allocated bytes per site)"
                                       : "live bytes",
            r->stack_depth, r->unwinder ? r->unwinder : "unwinder unknown");
    if (o->depth > 0)
        fprintf(out, "; first %d frames, %zu sites merged into %zu", o->depth, r->nsites, gr.n);
    fputs("):\n\n", out);
    for (size_t i = 0; i < shown; i++) {
        text_frames(out, s, gr.g[i].frames, gr.g[i].nframes);
        text_counts(out, &gr.g[i], report_is_sampled(r), sc);
    }
    if (r->sites_dropped)
        fprintf(out,
                "Dropped: %" PRId64 " allocations found the site table full; they are counted in the "
                "site without frames.\n",
                r->sites_dropped);
    grouping_free(&gr);
    return ferror(out) ? -EIO : 0;
}

/* --- JSON ----------------------------------------------------------------- */

void detail_json_frames(mt_json *j, struct symbolizer *s, const uint64_t *frames, size_t n)
{
    mt_json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
        struct sym_frame f[MAX_SYM];
        int k = s ? sym_lookup(s, frames[i], f, MAX_SYM) : 0;
        if (k <= 0) { /* nothing to symbolize with: the address alone */
            f[0] = (struct sym_frame){.address = frames[i]};
            k = 1;
        }
        for (int m = 0; m < k; m++) {
            mt_json_oneline(j);
            mt_json_object_begin(j);
            mt_json_kstr(j, "function", f[m].function);
            mt_json_kstr(j, "file", f[m].file);
            mt_json_ki64_or_null(j, "line", f[m].line > 0, f[m].line);
            mt_json_kstr(j, "module", f[m].module);
            mt_json_key(j, "address");
            mt_json_hex(j, f[m].address);
            mt_json_key(j, "offset");
            if (f[m].module)
                mt_json_hex(j, f[m].offset);
            else
                mt_json_null(j);
            mt_json_kbool(j, "inlined", f[m].inlined);
            mt_json_object_end(j);
        }
    }
    mt_json_array_end(j);
}

/* The warnings, one JSON string each. */
static void json_warnings(mt_json *j, const char *key, struct symbolizer *s)
{
    mt_json_key(j, key);
    mt_json_array_begin(j);
    const char *w = sym_warnings(s);
    while (*w) {
        size_t len = strcspn(w, "\n");
        mt_json_strn(j, w, len);
        w += len + (w[len] == '\n');
    }
    mt_json_array_end(j);
}

int detail_print_json(FILE *out, const struct report *r, struct symbolizer *s, const struct detail_options *o)
{
    struct grouping gr;
    size_t shown;
    int rc = sorted_groups(r, o, &gr, &shown);
    if (rc < 0)
        return rc;
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    report_json_summary(&j, r);
    mt_json_ki64(&j, "stack_depth", r->stack_depth);
    mt_json_kstr(&j, "unwinder", r->unwinder);
    mt_json_ki64(&j, "sites_dropped", r->sites_dropped);
    mt_json_ku64(&j, "sites_total", gr.n);
    enum sort_by by = sort_of(r, o);
    mt_json_kstr(&j, "sorted_by",
                 by == SORT_ALLOCATED_BYTES ? "allocated_bytes"
                 : by == SORT_ALLOCS        ? "allocs"
                                            : "live_bytes");
    json_warnings(&j, "symbol_warnings", s);
    mt_json_key(&j, "sites");
    mt_json_array_begin(&j);
    for (size_t i = 0; i < shown; i++) {
        const struct group *g = &gr.g[i];
        mt_json_object_begin(&j);
        mt_json_ki64(&j, "stack_id", g->first_id);
        mt_json_ku64(&j, "merged_sites", g->nsites);
        mt_json_kstr(&j, "category", g->category);
        report_json_counts(&j, &g->n);
        mt_json_ki64_or_null(&j, "allocated_bytes", g->has_allocated, g->allocated);
        if (report_is_sampled(r)) {
            mt_json_ki64(&j, "samples", g->samples);
            mt_json_ki64(&j, "live_samples", g->live_samples);
        }
        mt_json_key(&j, "frames");
        detail_json_frames(&j, s, g->frames, g->nframes);
        mt_json_object_end(&j);
    }
    mt_json_array_end(&j);
    grouping_free(&gr);
    return mt_json_document_end(&j);
}

/* --- diff ----------------------------------------------------------------- */

struct drow {
    const struct group *b, *c; /* either may be NULL: gone / new */
};

static const struct report_counts zero;

static const struct report_counts *counts(const struct group *g)
{
    return g ? &g->n : &zero;
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? (v == INT64_MIN ? INT64_MAX : -v) : v;
}

static bool unchanged(const struct drow *w)
{
    return w->b && w->c && memcmp(&w->b->n, &w->c->n, sizeof w->b->n) == 0 &&
           w->b->has_allocated == w->c->has_allocated && w->b->allocated == w->c->allocated;
}

/* A side's allocated bytes: 0 and known for a missing side (new, gone). */
static bool allocated_of(const struct group *g, int64_t *v)
{
    *v = g ? g->allocated : 0;
    return !g || g->has_allocated;
}

static const char *status_of(const struct drow *w)
{
    return !w->b ? "new" : !w->c ? "gone" : unchanged(w) ? "unchanged" : "changed";
}

static int cmp_drow(const void *pa, const void *pb)
{
    const struct drow *a = pa, *b = pb;
    int64_t da = abs64(report_sub(counts(a->c)->live_bytes, counts(a->b)->live_bytes));
    int64_t db = abs64(report_sub(counts(b->c)->live_bytes, counts(b->b)->live_bytes));
    if (da != db)
        return da > db ? -1 : 1;
    da = abs64(report_sub(counts(a->c)->allocs, counts(a->b)->allocs));
    db = abs64(report_sub(counts(b->c)->allocs, counts(b->b)->allocs));
    if (da != db)
        return da > db ? -1 : 1;
    const char *ka = (a->c ? a->c : a->b)->key, *kb = (b->c ? b->c : b->b)->key;
    return strcmp(ka, kb);
}

static int cmp_key(const void *pa, const void *pb)
{
    size_t a = ((const struct group *)pa)->key_id, b = ((const struct group *)pb)->key_id;
    return (a > b) - (a < b);
}

struct diff {
    struct key_table keys; /* both sides' stacks: a stack has one index on both */
    struct grouping gb, gc;
    struct drow *rows;
    size_t n;
};

static void diff_free(struct diff *d)
{
    grouping_free(&d->gb);
    grouping_free(&d->gc);
    free(d->rows);
    key_table_free(&d->keys);
}

/* Match the two sides' groups by key (both sorted by key: a merge). */
static int diff_build(struct diff *d, const struct report *base, const struct report *cur,
                      struct symbolizer *sb, struct symbolizer *sc, const struct detail_options *o)
{
    memset(d, 0, sizeof *d);
    int rc = group_sites(base, sb, &d->keys, o, &d->gb);
    if (rc == 0)
        rc = group_sites(cur, sc, &d->keys, o, &d->gc);
    if (rc == 0 && !(d->rows = calloc(d->gb.n + d->gc.n + 1, sizeof *d->rows)))
        rc = -ENOMEM;
    if (rc < 0) {
        diff_free(d);
        return rc;
    }
    qsort(d->gb.g, d->gb.n, sizeof *d->gb.g, cmp_key);
    qsort(d->gc.g, d->gc.n, sizeof *d->gc.g, cmp_key);
    size_t i = 0, j = 0;
    while (i < d->gb.n || j < d->gc.n) {
        int c = i == d->gb.n ? 1 : j == d->gc.n ? -1 : cmp_key(&d->gb.g[i], &d->gc.g[j]);
        struct drow *w = &d->rows[d->n++];
        if (c <= 0)
            w->b = &d->gb.g[i++];
        if (c >= 0)
            w->c = &d->gc.g[j++];
    }
    qsort(d->rows, d->n, sizeof *d->rows, cmp_drow);
    return 0;
}

static void t_delta_bytes(FILE *out, const char *key, int64_t cur, int64_t base,
                          const struct report_scale *sc)
{
    fprintf(out, "%s%s", key, report_size(cur, sc));
    int64_t d = report_sub(cur, base);
    if (d)
        fprintf(out, " %s%s", d > 0 ? "+" : "", report_size(d, sc));
}

static void t_delta(FILE *out, const char *key, int64_t cur, int64_t base)
{
    fprintf(out, "%s%" PRId64, key, cur);
    if (cur != base)
        fprintf(out, " %+" PRId64, report_sub(cur, base));
}

/* Reports recorded at different stack depths (--depth of `run`): the
 * deeper one's stacks are longer, and no site would match its own in the
 * other. Both are then cut to the shallower depth, as diff's --depth
 * would: the frames the stacks are matched on (a --depth deeper than
 * the shallower one is no cut for it). 0: no cut beyond the options'
 * (the depths agree, or --depth cuts to as few). */
static int matched_depth(const struct report *base, const struct report *cur, const struct detail_options *o)
{
    if (base->stack_depth <= 0 || cur->stack_depth <= 0 || base->stack_depth == cur->stack_depth)
        return 0;
    int64_t d = base->stack_depth < cur->stack_depth ? base->stack_depth : cur->stack_depth;
    if (o->depth > 0 && o->depth <= d) /* --depth cuts both to as few frames already */
        return 0;
    return d > INT_MAX ? INT_MAX : (int)d;
}

int detail_diff_print_text(FILE *out, const struct report *base, const struct report *cur,
                           struct symbolizer *sb, struct symbolizer *sc, const struct detail_options *opts,
                           const struct report_scale *scale)
{
    struct detail_options cut = *opts;
    const struct detail_options *o = &cut;
    int md = matched_depth(base, cur, opts);
    if (md)
        cut.depth = md;
    struct diff d;
    int rc = diff_build(&d, base, cur, sb, sc, o);
    if (rc < 0)
        return rc;
    size_t grew = 0, shrank = 0, added = 0, gone = 0, same = 0;
    for (size_t i = 0; i < d.n; i++) {
        const struct drow *w = &d.rows[i];
        int64_t dl = report_sub(counts(w->c)->live_bytes, counts(w->b)->live_bytes);
        if (!w->b)
            added++;
        else if (!w->c)
            gone++;
        else if (unchanged(w))
            same++;
        else if (dl < 0)
            shrank++;
        else
            grew++;
    }
    if (md)
        fprintf(out,
                "\nThe reports were recorded at different stack depths (base %" PRId64 ", new %" PRId64
                "): sites are matched on their first %d frames, as with --depth %d%s.\n",
                base->stack_depth, cur->stack_depth, md, md,
                opts->depth > 0 ? " (not the --depth given)" : "");
    fprintf(out,
            "\nAllocation sites, matched by symbolized stack%s: %zu grew, %zu shrank, %zu new, %zu gone, "
            "%zu unchanged (not shown)\n\n",
            md             ? " (first frames only)"
            : o->depth > 0 ? " (first frames only: --depth)"
                           : "",
            grew, shrank, added, gone, same);
    size_t shown = 0;
    for (size_t i = 0; i < d.n; i++) {
        const struct drow *w = &d.rows[i];
        if (unchanged(w))
            continue;
        if (o->top > 0 && shown == (size_t)o->top)
            break;
        shown++;
        const struct group *g = w->c ? w->c : w->b;
        text_frames(out, w->c ? sc : sb, g->frames, g->nframes);
        const struct report_counts *c = counts(w->c), *b = counts(w->b);
        fprintf(out, "%*s(%s: ", COUNTS_INDENT, "", g->category);
        t_delta_bytes(out, "live=", c->live_bytes, b->live_bytes, scale);
        fputs(" (", out);
        t_delta(out, "", c->live_count, b->live_count);
        fputs(" blocks), ", out);
        t_delta_bytes(out, "peak=", c->peak_bytes, b->peak_bytes, scale);
        t_delta(out, ", allocs=", c->allocs, b->allocs);
        t_delta(out, ", frees=", c->frees, b->frees);
        int64_t ac, ab;
        bool kc = allocated_of(w->c, &ac), kb = allocated_of(w->b, &ab);
        if (kc && kb)
            t_delta_bytes(out, ", allocated=", ac, ab, scale);
        else if (kc) /* the base report has no allocated_bytes: no delta */
            fprintf(out, ", allocated=%s", report_size(ac, scale));
        fprintf(out, ")%s\n\n", !w->b ? " [new]" : !w->c ? " [gone]" : "");
    }
    diff_free(&d);
    return ferror(out) ? -EIO : 0;
}

/* One side of a site's diff: its figures in that report (and, from a
 * sampled report, the samples behind them), or null. */
static void j_side(mt_json *j, const char *key, const struct group *g, bool sampled)
{
    mt_json_key(j, key);
    if (!g) {
        mt_json_null(j);
        return;
    }
    mt_json_oneline(j);
    mt_json_object_begin(j);
    mt_json_ki64(j, "stack_id", g->first_id);
    report_json_counts(j, &g->n);
    mt_json_ki64_or_null(j, "allocated_bytes", g->has_allocated, g->allocated);
    mt_json_ku64(j, "merged_sites", g->nsites);
    if (sampled) {
        mt_json_ki64(j, "samples", g->samples);
        mt_json_ki64(j, "live_samples", g->live_samples);
    }
    mt_json_object_end(j);
}

int detail_diff_print_json(FILE *out, const struct report *base, const struct report *cur,
                           struct symbolizer *sb, struct symbolizer *sc, const struct detail_options *opts)
{
    struct detail_options cut = *opts;
    const struct detail_options *o = &cut;
    int md = matched_depth(base, cur, opts);
    if (md)
        cut.depth = md;
    struct diff d;
    int rc = diff_build(&d, base, cur, sb, sc, o);
    if (rc < 0)
        return rc;
    mt_json j;
    mt_json_init_file(&j, out, true);
    mt_json_document_begin(&j);
    if ((rc = report_json_diff(&j, base, cur)) < 0) {
        diff_free(&d);
        return rc;
    }
    json_warnings(&j, "symbol_warnings_base", sb);
    json_warnings(&j, "symbol_warnings_new", sc);
    mt_json_ki64_or_null(&j, "matched_frames", o->depth > 0, o->depth);
    mt_json_key(&j, "sites");
    mt_json_array_begin(&j);
    size_t shown = 0;
    for (size_t i = 0; i < d.n; i++) {
        const struct drow *w = &d.rows[i];
        if (o->top > 0 && shown == (size_t)o->top)
            break;
        shown++;
        const struct group *g = w->c ? w->c : w->b;
        const struct report_counts *c = counts(w->c), *b = counts(w->b);
        struct report_counts delta = {
            report_sub(c->live_bytes, b->live_bytes), report_sub(c->live_count, b->live_count),
            report_sub(c->peak_bytes, b->peak_bytes), report_sub(c->allocs, b->allocs),
            report_sub(c->frees, b->frees),           report_sub(c->reallocs, b->reallocs),
        };
        mt_json_object_begin(&j);
        mt_json_kstr(&j, "status", status_of(w));
        mt_json_kstr(&j, "category", g->category);
        mt_json_kstr(&j, "stack_key", g->key);
        j_side(&j, "base", w->b, report_is_sampled(base));
        j_side(&j, "new", w->c, report_is_sampled(cur));
        mt_json_key(&j, "delta");
        mt_json_oneline(&j);
        mt_json_object_begin(&j);
        report_json_counts(&j, &delta);
        int64_t ac, ab;
        bool kc = allocated_of(w->c, &ac), kb = allocated_of(w->b, &ab);
        mt_json_ki64_or_null(&j, "allocated_bytes", kc && kb, report_sub(ac, ab));
        mt_json_object_end(&j);
        mt_json_key(&j, "frames");
        detail_json_frames(&j, w->c ? sc : sb, g->frames, g->nframes);
        mt_json_object_end(&j);
    }
    mt_json_array_end(&j);
    diff_free(&d);
    return mt_json_document_end(&j);
}

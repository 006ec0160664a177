/* trace_read_defs.c — the reader's definitions (threads, stacks, modules,
 * categories, meta), the end record's statistics and the chunk index:
 * parsed from chunk bodies with every length checked, kept until close. */
#include "trace/trace_read_int.h"
#include "trace/trace_util.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS (1u << 22)
#define ARENA_BLOCK (256u << 10)

#define FAIL(...)                                                                                            \
    do {                                                                                                     \
        snprintf(why, whylen, __VA_ARGS__);                                                                  \
        return -1;                                                                                           \
    } while (0)

typedef struct cursor {
    const unsigned char *p, *end;
} cursor;

static int get(cursor *c, uint64_t *v)
{
    return trace_get_varint(&c->p, c->end, v);
}

/* A length-prefixed string or byte run, at most max bytes. */
static int get_bytes(cursor *c, size_t max, const unsigned char **s, size_t *n)
{
    uint64_t len;
    if (get(c, &len) < 0 || len > max || len > (uint64_t)(c->end - c->p))
        return -1;
    *s = c->p;
    *n = (size_t)len;
    c->p += len;
    return 0;
}

/* What an allocation of n bytes costs, with malloc's own header. */
static size_t cost(size_t n)
{
    return n + 16;
}

/* Counts n more bytes held; -1 (nothing counted) past the limit. */
static int charge(trace_defs *d, size_t n)
{
    if (n > TRACE_DEFS_MAX_BYTES - d->bytes)
        return -1;
    d->bytes += n;
    return 0;
}

static void uncharge(trace_defs *d, size_t n)
{
    d->bytes = n < d->bytes ? d->bytes - n : 0;
}

#define TOO_MUCH "definitions exceed %zu MB", TRACE_DEFS_MAX_BYTES >> 20

static char *dup_str(const unsigned char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        if (n)
            memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* A copy of the n bytes at s, counted; NULL when out of memory, or over
 * the limit (then *over is set). */
static char *dup_counted(trace_defs *d, const unsigned char *s, size_t n, int *over)
{
    if (charge(d, cost(n + 1)) < 0) {
        *over = 1;
        return NULL;
    }
    char *c = dup_str(s, n);
    if (!c)
        uncharge(d, cost(n + 1));
    return c;
}

/* A string's copy ends at its first NUL (it is read as a C string): what
 * it holds is then its strlen + 1, given back by free_counted. */
static char *dup_text(trace_defs *d, const unsigned char *s, size_t n, int *over)
{
    const unsigned char *nul = memchr(s, 0, n);
    return dup_counted(d, s, nul ? (size_t)(nul - s) : n, over);
}

static void free_counted(trace_defs *d, char *s)
{
    if (s) {
        uncharge(d, cost(strlen(s) + 1));
        free(s);
    }
}

/* ---- stacks: open addressing by id, frames in a block arena ---- */

static uint32_t hash_id(uint32_t k)
{
    k ^= k >> 16;
    k *= 0x7feb352du;
    k ^= k >> 15;
    return k;
}

static mt_trace_stack *stack_slot(mt_trace_stack *t, uint32_t mask, uint32_t id)
{
    for (uint32_t i = hash_id(id) & mask;; i = (i + 1) & mask)
        if (t[i].nframes == UINT32_MAX || t[i].id == id)
            return &t[i];
}

/* Doubles the table: 0, -1 out of memory, -2 over the limit. */
static int stacks_grow(trace_defs *d)
{
    uint32_t n = d->stacks ? (d->stacks_mask + 1) * 2 : 1024;
    if (!n || charge(d, cost((size_t)n * sizeof(mt_trace_stack))) < 0)
        return -2;
    mt_trace_stack *t = malloc((size_t)n * sizeof *t);
    if (!t) {
        uncharge(d, cost((size_t)n * sizeof *t));
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        t[i].nframes = UINT32_MAX;
    if (d->stacks) {
        for (uint32_t i = 0; i <= d->stacks_mask; i++)
            if (d->stacks[i].nframes != UINT32_MAX)
                *stack_slot(t, n - 1, d->stacks[i].id) = d->stacks[i];
        free(d->stacks);
        uncharge(d, cost((size_t)(d->stacks_mask + 1) * sizeof *t));
    }
    d->stacks = t;
    d->stacks_mask = n - 1;
    return 0;
}

/* Room for n frames (at least one word: a free block's link): a block a
 * redefined stack gave back, else the arena's. NULL: out of memory (*over
 * 0) or over the limit (*over 1). */
static uint64_t *frames_get(trace_defs *d, size_t n, int *over)
{
    uint64_t *f = d->free_frames[n], *next;
    if (f) {
        memcpy(&next, f, sizeof next);
        d->free_frames[n] = next;
        return f;
    }
    size_t bytes = n * sizeof(uint64_t);
    if (!bytes)
        bytes = sizeof(uint64_t);
    if (bytes > d->arena_left) {
        size_t cap = bytes > ARENA_BLOCK ? bytes : ARENA_BLOCK;
        if (charge(d, cost(sizeof(void *) * 2 + cap)) < 0) {
            *over = 1;
            return NULL;
        }
        void **blk = malloc(sizeof(void *) * 2 + cap); /* link, pad, then frames */
        if (!blk) {
            uncharge(d, cost(sizeof(void *) * 2 + cap));
            return NULL;
        }
        blk[0] = d->arena;
        d->arena = blk;
        d->arena_at = (unsigned char *)(blk + 2);
        d->arena_left = cap;
    }
    f = (uint64_t *)d->arena_at;
    d->arena_at += bytes;
    d->arena_left -= bytes;
    return f;
}

/* A stack's old frames, for the next stack of as many. */
static void frames_put(trace_defs *d, uint64_t *f, size_t n)
{
    uint64_t *next = d->free_frames[n];
    memcpy(f, &next, sizeof next);
    d->free_frames[n] = f;
}

const mt_trace_stack *trace_defs_stack(const trace_defs *d, uint32_t id)
{
    if (!d->stacks)
        return NULL;
    const mt_trace_stack *s = stack_slot(d->stacks, d->stacks_mask, id);
    return s->nframes == UINT32_MAX ? NULL : s;
}

static int def_stack(trace_defs *d, cursor *c, char *why, size_t whylen)
{
    uint64_t id, cat, n;
    if (get(c, &id) < 0 || id > UINT32_MAX || get(c, &cat) < 0 || cat > 255 || get(c, &n) < 0 ||
        n > TRACE_MAX_FRAMES)
        FAIL("bad stack record");
    int grown = 0, over = 0;
    if (!d->stacks || (d->nstacks + 1) * 4 > (d->stacks_mask + 1) * 3)
        grown = stacks_grow(d);
    if (grown == -2)
        FAIL(TOO_MUCH);
    if (grown < 0)
        FAIL("out of memory");
    uint64_t *f = frames_get(d, (size_t)n, &over);
    if (!f && over)
        FAIL(TOO_MUCH);
    if (!f)
        FAIL("out of memory");
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t z;
        if (get(c, &z) < 0) {
            frames_put(d, f, (size_t)n);
            FAIL("bad frame in stack %llu", (unsigned long long)id);
        }
        prev += (uint64_t)trace_unzigzag(z);
        f[i] = prev;
    }
    mt_trace_stack *s = stack_slot(d->stacks, d->stacks_mask, (uint32_t)id);
    if (s->nframes == UINT32_MAX)
        d->nstacks++;
    else /* defined again: the old frames serve the next stack of their size */
        frames_put(d, (uint64_t *)s->frames, s->nframes);
    s->id = (uint32_t)id;
    s->category = (unsigned)cat;
    s->nframes = (uint32_t)n;
    s->frames = f;
    return 0;
}

static int def_thread(trace_defs *d, cursor *c, char *why, size_t whylen)
{
    uint64_t idx, tid;
    if (get(c, &idx) < 0 || get(c, &tid) < 0 || tid > UINT32_MAX)
        FAIL("bad thread record");
    if (idx >= MAX_THREADS || idx > d->nthreads) /* indexes come in order: 0, 1, 2, ... */
        FAIL("thread index %llu out of order (%u defined)", (unsigned long long)idx, d->nthreads);
    if (idx >= d->threads_cap) {
        uint32_t cap = d->threads_cap ? d->threads_cap : 64;
        while (cap <= idx)
            cap *= 2;
        if (charge(d, (size_t)(cap - d->threads_cap) * (sizeof *d->tids + 1)) < 0)
            FAIL(TOO_MUCH);
        uint32_t *t = realloc(d->tids, cap * sizeof *t);
        if (!t)
            FAIL("out of memory");
        d->tids = t;
        unsigned char *k = realloc(d->tid_known, cap);
        if (!k)
            FAIL("out of memory");
        memset(k + d->threads_cap, 0, cap - d->threads_cap);
        d->tid_known = k;
        d->threads_cap = cap;
    }
    d->tids[idx] = (uint32_t)tid;
    d->tid_known[idx] = 1;
    if (idx >= d->nthreads)
        d->nthreads = (uint32_t)idx + 1;
    return 0;
}

static int def_module(trace_defs *d, cursor *c, char *why, size_t whylen)
{
    uint64_t start, len, bias;
    const unsigned char *bid, *path;
    size_t bidn, pathn;
    if (get(c, &start) < 0 || get(c, &len) < 0 || len > UINT64_MAX - start || get(c, &bias) < 0 ||
        get_bytes(c, 255, &bid, &bidn) < 0 || get_bytes(c, TRACE_MAX_STRING, &path, &pathn) < 0)
        FAIL("bad module record");
    int over = 0;
    if (d->nmodules == d->modules_cap) {
        size_t cap = d->modules_cap ? d->modules_cap * 2 : 16;
        if (charge(d, (cap - d->modules_cap) * sizeof(mt_trace_module)) < 0)
            FAIL(TOO_MUCH);
        mt_trace_module *m = realloc(d->modules, cap * sizeof *m);
        if (!m) {
            uncharge(d, (cap - d->modules_cap) * sizeof *m);
            FAIL("out of memory");
        }
        d->modules = m;
        d->modules_cap = cap;
    }
    mt_trace_module *m = &d->modules[d->nmodules];
    m->start = start;
    m->end = start + len;
    m->bias = bias;
    m->path = dup_text(d, path, pathn, &over);
    m->build_id = bidn && m->path ? (const unsigned char *)dup_counted(d, bid, bidn, &over) : NULL;
    m->build_id_len = (unsigned)bidn;
    if (!m->path || (bidn && !m->build_id)) {
        free_counted(d, (char *)m->path);
        if (over)
            FAIL(TOO_MUCH);
        FAIL("out of memory");
    }
    d->nmodules++;
    return 0;
}

static int def_category(trace_defs *d, cursor *c, char *why, size_t whylen)
{
    uint64_t id;
    const unsigned char *s;
    size_t n;
    if (get(c, &id) < 0 || id > 255 || get_bytes(c, TRACE_MAX_STRING, &s, &n) < 0)
        FAIL("bad category record");
    int over = 0;
    char *name = dup_text(d, s, n, &over);
    if (!name && over)
        FAIL(TOO_MUCH);
    if (!name)
        FAIL("out of memory");
    free_counted(d, d->categories[id]);
    d->categories[id] = name;
    return 0;
}

static int def_meta(trace_defs *d, cursor *c, char *why, size_t whylen)
{
    const unsigned char *k, *v;
    size_t kn, vn;
    if (get_bytes(c, TRACE_MAX_STRING, &k, &kn) < 0 || get_bytes(c, TRACE_MAX_STRING, &v, &vn) < 0)
        FAIL("bad meta record");
    const unsigned char *nul = memchr(k, 0, kn);
    if (nul)
        kn = (size_t)(nul - k); /* the key as it is kept, a C string */
    size_t at = 0;
    while (at < d->nmeta && !(strlen(d->meta[2 * at]) == kn && !memcmp(d->meta[2 * at], k, kn)))
        at++;
    /* The writer has a handful of keys, each written once or twice; a key
     * is looked for among all of them. */
    if (at == d->nmeta && d->nmeta == TRACE_DEFS_MAX_META)
        FAIL("more than %u meta keys", TRACE_DEFS_MAX_META);
    int over = 0;
    char *val = dup_text(d, v, vn, &over);
    if (!val && over)
        FAIL(TOO_MUCH);
    if (!val)
        FAIL("out of memory");
    if (at < d->nmeta) {
        free_counted(d, d->meta[2 * at + 1]);
        d->meta[2 * at + 1] = val;
        return 0;
    }
    char *key = dup_text(d, k, kn, &over);
    char **m = key ? realloc(d->meta, (d->nmeta + 1) * 2 * sizeof *m) : NULL;
    if (!m) {
        free_counted(d, key);
        free_counted(d, val);
        if (over)
            FAIL(TOO_MUCH);
        FAIL("out of memory");
    }
    d->meta = m;
    m[2 * d->nmeta] = key;
    m[2 * d->nmeta + 1] = val;
    d->nmeta++;
    return 0;
}

int trace_defs_parse(trace_defs *d, const unsigned char *p, size_t n, uint32_t count, char *why,
                     size_t whylen)
{
    cursor c = {p, p + n};
    for (uint32_t i = 0; i < count; i++) {
        if (c.p >= c.end)
            FAIL("%u definitions, the body holds %u", count, i);
        unsigned kind = *c.p++;
        int rc;
        switch (kind) {
        case TRACE_DEF_THREAD: rc = def_thread(d, &c, why, whylen); break;
        case TRACE_DEF_STACK: rc = def_stack(d, &c, why, whylen); break;
        case TRACE_DEF_MODULE: rc = def_module(d, &c, why, whylen); break;
        case TRACE_DEF_CATEGORY: rc = def_category(d, &c, why, whylen); break;
        case TRACE_DEF_META: rc = def_meta(d, &c, why, whylen); break;
        default: FAIL("unknown definition kind %u (record %u)", kind, i);
        }
        if (rc < 0)
            return rc;
    }
    if (c.p != c.end)
        FAIL("%zu bytes after the last definition", (size_t)(c.end - c.p));
    return 0;
}

int trace_end_parse(trace_defs *d, const unsigned char *p, size_t n, uint32_t count, char *why, size_t whylen)
{
    cursor c = {p, p + n};
    if (count > n)
        FAIL("%u statistics in %zu bytes", count, n);
    /* The writer writes a few; each costs more in memory than in the file. */
    if (count > TRACE_MAX_STATS)
        FAIL("%u statistics in the end record (at most %u)", count, TRACE_MAX_STATS);
    char **names = calloc(count ? count : 1, sizeof *names);
    uint64_t *vals = calloc(count ? count : 1, sizeof *vals);
    if (!names || !vals) {
        free(names);
        free(vals);
        FAIL("out of memory");
    }
    uint32_t i = 0;
    for (; i < count; i++) {
        const unsigned char *s;
        size_t sn;
        if (get_bytes(&c, TRACE_MAX_STRING, &s, &sn) < 0 || get(&c, &vals[i]) < 0 ||
            !(names[i] = dup_str(s, sn)))
            break;
    }
    if (i < count || c.p != c.end) {
        for (uint32_t k = 0; k < i; k++)
            free(names[k]);
        free(names);
        free(vals);
        FAIL("bad end record (statistic %u)", i);
    }
    for (size_t k = 0; k < d->nstats; k++)
        free(d->stat_names[k]);
    free(d->stat_names);
    free(d->stat_values);
    d->stat_names = names;
    d->stat_values = vals;
    d->nstats = count;
    return 0;
}

int trace_index_parse(const unsigned char *p, size_t n, uint32_t count, uint32_t unit,
                      mt_trace_chunk_info *out, char *why, size_t whylen)
{
    cursor c = {p, p + n};
    for (uint32_t i = 0; i < count; i++) {
        uint64_t off, cnt, t0, dt;
        if (c.p >= c.end)
            FAIL("index entry %u missing", i);
        unsigned kind = *c.p++;
        if (get(&c, &off) < 0 || get(&c, &cnt) < 0 || cnt > UINT32_MAX || get(&c, &t0) < 0 ||
            get(&c, &dt) < 0)
            FAIL("bad index entry %u", i);
        out[i].offset = off;
        out[i].kind = kind;
        out[i].count = (uint32_t)cnt;
        int64_t first = trace_unzigzag(t0);
        out[i].first_ns = (uint64_t)first * unit;
        out[i].last_ns = ((uint64_t)first + dt) * unit;
    }
    if (c.p != c.end)
        FAIL("%zu bytes after the last index entry", (size_t)(c.end - c.p));
    return 0;
}

void trace_defs_free(trace_defs *d)
{
    free(d->tids);
    free(d->tid_known);
    free(d->stacks);
    for (void **b = d->arena; b;) {
        void **next = b[0];
        free(b);
        b = next;
    }
    for (size_t i = 0; i < d->nmodules; i++) {
        free((void *)d->modules[i].path);
        free((void *)d->modules[i].build_id);
    }
    free(d->modules);
    for (int i = 0; i < 256; i++)
        free(d->categories[i]);
    for (size_t i = 0; i < 2 * d->nmeta; i++)
        free(d->meta[i]);
    free(d->meta);
    for (size_t i = 0; i < d->nstats; i++)
        free(d->stat_names[i]);
    free(d->stat_names);
    free(d->stat_values);
    memset(d, 0, sizeof *d);
}

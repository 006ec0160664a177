/* analyze.c — the analysis of a trace's events, one at a time, in O(1)
 * per event: totals, live bytes and their peak, the stacks live at the
 * peak (a per-stack snapshot taken lazily: a stack's value at the last
 * peak is saved the first time it changes after that peak), leaks,
 * temporary allocations, counters per stack and category, the size
 * histogram and a timeline of live bytes whose buckets double in width
 * when time outruns them. Semantics: docs/trace-analysis.md. */
#include "analyze/analyze.h"
#include "analyze/analyze_live.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A thread's last malloc-family call, for temporary allocations. */
struct thread {
    uint32_t tid;
    uint32_t last_id; /* the block its last call allocated, or resized when it was still the one before */
    bool has_last;
    bool used;
};

struct analyzer {
    struct analyze_result res;
    struct analyze_live live;
    size_t stacks_cap;
    /* (category << 32 | stack id) + 1 -> index in res.stacks, open addressing */
    uint64_t *skeys;
    uint32_t *svals;
    size_t scap;
    uint64_t skey_cache[64]; /* by key % 64, as the thread cache: key + 1 -> index */
    uint32_t sidx_cache[64];
    struct thread *threads;
    size_t tcap, tn;
    struct thread *tcache[64]; /* by tid % 64: threads interleave, a direct-mapped cache stays predictable */
    uint64_t epoch;            /* peaks reached so far */
    unsigned shift;            /* timeline bucket width: 2^shift ns */
    size_t nbuckets, cur;      /* buckets, the last one used */
    bool started;
    char *file;                           /* analyze_set_file */
    uint8_t cat_used[ANALYZE_CATEGORIES]; /* the categories used, in order of first use */
    unsigned ncat_used;
};

static void *grow_array(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(p, cap2 * size);
    if (q)
        *cap = cap2;
    return q;
}

struct analyzer *analyze_new(unsigned timeline_buckets)
{
    struct analyzer *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->nbuckets = timeline_buckets >= 2 ? timeline_buckets : ANALYZE_TIMELINE;
    a->res.timeline = calloc(a->nbuckets, sizeof *a->res.timeline);
    a->res.timeline_cat = calloc(a->nbuckets * ANALYZE_CATEGORIES, sizeof *a->res.timeline_cat);
    if (!a->res.timeline || !a->res.timeline_cat || analyze_live_init(&a->live) < 0) {
        analyze_free(a);
        return NULL;
    }
    a->res.bucket_ns = 1;
    return a;
}

void analyze_free(struct analyzer *a)
{
    if (!a)
        return;
    analyze_live_free(&a->live);
    free(a->res.stacks);
    free(a->res.timeline);
    free(a->res.timeline_cat);
    for (size_t i = 0; i < a->res.nparent_stacks; i++)
        free((void *)a->res.parent_stacks[i].frames);
    free(a->res.parent_stacks);
    for (size_t i = 0; i < a->res.nparent_modules; i++) {
        free((void *)a->res.parent_modules[i].path);
        free((void *)a->res.parent_modules[i].build_id);
    }
    free(a->res.parent_modules);
    free(a->file);
    free(a->skeys);
    free(a->svals);
    free(a->threads);
    free(a);
}

const struct analyze_result *analyze_result(const struct analyzer *a)
{
    return &a->res;
}
struct analyze_result *analyze_result_edit(struct analyzer *a)
{
    return &a->res;
}
void analyze_set_file(struct analyzer *a, const char *path)
{
    free(a->file);
    a->file = path ? strdup(path) : NULL;
}
const char *analyze_file_name(const struct analyzer *a)
{
    return a->file;
}
uint64_t analyze_map_bytes(const struct analyzer *a)
{
    return analyze_live_bytes(&a->live);
}

/* --- stacks and threads --------------------------------------------------- */

static inline size_t hash64(uint64_t k, size_t cap)
{
    return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

static int stacks_rehash(struct analyzer *a)
{
    size_t cap = a->scap ? a->scap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    for (size_t i = 0; i < a->scap; i++) {
        if (!a->skeys[i])
            continue;
        size_t j = hash64(a->skeys[i], cap);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = a->skeys[i];
        vals[j] = a->svals[i];
    }
    free(a->skeys);
    free(a->svals);
    a->skeys = keys;
    a->svals = vals;
    a->scap = cap;
    return 0;
}

/* The index of (stack, category) in res.stacks, added when new; -1 on ENOMEM. */
static inline int64_t stack_index(struct analyzer *a, uint32_t stack, unsigned category)
{
    uint64_t key = ((uint64_t)category << 32 | stack) + 1;
    unsigned c = (unsigned)(key ^ key >> 32) % 64;
    if (a->skey_cache[c] == key)
        return a->sidx_cache[c];
    size_t j = 0;
    if (a->scap) {
        for (j = hash64(key, a->scap); a->skeys[j]; j = (j + 1) & (a->scap - 1))
            if (a->skeys[j] == key) {
                a->skey_cache[c] = key;
                return a->sidx_cache[c] = a->svals[j];
            }
    }
    struct analyze_result *r = &a->res;
    if ((r->nstacks + 1) * 2 > a->scap) {
        if (stacks_rehash(a) < 0)
            return -1;
        for (j = hash64(key, a->scap); a->skeys[j]; j = (j + 1) & (a->scap - 1))
            ;
    }
    struct analyze_stack *s = grow_array(r->stacks, &a->stacks_cap, r->nstacks + 1, sizeof *s);
    if (!s)
        return -1;
    r->stacks = s;
    s = &r->stacks[r->nstacks];
    memset(s, 0, sizeof *s);
    s->id = stack;
    s->category = (uint8_t)category;
    a->skeys[j] = key;
    a->svals[j] = (uint32_t)r->nstacks;
    a->skey_cache[c] = key;
    a->sidx_cache[c] = (uint32_t)r->nstacks;
    if (!r->categories[category & 0xff].used) {
        r->categories[category & 0xff].used = true;
        a->cat_used[a->ncat_used++] = (uint8_t)category;
    }
    return (int64_t)r->nstacks++;
}

static int threads_rehash(struct analyzer *a)
{
    size_t cap = a->tcap ? a->tcap * 2 : 64;
    struct thread *t = calloc(cap, sizeof *t);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < a->tcap; i++) {
        if (!a->threads[i].used)
            continue;
        size_t j = hash64(a->threads[i].tid, cap);
        while (t[j].used)
            j = (j + 1) & (cap - 1);
        t[j] = a->threads[i];
    }
    free(a->threads);
    a->threads = t;
    a->tcap = cap;
    memset(a->tcache, 0, sizeof a->tcache);
    return 0;
}

static inline struct thread *thread_of(struct analyzer *a, uint32_t tid)
{
    struct thread **c = &a->tcache[tid % 64];
    if (*c && (*c)->tid == tid)
        return *c;
    if ((a->tn + 1) * 2 > a->tcap && threads_rehash(a) < 0)
        return NULL;
    size_t j = hash64(tid, a->tcap);
    while (a->threads[j].used && a->threads[j].tid != tid)
        j = (j + 1) & (a->tcap - 1);
    struct thread *t = &a->threads[j];
    if (!t->used) {
        t->used = true;
        t->tid = tid;
        a->tn++;
    }
    return *c = t;
}

/* --- the timeline --------------------------------------------------------- */

/* Bucket i's live bytes by category: row i of timeline_cat. */
static inline uint64_t *cat_row(struct analyzer *a, size_t i)
{
    return &a->res.timeline_cat[i * ANALYZE_CATEGORIES];
}

/* The categories' live bytes now, as bucket i's at its end (only those
 * used: the others are 0 in every row). Off the hot path. */
static __attribute__((noinline, cold)) void cat_row_save(struct analyzer *a, size_t i)
{
    uint64_t *row = cat_row(a, i);
    for (unsigned k = 0; k < a->ncat_used; k++)
        row[a->cat_used[k]] = a->res.categories[a->cat_used[k]].live_bytes;
}

/* Halves the timeline's resolution: bucket pairs merged. */
static void timeline_merge(struct analyzer *a)
{
    struct analyze_bucket *b = a->res.timeline;
    size_t n = a->nbuckets;
    for (size_t i = 0; i < n / 2; i++) {
        struct analyze_bucket x = b[2 * i], y = b[2 * i + 1];
        size_t end = 2 * i + 1 > a->cur ? 2 * i : 2 * i + 1; /* the half whose end is the pair's end */
        memmove(cat_row(a, i), cat_row(a, end), ANALYZE_CATEGORIES * sizeof(uint64_t));
        if (2 * i + 1 > a->cur)
            b[i] = x; /* its second half has not started */
        else
            b[i] =
                (struct analyze_bucket){.live_bytes = y.live_bytes,
                                        .max_bytes = x.max_bytes > y.max_bytes ? x.max_bytes : y.max_bytes};
    }
    memset(b + n / 2, 0, (n - n / 2) * sizeof *b);
    memset(cat_row(a, n / 2), 0, (n - n / 2) * ANALYZE_CATEGORIES * sizeof(uint64_t));
    a->cur /= 2;
    a->shift++;
}

/* The bucket of time t, created (the ones before it filled with the live
 * bytes as they were). Times before the last bucket count in it. */
static struct analyze_bucket *timeline_at(struct analyzer *a, uint64_t t)
{
    uint64_t i = a->shift < 64 ? t >> a->shift : 0;
    if (i <= a->cur)
        return &a->res.timeline[a->cur];
    while (i >= a->nbuckets) {
        timeline_merge(a);
        i = a->shift < 64 ? t >> a->shift : 0;
    }
    uint64_t live = a->res.timeline[a->cur].live_bytes;
    for (size_t k = a->cur + 1; k <= i; k++) {
        a->res.timeline[k] = (struct analyze_bucket){.live_bytes = live, .max_bytes = live};
        memcpy(cat_row(a, k), cat_row(a, a->cur), ANALYZE_CATEGORIES * sizeof(uint64_t));
    }
    a->cur = (size_t)i;
    return &a->res.timeline[i];
}

/* The first time past the current bucket (UINT64_MAX: none). */
static inline uint64_t timeline_end(const struct analyzer *a)
{
    if (a->shift >= 64 || (uint64_t)a->cur + 1 > UINT64_MAX >> a->shift)
        return UINT64_MAX;
    return ((uint64_t)a->cur + 1) << a->shift;
}

/* --- events --------------------------------------------------------------- */

/* The figures every event changes, held in registers over a batch. */
struct hot {
    uint64_t live, count; /* live bytes and blocks */
    uint64_t epoch;       /* peaks reached so far */
};

/* Before stack s's live figures change: keep their value at the last peak. */
static inline void touch(struct analyze_stack *s, uint64_t epoch)
{
    if (s->snap_epoch != epoch) {
        s->snap_epoch = epoch;
        s->peak_bytes = s->live_bytes;
        s->peak_count = s->live_count;
    }
}

static inline void stack_add(struct analyzer *a, struct hot *h, struct analyze_stack *s, uint64_t size)
{
    touch(s, h->epoch);
    s->live_bytes += size;
    s->live_count++;
    if (s->live_bytes > s->max_live_bytes)
        s->max_live_bytes = s->live_bytes;
    struct analyze_category *c = &a->res.categories[s->category];
    c->live_bytes += size;
    c->live_count++;
    if (c->live_bytes > c->peak_bytes)
        c->peak_bytes = c->live_bytes;
    h->live += size;
    h->count++;
}

static inline void stack_sub(struct analyzer *a, struct hot *h, struct analyze_stack *s, uint64_t size)
{
    touch(s, h->epoch);
    s->live_bytes -= size;
    s->live_count--;
    struct analyze_category *c = &a->res.categories[s->category];
    c->live_bytes -= size;
    c->live_count--;
    h->live -= size;
    h->count--;
}

static inline void histogram(struct analyze_result *r, uint64_t size)
{
    int k = size ? 64 - __builtin_clzll(size) : 0;
    r->hist_count[k]++;
    r->hist_bytes[k] += size;
    r->max_size = size > r->max_size ? size : r->max_size;
}

/* The block id freed by thread t: a temporary when no other call of t came
 * between its allocation and this free (reallocs of it only: last_id). */
static inline void free_block(struct analyzer *a, struct hot *h, struct thread *t, struct analyze_stack *s,
                              uint32_t id, uint64_t size)
{
    stack_sub(a, h, s, size);
    if (t && t->has_last && t->last_id == id) {
        s->temp_count++;
        s->temp_bytes += size;
        a->res.temp_count++;
        a->res.temp_bytes += size;
    }
}

/* An id allocated while live: the older block is forgotten (not freed). */
static inline void drop_reused(struct analyzer *a, struct hot *h, uint64_t size, uint32_t sidx)
{
    stack_sub(a, h, &a->res.stacks[sidx], size);
    a->res.ids_reused++;
}

static inline void on_free(struct analyzer *a, struct hot *h, const mt_trace_event *ev, struct thread *t)
{
    uint64_t size;
    uint32_t sidx;
    if (ev->id != 0 && analyze_live_take_fast(&a->live, ev->id, &size, &sidx) == 1) {
        struct analyze_stack *s = &a->res.stacks[sidx];
        free_block(a, h, t, s, ev->id, size);
        s->frees++;
        a->res.categories[s->category].frees++;
        a->res.frees++;
    } else {
        a->res.frees_unknown++;
    }
    if (t)
        t->has_last = false;
}

static inline int on_alloc(struct analyzer *a, struct hot *h, const mt_trace_event *ev, struct thread *t,
                           uint32_t si)
{
    struct analyze_result *r = &a->res;
    uint64_t osize;
    uint32_t ostack;
    int rc = analyze_live_put_fast(&a->live, ev->id, ev->size, si, &osize, &ostack);
    if (rc < 0)
        return rc;
    if (rc == 1)
        drop_reused(a, h, osize, ostack);
    struct analyze_stack *s = &r->stacks[si];
    stack_add(a, h, s, ev->size);
    s->allocs++;
    s->allocated_bytes += ev->size;
    r->categories[s->category].allocs++;
    r->allocs++;
    r->allocated_bytes += ev->size;
    histogram(r, ev->size);
    if (t) {
        t->has_last = true;
        t->last_id = ev->id;
    }
    return 0;
}

static inline int on_realloc(struct analyzer *a, struct hot *h, const mt_trace_event *ev, struct thread *t,
                             uint32_t si)
{
    struct analyze_result *r = &a->res;
    uint64_t osize;
    uint32_t ostack;
    bool known = analyze_live_take_fast(&a->live, ev->old_id, &osize, &ostack) == 1;
    uint64_t nsize;
    uint32_t nstack;
    int rc = analyze_live_put_fast(&a->live, ev->id, ev->size, si, &nsize, &nstack);
    if (rc < 0)
        return rc;
    if (rc == 1)
        drop_reused(a, h, nsize, nstack);
    struct analyze_stack *s = &r->stacks[si];
    r->reallocs++;
    r->categories[s->category].reallocs++;
    histogram(r, ev->size);
    /* A realloc resizes a block, it does not end it: the block is still
     * temporary if it is freed next, counted once; and only if nothing but
     * reallocs of it came since its allocation (the thread's last call). */
    bool fresh = t && known && t->has_last && t->last_id == ev->old_id;
    uint64_t grown;
    if (known && ostack == si) {
        /* resized where it was allocated: a realloc of this stack */
        stack_sub(a, h, s, osize);
        stack_add(a, h, s, ev->size);
        s->reallocs++;
        grown = ev->size > osize ? ev->size - osize : 0;
    } else {
        if (known) {
            /* moved to another stack: a free there, an allocation here */
            stack_sub(a, h, &r->stacks[ostack], osize);
            r->stacks[ostack].frees++;
        } else {
            r->reallocs_unknown++;
        }
        stack_add(a, h, s, ev->size);
        s->allocs++;
        grown = ev->size;
    }
    s->allocated_bytes += grown;
    /* The total counts a block once, wherever it moves: a realloc adds its
     * growth, or its new size when the trace does not hold the old block. */
    r->allocated_bytes += !known ? ev->size : ev->size > osize ? ev->size - osize : 0;
    if (t) {
        t->has_last = fresh;
        t->last_id = ev->id;
    }
    return 0;
}

/* The id whose live entry an event looks up. */
static inline uint32_t lookup_id(const mt_trace_event *ev)
{
    return ev->type == MT_TRACE_REALLOC ? ev->old_id : ev->id;
}

#define AHEAD 16 /* events between a table header's prefetch and its bucket's, and the bucket's and use */

int analyze_events(struct analyzer *a, const mt_trace_event *ev, size_t n)
{
    struct analyze_result *r = &a->res;
    if (n == 0)
        return 0;
    if (!a->started) {
        a->started = true;
        r->first_ns = ev[0].time_ns;
    }
    struct hot h = {.live = r->live_bytes, .count = r->live_count, .epoch = a->epoch};
    uint64_t peak = r->peak_bytes, last_ns = r->last_ns;
    struct analyze_bucket *b = &r->timeline[a->cur];
    uint64_t b_max = b->max_bytes, b_end = timeline_end(a);
    /* the last thread and stack seen, before the caches */
    struct thread *lt = NULL;
    uint32_t ltid = 0;
    uint64_t lkey = 0;
    uint32_t lsi = 0;
    /* The ring slot each event looks up is prefetched AHEAD events before
     * it is used; when the tables hold many entries too, a table's header
     * 2 x AHEAD before and its bucket AHEAD before. */
    bool tables = a->live.ccount >= 32768;
    if (tables)
        for (size_t i = 0; i < n && i < 2 * AHEAD; i++)
            analyze_live_prefetch(&a->live, lookup_id(&ev[i]), 0);
    else
        for (size_t i = 0; i < n && i < AHEAD; i++)
            analyze_live_prefetch_ring(&a->live, lookup_id(&ev[i]));
    int rc = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        const mt_trace_event *e = &ev[i];
        if (tables) {
            if (i + 2 * AHEAD < n)
                analyze_live_prefetch(&a->live, lookup_id(&ev[i + 2 * AHEAD]), 0);
            if (i + AHEAD < n)
                analyze_live_prefetch(&a->live, lookup_id(&ev[i + AHEAD]), 1);
        } else if (i + AHEAD < n) {
            analyze_live_prefetch_ring(&a->live, lookup_id(&ev[i + AHEAD]));
        }
        uint64_t t = e->time_ns;
        last_ns = t > last_ns ? t : last_ns;
        if (__builtin_expect(t >= b_end, 0)) {
            b->live_bytes = h.live;
            b->max_bytes = b_max;
            cat_row_save(a, a->cur);
            b = timeline_at(a, t);
            b_max = b->max_bytes;
            b_end = timeline_end(a);
        }
        unsigned type = e->type;
        if (type <= MT_TRACE_REALLOC && type >= MT_TRACE_ALLOC) {
            struct thread *th = lt;
            if (__builtin_expect(e->thread != ltid || !lt, 0)) {
                th = lt = thread_of(a, e->thread);
                ltid = e->thread;
            }
            if (type == MT_TRACE_FREE) {
                on_free(a, &h, e, th);
            } else {
                uint64_t key = ((uint64_t)e->category << 32 | e->stack) + 1;
                if (__builtin_expect(key != lkey, 0)) {
                    int64_t si = stack_index(a, e->stack, e->category);
                    if (si < 0) {
                        rc = -ENOMEM;
                        break;
                    }
                    lkey = key;
                    lsi = (uint32_t)si;
                }
                rc = type == MT_TRACE_ALLOC ? on_alloc(a, &h, e, th, lsi) : on_realloc(a, &h, e, th, lsi);
                if (rc < 0)
                    break;
                if (h.live > peak) {
                    peak = h.live;
                    r->peak_count = h.count;
                    r->peak_time_ns = t;
                    h.epoch++;
                }
            }
        } else if (type == MT_TRACE_MMAP) {
            r->mmaps++;
            r->mapped_bytes += e->size;
            if (r->mapped_bytes > r->mapped_peak)
                r->mapped_peak = r->mapped_bytes;
        } else if (type == MT_TRACE_MUNMAP) {
            r->munmaps++;
            r->mapped_bytes = e->size < r->mapped_bytes ? r->mapped_bytes - e->size : 0;
        }
        b_max = h.live > b_max ? h.live : b_max;
    }
    b->live_bytes = h.live;
    b->max_bytes = b_max;
    cat_row_save(a, a->cur);
    r->events += rc < 0 ? i + 1 : n;
    r->live_bytes = h.live;
    r->live_count = h.count;
    r->peak_bytes = peak;
    r->last_ns = last_ns;
    a->epoch = h.epoch;
    return rc;
}

int analyze_event(struct analyzer *a, const mt_trace_event *ev)
{
    return analyze_events(a, ev, 1);
}

void analyze_end(struct analyzer *a)
{
    struct analyze_result *r = &a->res;
    for (size_t i = 0; i < r->nstacks; i++) {
        struct analyze_stack *s = &r->stacks[i];
        if (s->snap_epoch != a->epoch) { /* unchanged since the peak */
            s->peak_bytes = s->live_bytes;
            s->peak_count = s->live_count;
        }
        s->snap_epoch = a->epoch;
    }
    analyze_live_free(&a->live); /* not needed any more: its memory goes to the report */
    r->ntimeline = a->started ? a->cur + 1 : 0;
    r->bucket_ns = a->shift < 64 ? (uint64_t)1 << a->shift : 0;
}

/* --- a forked child's first live set --------------------------------------- */

struct take {
    struct analyzer *a;
    const struct analyze_result *from;
    struct hot h;
    int rc;
};

static void take_one(void *ctx, uint32_t id, uint64_t size, uint32_t sidx)
{
    struct take *t = ctx;
    if (t->rc < 0)
        return;
    const struct analyze_stack *ps = &t->from->stacks[sidx];
    int64_t si = stack_index(t->a, ps->id, ps->category);
    uint64_t osize;
    uint32_t ostack;
    int rc = si < 0 ? -ENOMEM : analyze_live_put(&t->a->live, id, size, (uint32_t)si, &osize, &ostack);
    if (rc < 0) {
        t->rc = rc;
        return;
    }
    if (rc == 1) /* not in one map: ids are unique there; kept safe all the same */
        drop_reused(t->a, &t->h, osize, ostack);
    stack_add(t->a, &t->h, &t->a->res.stacks[si], size);
}

int analyze_take_live(struct analyzer *a, const struct analyzer *parent)
{
    struct analyze_result *r = &a->res;
    struct take t = {.a = a,
                     .from = &parent->res,
                     .h = {.live = r->live_bytes, .count = r->live_count, .epoch = a->epoch}};
    analyze_live_each(&parent->live, take_one, &t);
    r->live_bytes = t.h.live;
    r->live_count = t.h.count;
    r->inherited.count = t.h.count;
    r->inherited.bytes = t.h.live;
    if (r->live_bytes > r->peak_bytes) {
        /* the blocks the child starts with: its first peak, at time 0 */
        r->peak_bytes = r->live_bytes;
        r->peak_count = r->live_count;
        r->peak_time_ns = 0;
        a->epoch = t.h.epoch + 1;
    }
    r->timeline[a->cur] = (struct analyze_bucket){.live_bytes = r->live_bytes, .max_bytes = r->live_bytes};
    cat_row_save(a, a->cur);
    return t.rc;
}

struct analyze_live *analyze_live_of(struct analyzer *a)
{
    return &a->live;
}

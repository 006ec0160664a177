/* analyze_symbols.c — a trace's stacks symbolized straight from the
 * trace's module list (symbol.h takes modules, not reports), and the
 * modules opened ahead while the trace is analysed: the reading thread
 * (analyze_run_peek) notes the stacks of the first events, then hands their
 * frames and the modules known so far to a thread that opens them, in the
 * same pass over the file. */
#include "analyze/analyze.h"
#include "symbol/symbol.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A trace module's build-id in lowercase hex (malloc'd), or NULL. */
static char *hex_of(const mt_trace_module *m)
{
    if (!m->build_id || !m->build_id_len)
        return NULL;
    static const char digits[] = "0123456789abcdef";
    char *s = malloc(2 * (size_t)m->build_id_len + 1);
    if (!s)
        return NULL;
    for (unsigned i = 0; i < m->build_id_len; i++) {
        s[2 * i] = digits[m->build_id[i] >> 4];
        s[2 * i + 1] = digits[m->build_id[i] & 15];
    }
    s[2 * m->build_id_len] = '\0';
    return s;
}

/* The modules so far (the reader's, and a forked child's parent's) as the
 * symbolizer takes them; their build-ids are malloc'd (free_modules),
 * their paths the reader's or the result's. */
static struct sym_module *modules_of(const struct analyze_result *res, mt_trace_reader *tr, size_t *n)
{
    size_t count;
    const mt_trace_module **ms = analyze_modules(res, tr, &count);
    struct sym_module *mods = ms ? calloc(count + 1, sizeof *mods) : NULL;
    *n = 0;
    for (size_t i = 0; mods && i < count; i++) {
        const mt_trace_module *m = ms[i];
        mods[*n] = (struct sym_module){.path = m->path, .bias = m->bias, .start = m->start, .end = m->end};
        if (m->build_id && m->build_id_len && !(mods[*n].buildid = hex_of(m))) {
            for (size_t k = 0; k < *n; k++)
                free((char *)mods[k].buildid);
            free(mods);
            mods = NULL;
            break;
        }
        (*n)++;
    }
    free(ms);
    return mods;
}

static void free_modules(struct sym_module *mods, size_t n)
{
    for (size_t i = 0; mods && i < n; i++)
        free((char *)mods[i].buildid);
    free(mods);
}

struct symbolizer *analyze_symbolizer(const struct analyze_result *res, mt_trace_reader *tr,
                                      struct sym_cache *c)
{
    size_t n;
    struct sym_module *mods = modules_of(res, tr, &n);
    if (!mods)
        return NULL;
    struct symbolizer *s = sym_open_cached(mods, n, c);
    free_modules(mods, n);
    for (size_t i = 0; s && i < res->nstacks; i++) {
        const mt_trace_stack *st = analyze_stack_frames(res, tr, res->stacks[i].id);
        if (st)
            sym_prepare(s, st->frames, st->nframes);
    }
    return s;
}

/* --- modules opened ahead ------------------------------------------------- */

struct analyze_preload {
    uint64_t want, seen; /* events to look at, and looked at */
    uint32_t *set;       /* distinct stack ids + 1, open addressing */
    size_t cap, n;
    struct sym_module *mods; /* handed to the thread */
    size_t nmods;
    uint64_t *addresses;
    size_t naddresses;
    struct sym_cache *cache;
    pthread_t thread;
    bool running;
};

struct analyze_preload *analyze_preload_new(uint64_t events)
{
    struct analyze_preload *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->want = events;
    p->cap = 256;
    p->set = calloc(p->cap, sizeof *p->set);
    p->cache = sym_cache_new();
    if (!p->set || !p->cache) {
        analyze_preload_free(p);
        return NULL;
    }
    return p;
}

static size_t slot(uint32_t key, size_t cap)
{
    return (key * 0x9e3779b1u) & (cap - 1);
}

/* 0, or -1 when out of memory (the set stays as it was). */
static int add_stack(struct analyze_preload *p, uint32_t key)
{
    if ((p->n + 1) * 2 > p->cap) {
        uint32_t *grown = calloc(2 * p->cap, sizeof *grown);
        if (!grown)
            return -1;
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->set[i])
                continue;
            size_t j = slot(p->set[i], 2 * p->cap);
            while (grown[j])
                j = (j + 1) & (2 * p->cap - 1);
            grown[j] = p->set[i];
        }
        free(p->set);
        p->set = grown;
        p->cap *= 2;
    }
    size_t j = slot(key, p->cap);
    while (p->set[j] && p->set[j] != key)
        j = (j + 1) & (p->cap - 1);
    if (!p->set[j]) {
        p->set[j] = key;
        p->n++;
    }
    return 0;
}

static void *opening(void *arg)
{
    struct analyze_preload *p = arg;
    pthread_setname_np(pthread_self(), "memtrail-sym");
    sym_cache_load(p->cache, p->mods, p->nmods, p->addresses, p->naddresses);
    return NULL;
}

/* On the reading thread: the frames of the stacks seen and the modules
 * known (copied: the reader goes on), then the thread that opens them. */
static void start(struct analyze_preload *p, mt_trace_reader *r)
{
    size_t total = 0;
    for (size_t i = 0; i < p->cap; i++) {
        const mt_trace_stack *st = p->set[i] ? mt_trace_stack_get(r, p->set[i] - 1) : NULL;
        total += st ? st->nframes : 0;
    }
    /* The paths copied too: the thread outlives nothing of the reader's. */
    p->mods = modules_of(NULL, r, &p->nmods); /* the trace's own: the preload is a guess */
    for (size_t i = 0; p->mods && i < p->nmods; i++) {
        char *path = strdup(p->mods[i].path ? p->mods[i].path : "");
        if (!path) {
            for (size_t k = i; k < p->nmods; k++)
                free((char *)p->mods[k].buildid);
            p->nmods = i;
            break;
        }
        p->mods[i].path = path;
    }
    p->addresses = malloc((total + 1) * sizeof *p->addresses);
    if (!p->addresses || !p->mods)
        return;
    for (size_t i = 0; i < p->cap; i++) {
        const mt_trace_stack *st = p->set[i] ? mt_trace_stack_get(r, p->set[i] - 1) : NULL;
        if (st && st->nframes) {
            memcpy(p->addresses + p->naddresses, st->frames, st->nframes * sizeof *st->frames);
            p->naddresses += st->nframes;
        }
    }
    p->running = pthread_create(&p->thread, NULL, opening, p) == 0;
}

bool analyze_preload_peek(void *ctx, mt_trace_reader *r, const mt_trace_event *ev, size_t n, bool last)
{
    struct analyze_preload *p = ctx;
    for (size_t i = 0; i < n && p->seen < p->want; i++, p->seen++) {
        if ((ev[i].type != MT_TRACE_ALLOC && ev[i].type != MT_TRACE_REALLOC) || !ev[i].stack ||
            ev[i].stack == UINT32_MAX)
            continue;
        if (add_stack(p, ev[i].stack + 1) < 0)
            break;
    }
    if (p->seen < p->want && !last)
        return true;
    start(p, r);
    return false;
}

struct sym_cache *analyze_preload_join(struct analyze_preload *p)
{
    if (!p)
        return NULL;
    if (p->running)
        pthread_join(p->thread, NULL);
    p->running = false;
    return p->cache;
}

void analyze_preload_free(struct analyze_preload *p)
{
    if (!p)
        return;
    analyze_preload_join(p);
    sym_cache_free(p->cache);
    for (size_t i = 0; p->mods && i < p->nmods; i++)
        free((char *)p->mods[i].path);
    free_modules(p->mods, p->nmods);
    free(p->addresses);
    free(p->set);
    free(p);
}

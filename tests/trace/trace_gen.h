/* trace_gen.h — an mbench-like event generator (shared/bench/mbench.c's
 * RNG and pattern: per thread a window of live blocks, each step replaces
 * a pseudo-random slot by realloc, or free + malloc, of a mixed size),
 * with the threads' steps interleaved at random, ids from one global
 * counter, and timestamps a few hundred ns apart. Used by the trace tests
 * and bench/trace_codec.c. Header-only; the caller owns the memory. */
#ifndef MT_TRACE_GEN_H
#define MT_TRACE_GEN_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "trace/trace_write.h"

static inline uint64_t gen_xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline size_t gen_pick_size(uint64_t r)
{
    unsigned k = r % 100;
    if (k < 60)
        return 8 + (r >> 8) % 120;
    if (k < 90)
        return 128 + (r >> 8) % 3968;
    if (k < 99)
        return 4096 + (r >> 8) % 61440;
    return 131072 + (r >> 8) % 393216;
}

/* -log2 of pick_size's probability of a size (its information). */
static inline double gen_size_bits(uint64_t sz)
{
    if (sz >= 8 && sz < 128)
        return -log2(0.60 / 120);
    if (sz >= 128 && sz < 4096)
        return -log2(0.30 / 3968);
    if (sz >= 4096 && sz < 65536)
        return -log2(0.09 / 61440);
    return -log2(0.01 / 393216);
}

typedef struct gen_state {
    int threads;
    long ops, window;
    uint64_t *seed;  /* per thread */
    uint32_t **live; /* per thread: slot -> id (0: empty) */
    long *done;      /* per thread: steps done */
    uint64_t pick;   /* interleaving RNG */
    uint32_t next_id;
    uint64_t t;      /* ns */
    unsigned jitter; /* time delta: 50 + uniform [0, jitter) ns */
    int pending;     /* a malloc waiting after its free */
    mt_trace_event pend;
    double info_bits; /* the information the events carry (see trace_codec) */
    int skew;         /* 1: 64 stacks of skewed popularity, each with its usual size */
} gen_state;

static inline void gen_init(gen_state *g, int threads, long ops, long window, uint32_t first_id)
{
    g->threads = threads;
    g->ops = ops;
    g->window = window;
    g->seed = calloc((size_t)threads, sizeof *g->seed);
    g->live = calloc((size_t)threads, sizeof *g->live);
    g->done = calloc((size_t)threads, sizeof *g->done);
    for (int i = 0; i < threads; i++) {
        g->seed[i] = 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 1);
        g->live[i] = calloc((size_t)window, sizeof **g->live);
    }
    g->pick = 0x2545F4914F6CDD1Dull;
    g->next_id = first_id;
    g->t = 1000000;
    g->jitter = 300;
    g->pending = 0;
    g->info_bits = 0;
    g->skew = 0;
}

static inline void gen_free(gen_state *g)
{
    for (int i = 0; i < g->threads; i++)
        free(g->live[i]);
    free(g->seed);
    free(g->live);
    free(g->done);
}

/* The next event: 1, or 0 when every thread is done. */
static inline int gen_next(gen_state *g, mt_trace_event *ev)
{
    g->t += 50 + gen_xorshift(&g->pick) % g->jitter;
    if (g->pending) {
        g->pending = 0;
        *ev = g->pend;
        ev->time_ns = g->t;
        return 1;
    }
    int th = -1;
    for (int tries = 0; tries < 64 && th < 0; tries++) {
        int c = (int)(gen_xorshift(&g->pick) % (uint64_t)g->threads);
        if (g->done[c] < g->ops)
            th = c;
    }
    for (int c = 0; c < g->threads && th < 0; c++)
        if (g->done[c] < g->ops)
            th = c;
    if (th < 0)
        return 0;
    if (g->threads > 1)
        g->info_bits += log2(g->threads);
    g->done[th]++;
    uint64_t r = gen_xorshift(&g->seed[th]);
    long slot = (long)(r % (uint64_t)g->window);
    uint64_t sz = gen_pick_size(r >> 16);
    uint32_t *live = &g->live[th][slot];
    mt_trace_event e = {0};
    e.thread = 1000 + (uint32_t)th;
    e.time_ns = g->t;
    e.category = 1;
    g->info_bits += gen_size_bits(sz);
    if (*live)
        g->info_bits += log2((double)g->window);
    uint32_t stack = 1;
    if (g->skew) { /* stack: the lower of two picks; its size 80% of the time */
        uint64_t a = gen_xorshift(&g->pick) % 64, b = gen_xorshift(&g->pick) % 64;
        stack = 10 + (uint32_t)(a < b ? a : b);
        if (gen_xorshift(&g->pick) % 5)
            sz = gen_pick_size(gen_xorshift((uint64_t[]){0x9E3779B97F4A7C15ull * stack}));
        e.stack = stack;
    }
    if (*live && (r & 0x300) == 0x300) {
        e.type = MT_TRACE_REALLOC;
        e.old_id = *live;
        e.id = *live = g->next_id++;
        e.size = sz;
        e.stack = g->skew ? stack : 2;
        *ev = e;
        return 1;
    }
    e.type = MT_TRACE_ALLOC;
    e.id = g->next_id++;
    e.size = sz;
    e.stack = stack;
    if (*live) {
        mt_trace_event f = e;
        f.type = MT_TRACE_FREE;
        f.id = *live;
        f.size = 0;
        f.stack = 0;
        g->pend = e;
        g->pending = 1;
        *live = e.id;
        *ev = f;
        return 1;
    }
    *live = e.id;
    *ev = e;
    return 1;
}

#endif

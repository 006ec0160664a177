/* analyze_live.h — the analyzer's live map (analyze_live.c), private to
 * analyze.c and its tests: which allocations are live now, with their
 * sizes and stacks, in bounded memory. */
#ifndef MT_ANALYZE_LIVE_H
#define MT_ANALYZE_LIVE_H

#include <stddef.h>
#include <stdint.h>

/* --- the live map (analyze_live.c) ----------------------------------------
 * Allocation id (32 bits) -> size and stack index, for the blocks live now.
 * 65536 tables picked by bits 8..23 of the id (so blocks allocated close
 * together share a table, and the hot tables stay in cache), each a
 * two-choice cuckoo table of 64-byte buckets of 7 slots holding the other
 * 16 bits of the id, a 32-bit size and a 24-bit stack index (9.14 bytes a
 * slot). A table grows by 1.2x when 95% full (the one ids are being
 * allocated in, to the size its remaining ids need); sparse tables are
 * shrunk so that the map never holds more than 11.6 x live + 6 MB of
 * buckets, + 1 MB of table headers (analyze_live.c). Sizes of 4 GiB and
 * more and stack indexes of 2^24 - 1 and more go to a side table. */

struct bucket;
struct analyze_live_big;

struct analyze_live_table {
    struct bucket *b;
    uint32_t nb, count;
};

/* A ring slot: sk is ANALYZE_LIVE_RING_LIVE | the stack index (or
 * ANALYZE_LIVE_STACK_BIG: the values are in the side table), 0 when the
 * slot is empty. */
struct analyze_live_ring {
    uint32_t id, size, sk;
};

#define ANALYZE_LIVE_RING_LIVE 0x80000000u
#define ANALYZE_LIVE_STACK_BIG 0xffffffu

struct analyze_live {
    struct analyze_live_table *t;   /* ANALYZE_LIVE_TABLES */
    struct analyze_live_ring *ring; /* ANALYZE_LIVE_RING slots: the recent ids */
    uint64_t count;                 /* live entries (ring and tables) */
    uint64_t ccount;                /* of which in the tables */
    /* The ring pays when most blocks die young; when most outlive it,
     * moving them on costs more than it saves, and new blocks go to the
     * tables directly ("bypass") until young deaths are common again. */
    bool bypass;
    uint32_t period_id;           /* ring: the id when the count of evictions started */
    uint32_t evicts;              /* ring: entries moved on since */
    uint32_t puts, young;         /* bypass: blocks added, and taken within a ring's span of ids */
    uint32_t last_put;            /* bypass: the last id added */
    uint64_t bucket_bytes;        /* bytes of buckets held */
    struct analyze_live_big *big; /* the side table: open addressing by id */
    size_t big_cap, big_n;
    uint32_t rng;
    uint32_t last_id; /* the last id added */
    bool has_last;
    uint32_t head_table;       /* the table ids are being allocated in */
    uint32_t sweep_at;         /* where the next sweep starts */
    uint64_t rebuilds, sweeps; /* tables rebuilt, sweeps made (tests) */
};

#define ANALYZE_LIVE_TABLES 65536u
#define ANALYZE_LIVE_RING 65536u /* ring slots: 12 bytes each */

int analyze_live_init(struct analyze_live *m);
void analyze_live_free(struct analyze_live *m);
/* Adds id -> (size, stack). Returns 0, or 1 when id was live already (its
 * values are replaced and the old ones stored in *old_size, *old_stack),
 * or -ENOMEM (the map is unchanged). */
int analyze_live_put(struct analyze_live *m, uint32_t id, uint64_t size, uint32_t stack, uint64_t *old_size,
                     uint32_t *old_stack);
/* Removes id: 1 with its values, or 0 when it is not live. */
int analyze_live_take(struct analyze_live *m, uint32_t id, uint64_t *size, uint32_t *stack);
/* The same, inline for the usual cases (a recent id in the ring), else
 * calling the functions above. */
static inline int analyze_live_put_fast(struct analyze_live *m, uint32_t id, uint64_t size, uint32_t stack,
                                        uint64_t *old_size, uint32_t *old_stack)
{
    struct analyze_live_ring *r = &m->ring[id & (ANALYZE_LIVE_RING - 1)];
    if (__builtin_expect(!r->sk && !m->bypass && size <= UINT32_MAX && stack < ANALYZE_LIVE_STACK_BIG &&
                             (!m->ccount || !m->t[(id >> 8) & 0xffff].count),
                         1)) {
        r->id = id;
        r->size = (uint32_t)size;
        r->sk = ANALYZE_LIVE_RING_LIVE | stack;
        m->count++;
        return 0;
    }
    return analyze_live_put(m, id, size, stack, old_size, old_stack);
}

static inline int analyze_live_take_fast(struct analyze_live *m, uint32_t id, uint64_t *size, uint32_t *stack)
{
    struct analyze_live_ring *r = &m->ring[id & (ANALYZE_LIVE_RING - 1)];
    if (__builtin_expect(r->id == id && r->sk && (r->sk & ANALYZE_LIVE_STACK_BIG) != ANALYZE_LIVE_STACK_BIG,
                         1)) {
        *size = r->size;
        *stack = r->sk & ~ANALYZE_LIVE_RING_LIVE;
        r->sk = 0;
        m->count--;
        return 1;
    }
    return analyze_live_take(m, id, size, stack);
}

/* Brings id's ring slot into the cache. */
static inline void analyze_live_prefetch_ring(const struct analyze_live *m, uint32_t id)
{
    __builtin_prefetch(&m->ring[id & (ANALYZE_LIVE_RING - 1)], 1);
}

/* Brings id's ring slot and table header (stage 0), then its first bucket (stage 1,
 * some events later) into the cache. */
void analyze_live_prefetch(const struct analyze_live *m, uint32_t id, int stage);
/* Bytes the map holds (buckets, table headers, side table). */
uint64_t analyze_live_bytes(const struct analyze_live *m);
/* Calls fn for every live entry (any order). */
void analyze_live_each(const struct analyze_live *m,
                       void (*fn)(void *ctx, uint32_t id, uint64_t size, uint32_t stack), void *ctx);

#endif

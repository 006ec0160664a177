/* analyze_live.c — the analyzer's live map: allocation id -> size and
 * stack of every live block, at under 12 bytes a block (analyze.h).
 *
 * Why this shape: a trace's allocation ids are nearly consecutive, and a
 * free usually names a recent one. Picking the table by bits 8..23 puts
 * 256 consecutive ids in one table, so the few tables of recent ids stay in
 * cache, and leaves 16 bits of the id to store. Two-choice cuckoo buckets of
 * 7 slots fill to 95% with short moves, and one bucket is one cache line: a
 * lookup reads one line (two when the bucket has spilled an entry to its
 * other choice). Growing and shrinking each table on its own keeps the
 * bytes per entry bounded without ever copying the whole map. */
#include "analyze/analyze.h"
#include "analyze/analyze_live.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define SLOTS 7
#define USED_MASK 0x7fu
#define SPILLED 0x80u                    /* an entry whose first choice is this bucket sits in its second */
#define STACK_BIG ANALYZE_LIVE_STACK_BIG /* the entry's values are in the side table */
#define MAX_KICKS 96
#define BUCKET 64
/* The bound: buckets <= 11.6 bytes per live entry + EXCESS_HARD. A table
 * is "safe" when it holds at most 11.6 bytes per entry + one bucket: when
 * every table is, the excess is at most 64 x 65536 = 4 MB. Growing by 1.2x
 * when 95% full keeps a table safe; the tables of a sliding window of ids
 * (filled as the ids are allocated, emptied by random frees) are let run
 * sparse while the map as a whole is within EXCESS_SOFT, then shrunk to
 * 90% full: few rebuilds per free, and never over EXCESS_HARD (a sweep
 * shrinks every unsafe table first). */
#define BOUND_PER_ENTRY_X10 116
#define BOUND_SLACK BUCKET
#define SPARSE_PER_ENTRY_X10 300 /* under 30% full: shrink when over the soft excess */
#define EXCESS_SOFT (4ll << 20)
#define EXCESS_HARD (6ll << 20)
#define SHRINK_FILL 90
#define HEAD_FILL 90
#define RING_LIVE ANALYZE_LIVE_RING_LIVE
#define EVICT_PERIOD 4096u   /* ring: evictions counted before deciding */
#define BYPASS_PERIOD 65536u /* bypass: blocks added before deciding */

/* 64 bytes: tags at 0, the used bits at 14, sizes (u32) at 15, stacks (u24) at 43. */
struct bucket {
    uint16_t tag[SLOTS];
    uint8_t used;
    uint8_t v[49];
};
_Static_assert(sizeof(struct bucket) == BUCKET, "a bucket is one cache line");

struct analyze_live_big {
    uint32_t id, stack; /* stack UINT32_MAX: empty */
    uint64_t size;
};

static inline uint32_t get_size(const struct bucket *b, int i)
{
    uint32_t v;
    memcpy(&v, b->v + 4 * i, 4);
    return v;
}

static inline uint32_t get_stack(const struct bucket *b, int i)
{
    uint32_t v;
    memcpy(&v, (const char *)b + 42 + 3 * i, 4); /* the byte below is size[6]'s last: shifted out */
    return v >> 8;
}

static inline void set_slot(struct bucket *b, int i, uint16_t tag, uint32_t size, uint32_t stack)
{
    b->tag[i] = tag;
    memcpy(b->v + 4 * i, &size, 4);
    unsigned char *p = (unsigned char *)b + 43 + 3 * i;
    p[0] = (unsigned char)stack;
    p[1] = (unsigned char)(stack >> 8);
    p[2] = (unsigned char)(stack >> 16);
    b->used |= (uint8_t)(1u << i);
}

/* Slots of b holding tag, as a bit mask. */
static inline unsigned match(const struct bucket *b, uint16_t tag)
{
#ifdef __SSE2__
    __m128i v = _mm_loadu_si128((const __m128i *)b);
    unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(v, _mm_set1_epi16((short)tag)));
    /* one bit per 16-bit lane (its low byte's) -> one bit per slot */
    m &= 0x1555;
    m = (m | (m >> 1)) & 0x3333;
    m = (m | (m >> 2)) & 0x0f0f;
    m = (m | (m >> 4)) & 0x00ff;
    return m & b->used & USED_MASK;
#else
    unsigned m = 0;
    for (int i = 0; i < SLOTS; i++)
        m |= (unsigned)(b->tag[i] == tag) << i;
    return m & b->used & USED_MASK;
#endif
}

static inline uint32_t table_of(uint32_t id)
{
    return (id >> 8) & 0xffff;
}
static inline uint16_t tag_of(uint32_t id)
{
    return (uint16_t)((id & 0xff) | (id >> 24) << 8);
}
static inline uint32_t id_of(uint32_t table, uint16_t tag)
{
    return (uint32_t)(tag & 0xff) | table << 8 | (uint32_t)(tag >> 8) << 24;
}

static inline uint32_t first_choice(uint16_t tag, uint32_t nb)
{
    return (uint32_t)(((uint64_t)(uint32_t)(tag * 0x9e3779b1u) * nb) >> 32);
}

static inline uint32_t other_choice(uint16_t tag, uint32_t nb, uint32_t b1)
{
    if (nb < 2)
        return b1;
    uint32_t g = (uint32_t)((tag ^ 0xa5a5u) * 0xc2b2ae3du);
    uint32_t b2 = b1 + 1 + (uint32_t)(((uint64_t)g * (nb - 1)) >> 32);
    return b2 >= nb ? b2 - nb : b2;
}

static inline uint32_t rng_next(struct analyze_live *m)
{
    uint32_t x = m->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return m->rng = x;
}

/* --- the side table ------------------------------------------------------- */

static uint32_t big_hash(uint32_t id, size_t cap)
{
    return (uint32_t)((id * 0x9e3779b1u) & (cap - 1));
}

static struct analyze_live_big *big_find(const struct analyze_live *m, uint32_t id)
{
    if (!m->big_cap)
        return NULL;
    for (size_t i = big_hash(id, m->big_cap);; i = (i + 1) & (m->big_cap - 1)) {
        struct analyze_live_big *e = &m->big[i];
        if (e->stack == UINT32_MAX)
            return NULL;
        if (e->id == id)
            return e;
    }
}

static int big_put(struct analyze_live *m, uint32_t id, uint64_t size, uint32_t stack)
{
    struct analyze_live_big *e = big_find(m, id);
    if (e) {
        e->size = size;
        e->stack = stack;
        return 0;
    }
    if ((m->big_n + 1) * 2 > m->big_cap) {
        size_t cap = m->big_cap ? m->big_cap * 2 : 64;
        struct analyze_live_big *nt = malloc(cap * sizeof *nt);
        if (!nt)
            return -ENOMEM;
        for (size_t i = 0; i < cap; i++)
            nt[i].stack = UINT32_MAX;
        for (size_t i = 0; i < m->big_cap; i++) {
            if (m->big[i].stack == UINT32_MAX)
                continue;
            size_t j = big_hash(m->big[i].id, cap);
            while (nt[j].stack != UINT32_MAX)
                j = (j + 1) & (cap - 1);
            nt[j] = m->big[i];
        }
        free(m->big);
        m->big = nt;
        m->big_cap = cap;
    }
    size_t j = big_hash(id, m->big_cap);
    while (m->big[j].stack != UINT32_MAX)
        j = (j + 1) & (m->big_cap - 1);
    m->big[j] = (struct analyze_live_big){.id = id, .stack = stack, .size = size};
    m->big_n++;
    return 0;
}

/* Removes the entry e points to (backward-shift deletion). */
static void big_remove(struct analyze_live *m, struct analyze_live_big *e)
{
    size_t mask = m->big_cap - 1, i = (size_t)(e - m->big);
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (m->big[j].stack == UINT32_MAX)
            break;
        size_t home = big_hash(m->big[j].id, m->big_cap);
        /* j's entry may fill the hole at i when its home is not in (i, j] */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->big[i] = m->big[j];
            i = j;
        }
    }
    m->big[i].stack = UINT32_MAX;
    m->big_n--;
}

static void big_drop(struct analyze_live *m, uint32_t id)
{
    struct analyze_live_big *e = big_find(m, id);
    if (e)
        big_remove(m, e);
}

/* --- one table ------------------------------------------------------------ */

/* Places (tag, size, stack) in b[nb], moving others to their other choice
 * as needed. 0, or -1 with the entry left homeless in *tag/size/stack. */
static int place(struct analyze_live *m, struct bucket *b, uint32_t nb, uint16_t *tag, uint32_t *size,
                 uint32_t *stack)
{
    uint32_t from = UINT32_MAX;
    for (int kick = 0; kick <= MAX_KICKS; kick++) {
        uint32_t b1 = first_choice(*tag, nb), b2 = other_choice(*tag, nb, b1);
        unsigned free1 = ~b[b1].used & USED_MASK;
        if (free1) {
            set_slot(&b[b1], __builtin_ctz(free1), *tag, *size, *stack);
            return 0;
        }
        unsigned free2 = ~b[b2].used & USED_MASK;
        if (free2) {
            set_slot(&b[b2], __builtin_ctz(free2), *tag, *size, *stack);
            b[b1].used |= SPILLED;
            return 0;
        }
        /* Both full: take a slot of the bucket it did not just leave. */
        uint32_t x = b1 == from ? b2 : b2 == from ? b1 : (rng_next(m) & 1) ? b2 : b1;
        int i = (int)(rng_next(m) % SLOTS);
        uint16_t vt = b[x].tag[i];
        uint32_t vs = get_size(&b[x], i), vk = get_stack(&b[x], i);
        set_slot(&b[x], i, *tag, *size, *stack);
        if (x != b1)
            b[b1].used |= SPILLED;
        *tag = vt;
        *size = vs;
        *stack = vk;
        from = x;
    }
    return -1;
}

/* Rebuilds t with nb buckets, adding the entry (tag, size, stack) when
 * `extra`. Grows further if the entries do not fit. 0 or -ENOMEM. */
static int rebuild(struct analyze_live *m, struct analyze_live_table *t, uint32_t nb, bool extra,
                   uint16_t tag, uint32_t size, uint32_t stack)
{
    for (;;) {
        struct bucket *nbk = NULL;
        if (nb && posix_memalign((void **)&nbk, BUCKET, (size_t)nb * BUCKET) != 0)
            return -ENOMEM;
        if (nb)
            memset(nbk, 0, (size_t)nb * BUCKET);
        bool ok = true;
        for (uint32_t k = 0; k < t->nb && ok; k++)
            for (int i = 0; i < SLOTS && ok; i++) {
                if (!(t->b[k].used & (1u << i)))
                    continue;
                uint16_t tg = t->b[k].tag[i];
                uint32_t sz = get_size(&t->b[k], i), st = get_stack(&t->b[k], i);
                ok = place(m, nbk, nb, &tg, &sz, &st) == 0;
            }
        if (ok && extra) {
            /* (a failed walk leaves another entry homeless: copies, so a retry adds this one) */
            uint16_t tg = tag;
            uint32_t sz = size, st = stack;
            ok = place(m, nbk, nb, &tg, &sz, &st) == 0;
        }
        if (!ok) {
            free(nbk);
            nb += nb / 4 + 1;
            continue;
        }
        free(t->b);
        m->rebuilds++;
        m->bucket_bytes = m->bucket_bytes - (uint64_t)t->nb * BUCKET + (uint64_t)nb * BUCKET;
        t->b = nbk;
        t->nb = nb;
        return 0;
    }
}

static uint32_t max_fill(uint32_t nb)
{
    return nb <= 1 ? SLOTS * nb : (uint32_t)((uint64_t)nb * SLOTS * 95 / 100);
}

/* Where id's entry is in t: 1 with the bucket and slot, else 0. */
static inline int find(const struct analyze_live_table *t, uint16_t tag, struct bucket **bk, int *slot)
{
    if (!t->nb)
        return 0;
    uint32_t b1 = first_choice(tag, t->nb);
    unsigned mm = match(&t->b[b1], tag);
    if (mm) {
        *bk = &t->b[b1];
        *slot = __builtin_ctz(mm);
        return 1;
    }
    if (!(t->b[b1].used & SPILLED))
        return 0;
    uint32_t b2 = other_choice(tag, t->nb, b1);
    if ((mm = match(&t->b[b2], tag)) != 0) {
        *bk = &t->b[b2];
        *slot = __builtin_ctz(mm);
        return 1;
    }
    return 0;
}

/* --- the map -------------------------------------------------------------- */

int analyze_live_init(struct analyze_live *m)
{
    memset(m, 0, sizeof *m);
    m->rng = 0x2545f491u;
    m->t = calloc(ANALYZE_LIVE_TABLES, sizeof *m->t);
    m->ring = calloc(ANALYZE_LIVE_RING, sizeof *m->ring);
    if (!m->t || !m->ring) {
        analyze_live_free(m);
        return -ENOMEM;
    }
    return 0;
}

void analyze_live_free(struct analyze_live *m)
{
    if (m->t)
        for (uint32_t i = 0; i < ANALYZE_LIVE_TABLES; i++)
            free(m->t[i].b);
    free(m->t);
    free(m->ring);
    free(m->big);
    memset(m, 0, sizeof *m);
}

/* Bytes over 11.6 per entry, in tenths of a byte. */
static inline int64_t excess_x10(const struct analyze_live *m)
{
    return (int64_t)m->bucket_bytes * 10 - BOUND_PER_ENTRY_X10 * (int64_t)m->ccount;
}

static inline bool table_over(const struct analyze_live_table *t, int per_entry_x10)
{
    return (uint64_t)t->nb * BUCKET * 10 > (uint64_t)t->count * (uint64_t)per_entry_x10 + BOUND_SLACK * 10;
}

/* Down to SHRINK_FILL% full (at least one bucket: an empty table keeps
 * one, within its slack). A failed rebuild keeps the table as it is. */
static void shrink(struct analyze_live *m, struct analyze_live_table *t)
{
    uint32_t nb = (uint32_t)(((uint64_t)t->count * 100 + SLOTS * SHRINK_FILL - 1) / (SLOTS * SHRINK_FILL));
    if (nb < 1)
        nb = 1;
    if (nb < t->nb)
        (void)rebuild(m, t, nb, false, 0, 0, 0);
}

/* Over the hard excess: shrink the sparse tables, from where the last
 * sweep stopped, until within the soft excess; if that is not enough,
 * every unsafe table. */
static void sweep(struct analyze_live *m)
{
    m->sweeps++;
    static const int pass[] = {SPARSE_PER_ENTRY_X10, SPARSE_PER_ENTRY_X10 / 2, BOUND_PER_ENTRY_X10};
    for (int p = 0; p < 3; p++)
        for (uint32_t k = 0; k < ANALYZE_LIVE_TABLES && excess_x10(m) > EXCESS_SOFT * 10; k++) {
            struct analyze_live_table *t = &m->t[m->sweep_at];
            m->sweep_at = (m->sweep_at + 1) % ANALYZE_LIVE_TABLES;
            if (table_over(t, pass[p]))
                shrink(m, t);
        }
}

/* Adds id, not in the map, with its encoded values (size, or 0 and
 * STACK_BIG with the values in the side table) to the cuckoo tables. */
static int cuckoo_add(struct analyze_live *m, uint32_t id, uint32_t sz, uint32_t st)
{
    uint32_t tab = table_of(id);
    struct analyze_live_table *t = &m->t[tab];
    uint16_t tag = tag_of(id);
    /* Added in sequence (the usual case: entries leave the ring in id
     * order): this table is the one being filled, with the rest of its 256
     * ids to come. */
    bool head = m->has_last && (uint32_t)(id - m->last_id) - 1 < 64;
    m->last_id = id;
    m->has_last = true;
    if (head && tab != m->head_table) {
        struct analyze_live_table *old = &m->t[m->head_table];
        if (table_over(old, BOUND_PER_ENTRY_X10))
            shrink(m, old); /* left behind: down to what it holds */
        m->head_table = tab;
    }
    int rc;
    if (t->count + 1 > max_fill(t->nb)) {
        uint32_t nb = t->nb + t->nb / 5;
        if (nb <= t->nb)
            nb = t->nb + 1;
        if (head) {
            uint64_t want = t->count + 1 + (255 - (id & 0xff));
            uint32_t hb = (uint32_t)((want * 100 + SLOTS * HEAD_FILL - 1) / (SLOTS * HEAD_FILL));
            if (hb > nb)
                nb = hb;
        }
        rc = rebuild(m, t, nb, true, tag, sz, st);
    } else if (place(m, t->b, t->nb, &tag, &sz, &st) == 0) {
        rc = 0;
    } else {
        /* The walk gave up with another entry homeless: grow with it. */
        rc = rebuild(m, t, t->nb + t->nb / 5 + 1, true, tag, sz, st);
    }
    if (rc < 0)
        return rc; /* (after a failed walk an older entry may be lost: out of memory anyway) */
    t->count++;
    m->ccount++;
    if (excess_x10(m) > EXCESS_HARD * 10)
        sweep(m);
    return 0;
}

/* Removes the cuckoo entry of id at (bk, slot), shrinking as needed. */
static void cuckoo_remove(struct analyze_live *m, uint32_t id, struct bucket *bk, int slot)
{
    struct analyze_live_table *t = &m->t[table_of(id)];
    bk->used &= (uint8_t) ~(1u << slot);
    t->count--;
    m->ccount--;
    int64_t e = excess_x10(m);
    if (e > EXCESS_SOFT * 10 && table_over(t, SPARSE_PER_ENTRY_X10) && table_of(id) != m->head_table)
        shrink(m, t);
    if (e > EXCESS_HARD * 10)
        sweep(m);
}

/* Where id's entry is in the cuckoo tables: 1 with the bucket and slot. */
static inline int cuckoo_find(const struct analyze_live *m, uint32_t id, struct bucket **bk, int *slot)
{
    return m->ccount && find(&m->t[table_of(id)], tag_of(id), bk, slot);
}

/* The values of the entry of id encoded as (sz, st). */
static inline void decode(const struct analyze_live *m, uint32_t id, uint32_t sz, uint32_t st, uint64_t *size,
                          uint32_t *stack)
{
    if (st == STACK_BIG) {
        const struct analyze_live_big *e = big_find(m, id);
        *size = e ? e->size : 0;
        *stack = e ? e->stack : 0;
    } else {
        *size = sz;
        *stack = st;
    }
}

int analyze_live_put(struct analyze_live *m, uint32_t id, uint64_t size, uint32_t stack, uint64_t *old_size,
                     uint32_t *old_stack)
{
    bool big = size > UINT32_MAX || stack >= STACK_BIG;
    uint32_t sz = big ? 0 : (uint32_t)size, st = big ? STACK_BIG : stack;
    struct analyze_live_ring *r = &m->ring[id & (ANALYZE_LIVE_RING - 1)];
    if (__builtin_expect(!(r->sk && r->id == id), 1)) {
        struct bucket *bk;
        int slot;
        if (__builtin_expect(cuckoo_find(m, id, &bk, &slot), 0)) {
            /* live in the cuckoo tables: replaced there */
            uint32_t ost = get_stack(bk, slot);
            decode(m, id, get_size(bk, slot), ost, old_size, old_stack);
            if (big && big_put(m, id, size, stack) < 0)
                return -ENOMEM;
            if (ost == STACK_BIG && !big)
                big_drop(m, id);
            set_slot(bk, slot, tag_of(id), sz, st);
            return 1;
        }
        if (big && big_put(m, id, size, stack) < 0)
            return -ENOMEM;
        if (m->bypass) {
            int rc = cuckoo_add(m, id, sz, st);
            if (rc < 0) {
                if (big)
                    big_drop(m, id);
                return rc;
            }
            m->count++;
            m->last_put = id;
            if (++m->puts == BYPASS_PERIOD) {
                /* most of them died within a ring's span: back to the ring */
                if (m->young > BYPASS_PERIOD / 2) {
                    m->bypass = false;
                    m->evicts = 0;
                    m->period_id = id;
                }
                m->puts = m->young = 0;
            }
            return 0;
        }
        if (r->sk) {
            /* the slot's older entry moves to the cuckoo tables */
            int rc = cuckoo_add(m, r->id, r->size, r->sk & ~RING_LIVE);
            if (rc < 0) {
                if (big)
                    big_drop(m, id);
                return rc;
            }
            if (++m->evicts == EVICT_PERIOD) {
                /* more moved on than half the blocks added: bypass the ring */
                if ((uint32_t)(id - m->period_id) < 2 * EVICT_PERIOD) {
                    m->bypass = true;
                    m->puts = m->young = 0;
                }
                m->evicts = 0;
                m->period_id = id;
            }
        }
        r->id = id;
        r->size = sz;
        r->sk = RING_LIVE | st;
        m->count++;
        return 0;
    }
    /* live in the ring: replaced there */
    uint32_t ost = r->sk & ~RING_LIVE;
    decode(m, id, r->size, ost, old_size, old_stack);
    if (big && big_put(m, id, size, stack) < 0)
        return -ENOMEM;
    if (ost == STACK_BIG && !big)
        big_drop(m, id);
    r->size = sz;
    r->sk = RING_LIVE | st;
    return 1;
}

int analyze_live_take(struct analyze_live *m, uint32_t id, uint64_t *size, uint32_t *stack)
{
    struct analyze_live_ring *r = &m->ring[id & (ANALYZE_LIVE_RING - 1)];
    uint32_t sz, st;
    if (r->sk && r->id == id) {
        sz = r->size;
        st = r->sk & ~RING_LIVE;
        r->sk = 0;
    } else {
        struct bucket *bk;
        int slot;
        if (!cuckoo_find(m, id, &bk, &slot))
            return 0;
        m->young += m->bypass && (uint32_t)(m->last_put - id) < ANALYZE_LIVE_RING;
        sz = get_size(bk, slot);
        st = get_stack(bk, slot);
        cuckoo_remove(m, id, bk, slot);
    }
    m->count--;
    decode(m, id, sz, st, size, stack);
    if (st == STACK_BIG)
        big_drop(m, id);
    return 1;
}

void analyze_live_prefetch(const struct analyze_live *m, uint32_t id, int stage)
{
    const struct analyze_live_table *t = &m->t[table_of(id)];
    if (stage == 0) {
        __builtin_prefetch(&m->ring[id & (ANALYZE_LIVE_RING - 1)]);
        __builtin_prefetch(t);
    } else if (t->nb) {
        __builtin_prefetch(&t->b[first_choice(tag_of(id), t->nb)]);
    }
}

uint64_t analyze_live_bytes(const struct analyze_live *m)
{
    return m->bucket_bytes + (uint64_t)ANALYZE_LIVE_TABLES * sizeof *m->t + m->big_cap * sizeof *m->big +
           (uint64_t)ANALYZE_LIVE_RING * sizeof *m->ring;
}

void analyze_live_each(const struct analyze_live *m,
                       void (*fn)(void *ctx, uint32_t id, uint64_t size, uint32_t stack), void *ctx)
{
    for (uint32_t k = 0; k < ANALYZE_LIVE_RING; k++) {
        const struct analyze_live_ring *r = &m->ring[k];
        if (!r->sk)
            continue;
        uint64_t size;
        uint32_t stack;
        decode(m, r->id, r->size, r->sk & ~RING_LIVE, &size, &stack);
        fn(ctx, r->id, size, stack);
    }
    for (uint32_t k = 0; k < ANALYZE_LIVE_TABLES; k++) {
        const struct analyze_live_table *t = &m->t[k];
        for (uint32_t j = 0; j < t->nb; j++)
            for (int i = 0; i < SLOTS; i++) {
                if (!(t->b[j].used & (1u << i)))
                    continue;
                uint32_t id = id_of(k, t->b[j].tag[i]);
                uint64_t size;
                uint32_t stack;
                decode(m, id, get_size(&t->b[j], i), get_stack(&t->b[j], i), &size, &stack);
                fn(ctx, id, size, stack);
            }
    }
}

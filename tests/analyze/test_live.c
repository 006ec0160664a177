/* test_live.c — the analyzer's live map (analyze_live.c): every operation
 * checked against a plain model (a bitmap and arrays over a window of ids),
 * and the bytes it holds: at most 11.6 bytes per live entry plus 7 MB,
 * while it grows to millions of entries (sequential ids, random ids,
 * a sliding window of live ids sweeping every table) and as it empties. */
#include "analyze/analyze.h"
#include "analyze/analyze_live.h"
#include "unit.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The constant: the table headers (1 MB) and the buckets' excess over
 * 11.6 bytes per entry (6 MB at most). */
#define CONST_BYTES                                                                                          \
    ((uint64_t)ANALYZE_LIVE_TABLES * 16 + (uint64_t)ANALYZE_LIVE_RING * 12 + (6u << 20) + 4096)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool within(const struct analyze_live *m, uint64_t *worst_per_entry_x100)
{
    uint64_t b = analyze_live_bytes(m);
    if (m->count > 1000000) {
        uint64_t per = (b - (uint64_t)ANALYZE_LIVE_TABLES * 16) * 100 / m->count;
        if (per > *worst_per_entry_x100)
            *worst_per_entry_x100 = per;
    }
    return b * 10 <= 116 * m->count + CONST_BYTES * 10;
}

/* Random operations over ids base .. base + span, checked one by one. */
static void model_ops(uint32_t base, uint32_t span, size_t ops)
{
    struct analyze_live m;
    analyze_live_init(&m);
    uint64_t *size = calloc(span, sizeof *size);
    uint32_t *stack = calloc(span, sizeof *stack);
    unsigned char *live = calloc(span, 1);
    size_t nlive = 0, bad = 0, worst_bound = 0;
    uint64_t worst = 0;
    for (size_t k = 0; k < ops; k++) {
        uint32_t off = (uint32_t)(rnd() % span), id = base + off;
        unsigned op = (unsigned)(rnd() % 100);
        if (op < 55) {
            uint64_t sz = rnd() % 5000;
            if (rnd() % 200 == 0)
                sz = (1ull << 32) + rnd() % 1000; /* the side table */
            uint32_t st = (uint32_t)(rnd() % 1000);
            if (rnd() % 300 == 0)
                st = 0xffffff + (uint32_t)(rnd() % 100); /* a stack index past 24 bits */
            uint64_t os = 0;
            uint32_t ok = 0;
            int rc = analyze_live_put(&m, id, sz, st, &os, &ok);
            if (live[off])
                bad += rc != 1 || os != size[off] || ok != stack[off];
            else
                bad += rc != 0;
            nlive += !live[off];
            live[off] = 1;
            size[off] = sz;
            stack[off] = st;
        } else {
            uint64_t os = 0;
            uint32_t ok = 0;
            int rc = analyze_live_take(&m, id, &os, &ok);
            if (live[off])
                bad += rc != 1 || os != size[off] || ok != stack[off];
            else
                bad += rc != 0;
            nlive -= live[off];
            live[off] = 0;
        }
        bad += m.count != nlive;
        worst_bound += !within(&m, &worst);
    }
    char name[128];
    snprintf(name, sizeof name, "live map: %zu random operations over %u ids from %u agree with the model",
             ops, span, base);
    CHECK(name, bad == 0);
    snprintf(name, sizeof name, "live map: %zu random operations: within 11.6 B/entry + 7 MB", ops);
    CHECK(name, worst_bound == 0);
    /* every entry enumerated once */
    size_t seen = 0;
    for (uint32_t off = 0; off < span; off++) {
        uint64_t os;
        uint32_t ok;
        if (live[off]) {
            seen += analyze_live_take(&m, base + off, &os, &ok) == 1 && os == size[off] && ok == stack[off];
        }
    }
    snprintf(name, sizeof name, "live map: all %zu live entries found, map empty after", nlive);
    CHECK(name, seen == nlive && m.count == 0);
    snprintf(name, sizeof name, "live map: empty map holds at most its constant (%" PRIu64 " bytes)",
             analyze_live_bytes(&m));
    CHECK(name, analyze_live_bytes(&m) <= CONST_BYTES);
    analyze_live_free(&m);
    free(size);
    free(stack);
    free(live);
}

static uint32_t seq_id(size_t i)
{
    return 0xfff00000u + (uint32_t)i;
} /* wraps */
static uint32_t spread_id(size_t i)
{
    return (uint32_t)(i * 2654435761u);
} /* a bijection: all distinct */
static uint32_t strided_id(size_t i)
{
    return (uint32_t)(i * 300);
} /* every 300th: sparse tables */
static uint32_t one_table_id(size_t i)
{
    return (uint32_t)((i & 0xff) | (i >> 8) << 24 | 0x1200);
}

/* Grows to n entries with ids from next(), checking the bound all along;
 * then takes them all back. */
static void growth(const char *what, size_t n, uint32_t (*next)(size_t i))
{
    struct analyze_live m;
    analyze_live_init(&m);
    size_t over = 0, bad = 0;
    uint64_t worst = 0, max_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t os;
        uint32_t ok;
        bad += analyze_live_put(&m, next(i), i & 0xfff, (uint32_t)(i % 5000), &os, &ok) != 0;
        if ((i & 1023) == 0 || i == n - 1)
            over += !within(&m, &worst);
        if (analyze_live_bytes(&m) > max_bytes)
            max_bytes = analyze_live_bytes(&m);
    }
    char name[160];
    snprintf(name, sizeof name, "live map, %s: %zu entries inserted", what, n);
    CHECK(name, bad == 0 && m.count == n);
    snprintf(name, sizeof name,
             "live map, %s: <= 11.6 B/entry + %" PRIu64 " B all the way to %zu entries (%" PRIu64
             " B at the end: %.2f B/entry; worst past 1M: %.2f)",
             what, CONST_BYTES, n, analyze_live_bytes(&m), (double)analyze_live_bytes(&m) / (double)n,
             (double)worst / 100);
    CHECK(name, over == 0);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t os;
        uint32_t ok;
        bad += analyze_live_take(&m, next(i), &os, &ok) != 1 || os != (i & 0xfff) || ok != i % 5000;
        if ((i & 1023) == 0)
            over += !within(&m, &worst);
    }
    snprintf(name, sizeof name,
             "live map, %s: all found again, and the bound held while emptying (%" PRIu64
             " rebuilds, %" PRIu64 " sweeps)",
             what, m.rebuilds, m.sweeps);
    CHECK(name, bad == 0 && over == 0 && m.count == 0 && (next != spread_id || m.sweeps > 0));
    analyze_live_free(&m);
}

/* A window of live ids sliding over the whole id space (and around it):
 * each table fills then empties as the window passes. */
static void sliding(size_t window, uint64_t total)
{
    struct analyze_live m;
    analyze_live_init(&m);
    size_t over = 0, bad = 0;
    uint64_t worst = 0, max_bytes = 0;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t os;
        uint32_t ok;
        bad += analyze_live_put(&m, (uint32_t)i, 100, 1, &os, &ok) != 0;
        if (i >= window)
            bad += analyze_live_take(&m, (uint32_t)(i - window), &os, &ok) != 1;
        if ((i & 65535) == 0)
            over += !within(&m, &worst);
        if (analyze_live_bytes(&m) > max_bytes)
            max_bytes = analyze_live_bytes(&m);
    }
    char name[200];
    snprintf(name, sizeof name,
             "live map: a window of %zu live ids slid over %" PRIu64 " ids: right, and never over "
             "11.6 B/entry + 7 MB (most held: %" PRIu64 " B; %" PRIu64 " rebuilds, %" PRIu64 " sweeps)",
             window, total, max_bytes, m.rebuilds, m.sweeps);
    CHECK(name, bad == 0 && over == 0 && max_bytes <= 12 * window + CONST_BYTES);
    analyze_live_free(&m);
}

/* A pool of live blocks, each step freeing a random one and allocating
 * the next id (the benchmark's pattern): tables fill at the head and empty
 * slowly behind it, the map sweeps. */
static void pool(size_t live, uint64_t steps)
{
    struct analyze_live m;
    analyze_live_init(&m);
    uint32_t *ids = malloc(live * sizeof *ids);
    uint32_t next = 0xfff00000u;
    size_t over = 0, bad = 0;
    uint64_t worst = 0, max_bytes = 0;
    for (size_t i = 0; i < live; i++) {
        uint64_t os;
        uint32_t ok;
        ids[i] = next++;
        bad += analyze_live_put(&m, ids[i], ids[i] & 0xffff, ids[i] >> 8, &os, &ok) != 0;
    }
    for (uint64_t k = 0; k < steps; k++) {
        size_t i = (size_t)(rnd() % live);
        uint64_t os;
        uint32_t ok;
        bad += analyze_live_take(&m, ids[i], &os, &ok) != 1 || os != (ids[i] & 0xffff) || ok != ids[i] >> 8;
        ids[i] = next++;
        bad += analyze_live_put(&m, ids[i], ids[i] & 0xffff, ids[i] >> 8, &os, &ok) != 0;
        if ((k & 4095) == 0) {
            over += !within(&m, &worst);
            if (analyze_live_bytes(&m) > max_bytes)
                max_bytes = analyze_live_bytes(&m);
        }
    }
    char name[200];
    snprintf(name, sizeof name,
             "live map: a pool of %zu live blocks, %" PRIu64 " random replacements: right, never over "
             "11.6 B/entry + 7 MB (most held: %" PRIu64 " B; %" PRIu64 " rebuilds, %" PRIu64 " sweeps)",
             live, steps, max_bytes, m.rebuilds, m.sweeps);
    CHECK(name, bad == 0 && over == 0 && m.count == live);
    analyze_live_free(&m);
    free(ids);
}

int main(int argc, char **argv)
{
    size_t big = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
    model_ops(0xffff0000u, 200000, 2000000); /* ids wrap */
    model_ops(12345, 3000, 300000);
    growth("consecutive ids", big, seq_id);
    growth("scattered ids", big, spread_id);
    growth("every 300th id", big / 2, strided_id);
    sliding(100000, 5000000000ull / 1000);
    sliding(1000, 1ull << 24);
    pool(200000, 8000000);
    growth("one table full (all 65536 ids sharing bits 8-23)", 65536, one_table_id);
    return failures ? 1 : 0;
}

/* report_index.c — the lookups that keep reading and comparing reports
 * O(n log n) or better however large they are: a hash index of a report's
 * arrays (category names, site and module IDs as the reader meets them),
 * keyed with a per-process secret so that a crafted file cannot make every
 * name collide, and a sorted map of modules by address for the symbolizer
 * and the exporters. */
#include "report/report.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* --- a keyed hash: SipHash-1-3 ---------------------------------------------
 * A report file is untrusted input; with an unkeyed hash, a file of names
 * chosen to collide would make each lookup a scan again. */

static uint64_t sip_key[2];
static pthread_once_t sip_once = PTHREAD_ONCE_INIT;

static void sip_init_key(void)
{
    unsigned char k[16];
    if (getrandom(k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
        /* No entropy yet (early boot): something that differs per process. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t a = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32, b = (uint64_t)getpid() ^ (uintptr_t)k;
        memcpy(k, &a, 8);
        memcpy(k + 8, &b, 8);
    }
    memcpy(sip_key, k, sizeof k);
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                             \
    do {                                                                                                     \
        v0 += v1;                                                                                            \
        v1 = ROTL(v1, 13);                                                                                   \
        v1 ^= v0;                                                                                            \
        v0 = ROTL(v0, 32);                                                                                   \
        v2 += v3;                                                                                            \
        v3 = ROTL(v3, 16);                                                                                   \
        v3 ^= v2;                                                                                            \
        v0 += v3;                                                                                            \
        v3 = ROTL(v3, 21);                                                                                   \
        v3 ^= v0;                                                                                            \
        v2 += v1;                                                                                            \
        v1 = ROTL(v1, 17);                                                                                   \
        v1 ^= v2;                                                                                            \
        v2 = ROTL(v2, 32);                                                                                   \
    } while (0)

uint64_t report_hash(const void *data, size_t len)
{
    pthread_once(&sip_once, sip_init_key);
    uint64_t v0 = sip_key[0] ^ 0x736f6d6570736575ull, v1 = sip_key[1] ^ 0x646f72616e646f6dull;
    uint64_t v2 = sip_key[0] ^ 0x6c7967656e657261ull, v3 = sip_key[1] ^ 0x7465646279746573ull;
    const unsigned char *p = data;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m;
        memcpy(&m, p + i, 8); /* little-endian: the machines memtrail runs on */
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++)
        last |= (uint64_t)p[whole + i] << (8 * i);
    v3 ^= last;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t report_hash_str(const char *s)
{
    return report_hash(s, strlen(s));
}

uint64_t report_hash_i64(int64_t v)
{
    return report_hash(&v, sizeof v);
}

/* --- the hash index ----------------------------------------------------- */

struct report_slot {
    uint64_t hash;
    size_t item; /* the item's index + 1; 0: an empty slot */
};

static void put(struct report_slot *slots, size_t cap, uint64_t h, size_t item_plus_1)
{
    size_t i = (size_t)h & (cap - 1);
    while (slots[i].item)
        i = (i + 1) & (cap - 1);
    slots[i] = (struct report_slot){h, item_plus_1};
}

int report_index_add(struct report_index *x, uint64_t h, size_t item)
{
    if ((x->n + 1) * 2 > x->cap) { /* at most half full: probe runs stay short */
        size_t cap = x->cap ? 2 * x->cap : 64;
        struct report_slot *grown = calloc(cap, sizeof *grown);
        if (!grown)
            return -ENOMEM;
        for (size_t i = 0; i < x->cap; i++)
            if (x->slots[i].item)
                put(grown, cap, x->slots[i].hash, x->slots[i].item);
        free(x->slots);
        x->slots = grown;
        x->cap = cap;
    }
    put(x->slots, x->cap, h, item + 1);
    x->n++;
    return 0;
}

size_t report_index_next(const struct report_index *x, uint64_t h, size_t *pos)
{
    if (!x->cap)
        return SIZE_MAX;
    /* *pos counts the slots probed so far from the home slot. */
    for (size_t k = *pos; k < x->cap; k++) {
        const struct report_slot *s = &x->slots[((size_t)h + k) & (x->cap - 1)];
        if (!s->item)
            break;
        if (s->hash == h) {
            *pos = k + 1;
            return s->item - 1;
        }
    }
    *pos = x->cap;
    return SIZE_MAX;
}

void report_index_free(struct report_index *x)
{
    free(x->slots);
    memset(x, 0, sizeof *x);
}

/* --- modules by address ------------------------------------------------- */

static int by_start(const void *pa, const void *pb, void *ctx)
{
    const struct report *r = ctx;
    const struct report_module *a = &r->modules[*(const size_t *)pa];
    const struct report_module *b = &r->modules[*(const size_t *)pb];
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return *(const size_t *)pa < *(const size_t *)pb ? -1 : 1;
}

int report_module_map_init(struct report_module_map *m, const struct report *r)
{
    memset(m, 0, sizeof *m);
    m->r = r;
    if (!r->nmodules)
        return 0;
    if (!(m->order = malloc(r->nmodules * sizeof *m->order)))
        return -ENOMEM;
    for (size_t i = 0; i < r->nmodules; i++)
        m->order[i] = i;
    qsort_r(m->order, r->nmodules, sizeof *m->order, by_start, (void *)r);
    m->n = r->nmodules;
    /* Modules of one process do not overlap; a file where they do is
     * searched as the file lists them (the first that holds the address). */
    uint64_t end = 0;
    for (size_t k = 0; k < m->n; k++) {
        const struct report_module *mod = &r->modules[m->order[k]];
        if (mod->start == mod->end)
            continue; /* holds nothing */
        if (k && mod->start < end)
            m->overlap = true;
        if (mod->end > end)
            end = mod->end;
    }
    return 0;
}

long report_module_map_find(const struct report_module_map *m, uint64_t pc)
{
    const struct report *r = m->r;
    if (m->overlap || !m->order) {
        for (size_t i = 0; i < r->nmodules; i++)
            if (pc >= r->modules[i].start && pc < r->modules[i].end)
                return (long)i;
        return -1;
    }
    /* The last module starting at or below pc. */
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->modules[m->order[mid]].start <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Empty modules before it hold nothing; step back over them. */
    while (lo > 0) {
        const struct report_module *mod = &r->modules[m->order[lo - 1]];
        if (mod->start != mod->end)
            return pc < mod->end ? (long)m->order[lo - 1] : -1;
        lo--;
    }
    return -1;
}

void report_module_map_free(struct report_module_map *m)
{
    free(m->order);
    memset(m, 0, sizeof *m);
}

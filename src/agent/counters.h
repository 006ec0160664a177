/* counters.h — per-category summary counters, kept without locks.
 *
 * Each thread owns a shard: plain relaxed loads and stores on memory no
 * other thread writes, so the hot path has no lock and no atomic RMW.
 * Live bytes also go to a global per category in batches (whenever a
 * shard's unflushed delta passes the category's flush_at), so the peak can
 * be checked on every allocation against (global + own delta): off by at
 * most what the other threads hold unflushed. flush_at follows the peak:
 * 1/128 of it divided by the most threads that ever held shards at once,
 * so the other threads' deltas stay under 1% of the peak together, for
 * any number of threads (between MT_FLUSH_MIN and MT_FLUSH_BYTES). A
 * flush also checks the peak against the exact sum of every shard, which
 * takes in threads that sit idle on a delta. Readers sum the globals and
 * every shard.
 *
 * What the hot path leaves out, because it can be had otherwise:
 * - The total (MT_SLOT_TOTAL) while the program has no category of its
 *   own (mt_cat_solo): it is then the malloc category, whose slot is
 *   counted and whose peak is the total's. The first user category seeds
 *   the total's slot from malloc's and from then on both are counted.
 *   The total's live bytes in a sum are always the sum of the categories.
 * - The peak of the agent's overhead (per-block headers): a block no
 *   larger than its own size adds its overhead to the shard's delta with
 *   no check; the delta goes to the global, and the overhead's peak is
 *   checked, whenever a flush of the program's bytes happens on that
 *   thread, and at every sum: a thread that trades a few large blocks for
 *   many small ones without moving its bytes may hold overhead unchecked
 *   meanwhile (never more than the bytes of those blocks). Blocks with
 *   more overhead than bytes (malloc(0), aligned ones) are counted and
 *   checked like the program's bytes. */
#ifndef MT_AGENT_COUNTERS_H
#define MT_AGENT_COUNTERS_H

#include "agent/agent.h"

#define MT_NCAT 72
#define MT_CAT_MALLOC 0
#define MT_CAT_OVERHEAD 1
/* Address space by origin (vm_scan.c); these never hold malloc blocks. */
#define MT_CAT_HEAP 2
#define MT_CAT_STACKS 3
#define MT_CAT_MMAP 4
#define MT_CAT_FILES 5
#define MT_CAT_CODE 6
#define MT_CAT_OTHER 7
#define MT_CAT_FIRST_USER 8
#define MT_SLOT_TOTAL MT_NCAT /* the program's allocations, all categories */
#define MT_NSLOT (MT_NCAT + 1)
#define MT_FLUSH_BYTES (256 * 1024)
#define MT_FLUSH_MIN 1024
#define MT_PEAK_PARTS 128 /* flush_at = peak / (MT_PEAK_PARTS * most threads) */

typedef struct mt_cslot {
    _Atomic int64_t live_bytes; /* not yet flushed to the global */
    _Atomic int64_t allocs;
    _Atomic int64_t frees;
    _Atomic int64_t reallocs;
} mt_cslot;

struct mt_site_slot;
typedef struct mt_shard {
    mt_cslot slot[MT_NSLOT];
    struct mt_site_slot **site_chunks; /* detail mode (site.h): NULL until first used */
    void *cfi_cache;                   /* detail mode: this thread's unwind rules (site_cfi.c) */
    unsigned cfi_gen;                  /* the mt_code_gen those rules are from */
    struct mt_shard *next;             /* registry list; shards are never unmapped */
    _Atomic int in_use;
    _Atomic long rec_busy; /* this thread's hooks in flight while a trace records (record.h) */
} mt_shard;

typedef struct mt_cglobal {
    _Atomic int64_t live_bytes; /* flushed deltas */
    _Atomic int64_t peak_bytes;
    _Atomic int64_t flush_at;   /* a shard's delta beyond this goes to live_bytes; 0: not yet tuned */
    _Atomic int64_t tuned_peak; /* the peak flush_at was computed from */
    /* counts folded in from exited threads */
    _Atomic int64_t allocs;
    _Atomic int64_t frees;
    _Atomic int64_t reallocs;
} __attribute__((aligned(64))) mt_cglobal;

extern mt_cglobal mt_glob[MT_NSLOT];

/* A consistent-enough sum for reports. */
typedef struct mt_catsum {
    int64_t live_bytes, live_count, peak_bytes, allocs, frees, reallocs;
} mt_catsum;

/* Category registry. */
typedef struct mt_catinfo {
    char name[MT_CATEGORY_NAME_MAX + 1];
    int kind; /* MT_KIND_* */
} mt_catinfo;
enum { MT_KIND_MALLOC, MT_KIND_OVERHEAD, MT_KIND_VM };
extern mt_catinfo mt_cats[MT_NCAT];
extern _Atomic int mt_ncats;

/* Heap error counters (reported in the errors line). */
extern _Atomic int64_t mt_err_double_free, mt_err_bad_canary, mt_err_foreign_free;

void mt_counters_init(void);
mt_shard *mt_shard_acquire(void);        /* slow path: first use in a thread */
void mt_shard_thread_exit(void *shard);  /* pthread key destructor */
void mt_counters_after_fork_child(void); /* fold shards of threads the child lacks */
void mt_counters_sum(mt_catsum out[MT_NSLOT]);
/* Returns the id of category `name`, creating it; negative errno on error. */
int mt_category_get(const char *name);
/* The lock that serialises creating categories (held across fork). */
void mt_category_lock(void);
void mt_category_unlock(void);
void mt_raise_peak(mt_cglobal *g, int64_t candidate);
void mt_raise_peak_i64(_Atomic int64_t *peak, int64_t candidate);
/* The registered shards (never unmapped); a reader walks them with ->next. */
mt_shard *mt_shard_first(void);

static inline int64_t mt_ld(_Atomic int64_t *p)
{
    return atomic_load_explicit(p, memory_order_relaxed);
}
static inline void mt_bump(_Atomic int64_t *p, int64_t d)
{
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + d, memory_order_relaxed);
}

/* 1 while only the built-in categories exist (see above). */
extern _Atomic int mt_cat_solo;
/* The program's all-time peak of live bytes (the total's). */
int64_t mt_total_peak(void);

/* A delta passed flush_at: into the global, with the peak checked
 * against every shard's delta (counters.c). */
void mt_flush_slot(mt_cglobal *g, int slot, int64_t local);

/* Adds d to a slot's live bytes, checking the peak when growing. */
static MT_INLINE void mt_count_bytes(mt_cslot *c, mt_cglobal *g, int64_t d)
{
    int64_t local = mt_ld(&c->live_bytes) + d;
    int64_t f = mt_ld(&g->flush_at);
    /* |local| > f, in one comparison; the flush checks the peak */
    if (MT_UNLIKELY((uint64_t)(local + f) > 2 * (uint64_t)f)) {
        atomic_store_explicit(&c->live_bytes, 0, memory_order_relaxed);
        mt_flush_slot(g, (int)(g - mt_glob), local);
        return;
    }
    /* Stored first: what a peak's memory info event sums includes it. */
    atomic_store_explicit(&c->live_bytes, local, memory_order_relaxed);
    if (d > 0) {
        int64_t now = mt_ld(&g->live_bytes) + local;
        if (now > mt_ld(&g->peak_bytes))
            mt_raise_peak(g, now);
    }
}

static inline mt_shard *mt_my_shard(void)
{
    mt_shard *sh = mt_t.shard;
    return MT_LIKELY(sh != NULL) ? sh : mt_shard_acquire();
}

/* One block of `size` program bytes and `ovh` agent bytes came (sign=+1)
 * or went (sign=-1). A NULL shard (thread already exited) counts into the
 * globals directly. Only what cannot be derived is counted here: live
 * counts are allocs - frees, and the total's and the overhead's counts are
 * sums over the categories (mt_counters_sum). */
void mt_count_block_slow(unsigned cat, int64_t size, int64_t ovh, int sign);
static MT_INLINE void mt_count_block(unsigned cat, int64_t size, int64_t ovh, int sign)
{
    mt_shard *sh = mt_my_shard();
    if (MT_UNLIKELY(sh == NULL)) {
        mt_count_block_slow(cat, size, ovh, sign);
        return;
    }
    mt_cslot *c = &sh->slot[cat];
    /* A block whose overhead passes its size (malloc(0), aligned blocks)
     * checks the overhead's peak itself: its program bytes would not
     * bring a flush soon enough. */
    if (MT_LIKELY(ovh <= size))
        mt_bump(&sh->slot[MT_CAT_OVERHEAD].live_bytes, sign * ovh);
    else
        mt_count_bytes(&sh->slot[MT_CAT_OVERHEAD], &mt_glob[MT_CAT_OVERHEAD], sign * ovh);
    mt_count_bytes(c, &mt_glob[cat], sign * size);
    if (MT_UNLIKELY(!atomic_load_explicit(&mt_cat_solo, memory_order_relaxed)))
        mt_count_bytes(&sh->slot[MT_SLOT_TOTAL], &mt_glob[MT_SLOT_TOTAL], sign * size);
    mt_bump(sign > 0 ? &c->allocs : &c->frees, 1);
}

/* For mt_count_block_quick: *local, the slot's delta after sign * n, when
 * that needs neither a flush nor (growing) a peak raised; else 0. (A block
 * of 0 bytes that finds the slot at its peak goes the general way too,
 * which raises nothing: exact all the same.) */
static MT_INLINE int mt_quick_delta(mt_cslot *c, mt_cglobal *g, int sign, int64_t n, int64_t *local)
{
    int64_t l = mt_ld(&c->live_bytes) + sign * n, f = mt_ld(&g->flush_at);
    if (MT_UNLIKELY((uint64_t)(l + f) > 2 * (uint64_t)f))
        return 0;
    if (sign > 0 && MT_UNLIKELY(mt_ld(&g->live_bytes) + l > mt_ld(&g->peak_bytes)))
        return 0;
    *local = l;
    return 1;
}

/* mt_count_block's common case whole, or nothing: 1 when it counted; 0,
 * with nothing stored, when the caller must call mt_count_block instead
 * (no shard yet, a flush due, a peak to raise). It calls nothing, so the
 * hooks' common paths that use it need no stack frame of their own. Its
 * loads and stores of the shard are a few instructions further apart
 * than mt_count_block's: a signal handler that allocates on this thread
 * in between (which POSIX does not allow) loses its count either way. */
static MT_INLINE int mt_count_block_quick(unsigned cat, int64_t size, int64_t ovh, int sign)
{
    mt_shard *sh = mt_t.shard;
    if (MT_UNLIKELY(sh == NULL))
        return 0;
    mt_cslot *c = &sh->slot[cat], *o = &sh->slot[MT_CAT_OVERHEAD], *t = &sh->slot[MT_SLOT_TOTAL];
    int64_t local, lo = 0, lt = 0;
    if (!mt_quick_delta(c, &mt_glob[cat], sign, size, &local))
        return 0;
    /* overhead beyond the block's size: checked like the program's bytes */
    int big_ovh = ovh > size;
    if (MT_UNLIKELY(big_ovh) && !mt_quick_delta(o, &mt_glob[MT_CAT_OVERHEAD], sign, ovh, &lo))
        return 0;
    int solo = atomic_load_explicit(&mt_cat_solo, memory_order_relaxed);
    if (MT_UNLIKELY(!solo) && !mt_quick_delta(t, &mt_glob[MT_SLOT_TOTAL], sign, size, &lt))
        return 0;
    atomic_store_explicit(&c->live_bytes, local, memory_order_relaxed);
    if (MT_UNLIKELY(big_ovh))
        atomic_store_explicit(&o->live_bytes, lo, memory_order_relaxed);
    else
        mt_bump(&o->live_bytes, sign * ovh);
    if (MT_UNLIKELY(!solo))
        atomic_store_explicit(&t->live_bytes, lt, memory_order_relaxed);
    mt_bump(sign > 0 ? &c->allocs : &c->frees, 1);
    return 1;
}

/* mt_count_resize's common case whole, or nothing (as mt_count_block_quick):
 * a block of category cat changed size by dsize and its overhead did not
 * change, while the program has no category of its own. 0, with nothing
 * stored: the caller calls mt_count_resize. */
static MT_INLINE int mt_count_resize_quick(unsigned cat, int64_t dsize)
{
    mt_shard *sh = mt_t.shard;
    if (MT_UNLIKELY(sh == NULL) || MT_UNLIKELY(!atomic_load_explicit(&mt_cat_solo, memory_order_relaxed)))
        return 0;
    mt_cslot *c = &sh->slot[cat];
    int64_t local;
    /* As a growth by dsize: a shrink that finds the slot above its peak
     * goes to mt_count_resize, which raises nothing then. */
    if (!mt_quick_delta(c, &mt_glob[cat], +1, dsize, &local))
        return 0;
    atomic_store_explicit(&c->live_bytes, local, memory_order_relaxed);
    mt_bump(&c->reallocs, 1);
    return 1;
}

/* A live block of category cat changed size. */
void mt_count_resize_slow(unsigned cat, int64_t dsize, int64_t dovh);
static MT_INLINE void mt_count_resize(unsigned cat, int64_t dsize, int64_t dovh)
{
    mt_shard *sh = mt_my_shard();
    if (MT_UNLIKELY(sh == NULL)) {
        mt_count_resize_slow(cat, dsize, dovh);
        return;
    }
    if (MT_UNLIKELY(dovh != 0)) {
        if (dovh <= (dsize > 0 ? dsize : -dsize))
            mt_bump(&sh->slot[MT_CAT_OVERHEAD].live_bytes, dovh);
        else
            mt_count_bytes(&sh->slot[MT_CAT_OVERHEAD], &mt_glob[MT_CAT_OVERHEAD], dovh);
    }
    mt_count_bytes(&sh->slot[cat], &mt_glob[cat], dsize);
    if (MT_UNLIKELY(!atomic_load_explicit(&mt_cat_solo, memory_order_relaxed)))
        mt_count_bytes(&sh->slot[MT_SLOT_TOTAL], &mt_glob[MT_SLOT_TOTAL], dsize);
    mt_bump(&sh->slot[cat].reallocs, 1);
}

#endif

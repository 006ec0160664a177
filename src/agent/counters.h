/* counters.h — per-category summary counters, kept without locks.
 *
 * Each thread owns a shard: plain relaxed loads and stores on memory no
 * other thread writes, so the hot path has no lock and no atomic RMW.
 * Live bytes also go to a global per category in batches (whenever a
 * shard's unflushed delta passes the category's flush_at). A flush that
 * could reach the peak checks it against the exact sum of every shard,
 * which takes in threads that sit idle on a delta (one further below it
 * skips the sum: the other deltas could not lift it that far). Between
 * flushes each allocation checks it against the thread's own delta: the
 * hot path compares the delta with the slot's room (mt_cslot's hi and
 * lo), which the thread sets from the global, the peak and flush_at
 * whenever it goes the long way (a flush, a peak raised, its first
 * count). One thread alone is exact: the global
 * moves only with its own flushes. With more, the peak can miss what the
 * other threads hold unflushed and what they flushed since this thread
 * last set its room; each thread's delta stays within flush_at either
 * way, so that is under 2 x flush_at per thread. flush_at follows the
 * peak: 1/256 of it divided by the most threads that ever held shards at
 * once, so the peak stays within 1% for any number of threads (flush_at
 * between MT_FLUSH_MIN and MT_FLUSH_BYTES). When flush_at shrinks for
 * more threads, and when a shard is folded into the globals (a thread's
 * exit, the other threads' shards in a fork's child), every room is
 * zeroed (counters.c's rooms_reset): each thread's next count goes the long way
 * and takes the new figures.
 *
 * What the hot path leaves out, because it can be had otherwise:
 * - The total (MT_SLOT_TOTAL) while the program has no category of its
 *   own (mt_cat_solo): it is then the malloc category, whose slot is
 *   counted and whose peak is the total's. The first user category seeds
 *   the total's slot from malloc's and from then on both are counted.
 *   The total's live bytes in a sum are always the sum of the categories.
 * - The peak of the agent's overhead (per-block headers): a block whose
 *   overhead is no larger than its size, and on the hot path a plain block
 *   of MT_PLAIN_MIN bytes or more (its overhead at most 3 times its size),
 *   adds its overhead to the shard's delta with no check. The delta goes
 *   to the global, and the overhead's peak is checked (with the other
 *   threads' deltas when that flush sums the shards), whenever a flush of
 *   the program's bytes happens on that thread, and at every sum: a thread
 *   that trades a few large blocks for many small ones without moving its
 *   bytes may hold overhead unchecked meanwhile (never more than 3 times
 *   the bytes of those blocks). Other blocks with more overhead than bytes
 *   (malloc(0), aligned ones) are counted and checked like the program's
 *   bytes. */
#ifndef MT_AGENT_COUNTERS_H
#define MT_AGENT_COUNTERS_H

#include "agent/agent.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

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
#define MT_PEAK_PARTS 256 /* flush_at = peak / (MT_PEAK_PARTS * most threads) */

typedef struct mt_cslot {
    _Atomic int64_t live_bytes; /* not yet flushed to the global */
    /* The owner's room (mt_slot_room): live_bytes may grow to hi with no
     * flush due and the peak not passed, and shrink to lo with no flush
     * due. Only the owner reads them; 0 and 0 send its next count to
     * mt_count_bytes, which sets them. */
    _Atomic int64_t hi, lo; /* relaxed: rooms_reset (counters.c) writes them from other threads */
    _Atomic int64_t allocs;
    _Atomic int64_t frees;
    _Atomic int64_t reallocs;
} __attribute__((aligned(64))) mt_cslot; /* one cache line */

struct mt_site_slot;
typedef struct mt_shard {
    mt_cslot slot[MT_NSLOT];
    struct mt_site_slot **site_chunks; /* detail mode (site.h): NULL until first used */
    void *cfi_cache;                   /* detail mode: this thread's unwind rules (site_cfi.c) */
    unsigned cfi_gen;                  /* the mt_code_gen those rules are from */
    struct mt_shard *next;             /* registry list; shards are never unmapped */
    _Atomic int in_use;
    _Atomic long rec_busy;  /* this thread's hooks in flight while a trace records (record.h) */
    _Atomic long site_busy; /* this thread's hooks between a block's count and its site's (record.h) */
} mt_shard;

typedef struct mt_cglobal {
    _Atomic int64_t live_bytes; /* flushed deltas */
    _Atomic int64_t peak_bytes;
    _Atomic int64_t flush_at;     /* a shard's delta beyond this goes to live_bytes; 0: not yet tuned */
    _Atomic int64_t tuned_peak;   /* the peak flush_at was computed from */
    _Atomic int64_t flush_at_max; /* the largest flush_at ever: no shard's delta is above it */
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
/* mt_bump of a counter only this thread writes, in one instruction where
 * that can be had: readers on other threads see the old value or the new
 * (an aligned 8-byte access), and a signal cannot come in between. */
static inline void mt_bump_own(_Atomic int64_t *p, int64_t d)
{
#if defined(__x86_64__)
    __asm__("addq %1, %0" : "+m"(*(int64_t *)p) : "er"(d));
#else
    mt_bump(p, d);
#endif
}

/* 1 while only the built-in categories exist (see above). */
extern _Atomic int mt_cat_solo;
/* The program's all-time peak of live bytes (the total's). */
int64_t mt_total_peak(void);

/* A delta passed flush_at: into the global, with the peak checked
 * (against every shard's delta when they could reach it: counters.c). */
void mt_flush_slot(mt_cglobal *g, int slot, int64_t local);

/* A slot's hi or lo as the hot path reads it: a plain load the compiler
 * may fold into its comparison (a relaxed atomic load is a separate
 * instruction on GCC). The same 8-byte aligned load on x86-64; only
 * rooms_reset (counters.c), rare, writes them from another thread. */
static MT_INLINE int64_t mt_room(const _Atomic int64_t *p)
{
    return *(const int64_t *)p;
}

/* Sets a slot's room (mt_cslot) from its global as it is now. */
static MT_INLINE void mt_slot_room(mt_cslot *c, mt_cglobal *g)
{
    int64_t f = mt_ld(&g->flush_at), room = mt_ld(&g->peak_bytes) - mt_ld(&g->live_bytes);
    atomic_store_explicit(&c->hi, room < f ? room : f, memory_order_relaxed);
    atomic_store_explicit(&c->lo, -f, memory_order_relaxed);
}

/* Adds d to a slot's live bytes, checking the peak when growing. */
static MT_INLINE void mt_count_bytes(mt_cslot *c, mt_cglobal *g, int64_t d)
{
    int64_t local = mt_ld(&c->live_bytes) + d;
    int64_t f = mt_ld(&g->flush_at);
    /* |local| > f, in one comparison; the flush checks the peak */
    if (MT_UNLIKELY((uint64_t)(local + f) > 2 * (uint64_t)f)) {
        atomic_store_explicit(&c->live_bytes, 0, memory_order_relaxed);
        mt_flush_slot(g, (int)(g - mt_glob), local);
    } else {
        /* Stored first: what a peak's memory info event sums includes it. */
        atomic_store_explicit(&c->live_bytes, local, memory_order_relaxed);
        if (d > 0) {
            int64_t now = mt_ld(&g->live_bytes) + local;
            if (now > mt_ld(&g->peak_bytes))
                mt_raise_peak(g, now);
        }
    }
    mt_slot_room(c, g);
}

/* Sets mt_t.cslot and mt_t.catword from mt_t.shard and mt_t.cat, after
 * either changes (counters.c). */
void mt_cat_slot_set(void);

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

/* The owner's slot after adding d, when that is within its room
 * (mt_cslot): 1 and *local; else 0, and mt_count_bytes must do it. The
 * side of the room checked: hi for sign > 0, lo for sign < 0, both for 0
 * (a resize). */
static MT_INLINE int mt_quick_delta(mt_cslot *c, int sign, int64_t d, int64_t *local)
{
    int64_t l = mt_ld(&c->live_bytes) + d;
    if ((sign >= 0 && MT_UNLIKELY(l > mt_room(&c->hi))) || (sign <= 0 && MT_UNLIKELY(l < mt_room(&c->lo))))
        return 0;
    *local = l;
    return 1;
}

/* mt_quick_delta of slot c in shard sh and, once the program has
 * categories of its own (no longer solo), of the total's slot: 1 with
 * both within their rooms, the total's stored and c's in *local; 0 with
 * nothing stored. */
static MT_INLINE int mt_quick_deltas(mt_shard *sh, mt_cslot *c, int sign, int64_t d, int64_t *local)
{
    if (MT_UNLIKELY(!atomic_load_explicit(&mt_cat_solo, memory_order_relaxed))) {
        mt_cslot *t = &sh->slot[MT_SLOT_TOTAL];
        int64_t lt;
        if (!mt_quick_delta(t, sign, d, &lt) || !mt_quick_delta(c, sign, d, local))
            return 0;
        atomic_store_explicit(&t->live_bytes, lt, memory_order_relaxed);
        return 1;
    }
    return mt_quick_delta(c, sign, d, local);
}

/* The stores of a count that fits its slot's room: slot c's live bytes
 * now `local`, one more allocation (sign > 0) or free, and the overhead
 * into o, the overhead's slot of the same shard. */
static MT_INLINE void mt_count_commit(mt_cslot *c, mt_cslot *o, int64_t local, int64_t ovh, int sign)
{
    atomic_store_explicit(&c->live_bytes, local, memory_order_relaxed);
    mt_bump_own(sign > 0 ? &c->allocs : &c->frees, 1);
    mt_bump_own(&o->live_bytes, sign * ovh);
}

/* The overhead's slot beside malloc's slot c (while the program has no
 * category of its own, hooks.c's solo_slot): the next one in the same
 * shard, with no load of the shard's address. */
_Static_assert(MT_CAT_OVERHEAD == MT_CAT_MALLOC + 1, "mt_solo_overhead's slot");
static MT_INLINE mt_cslot *mt_solo_overhead(mt_cslot *c)
{
    return c + (MT_CAT_OVERHEAD - MT_CAT_MALLOC);
}

/* mt_count_block's common case whole, or nothing, for a plain block of
 * MT_PLAIN_MIN bytes or more whose category's slot in shard sh is c (the
 * total's too, once the program has categories of its own): 1 when it
 * counted; 0, with nothing stored, when the caller must call
 * mt_count_block instead (a flush due, a peak to raise). Its overhead,
 * ovh (block.h's mt_plain_overhead: 16 to 18 bytes), is added unchecked (at
 * most 3 times the block's bytes: the next flush of the program's bytes
 * checks its peak). It calls nothing, so the hooks' paths that use it
 * need no stack frame of their own for it. Its loads and stores of the shard
 * are a few instructions further apart than mt_count_block's: a signal
 * handler that allocates on this thread in between (which POSIX does not
 * allow) loses its count either way. */
static MT_INLINE int mt_count_slot_quick(mt_shard *sh, mt_cslot *c, int64_t size, int64_t ovh, int sign)
{
    int64_t local;
    if (!mt_quick_deltas(sh, c, sign, sign * size, &local))
        return 0;
    mt_count_commit(c, &sh->slot[MT_CAT_OVERHEAD], local, ovh, sign);
    return 1;
}
/* mt_count_slot_quick of category cat's slot. */
static MT_INLINE int mt_count_block_quick(mt_shard *sh, unsigned cat, int64_t size, int64_t ovh, int sign)
{
    return mt_count_slot_quick(sh, &sh->slot[cat], size, ovh, sign);
}

/* mt_count_resize's common case whole, or nothing (as mt_count_block_quick):
 * a block of category cat changed size by dsize and its overhead did not
 * change (the total's slot too, once the program has categories of its
 * own). 0, with nothing stored: the caller calls mt_count_resize. */
static MT_INLINE int mt_count_resize_quick(unsigned cat, int64_t dsize)
{
    mt_shard *sh = mt_t.shard;
    if (MT_UNLIKELY(sh == NULL))
        return 0;
    mt_cslot *c = &sh->slot[cat];
    int64_t local;
    if (!mt_quick_deltas(sh, c, 0, dsize, &local))
        return 0;
    atomic_store_explicit(&c->live_bytes, local, memory_order_relaxed);
    mt_bump_own(&c->reallocs, 1);
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

#pragma GCC visibility pop
#endif

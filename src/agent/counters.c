/* counters.c — the shard registry, category registry and the sums behind
 * every report (see counters.h for the design). */
#include "agent/counters.h"
#include "agent/block.h"
#include "agent/record.h"
#include "agent/meminfo.h"
#include "agent/site.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

mt_cglobal mt_glob[MT_NSLOT];
mt_catinfo mt_cats[MT_NCAT];
_Atomic int mt_ncats;
_Atomic int64_t mt_err_double_free, mt_err_bad_canary, mt_err_foreign_free;
_Atomic int mt_cat_solo = 1;

static mt_shard *_Atomic shard_list;
static _Atomic int shards_in_use, shards_most; /* threads holding a shard: now, and the most at once */
static pthread_key_t shard_key;
static int shard_key_ok;
static atomic_flag cat_lock = ATOMIC_FLAG_INIT;

void mt_category_lock(void)
{
    while (atomic_flag_test_and_set_explicit(&cat_lock, memory_order_acquire)) {
    }
}

void mt_category_unlock(void)
{
    atomic_flag_clear_explicit(&cat_lock, memory_order_release);
}

void *mt_os_alloc(size_t size)
{
    size = (size + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    mt_cglobal *g = &mt_glob[MT_CAT_OVERHEAD];
    int64_t now = atomic_fetch_add(&g->live_bytes, (int64_t)size) + (int64_t)size;
    mt_raise_peak(g, now);
    return p;
}

void mt_raise_peak_i64(_Atomic int64_t *peak, int64_t candidate)
{
    int64_t cur = mt_ld(peak);
    while (candidate > cur && !atomic_compare_exchange_weak_explicit(
                                  peak, &cur, candidate, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* Every shard's rooms to 0 (counters.h): each thread's next count of
 * every slot goes the long way and sets its room from the globals as they
 * are then. Rare: a new most of threads, a fold. */
static void rooms_reset(void)
{
    for (mt_shard *sh = atomic_load(&shard_list); sh; sh = sh->next)
        for (int i = 0; i < MT_NSLOT; i++) {
            atomic_store_explicit(&sh->slot[i].hi, 0, memory_order_relaxed);
            atomic_store_explicit(&sh->slot[i].lo, 0, memory_order_relaxed);
        }
}

/* flush_at from the peak and the most threads seen (counters.h). */
static void tune(mt_cglobal *g)
{
    int64_t peak = mt_ld(&g->peak_bytes), n = atomic_load_explicit(&shards_most, memory_order_relaxed);
    int64_t f = peak / (MT_PEAK_PARTS * (n > 1 ? n : 1));
    f = f < MT_FLUSH_MIN ? MT_FLUSH_MIN : f > MT_FLUSH_BYTES ? MT_FLUSH_BYTES : f;
    atomic_store_explicit(&g->tuned_peak, peak, memory_order_relaxed);
    mt_raise_peak_i64(&g->flush_at_max, f); /* first: it bounds every room taken from flush_at */
    atomic_store_explicit(&g->flush_at, f, memory_order_relaxed);
}

/* Whether g holds the program's total: the total's slot, or while there
 * is no user category, malloc's (counters.h). */
static int is_total(const mt_cglobal *g)
{
    return g == &mt_glob[MT_SLOT_TOTAL] ||
           (g == &mt_glob[MT_CAT_MALLOC] && atomic_load_explicit(&mt_cat_solo, memory_order_relaxed));
}

/* Retuned when the peak has doubled: a flush_at from a smaller peak is
 * only stricter. */
void mt_raise_peak(mt_cglobal *g, int64_t candidate)
{
    mt_raise_peak_i64(&g->peak_bytes, candidate);
    if (candidate > 2 * mt_ld(&g->tuned_peak))
        tune(g);
    /* memory info: the next PEAK mark, or the limit (meminfo.h) */
    if (MT_UNLIKELY(is_total(g)) &&
        candidate > atomic_load_explicit(&mt_info_next_mark, memory_order_relaxed))
        mt_info_live_check(candidate);
}

int64_t mt_total_peak(void)
{
    int64_t t = mt_ld(&mt_glob[MT_SLOT_TOTAL].peak_bytes), m = mt_ld(&mt_glob[MT_CAT_MALLOC].peak_bytes);
    return atomic_load_explicit(&mt_cat_solo, memory_order_relaxed) && m > t ? m : t;
}

/* Up to this many shards, a flush that could reach the peak sums them all
 * for it. */
#define EXACT_SUM_SHARDS 256

/* Adds every shard's delta of `slot` (unless -1) to *live and of the
 * overhead to *ovh, if there are at most EXACT_SUM_SHARDS (`others` and
 * this thread's); 0: too many, nothing added. */
static int sum_shards(int others, int slot, int64_t *live, int64_t *ovh)
{
    if (others >= EXACT_SUM_SHARDS)
        return 0;
    int k = 0;
    for (mt_shard *sh = atomic_load(&shard_list); sh && k < EXACT_SUM_SHARDS; sh = sh->next, k++) {
        if (slot >= 0)
            *live += mt_ld(&sh->slot[slot].live_bytes);
        *ovh += mt_ld(&sh->slot[MT_CAT_OVERHEAD].live_bytes);
    }
    return 1;
}

void mt_flush_slot(mt_cglobal *g, int slot, int64_t local)
{
    mt_cglobal *go = &mt_glob[MT_CAT_OVERHEAD];
    /* This thread's overhead goes along, unchecked till now (counters.h). */
    mt_shard *own = mt_t.shard;
    int64_t ovh = own ? mt_ld(&own->slot[MT_CAT_OVERHEAD].live_bytes) : 0;
    if (ovh) {
        atomic_store_explicit(&own->slot[MT_CAT_OVERHEAD].live_bytes, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&go->live_bytes, ovh, memory_order_relaxed);
    }
    int64_t now = atomic_fetch_add_explicit(&g->live_bytes, local, memory_order_relaxed) + local;
    int64_t now_ovh = mt_ld(&go->live_bytes);
    /* The other threads' deltas: summed only when they could matter. Each
     * of a program category's is at most flush_at_max, so while that many
     * of them cannot take the flushed figure past the peak (nor, for the
     * total, memory info's next mark), the sum would change nothing: it is
     * skipped, and with it the reads of cache lines the other threads keep
     * writing. Not for the overhead (its deltas go unchecked, counters.h),
     * nor for the total while a limit is set (its re-arming below limit -
     * 1% wants the sum). The overhead's peak is then raised only from a
     * sum of its own: its flushed figure alone may stand above the truth. */
    int others = atomic_load_explicit(&shards_in_use, memory_order_relaxed) - 1;
    int64_t bar = mt_ld(&g->peak_bytes),
            mark = atomic_load_explicit(&mt_info_next_mark, memory_order_relaxed);
    int total = is_total(g);
    if (total && mark < bar)
        bar = mark;
    int64_t reach = now + (others > 0 ? others : 0) * mt_ld(&g->flush_at_max);
    int must = slot == MT_CAT_OVERHEAD || (total && mt_info_opt.limit > 0);
    int summed = (must || reach > bar) && sum_shards(others, slot, &now, &now_ovh);
    if (now > mt_ld(&g->peak_bytes))
        mt_raise_peak(g, now);
    if (now_ovh > mt_ld(&go->peak_bytes) && !summed)
        sum_shards(others, -1, NULL, &now_ovh);
    if (now_ovh > mt_ld(&go->peak_bytes))
        mt_raise_peak(go, now_ovh);
    if (total) /* memory info: PEAK, LIMIT, the break's moves */
        mt_info_live_check(now);
}

/* A slot whose room is shut: a count in it always goes the long way.
 * Nothing is ever stored in it. */
static mt_cslot closed_slot = {.hi = INT64_MIN, .lo = INT64_MAX};

/* cslot closed while catword changes, with the compiler kept from moving
 * the stores: a signal handler's malloc in between goes the long way
 * (mt_t.cat) or finds the two in step. */
void mt_cat_slot_set(void)
{
    mt_shard *sh = mt_t.shard;
    mt_t.cslot = &closed_slot;
    atomic_signal_fence(memory_order_seq_cst);
    mt_t.catword =
        mt_word(0, mt_t.cat, MT_PLAIN_SHIFT, MT_REC_NONE) | MT_WORD_QUICK; /* malloc's common paths' */
    atomic_signal_fence(memory_order_seq_cst);
    mt_t.cslot = sh ? &sh->slot[mt_t.cat] : &closed_slot;
}

mt_shard *mt_shard_first(void)
{
    return atomic_load(&shard_list);
}

static void set_category(int id, const char *name, int kind)
{
    strncpy(mt_cats[id].name, name, MT_CATEGORY_NAME_MAX);
    mt_cats[id].kind = kind;
}

void mt_counters_init(void)
{
    set_category(MT_CAT_MALLOC, "malloc", MT_KIND_MALLOC);
    set_category(MT_CAT_OVERHEAD, "memtrail", MT_KIND_OVERHEAD);
    set_category(MT_CAT_HEAP, "heap", MT_KIND_VM);
    set_category(MT_CAT_STACKS, "stacks", MT_KIND_VM);
    set_category(MT_CAT_MMAP, "mmap", MT_KIND_VM);
    set_category(MT_CAT_FILES, "files", MT_KIND_VM);
    set_category(MT_CAT_CODE, "code", MT_KIND_VM);
    set_category(MT_CAT_OTHER, "other", MT_KIND_VM);
    atomic_store(&mt_ncats, MT_CAT_FIRST_USER);
    for (int i = 0; i < MT_NSLOT; i++)
        tune(&mt_glob[i]);
    /* Keys below PTHREAD_KEY_2NDLEVEL_SIZE live in the thread descriptor,
     * so pthread_setspecific never allocates for ours (created first). */
    shard_key_ok = pthread_key_create(&shard_key, mt_shard_thread_exit) == 0;
}

mt_shard *mt_shard_acquire(void)
{
    if (mt_t.exited)
        return NULL;
    mt_agent_enter();
    mt_shard *sh;
    for (sh = atomic_load(&shard_list); sh; sh = sh->next) {
        int expect = 0;
        if (atomic_load_explicit(&sh->in_use, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&sh->in_use, &expect, 1))
            break;
    }
    if (!sh) {
        sh = mt_os_alloc(sizeof *sh);
        if (sh) {
            atomic_store(&sh->in_use, 1);
            sh->next = atomic_load(&shard_list);
            while (!atomic_compare_exchange_weak(&shard_list, &sh->next, sh)) {
            }
        }
    }
    if (sh) {
        /* More threads than ever before: every category's flush_at shrinks
         * now, before this one counts anything. */
        int n = atomic_fetch_add(&shards_in_use, 1) + 1, most = atomic_load(&shards_most);
        while (n > most && !atomic_compare_exchange_weak(&shards_most, &most, n)) {
        }
        if (n > most) {
            for (int i = 0; i < MT_NSLOT; i++)
                tune(&mt_glob[i]);
            rooms_reset();
        }
        mt_t.shard = sh;
        mt_cat_slot_set();
        if (shard_key_ok)
            pthread_setspecific(shard_key, sh);
    }
    mt_agent_leave();
    return sh;
}

/* Moves a shard's counts into the globals and zeroes it. */
static void fold_shard(mt_shard *sh)
{
    for (int i = 0; i < MT_NSLOT; i++) {
        mt_cslot *c = &sh->slot[i];
        mt_cglobal *g = &mt_glob[i];
        atomic_fetch_add(&g->live_bytes, mt_ld(&c->live_bytes));
        atomic_fetch_add(&g->allocs, mt_ld(&c->allocs));
        atomic_fetch_add(&g->frees, mt_ld(&c->frees));
        atomic_fetch_add(&g->reallocs, mt_ld(&c->reallocs));
        memset((void *)c, 0, sizeof *c);
    }
    if (sh->site_chunks)
        mt_site_fold_shard(sh);
}

void mt_shard_thread_exit(void *arg)
{
    mt_shard *sh = arg;
    /* Frees made by later TLS destructors of this thread count into the
     * globals directly (mt_count_block_slow) instead of taking a new shard. */
    mt_t.exited = 1;
    mt_t.armed = 0; /* first: a signal handler's call meanwhile goes the long way (hooks.c's mt_arm) */
    atomic_signal_fence(memory_order_seq_cst);
    mt_t.cslot = &closed_slot;
    mt_t.shard = NULL;
    fold_shard(sh);
    rooms_reset();
    atomic_store(&sh->in_use, 0);
    atomic_fetch_sub(&shards_in_use, 1);
}

void mt_counters_after_fork_child(void)
{
    /* Only the forking thread exists in the child: the other shards hold
     * counts of memory the child still has, so fold them and free them. */
    for (mt_shard *sh = atomic_load(&shard_list); sh; sh = sh->next) {
        if (sh == mt_t.shard || atomic_load(&sh->in_use) == 0)
            continue;
        fold_shard(sh);
        atomic_store(&sh->in_use, 0);
        atomic_fetch_sub(&shards_in_use, 1);
    }
    rooms_reset();
}

/* Into the globals directly, each peak checked. */
static void count_global(unsigned slot, int64_t d, int grows)
{
    mt_cglobal *g = &mt_glob[slot];
    int64_t now = atomic_fetch_add(&g->live_bytes, d) + d;
    if (grows)
        mt_raise_peak(g, now);
}

void mt_count_block_slow(unsigned cat, int64_t size, int64_t ovh, int sign)
{
    count_global(cat, sign * size, sign > 0);
    if (!atomic_load(&mt_cat_solo))
        count_global(MT_SLOT_TOTAL, sign * size, sign > 0);
    count_global(MT_CAT_OVERHEAD, sign * ovh, sign > 0);
    atomic_fetch_add(sign > 0 ? &mt_glob[cat].allocs : &mt_glob[cat].frees, 1);
}

void mt_count_resize_slow(unsigned cat, int64_t dsize, int64_t dovh)
{
    count_global(cat, dsize, dsize > 0);
    if (!atomic_load(&mt_cat_solo))
        count_global(MT_SLOT_TOTAL, dsize, dsize > 0);
    count_global(MT_CAT_OVERHEAD, dovh, dovh > 0);
    atomic_fetch_add(&mt_glob[cat].reallocs, 1);
}

void mt_counters_sum(mt_catsum out[MT_NSLOT])
{
    for (int i = 0; i < MT_NSLOT; i++) {
        mt_cglobal *g = &mt_glob[i];
        out[i] = (mt_catsum){.live_bytes = mt_ld(&g->live_bytes),
                             .peak_bytes = mt_ld(&g->peak_bytes),
                             .allocs = mt_ld(&g->allocs),
                             .frees = mt_ld(&g->frees),
                             .reallocs = mt_ld(&g->reallocs)};
    }
    for (mt_shard *sh = atomic_load(&shard_list); sh; sh = sh->next) {
        for (int i = 0; i < MT_NSLOT; i++) {
            mt_cslot *c = &sh->slot[i];
            out[i].live_bytes += mt_ld(&c->live_bytes);
            out[i].allocs += mt_ld(&c->allocs);
            out[i].frees += mt_ld(&c->frees);
            out[i].reallocs += mt_ld(&c->reallocs);
        }
    }
    /* Counts of the total and of the overhead (one header per block) are
     * sums over the program's categories. */
    mt_catsum *t = &out[MT_SLOT_TOTAL], *o = &out[MT_CAT_OVERHEAD];
    t->allocs = t->frees = t->reallocs = t->live_bytes = 0;
    for (int i = 0; i < MT_NCAT; i++) {
        if (i == MT_CAT_OVERHEAD)
            continue;
        t->allocs += out[i].allocs;
        t->frees += out[i].frees;
        t->reallocs += out[i].reallocs;
        t->live_bytes += out[i].live_bytes; /* the total's own slot is not kept while solo */
    }
    t->peak_bytes = mt_total_peak();
    o->allocs = t->allocs;
    o->frees = t->frees;
    o->reallocs = 0;
    for (int i = 0; i < MT_NSLOT; i++) {
        out[i].live_count = out[i].allocs - out[i].frees;
        /* The peak is checked against global + own delta; another thread's
         * unflushed growth can put the true sum above it for a moment. */
        if (out[i].peak_bytes < out[i].live_bytes)
            out[i].peak_bytes = out[i].live_bytes;
    }
}

static int valid_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '/' || c == '+' || c == '-';
}

/* The category called `name`; a built-in one other than "malloc" cannot
 * be used as a tag (-EINVAL). */
static int find_category(const char *name, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(mt_cats[i].name, name) == 0)
            return mt_cats[i].kind == MT_KIND_MALLOC ? i : -EINVAL;
    return -ENOENT;
}

/* The first user category: from now on the total has its own slot,
 * which starts as malloc's (what the total was till now). Threads count
 * on meanwhile: one that read mt_cat_solo just before may count a block
 * into malloc alone, and one that flushes its total delta between the two
 * stores below loses it to the store. The total's slot is then off by up
 * to flush_at per such thread, for its peak checks and memory info's
 * marks only: the total's live bytes in a sum are the categories',
 * always exact. */
static void seed_total(void)
{
    atomic_fetch_or(&mt_hooks_extra,
                    MT_EXTRA_CATS); /* first: the hooks' common paths count malloc's slot alone */
    atomic_store(&mt_cat_solo, 0);
    mt_cglobal *t = &mt_glob[MT_SLOT_TOTAL], *m = &mt_glob[MT_CAT_MALLOC];
    int64_t live = mt_ld(&m->live_bytes);
    for (mt_shard *sh = atomic_load(&shard_list); sh; sh = sh->next)
        live += mt_ld(&sh->slot[MT_CAT_MALLOC].live_bytes) - mt_ld(&sh->slot[MT_SLOT_TOTAL].live_bytes);
    atomic_store(&t->live_bytes, live);
    mt_raise_peak_i64(&t->peak_bytes, mt_ld(&m->peak_bytes));
    tune(t);
}

int mt_category_get(const char *name)
{
    size_t len = 0;
    if (!name)
        return -EINVAL;
    while (name[len]) {
        if (len >= MT_CATEGORY_NAME_MAX || !valid_name_char(name[len]))
            return -EINVAL;
        len++;
    }
    if (len == 0)
        return -EINVAL;
    int id = find_category(name, atomic_load_explicit(&mt_ncats, memory_order_acquire));
    if (id != -ENOENT)
        return id;
    mt_category_lock();
    int n = atomic_load(&mt_ncats);
    id = find_category(name, n); /* another thread may have just made it */
    if (id == -ENOENT)
        id = n < MT_CAT_FIRST_USER + MT_MAX_USER_CATEGORIES ? -ENOENT : -ENOSPC;
    if (id == -ENOENT && atomic_load(&mt_cat_solo))
        seed_total();
    if (id == -ENOENT) {
        set_category(n, name, MT_KIND_MALLOC);
        atomic_store_explicit(&mt_ncats, n + 1, memory_order_release);
        id = n;
    }
    mt_category_unlock();
    return id;
}

/* site.c — detail mode's stack capture and lock-free site table (see
 * site.h for the design). */
#include "agent/site_capture.h"

#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/sample.h"
#include "agent/vm.h"
#include "common/out.h"

mt_site_opts mt_site_opt = {
    .detail = 0, .depth = MT_DEPTH_DEFAULT, .unwind = MT_UNWIND_AUTO, .sample_rate = MT_SAMPLE_RATE_DEFAULT};
mt_site *mt_sites;
/* Sample mode: exited threads' sample counts per site (the slots hold the
 * live threads'). NULL in other modes. */
typedef struct sample_sum {
    _Atomic int64_t samples, frees;
} sample_sum;
static sample_sum *sample_sums;

#define NBUCKETS (2 * MT_SITES_MAX) /* at most half full: probes stay short */
static _Atomic uint32_t *buckets;   /* site id, 0 = empty */
static uintptr_t *frames;           /* [MT_SITES_MAX][depth] */
static _Atomic uint32_t next_id = 1;
static _Atomic int64_t dropped;
static uintptr_t self_lo, self_hi; /* the agent's own code: frames there are skipped */
static char exe_path[MT_PATH_MAX]; /* the program's own path (its link map entry has none) */

/* The walk in use (MT_WALK_*), set at start-up (and in a fork child that
 * may not call libunwind, mt_site_after_fork_child). */
int mt_site_walker = MT_WALK_CFI;
int mt_site_forked;

static void *map_table(size_t bytes)
{
    mt_agent_enter(); /* the mapping is the agent's own (vm_hooks.c) */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    mt_agent_leave();
    return p == MAP_FAILED ? NULL : p;
}

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t pc = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && pc - lo < ph->p_memsz) {
            self_lo = lo;
            self_hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

int mt_site_init(void)
{
    size_t depth = (size_t)mt_site_opt.depth;
    mt_sites = map_table(sizeof(mt_site) * MT_SITES_MAX);
    buckets = map_table(sizeof(uint32_t) * NBUCKETS);
    frames = map_table(sizeof(uintptr_t) * depth * MT_SITES_MAX);
    if (mt_site_opt.sample)
        sample_sums = map_table(sizeof(sample_sum) * MT_SITES_MAX);
    if (!mt_sites || !buckets || !frames || (mt_site_opt.sample && !sample_sums)) {
        mt_say("detail mode: cannot map the site table; running in summary mode");
        return -1;
    }
    ssize_t k = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
    exe_path[k > 0 ? k : 0] = '\0';
    mt_site_walk_init();
    return 0;
}

void mt_site_walk_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&mt_site_init);
    mt_site_learn_stack(); /* the main thread's, now: not first in a handler on a small stack */
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    mt_site_walker = mt_site_opt.unwind == MT_UNWIND_FP          ? MT_WALK_FP
                     : mt_site_opt.unwind == MT_UNWIND_LIBUNWIND ? MT_WALK_LIBUNWIND
                                                                 : MT_WALK_CFI;
}

const char *mt_site_unwinder(void)
{
    return mt_site_walker == MT_WALK_FP ? "fp" : mt_site_walker == MT_WALK_CFI ? "cfi" : "libunwind";
}

/* ---- stack capture ------------------------------------------------------ */

static inline int in_self(uintptr_t pc)
{
    return pc - self_lo < self_hi - self_lo;
}

/* This thread's stack, for bounding frame-pointer and CFI walks: the
 * mapping that holds this frame, read from /proc/self/maps without malloc
 * or locks (pthread_getattr_np allocates, and for the main thread fopens
 * /proc/self/maps: inside another allocator's start-up that deadlocks, and
 * in a signal handler it is not allowed). The main thread's stack may grow
 * down to its rlimit or the mapping below; a thread's ends at its guard.
 * On an alternate signal stack nothing is learnt: the next try is on the
 * thread's own. A thread the agent started learns it from its exact
 * block (vm_hooks.c). */
void mt_site_learn_stack(void)
{
    stack_t alt;
    mt_vm_span s;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (sigaltstack(NULL, &alt) == 0 && (alt.ss_flags & SS_ONSTACK))
        return;
    mt_t.stack_hi = 1; /* tried: a failure is not retried */
    if (mt_vm_mapping_of(here, &s) != 0)
        return;
    uintptr_t lo = s.lo;
    if (getpid() == (pid_t)syscall(SYS_gettid)) {
        struct rlimit rl;
        uintptr_t room =
            getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < s.hi
                ? (uintptr_t)rl.rlim_cur
                : s.hi;
        lo = s.hi - room > s.below ? s.hi - room : s.below;
    }
    mt_t.stack_lo = lo;
    mt_t.stack_hi = s.hi;
}

/* Return addresses through the frame-pointer chain, every frame checked
 * to lie higher on this thread's stack than the last: reads never leave
 * the stack, whatever a frame without a frame pointer left in rbp. */
__attribute__((noinline)) int mt_site_fp_walk(uintptr_t *out, int max)
{
    const uintptr_t *fp = __builtin_frame_address(0);
    if (!mt_site_on_stack((uintptr_t)fp))
        return -1; /* a signal or coroutine stack: [fp, stack top) may have holes */
    uintptr_t hi = mt_t.stack_hi, lo = (uintptr_t)fp;
    int n = 0;
    while (n < max) {
        uintptr_t a = (uintptr_t)fp;
        if (a < lo || a > hi - 16 || (a & 7))
            break;
        uintptr_t ret = fp[1], next = fp[0];
        if (ret < 4096)
            break;
        out[n++] = ret;
        if (next <= a)
            break;
        lo = a + 16;
        fp = (const uintptr_t *)next;
    }
    return n;
}

/* Drops the agent's own frames (the entry point and what it called, and
 * the thread-start trampoline further up); returns how many remain (at
 * most want), moved to the front of pcs. */
static int strip_self(uintptr_t *pcs, int n, int want)
{
    int keep = 0;
    for (int i = 0; i < n && keep < want; i++)
        if (!in_self(pcs[i]))
            pcs[keep++] = pcs[i];
    return keep;
}

/* A walk of at most `ask` frames from here by `walker` (MT_WALK_*), as
 * mt_site_here does it. */
__attribute__((noinline)) static int walk(uintptr_t *pcs, int ask, int walker)
{
    const uintptr_t *frame = __builtin_frame_address(0);
    return mt_site_walk(pcs, ask, walker, frame);
}

/* The stack in the agent's entry point's caller and above: `want`
 * frames, or fewer when the stack is shorter. */
static int capture(uintptr_t *pcs, int want, int walker)
{
    int extra = 4; /* the agent's frames we expect to skip */
    for (;;) {
        int ask = want + extra;
        if (ask > MT_DEPTH_MAX + 30) /* the callers' buffers hold MT_DEPTH_MAX + 32 */
            ask = MT_DEPTH_MAX + 30;
        int n = walk(pcs, ask, walker);
        if (n < 0)
            n = 0;
        int got = strip_self(pcs, n, want);
        /* Cut short only if the walk stopped at our request: more of the
         * agent's frames than expected (the thread-start trampoline
         * counts too); ask again for more. */
        if (got == want || n < ask || ask == MT_DEPTH_MAX + 30)
            return got;
        extra = n - got + 2 > extra + 2 ? n - got + 2 : extra + 2;
    }
}

int mt_site_stack(uintptr_t *pcs, int want)
{
    if (mt_t.in_agent)
        return 0;
    mt_agent_enter(); /* libunwind may allocate: not through us */
    int n = capture(pcs, want, mt_site_walker);
    mt_agent_leave();
    return n;
}

/* ---- the table ---------------------------------------------------------- */

static inline uintptr_t *frames_of(uint32_t id)
{
    return frames + (size_t)id * (size_t)mt_site_opt.depth;
}

static uint64_t hash_stack(unsigned cat, const uintptr_t *pcs, int n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ cat ^ ((uint64_t)n << 8);
    for (int i = 0; i < n; i++) {
        h ^= pcs[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static int same_frames(const uintptr_t *a, const uintptr_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static int note_modules(const uintptr_t *pcs, int n, uint32_t id);
static void revive(uint32_t from, int wait);
static uint32_t find_or_add(unsigned cat, const uintptr_t *pcs, int n);
/* [MT_SITES_MAX], mapped at the first unload: 0 for a site in use, else
 * retired (mt_modules_after_dlclose): where its frames' module entries
 * were recorded, plus 1, or NO_RECORD; with REVIVED, in use again (every
 * entry recorded is loaded again: revive). */
static _Atomic uint32_t *_Atomic site_retired;
#define NO_RECORD UINT32_MAX /* retired, its frames' entries not recorded (no room) */
#define REVIVED 0x80000000u
static _Atomic int gone_entries; /* module entries marked gone, not taken back */
static _Atomic int linked_walks; /* note_linked under way */
#define NO_SITE UINT32_MAX
static _Atomic uint32_t revive_pending = NO_SITE; /* revive from here: the lock was busy */
static int entries_current(const uintptr_t *pcs, int n);
static void unload_unlock(void);

static inline int serves(uint32_t v)
{
    return v == 0 || (v != NO_RECORD && (v & REVIVED));
}
static uint16_t *records; /* frames' module entries of retired sites (record_of) */
/* The module entries recorded for the frames of a site whose retirement
 * word is v (neither 0 nor NO_RECORD). */
static inline const uint16_t *record_of(uint32_t v)
{
    return records + (v & ~REVIVED) - 1;
}

/* A record for a new site: this thread's spare (claimed earlier, lost a
 * race) or a fresh one; 0 when the table is full. */
static uint32_t claim(void)
{
    uint32_t id = mt_t.spare_site;
    if (id) {
        mt_t.spare_site = 0;
        _Atomic uint32_t *retired = atomic_load_explicit(&site_retired, memory_order_acquire);
        if (MT_UNLIKELY(retired != NULL)) /* an unload's scan may have seen the record */
            atomic_store_explicit(&retired[id], 0, memory_order_relaxed);
        return id;
    }
    id = atomic_fetch_add(&next_id, 1);
    if (id >= MT_SITES_MAX) {
        atomic_store(&next_id, MT_SITES_MAX);
        return 0;
    }
    return id;
}

static uint32_t find_or_add(unsigned cat, const uintptr_t *pcs, int n)
{
    /* A dlclose under way: the library it unloads may be unmapped
     * already, and another one mapped at its place that this stack went
     * through, before its scan marked it. If one of this stack's modules
     * is no longer what is loaded at its place, the scan is run now. */
    if (MT_UNLIKELY(atomic_load_explicit(&mt_unloading, memory_order_acquire)) && !entries_current(pcs, n))
        mt_modules_after_dlclose();
    uint64_t h = hash_stack(cat, pcs, n);
    size_t i = (size_t)h & (NBUCKETS - 1);
    int looked = 0;
    for (;;) {
        uint32_t id = atomic_load_explicit(&buckets[i], memory_order_acquire);
        if (id == 0) {
            /* A library unloaded may be back (its entry taken back here,
             * or a revival lost to a busy lock left pending): its sites
             * then serve again, and this stack may be one of them. */
            int pending = atomic_load_explicit(&revive_pending, memory_order_relaxed) != NO_SITE;
            int gone = atomic_load_explicit(&gone_entries, memory_order_relaxed) > 0;
            if (MT_UNLIKELY(pending || gone) && !looked) {
                looked = 1;
                if (pending)
                    revive(atomic_exchange(&revive_pending, NO_SITE), 1);
                if ((gone && note_modules(pcs, n, mt_site_count_ids())) || pending) {
                    i = (size_t)h & (NBUCKETS - 1);
                    continue;
                }
            }
            uint32_t mine = claim();
            if (mine == 0) {
                atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
                return 0;
            }
            mt_site *s = &mt_sites[mine];
            s->hash = h;
            s->cat = (uint16_t)cat;
            s->nframes = (uint16_t)n;
            memcpy(frames_of(mine), pcs, (size_t)n * sizeof *pcs);
            if (atomic_compare_exchange_strong(&buckets[i], &id, mine)) {
                note_modules(pcs, n, mine);
                return mine;
            }
            mt_t.spare_site = mine; /* another thread filled this bucket: id is theirs */
        }
        const mt_site *s = &mt_sites[id];
        _Atomic uint32_t *retired = atomic_load_explicit(&site_retired, memory_order_relaxed);
        if (s->hash == h && s->cat == cat && s->nframes == n && same_frames(frames_of(id), pcs, n) &&
            (MT_LIKELY(retired == NULL) || serves(atomic_load_explicit(&retired[id], memory_order_acquire))))
            return id;
        i = (i + 1) & (NBUCKETS - 1);
    }
}

uint32_t mt_site_from_stack(unsigned cat, uintptr_t *pcs, int n, int ask, int *walked_again)
{
    int want = mt_site_opt.depth;
    if (n < 0)
        n = 0;
    int got = strip_self(pcs, n, want);
    /* The walk stopped at our request with agent frames among the first
     * (more than the entry point expected): walk again for more. */
    int again = got < want && n >= ask;
    if (walked_again)
        *walked_again = again;
    n = again ? capture(pcs, want, mt_site_walker) : got;
    return find_or_add(cat, pcs, n);
}

/* libunwind's step loop: unlike unw_backtrace's cache, it forgets what
 * unw_flush_cache says (after a dlclose). */
__attribute__((noinline)) int mt_site_unw_steps(uintptr_t *pcs, int max)
{
    unw_context_t uc;
    unw_cursor_t c;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&c, &uc) != 0)
        return 0;
    int n = 0;
    do {
        unw_word_t ip;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0)
            break;
        pcs[n++] = (uintptr_t)ip;
    } while (n < max && unw_step(&c) > 0);
    return n;
}

void mt_site_flush_unwind_caches(void)
{
    unw_flush_cache(unw_local_addr_space, 0, 0);
}

/* ---- counters ----------------------------------------------------------- */

static void count_global(uint32_t id, int64_t bytes, int64_t n, int what)
{
    mt_site *site = &mt_sites[id];
    int64_t now = atomic_fetch_add(&site->live_bytes, bytes) + bytes;
    if (bytes > 0)
        mt_raise_peak_i64(&site->peak_bytes, now);
    atomic_fetch_add(what == MT_SITE_ALLOC  ? &site->allocs
                     : what == MT_SITE_FREE ? &site->frees
                                            : &site->reallocs,
                     n);
    if (bytes > 0)
        atomic_fetch_add(&site->allocated_bytes, bytes);
    atomic_store_explicit(&site->used, 1, memory_order_relaxed);
}

void mt_site_count_slow(mt_shard *sh, uint32_t id, int64_t bytes, int64_t n, int what)
{
    if (sh && !sh->site_chunks) {
        mt_agent_enter();
        sh->site_chunks = mt_os_alloc(sizeof(mt_site_slot *) * (MT_SITES_MAX / MT_SITE_CHUNK));
        mt_agent_leave();
    }
    if (sh && sh->site_chunks && !sh->site_chunks[id / MT_SITE_CHUNK]) {
        mt_agent_enter();
        sh->site_chunks[id / MT_SITE_CHUNK] = mt_os_alloc(sizeof(mt_site_slot) * MT_SITE_CHUNK);
        mt_agent_leave();
    }
    if (sh && sh->site_chunks && sh->site_chunks[id / MT_SITE_CHUNK])
        mt_site_count_n(id, bytes, n, what);
    else
        count_global(id, bytes, n, what); /* exited thread, or no memory for slots */
}

void mt_site_count_sampled(uint32_t id, uint64_t size, int what)
{
    int64_t bytes, n;
    mt_sample_weight(size, &bytes, &n);
    mt_site_count_n(id, what == MT_SITE_FREE ? -bytes : bytes, n, what);
    mt_shard *sh = mt_t.shard;
    mt_site_slot *chunk = sh && sh->site_chunks ? sh->site_chunks[id / MT_SITE_CHUNK] : NULL;
    if (chunk)
        mt_bump(what == MT_SITE_FREE ? &chunk[id % MT_SITE_CHUNK].sample_frees
                                     : &chunk[id % MT_SITE_CHUNK].samples,
                1);
    else if (sample_sums)
        atomic_fetch_add(what == MT_SITE_FREE ? &sample_sums[id].frees : &sample_sums[id].samples, 1);
}

void mt_site_fold_shard(mt_shard *sh)
{
    uint32_t ids = mt_site_count_ids();
    for (uint32_t c = 0; c * MT_SITE_CHUNK < ids; c++) {
        mt_site_slot *chunk = sh->site_chunks[c];
        if (!chunk)
            continue;
        for (uint32_t k = 0; k < MT_SITE_CHUNK; k++) {
            mt_site_slot *s = &chunk[k];
            mt_site *site = &mt_sites[c * MT_SITE_CHUNK + k];
            atomic_fetch_add(&site->live_bytes, mt_ld(&s->live_bytes));
            atomic_fetch_add(&site->allocs, mt_ld(&s->allocs));
            atomic_fetch_add(&site->frees, mt_ld(&s->frees));
            atomic_fetch_add(&site->reallocs, mt_ld(&s->reallocs));
            atomic_fetch_add(&site->allocated_bytes, mt_ld(&s->allocated_bytes));
            if (sample_sums) {
                atomic_fetch_add(&sample_sums[c * MT_SITE_CHUNK + k].samples, mt_ld(&s->samples));
                atomic_fetch_add(&sample_sums[c * MT_SITE_CHUNK + k].frees, mt_ld(&s->sample_frees));
            }
            memset((void *)s, 0, sizeof *s);
        }
    }
}

uint32_t mt_site_count_ids(void)
{
    uint32_t n = atomic_load(&next_id);
    return n < MT_SITES_MAX ? n : MT_SITES_MAX;
}

int64_t mt_site_dropped(void)
{
    return atomic_load(&dropped);
}

int mt_site_sum_of(uint32_t id, mt_site_sum *out)
{
    mt_site *site = &mt_sites[id];
    if (!atomic_load_explicit(&site->used, memory_order_relaxed))
        return 0;
    *out = (mt_site_sum){.live_bytes = mt_ld(&site->live_bytes),
                         .peak_bytes = mt_ld(&site->peak_bytes),
                         .allocs = mt_ld(&site->allocs),
                         .frees = mt_ld(&site->frees),
                         .reallocs = mt_ld(&site->reallocs),
                         .allocated_bytes = mt_ld(&site->allocated_bytes)};
    int64_t sample_frees = 0;
    if (sample_sums) {
        out->samples = mt_ld(&sample_sums[id].samples);
        sample_frees = mt_ld(&sample_sums[id].frees);
    }
    for (mt_shard *sh = mt_shard_first(); sh; sh = sh->next) {
        mt_site_slot **chunks = sh->site_chunks;
        mt_site_slot *chunk = chunks ? chunks[id / MT_SITE_CHUNK] : NULL;
        if (!chunk)
            continue;
        mt_site_slot *s = &chunk[id % MT_SITE_CHUNK];
        out->live_bytes += mt_ld(&s->live_bytes);
        out->allocs += mt_ld(&s->allocs);
        out->frees += mt_ld(&s->frees);
        out->reallocs += mt_ld(&s->reallocs);
        out->allocated_bytes += mt_ld(&s->allocated_bytes);
        out->samples += mt_ld(&s->samples);
        sample_frees += mt_ld(&s->sample_frees);
    }
    /* The shards are read one after another while threads sample and free:
     * a free seen without its sample must not make the figure negative. */
    out->live_samples = out->samples - sample_frees;
    if (out->live_samples < 0)
        out->live_samples = 0;
    if (out->live_samples > out->samples)
        out->live_samples = out->samples;
    if (sample_sums) { /* the counts are in 1/MT_SAMPLE_ONE of an allocation: rounded */
        out->allocs = mt_sample_round(out->allocs);
        out->frees = mt_sample_round(out->frees);
    }
    out->live_count = out->allocs - out->frees;
    if (out->peak_bytes < out->live_bytes)
        out->peak_bytes = out->live_bytes;
    return 1;
}

/* ---- modules ------------------------------------------------------------ */

#define MODULES_MAX 4096
#define PATHS_SIZE (1u << 20)
static mt_module modules[MODULES_MAX];
static _Atomic int nmodules;
static atomic_flag module_lock = ATOMIC_FLAG_INIT;
static int modules_full_said; /* under module_lock */
static char *paths;
static size_t paths_used;

static inline uint32_t gone_of(const mt_module *m)
{
    return __atomic_load_n(&m->gone, __ATOMIC_ACQUIRE);
}

static inline int holds(const mt_module *m, uintptr_t pc)
{
    return pc - m->start < m->end - m->start;
}

/* The loaded module that holds pc, or -1. */
static int module_index(uintptr_t pc)
{
    int n = atomic_load_explicit(&nmodules, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (holds(&modules[i], pc) && !gone_of(&modules[i]))
            return i;
    return -1;
}

static const char *keep_path(const char *s)
{
    size_t n = strlen(s) + 1;
    if (!paths) {
        paths = map_table(PATHS_SIZE);
        if (!paths)
            return "";
    }
    if (paths_used + n > PATHS_SIZE)
        return "";
    char *p = paths + paths_used;
    memcpy(p, s, n);
    paths_used += n;
    return p;
}

/* A module's extent and build-id from its program headers. */
static int describe(uintptr_t bias, const ElfW(Phdr) * phdr, int phnum, mt_module *m)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    *m = (mt_module){.bias = bias};
    for (int i = 0; i < phnum; i++) {
        const ElfW(Phdr) *ph = &phdr[i];
        if (ph->p_type == PT_LOAD) {
            uintptr_t a = bias + ph->p_vaddr;
            if (a < lo)
                lo = a;
            if (a + ph->p_memsz > hi)
                hi = a + ph->p_memsz;
        }
        if (ph->p_type != PT_NOTE || m->build_id_len)
            continue;
        const char *p = (const char *)(bias + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                nh->n_descsz <= sizeof m->build_id && (const char *)desc + nh->n_descsz <= end) {
                memcpy(m->build_id, desc, nh->n_descsz);
                m->build_id_len = nh->n_descsz;
                break;
            }
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    m->start = lo;
    m->end = hi;
    return lo < hi ? 0 : -1;
}

/* Appends m (named `name`) unless it is there. module_lock is held only
 * here, for a few loads and stores: no holder ever waits for anything, so
 * taking it by spinning cannot deadlock (not even against the loader's
 * lock, which dl_iterate_phdr may hold around note_one). */
static int same_place(const mt_module *a, const mt_module *b)
{
    return a->start == b->start && a->end == b->end && a->bias == b->bias;
}

static void lower_first_site(mt_module *m, uint32_t id)
{
    uint32_t was = __atomic_load_n(&m->first_site, __ATOMIC_RELAXED);
    while (id < was &&
           !__atomic_compare_exchange_n(&m->first_site, &was, id, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* Returns the entry taken back (the same file back at the same place), or -1. */
static int add_module(mt_module *m, const char *name, uint32_t first_site)
{
    while (atomic_flag_test_and_set_explicit(&module_lock, memory_order_acquire))
        __builtin_ia32_pause();
    const char *path = name && name[0] ? name : exe_path;
    int n = atomic_load(&nmodules), known = -1, again = -1;
    for (int i = 0; i < n && known < 0; i++) {
        if (!same_place(&modules[i], m))
            continue;
        if (!gone_of(&modules[i]))
            known = i;
        else if (again < 0 && m->build_id_len > 0 && modules[i].build_id_len == m->build_id_len &&
                 memcmp(modules[i].build_id, m->build_id, m->build_id_len) == 0 &&
                 strcmp(modules[i].path, path) == 0)
            again = i;
    }
    if (known >= 0) {
        lower_first_site(&modules[known], first_site);
    } else if (again >= 0) {
        /* The same file back at the same place (a plugin reloaded): its
         * entry serves again, so reloads do not fill the table, and the
         * sites made the time before can serve again (revive). */
        lower_first_site(&modules[again], first_site);
        __atomic_store_n(&modules[again].gone, 0, __ATOMIC_RELEASE);
        atomic_fetch_sub_explicit(&gone_entries, 1, memory_order_relaxed);
    } else if (n < MODULES_MAX) {
        m->path = keep_path(path);
        m->gone = 0;
        m->first_site = first_site;
        m->reused = 0;
        for (int i = 0; i < n && !m->reused; i++)
            m->reused = modules[i].start < m->end && m->start < modules[i].end;
        modules[n] = *m;
        atomic_store_explicit(&nmodules, n + 1, memory_order_release);
    } else if (!modules_full_said) {
        modules_full_said = 1;
        mt_say("detail mode: the module table is full (4096 objects loaded over the run): frames in objects "
               "loaded from now on are not named");
    }
    atomic_flag_clear_explicit(&module_lock, memory_order_release);
    return known < 0 ? again : -1;
}

/* dl_iterate_phdr callback: notes every loaded module. */
static int note_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    mt_module m;
    if (describe(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, &m) == 0) {
        int back = add_module(&m, info->dlpi_name, mt_site_count_ids());
        if (back >= 0)
            revive(__atomic_load_n(&modules[back].first_site, __ATOMIC_RELAXED),
                   0); /* the loader's lock held */
    }
    return 0;
}

/* Notes the object holding address `a`, without the loader's lock:
 * _dl_find_object finds it, and its program headers are read where its
 * ELF header is mapped. Returns the first site of the entry taken back
 * (the same file back at the same place), else UINT32_MAX. want, when
 * not NULL, is the only link map to note (a walk of the loader's list):
 * its mapping is checked first, since a dlclose under way at a fork
 * leaves in the child an object the loader still lists but has unmapped. */
static uint32_t note_at(uintptr_t a, uint32_t id, const struct link_map *want)
{
    struct dl_find_object f;
    unsigned char in_core;
    if (_dl_find_object((void *)a, &f) != 0 || !f.dlfo_link_map)
        return UINT32_MAX;
    if (want && (f.dlfo_link_map != want || mincore(f.dlfo_map_start, 1, &in_core) != 0))
        return UINT32_MAX;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)f.dlfo_map_start;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
        eh->e_phoff + (size_t)eh->e_phnum * sizeof(ElfW(Phdr)) > 65536)
        return UINT32_MAX; /* left for the report's refresh */
    mt_module m;
    if (describe(f.dlfo_link_map->l_addr, (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff), eh->e_phnum,
                 &m) != 0)
        return UINT32_MAX;
    int back = add_module(&m, f.dlfo_link_map->l_name, id);
    return back >= 0 ? __atomic_load_n(&modules[back].first_site, __ATOMIC_RELAXED) : UINT32_MAX;
}

/* Notes the modules of a new site's frames while they are loaded.
 * Returns whether an entry was taken back (then the retired sites that
 * can serve again do). */
static int note_modules(const uintptr_t *pcs, int n, uint32_t id)
{
    uint32_t back_from = UINT32_MAX;
    for (int i = 0; i < n; i++) {
        int known = module_index(pcs[i]);
        if (known >= 0) /* a spare record taken back may be below its first site */
            lower_first_site(&modules[known], id);
        if (known >= 0 || in_self(pcs[i]))
            continue;
        uint32_t from = note_at(pcs[i], id, NULL);
        if (from < back_from)
            back_from = from;
    }
    if (back_from == UINT32_MAX)
        return 0;
    revive(back_from, 1);
    return 1;
}

/* ---- unloaded modules ---------------------------------------------------
 * A library unloaded (dlclose) and another loaded at its addresses: the
 * return addresses of the first one's sites would be read as the second
 * one's code, and a stack walked through the second one would find the
 * first one's site (same addresses). So after each dlclose the modules no
 * longer loaded are marked gone, and every site with a frame in one of
 * them is retired: find_or_add no longer matches it (a stack walked later
 * makes a new site), and which module table entry each of its frames lay
 * in is recorded then, when that is known. A report shows a gone entry's
 * range, and the frames recorded in it, shifted by the entry's number
 * (mt_module_shown); a trace, the entries noted where another lay
 * (mt_module_traced). The same file loaded again at the same place takes
 * its entry back (add_module), so reloads do not fill the table, and the
 * retired sites whose entries are all loaded again serve again (revive),
 * so they do not fill the site table either. */

#define NO_MODULE 0xffffu
#define RECORDS_MAX (8u << 20) /* frames' module entries of retired sites: 16 MiB reserved */
static uint32_t records_used;  /* under unload_lock */
static atomic_flag unload_lock = ATOMIC_FLAG_INIT;
static uint16_t gone_now[MODULES_MAX]; /* under unload_lock */

/* Whether the module noted in m is still what is loaded at its address. */
static int still_loaded(const mt_module *m)
{
    struct dl_find_object f;
    if (_dl_find_object((void *)m->start, &f) != 0 || !f.dlfo_link_map || f.dlfo_link_map->l_addr != m->bias)
        return 0;
    const char *name = f.dlfo_link_map->l_name;
    return !name || !name[0] || strcmp(name, m->path) == 0;
}

/* The entry a frame of a site being retired lies in: one that went just
 * now, else a loaded one. */
static uint16_t entry_of(uintptr_t pc, int ngone)
{
    for (int j = 0; j < ngone; j++)
        if (holds(&modules[gone_now[j]], pc))
            return gone_now[j];
    int i = module_index(pc);
    return i >= 0 ? (uint16_t)i : NO_MODULE;
}

void mt_modules_after_dlclose(void)
{
    if (!mt_sites)
        return;
    mt_agent_enter();
    while (atomic_flag_test_and_set_explicit(&unload_lock, memory_order_acquire))
        sched_yield();
    _Atomic uint32_t *retired = atomic_load(&site_retired);
    if (!retired && atomic_load(&nmodules) > 0) {
        records = map_table(sizeof(uint16_t) * RECORDS_MAX);
        retired = map_table(sizeof(uint32_t) * MT_SITES_MAX);
        atomic_store_explicit(&site_retired, retired, memory_order_release);
    }
    int ngone = 0;
    uint32_t first = UINT32_MAX;
    if (retired) { /* else nothing is marked: without the table no site could be retired */
        while (atomic_flag_test_and_set_explicit(&module_lock, memory_order_acquire))
            __builtin_ia32_pause();
        int n = atomic_load(&nmodules);
        for (int i = 0; i < n; i++) {
            mt_module *m = &modules[i];
            if (gone_of(m) || still_loaded(m))
                continue;
            __atomic_store_n(&m->gone, 1, __ATOMIC_RELEASE);
            atomic_fetch_add_explicit(&gone_entries, 1, memory_order_relaxed);
            gone_now[ngone++] = (uint16_t)i;
            uint32_t f = __atomic_load_n(&m->first_site, __ATOMIC_RELAXED);
            if (f < first)
                first = f;
        }
        atomic_flag_clear_explicit(&module_lock, memory_order_release);
    }
    uint32_t ids = ngone ? mt_site_count_ids() : 0;
    for (uint32_t id = first > 0 ? first : 1; id < ids; id++) {
        uint32_t was = atomic_load_explicit(&retired[id], memory_order_relaxed);
        if (!serves(was))
            continue;
        const uintptr_t *f = frames_of(id);
        unsigned nf = mt_sites[id].nframes;
        int hit = 0;
        for (unsigned k = 0; k < nf && !hit; k++)
            for (int j = 0; j < ngone && !hit; j++)
                hit = holds(&modules[gone_now[j]], f[k] - 1);
        if (!hit)
            continue;
        if (was) { /* revived: its record still says where its frames lie */
            atomic_compare_exchange_strong_explicit(&retired[id], &was, was & ~REVIVED, memory_order_release,
                                                    memory_order_relaxed);
            continue;
        }
        uint32_t rec = NO_RECORD;
        if (records && records_used + nf <= RECORDS_MAX) {
            for (unsigned k = 0; k < nf; k++)
                records[records_used + k] = entry_of(f[k] - 1, ngone);
            rec = records_used + 1;
            records_used += nf;
        }
        uint32_t none = 0; /* a spare record claim takes back clears it */
        atomic_compare_exchange_strong_explicit(&retired[id], &none, rec, memory_order_release,
                                                memory_order_relaxed);
    }
    unload_unlock();
    mt_agent_leave();
}

/* After an entry was taken back: each retired site from id `from` up
 * whose recorded entries are all loaded again serves again, so a plugin
 * reloaded many times keeps its sites (find_or_add matches them again).
 * A site retired with no record stays retired. Under unload_lock. */
static void revive_locked(_Atomic uint32_t *retired, uint32_t from)
{
    uint32_t ids = mt_site_count_ids();
    for (uint32_t id = from > 0 ? from : 1; id < ids; id++) {
        uint32_t was = atomic_load_explicit(&retired[id], memory_order_relaxed);
        if (serves(was) || was == NO_RECORD) /* no record: where its frames lay is not known */
            continue;
        unsigned nf = mt_sites[id].nframes, k = 0;
        const uint16_t *r = record_of(was);
        while (k < nf && (r[k] == NO_MODULE || !gone_of(&modules[r[k]])))
            k++;
        if (k == nf)
            atomic_compare_exchange_strong_explicit(&retired[id], &was, was | REVIVED, memory_order_release,
                                                    memory_order_relaxed);
    }
}

/* Releases unload_lock, doing first a revival left for its holder. */
static void unload_unlock(void)
{
    uint32_t from = atomic_exchange(&revive_pending, NO_SITE);
    _Atomic uint32_t *retired = atomic_load_explicit(&site_retired, memory_order_acquire);
    if (from != NO_SITE && retired)
        revive_locked(retired, from);
    atomic_flag_clear_explicit(&unload_lock, memory_order_release);
}

/* wait: for the lock (no holder waits for anything); else, when it is
 * busy, the revival is left for its holder (unload_unlock) or the next
 * site lookup that misses. */
static void revive(uint32_t from, int wait)
{
    _Atomic uint32_t *retired = atomic_load_explicit(&site_retired, memory_order_acquire);
    if (!retired || from == NO_SITE)
        return;
    while (atomic_flag_test_and_set_explicit(&unload_lock, memory_order_acquire)) {
        if (wait) {
            sched_yield();
            continue;
        }
        uint32_t was = atomic_load(&revive_pending);
        while (from < was && !atomic_compare_exchange_weak(&revive_pending, &was, from)) {
        }
        return;
    }
    revive_locked(retired, from);
    unload_unlock();
}

/* Whether the loaded entries a stack's frames lie in are still what is
 * loaded at their places (no lock: a dlclose under way may have unmapped
 * one, and another object been mapped there, before its scan). */
static int entries_current(const uintptr_t *pcs, int n)
{
    int last = -1;
    for (int k = 0; k < n; k++) {
        int i = module_index(pcs[k] - 1);
        if (i < 0 || i == last)
            continue;
        last = i;
        if (!still_loaded(&modules[i]))
            return 0;
    }
    return 1;
}

uintptr_t mt_site_frame_shown(uint32_t id, unsigned k)
{
    uintptr_t pc = frames_of(id)[k];
    _Atomic uint32_t *retired = atomic_load_explicit(&site_retired, memory_order_acquire);
    uint32_t rec = retired ? atomic_load_explicit(&retired[id], memory_order_acquire) : 0;
    if (rec == 0 || rec == NO_RECORD)
        return pc; /* every frame of a live site is in a loaded module, or none */
    uint16_t i = record_of(rec)[k];
    return i == NO_MODULE ? pc : mt_module_shown(i, pc);
}

uintptr_t mt_module_shown(int i, uintptr_t a)
{
    return gone_of(&modules[i]) ? a + ((uintptr_t)(i + 1) << MT_GONE_SHIFT) : a;
}

uintptr_t mt_module_traced(int i, uintptr_t a)
{
    return modules[i].reused ? a + ((uintptr_t)(i + 1) << MT_GONE_SHIFT) : a;
}

/* Each frame shifted as the entry it lies in: the one recorded when the
 * site was retired, else the loaded one that holds it (a live site's
 * modules are loaded). Under unload_lock once there were unloads, so that
 * a site is not seen between its modules marked gone and it retired. */
int mt_site_frames_traced(uint32_t id, uintptr_t *out, int max)
{
    int n = mt_sites[id].nframes;
    if (n > max)
        n = max;
    _Atomic uint32_t *retired = atomic_load_explicit(&site_retired, memory_order_acquire);
    int locked = 0;
    if (retired) {
        /* Waits a bounded time: a thread that crashed holding the lock
         * (its handler flushes the trace) must not hang the flush. */
        mt_agent_enter();
        for (int tries = 0; tries < 1000; tries++) {
            locked = !atomic_flag_test_and_set_explicit(&unload_lock, memory_order_acquire);
            if (locked)
                break;
            sched_yield();
        }
    }
    uint32_t rec = retired ? atomic_load_explicit(&retired[id], memory_order_acquire) : 0;
    const uintptr_t *f = frames_of(id);
    for (int k = 0; k < n; k++) {
        int i = rec == 0 ? module_index(f[k] - 1) : rec == NO_RECORD ? -1 : record_of(rec)[k];
        out[k] = i < 0 || i == NO_MODULE ? f[k] : mt_module_traced(i, f[k]);
    }
    if (locked)
        atomic_flag_clear_explicit(&unload_lock, memory_order_release);
    if (retired)
        mt_agent_leave();
    return n;
}

void mt_site_after_fork_child(void)
{
    mt_site_forked = 1;
    if (mt_site_walker == MT_WALK_LIBUNWIND)
        mt_site_walker = MT_WALK_CFI; /* the report's unwinder line says so */
    atomic_flag_clear_explicit(&module_lock, memory_order_release);
    atomic_flag_clear_explicit(&unload_lock, memory_order_release);
    atomic_store(&linked_walks, 0);
    atomic_store(&mt_unloading, mt_t.dlclose_depth); /* the other threads inside dlclose are not here */
}

/* Every object on the loader's list, without its lock (a fork child's
 * refresh). Each entry is checked to be what _dl_find_object finds at
 * its dynamic section before it is noted or its link followed: the walk
 * ends at one the loader is still linking in (a dlopen under way, in the
 * parent at the fork or in the child). Objects in other namespaces
 * (dlmopen) are not on this list: they are noted when a site's frame lies
 * in one (note_modules). */
static void note_linked(void)
{
    uint32_t back_from = UINT32_MAX, id = mt_site_count_ids();
    int steps = 0;
    /* Not while one of this process's threads is inside dlclose, which
     * unmaps objects and frees their entries: announced, then checked
     * (mt_site_wait_linked_walks, in the dlclose hook, checks the other
     * way round). */
    for (;;) {
        atomic_fetch_add(&linked_walks, 1);
        if (atomic_load(&mt_unloading) <= mt_t.dlclose_depth)
            break;
        atomic_fetch_sub(&linked_walks, 1);
        sched_yield();
    }
    for (const struct link_map *l = _r_debug.r_map; l && steps < MODULES_MAX; l = l->l_next, steps++) {
        struct dl_find_object f;
        if (!l->l_ld || _dl_find_object((void *)l->l_ld, &f) != 0 || f.dlfo_link_map != l)
            break;
        uint32_t from = note_at((uintptr_t)l->l_ld, id, l);
        if (from < back_from)
            back_from = from;
    }
    atomic_fetch_sub(&linked_walks, 1);
    if (back_from != UINT32_MAX)
        revive(back_from, 1);
}

void mt_site_wait_linked_walks(void)
{
    while (atomic_load(&linked_walks) > 0)
        sched_yield();
}

/* dl_iterate_phdr takes the loader's write lock, which glibc does not
 * reset in a fork child: another thread of the parent inside dlopen,
 * dlclose or dl_iterate_phdr at the fork leaves it held there for ever,
 * so a fork child's report walks the list without it. */
void mt_modules_refresh(void)
{
    mt_agent_enter();
    if (mt_site_forked) /* the loader's list lock may be held for ever */
        note_linked();
    else
        dl_iterate_phdr(note_one, NULL);
    mt_agent_leave();
}

int mt_module_count(void)
{
    return atomic_load_explicit(&nmodules, memory_order_acquire);
}
const mt_module *mt_module_get(int i)
{
    return &modules[i];
}

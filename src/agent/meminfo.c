/* meminfo.c — memory events (PEAK, GROW, TRIM, LIMIT, PERIODIC) and the
 * consistent snapshot of each kind's last one: mt_memory_info,
 * mt_event_count, mt_category_name (meminfo.h, docs/info.md).
 *
 * An event is first counted as pending. The thread holding the writer flag
 * takes every pending event, fills one snapshot (meminfo_os.c has what the
 * kernel and the allocator say) and publishes it for each pending kind and
 * for ANY. A kind's count (mt_event_count) is the index of its current
 * snapshot, read from the same latch: so the index a reader gets lies
 * between the counts it read before and after.
 *
 * Publication is a latch: two copies under one sequence number, readers
 * copying copy[seq & 1]. A writer fills the other copy, moves seq on to
 * it, then brings the old one up to date: the copy readers are sent to is
 * always whole, so a reader never waits for a writer (not even one it
 * interrupted on its own thread, mt_info_write in a signal handler, nor
 * one a fork or _Fork stopped half-way) and retries only when seq moved
 * during its copy.
 *
 * Writers are rare and take the flag in turn (spinning, then yielding,
 * then leaving their event pending). An event raised while its own thread
 * holds the flag (a signal handler's mmap, the cgroup limit noticed during
 * a fill) stays pending: the holder looks again after letting go and
 * publishes it. A flag held by another process's thread (a _Fork child
 * runs no fork handlers to clear it) is taken over. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/allocator.h"
#include "agent/counters.h"
#include "agent/meminfo.h"
#include "agent/meminfo_os.h"

mt_info_options mt_info_opt = {.peak_step = 1u << 20};

/* The origin of the tick/clock ratio, and the process's totals. */
static uint64_t tick0, ns0;
static _Atomic uint64_t alloc_ticks, map_ticks;
static _Atomic int info_ready; /* mt_info_init ran: events count */

/* ---- thresholds the event sources compare against ------------------------ */

_Atomic int64_t mt_info_next_mark = INT64_MAX;
static _Atomic int64_t peak_mark = INT64_MAX; /* a PEAK when live passes this */
static _Atomic int limit_armed = 1;           /* option limit: not crossed since live was below it - 1% */
static _Atomic int cgroup_armed = 1;          /* the same for the cgroup's memory.high (or 90% of max) */
static _Atomic int64_t window_peak;           /* the highest live the flushes saw since the last event */
static void *_Atomic last_brk;                /* glibc's break as the last check saw it */
extern void *__curbrk;

/* The hot path's one threshold: the next PEAK mark, or the limit while
 * armed and lower. A stale value costs at most a missed check until the
 * next flush, or an extra call. */
static void set_next_mark(void)
{
    int64_t t = atomic_load(&peak_mark), limit = (int64_t)mt_info_opt.limit;
    if (limit > 0 && atomic_load(&limit_armed) && limit < t)
        t = limit;
    atomic_store_explicit(&mt_info_next_mark, t, memory_order_relaxed);
}

/* ---- publication --------------------------------------------------------- */

typedef struct latch {
    _Atomic uint64_t seq; /* readers copy copy[seq & 1] */
    struct mt_memory_info copy[2];
} latch;

static latch snaps[MT_EVENT_KINDS];
static uint64_t published[MT_EVENT_KINDS]; /* under the writer flag: each kind's last index */
static _Atomic uint64_t pending[MT_EVENT_KINDS];
/* The holder: its pid << 32 | its tid, or 0. One word, so taking the flag
 * over from another process (a _Fork child's copy of a held flag) is one
 * compare-and-swap on what was seen, never a race with a live holder. */
static _Atomic uint64_t writer;

static void publish(latch *l, const struct mt_memory_info *s)
{
    uint64_t q = atomic_load_explicit(&l->seq, memory_order_relaxed);
    memcpy(&l->copy[(q + 1) & 1], s, sizeof *s); /* no reader is sent there now */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&l->seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(&l->copy[q & 1], s, sizeof *s); /* readers still on it see seq move, and retry */
}

/* Copies the current snapshot; 1, or 0 when `tries` copies were each
 * overtaken by a writer (out then holds the last, maybe torn). */
static int read_latch(latch *l, struct mt_memory_info *out, long tries)
{
    for (long i = 0; tries < 0 || i < tries; i++) {
        uint64_t q = atomic_load_explicit(&l->seq, memory_order_acquire);
        memcpy(out, &l->copy[q & 1], sizeof *out);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&l->seq, memory_order_relaxed) == q)
            return 1;
    }
    return 0;
}

/* The current snapshot's index alone. */
static uint64_t latch_index(latch *l)
{
    for (;;) {
        uint64_t q = atomic_load_explicit(&l->seq, memory_order_acquire);
        uint64_t index = __atomic_load_n(&l->copy[q & 1].index, __ATOMIC_RELAXED);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&l->seq, memory_order_relaxed) == q)
            return index;
    }
}

/* 1 with the flag taken; 0 when this thread holds it already (a nested
 * event) or another holder kept it too long: the event stays pending. */
static int gone(pid_t pid, pid_t tid)
{
    return syscall(SYS_tgkill, pid, tid, 0) == -1 && errno == ESRCH;
}

static int take_writer(void)
{
    uint64_t pid = (uint64_t)(uint32_t)getpid();
    uint64_t me = pid << 32 | (uint32_t)syscall(SYS_gettid);
    for (int spins = 0; spins < 2200; spins++) {
        uint64_t expect = 0;
        if (atomic_compare_exchange_strong(&writer, &expect, me))
            return 1;
        if (expect == me)
            return 0;
        /* held in another process: a copy no thread here will let go */
        if (expect >> 32 != pid && atomic_compare_exchange_strong(&writer, &expect, me))
            return 1;
        /* held by a thread of this process that is gone (one a signal
         * handler ended with pthread_exit inside a snapshot): checked once
         * the spinning has gone on a while */
        if (spins == 200 && gone((pid_t)(expect >> 32), (pid_t)(uint32_t)expect) &&
            atomic_compare_exchange_strong(&writer, &expect, me))
            return 1;
        if (spins < 200)
            __builtin_ia32_pause();
        else
            sched_yield();
    }
    return 0;
}

/* ---- filling a snapshot (under the writer flag) -------------------------- */

#define NO_SAMPLE UINT64_MAX

static struct mt_memory_info scratch;
static int64_t cat_live[MT_NCAT];
static uint64_t frag_last; /* the last mallinfo2 sample */

/* mallinfo2 walks every free chunk with each arena's lock held: on a
 * fragmented heap that takes long and stalls the other threads' malloc.
 * So it is taken at most 1% of the time: after a sample that took d ns,
 * the next waits 100 d (and at least 1 ms); in between a snapshot repeats
 * the last sample. (malloc_trim's own before/after are always taken.) */
static uint64_t sample_next_ns;

static int sample_due(uint64_t now)
{
    return now >= sample_next_ns;
}

static void sampled(uint64_t t0)
{
    uint64_t took = mt_clock_ns(CLOCK_MONOTONIC) - t0;
    sample_next_ns = t0 + (took * 100 > 1000000 ? took * 100 : 1000000);
}
static int64_t alltime_seen; /* the total's all-time peak at the last event */

/* Live bytes by category: the flushed globals plus every shard's delta. */
static int sum_categories(void)
{
    int n = atomic_load_explicit(&mt_ncats, memory_order_acquire);
    for (int i = 0; i < n; i++)
        cat_live[i] = mt_ld(&mt_glob[i].live_bytes);
    for (mt_shard *sh = mt_shard_first(); sh; sh = sh->next)
        for (int i = 0; i < n; i++)
            cat_live[i] += mt_ld(&sh->slot[i].live_bytes);
    return n;
}

/* What the current event says about limits: LIMIT events, left pending. */
static void note(int kind);
static void check_cgroup(const mt_os_mem *m)
{
    uint64_t at = m->cg_high ? m->cg_high : m->cg_max / 10 * 9;
    if (!at)
        return;
    if (m->cg_current > at) {
        /* the whole cgroup's doing: no thread's span is charged with it */
        if (atomic_exchange(&cgroup_armed, 0))
            atomic_fetch_add(&pending[MT_EVENT_LIMIT], 1);
    } else if (m->cg_current < at - at / 100) {
        atomic_store(&cgroup_armed, 1);
    }
}

static void check_limit(int64_t live)
{
    int64_t limit = (int64_t)mt_info_opt.limit;
    if (limit <= 0)
        return;
    if (live > limit) {
        if (atomic_load(&limit_armed) && atomic_exchange(&limit_armed, 0)) {
            set_next_mark();
            note(MT_EVENT_LIMIT);
        }
    } else if (live < limit - limit / 100 && !atomic_load(&limit_armed)) {
        atomic_store(&limit_armed, 1);
        set_next_mark();
    }
}

static void fill(struct mt_memory_info *s, int may_sample, uint64_t frag_before)
{
    uint64_t t0 = mt_clock_ns(CLOCK_MONOTONIC);
    memset(s, 0, sizeof *s);
    s->time_ns = mt_clock_ns(CLOCK_REALTIME);
    s->run_time_ns = t0 - ns0;
    int n = sum_categories();
    int64_t live = 0;
    for (int i = 0; i < n; i++) {
        s->category_live_bytes[i] = cat_live[i];
        if (mt_cats[i].kind == MT_KIND_MALLOC)
            live += cat_live[i];
    }
    s->category_count = n;
    s->live_after = live > 0 ? (uint64_t)live : 0;
    s->overhead_bytes = cat_live[MT_CAT_OVERHEAD] > 0 ? (uint64_t)cat_live[MT_CAT_OVERHEAD] : 0;
    /* The peak since the last event: the all-time peak if it rose since
     * then, else the highest the flushes saw; never below now. */
    int64_t before = atomic_exchange(&window_peak, (int64_t)s->live_after);
    int64_t alltime = mt_total_peak();
    if (alltime > alltime_seen && alltime > before)
        before = alltime;
    alltime_seen = alltime;
    s->live_before = before > (int64_t)s->live_after ? (uint64_t)before : s->live_after;
    uint64_t frag;
    s->fragmentation_before = frag_before != NO_SAMPLE ? frag_before : frag_last;
    if (may_sample && (may_sample == 2 || sample_due(t0)) && mt_os_free_bytes(&frag) == 0) {
        frag_last = frag;
        sampled(t0);
    }
    s->fragmentation_after = frag_last;
    mt_os_mem m;
    mt_os_mem_read(&m, t0);
    s->rss_bytes = m.rss;
    s->committed_bytes = m.committed;
    s->memory_load_bytes = m.load;
    s->total_available_bytes = m.total;
    s->minor_faults = m.minflt;
    s->major_faults = m.majflt;
    s->alloc_time_ns = mt_ticks_to_ns(atomic_load_explicit(&alloc_ticks, memory_order_relaxed));
    s->map_time_ns = mt_ticks_to_ns(atomic_load_explicit(&map_ticks, memory_order_relaxed));
    if (s->run_time_ns)
        s->memory_time_percent = (double)(s->alloc_time_ns + s->map_time_ns) * 100.0 / (double)s->run_time_ns;
    check_limit(live);
    check_cgroup(&m);
    s->event_ns = mt_clock_ns(CLOCK_MONOTONIC) - t0;
}

/* Publishes every pending event, as long as there are any and this thread
 * may take the flag. frag_before: the caller's sample (malloc_trim), used
 * for the first snapshot this thread fills. */
static int any_pending(void)
{
    int any = 0;
    for (int k = 1; k < MT_EVENT_KINDS; k++)
        any |= atomic_load_explicit(&pending[k], memory_order_relaxed) != 0;
    return any;
}

static void drain(int may_sample, uint64_t frag_before)
{
    for (;;) {
        if (!any_pending())
            return;
        int cancel = mt_cancel_off(); /* fill reads /proc: agent.h */
        if (!take_writer()) {
            mt_cancel_restore(cancel);
            return;
        }
        uint64_t took[MT_EVENT_KINDS] = {0};
        for (int k = 1; k < MT_EVENT_KINDS; k++)
            took[k] = atomic_exchange(&pending[k], 0);
        fill(&scratch, may_sample, frag_before);
        frag_before = NO_SAMPLE;
        int last = 0;
        for (int k = 1; k < MT_EVENT_KINDS; k++) {
            if (!took[k])
                continue;
            published[k] += took[k];
            published[MT_EVENT_ANY] += took[k];
            scratch.kind = k;
            scratch.index = published[k];
            publish(&snaps[k], &scratch);
            last = k;
        }
        if (last) {
            scratch.kind = last;
            scratch.index = published[MT_EVENT_ANY];
            publish(&snaps[MT_EVENT_ANY], &scratch);
        }
        atomic_store(&writer, 0);
        mt_cancel_restore(cancel);
    }
}

/* ---- raising events ------------------------------------------------------ */

static void note(int kind)
{
    if (kind != MT_EVENT_PERIODIC)
        mt_t.events++;
    atomic_fetch_add(&pending[kind], 1);
}

/* glibc's break moved since the last look: GROW or TRIM, unless the event
 * being raised (`kind`) is that move already (the program's brk, a trim). */
static void check_break(int kind)
{
    void *now = __curbrk, *was = atomic_load_explicit(&last_brk, memory_order_relaxed);
    if (now == was || !atomic_compare_exchange_strong(&last_brk, &was, now))
        return;
    int k = (uintptr_t)now > (uintptr_t)was ? MT_EVENT_GROW : MT_EVENT_TRIM;
    if (k != kind)
        note(k);
}

static void raise_event(int kind, int may_sample, uint64_t frag_before)
{
    if (!atomic_load_explicit(&info_ready, memory_order_relaxed))
        return;
    int saved = errno;
    check_break(kind);
    note(kind);
    drain(may_sample, frag_before);
    errno = saved;
}

void mt_info_event(int kind, int may_sample)
{
    raise_event(kind, may_sample, NO_SAMPLE);
}

void mt_info_live_check(int64_t live)
{
    if (!atomic_load_explicit(&info_ready, memory_order_relaxed))
        return;
    int64_t w = atomic_load_explicit(&window_peak, memory_order_relaxed);
    while (live > w && !atomic_compare_exchange_weak(&window_peak, &w, live)) {
    }
    int64_t mark = atomic_load(&peak_mark);
    if (live > mark) {
        uint64_t step =
            mt_info_opt.peak_step > (uint64_t)live / 100 ? mt_info_opt.peak_step : (uint64_t)live / 100;
        if (atomic_compare_exchange_strong(&peak_mark, &mark, live + (int64_t)step)) {
            set_next_mark();
            mt_info_event(MT_EVENT_PEAK, 1);
        }
    }
    check_limit(live);
    check_break(0);
    /* A flush's usual case, checked before drain's frame: nothing pending. */
    if (any_pending()) {
        int saved = errno;
        drain(1, NO_SAMPLE);
        errno = saved;
    }
}

void mt_info_block_mapped(uint64_t size, int grow)
{
    (void)size;
    mt_info_event(grow ? MT_EVENT_GROW : MT_EVENT_TRIM, 1);
}

void mt_info_block_resized(int was_mapped, int is_mapped, uint64_t old, uint64_t size)
{
    if (is_mapped && (!was_mapped || size > old))
        mt_info_event(MT_EVENT_GROW, 1);
    else if (was_mapped && (!is_mapped || size < old))
        mt_info_event(MT_EVENT_TRIM, 1);
}

int mt_info_malloc_trim(int (*real)(size_t), size_t pad)
{
    if (!real)
        return 0;
    uint64_t before = NO_SAMPLE;
    if (mt_t.in_agent || mt_os_free_bytes(&before) != 0)
        before = NO_SAMPLE;
    int rc = real(pad);
    if (rc && !mt_t.in_agent)
        raise_event(MT_EVENT_TRIM, 2, before); /* 2: sample now, whenever the last was */
    return rc;
}

/* ---- the PERIODIC thread ------------------------------------------------- */

static void *periodic(void *unused)
{
    (void)unused;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        long ms = mt_info_opt.interval_ms;
        next.tv_sec += ms / 1000;
        next.tv_nsec += (ms % 1000) * 1000000L;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
        }
        mt_info_event(MT_EVENT_PERIODIC, 1);
    }
    return NULL;
}

/* Through the agent's pthread_create path (in_agent: the thread and what
 * it does are the agent's), with every signal blocked, as control.c's. */
static void start_periodic(void)
{
    if (mt_info_opt.interval_ms <= 0 || !atomic_load(&info_ready))
        return;
    int saved = errno;
    mt_agent_enter();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    static const size_t stacks[] = {64 * 1024, 256 * 1024, 1024 * 1024};
    int rc = EINVAL;
    for (size_t i = 0; i < sizeof stacks / sizeof stacks[0] && rc == EINVAL; i++) {
        pthread_attr_t attr;
        pthread_t t;
        if (pthread_attr_init(&attr) != 0)
            break;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, stacks[i]);
        rc = pthread_create(&t, &attr, periodic, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        mt_say("info_interval: cannot start the thread of PERIODIC events; none will come");
    mt_agent_leave();
    errno = saved;
}

/* ---- life ----------------------------------------------------------------- */

void mt_info_init(void)
{
    ns0 = mt_clock_ns(CLOCK_MONOTONIC);
    tick0 = mt_ticks();
    mt_os_mem_open();
    atomic_store(&last_brk, __curbrk);
    atomic_store(&peak_mark, (int64_t)mt_info_opt.peak_step);
    set_next_mark();
    atomic_store(&info_ready, 1);
}

void mt_info_start(void)
{
    start_periodic();
}

void mt_info_after_fork_child(int start)
{
    /* Only this thread lives on: no writer holds the flag. */
    atomic_store(&writer, 0);
    if (atomic_load(&info_ready))
        mt_os_mem_open();
    if (start)
        start_periodic();
}

/* The ratio (ns per tick, a double's bits) and the tick it was measured
 * at: measured again once 2^24 ticks (a few ms) have passed, so a span's
 * end usually costs no clock read. It is only kept once measured over at
 * least 2^28 ticks (about 0.1 s) since start-up: over a shorter time the
 * clock's own read time would make it off by more than 0.01%. */
static _Atomic uint64_t ratio_bits, ratio_at;
#define RATIO_REFRESH (1ull << 24)
#define RATIO_SETTLED (1ull << 28)

uint64_t mt_ticks_to_ns(uint64_t ticks)
{
    uint64_t now = mt_ticks(), at = atomic_load_explicit(&ratio_at, memory_order_acquire);
    double r;
    if (MT_LIKELY(at != 0 && now - at < RATIO_REFRESH)) {
        uint64_t bits = atomic_load_explicit(&ratio_bits, memory_order_relaxed);
        memcpy(&r, &bits, sizeof r);
    } else {
        uint64_t dt = now - tick0, dn = mt_clock_ns(CLOCK_MONOTONIC) - ns0;
        if (dt == 0 || dn == 0)
            return ticks;
        r = (double)dn / (double)dt;
        uint64_t bits;
        memcpy(&bits, &r, sizeof bits);
        if (dt >= RATIO_SETTLED) {
            atomic_store_explicit(&ratio_bits, bits, memory_order_relaxed);
            atomic_store_explicit(&ratio_at, now, memory_order_release);
        }
    }
    return (uint64_t)((double)ticks * r);
}

void mt_info_add_alloc_ticks(uint64_t ticks)
{
    atomic_fetch_add_explicit(&alloc_ticks, ticks, memory_order_relaxed);
}

void mt_info_add_map_ticks(uint64_t ticks)
{
    atomic_fetch_add_explicit(&map_ticks, ticks, memory_order_relaxed);
}

/* ---- the report's lines -------------------------------------------------- */

static const char *const kind_names[MT_EVENT_KINDS] = {"any", "peak", "grow", "trim", "limit", "periodic"};

static void field(mt_out *o, const char *key, uint64_t v)
{
    mt_out_char(o, ' ');
    mt_out_str(o, key);
    mt_out_char(o, '=');
    mt_out_u64(o, v);
}

static void write_info(mt_out *o, int kind, const struct mt_memory_info *s)
{
    int none = s->index == 0 || s->kind <= 0 || s->kind >= MT_EVENT_KINDS;
    mt_out_str(o, "\ninfo kind=");
    mt_out_str(o, kind_names[kind]);
    /* count: the snapshot's own index, so the line is one moment's */
    field(o, "count", none ? 0 : s->index);
    mt_out_str(o, " event=");
    mt_out_str(o, none ? "none" : kind_names[s->kind]);
    if (none) {
        static const struct mt_memory_info zero;
        s = &zero;
    }
    field(o, "index", s->index);
    field(o, "time_ns", s->time_ns);
    field(o, "run_time_ns", s->run_time_ns);
    field(o, "live_before_bytes", s->live_before);
    field(o, "live_after_bytes", s->live_after);
    field(o, "fragmentation_before_bytes", s->fragmentation_before);
    field(o, "fragmentation_after_bytes", s->fragmentation_after);
    field(o, "rss_bytes", s->rss_bytes);
    field(o, "committed_bytes", s->committed_bytes);
    field(o, "memory_load_bytes", s->memory_load_bytes);
    field(o, "total_available_bytes", s->total_available_bytes);
    field(o, "alloc_time_ns", s->alloc_time_ns);
    field(o, "map_time_ns", s->map_time_ns);
    field(o, "minor_faults", s->minor_faults);
    field(o, "major_faults", s->major_faults);
    field(o, "overhead_bytes", s->overhead_bytes);
    field(o, "event_ns", s->event_ns);
    mt_out_str(o, " categories=");
    int n = s->category_count < MT_INFO_CATEGORIES ? s->category_count : MT_INFO_CATEGORIES;
    for (int i = 0; i < n; i++) {
        if (i)
            mt_out_char(o, ',');
        mt_out_str(o, mt_cats[i].name);
        mt_out_char(o, ':');
        mt_out_i64(o, s->category_live_bytes[i]);
    }
}

void mt_info_write(mt_out *o)
{
    mt_out_str(o, "\nmemory_time");
    field(o, "run_time_ns", ns0 ? mt_clock_ns(CLOCK_MONOTONIC) - ns0 : 0);
    field(o, "alloc_time_ns", mt_ticks_to_ns(atomic_load(&alloc_ticks)));
    field(o, "map_time_ns", mt_ticks_to_ns(atomic_load(&map_ticks)));
    struct mt_memory_info s;
    for (int k = 0; k < MT_EVENT_KINDS; k++) {
        read_latch(&snaps[k], &s, 100); /* a signal handler must not spin for ever */
        write_info(o, k, &s);
    }
}

/* ---- the public API -------------------------------------------------------- */

MT_EXPORT int mt_memory_info(int kind, struct mt_memory_info *out)
{
    if (kind < 0 || kind >= MT_EVENT_KINDS || !out)
        return -EINVAL;
    if (atomic_load(&mt_state) == MT_STATE_READY && !mt_tracking)
        return -ENOSYS;
    read_latch(&snaps[kind], out, -1);
    return 0;
}

MT_EXPORT uint64_t mt_event_count(int kind)
{
    if (kind < 0 || kind >= MT_EVENT_KINDS)
        return 0;
    return latch_index(&snaps[kind]);
}

MT_EXPORT const char *mt_category_name(int id)
{
    if (id < 0 || id >= atomic_load(&mt_ncats))
        return NULL;
    return mt_cats[id].name;
}

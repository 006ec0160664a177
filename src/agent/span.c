/* span.c — request spans: mt_span_begin/mt_span_end and the latency
 * histograms per span name (meminfo.h, docs/info.md), and the per-thread
 * side of the hooks' timing (span.h).
 *
 * A begin pushes a level on the thread's own stack (its start ticks, and
 * the thread's memory ticks, event count and page faults then); the end
 * pops it and adds the differences to one bucket of the name's histogram
 * with relaxed atomic adds: no lock, no system call (but getrusage with
 * span_faults=on). Names are registered once, under a spin lock only the
 * registering threads take; their histograms are the agent's own mappings,
 * made as a name first appears. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>

#include "agent/span.h"

#define SPAN_DEPTH 16
#define SPAN_NAMES 64

/* Buckets (docs/report-format.md): [v, v+1) below 10 ns, then 90 per
 * decade (two significant digits) for 12 decades up to 10^13, then one
 * for everything longer. */
#define SMALL_BUCKETS 10
#define DECADES 12
#define NBUCKETS (SMALL_BUCKETS + DECADES * 90 + 1)
#define OVERFLOW_LO 10000000000000ull
#define OVERFLOW_HI 9223372036854775807ull

typedef struct span_bucket {
    _Atomic uint64_t count, affected, multiple, events, duration_ns, memory_ns, faults;
    _Atomic uint64_t affected_duration_ns, affected_memory_ns; /* the affected spans' own sums */
} span_bucket;

typedef struct span_hist {
    span_bucket by_duration[NBUCKETS];
    _Atomic uint64_t by_memory[NBUCKETS];
} span_hist;

typedef struct span_name {
    const char *key; /* the pointer first registered */
    unsigned len;
    char text[MT_SPAN_NAME_MAX + 1];
    span_hist *hist;
} span_name;

static span_name names[SPAN_NAMES];
static _Atomic int nnames; /* published: entries below are complete */
static atomic_flag names_lock = ATOMIC_FLAG_INIT;
static _Atomic uint64_t unmatched_ends, dropped;

/* One open span. id -1: a begin that was not recorded (too many names, a
 * bad name), popped by its end all the same. */
typedef struct span_level {
    uint64_t t0, mem0, faults0;
    uint32_t ev0;
    int id;
} span_level;

typedef struct span_stack {
    span_level lv[SPAN_DEPTH];
    unsigned depth; /* levels in lv */
    unsigned over;  /* begins past SPAN_DEPTH still open (dropped) */
} span_stack;

static MT_TLS span_stack sp;
MT_TLS uint64_t mt_alloc_pending;

/* ---- timing (span.h) ----------------------------------------------------- */

void mt_alloc_flush(void)
{
    if (mt_alloc_pending) {
        mt_info_add_alloc_ticks(mt_alloc_pending);
        mt_alloc_pending = 0;
    }
}

static int timing_all(void)
{
    return mt_info_opt.alloc_timing == MT_ALLOC_TIMING_ALL;
}

void mt_span_init(void)
{
    mt_span_thread_start();
}

void mt_span_thread_start(void)
{
    if (timing_all() && !mt_t.in_agent)
        mt_t.timed = 1;
}

void mt_span_thread_exit(void)
{
    mt_alloc_flush();
}

/* ---- the names --------------------------------------------------------- */

/* name equals the stored text (a name longer than any stored never does:
 * its byte after the stored length is not the terminator). */
static int same_text(const span_name *n, const char *name)
{
    for (unsigned i = 0; i < n->len; i++)
        if (name[i] != n->text[i])
            return 0;
    return name[n->len] == '\0';
}

static int find_name(const char *name, int count)
{
    for (int i = 0; i < count; i++)
        if (names[i].key == name && same_text(&names[i], name))
            return i;
    for (int i = 0; i < count; i++)
        if (same_text(&names[i], name))
            return i;
    return -1;
}

/* Registers name: its id, or -ENOSPC (no room, or no memory for its
 * histogram). */
static int add_name(const char *name)
{
    while (atomic_flag_test_and_set_explicit(&names_lock, memory_order_acquire)) {
    }
    int count = atomic_load_explicit(&nnames, memory_order_relaxed);
    int id = find_name(name, count); /* another thread may have added it */
    if (id < 0 && count < SPAN_NAMES) {
        mt_agent_enter();
        span_hist *h = mt_os_alloc(sizeof *h);
        mt_agent_leave();
        if (h) {
            span_name *n = &names[count];
            n->key = name;
            n->len = (unsigned)strlen(name); /* at most MT_SPAN_NAME_MAX: name_id checked */
            memcpy(n->text, name, n->len);
            n->text[n->len] = '\0';
            n->hist = h;
            atomic_store_explicit(&nnames, count + 1, memory_order_release);
            id = count;
        }
    }
    atomic_flag_clear_explicit(&names_lock, memory_order_release);
    return id < 0 ? -ENOSPC : id;
}

/* The id of name, or -EINVAL for a name longer than MT_SPAN_NAME_MAX
 * (refused, not cut: two names alike in their first 63 bytes would share
 * one histogram), -ENOSPC. The length is checked only for a name not
 * found: a registered one is short enough. */
static int name_id(const char *name)
{
    int id = find_name(name, atomic_load_explicit(&nnames, memory_order_acquire));
    if (id >= 0)
        return id;
    if (strnlen(name, MT_SPAN_NAME_MAX + 1) > MT_SPAN_NAME_MAX)
        return -EINVAL;
    return add_name(name);
}

/* ---- buckets ----------------------------------------------------------- */

static unsigned bucket_of(uint64_t v)
{
    if (v < SMALL_BUCKETS)
        return (unsigned)v;
    if (v >= OVERFLOW_LO)
        return NBUCKETS - 1;
    unsigned e = 0;
    while (v >= 100) {
        v /= 10;
        e++;
    }
    return SMALL_BUCKETS + e * 90 + (unsigned)(v - 10);
}

static void bucket_bounds(unsigned b, uint64_t *lo, uint64_t *hi)
{
    if (b < SMALL_BUCKETS) {
        *lo = b;
        *hi = b + 1;
        return;
    }
    if (b == NBUCKETS - 1) {
        *lo = OVERFLOW_LO;
        *hi = OVERFLOW_HI;
        return;
    }
    unsigned e = (b - SMALL_BUCKETS) / 90, m = (b - SMALL_BUCKETS) % 90 + 10;
    uint64_t p = 1;
    while (e--)
        p *= 10;
    *lo = m * p;
    *hi = (m + 1) * p;
}

/* ---- begin and end ----------------------------------------------------- */

static uint64_t thread_faults(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

static void set_depth(unsigned depth)
{
    sp.depth = depth;
    mt_t.span_depth = (unsigned char)depth;
    mt_t.timed = depth > 0 || timing_all();
}

MT_EXPORT int mt_span_begin(const char *name)
{
    if (!mt_api_ready())
        return -ENOSYS;
    if (sp.depth == SPAN_DEPTH) {
        /* Not pushed, but its end must not pop an open level. */
        sp.over++;
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return -EOVERFLOW;
    }
    int rc = 0, id;
    if (!name || !name[0]) {
        id = rc = -EINVAL;
    } else if ((id = name_id(name)) < 0) {
        rc = id;
        if (rc == -ENOSPC) /* a bad name (-EINVAL) is the program's error, as NULL is */
            atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
    }
    span_level *l = &sp.lv[sp.depth];
    l->id = id;
    l->mem0 = mt_t.mem_ticks;
    l->ev0 = mt_t.events;
    l->faults0 = mt_info_opt.span_faults ? thread_faults() : 0;
    set_depth(sp.depth + 1);
    l->t0 = mt_ticks(); /* last: the span's own work is not in its duration */
    return rc;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void record(const span_level *l, uint64_t t1)
{
    uint64_t ticks = t1 - l->t0, mem_ticks = mt_t.mem_ticks - l->mem0;
    uint64_t dur = mt_ticks_to_ns(ticks);
    /* Memory time at the same ratio: one clock reading for both. */
    uint64_t mem = ticks ? (uint64_t)((unsigned __int128)mem_ticks * dur / ticks) : 0;
    if (mem > dur)
        mem = dur;
    uint32_t ev = mt_t.events - l->ev0;
    uint64_t faults = mt_info_opt.span_faults ? thread_faults() - l->faults0 : 0;
    span_hist *h = names[l->id].hist;
    span_bucket *b = &h->by_duration[bucket_of(dur)];
    atomic_fetch_add_explicit(&b->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->duration_ns, dur, memory_order_relaxed);
    if (mem)
        atomic_fetch_add_explicit(&b->memory_ns, mem, memory_order_relaxed);
    if (ev) {
        atomic_fetch_add_explicit(&b->affected, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->events, ev, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->affected_duration_ns, dur, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->affected_memory_ns, mem, memory_order_relaxed);
        if (ev > 1)
            atomic_fetch_add_explicit(&b->multiple, 1, memory_order_relaxed);
    }
    if (faults)
        atomic_fetch_add_explicit(&b->faults, faults, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->by_memory[bucket_of(mem)], 1, memory_order_relaxed);
}

MT_EXPORT int mt_span_end(void)
{
    uint64_t t1 = mt_ticks();
    if (!mt_api_ready())
        return -ENOSYS;
    if (sp.over) {
        sp.over--;
        return 0;
    }
    if (sp.depth == 0) {
        atomic_fetch_add_explicit(&unmatched_ends, 1, memory_order_relaxed);
        return -ENOENT;
    }
    const span_level *l = &sp.lv[sp.depth - 1];
    if (l->id >= 0)
        record(l, t1);
    set_depth(sp.depth - 1);
    /* The span's allocator time, into the process's total now. */
    mt_alloc_flush();
    return 0;
}

/* ---- the report -------------------------------------------------------- */

static void write_name(mt_out *o, const span_name *n)
{
    for (unsigned i = 0; i < n->len; i++)
        mt_out_word_char(o, n->text[i]);
}

static void write_bounds(mt_out *o, const char *line, int id, unsigned b)
{
    uint64_t lo, hi;
    bucket_bounds(b, &lo, &hi);
    mt_out_str(o, line);
    mt_out_field(o, "id", id);
    mt_out_str(o, " lo_ns=");
    mt_out_u64(o, lo);
    mt_out_str(o, " hi_ns=");
    mt_out_u64(o, hi);
}

static uint64_t ld(_Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static void write_hist(mt_out *o, int id, span_hist *h)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < NBUCKETS; b++)
        total += ld(&h->by_duration[b].count);
    mt_out_str(o, "\nspan_name");
    mt_out_field(o, "id", id);
    mt_out_str(o, " count=");
    mt_out_u64(o, total);
    mt_out_str(o, " name=");
    write_name(o, &names[id - 1]);
    for (unsigned b = 0; b < NBUCKETS; b++) {
        span_bucket *k = &h->by_duration[b];
        uint64_t count = ld(&k->count);
        if (!count)
            continue;
        /* Spans end while this reads (relaxed adds, field by field): the
         * figures are made to hang together as the reader demands. */
        uint64_t aff = min_u64(ld(&k->affected), count), mult = min_u64(ld(&k->multiple), aff);
        uint64_t events = ld(&k->events), dur = ld(&k->duration_ns), mem = min_u64(ld(&k->memory_ns), dur);
        uint64_t adur = min_u64(ld(&k->affected_duration_ns), dur);
        uint64_t amem = min_u64(min_u64(ld(&k->affected_memory_ns), mem), adur);
        if (events < aff + mult)
            events = aff + mult;
        if (!aff)
            adur = amem = 0;
        write_bounds(o, "\nspan", id, b);
        mt_out_str(o, " count=");
        mt_out_u64(o, count);
        mt_out_str(o, " affected=");
        mt_out_u64(o, aff);
        mt_out_str(o, " multiple=");
        mt_out_u64(o, mult);
        mt_out_str(o, " events=");
        mt_out_u64(o, events);
        mt_out_str(o, " duration_ns=");
        mt_out_u64(o, dur);
        mt_out_str(o, " memory_ns=");
        mt_out_u64(o, mem);
        mt_out_str(o, " faults=");
        mt_out_u64(o, ld(&k->faults));
        mt_out_str(o, " affected_duration_ns=");
        mt_out_u64(o, adur);
        mt_out_str(o, " affected_memory_ns=");
        mt_out_u64(o, amem);
    }
    for (unsigned b = 0; b < NBUCKETS; b++) {
        uint64_t count = ld(&h->by_memory[b]);
        if (!count)
            continue;
        write_bounds(o, "\nspan_memory", id, b);
        mt_out_str(o, " count=");
        mt_out_u64(o, count);
    }
}

void mt_span_write(mt_out *o)
{
    int count = atomic_load_explicit(&nnames, memory_order_acquire);
    for (int i = 0; i < count; i++)
        write_hist(o, i + 1, names[i].hist);
    mt_out_str(o, "\nspans names=");
    mt_out_i64(o, count);
    mt_out_str(o, " unmatched_ends=");
    mt_out_u64(o, ld(&unmatched_ends));
    mt_out_str(o, " dropped=");
    mt_out_u64(o, ld(&dropped));
    mt_out_str(o, " faults_counted=");
    mt_out_i64(o, mt_info_opt.span_faults ? 1 : 0);
}

void mt_span_after_fork_child(void)
{
    /* A thread that was registering a name is gone: its lock with it. The
     * forking thread's open spans go on in the child (sp is its copy). */
    atomic_flag_clear(&names_lock);
}

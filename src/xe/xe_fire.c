/* xe_fire.c — producers: firing an event into a session's buffers (the
 * lock-free fast path: one fetch_add, the record, one release store), the
 * slow path when a buffer fills (sealing, replacing, the retention modes),
 * large events, and the buffer stacks the pools and the dispatch queue are
 * made of. The protocol is described in xe_internal.h. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "xe/xe_internal.h"
#include "xe/xe_thread.h"

static __thread uint32_t tls_tid;
static __thread int tls_depth; /* fires in progress on this thread (signal handlers nest) */

/* Which sessions this thread is in the slow path of (and how deep: signal
 * handlers nest). A stop run by a handler must not wait for the fire it
 * interrupted. */
#define INFLIGHT_SLOTS 4
static __thread struct {
    const xe_session *s;
    uint32_t n;
} tls_inflight[INFLIGHT_SLOTS];

static void inflight_enter(xe_session *s)
{
    atomic_fetch_add(&s->inflight, 1); /* seq_cst: pairs with stop's state store */
    int slot = -1;
    for (int i = 0; i < INFLIGHT_SLOTS; i++) {
        if (tls_inflight[i].s == s && tls_inflight[i].n) {
            slot = i;
            break;
        }
        if (slot < 0 && tls_inflight[i].n == 0)
            slot = i;
    }
    if (slot >= 0) {
        tls_inflight[slot].s = s;
        tls_inflight[slot].n++;
    }
}

static void inflight_leave(xe_session *s)
{
    for (int i = 0; i < INFLIGHT_SLOTS; i++)
        if (tls_inflight[i].s == s && tls_inflight[i].n) {
            tls_inflight[i].n--;
            break;
        }
    atomic_fetch_sub(&s->inflight, 1);
}

int xe_fire_depth_here(void)
{
    return tls_depth;
}

void xe_fire_depth_add(int d)
{
    tls_depth += d;
}

uint32_t xe_fire_inflight_here(const xe_session *s)
{
    for (int i = 0; i < INFLIGHT_SLOTS; i++)
        if (tls_inflight[i].s == s && tls_inflight[i].n)
            return tls_inflight[i].n;
    return 0;
}

void xe_fire_forget_tid(void)
{
    tls_tid = 0;
    for (int i = 0; i < INFLIGHT_SLOTS; i++)
        tls_inflight[i].n = 0;
}

static inline uint32_t my_tid(void)
{
    if (__builtin_expect(tls_tid == 0, 0))
        tls_tid = (uint32_t)syscall(SYS_gettid);
    return tls_tid;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

/* The n-th wait (from 0) for another thread to finish a step: yield for
 * the first few, then sleep 50 us each, so that the thread waited for
 * gets a CPU when every CPU is taken. */
#define XE_BACKOFF_YIELDS 16u
void xe_backoff(unsigned n)
{
    if (n < XE_BACKOFF_YIELDS) {
        sched_yield();
        return;
    }
    /* The raw system call: nanosleep is a cancellation point, and a
     * program thread cancelled here would leave its fire in flight (a
     * stop then waits for it for ever). */
    struct timespec ts = {0, 50000};
    syscall(SYS_nanosleep, &ts, NULL);
}

/* ---- stacks ---------------------------------------------------------------- */

void xe_stack_push(xe_session *s, xe_stack *st, uint32_t idx)
{
    xe_bufhdr *b = xe_buf(s, idx);
    uint64_t h = atomic_load_explicit(&st->head, memory_order_relaxed);
    for (;;) {
        atomic_store_explicit(&b->next, (uint32_t)h, memory_order_relaxed);
        uint64_t nh = ((h >> 32) + 1) << 32 | (uint64_t)(idx + 1);
        if (atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

int32_t xe_stack_pop(xe_session *s, xe_stack *st)
{
    uint64_t h = atomic_load_explicit(&st->head, memory_order_acquire);
    for (;;) {
        uint32_t top = (uint32_t)h;
        if (top == 0)
            return -1;
        uint32_t next = atomic_load_explicit(&xe_buf(s, top - 1)->next, memory_order_relaxed);
        uint64_t nh = ((h >> 32) + 1) << 32 | next;
        if (atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_acquire,
                                                  memory_order_acquire))
            return (int32_t)(top - 1);
    }
}

int xe_stack_has(xe_session *s, xe_stack *st, uint32_t idx)
{
    uint32_t guard = s->nbuf + s->nlarge + 1;
    for (uint32_t at = (uint32_t)atomic_load(&st->head); at && guard--;
         at = atomic_load_explicit(&xe_buf(s, at - 1)->next, memory_order_relaxed))
        if (at - 1 == idx)
            return 1;
    return 0;
}

uint32_t xe_stack_take_all(xe_session *s, xe_stack *st)
{
    uint64_t h = atomic_load_explicit(&st->head, memory_order_acquire);
    while (!atomic_compare_exchange_weak_explicit(&st->head, &h, ((h >> 32) + 1) << 32, memory_order_acquire,
                                                  memory_order_acquire))
        ;
    /* Pushed newest first: reverse the chain (it is ours now). */
    uint32_t prev = 0;
    for (uint32_t at = (uint32_t)h; at != 0;) {
        _Atomic uint32_t *link = &xe_buf(s, at - 1)->next;
        uint32_t next = atomic_load_explicit(link, memory_order_relaxed);
        atomic_store_explicit(link, prev, memory_order_relaxed);
        prev = at;
        at = next;
    }
    return prev;
}

/* ---- buffers ---------------------------------------------------------------- */

/* Buffers came back to a pool: producers waiting for one are told. One
 * buffer wakes one waiter, not all of them to find it taken and sleep
 * again (each a context switch on the CPUs the dispatcher needs); `all`
 * (several buffers, or a large one), or a waiter for a large buffer,
 * wakes them all. */
void xe_tell_waiters(xe_session *s, int all)
{
    atomic_fetch_add(&s->free_seq, 1);
    if (atomic_load(&s->free_waiters)) {
        if (all || atomic_load(&s->large_waiters))
            xe_futex_wake(&s->free_seq);
        else
            xe_futex_wake_one(&s->free_seq);
    }
}

/* A buffer back in the free pool, told: every single push, so a waiter
 * woken for a buffer that another took meanwhile is not left asleep
 * while one sits in the pool. */
static void free_push(xe_session *s, uint32_t idx)
{
    xe_stack_push(s, &s->free_pool, idx);
    xe_tell_waiters(s, 0);
}

void xe_enqueue(xe_session *s, uint32_t idx)
{
    atomic_fetch_add(&s->pending, 1);
    xe_stack_push(s, &s->queue, idx);
    xe_wake_dispatcher(s);
}

int xe_seal(xe_session *s, uint32_t idx)
{
    xe_bufhdr *b = xe_buf(s, idx);
    /* Time-ordered: a sweep waits for seals begun before it to be numbered
     * (their buffers may hold events older than its watermark). */
    if (s->time_order)
        atomic_fetch_add(&s->sealing, 1);
    uint64_t r = atomic_fetch_or_explicit(&b->reserved, XE_SEALED, memory_order_seq_cst);
    if (r & XE_SEAL_MASK) {
        if (s->time_order)
            atomic_fetch_sub(&s->sealing, 1);
        return 0;
    }
    uint64_t off = r & XE_OFF_MASK, cap = xe_buf_cap(s, b);
    b->end = off < cap ? off : cap;
    if (s->time_order) {
        atomic_store_explicit(&b->sealseq, atomic_fetch_add(&s->seal_seq, 1) + 1, memory_order_release);
        atomic_fetch_sub(&s->sealing, 1);
    }
    return 1;
}

/* Make a buffer the installer holds (sealed) ready to be current: claims
 * still fail, and producers waiting on it do not detach it. */
static void prepare_buffer(xe_session *s, xe_bufhdr *b, uint32_t part)
{
    b->part = part;
    b->fork_gen = atomic_load_explicit(&s->fork_gen, memory_order_relaxed);
    b->end = 0;
    b->seq = 0;
    atomic_store_explicit(&b->sealseq, 0, memory_order_relaxed);
    atomic_store_explicit(&b->first_tsc, 0, memory_order_relaxed);
    atomic_store_explicit(&b->reserved, XE_SEALED | XE_OPENING, memory_order_release);
}

/* Open the current buffer for claims. */
static void open_buffer(xe_bufhdr *b)
{
    atomic_store_explicit(&b->reserved, 0, memory_order_release);
}

/* A buffer taken off its partition while open: seal it; if claims got in
 * it goes to the dispatcher, else back to the pool. */
static void unopen_buffer(xe_session *s, uint32_t idx)
{
    xe_bufhdr *b = xe_buf(s, idx);
    if (!xe_seal(s, idx))
        return; /* a claim filled and sealed it: its sealer hands it on */
    if (b->end == 0 && !s->ordered && !s->time_order) /* (time) ordered: its seq must reach the dispatcher */
        free_push(s, idx);
    else
        xe_enqueue(s, idx);
}

/* `installed` (the tagged value) just became the partition's current
 * buffer and was opened. If the session is stopping, stop's sweep may have
 * passed this partition already: take it back (the stop waits for this
 * producer before its last drain). */
static void check_installed(xe_session *s, xe_part *p, uint64_t installed)
{
    if (atomic_load(&s->state) == XE_STARTED)
        return;
    if (xe_cur_cas(p, installed, -1))
        unopen_buffer(s, (uint32_t)xe_cur_idx(installed));
}

/* Make held buffer idx current if cur still is `seen`, then open it. On
 * failure it goes back to the pool, never having taken a claim. */
int xe_install(xe_session *s, xe_part *p, uint64_t seen, int32_t idx)
{
    xe_bufhdr *b = xe_buf(s, (uint32_t)idx);
    prepare_buffer(s, b, (uint32_t)(p - s->parts));
    if (!xe_cur_cas(p, seen, idx)) {
        atomic_store_explicit(&b->reserved, XE_SEALED, memory_order_release);
        free_push(s, (uint32_t)idx);
        return 0;
    }
    /* Claims land only once it is open, and the next buffer opens only
     * after this one is sealed: seqs follow the order of the claims. */
    b->seq = s->ordered && !b->large ? atomic_fetch_add(&s->open_seq, 1) + 1 : 0;
    open_buffer(b);
    check_installed(s, p, xe_cur_next(seen, idx));
    return 1;
}

static void count_drop(xe_session *s, uint64_t events)
{
    atomic_fetch_add_explicit(&s->dropped_events, events, memory_order_relaxed);
}

void (*xe_test_before_enqueue)(void);

void xe_replace(xe_session *s, xe_part *p, uint32_t idx, int allow_reuse)
{
    if (__builtin_expect(xe_test_before_enqueue != NULL, 0))
        xe_test_before_enqueue();
    uint64_t seen = atomic_load(&p->cur);
    if (xe_cur_idx(seen) != (int32_t)idx) {
        xe_enqueue(s, idx); /* already detached (a producer did, or stop) */
        return;
    }
    int32_t next = atomic_load(&s->state) == XE_STARTED ? xe_stack_pop(s, &s->free_pool) : -1;
    if (next < 0 && allow_reuse) {
        /* ALLOW_MULTIPLE_EVENT_LOSS: the full buffer is what gets lost. */
        xe_bufhdr *b = xe_buf(s, idx);
        int abandoned = 0;
        uint64_t n = xe_walk(s, b, NULL, &abandoned);
        count_drop(s, n);
        atomic_fetch_add_explicit(&s->dropped_buffers, 1, memory_order_relaxed);
        if (abandoned)
            goto none; /* a writer never finished: keep it out of circulation */
        memset(xe_buf_data(b), 0, b->end + sizeof(uint64_t));
        /* Current again (a new tag), unless detached meanwhile by a
         * producer tired of waiting, or by stop: then it is just free. */
        prepare_buffer(s, b, (uint32_t)(p - s->parts));
        if (xe_cur_cas(p, seen, (int32_t)idx)) {
            open_buffer(b);
            check_installed(s, p, xe_cur_next(seen, (int32_t)idx));
        } else {
            atomic_store_explicit(&b->reserved, XE_SEALED, memory_order_release);
            free_push(s, idx);
        }
        return;
    }
    xe_enqueue(s, idx);
    if (next >= 0) {
        xe_install(s, p, seen, next); /* or back to the pool: detached meanwhile */
        return;
    }
none:
    xe_cur_cas(p, seen, -1);
}

/* ---- records ------------------------------------------------------------- */

static inline void write_record(char *at, uint64_t len, const xe_event *ev, uint64_t tsc, uint32_t cpu)
{
    xe_rec *r = (xe_rec *)at;
    xe_rec_fill(r, ev, my_tid(), cpu, tsc);
    if (ev->data_len)
        memcpy(at + XE_RECORD_FIXED, ev->data, ev->data_len);
    atomic_store_explicit(&r->len, (uint32_t)len, memory_order_release);
}

static __attribute__((noinline)) void note_first(xe_session *s, xe_bufhdr *b, uint64_t tsc)
{
    int saved_errno = errno; /* a wake is a system call: the producer's errno is its own */
    /* Only into an empty slot: a producer preempted here may find the
     * buffer recycled, and must not make its next life look old. */
    uint64_t zero = 0;
    atomic_compare_exchange_strong_explicit(&b->first_tsc, &zero, tsc ? tsc : 1, memory_order_release,
                                            memory_order_relaxed);
    if (s->latency_tsc)
        xe_wake_dispatcher(s); /* it may be sleeping with no deadline */
    errno = saved_errno;
}

static void raise_largest(xe_session *s, uint64_t len)
{
    uint64_t cur = atomic_load_explicit(&s->largest_dropped, memory_order_relaxed);
    while (cur < len && !atomic_compare_exchange_weak(&s->largest_dropped, &cur, len))
        ;
}

/* NO_EVENT_LOSS: wait for the dispatcher to free a buffer of `pool`. */
static int32_t wait_free(xe_session *s, xe_stack *pool)
{
    uint64_t t0 = xe_ticks();
    int32_t idx;
    for (;;) {
        uint32_t seq = atomic_load(&s->free_seq);
        if (atomic_load(&s->state) != XE_STARTED) {
            idx = -1;
            break;
        }
        idx = xe_stack_pop(s, pool);
        if (idx >= 0)
            break;
        /* Holding no buffer while asleep: not in flight, so a flush or a
         * stop does not wait for this producer while it waits for them. */
        int large = pool == &s->large_pool;
        atomic_fetch_add(&s->free_waiters, 1);
        if (large)
            atomic_fetch_add(&s->large_waiters, 1);
        inflight_leave(s);
        xe_futex_wait(&s->free_seq, seq, 10 * 1000 * 1000);
        inflight_enter(s);
        if (large)
            atomic_fetch_sub(&s->large_waiters, 1);
        atomic_fetch_sub(&s->free_waiters, 1);
    }
    uint64_t t1 = xe_ticks();
    atomic_fetch_add_explicit(&s->blocked_ns, xe_ticks_delta_ns(t0, t1), memory_order_relaxed);
    return idx;
}

/* An event bigger than a regular buffer: one large buffer for it alone. */
static int fire_large(xe_session *s, const xe_event *ev, uint64_t len, uint64_t tsc, uint32_t cpu)
{
    if (s->nlarge == 0 || len > s->large_cap) {
        count_drop(s, 1);
        raise_largest(s, len);
        return -EMSGSIZE;
    }
    inflight_enter(s);
    int rc = 0;
    if (atomic_load(&s->state) == XE_STARTED) {
        int32_t idx = xe_stack_pop(s, &s->large_pool);
        if (idx < 0 && s->cfg.retention == XE_NO_EVENT_LOSS && tls_depth == 1)
            idx = wait_free(s, &s->large_pool);
        if (idx >= 0) {
            xe_bufhdr *b = xe_buf(s, (uint32_t)idx);
            prepare_buffer(s, b, 0);
            open_buffer(b);
            atomic_store_explicit(&b->reserved, len, memory_order_relaxed);
            atomic_store_explicit(&b->first_tsc, tsc ? tsc : 1, memory_order_relaxed);
            write_record(xe_buf_data(b), len, ev, tsc, cpu);
            xe_seal(s, (uint32_t)idx);
            xe_enqueue(s, (uint32_t)idx);
            rc = 1;
        } else if (atomic_load(&s->state) == XE_STARTED) {
            count_drop(s, 1);
            rc = -ENOBUFS;
        }
    }
    inflight_leave(s);
    return rc;
}

/* How long producers wait for the sealer of the current buffer before
 * detaching it themselves (it may be gone: a forked child has only the
 * forking thread). */
#define XE_SEALER_PATIENCE_NS (50 * 1000 * 1000)

/* Off the fast path: buffer `idx` (or none, -1) could not take the event.
 * `straddle_off` >= 0 when this producer's claim crossed the buffer's end.
 * Returns 1 to try again, 0 when the session stopped, or -ENOBUFS. */
static __attribute__((noinline)) int slow_path(xe_session *s, xe_part *p, int32_t idx, int64_t straddle_off)
{
    int saved_errno = errno; /* waits and wakes are system calls: the producer's errno is its own */
    inflight_enter(s);
    int started = atomic_load(&s->state) == XE_STARTED;
    int rc = 1;
    if (straddle_off >= 0) {
        xe_rec *end = (xe_rec *)(xe_buf_data(xe_buf(s, (uint32_t)idx)) + straddle_off);
        atomic_store_explicit(&end->len, XE_END_MARK, memory_order_release);
        if (xe_seal(s, (uint32_t)idx))
            xe_replace(s, p, (uint32_t)idx,
                       started && s->cfg.retention == XE_ALLOW_MULTIPLE_EVENT_LOSS && tls_depth == 1);
    }
    if (!started) {
        rc = 0;
        goto out;
    }
    uint64_t waited_from = 0; /* ticks when yielding began */
    for (unsigned spins = 0;; spins++) {
        uint64_t seen = atomic_load_explicit(&p->cur, memory_order_acquire);
        int32_t cur = xe_cur_idx(seen);
        if (cur != idx || atomic_load(&s->state) != XE_STARTED)
            break; /* another buffer is current (or stop): try again */
        if (cur >= 0) {
            /* Sealed or overflowing: its sealer is replacing it (or, losing
             * a full buffer, opening it again). The sealer may be the
             * context this signal handler interrupted. */
            uint64_t r = atomic_load_explicit(&xe_buf(s, (uint32_t)cur)->reserved, memory_order_acquire);
            if (!(r & XE_SEAL_MASK) && (r & XE_OFF_MASK) < s->cap)
                break;
            if (tls_depth > 1) {
                count_drop(s, 1);
                rc = -ENOBUFS;
                break;
            }
            if (spins == 64)
                waited_from = xe_ticks();
            if (spins < 64) {
                cpu_relax();
            } else if (!(r & XE_SEALED) || (r & XE_OPENING) ||
                       xe_ticks_delta_ns(waited_from, xe_ticks()) < XE_SEALER_PATIENCE_NS) {
                /* A sealer descheduled on a busy machine comes back within
                 * a few time slices: detaching its buffer would make every
                 * producer drop events one by one until it does. Yielding
                 * at first, then off the CPU: with more producers than
                 * CPUs, producers yielding to each other kept the sealer
                 * waiting for a CPU (287,000 yields in a 1 s run). */
                xe_backoff(spins - 64);
            } else {
                /* Its sealer is slow, or gone (a forked child has only the
                 * forking thread): detach the sealed buffer ourselves. The
                 * sealer has queued it or will; its own replacing CAS then
                 * fails and it puts its fresh buffer back. */
                xe_cur_cas(p, seen, -1);
            }
            continue;
        }
        int32_t fresh = xe_stack_pop(s, &s->free_pool);
        if (fresh < 0 && s->cfg.retention == XE_NO_EVENT_LOSS && tls_depth == 1)
            fresh = wait_free(s, &s->free_pool);
        if (fresh >= 0) {
            xe_install(s, p, seen, fresh);
            break;
        }
        if (atomic_load(&s->state) != XE_STARTED)
            break;
        count_drop(s, 1);
        rc = -ENOBUFS;
        break;
    }
    if (rc == 1 && atomic_load(&s->state) != XE_STARTED)
        rc = 0;
out:
    inflight_leave(s);
    errno = saved_errno;
    return rc;
}

static void fire_sync(xe_session *s, const xe_event *ev, uint64_t tsc, uint32_t cpu)
{
    xe_event e = *ev;
    e.tid = my_tid();
    e.cpu = cpu;
    e.time_ns = xe_ticks_to_ns(tsc);
    for (int i = 0; i < s->nsync; i++)
        s->sync[i]->ops->deliver(s->sync[i], &e);
}

/* The fast path's claim of `len` bytes (at most a regular buffer's) in
 * the current buffer of this CPU's partition, stamped: the record to
 * write, with *first the buffer when this is its first record (else
 * NULL); or NULL with *rc, slow_path's answer but 1 (0 when the session
 * stopped, or -ENOBUFS). *tsc and *cpu are set either way. `after_load`:
 * a free or a realloc (xe_fence below). */
static __attribute__((always_inline)) inline xe_rec *
claim(xe_session *s, uint64_t len, int after_load, uint64_t *tsc, uint32_t *cpu, xe_bufhdr **first, int *rc)
{
    *cpu = xe_this_cpu();
    *tsc = s->time_order ? 0 : xe_ticks(); /* time-ordered: read after the claim */
    xe_part *p = &s->parts[s->nparts == 1 ? 0 : s->cpu_part[*cpu < s->ncpu_map ? *cpu : *cpu % s->ncpu_map]];
    for (;;) {
        int32_t idx = xe_cur_idx(atomic_load_explicit(&p->cur, memory_order_acquire));
        int64_t straddle = -1;
        if (__builtin_expect(idx >= 0, 1)) {
            xe_bufhdr *b = xe_buf(s, (uint32_t)idx);
            uint64_t r = atomic_fetch_add_explicit(&b->reserved, len, memory_order_acquire);
            if (__builtin_expect(!(r & XE_SEAL_MASK), 1)) {
                uint64_t off = r & XE_OFF_MASK;
                if (__builtin_expect(off + len <= s->cap, 1)) {
                    if (s->time_order) {
                        /* After the claim: later than a seal before it
                         * (xe_dispatch.c's margin covers a read run ahead).
                         * A free or realloc is stamped after everything
                         * before it is done, the load of the block it got
                         * from another thread included: later than that
                         * block's allocation. */
                        if (after_load)
                            xe_fence();
                        *tsc = xe_ticks();
                    }
                    *first = off == 0 ? b : NULL;
                    return (xe_rec *)(xe_buf_data(b) + off);
                }
                if (off <= s->cap)
                    straddle = (int64_t)off;
            }
        }
        *rc = slow_path(s, p, idx, straddle);
        if (*rc != 1)
            return NULL;
    }
}

static int fire(xe_session *s, const xe_event *ev)
{
    uint64_t len = xe_event_bytes(ev->data_len);
    if (__builtin_expect(len > s->cap, 0))
        return fire_large(s, ev, len, xe_ticks(), xe_this_cpu());
    uint64_t tsc;
    uint32_t cpu;
    xe_bufhdr *first;
    int rc = 1;
    xe_rec *r = claim(s, len, ev->type == XE_EV_FREE || ev->type == XE_EV_REALLOC, &tsc, &cpu, &first, &rc);
    if (!r)
        return rc;
    write_record((char *)r, len, ev, tsc, cpu);
    if (__builtin_expect(first != NULL, 0))
        note_first(s, first, tsc);
    return 1;
}

/* Whether a started session takes events of this type (event_mask). */
static inline int takes(const xe_session *s, unsigned type)
{
    if (__builtin_expect(atomic_load_explicit(&s->state, memory_order_relaxed) != XE_STARTED, 0))
        return 0;
    return !s->cfg.event_mask || (type < 32 && (s->cfg.event_mask >> type & 1));
}

/* xe_fire past `takes`: the predicate, the buffers, the synchronous
 * targets. */
static int fire_event(xe_session *s, const xe_event *ev)
{
    if (s->cfg.pred.n) {
        xe_event e = *ev; /* predicates may test the thread and the CPU */
        e.tid = my_tid();
        e.cpu = xe_this_cpu();
        if (!xe_pred_eval(&s->cfg.pred, &e))
            return 0;
    }
    tls_depth++;
    int rc = fire(s, ev);
    tls_depth--;
    if (s->nsync && rc != 0)
        fire_sync(s, ev, xe_ticks(), xe_this_cpu());
    return rc;
}

int xe_fire(xe_session *s, const xe_event *ev)
{
    return takes(s, ev->type) ? fire_event(s, ev) : 0;
}

/* Whether s writes an event of this type without its addresses. */
static inline int short_alloc(const xe_session *s, unsigned type)
{
    return s->cfg.short_allocs && type >= XE_EV_ALLOC && type <= XE_EV_REALLOC;
}

/* What the record alone cannot do (a predicate, a synchronous target, a
 * buffer smaller than a record): as an event. Out of line, so that the
 * fast path below keeps a small frame. */
static __attribute__((noinline)) int fields_as_event(xe_session *s, unsigned type, unsigned category,
                                                     uint64_t size, uint64_t address, uint64_t old_address,
                                                     uint64_t site, uint64_t key, uint64_t value)
{
    int saved_errno = errno;
    if (short_alloc(s, type))
        address = old_address = 0; /* as its short records have them */
    xe_event ev = {.type = (uint16_t)type,
                   .category = (uint16_t)category,
                   .size = size,
                   .address = address,
                   .old_address = old_address,
                   .site = site,
                   .key = key,
                   .value = value};
    int rc = fire_event(s, &ev);
    errno = saved_errno;
    return rc;
}

/* xe_fire_fields and xe_fire_alloc: `shorter` is short_alloc(s, type). */
static __attribute__((always_inline)) inline int fire_fields(xe_session *s, unsigned type, unsigned category,
                                                             uint64_t size, uint64_t address,
                                                             uint64_t old_address, uint64_t site,
                                                             uint64_t key, uint64_t value, int shorter)
{
    if (!takes(s, type))
        return 0;
    if (__builtin_expect(s->cfg.pred.n || s->nsync || s->cap < XE_RECORD_FIXED, 0))
        return fields_as_event(s, type, category, size, address, old_address, site, key, value);
    tls_depth++;
    uint64_t tsc;
    uint32_t cpu;
    xe_bufhdr *first;
    int rc = 1;
    uint32_t len = shorter ? XE_RECORD_SHORT : XE_RECORD_FIXED;
    xe_rec *r = claim(s, len, type == XE_EV_FREE || type == XE_EV_REALLOC, &tsc, &cpu, &first, &rc);
    if (r) {
        xe_rec_set_short(r, type, category, my_tid(), cpu, tsc, size, site, key, value);
        if (!shorter)
            xe_rec_set_rest(r, address, old_address, 0);
        atomic_store_explicit(&r->len, len, memory_order_release);
        if (__builtin_expect(first != NULL, 0))
            note_first(s, first, tsc);
    }
    tls_depth--;
    return r ? 1 : rc;
}

int xe_fire_fields(xe_session *s, unsigned type, unsigned category, uint64_t size, uint64_t address,
                   uint64_t old_address, uint64_t site, uint64_t key, uint64_t value)
{
    return fire_fields(s, type, category, size, address, old_address, site, key, value, short_alloc(s, type));
}

int xe_fire_alloc(xe_session *s, unsigned type_cat, uint64_t size, uint64_t site, uint64_t key,
                  uint64_t value)
{
    unsigned type = type_cat & 0xffff, category = type_cat >> 16;
    if (__builtin_expect(!short_alloc(s, type), 0))
        return xe_fire_fields(s, type, category, size, 0, 0, site, key, value);
    return fire_fields(s, type, category, size, 0, 0, site, key, value, 1);
}

/* ---- reading a sealed buffer ----------------------------------------------- */

#define XE_WALK_PREFETCH 512 /* bytes ahead of the record being read */
#define XE_WALK_RUN 8192     /* bytes handed on at a time: still in L1 when read again */

/* A claim at r being written: waits for it, however long its writer is
 * preempted. Two writers may never come back: a thread that was not
 * forked with the process (buffer opened before the fork), and the fire a
 * signal handler interrupted to stop the session. Only then, after a
 * second, is the rest abandoned (returns 0); the caller keeps the buffer
 * out of use in case the writer does return (the handler's), or, in a
 * fork child, uses it again (the thread is gone: process() in
 * xe_dispatch.c). Else returns the record's length. */
static uint32_t wait_claim(xe_session *s, xe_bufhdr *b, xe_rec *r)
{
    uint64_t t0 = 0;
    uint32_t len;
    for (unsigned spins = 0; (len = atomic_load_explicit(&r->len, memory_order_acquire)) == 0; spins++) {
        if (spins < 128) {
            cpu_relax();
            continue;
        }
        int may_abandon = b->fork_gen != atomic_load(&s->fork_gen) ||
                          (atomic_load(&s->disp_stop) && atomic_load(&s->stopper_in_fire));
        uint64_t now = xe_now_ns();
        if (!t0)
            t0 = now;
        if (may_abandon && now - t0 > 1000000000u) {
            atomic_fetch_add_explicit(&s->abandoned_buffers, 1, memory_order_relaxed);
            return 0;
        }
        xe_backoff(spins - 128);
    }
    return len;
}

uint64_t xe_walk(xe_session *s, xe_bufhdr *b, xe_recs_fn fn, int *abandoned)
{
    char *data = xe_buf_data(b);
    uint64_t pos = 0, n = 0, end = b->end, from = 0;
    *abandoned = 0;
    while (pos < end) {
        xe_rec *r = (xe_rec *)(data + pos);
        /* Written on another CPU: asked for a few records ahead, so the
         * lines are on their way while these are delivered. */
        __builtin_prefetch((const char *)r + XE_WALK_PREFETCH);
        uint32_t len = atomic_load_explicit(&r->len, memory_order_acquire);
        if (__builtin_expect(len == 0, 0)) {
            if (fn && from < pos) /* what is published goes on first */
                fn(s, data + from, data + pos);
            from = pos;
            if ((len = wait_claim(s, b, r)) == 0) {
                *abandoned = 1;
                return n;
            }
        }
        if (len == XE_END_MARK || len < XE_RECORD_SHORT)
            break;
        n++;
        pos += len;
        if (fn && pos - from >= XE_WALK_RUN) {
            fn(s, data + from, data + pos);
            from = pos;
        }
    }
    if (fn && from < pos)
        fn(s, data + from, data + pos);
    return n;
}

/* Trimming at idle: xe_internal.h says why. */
int xe_trim_wanted(const xe_bufhdr *b)
{
    return b->resident > XE_KEEP_RESIDENT + XE_TRIM_SLACK;
}

void xe_recycle(xe_session *s, uint32_t idx)
{
    xe_bufhdr *b = xe_buf(s, idx);
    uint64_t cap = xe_buf_cap(s, b);
    uint64_t used = b->end + sizeof(uint64_t); /* an end marker may follow */
    if (used > cap)
        used = cap;
    char *data = xe_buf_data(b);
    if (s->time_order && !b->large) {
        if (used > b->resident)
            b->resident = used;
        if (xe_trim_wanted(b))
            s->trim_wanted = 1;
    }
    memset(data, 0, used);
    b->end = 0;
    atomic_store(&b->first_tsc, 0);
    xe_stack_push(s, b->large ? &s->large_pool : &s->free_pool, idx);
    xe_tell_waiters(s, (int)b->large);
}

void xe_trim_free(xe_session *s)
{
    s->trim_wanted = 0;
    /* The buffers with nothing to give back go straight back to the pool,
     * the others one by one, each after its madvise: a producer that needs
     * a buffer meanwhile finds one unless every free buffer was being
     * trimmed (then it waits, or in a session allowed to lose events
     * drops, for one madvise; each push wakes a waiter). */
    uint32_t at = xe_stack_take_all(s, &s->free_pool), todo = 0;
    while (at != 0) {
        xe_bufhdr *b = xe_buf(s, at - 1);
        uint32_t next = atomic_load_explicit(&b->next, memory_order_relaxed);
        if (xe_trim_wanted(b)) {
            atomic_store_explicit(&b->next, todo, memory_order_relaxed); /* a chain of our own */
            todo = at;
        } else {
            xe_stack_push(s, &s->free_pool, at - 1);
        }
        at = next;
    }
    xe_tell_waiters(s, 1); /* those put straight back */
    /* Known to the session while out of the pool: a fork now leaves the
     * child without this thread, and xe_trim_forked puts them back. */
    atomic_store(&s->trim_chain, todo);
    for (at = todo; at != 0;) {
        xe_bufhdr *b = xe_buf(s, at - 1);
        uint32_t next = atomic_load_explicit(&b->next, memory_order_relaxed);
        atomic_store(&s->trim_cur, at);
        atomic_store(&s->trim_chain, next);
        /* Whole pages inside the data only (buffers are page-aligned;
         * the next buffer's header follows this one's end). The data was
         * zeroed at its recycling: the pages read back as zeros. */
        uintptr_t data = (uintptr_t)xe_buf_data(b);
        uintptr_t from = (data + XE_KEEP_RESIDENT + 4095) & ~(uintptr_t)4095;
        uintptr_t to = (data + b->resident) & ~(uintptr_t)4095;
        /* A failure is not tried again (locked pages, after the program's
         * mlockall, refuse with EINVAL): else the idle dispatcher would
         * seal, recycle and retry without end. */
        if (to > from)
            (void)madvise((void *)from, to - from, MADV_DONTNEED);
        b->resident = XE_KEEP_RESIDENT;
        /* Let go of it before it is in the pool: a fork in between loses
         * this one buffer to the child, never puts it there twice (once
         * popped and in use). */
        atomic_store(&s->trim_cur, 0);
        free_push(s, at - 1); /* a waiter need not wait for the other madvises */
        at = next;
    }
}

void xe_trim_forked(xe_session *s)
{
    /* The parent's dispatcher was trimming: its buffers out of the pool
     * go back (the one it was at may have been pushed already). */
    uint32_t cur = atomic_exchange(&s->trim_cur, 0), at = atomic_exchange(&s->trim_chain, 0);
    if (cur && !xe_stack_has(s, &s->free_pool, cur - 1))
        xe_stack_push(s, &s->free_pool, cur - 1);
    while (at != 0) {
        uint32_t next = atomic_load_explicit(&xe_buf(s, at - 1)->next, memory_order_relaxed);
        if (!xe_stack_has(s, &s->free_pool, at - 1))
            xe_stack_push(s, &s->free_pool, at - 1);
        at = next;
    }
}

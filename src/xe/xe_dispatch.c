/* xe_dispatch.c — a session's dispatcher thread: it takes sealed buffers
 * from the queue, delivers their events to the asynchronous targets and
 * recycles the buffers; it seals buffers whose first event is older than
 * MAX_DISPATCH_LATENCY, serves flush and stop requests, and survives fork.
 * Also the engine's clock (TSC ticks, converted to CLOCK_MONOTONIC ns at
 * dispatch) and futex helpers. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "xe/xe_internal.h"
#include "xe/xe_thread.h"

/* ---- clock ------------------------------------------------------------------ */

static struct {
    uint64_t ticks0, ns0;
    _Atomic uint64_t mult; /* ns per tick, 32.32 fixed point */
    _Atomic int state;     /* 0 none, 1 calibrating, 2 ready */
} clk;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t xe_now_ns(void)
{
    return mono_ns();
}

#define CLOCK_CALIBRATE_NS 250000u      /* the first rate's span */
#define CLOCK_FIRST_REFINE_NS 20000000u /* the span of its first refinement (~1e-6) */

#if defined(__x86_64__)
/* The rate of `ns` over `ticks` (xe_clock_scale's 32.32 fixed point). */
static uint64_t rate_of(uint64_t ns, uint64_t ticks)
{
    return (uint64_t)(((unsigned __int128)ns << 32) / (ticks ? ticks : 1));
}

/* A CLOCK_MONOTONIC time and the ticks at the same moment: of a few
 * tries, the one whose tick reads on either side of the clock's are
 * closest (an interrupt or a VM exit between the reads would skew the
 * rate computed from the pair), with the ticks halfway between them. */
static void read_pair(uint64_t *ns, uint64_t *ticks)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t a = xe_ticks(), n = mono_ns(), b = xe_ticks();
        if (b - a < best) {
            best = b - a;
            *ns = n;
            *ticks = a + (b - a) / 2;
        }
    }
}
#endif

void xe_clock_init(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&clk.state, &expect, 1)) {
        while (atomic_load(&clk.state) != 2)
            sched_yield();
        return;
    }
#if defined(__x86_64__)
    /* Tick rate over CLOCK_CALIBRATE_NS (each end read to a few tens of
     * ns: ~1e-4); the dispatcher refines it after CLOCK_FIRST_REFINE_NS,
     * then every second. The program waits for this: kept short. */
    uint64_t n0 = 0, t0 = 0, n1 = 0, t1 = 0;
    read_pair(&n0, &t0);
    while (mono_ns() - n0 < CLOCK_CALIBRATE_NS) {
    }
    read_pair(&n1, &t1);
    clk.ticks0 = t0;
    clk.ns0 = n0;
    atomic_store(&clk.mult, rate_of(n1 - n0, t1 - t0));
#else
    clk.ticks0 = 0;
    clk.ns0 = 0;
    atomic_store(&clk.mult, (uint64_t)1 << 32);
#endif
    atomic_store(&clk.state, 2);
}

/* Over a longer span the rate is known better (the dispatcher calls this
 * once CLOCK_FIRST_REFINE_NS have passed, then every second). */
static void clock_refine(void)
{
#if defined(__x86_64__)
    uint64_t n = 0, t = 0;
    read_pair(&n, &t);
    if (n - clk.ns0 < CLOCK_FIRST_REFINE_NS || t <= clk.ticks0)
        return;
    atomic_store(&clk.mult, rate_of(n - clk.ns0, t - clk.ticks0));
#endif
}

void xe_clock_conv_get(xe_clock_conv *c)
{
    c->ticks0 = clk.ticks0;
    c->ns0 = clk.ns0;
    c->mult = atomic_load_explicit(&clk.mult, memory_order_relaxed);
}

uint64_t xe_ticks_to_ns(uint64_t ticks)
{
    xe_clock_conv c;
    xe_clock_conv_get(&c);
    return xe_clock_conv_ns(&c, ticks);
}

uint64_t xe_ticks_delta_ns(uint64_t t0, uint64_t t1)
{
    uint64_t m = atomic_load(&clk.mult);
    return t1 > t0 ? xe_clock_scale(t1 - t0, m) : 0;
}

uint64_t xe_ns_to_ticks(uint64_t ns)
{
    uint64_t m = atomic_load(&clk.mult);
    unsigned __int128 t = ((unsigned __int128)ns << 32) / (m ? m : 1);
    return t > UINT64_MAX / 2 ? UINT64_MAX / 2 : (uint64_t)t;
}

/* ---- futexes ------------------------------------------------------------- */

void xe_futex_wait(_Atomic uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

void xe_futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void xe_futex_wake_one(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void xe_wake_dispatcher(xe_session *s)
{
    atomic_fetch_add(&s->wake_seq, 1);
    if (atomic_load(&s->disp_idle))
        xe_futex_wake(&s->wake_seq);
}

/* ---- delivery --------------------------------------------------------------- */

void xe_rec_to_event(const xe_session *s, const xe_rec *r, xe_event *ev)
{
    ev->type = r->type;
    ev->category = r->category;
    ev->tid = r->tid;
    ev->cpu = r->cpu;
    ev->time_ns = xe_ticks_to_ns(r->tsc);
    ev->tsc = s->time_order ? r->tsc : 0;
    ev->size = r->size;
    ev->site = r->site;
    ev->key = r->key;
    ev->value = r->value;
    if (xe_rec_is_short(r)) {
        ev->address = ev->old_address = 0; /* a short record */
        ev->data_len = 0;
        ev->data = NULL;
        return;
    }
    ev->data_len = r->data_len;
    ev->address = r->address;
    ev->old_address = r->old_address;
    ev->data = r->data_len ? (const char *)r + XE_RECORD_FIXED : NULL;
}

static void deliver(xe_session *s, const xe_rec *r)
{
    xe_event ev;
    xe_rec_to_event(s, r, &ev);
    for (int i = 0; i < s->nasync; i++)
        s->async[i]->ops->deliver(s->async[i], &ev);
}

/* Records [from, to) to the targets, each as an event. */
static void deliver_each(xe_session *s, const char *from, const char *to)
{
    for (; from < to; from += xe_rec_len((const xe_rec *)from))
        deliver(s, (const xe_rec *)from);
}

/* A time-ordered session's one asynchronous target taking records as
 * they are, a run at a time: no event built and read back for each, and
 * no call for each. A record it declines goes as an event. */
static void deliver_recs(xe_session *s, const char *from, const char *to)
{
    xe_target *t = s->async[0];
    while (from < to) {
        from += t->ops->deliver_recs(t, from, (uint64_t)(to - from));
        if (from < to) {
            deliver(s, (const xe_rec *)from);
            from += xe_rec_len((const xe_rec *)from);
        }
    }
}

static xe_recs_fn deliver_fn(const xe_session *s)
{
    if (!s->nasync)
        return NULL;
    return s->time_order && s->nasync == 1 && s->async[0]->ops->deliver_recs ? deliver_recs : deliver_each;
}

void xe_mark_walked(xe_session *s, uint64_t seq)
{
    if (seq < s->walked_low)
        return;
    uint64_t d = seq - s->walked_low;
    if (d >= XE_WALKED_WINDOW)
        return; /* cannot happen: fewer buffers than the window */
    uint64_t at = seq % XE_WALKED_WINDOW;
    s->walked_bits[at / 64] |= 1ull << (at % 64);
    for (;;) {
        at = s->walked_low % XE_WALKED_WINDOW;
        if (!(s->walked_bits[at / 64] >> (at % 64) & 1))
            break;
        s->walked_bits[at / 64] &= ~(1ull << (at % 64));
        s->walked_low++;
    }
}

void xe_walked_reset(xe_session *s)
{
    s->walked_low = atomic_load(&s->seal_seq) + 1;
    memset(s->walked_bits, 0, sizeof s->walked_bits);
}

/* Deliver a sealed buffer's events; 1 when it can be used again. */
static int process(xe_session *s, uint32_t idx)
{
    xe_bufhdr *b = xe_buf(s, idx);
    if (s->time_order)
        xe_mark_walked(s, atomic_load_explicit(&b->sealseq, memory_order_acquire));
    /* A fork child writing files of its own (event_file, a trace): what
     * was buffered before the fork is the parent's (its files get it), and
     * buffers the child fills are new. The parent's are walked all the
     * same, delivering nothing: the walk tells a record a fire left
     * unfinished, whose buffer must not be used again below. */
    int parents = (int32_t)(b->fork_gen - s->deliver_gen) < 0;
    int abandoned = 0;
    uint64_t n = xe_walk(s, b, parents ? NULL : deliver_fn(s), &abandoned);
    if (!parents) {
        s->since_mark += n;
        for (int i = 0; i < s->nasync; i++)
            if (s->async[i]->ops->flush)
                s->async[i]->ops->flush(s->async[i]);
        atomic_fetch_add(&s->delivered, n);
    }
    /* Abandoned by a writer the fork left behind (opened in an earlier
     * generation): no one will ever write there, so it is used again;
     * unless the fork ran in a handler that interrupted a fire, whose
     * writer may yet come back. */
    return !abandoned || (b->fork_gen != atomic_load(&s->fork_gen) && !s->fork_in_fire);
}

/* Producers between leaving the fast path and handing their buffer on.
 * A stop run by a signal handler does not wait for the fire it
 * interrupted on its own thread (stopper_inflight). */
static int producers_busy(xe_session *s)
{
    return atomic_load(&s->inflight) > (atomic_load(&s->disp_stop) ? s->stopper_inflight : 0);
}

/* Ordered sessions: deliver held buffers by seq. A buffer opened earlier
 * than every held one is either queued or in the hands of a producer in
 * its slow path (it seals and queues before it leaves); with none in
 * flight and the queue empty, a missing seq will never come (a fork), and
 * the oldest held one goes next. `force` (the stop's last drain, after
 * every producer left): whatever is held goes, oldest first. */
static void deliver_held(xe_session *s, int force)
{
    while (s->nheld) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < s->nheld; i++)
            if (xe_buf(s, s->held[i])->seq < xe_buf(s, s->held[best])->seq)
                best = i;
        uint32_t idx = s->held[best];
        uint64_t seq = xe_buf(s, idx)->seq;
        if (!force && seq && s->next_seq && seq != s->next_seq &&
            (producers_busy(s) || (atomic_load(&s->queue.head) & 0xffffffffu)))
            return;
        int reuse = process(s, idx);
        s->held[best] = s->held[--s->nheld];
        if (seq)
            s->next_seq = seq + 1;
        atomic_fetch_sub(&s->pending, 1);
        if (reuse)
            xe_recycle(s, idx);
    }
}

static int drain_ordered(xe_session *s)
{
    int any = 0;
    for (;;) {
        uint32_t at = xe_stack_take_all(s, &s->queue);
        while (at && s->nheld < XE_HELD_MAX) {
            s->held[s->nheld++] = at - 1;
            at = atomic_load(&xe_buf(s, at - 1)->next);
        }
        while (at) { /* cannot happen: the queue holds at most every buffer */
            uint32_t next = atomic_load(&xe_buf(s, at - 1)->next);
            if (process(s, at - 1))
                xe_recycle(s, at - 1);
            atomic_fetch_sub(&s->pending, 1);
            at = next;
        }
        uint32_t before = s->nheld;
        deliver_held(s, 0);
        if (s->nheld == before)
            return any;
        any = 1;
    }
}

static int drain(xe_session *s)
{
    if (s->ordered)
        return drain_ordered(s);
    int any = 0;
    for (;;) {
        /* The chain taken is kept in the session (batch) so a forked child
         * can put back what the parent's dispatcher had not finished. */
        uint32_t at = xe_stack_take_all(s, &s->queue);
        if (at == 0)
            return any;
        any = 1;
        atomic_store(&s->batch, at);
        while (at) {
            uint32_t idx = at - 1, next = atomic_load(&xe_buf(s, idx)->next);
            int reuse = process(s, idx);
            atomic_store(&s->batch, next);
            atomic_fetch_sub(&s->pending, 1);
            if (reuse)
                xe_recycle(s, idx);
            at = next;
        }
        if (s->time_order)
            return any; /* a busy queue must not hold the sweeps off */
    }
}

/* Seal a partition's current buffer (when `force`, even empty) and hand it
 * to the queue; the partition gets a free buffer, or none once stopping. */
/* Has a current buffer (its `reserved`) taken a claim? (OPENING: not yet
 * open.) */
static int holds_claims(uint64_t reserved)
{
    return !(reserved & XE_OPENING) && (reserved & XE_OFF_MASK) != 0;
}

static void seal_current(xe_session *s, xe_part *p, int force)
{
    int32_t idx = xe_cur_idx(atomic_load_explicit(&p->cur, memory_order_acquire));
    if (idx < 0)
        return;
    xe_bufhdr *b = xe_buf(s, (uint32_t)idx);
    if (!force && atomic_load(&b->first_tsc) == 0 &&
        (!s->time_order || !holds_claims(atomic_load(&b->reserved))))
        return;
    if (xe_seal(s, (uint32_t)idx))
        xe_replace(s, p, (uint32_t)idx, 0);
}

/* ---- time-ordered sessions ----------------------------------------------- */

#define SWEEP_NS 5000000u /* how often a time-ordered session's partitions are sealed */
/* ... and how often while events flow fast: when SWEEP_BUSY_EVENTS or more
 * came since the last watermark, the next sweep is due after SWEEP_BUSY_NS,
 * so what the targets stage until it (trace mode's merge runs) stays small
 * enough to be in cache; a program that allocates slowly still wakes the
 * dispatcher at most every SWEEP_NS. */
#define SWEEP_BUSY_NS 1000000u
#define SWEEP_BUSY_EVENTS 16384u
#define SWEEP_PATIENCE_NS 1000000000u /* how long a sweep waits for a sealer before going on */
/* Producers read the clock after their claim, without a fence (an lfence
 * costs a third of a fire): the read may run ahead of the claim by what
 * the CPU executes out of order, well under a microsecond. Watermarks are
 * given this much before the sweep began, which covers it. */
#define MARGIN_NS 20000u

static void give_watermark(xe_session *s, uint64_t tsc)
{
    uint64_t margin = xe_ns_to_ticks(MARGIN_NS);
    if (tsc != UINT64_MAX)
        tsc = tsc > margin ? tsc - margin : 0;
    for (int i = 0; i < s->nasync; i++)
        if (s->async[i]->ops->watermark)
            s->async[i]->ops->watermark(s->async[i], tsc);
    /* Events delivered since the last watermark and stamped after this one
     * stay with the targets: one more sweep (5 ms on) passes them on, even
     * if the program falls idle. */
    s->follow_up = s->since_mark != 0;
    s->since_mark = 0;
}

/* Seals every partition's buffer that holds claims, waits until every
 * buffer sealed so far has been walked, then tells the targets that no
 * event older than the sweep's start is still to come: events are stamped
 * after their claim, and every claim after a partition's seal lands in a
 * later buffer. A buffer sealed by a producer that has not numbered its
 * seal yet is waited for (its number may be above the one read). */
static void sweep(xe_session *s)
{
    uint64_t w = xe_ticks();
    for (uint32_t i = 0; i < s->nparts; i++) {
        xe_part *p = &s->parts[i];
        int32_t idx = xe_cur_idx(atomic_load_explicit(&p->cur, memory_order_acquire));
        if (idx < 0 || !holds_claims(atomic_load(&xe_buf(s, (uint32_t)idx)->reserved)))
            continue; /* no claim yet: the next one is later than w */
        if (xe_seal(s, (uint32_t)idx))
            xe_replace(s, p, (uint32_t)idx, 0);
    }
    /* Buffers sealed by others may not be numbered yet (a sealer between
     * its seal and its number, perhaps descheduled, perhaps the thread a
     * stopping signal handler interrupted): wait for them, not for ever. */
    uint64_t since = mono_ns();
    for (unsigned spins = 0; atomic_load(&s->sealing) != 0; spins++) {
        if (mono_ns() - since > SWEEP_PATIENCE_NS) {
            atomic_fetch_add(&s->unsure, 1);
            break;
        }
        xe_backoff(spins); /* off the CPU the sealer may be waiting for */
    }
    uint64_t target = atomic_load(&s->seal_seq);
    uint64_t t0 = 0;
    while (s->walked_low <= target) {
        if (drain(s))
            continue;
        uint64_t now = mono_ns();
        if (!t0)
            t0 = now;
        if (now - t0 > SWEEP_PATIENCE_NS) {
            /* A sealer stopped (SIGSTOP, a debugger): go on; events of its
             * buffer may come after later ones. */
            atomic_fetch_add(&s->unsure, 1);
            break;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    give_watermark(s, w);
    s->last_sweep = xe_ticks();
}

/* Nothing in flight: the free buffers' pages go back, and a current buffer
 * that still has a former life's pages resident (and no claim) is swapped
 * for a trimmed one; it comes back through the queue and is trimmed at the
 * next idle turn. */
static void trim_idle(xe_session *s)
{
    xe_trim_free(s);
    for (uint32_t i = 0; i < s->nparts; i++) {
        xe_part *p = &s->parts[i];
        int32_t idx = xe_cur_idx(atomic_load_explicit(&p->cur, memory_order_acquire));
        if (idx < 0 || !xe_trim_wanted(xe_buf(s, (uint32_t)idx)))
            continue;
        if (!holds_claims(atomic_load(&xe_buf(s, (uint32_t)idx)->reserved)) && xe_seal(s, (uint32_t)idx))
            xe_replace(s, p, (uint32_t)idx, 0);
    }
}

/* Is any partition's current buffer holding claims? */
static int any_claims(xe_session *s)
{
    for (uint32_t i = 0; i < s->nparts; i++) {
        int32_t idx = xe_cur_idx(atomic_load(&s->parts[i].cur));
        if (idx >= 0 && holds_claims(atomic_load(&xe_buf(s, (uint32_t)idx)->reserved)))
            return 1;
    }
    return 0;
}

static void wait_producers(xe_session *s)
{
    while (producers_busy(s)) {
        drain(s); /* what they hand on meanwhile frees buffers others wait for */
        sched_yield();
    }
}

static void *dispatcher(void *arg)
{
    xe_session *s = arg;
    /* The clock's rate: refined CLOCK_FIRST_REFINE_NS after the start
     * (the dispatcher wakes for it), then every second it is awake. */
    uint64_t last_refine = xe_ticks(), refine_every = xe_ns_to_ticks(CLOCK_FIRST_REFINE_NS);
    int refined = 0;
    for (;;) {
        uint32_t seq = atomic_load(&s->wake_seq);
        drain(s);
        uint32_t freq = atomic_load(&s->flush_req);
        int stop = atomic_load(&s->disp_stop);
        uint64_t now = xe_ticks(), deadline = UINT64_MAX;
        if (now - last_refine > refine_every) {
            clock_refine();
            last_refine = now;
            refine_every = xe_ns_to_ticks(1000000000u);
            refined = 1;
        }
        if (stop || freq != atomic_load(&s->flush_done)) {
            uint64_t w = xe_ticks();
            for (uint32_t i = 0; i < s->nparts; i++)
                seal_current(s, &s->parts[i], stop);
            wait_producers(s);
            drain(s);
            if (stop && s->ordered)
                deliver_held(s, 1);
            if (s->time_order) /* every sealer has handed its buffer on */
                give_watermark(s, stop ? UINT64_MAX : w);
            atomic_store(&s->flush_done, freq);
            xe_futex_wake(&s->flush_done);
            if (stop)
                break;
            continue;
        }
        if (s->time_order) {
            if (s->since_mark || s->follow_up || any_claims(s)) {
                uint64_t due = s->last_sweep +
                               xe_ns_to_ticks(s->since_mark >= SWEEP_BUSY_EVENTS ? SWEEP_BUSY_NS : SWEEP_NS);
                if (now >= due) {
                    sweep(s);
                    continue;
                }
                deadline = due;
            }
        } else if (s->latency_tsc) {
            for (uint32_t i = 0; i < s->nparts; i++) {
                int32_t idx = xe_cur_idx(atomic_load(&s->parts[i].cur));
                if (idx < 0)
                    continue;
                uint64_t first = atomic_load(&xe_buf(s, (uint32_t)idx)->first_tsc);
                if (!first)
                    continue;
                uint64_t due = first + s->latency_tsc;
                if (now >= due)
                    seal_current(s, &s->parts[i], 0);
                else if (due < deadline)
                    deadline = due;
            }
        }
        if (atomic_load(&s->queue.head) & 0xffffffffu)
            continue;
        if (s->time_order && deadline == UINT64_MAX && s->trim_wanted) {
            trim_idle(s);
            continue;
        }
        uint64_t wait_ns = 1000000000u;
        if (deadline != UINT64_MAX) {
            uint64_t left = xe_ticks_delta_ns(now, deadline);
            if (left < wait_ns)
                wait_ns = left + 100000u;
        }
        if (!refined) {
            uint64_t left = xe_ticks_delta_ns(now, last_refine + refine_every);
            if (left < wait_ns)
                wait_ns = left + 100000u;
        }
        atomic_store(&s->disp_idle, 1);
        if (seq == atomic_load(&s->wake_seq))
            xe_futex_wait(&s->wake_seq, seq, wait_ns);
        atomic_store(&s->disp_idle, 0);
    }
    for (int i = 0; i < s->nasync; i++) {
        if (s->async[i]->ops->flush)
            s->async[i]->ops->flush(s->async[i]);
        if (s->async[i]->ops->stop)
            s->async[i]->ops->stop(s->async[i]);
    }
    return NULL;
}

int xe_dispatch_start(xe_session *s)
{
    atomic_store(&s->disp_stop, 0);
    atomic_store(&s->flush_done, atomic_load(&s->flush_req));
    /* The dispatcher takes no signals: a signal handler that reads a view
     * (the agent's control socket) never interrupts a target's writer. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&s->disp, &attr, dispatcher, s);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    pthread_setname_np(s->disp, "memtrail-xe");
    s->disp_running = 1;
    s->pid = getpid();
    return 0;
}

void xe_dispatch_stop(xe_session *s)
{
    if (!s->disp_running)
        return;
    s->stopper_inflight = xe_fire_inflight_here(s);
    atomic_store(&s->stopper_in_fire, xe_fire_depth_here() > 0);
    atomic_store(&s->disp_stop, 1);
    xe_wake_dispatcher(s);
    xe_futex_wake(&s->wake_seq);
    pthread_join(s->disp, NULL);
    s->disp_running = 0;
}

void xe_dispatch_flush(xe_session *s)
{
    if (!s->disp_running)
        return;
    uint32_t want = atomic_fetch_add(&s->flush_req, 1) + 1;
    xe_wake_dispatcher(s);
    xe_futex_wake(&s->wake_seq);
    for (;;) {
        uint32_t done = atomic_load(&s->flush_done);
        if ((int32_t)(done - want) >= 0 || atomic_load(&s->state) != XE_STARTED)
            break;
        xe_futex_wait(&s->flush_done, done, 100 * 1000 * 1000);
    }
}

/* Mark the buffers on a stack; how many there are. (A fork child.) */
static uint32_t mark_stack(xe_session *s, xe_stack *st, unsigned char *mark)
{
    uint32_t n = 0, guard = s->nbuf + s->nlarge;
    for (uint32_t at = (uint32_t)atomic_load(&st->head); at && guard--;
         at = atomic_load(&xe_buf(s, at - 1)->next)) {
        mark[at - 1] = 1;
        n++;
    }
    return n;
}

/* After the fork child's own repairs every buffer is in a pool or the
 * queue, except those a vanished thread had in its hands: a chain the
 * parent's dispatcher had just taken off the queue, a buffer it was
 * between delivering and recycling, one a producer had popped and not
 * installed (or a large one it was filling), one abandoned by a writer
 * before the fork. Each goes back to its pool (its contents are the
 * parent's to deliver), sealed against a claim through a stale current
 * index, and pending counts what is queued: else a child that forked at
 * the wrong moment could wait for a free buffer for ever. Not when the
 * fork interrupted a fire on its own thread: that fire may hold one of
 * them and will finish with it. */
static void reclaim_forked(xe_session *s)
{
    uint32_t n = s->nbuf + s->nlarge;
    size_t len = ((size_t)n + 4095) & ~(size_t)4095;
    unsigned char *mark = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mark == MAP_FAILED)
        return;
    mark_stack(s, &s->free_pool, mark);
    mark_stack(s, &s->large_pool, mark);
    uint32_t queued = mark_stack(s, &s->queue, mark);
    for (uint32_t i = 0; i < n; i++) {
        if (mark[i])
            continue;
        /* Zero up to what was claimed, sealed or not. */
        xe_bufhdr *b = xe_buf(s, i);
        uint64_t off = atomic_load(&b->reserved) & XE_OFF_MASK, cap = xe_buf_cap(s, b);
        if (off > b->end)
            b->end = off < cap ? off : cap;
        atomic_fetch_or(&b->reserved, XE_SEALED);
        xe_recycle(s, i);
    }
    atomic_store(&s->pending, queued);
    munmap(mark, len);
}

/* In a forked child only the forking thread exists: the dispatcher is gone,
 * and so is any thread that was between sealing a buffer and handing it on.
 * Finish their work: every partition's current buffer (open, sealed or
 * full) gets queued (once) and a fresh one at the next fire; buffers the
 * parent's dispatcher had taken go back to the pool (the parent delivers
 * them), and so does any buffer no one in the child holds
 * (reclaim_forked). What was buffered at the fork is delivered in both
 * processes, unless the session writes files (event_file): the child's
 * files get only the child's events. */
void xe_dispatch_after_fork(xe_session *s, int in_fire)
{
    s->fork_in_fire = in_fire;
    /* A target that moved to files of the child's own (event_file): the
     * buffers opened before the fork are the parent's, written to its
     * files, and not again to the child's. */
    for (int i = 0; i < s->nasync; i++)
        if (s->async[i]->ops->forked && s->async[i]->ops->forked(s->async[i]))
            s->deliver_gen = atomic_load(&s->fork_gen) + 1;
    atomic_fetch_add(&s->fork_gen, 1); /* writers of buffers opened before now may be gone */
    xe_trim_forked(s);
    atomic_store(&s->disp_idle, 0);
    atomic_store(&s->free_waiters, 0);
    atomic_store(&s->large_waiters, 0);
    atomic_store(&s->inflight, 0);
    for (uint32_t at = atomic_exchange(&s->batch, 0); at;) {
        uint32_t next = atomic_load(&xe_buf(s, at - 1)->next);
        atomic_fetch_sub(&s->pending, 1);
        xe_recycle(s, at - 1);
        at = next;
    }
    /* Held buffers are the parent's dispatcher's too. Its plain stores
     * to held[] and nheld may show a buffer twice (or one already back). */
    while (s->nheld) {
        uint32_t idx = s->held[--s->nheld];
        int again = xe_stack_has(s, &s->free_pool, idx) || xe_stack_has(s, &s->large_pool, idx);
        for (uint32_t j = 0; j < s->nheld && !again; j++)
            again = s->held[j] == idx;
        if (!again) {
            atomic_fetch_sub(&s->pending, 1);
            xe_recycle(s, idx);
        }
    }
    s->next_seq = 0;
    for (uint32_t i = 0; i < s->nparts; i++) {
        uint64_t seen = atomic_load(&s->parts[i].cur);
        int32_t idx = xe_cur_idx(seen);
        if (idx < 0)
            continue;
        /* Open: sealed and queued too. A thread that is gone may have
         * claimed room in it and never write its record; the walk gives up
         * there, and the child's events must not come after it. Sealed by
         * a thread that is gone: it may have queued it, and the parent's
         * dispatcher may even have recycled it already. */
        if (xe_seal(s, (uint32_t)idx) ||
            (!xe_stack_has(s, &s->queue, (uint32_t)idx) && !xe_stack_has(s, &s->free_pool, (uint32_t)idx)))
            xe_enqueue(s, (uint32_t)idx);
        atomic_store(&s->parts[i].cur, xe_cur_next(seen, -1));
    }
    if (!in_fire)
        reclaim_forked(s);
    /* Seals before now (the parent's, the ones just made) are walked or
     * skipped by the child: none is waited for. */
    xe_walked_reset(s);
    s->since_mark = 0;
    s->follow_up = 0;
    atomic_store(&s->sealing, 0); /* sealers that were between seal and number are gone */
    if (!s->disp_running)
        return;
    s->disp_running = 0;
    atomic_store(&s->flush_done, atomic_load(&s->flush_req));
    xe_dispatch_start(s);
}

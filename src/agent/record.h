/* record.h — recording on demand: which recording the hooks do for new
 * allocations now (none: summary counting only; detail: call sites;
 * trace: events in a trace file), switched at run time by `memtrail query
 * PID start detail|trace` and `stop` (record.c, through control.c), and
 * at start-up by options mode and start.
 *
 * Summary counters never stop: every hook counts whatever the recording.
 * A block remembers how it was recorded (its tag kind, block.h), so a
 * free or realloc reads its tag for what it is, whatever is recorded when
 * it comes: a block allocated before a recording began (or in an earlier
 * one) is one the current recording never saw.
 *
 * The hot path reads the state with one relaxed load and takes no lock.
 * Trace recording brackets each hook, from its read of the state to its
 * event, with a count of hooks in flight (mt_rec_enter/leave): a stop
 * switches the state off, waits for that count to drain, and only then
 * finishes the file, so an allocation that saw the recording on has its
 * event in the trace, and one that saw it off has none. */
#ifndef MT_AGENT_RECORD_H
#define MT_AGENT_RECORD_H

#include <stdatomic.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "common/out.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

/* The recording of new allocations; also a block's tag kind (block.h):
 * NONE a tag of 0, DETAIL a call site's index, TRACE an allocation id.
 * SAMPLE is a recording only (sample mode, sample.h): the blocks it
 * samples are tagged DETAIL, the others NONE. */
enum { MT_REC_NONE, MT_REC_DETAIL, MT_REC_TRACE, MT_REC_SAMPLE };
extern _Atomic int mt_rec;
/* Hooks between reading mt_rec == MT_REC_TRACE and firing their event:
 * counted in the thread's shard (its own cache line: no contention), or
 * here for a thread that has none yet. */
extern _Atomic long mt_rec_busy;
/* 1 when the stop's side of the handshake below is a membarrier(2) (the
 * process registered for it, record.c): a hook's count in its shard then
 * needs no fence of its own (x86's locked store costs ~20 cycles a hook),
 * only the compiler's. 0: the count is a seq_cst store. */
extern _Atomic int mt_rec_membarrier;

static MT_INLINE void mt_rec_leave(int rec, _Atomic long *busy)
{
    if (MT_LIKELY(rec != MT_REC_TRACE))
        return;
    if (MT_LIKELY(busy != &mt_rec_busy))
        atomic_store_explicit(busy, atomic_load_explicit(busy, memory_order_relaxed) - 1,
                              memory_order_release);
    else
        atomic_fetch_sub_explicit(busy, 1, memory_order_release);
}

/* The recording this hook does; pair with mt_rec_leave(rec, *busy). */
static MT_INLINE int mt_rec_enter(_Atomic long **busy)
{
    int rec = atomic_load_explicit(&mt_rec, memory_order_relaxed);
    if (MT_LIKELY(rec != MT_REC_TRACE))
        return rec;
    struct mt_shard *sh = mt_t.shard;
    /* Counted before the state is read again (a seq_cst store, or a
     * plain one with the stop's membarrier): a stop that switched it off
     * after this read sees this hook in the count. A
     * shard's count has one writer, its thread (a signal handler nested
     * on it puts back what it took): a store, not a locked add. */
    if (MT_LIKELY(sh != NULL)) {
        *busy = &sh->rec_busy;
        long v = atomic_load_explicit(*busy, memory_order_relaxed) + 1;
        if (MT_LIKELY(atomic_load_explicit(&mt_rec_membarrier, memory_order_relaxed))) {
            /* The stop's membarrier is this store's fence (record.c). */
            atomic_store_explicit(*busy, v, memory_order_relaxed);
            atomic_signal_fence(memory_order_seq_cst);
        } else {
            atomic_store(*busy, v);
        }
    } else {
        *busy = &mt_rec_busy;
        atomic_fetch_add(*busy, 1);
    }
    rec = atomic_load(&mt_rec);
    if (rec != MT_REC_TRACE)
        mt_rec_leave(MT_REC_TRACE, *busy);
    return rec;
}

/* A fork in detail and sample modes. A block's count (counters.h) and
 * its site's (site.h) are two updates: a child forked between them, while
 * another thread was inside its hook, had sites that did not add up to
 * its totals. A hook brackets the two with its shard's site_busy (as a
 * trace's hooks bracket their events with rec_busy); fork's prepare
 * handler (mt_rec_fork_hold) holds new brackets off and waits for those
 * in flight, as glibc's fork holds its malloc arenas. Only blocks with a
 * site pay for it: detail mode's, and sample mode's sampled ones.
 * mt_site_gate is what a bracket reads after its count: MT_SITE_NO_MB
 * while the fork's side is no membarrier(2) (the bracket then needs a
 * fence of its own), plus MT_SITE_HOLD for each fork holding; 0 in the
 * common case, one load and one test. */
#define MT_SITE_NO_MB 1
#define MT_SITE_HOLD 2
extern _Atomic int mt_site_gate;
/* A bracket whose gate was not 0: 1 to go on, still inside (nothing
 * held after its fence, this is the forking thread, or the hold outlasted
 * 2 s), 0 once the fork is done: the wait is outside the bracket (the
 * fork waits for brackets in flight), and the caller enters again. */
int mt_site_gate_slow(_Atomic long *busy);

static MT_INLINE void mt_site_leave(_Atomic long *busy)
{
    if (MT_LIKELY(busy != NULL))
        atomic_store_explicit(busy, atomic_load_explicit(busy, memory_order_relaxed) - 1,
                              memory_order_release);
}

/* Before a block's count and its site's; pair with mt_site_leave. The
 * count is stored before the gate is read: the fork stores its hold,
 * then (membarrier) reads the counts. A shard's count has one writer,
 * its thread (a signal handler nested on it puts back what it took). A
 * thread with no shard (it is exiting: its counts go to the globals)
 * brackets nothing. */
static MT_INLINE _Atomic long *mt_site_enter(void)
{
    struct mt_shard *sh = mt_t.shard;
    if (MT_UNLIKELY(sh == NULL))
        return NULL;
    _Atomic long *busy = &sh->site_busy;
    for (;;) {
        atomic_store_explicit(busy, atomic_load_explicit(busy, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (MT_LIKELY(atomic_load_explicit(&mt_site_gate, memory_order_relaxed) == 0) ||
            mt_site_gate_slow(busy))
            return busy;
    }
}

/* Fork's prepare handler and both sides after it (init.c). */
void mt_rec_fork_hold(void);
void mt_rec_fork_release(void);

/* The first allocation id of the current trace: ids from it on are in
 * the trace file being written, older ones are not. */
extern _Atomic uint32_t mt_rec_first_id;

/* At start-up (init.c): the recording options asked for (mode, start). */
void mt_rec_init(int mode, int start);
/* In a fork child: hooks of threads that did not survive the fork no
 * longer count as in flight. */
void mt_rec_after_fork_child(void);
/* control.c: answers "start detail", "start sample", "start trace [PATH]" and "stop"
 * (`req` is the request line) on the connection fd: "ok ..." or "error
 * ...", sent before it returns (an answer that cannot be sent goes to
 * stderr). Not from a signal handler for trace recording (it starts and
 * joins a thread): `from_signal` says so, and such a request gets an
 * error. */
void mt_rec_request(const char *req, int from_signal, int fd);
/* The process is leaving (exit, _exit, exec; the process that owns the
 * agent's state only): waits for a start or stop under way, its answer
 * included, 30 s at most, and refuses those that come after. Released
 * again if an exec fails. Async-signal-safe. */
void mt_rec_hold_switches(void);
void mt_rec_release_switches(void);

#pragma GCC visibility pop
#endif

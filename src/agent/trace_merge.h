/* trace_merge.h — trace mode's merge of the per-CPU event streams.
 *
 * The trace session's buffers are per CPU (no producer shares a buffer
 * with a thread on another CPU), so their events reach the trace's
 * encoder out of global order. The encoder stages them here, one run per
 * CPU, each run kept sorted by the engine's clock (events come nearly
 * sorted: an insertion from the end), and when the session gives a
 * watermark (xe_config.time_order: no event before it is still to come)
 * it takes every staged event older than the mark, in clock order, from
 * a heap over the runs. An allocation is stamped before its block is
 * returned, a free after the block was handed over, so an allocation
 * always comes out before its free and its realloc, whichever threads
 * made them.
 *
 * Runs are mmap'd, grow by mremap and give their pages back when quiet
 * for a sweep, or down to twice a sweep's events after a burst
 * (memory is committed only while events are in flight). Agent-safe: no
 * malloc, no locks (one thread, the session's dispatcher, uses it). */
#ifndef MT_AGENT_TRACE_MERGE_H
#define MT_AGENT_TRACE_MERGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trace/trace_event.h"

#define TRACE_MERGE_MAX_RUNS 64u

/* Inside (trace_merge.c), here so that staging is inlined where the
 * dispatcher takes records. */
typedef struct trace_merge_run {
    mt_trace_event *ev;
    size_t n, head;   /* events staged; the first not yet emitted */
    size_t n0;        /* n at the last emit: took an event since if n > n0 */
    size_t cap_bytes; /* mapped */
    size_t touched;   /* bytes that may be resident (as of the last emit) */
} trace_merge_run;

typedef struct trace_merge {
    unsigned nruns;
    trace_merge_run runs[TRACE_MERGE_MAX_RUNS];
    unsigned heap[TRACE_MERGE_MAX_RUNS];
} trace_merge;

/* A merge of `nruns` runs (at most 64), or NULL. */
trace_merge *trace_merge_create(unsigned nruns);
void trace_merge_destroy(trace_merge *m);
/* Maps more for run r; 0, or -ENOMEM. */
int trace_merge_grow(trace_merge_run *r);

/* Stages an event of engine clock `key` (the sort key) in run `which`
 * (taken modulo the runs): its slot, time_ns set to the key, the other
 * fields for the caller to fill in before the next call; NULL when out
 * of memory (nothing staged). The caller writes the event in place: no
 * copy of it is made on the way. */
static inline mt_trace_event *trace_merge_put(trace_merge *m, unsigned which, uint64_t key)
{
    /* which is a CPU, below nruns but on machines with more than
     * TRACE_MERGE_MAX_RUNS CPUs: no division for every event. */
    trace_merge_run *r = &m->runs[which < m->nruns ? which : which % m->nruns];
    if ((r->n + 1) * sizeof *r->ev > r->cap_bytes && trace_merge_grow(r) != 0)
        return NULL;
    /* Nearly sorted already (a buffer's events in claim order, stamped
     * just after the claim): step back over the few that are later. */
    size_t at = r->n;
    while (at > r->head && r->ev[at - 1].time_ns > key)
        at--;
    if (at < r->n)
        memmove(&r->ev[at + 1], &r->ev[at], (r->n - at) * sizeof *r->ev);
    r->n++;
    r->ev[at].time_ns = key;
    return &r->ev[at];
}

/* Hands fn every staged event whose key is below `mark`, in key order
 * (equal keys: run order, then staging order), `n` at a time from one
 * run; returns how many. fn may change the events it is given (they are
 * emitted and no longer staged). */
uint64_t trace_merge_emit(trace_merge *m, uint64_t mark, void (*fn)(void *ctx, mt_trace_event *ev, size_t n),
                          void *ctx);
/* Forgets every staged event (a fork child: they are the parent's). */
void trace_merge_clear(trace_merge *m);
/* Events staged now. */
uint64_t trace_merge_staged(const trace_merge *m);

#endif

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

#include "trace/trace_event.h"

typedef struct trace_merge trace_merge;

/* A merge of `nruns` runs (at most 64), or NULL. */
trace_merge *trace_merge_create(unsigned nruns);
void trace_merge_destroy(trace_merge *m);
/* Stages an event of engine clock `key` (the sort key) in run `run`
 * (taken modulo the runs): its slot, time_ns set to the key, the other
 * fields for the caller to fill in before the next call; NULL when out
 * of memory (nothing staged). The caller writes the event in place: no
 * copy of it is made on the way. */
mt_trace_event *trace_merge_put(trace_merge *m, unsigned run, uint64_t key);
/* Hands fn every staged event whose key is below `mark`, in key order
 * (equal keys: run order, then staging order); returns how many. fn may
 * change the event it is given (it is emitted and no longer staged). */
uint64_t trace_merge_emit(trace_merge *m, uint64_t mark, void (*fn)(void *ctx, mt_trace_event *ev),
                          void *ctx);
/* Forgets every staged event (a fork child: they are the parent's). */
void trace_merge_clear(trace_merge *m);
/* Events staged now. */
uint64_t trace_merge_staged(const trace_merge *m);

#endif

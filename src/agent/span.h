/* span.h — timing of the hooks' calls for request spans and the process's
 * memory time (span.c owns the per-thread state). The hooks call these
 * only on their slow path (mt_t.timed, or a mapping call): outside spans
 * an allocator call pays one predictable branch on mt_t.timed. */
#ifndef MT_AGENT_SPAN_H
#define MT_AGENT_SPAN_H

#include "agent/meminfo.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

/* Allocator ticks of this thread not yet added to the process's total. */
extern MT_TLS uint64_t mt_alloc_pending;
/* About a millisecond of ticks: the process's total lags by no more. */
#define MT_ALLOC_FLUSH_TICKS (1ull << 22)
/* Adds mt_alloc_pending to the process's alloc time. */
void mt_alloc_flush(void);

/* Around one timed allocator call: nested calls (realloc's malloc) are
 * part of it, so timing is off until it returns. */
static inline uint64_t mt_alloc_timed_begin(void)
{
    mt_t.timed = 0;
    return mt_timed_begin();
}
static inline void mt_alloc_timed_end(uint64_t t0)
{
    uint64_t dt = mt_ticks() - t0;
    mt_t.timed = mt_t.span_depth > 0 || mt_info_opt.alloc_timing == MT_ALLOC_TIMING_ALL;
    if (MT_UNLIKELY(mt_t.in_agent))
        return; /* the agent's own work (a report, a name's histogram) */
    mt_t.mem_ticks += dt;
    mt_alloc_pending += dt;
    if (MT_UNLIKELY(mt_alloc_pending >= MT_ALLOC_FLUSH_TICKS))
        mt_alloc_flush();
}

/* A mapping call (always timed, except the agent's own): the process's
 * map time, and the span's memory time when this thread is timed and not
 * already inside a timed allocator call. */
static inline void mt_map_timed_end(uint64_t t0)
{
    uint64_t dt = mt_ticks() - t0;
    mt_info_add_map_ticks(dt);
    if (mt_t.timed)
        mt_t.mem_ticks += dt;
}

/* alloc_timing=all: start timing this thread (at start-up and as a thread
 * starts); as it ends, its pending time goes to the process's total. */
void mt_span_init(void);
void mt_span_thread_start(void);
void mt_span_thread_exit(void);

#pragma GCC visibility pop
#endif

/* sessions.h — event sessions (src/xe) inside the agent: the engine's host
 * (category names), the agent's own sessions defined in MEMTRAIL_SESSIONS
 * (`memtrail run --session DEF`), and the gate through which the malloc
 * and VM hooks fire their events into them.
 *
 * The gate is one relaxed load of a global and a branch predicted not
 * taken: with no agent session started, summary mode's hot path pays
 * nothing more. */
#ifndef MT_AGENT_SESSIONS_H
#define MT_AGENT_SESSIONS_H

#include <stdint.h>

#include "agent/agent.h"
#include "agent/record.h"
#include "xe/xe.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

/* 1 while at least one agent session is started. */
extern _Atomic int mt_xe_on;

/* At start-up (init.c): gives the engine the agent's category table. */
void mt_xe_init(void);
/* From the constructor, once the agent tracks: creates and starts the
 * sessions MEMTRAIL_SESSIONS defines (one per line); a bad definition is
 * one line on stderr and is skipped. */
void mt_xe_start_agent_sessions(void);
/* At exit, before the report: stops the agent sessions, so what they
 * buffered reaches their targets (an event_file is complete). */
void mt_xe_stop_agent_sessions(void);

/* In the child of _Fork (which runs no fork handlers): what the engine's
 * own atfork handler does after fork(). */
void mt_xe_after_fork_child(void);

/* The session that writes the trace (trace.c), or NULL: it gets only the
 * events fired with to_trace, whose hooks count themselves in flight
 * (record.h), so once trace recording is off and they are done it may be
 * dropped. */
void mt_xe_set_trace_session(xe_session *s);

/* Fires one of the agent's own events into every started agent session
 * (the trace's only when `to_trace`: the hook that made it saw trace
 * recording on, record.h). key and value: trace mode's allocation ids
 * (alloc, free: the block's; realloc: the new block's, and the old one's
 * in value); 0 otherwise. */
void mt_xe_fire_agent(unsigned type, uint64_t address, uint64_t old_address, uint64_t size, unsigned cat,
                      uint32_t site, uint32_t key, uint32_t value, int to_trace);

/* The trace's session while no agent session is started, else NULL: a
 * hook that writes to the trace then fires straight into it, with none of
 * mt_xe_fire_agent's work around the engine's (the engine leaves errno as
 * it was, and allocates nothing). */
extern xe_session *_Atomic mt_xe_trace_only;
/* An event the trace's session did not take: counted unrecorded when
 * recording stopped for want of memory (mt_xe_fire_agent's count). */
void mt_xe_trace_untaken(void);

static MT_INLINE void mt_xe_event(unsigned type, const void *address, const void *old_address, uint64_t size,
                                  unsigned cat, uint32_t site, uint32_t key, uint32_t value, int to_trace)
{
    if (MT_LIKELY(!atomic_load_explicit(&mt_xe_on, memory_order_relaxed)))
        return;
    xe_session *t;
    if (to_trace && (t = atomic_load_explicit(&mt_xe_trace_only, memory_order_acquire)) != NULL) {
        /* The trace's session writes allocation events without their
         * addresses (short_allocs): they are not passed. */
        int rc = type >= XE_EV_ALLOC && type <= XE_EV_REALLOC
                     ? xe_fire_alloc(t, type | cat << 16, size, site, key, value)
                     : xe_fire_fields(t, type, cat, size, (uint64_t)(uintptr_t)address,
                                      (uint64_t)(uintptr_t)old_address, site, key, value);
        if (MT_UNLIKELY(rc == 0))
            mt_xe_trace_untaken();
        return;
    }
    mt_xe_fire_agent(type, (uint64_t)(uintptr_t)address, (uint64_t)(uintptr_t)old_address, size, cat, site,
                     key, value, to_trace);
}
/* A mapping change (vm_hooks.c): to the trace while one records. */
static MT_INLINE void mt_vm_event(unsigned type, const void *address, uint64_t size, unsigned cat)
{
    if (MT_LIKELY(!atomic_load_explicit(&mt_xe_on, memory_order_relaxed)))
        return;
    _Atomic long *busy = NULL;
    int rec = mt_rec_enter(&busy);
    mt_xe_event(type, address, NULL, size, cat, 0, 0, 0, rec == MT_REC_TRACE);
    mt_rec_leave(rec, busy);
}

/* Allocation events, typed, from a hook doing recording `rec` (record.h):
 * `stack` is the call site (0 when not recording, and for a free in a
 * trace), `id` the allocation's id and `old_id` the one a realloc
 * replaced (a trace's; else 0). On a session's generic event they travel
 * as site, key and value; trace.c's encoder reads them back as stack, id
 * and old_id. Only a hook that saw trace recording on writes to the
 * trace: one that saw it off, running as it is switched, writes nothing
 * there (record.c). */
static MT_INLINE void mt_event_alloc(const void *p, uint64_t size, unsigned cat, uint32_t stack, uint32_t id,
                                     int rec)
{
    mt_xe_event(XE_EV_ALLOC, p, NULL, size, cat, stack, id, 0, rec == MT_REC_TRACE);
}
static MT_INLINE void mt_event_free(const void *p, uint64_t size, unsigned cat, uint32_t stack, uint32_t id,
                                    int rec)
{
    mt_xe_event(XE_EV_FREE, p, NULL, size, cat, stack, id, 0, rec == MT_REC_TRACE);
}
static MT_INLINE void mt_event_realloc(const void *p, const void *old, uint64_t size, unsigned cat,
                                       uint32_t stack, uint32_t id, uint32_t old_id, int rec)
{
    mt_xe_event(XE_EV_REALLOC, p, old, size, cat, stack, id, old_id, rec == MT_REC_TRACE);
}

#pragma GCC visibility pop
#endif

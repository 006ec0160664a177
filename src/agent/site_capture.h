/* site_capture.h — the stack capture inlined into the malloc hooks, so
 * the walk starts in the entry point itself: only its own frame has to be
 * unwound and dropped, not those of helper functions. Included by hooks.c
 * and site.c only: it brings in libunwind's header.
 *
 * Which walk runs: the one option unwind chose (mt_site_walker), except
 * off the thread's own stack (a signal handler on an alternate stack, a
 * coroutine's stack), where only the CFI walk runs: it knows the bounds it
 * may read within, and libunwind's cursor would not fit a small signal
 * stack. The CFI walk hands a stack to libunwind where it cannot go. */
#ifndef MT_AGENT_SITE_CAPTURE_H
#define MT_AGENT_SITE_CAPTURE_H

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "agent/site.h"
#include "agent/trace.h"

/* libunwind from here: unw_backtrace, whose cache of frames is never
 * told about unloaded code, until the first dlclose; then the step loop.
 * Never in a fork child (mt_site_forked): the frame-pointer chain there. */
static MT_INLINE int mt_site_unw(uintptr_t *pcs, int ask)
{
    if (MT_UNLIKELY(mt_site_forked))
        return mt_site_fp_walk(pcs, ask);
    /* libunwind checks addresses by writing them to a pipe: agent.h */
    int cancel = mt_cancel_off(), n;
    if (MT_LIKELY(atomic_load_explicit(&mt_code_gen, memory_order_relaxed) == 0))
        n = unw_backtrace((void **)pcs, ask);
    else
        n = mt_site_unw_steps(pcs, ask + 1); /* its own frame comes first */
    mt_cancel_restore(cancel);
    return n;
}

/* A walk of at most `ask` frames starting at the caller of the function
 * whose frame is `frame` (the agent is built with frame pointers:
 * frame[0] is the caller's rbp, frame[1] the return address). */
static MT_INLINE int mt_site_walk(uintptr_t *pcs, int ask, int walker, const uintptr_t *frame)
{
    int n = -1;
    if (MT_UNLIKELY(walker != MT_WALK_CFI) && !mt_site_on_stack((uintptr_t)frame))
        walker = MT_WALK_CFI;
    if (MT_LIKELY(walker == MT_WALK_CFI))
        n = mt_cfi_walk(frame[1], (uintptr_t)(frame + 2), frame[0], pcs, ask);
    else if (walker == MT_WALK_FP)
        n = mt_site_fp_walk(pcs, ask);
    return n >= 0 ? n : mt_site_unw(pcs, ask);
}

/* `agent_frames`: how many of the agent's frames the walk will meet
 * before the program's (1 when this is inlined into the entry point, plus
 * one for the thread-start trampoline); more is handled, at the cost of a
 * second walk. A capture nested in another (a signal handler's realloc
 * interrupting the agent) is not walked: its block goes to site 0. */
static MT_INLINE uint32_t mt_site_here(unsigned cat, int agent_frames)
{
    if (MT_UNLIKELY(mt_t.in_agent))
        return 0;
    uintptr_t pcs[MT_DEPTH_MAX + 32];
    mt_agent_enter(); /* libunwind may allocate: not through us */
    int ask = mt_site_opt.depth + agent_frames;
    uint32_t id;
    const uintptr_t *frame = __builtin_frame_address(0);
    if (MT_LIKELY(mt_site_walker == MT_WALK_CFI) &&
        MT_LIKELY((id = mt_cfi_site(cat, ask, frame, pcs)) != MT_CFI_NO_WALK)) {
        mt_agent_leave();
        return id;
    }
    int n =
        mt_site_walker == MT_WALK_CFI ? mt_site_unw(pcs, ask) : mt_site_walk(pcs, ask, mt_site_walker, frame);
    id = mt_site_from_stack(cat, pcs, n, ask, NULL);
    mt_agent_leave();
    return id;
}

/* The tag (block.h) of a new block taken at call site `site` under
 * recording `rec` (record.h): the site itself when recording detail, a
 * new allocation id when recording a trace (its events carry the site as
 * their stack). */
static MT_INLINE uint32_t mt_tag_new(int rec, uint32_t site)
{
    return MT_UNLIKELY(rec == MT_REC_TRACE) ? mt_trace_new_id() : site;
}

#endif

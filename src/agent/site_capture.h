/* site_capture.h — the stack capture inlined into the malloc hooks, so
 * the walk starts in the entry point itself: only its own frame has to be
 * unwound and dropped, not those of helper functions (each frame costs
 * libunwind a few nanoseconds). Included by hooks.c only: it brings in
 * libunwind's header. */
#ifndef MT_AGENT_SITE_CAPTURE_H
#define MT_AGENT_SITE_CAPTURE_H

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "agent/site.h"

/* `agent_frames`: how many of the agent's frames the walk will meet
 * before the program's (1 when this is inlined into the entry point);
 * more is handled, at the cost of a second walk. */
static MT_INLINE uint32_t mt_site_here(unsigned cat, int agent_frames)
{
    uintptr_t pcs[MT_DEPTH_MAX + 32];
    mt_t.in_agent++; /* libunwind may allocate: not through us */
    int ask = mt_site_opt.depth + agent_frames, n = -1;
    if (MT_LIKELY(mt_site_walker == MT_WALK_CFI)) {
        /* From this function's caller: the agent is built with frame
         * pointers, so its frame gives the caller's pc, sp and rbp. (One
         * frame more than needed, for the thread-start trampoline.) */
        const uintptr_t *frame = __builtin_frame_address(0);
        n = mt_cfi_walk(frame[1], (uintptr_t)(frame + 2), frame[0], pcs, ask);
    }
    if (n < 0)
        n = mt_site_walker == MT_WALK_FP ? mt_site_fp_walk(pcs, ask) : unw_backtrace((void **)pcs, ask);
    uint32_t id = mt_site_from_stack(cat, pcs, n, ask);
    mt_t.in_agent--;
    return id;
}

#endif

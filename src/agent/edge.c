/* edge.c — the set of live edge blocks (see edge.h for the design). */
#include "agent/edge.h"
#include "agent/counters.h"

#include <stddef.h>

_Atomic uintptr_t *mt_edge_tab;

void mt_edge_init(void)
{
    if (mt_edge_tab)
        return;
    size_t bytes = ((size_t)1 << MT_EDGE_LINE_BITS) * MT_EDGE_SLOTS * sizeof(uintptr_t);
    /* Counted whole as the agent's own memory (reserved); its pages
     * become resident only as edge blocks land on them. */
    mt_edge_tab = mt_os_alloc(bytes);
}

void mt_edge_add(const void *p)
{
    if (!mt_edge_tab)
        return;
    _Atomic uintptr_t *line = mt_edge_line((uintptr_t)p);
    for (int i = 0; i < MT_EDGE_SLOTS; i++) {
        uintptr_t v = atomic_load_explicit(&line[i], memory_order_relaxed);
        /* release: a thread that finds p finds the block's header written
         * (fill_header adds p last) */
        while ((v == 0 || v == MT_EDGE_TOMB) &&
               !atomic_compare_exchange_weak_explicit(&line[i], &v, (uintptr_t)p, memory_order_release,
                                                      memory_order_relaxed)) {
        }
        if (v == 0 || v == MT_EDGE_TOMB)
            return;
    }
    /* line full: this block's free probes */
}

void mt_edge_remove(const void *p)
{
    if (!mt_edge_tab)
        return;
    _Atomic uintptr_t *line = mt_edge_line((uintptr_t)p);
    for (int i = 0; i < MT_EDGE_SLOTS; i++)
        if (atomic_load_explicit(&line[i], memory_order_relaxed) == (uintptr_t)p) {
            atomic_store_explicit(&line[i], MT_EDGE_TOMB, memory_order_relaxed);
            return;
        }
}

/* edge.h — live blocks of ours whose pointer free cannot read under
 * without a system call.
 *
 * A pointer at page offset 0 or 32 (hooks.c's needs_probe) may be a block
 * whose page is gone: glibc returns mapped chunks at offset 16 (ours at
 * 32), unmaps them on free, and a second free would fault reading the
 * header. So free asks the kernel first (mincore, process_vm_readv). On a
 * heap, 2 pointers in 256 land there by chance, and those probes were the
 * bulk of summary mode's cost on mixed workloads (mbench: 67,000 system
 * calls). This set remembers the blocks the agent handed out at those
 * offsets while they are live: a pointer in it is a live block of ours,
 * mapped, and free reads its header at once.
 *
 * The set only ever spares a probe: a block it could not take (its line
 * full, or no table) is probed as before. Lines of 8 slots, each slot
 * empty, a pointer, or a tombstone; adds claim an empty or tombstoned
 * slot with a compare-and-swap, removals store a tombstone. An entry goes
 * before its block goes back to the allocator, so a pointer in the set is
 * never a freed block. No locks; a signal handler may add or remove in
 * the middle of another call's add. */
#ifndef MT_AGENT_EDGE_H
#define MT_AGENT_EDGE_H

#include <stdatomic.h>
#include <stdint.h>

#include "agent/agent.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

#define MT_EDGE_LINE_BITS 12 /* 4096 lines of 8: 256 KiB, 32,768 blocks */
#define MT_EDGE_SLOTS 8
#define MT_EDGE_TOMB ((uintptr_t)1)

extern _Atomic uintptr_t *mt_edge_tab; /* NULL: no table, every edge pointer is probed */

/* Maps the table (start-up, before tracking begins). */
void mt_edge_init(void);

/* Whether free must probe before it reads the header under p: page offset
 * 0 (the header is on the page before) or 32 (a mapped chunk's place). */
static inline int mt_edge_pointer(uintptr_t a)
{
    return (a & (4095 & ~32)) == 0;
}

static inline _Atomic uintptr_t *mt_edge_line(uintptr_t a)
{
    uint64_t h = ((uint64_t)a >> 4) * 0x9E3779B97F4A7C15ull;
    return mt_edge_tab + (h >> (64 - MT_EDGE_LINE_BITS)) * MT_EDGE_SLOTS;
}

/* 1 if p is a live block of ours (mt_edge_add'ed, not removed). */
static inline int mt_edge_has(const void *p)
{
    if (MT_UNLIKELY(mt_edge_tab == NULL))
        return 0;
    _Atomic uintptr_t *line = mt_edge_line((uintptr_t)p);
    for (int i = 0; i < MT_EDGE_SLOTS; i++)
        if (atomic_load_explicit(&line[i], memory_order_acquire) == (uintptr_t)p)
            return 1;
    return 0;
}

/* A new block of ours at p (an edge pointer). */
void mt_edge_add(const void *p);
/* p's block is about to go back to the allocator (an edge pointer). */
void mt_edge_remove(const void *p);

#pragma GCC visibility pop
#endif

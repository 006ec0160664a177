/* refset_events.h — the agent's side of `memtrail refset record`
 * (src/refset/refset_agent.h, docs/refset-agent.md): with
 * option refset_fd=N, every mapping, release and allocator-mmapped
 * malloc block the program makes is one datagram on socket N, sent by the
 * hook that saw it, as it happens.
 *
 * Off (refset_fd unset, or the recorder gone) each hook pays one relaxed
 * load of mt_rs_on and a branch predicted not taken. On, an event is one
 * send(2) (blocking, MSG_NOSIGNAL) from the calling thread: no malloc, no
 * lock of the agent's, async-signal-safe. Any failed send (EPIPE: the
 * recorder exited; EBADF/ENOTSOCK: the program closed the descriptor)
 * turns the feature off for this process, and the program goes on. */
#ifndef MT_AGENT_REFSET_EVENTS_H
#define MT_AGENT_REFSET_EVENTS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "refset/refset_agent.h"
#include "refset/refset_event.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

/* 1 while messages go out. */
extern _Atomic int mt_rs_on;
/* Option refset_fd (-1: off). */
extern int mt_rs_fd_opt;

static MT_INLINE int mt_rs_active(void)
{
    return MT_UNLIKELY(atomic_load_explicit(&mt_rs_on, memory_order_relaxed));
}

/* init.c, with the real allocator's functions: finds the malloc_trim the
 * agent's forwards to. */
void mt_rs_resolve(void);
/* init.c, at start-up once tracking is decided (and again in the image an
 * exec starts, which reads the options anew): checks that refset_fd is a
 * SOCK_SEQPACKET socket (else one line on stderr, and off), then sends
 * HELLO. */
void mt_rs_start(void);

/* The calling program's stack (the agent's frames left out) into m's
 * frames, up to option depth (at most MT_RS_AGENT_MAX_FRAMES). Taken
 * before the call it belongs to, outside the VM table's lock. */
void mt_rs_capture(mt_rs_agent_msg *m);
/* Sends m (frames as captured; m->nframes 0 for none) as `kind` of
 * [addr, addr + len) in category `cat`. errno is kept. */
void mt_rs_send(mt_rs_agent_msg *m, unsigned kind, unsigned cat, uintptr_t addr, uint64_t len);
/* The same, stamped `time` (CLOCK_MONOTONIC; 0: now). */
void mt_rs_send_at(mt_rs_agent_msg *m, unsigned kind, unsigned cat, uintptr_t addr, uint64_t len,
                   uint64_t time);
/* A message without frames (UNMAP, DISCARD, TRIM). */
void mt_rs_send_range(unsigned kind, uintptr_t addr, uint64_t len);

/* The refset category of a mapping the VM table keeps with category
 * vm_cat and flags vm_flags (vm.h): another allocator's mappings are Heap,
 * file mappings MapFile (the recorder tells images apart), shared
 * anonymous ones PFMappedSection, the rest VirtualAlloc. */
unsigned mt_rs_map_category(unsigned vm_cat, unsigned vm_flags);

/* Blocks the allocator mmapped on its own (glibc only; `real` is the
 * allocator's pointer, under the agent's header): *start and *len of the
 * mapping, 1; or 0 (not such a block, or not glibc). */
int mt_rs_block_of(const void *real, uintptr_t *start, uint64_t *len);
/* A new block at real: BLOCK with the malloc's stack, if mmapped. */
void mt_rs_block_new(const void *real);
/* Before the real free of real: BLOCK_FREE, if mmapped. */
void mt_rs_block_free(const void *real);
/* After a realloc: the old block (its mapping [ostart, ostart+olen),
 * olen 0 if it had none) is now at real: BLOCK_FREE and BLOCK for what
 * changed (a mapping resized in place: its tail). */
void mt_rs_block_moved(uintptr_t ostart, uint64_t olen, const void *real, uint64_t before);

#pragma GCC visibility pop
#endif

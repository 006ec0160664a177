/* refset_agent.h — what the agent tells `memtrail refset record` about the
 * program's memory, as it happens (docs/refset-agent.md).
 *
 * The recorder starts the program with the agent preloaded and
 * MEMTRAIL_OPTIONS=...:refset_fd=N, N one end of a
 * socketpair(AF_UNIX, SOCK_SEQPACKET): the agent sends one mt_rs_agent_msg
 * per datagram with send(..., MSG_NOSIGNAL) (blocking) from
 * its hooks, so a message is never split or merged, a dead recorder costs
 * the program an EPIPE and not a SIGPIPE, and a slow recorder holds the
 * program (exactness first). The fd survives fork and exec (no CLOEXEC);
 * every message carries the sender's pid. No malloc, no locks: one send(2)
 * per event, from the thread that made the call.
 *
 * Releases the agent sees are exact (the page left the process at that
 * call); the recorder's pagemap scans catch the rest within one interval. */
#ifndef MT_REFSET_AGENT_H
#define MT_REFSET_AGENT_H

#include <stddef.h>
#include <stdint.h>

#define MT_RS_AGENT_MAGIC 0x4d525341u /* "ASRM": checked by the recorder */
#define MT_RS_AGENT_MAX_FRAMES 32

enum mt_rs_agent_kind {
    MT_RS_AG_HELLO = 1,      /* the agent started in pid (after exec too): nothing else */
    MT_RS_AG_MAP = 2,        /* [addr, addr+len) was mapped by the program (mmap, mremap's new range, brk/sbrk
                                growth): frames = the allocation stack; category = enum mt_rs_category
                                (VirtualAlloc, PFMappedSection, MapFile, Heap for brk) */
    MT_RS_AG_UNMAP = 3,      /* [addr, addr+len) was unmapped (munmap, mremap's old range, brk/sbrk shrink) */
    MT_RS_AG_DISCARD = 4,    /* madvise(MADV_DONTNEED|MADV_FREE|MADV_REMOVE) of [addr, addr+len) returned 0 */
    MT_RS_AG_BLOCK = 5,      /* malloc returned a block of len bytes at addr that the allocator mmapped on its
                                own (len >= the allocator's mmap threshold): Heap, frames = the malloc stack */
    MT_RS_AG_BLOCK_FREE = 6, /* that block was freed (its pages went back to the kernel) */
    MT_RS_AG_TRIM = 7,       /* malloc_trim() returned: the recorder rescans pid now */
    MT_RS_AG_STACK = 8,      /* [addr, addr+len) is a thread's stack (pthread_create), UserStack */
};

typedef struct mt_rs_agent_msg {
    uint32_t magic;   /* MT_RS_AGENT_MAGIC */
    uint16_t kind;    /* enum mt_rs_agent_kind */
    uint8_t category; /* MAP: enum mt_rs_category */
    uint8_t nframes;  /* frames[0..nframes): return addresses, innermost first */
    uint32_t pid, tid;
    uint64_t time_ns; /* CLOCK_MONOTONIC */
    uint64_t addr, len;
    uint64_t frames[MT_RS_AGENT_MAX_FRAMES];
} mt_rs_agent_msg;

/* The bytes to send: the header and the frames in use. */
#define MT_RS_AGENT_MSG_SIZE(nf) (offsetof(mt_rs_agent_msg, frames) + (size_t)(nf) * sizeof(uint64_t))

#endif

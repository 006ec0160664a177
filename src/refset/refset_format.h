/* refset_format.h — what the recording's writer (refset_write.c) and
 * reader (refset_read.c) share: the layout constants of
 * docs/refset-format.md and the per-chunk coding state that both sides
 * step through record by record, so a delta one side writes is the delta
 * the other undoes. Chunk headers, varints, zigzag and CRC32C are the
 * trace format's (trace/trace_util.h). */
#ifndef MT_REFSET_FORMAT_H
#define MT_REFSET_FORMAT_H

#include <stdint.h>
#include <string.h>

#include "refset/refset_event.h"
#include "trace/trace_util.h"

#define RS_MAGIC "MTREFSET"
#define RS_VERSION 1u
#define RS_HEADER_SIZE 64u
#define RS_TRAILER_MAGIC "MTRSEND\0"
#define RS_TRAILER_SIZE 24u

/* Chunk kinds (the numbers of the trace format's kinds of the same role). */
enum { RS_CHUNK_EVENTS = 2, RS_CHUNK_END = 3, RS_CHUNK_INDEX = 4 };

/* An EVENTS chunk goes out once its body reaches this many bytes. */
#define RS_CHUNK_TARGET (64u << 10)
/* The zstd level of chunk payloads. */
#define RS_ZSTD_LEVEL 3
/* npages of a REF or RELEASE: at least 1, at most this (4 PiB of 4 KiB pages). */
#define RS_MAX_NPAGES (1ull << 40)
/* A REF's run: the recorder's are at most 512 pages (one scan read); a
 * reader takes up to 1 GiB of 4 KiB pages, so no few bytes of a file can
 * stand for more references than a report can hold. */
#define RS_MAX_REF_NPAGES (1ull << 18)
/* Statistics in an END chunk. */
#define RS_MAX_STATS 4096u

/* A record's first byte: the type in the low 4 bits, type-specific bits
 * in the high 4 (zero for the types that have none). */
#define RS_TYPE_MASK 0x0fu
/* REF bits. */
#define RS_REF_SAME_THREAD 0x10u /* pid and tid are the previous REF's */
#define RS_REF_NEXT_ADDR 0x20u   /* addr is the guess (rs_addr_guess) */
#define RS_REF_ONE_PAGE 0x40u    /* npages is 1 */
#define RS_REF_SAME_ATTRS 0x80u  /* category ... dev as the previous REF; pgoff predicted or 0 */
/* RELEASE bits. */
#define RS_REL_SAME_PID 0x10u  /* pid is the previous REF/RELEASE's */
#define RS_REL_NEXT_ADDR 0x20u /* as RS_REF_NEXT_ADDR */
#define RS_REL_ONE_PAGE 0x40u  /* npages is 1 */

/* A REF without SAME_ATTRS: a byte saying which attributes follow (the
 * others are the previous REF's). */
#define RS_ATTR_CATEGORY 0x01u /* a byte */
#define RS_ATTR_FLAGS 0x02u    /* a byte */
#define RS_ATTR_STACK 0x04u    /* varint */
#define RS_ATTR_ALLOC 0x08u    /* varint: alloc_stack */
#define RS_ATTR_INO 0x10u      /* varint */
#define RS_ATTR_DEV 0x20u      /* varint */
#define RS_ATTR_PGOFF 0x40u    /* varint: pgoff as is, not predicted */
#define RS_ATTR_KNOWN 0x7fu

/* Threads whose next REF address the coder remembers (a direct-mapped
 * cache by tid): interleaved threads each walking their own pages keep
 * NEXT_ADDR. */
#define RS_THREAD_SLOTS 64u
typedef struct rs_thread_slot {
    uint32_t pid, tid;
    uint64_t addr_end; /* where the thread's previous REF ended */
    int used;
} rs_thread_slot;

/* The coding state of one EVENTS chunk (reset at each chunk: chunks
 * decode on their own). */
typedef struct rs_coder {
    uint64_t time;            /* the previous timed record's (the chunk's first time at the start) */
    uint32_t pid, tid;        /* the previous REF's (RELEASE: pid) */
    uint64_t addr_end;        /* where the previous REF/RELEASE's pages end */
    uint64_t pfn_next;        /* the previous REF's pfn + npages (0: unknown) */
    uint64_t ref_addr, pgoff; /* the previous REF's addr and pgoff: pgoff predictions */
    uint64_t ino;
    uint32_t dev, stack, alloc_stack;
    uint8_t category, flags;
    rs_thread_slot threads[RS_THREAD_SLOTS];
} rs_coder;

static inline void rs_coder_reset(rs_coder *c, uint64_t first_time)
{
    memset(c, 0, sizeof *c);
    c->time = first_time;
}

/* The pgoff a file REF is predicted to have: the previous REF's, moved by
 * as much as the address moved (the next page of the same mapping). */
static inline uint64_t rs_pgoff_guess(const rs_coder *c, uint64_t addr)
{
    return c->pgoff + (addr - c->ref_addr);
}

/* The address a REF of pid/tid is guessed to start at: where that
 * thread's previous REF of the chunk ended, else where the previous
 * REF/RELEASE ended. */
static inline uint64_t rs_addr_guess(const rs_coder *c, uint32_t pid, uint32_t tid)
{
    const rs_thread_slot *t = &c->threads[tid % RS_THREAD_SLOTS];
    return t->used && t->tid == tid && t->pid == pid ? t->addr_end : c->addr_end;
}

/* After a REF (both sides). */
static inline void rs_coder_ref(rs_coder *c, const mt_rs_event *ev, uint32_t page_size)
{
    c->pid = ev->pid;
    c->tid = ev->tid;
    c->addr_end = ev->addr + ev->npages * page_size;
    c->threads[ev->tid % RS_THREAD_SLOTS] = (rs_thread_slot){ev->pid, ev->tid, c->addr_end, 1};
    c->pfn_next = ev->pfn ? ev->pfn + ev->npages : 0;
    c->ref_addr = ev->addr;
    c->pgoff = ev->pgoff;
    c->ino = ev->ino;
    c->dev = ev->dev;
    c->stack = ev->stack;
    c->alloc_stack = ev->alloc_stack;
    c->category = ev->category;
    c->flags = ev->flags;
}

/* After a RELEASE (both sides). */
static inline void rs_coder_release(rs_coder *c, const mt_rs_event *ev, uint32_t page_size)
{
    c->pid = ev->pid;
    c->addr_end = ev->addr + ev->npages * page_size;
}

/* Whether a record of this type has a time (STACK, MODULE and META do not). */
static inline int rs_type_timed(unsigned type)
{
    return type != RS_EV_STACK && type != RS_EV_MODULE && type != RS_EV_META;
}

#endif

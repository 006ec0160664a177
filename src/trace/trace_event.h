/* trace_event.h — one event of a trace, as the writer (trace_write.h)
 * takes it and the reader (trace_read.h) gives it back: the one thing
 * both sides share. */
#ifndef MT_TRACE_EVENT_H
#define MT_TRACE_EVENT_H

#include <stdint.h>

/* Event types in a trace (the xe event types of the same names). */
enum mt_trace_type {
    MT_TRACE_ALLOC = 1,   /* id, size, stack, category */
    MT_TRACE_FREE = 2,    /* id (0: a block allocated before the trace) */
    MT_TRACE_REALLOC = 3, /* old_id -> id, size (the new size), stack, category */
    MT_TRACE_MMAP = 4,    /* address, size, category */
    MT_TRACE_MUNMAP = 5,  /* address, size */
};

/* One event as the writer takes it and the reader gives it back. */
typedef struct mt_trace_event {
    uint8_t type; /* enum mt_trace_type */
    uint8_t category;
    uint32_t thread;  /* writer: the kernel tid; reader: the tid too */
    uint64_t time_ns; /* writer: CLOCK_MONOTONIC; reader: ns since the header's start_ns */
    uint64_t size;
    uint32_t id;      /* the allocation's id (the agent numbers allocations, wrapping at 2^32) */
    uint32_t old_id;  /* realloc: the id of the block it replaced */
    uint32_t stack;   /* alloc/realloc: the stack's id (0: none) */
    uint64_t address; /* mmap/munmap */
} mt_trace_event;

#endif

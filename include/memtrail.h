/* memtrail.h — the public C API of memtrail, a native memory tracker.
 *
 * Link with -lmemtrail-stub (no-op versions of every function here) and run
 * under `memtrail run` (or LD_PRELOAD=libmemtrail.so): the agent's real
 * definitions take precedence over the stub's, so instrumented programs
 * run unchanged with or without the agent.
 *
 * All functions are thread-safe and never allocate through malloc. Event
 * sessions have their own header, <memtrail_sessions.h>; a custom
 * allocator's wrappers that need nothing linked, <memtrail_alloc.h>. */
#ifndef MEMTRAIL_H
#define MEMTRAIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_VERSION "0.1.0"

/* Longest category name, without the terminating NUL. Names use
 * [A-Za-z0-9_.:/+-] only, so they survive every report format. */
#define MT_CATEGORY_NAME_MAX 47
/* How many user categories a process may define. */
#define MT_MAX_USER_CATEGORIES 60
/* How deep the per-thread tag stack goes. */
#define MT_TAG_DEPTH 32

/* Allocations made by the calling thread after this call are counted in
 * category `name` (created on first use) until the matching mt_tag_pop().
 * "malloc" is the default category; the other built-in names (memtrail,
 * heap, stacks, mmap, files, code, other) cannot be tags.
 * Returns 0, or -EINVAL (bad or built-in name), -ENOSPC (too many categories),
 * -EOVERFLOW (tag stack full; the tag is not pushed), -ENOSYS (no agent). */
int mt_tag_push(const char *name);

/* Undo the last successful mt_tag_push() of this thread. Returns 0, or
 * -ENOENT when the stack is empty. */
int mt_tag_pop(void);

/* Write the summary report now: to `path` (%p expands to the pid, %e to the
 * program name, %% to %) or, when path is NULL, to the configured output;
 * in trace mode, where that output is the trace's, beside the trace instead
 * (OUTPUT.mtr, e.g. memtrail.4242.mtt.mtr, as a crash's report), never over
 * it. Returns 0 or a negative errno code: -EINVAL for a '%' in path that
 * is not %p, %e or %% (nothing is written; a line on stderr says so). */
int mt_report_write(const char *path);

/* 1 when the agent is loaded and tracking, 0 otherwise. */
int mt_is_active(void);

/* ---- a program's own allocator ---------------------------------------------
 * A program that serves memory from its own pools or arenas reports each
 * block it hands out and takes back, and memtrail counts them as it counts
 * malloc's: in the category of the calling thread's current tag, or
 * "custom" when there is none, in every mode (detail gives their stacks,
 * trace their events). Pointers are keys only: they are never read. Up to
 * 1048576 reported blocks can be live at once. Without the agent these do
 * nothing. <memtrail_alloc.h> has wrappers that need no library at link time.
 *   mt_alloc_report(ptr, size)         ptr now holds a block of size bytes
 *   mt_free_report(ptr)                the block at ptr is given back
 *   mt_realloc_report(old, ptr, size)  the block at old is now at ptr (maybe
 *                                      the same) with size bytes; old NULL is
 *                                      an alloc, ptr NULL a free */
void mt_alloc_report(const void *ptr, size_t size);
void mt_free_report(const void *ptr);
void mt_realloc_report(const void *old, const void *ptr, size_t size);

/* ---- memory info: a consistent snapshot per kind of memory event ------------
 * The agent raises an event when memory changes in a way worth knowing:
 *   MT_EVENT_PEAK      live bytes passed the previous high-water mark by more
 *                      than max(peak_step, 1% of that mark) (option
 *                      peak_step, default 1MB)
 *   MT_EVENT_GROW      memory was taken from the OS: the heap's break grew, the
 *                      allocator mapped a block or an arena, the program mapped
 *                      anonymous memory
 *   MT_EVENT_TRIM      memory went back to the OS: the break shrank, a mapping
 *                      or an allocator-mapped block was unmapped, madvise
 *                      discarded pages, malloc_trim gave some back
 *   MT_EVENT_LIMIT     live bytes rose above option limit=SIZE, or the cgroup's
 *                      usage above its memory.high (or 90% of memory.max)
 *   MT_EVENT_PERIODIC  every info_interval milliseconds (option; off by default)
 *   MT_EVENT_ANY       whichever of those came last
 * mt_memory_info(kind, &info) copies the snapshot taken at the last event
 * of that kind. Every field of one snapshot belongs to the same event, even
 * while other threads raise new ones (a sequence lock: readers never block
 * the program, never allocate, and retry if an event was being published).
 * index is 0 before any event of the kind, then 1 for the first, 2 for the
 * second, ..., counted per kind (ANY counts them all); mt_event_count(kind)
 * is the same number, read without copying anything, so a request can
 * compare it before and after. */
#define MT_EVENT_ANY 0
#define MT_EVENT_PEAK 1
#define MT_EVENT_GROW 2
#define MT_EVENT_TRIM 3
#define MT_EVENT_LIMIT 4
#define MT_EVENT_PERIODIC 5
#define MT_EVENT_KINDS 6
/* Categories a snapshot carries live bytes for (every category id). */
#define MT_INFO_CATEGORIES 72

struct mt_memory_info {
    uint64_t index;       /* 1, 2, ... per kind; 0: no event of this kind yet */
    int kind;             /* MT_EVENT_PEAK ... MT_EVENT_PERIODIC (never ANY) */
    uint64_t time_ns;     /* when: CLOCK_REALTIME, ns since the epoch */
    uint64_t live_before; /* live bytes of the program's allocations: the peak since the previous event */
    uint64_t live_after;  /* ... and right after this one */
    uint64_t run_time_ns; /* since the agent started (CLOCK_MONOTONIC) */
    uint64_t fragmentation_before;  /* free bytes the allocator holds (mallinfo2's fordblks): the
                                       previous sample (the last event's), or right before a malloc_trim */
    uint64_t fragmentation_after;   /* ... right after this event */
    uint64_t rss_bytes;             /* resident set (/proc/self/statm) */
    uint64_t committed_bytes;       /* writable private address space (statm's data: VmData + VmStk) */
    uint64_t memory_load_bytes;     /* cgroup v2 memory.current when the cgroup has a memory.max
                                       limit, else MemTotal - MemAvailable */
    uint64_t total_available_bytes; /* that memory.max, else MemTotal */
    uint64_t alloc_time_ns;         /* time inside allocator calls: those made inside spans
                                       (every call with option alloc_timing=all) */
    uint64_t map_time_ns;           /* time inside mmap/munmap/mremap/brk/sbrk/madvise/malloc_trim calls */
    double memory_time_percent;     /* (alloc_time_ns + map_time_ns) / run_time_ns, in percent */
    uint64_t minor_faults, major_faults;             /* the process's page faults (getrusage) */
    uint64_t overhead_bytes;                         /* the agent's own: headers, padding, its mappings */
    uint64_t event_ns;                               /* how long taking this snapshot took */
    int category_count;                              /* entries of category_live_bytes in use */
    int64_t category_live_bytes[MT_INFO_CATEGORIES]; /* by category id; mt_category_name(id) */
};

/* Fills *out with the last snapshot of `kind`. Returns 0 (index 0 and
 * zeros when no such event happened yet), -EINVAL (unknown kind or NULL
 * out), -ENOSYS (no agent). */
int mt_memory_info(int kind, struct mt_memory_info *out);
/* Events of `kind` so far (the index of its last snapshot); 0 for an
 * unknown kind or without the agent. */
uint64_t mt_event_count(int kind);
/* The name of category `id` (0 is "malloc"), or NULL when there is no such
 * category (or no agent). The string lives as long as the process. */
const char *mt_category_name(int id);

/* ---- request spans ----------------------------------------------------------
 * mt_span_begin(name) ... mt_span_end() around a request (nestable per
 * thread, up to 16 deep; each level is recorded under its own name, up to
 * 64 names of up to MT_SPAN_NAME_MAX bytes). Inside a span the agent times
 * this thread's allocator and mapping calls and counts the memory events
 * they raised; at the end the span's duration, its memory time and its
 * events go into a latency histogram per name, which `memtrail info` turns
 * into the tail-latency report. Returns 0, -EINVAL (NULL or empty name, or
 * one longer than MT_SPAN_NAME_MAX bytes: refused, never cut), -EOVERFLOW
 * (too deep; not pushed), -ENOSPC (too many names; not pushed), -ENOENT
 * (end without a begin: counted and reported), -ENOSYS (no agent). A begin
 * that failed with -EINVAL, -EOVERFLOW or -ENOSPC is not recorded, but its
 * mt_span_end (which returns 0) is still its own: it never ends the span
 * around it. */
#define MT_SPAN_NAME_MAX 63 /* bytes, without the terminating NUL */
int mt_span_begin(const char *name);
int mt_span_end(void);

#ifdef __cplusplus
}
#endif
#endif /* MEMTRAIL_H */

/* meminfo.h — memory events and their snapshots (meminfo.c: mt_memory_info,
 * mt_event_count), and request spans (span.c: mt_span_begin/end), as the
 * rest of the agent sees them. docs/info.md says what they mean; the lines
 * they add to the report are in docs/report-format.md "Memory info and
 * request spans".
 *
 * Time inside allocator and mapping calls is measured in CPU ticks (rdtsc:
 * a few ns, no system call) and turned into ns with a ratio taken against
 * CLOCK_MONOTONIC over the whole run (mt_ticks_to_ns). */
#ifndef MT_AGENT_MEMINFO_H
#define MT_AGENT_MEMINFO_H

#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "common/out.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)
static inline uint64_t mt_ticks(void)
{
    return __rdtsc();
}
#else
static inline uint64_t mt_ticks(void)
{
    return mt_clock_ns(CLOCK_MONOTONIC);
}
#endif

typedef struct mt_info_options {
    uint64_t peak_step; /* PEAK when live passes the last mark by max(this, 1% of the mark) */
    uint64_t limit;     /* LIMIT above this many live bytes; 0 = none */
    int interval_ms;    /* PERIODIC; 0 = none */
    int alloc_timing;   /* MT_ALLOC_TIMING_* */
    int span_faults;    /* spans read getrusage(RUSAGE_THREAD) */
} mt_info_options;
extern mt_info_options mt_info_opt;

/* ---- meminfo.c ---------------------------------------------------------- */

/* At start-up, once tracking (after the counters): notes the tick/clock
 * origin, opens the cgroup files, starts the PERIODIC thread if asked, and
 * with alloc_timing=all makes every thread's calls timed. */
void mt_info_init(void);
/* From the agent's constructor, where threads may be started: the
 * PERIODIC thread, when info_interval is set. */
void mt_info_start(void);
/* In a fork child: the writer lock and the periodic thread are gone. */
void mt_info_after_fork_child(int start); /* start: its PERIODIC thread too */

/* ns for a number of ticks (the ratio measured since start-up). */
uint64_t mt_ticks_to_ns(uint64_t ticks);
/* Time spent in memory management, for the process's totals. */
void mt_info_add_alloc_ticks(uint64_t ticks);
void mt_info_add_map_ticks(uint64_t ticks);

/* An event of `kind` (MT_EVENT_PEAK..PERIODIC) happened on this thread:
 * counts it (mt_event_count, mt_t.events) and publishes its snapshot.
 * `may_sample`: the caller holds no allocator lock, so the allocator's
 * statistics (mallinfo2) may be read for the fragmentation fields. Never
 * allocates; never from a signal handler. */
void mt_info_event(int kind, int may_sample);

/* Event sources outside meminfo.c call these cheap checks. */
/* counters.c: the total's live bytes reached `live` (a new peak, or a
 * flush). A new peak calls it only above mt_info_next_mark (the next PEAK
 * mark, or the limit while armed): one compare where the peak rises. */
extern _Atomic int64_t mt_info_next_mark;
void mt_info_live_check(int64_t live);
/* hooks.c: only blocks of at least this size are asked about (one size
 * compare on the hot path): below it glibc never maps a block for itself
 * (allocator.h's mt_glibc_is_mapped tells which it mapped). */
#define MT_INFO_MAPPED_MIN (128 * 1024)
/* hooks.c: a block of `size` bytes the allocator mapped for itself (glibc's
 * IS_MMAPPED chunk) was handed out (grow=1) or given back (grow=0). */
void mt_info_block_mapped(uint64_t size, int grow);
/* hooks.c: a realloc from `old` bytes (was_mapped: in a mapping of its
 * own) to `size` bytes (is_mapped), as GROW or TRIM when a mapping came,
 * went, or changed size. */
void mt_info_block_resized(int was_mapped, int is_mapped, uint64_t old, uint64_t size);
/* refset_events.c: the real malloc_trim (NULL: none), with the
 * fragmentation sampled before and after it, and a TRIM when it gave
 * memory back. */
int mt_info_malloc_trim(int (*real)(size_t), size_t pad);

/* The memory_time and info lines of the report. Only reads: safe in a
 * signal handler and while the program runs. As every writer of report
 * lines in report_write.c, each line starts with '\n' (the line before is
 * left open) and the last is left open. */
void mt_info_write(mt_out *o);

/* ---- span.c ------------------------------------------------------------- */

/* The span lines of the report (span_name, span, span_memory, spans). Only
 * reads: safe in a signal handler. Lines start with '\n', as above. */
void mt_span_write(mt_out *o);
/* In a fork child: the child's threads other than the caller are gone. */
void mt_span_after_fork_child(void);

/* Timing of this thread's allocator and mapping calls: the hooks wrap the
 * real work in these when mt_t.timed (inside a span, or alloc_timing=all). */
static inline uint64_t mt_timed_begin(void)
{
    return mt_ticks();
}
static inline void mt_timed_end(uint64_t t0)
{
    mt_t.mem_ticks += mt_ticks() - t0;
}

#pragma GCC visibility pop
#endif

/* trace.h — trace mode (mode=trace): every malloc-family call and mapping
 * change, with its thread, time, size and stack, written to a trace file
 * (docs/trace-format.md) through an agent event session.
 *
 * The hooks take stacks as detail mode does (site ids name stacks) and
 * number allocations: the block header carries the allocation's id where
 * detail mode keeps its site, so a free names its allocation without a
 * lookup. The session's buffers are per CPU, so threads on different CPUs
 * never share one; the session is time-ordered (xe_config.time_order), and
 * the trace's encoder merges the CPUs' events by time (trace_merge.h)
 * before the trace writer (src/trace) packs them, off the program's
 * threads, on encoder threads of its own (trace_threads). */
#ifndef MT_AGENT_TRACE_H
#define MT_AGENT_TRACE_H

#include <stdint.h>

#include "agent/agent.h"
#include "common/out.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

/* Options (MEMTRAIL_OPTIONS trace_buffer=SIZE, trace_loss=drop|wait,
 * trace_threads=N, ...). */
typedef struct mt_trace_opts {
    uint64_t buffer;       /* the session's max_memory; default 1 MB */
    int wait;              /* no_event_loss instead of allow_single_event_loss */
    uint32_t time_unit_ns; /* event times are kept to this resolution; default 10000 (10 us) */
    int level;             /* zstd level; 0: the writer's default */
    uint32_t chunk_events; /* events per chunk; default 32 Ki (an encoder thread then holds ~2 MB) */
    uint32_t threads;      /* encoder threads; 0: min(CPUs, 4) */
    int run_pid; /* the process `memtrail run` started, or 0: the others say their line only on trouble */
} mt_trace_opts;
extern mt_trace_opts mt_trace_opt;

/* Allocation ids are handed to threads in blocks of MT_ID_BLOCK, so that
 * threads on different CPUs do not write one shared counter (a cache line
 * passed between cores on every allocation) and a free's check of its tag
 * (site.h's mt_tag_id) reads a line that rarely changes.
 * mt_trace_last_id is the last id reserved by any thread. A thread takes a
 * new block when its own is used up or when mt_trace_id_gen has changed
 * since it took it: the generation moves at a trace's start and in a fork's
 * prepare handler, so that the ids handed out after either are above the
 * last one reserved before it (mt_rec_first_id, fork_last_id). */
#define MT_ID_BLOCK 256u
extern _Atomic uint32_t mt_trace_last_id;
extern _Atomic uint32_t mt_trace_id_gen;
/* A thread's block is used up or stale: a new one (trace.c). */
uint32_t mt_trace_new_id_block(uint32_t gen);

/* A new allocation id: 1, 2, ... wrapping past 0 (which means "none");
 * unique across threads, increasing within a thread's block. */
static MT_INLINE uint32_t mt_trace_new_id(void)
{
    uint32_t gen = atomic_load_explicit(&mt_trace_id_gen, memory_order_acquire);
    /* The block is read before the id is taken: a signal handler's malloc
     * nested after the xadd may replace the block with the next one, which
     * starts at the very id this call drew past the old block's end (read
     * after, that id would pass the check and be handed out twice). */
    uint32_t base = *(volatile uint32_t *)&mt_t.id_base;
    uint32_t block_gen = *(volatile uint32_t *)&mt_t.id_gen;
    uint32_t id = 1;
    /* One instruction without a lock prefix: a signal handler's malloc
     * nested on this thread cannot take the same id (an interrupt comes
     * between instructions), and no other thread writes this word. The
     * block's fields are inputs, so they are read before it. */
    __asm__ volatile("xaddl %0, %1" : "+r"(id), "+m"(mt_t.id_next) : "r"(base), "r"(block_gen));
    if (MT_LIKELY(id - base < MT_ID_BLOCK && block_gen == gen && id != 0))
        return id;
    return mt_trace_new_id_block(gen);
}

/* At start-up (mt_init_slow), in trace mode, once stacks can be taken:
 * installs the trace encoder for event_file targets. 0, or -1 after
 * saying why (the program then runs with summary counters only). */
int mt_trace_init(void);
/* The program's allocation failed: recording stops, the agent's memory is
 * given back; 1 if the caller should retry (once per process). */
int mt_trace_out_of_memory(void);
/* Events fired after recording stopped (out of memory). */
extern _Atomic uint64_t mt_trace_unrecorded;
/* Recording stopped for want of memory: 0, 1 stopping, 2 stopped. */
extern _Atomic int mt_trace_stopped;
/* From the constructor: creates and starts the trace session. */
void mt_trace_start(void);
/* At exit, after the agent's sessions stopped: says what was written. */
void mt_trace_report(void);
/* Around an exec (exec.c): the file finished before, tracing resumed
 * (in a new file) if the exec failed. */
void mt_trace_before_exec(void);
void mt_trace_after_failed_exec(void);
/* From the crash handler (why: "signal NAME"), or a raw exit ("exit"):
 * the file finished with what was buffered. */
void mt_trace_crash(const char *why);
/* setid.c: before an id change, the trace file is opened (by delivering
 * what is buffered) while it still may be created. */
void mt_trace_before_setid(void);
/* Before a fork (the prepare handler): notes the fork's time, the parent's
 * pid and last allocation id, for the child's trace. */
void mt_trace_before_fork(void);
/* In a fork child, before the sessions' own fork handling: the child's
 * events go to a file of its own. */
void mt_trace_after_fork_child(void);

/* Recording on demand (record.c): starts a trace session writing to path
 * (absolute; NULL: the configured output, OUTPUT.N for the N+1th trace of
 * the process); 0, -EALREADY with one going (nothing said), or -errno
 * after an "error ..." line in reply. Stop: finishes the file, says
 * "ok trace: N events, ... in PATH" in reply, and retires the session
 * (xe_session_retire; its buffers given back when `drained`: no hook is
 * inside it any more). From a thread, never a signal handler. */
int mt_trace_record_start(const char *path, mt_out *reply);
/* The longest trace path the session's file target holds. */
#define MT_TRACE_PATH_MAX 440
void mt_trace_record_stop(mt_out *reply, int drained);
/* A trace session is open (recording, or left half-stopped by a fork in
 * the middle of a stop: the child's `stop` finishes it). */
int mt_trace_session_open(void);

#pragma GCC visibility pop
#endif

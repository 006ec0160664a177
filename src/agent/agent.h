/* agent.h — the agent's shared state: the real allocator it forwards to,
 * its options, its lifecycle, and the per-thread block every hook reads.
 * Everything the agent keeps lives in these few structs. */
#ifndef MT_AGENT_H
#define MT_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/options_table.h" /* MT_MODE_*, MT_ON_ERROR_*, MT_QUERY_*, MT_UNWIND_* */
#include "memtrail.h"
/* Everything declared here is the agent's own (the library exports only
 * what MT_EXPORT marks): hidden, so the code reaches it directly, not
 * through the GOT or the PLT. */
#pragma GCC visibility push(hidden)

#define MT_EXPORT __attribute__((visibility("default")))
#define MT_LIKELY(x) __builtin_expect(!!(x), 1)
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MT_INLINE inline __attribute__((always_inline))
#define MT_TLS __thread __attribute__((tls_model("initial-exec")))

/* A clock's time in ns (clock_gettime is async-signal-safe). */
static inline uint64_t mt_clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The allocator below us, found with dlsym(RTLD_NEXT). */
typedef struct mt_real {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    size_t (*malloc_usable_size)(void *);
} mt_real;
extern mt_real mt_real_fn;

#define MT_PATH_MAX 4096

typedef struct mt_options {
    int mode;
    int on_error;
    char output[MT_PATH_MAX]; /* template; made absolute at start-up */
} mt_options;
extern mt_options mt_opt;

/* Lifecycle: hooks take the fast path only once state is READY. */
enum { MT_STATE_UNINIT, MT_STATE_INIT, MT_STATE_READY };
extern _Atomic int mt_state;
extern int mt_tracking;      /* tracking (mode != off, options valid); set before READY */
extern _Atomic int mt_hot;   /* READY && mt_tracking, never cleared; a thread arms its gate on it (hooks.c) */
extern uint64_t mt_secret;   /* from AT_RANDOM: the keys below come from it */
extern uint64_t mt_hash_key; /* keys the header checks (block.h): odd, from mt_secret */
extern int mt_tail_fit;      /* canary=fit: block.h's mt_tail_ask; set before the first block */
extern uint64_t mt_tomb_key; /* keys the tombstones (block.h): odd, from mt_secret */
extern int64_t mt_start_ns;  /* CLOCK_REALTIME at start-up */

/* What the malloc hooks must do beyond the block's header and the summary
 * counters, one bit per feature (hooks.c's fast path tests the word
 * alone; the full path reads each feature's own state). A bit may be set
 * while its feature is off (the full path then finds nothing to do), never
 * clear while it is on: mt_extra_on sets it before and after the feature's
 * state goes on, mt_extra_off clears it after the state went off and sets
 * it again if the state came back meanwhile. */
enum { MT_EXTRA_REFSET = 1, MT_EXTRA_RECORD = 2, MT_EXTRA_SESSIONS = 4, MT_EXTRA_SAMPLE = 8 };
/* More bits tell the hooks' common paths (hooks.c) what is no work on
 * any path: the program made a category of its own (so the total has its
 * own slot: counters.h), the real allocator is not glibc (no block gets
 * the quick bit that lets free and realloc take those paths, block.h's
 * MT_WORD_QUICK: they lean on glibc's chunk layout): set once, never
 * cleared; sampling at a rate
 * below MT_QUICK_MAX, with MT_EXTRA_SAMPLE (the common paths' blocks are
 * smaller than MT_QUICK_MAX, so at any other rate none is of the rate or
 * more: sample.h). */
enum { MT_EXTRA_CATS = 16, MT_EXTRA_ALLOC = 32, MT_EXTRA_SMALL_RATE = 64 };
#define MT_QUICK_MAX 65536u
#define MT_EXTRA_WORK (MT_EXTRA_REFSET | MT_EXTRA_RECORD | MT_EXTRA_SESSIONS | MT_EXTRA_SAMPLE)
extern _Atomic unsigned mt_hooks_extra;
static inline void mt_extra_on(unsigned bit, _Atomic int *state, int value)
{
    atomic_fetch_or(&mt_hooks_extra, bit);
    atomic_store(state, value);
    atomic_fetch_or(&mt_hooks_extra, bit);
}
static inline void mt_extra_off(unsigned bit, _Atomic int *state)
{
    atomic_store(state, 0);
    atomic_fetch_and(&mt_hooks_extra, ~bit);
    if (atomic_load(state))
        atomic_fetch_or(&mt_hooks_extra, bit);
}

struct mt_shard;
/* Per-thread state. initial-exec TLS: no allocation on first touch. */
typedef struct mt_tls {
    struct mt_shard *shard; /* this thread's counters, or NULL */
    struct mt_cslot
        *cslot;       /* &shard->slot[cat], or a closed slot (mt_cat_slot_set); NULL till the first set */
    uint64_t catword; /* with cslot: a common-path block's header word but for its size (mt_cat_slot_set) */
    union {
        struct {
            uint16_t in_agent;   /* >0 while the agent runs: nested calls go straight to the real allocator */
            unsigned char timed; /* >0: this thread's allocator calls are timed (meminfo.h) */
            unsigned char armed; /* 1 once this thread saw the agent hot and has its shard (mt_arm) */
        };
        uint32_t gate; /* MT_GATE_OPEN: armed, not in the agent, not timed: the hooks' common paths */
    };
    int exited;                   /* shard folded at thread exit: count into the globals directly */
    int vm_locked;                /* holding (or taking) the VM table lock: a signal handler on
                                     this thread must not wait for it */
    uintptr_t stack_lo, stack_hi; /* this thread's stack, for frame-pointer walks (site.c); 0 = unknown */
    uint32_t spare_site;          /* a site record claimed but not published (site.c) */
    unsigned char span_depth;     /* request spans open on this thread (span.c) */
    unsigned char dlclose_depth;  /* dlcloses under way on this thread (mt_unloading) */
    unsigned char term_pending;   /* a terminating signal that landed in the agent's work (crash.c) */
    unsigned char forking; /* forks (nested: a handler's) this thread holds site updates off for (record.c) */
    uint32_t events;       /* memory events this thread raised (meminfo.c) */
    uint64_t mem_ticks;    /* ticks inside timed allocator and mapping calls, cumulative */
    uint32_t id_base, id_next, id_gen; /* this thread's block of trace allocation ids (trace.h) */
    unsigned char cat;                 /* category of new allocations */
    unsigned char depth;               /* tag stack depth */
    unsigned char stack[MT_TAG_DEPTH];
    unsigned char sample_seeded; /* sample mode: sample_rng is set up (sample.c) */
    int64_t sample_left;         /* sample mode: bytes until this thread's next sample */
    uint64_t sample_rng;         /* sample mode: this thread's generator */
} mt_tls;
extern MT_TLS mt_tls mt_t;
#define MT_GATE_OPEN 0x01000000u /* mt_tls.gate with armed alone set (little-endian) */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "MT_GATE_OPEN reads mt_tls.gate as little-endian");

/* The agent's own work on this thread (in_agent counts how deep): the
 * program's allocator calls meanwhile go straight to the real allocator.
 * A terminating signal that lands inside waits for the outermost leave,
 * which sends it again (crash.c): the signal fences keep the compiler
 * from moving the two reads across each other, the handler being the
 * only other party. */
void mt_crash_resend(void);
/* After the agent's work or the VM table's lock (vm_regions.c) was let
 * go: a signal that waited is sent again once neither is held. */
static inline void mt_crash_resend_if_free(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (MT_UNLIKELY(mt_t.term_pending) && mt_t.in_agent == 0 && !mt_t.vm_locked)
        mt_crash_resend();
}
static inline void mt_agent_enter(void)
{
    mt_t.in_agent++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void mt_agent_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (--mt_t.in_agent == 0)
        mt_crash_resend_if_free();
}

/* The agent's system calls inside a program's malloc or free (a memory-
 * info snapshot's /proc reads, libunwind's memory checks, a message on
 * stderr) are cancellation points in glibc: a pthread_cancel pending on
 * the thread would act there, in the middle of the call, and leave the
 * agent's state half updated (a flag held for ever, a block half freed).
 * Such work runs with cancellation off; the program's next cancellation
 * point acts on it. */
static inline int mt_cancel_off(void)
{
    int old = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old;
}
static inline void mt_cancel_restore(int old)
{
    if (old != PTHREAD_CANCEL_DISABLE)
        pthread_setcancelstate(old, NULL);
}

/* init.c */
void mt_init_slow(void);
/* Starts the agent if it has not started (entry points other than malloc
 * may come first); never from inside the agent, which is starting it. */
static inline void mt_start(void)
{
    if (MT_UNLIKELY(atomic_load_explicit(&mt_state, memory_order_acquire) != MT_STATE_READY) &&
        !mt_t.in_agent)
        mt_init_slow();
}
/* For the public API's functions: the agent runs and tracks (starting it
 * if this call comes first). */
static inline int mt_api_ready(void)
{
    if (MT_LIKELY(atomic_load_explicit(&mt_hot, memory_order_relaxed)))
        return 1;
    mt_start();
    return atomic_load(&mt_state) == MT_STATE_READY && mt_tracking;
}
/* Reports a heap error (double free, overwritten canary) on stderr and
 * aborts when on_error=abort. `what` names the error. */
void mt_heap_error(const char *what, const void *p, uint64_t size, unsigned cat);
/* Writes "memtrail: <msg>\n" to stderr. */
void mt_say(const char *msg);

/* Bootstrap arena for calls made while dlsym resolves the real allocator. */
#define MT_ARENA_SIZE (256 * 1024)
extern char mt_arena[MT_ARENA_SIZE];
void *mt_arena_alloc(size_t size);
static inline int mt_arena_owns(const void *p)
{
    return (uintptr_t)p - (uintptr_t)mt_arena < MT_ARENA_SIZE;
}
static inline size_t mt_arena_size(const void *p)
{
    return *(const size_t *)((const char *)p - 16);
}

/* report_write.c: writes the summary report; path NULL = where
 * mt_report_summary_path says. reason: "exit", "api", "signal". Returns 0 or -errno. A report being
 * written on another thread is waited for, up to MT_REPORT_WAIT_MS. */
#define MT_REPORT_WAIT_MS 10000
int mt_report_write_to(const char *path_template, const char *reason);
/* After the agent unmapped memory of its own (rlimit.c). */
void mt_rlimit_agent_shrank(void);
/* Around a report, under the report buffers' lock: a process at its
 * descriptor limit still gets it (rlimit.c). The descriptors kept for it
 * are taken at start-up; a fork holds them still. */
void mt_rlimit_report_begin(void);
void mt_rlimit_report_end(void);
void mt_rlimit_reserve_take(void);
/* One reserve descriptor let go for the control socket at the limit: 1 if
 * one was. mt_rlimit_give_back takes the reserve's numbers again, unless
 * a report holds them (between mt_rlimit_report_begin and _end). */
int mt_rlimit_lend(void);
void mt_rlimit_give_back(void);
void mt_rlimit_before_fork(void);
void mt_rlimit_after_fork(void);
void mt_rlimit_reset_after_fork(void);
/* The report at exit for a process leaving by a raw exit_group (init.c). */
int mt_report_at_raw_exit(void);
/* The same report written to an open descriptor (a socket, stderr), or
 * into buf (returns its length, or -ENOSPC when it does not fit). Neither
 * allocates; both are safe in a signal handler. `reason` is written as is
 * on the reason line ("exit", "api", "signal SIGSEGV", "query", ...). */
int mt_report_to_fd(int fd, const char *reason);
/* The same with detail mode's module and site lines (the two above leave
 * them out: a query's summary must fit its buffers). */
int mt_report_detail_to_fd(int fd, const char *reason);
long mt_report_to_mem(char *buf, size_t cap, const char *reason);
/* In a fork child: frees the report buffers another thread may have held. */
void mt_report_after_fork_child(void);
/* Keeps /proc/self/cmdline as it was at start-up. */
void mt_report_capture_cmdline(void);
/* That command line as the report's cmdline line has it (arguments
 * separated by spaces, with \s \n \\ escapes), into o. */
struct mt_out;
void mt_report_cmdline(struct mt_out *o);
/* At start-up: opens the output's directory and keeps it (safe_file.h),
 * so reports reach it after a chroot, a chdir or an id change. */
void mt_report_open_dir(void);
/* setid.c, before the process changes its user or group ids: creates
 * this process's report file now, to be written in place at exit (the new
 * ids may not create files in the output directory). */
void mt_report_before_setid(void);

/* Own memory from mmap, counted as overhead. */
void *mt_os_alloc(size_t size);

/* crash.c: the report on fatal signals (SIGSEGV, SIGBUS, SIGABRT, SIGFPE,
 * SIGILL), and with crash_report=on on the terminating ones (SIGTERM,
 * SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU, SIGXFSZ).
 * mt_crash_report_opt is option crash_report (MT_CRASH_REPORT_*).
 * mt_crash_resolve finds the next sigaction and signal (crash.c hides its
 * terminating-signal handler from the program); mt_crash_install takes
 * the signals whose disposition is still SIG_DFL and gives the calling
 * thread an alternate stack; each called once at start-up. A new thread
 * calls mt_crash_thread_start as it starts (an alternate stack for it, if
 * it has none and the handlers are ours) and mt_crash_thread_exit as it
 * ends (releases that stack). */
enum { MT_CRASH_REPORT_OFF = 0, MT_CRASH_REPORT_CRASH = 1, MT_CRASH_REPORT_ON = 2 };
extern int mt_crash_report_opt;
void mt_crash_resolve(void);
void mt_crash_install(void);
void mt_crash_thread_start(void);
void mt_crash_thread_exit(void);
/* The report at exit begins, then is written (init.c): a terminating
 * signal meanwhile waits for it, then ends the process without a report
 * of its own. */
enum { MT_EXIT_REPORT_NONE = 0, MT_EXIT_REPORT_WRITING = 1, MT_EXIT_REPORT_DONE = 2 };
void mt_crash_exit_report(int state);
/* In a fork child: no signal of the parent's waits, no report at exit
 * has begun. */
void mt_crash_after_fork_child(void);
/* report_write.c: the path a report template (NULL = configured output)
 * expands to in this process. 0 or -ENAMETOOLONG. Signal-safe. */
int mt_report_path(const char *path_template, char *out, size_t cap);
/* The path a report written without one goes to: the configured output,
 * or beside the trace in trace mode (OUTPUT.mtr, as the trace is the
 * output). 0 or -ENAMETOOLONG. Signal-safe. */
int mt_report_summary_path(char *out, size_t cap);

/* exec.c: the report at exec and exec following (option follow_exec). */
extern int mt_follow_exec; /* follow_exec=on: keep the agent across exec */
/* At start-up, once the options are parsed (`options` is MEMTRAIL_OPTIONS
 * as found, or NULL): notes the pid, resolves the real exec family, finds
 * our own path, and with following off takes the agent out of LD_PRELOAD
 * in environ. */
void mt_exec_init(const char *options);
/* Notes getpid() as the process that owns the counters: at start-up and
 * in a fork child. */
void mt_exec_note_pid(void);
/* 0 in a vfork child (its own pid, its parent's memory and counters):
 * reports are written only when this is 1. */
int mt_own_process(void);
/* mt_own_process, and for a child of a raw clone system call (no fork
 * handlers ran: its pid is not the one noted, as in a vfork child, but its
 * memory is its own): the kernel (kcmp) tells the two apart, and such a
 * child is set up as a _Fork child is, now. For the points that write a
 * report. */
int mt_claim_process(void);
/* init.c: what a fork child with no fork handlers run needs (_Fork, and a
 * claimed raw clone child). */
void mt_fork_child_unhandled(void);
/* control.c: the live control socket of `memtrail query` (docs/cli.md).
 * mt_control_enabled: option query=on|off (default on). start: at start-up
 * when tracking (creates the socket, starts the server thread); again in a
 * fork child, for its own socket; shutdown: removes the socket file, only in
 * the process that created it (not in a vfork child). */
extern int mt_control_enabled; /* MT_QUERY_*: query=off|on|thread */
void mt_control_start(void);
void mt_control_after_fork_child(int start); /* start: a socket of its own */
void mt_control_shutdown(void);
/* At exit: the socket file removed, then a start or stop of recording
 * under way waited for (record.h's mt_rec_hold_switches), then shutdown. */
void mt_control_leave(void);
/* Cuts short a query being answered (the process is ending). */
void mt_control_cut_query(void);

#pragma GCC visibility pop
#endif

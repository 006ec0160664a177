/* init.c — the agent's life: start-up (finding the real allocator,
 * reading MEMTRAIL_OPTIONS), the bootstrap arena, fork, the report at exit,
 * and the one place that prints heap errors. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/allocator.h"
#include "agent/counters.h"
#include "agent/edge.h"
#include "agent/fdguard.h"
#include "agent/options.h"
#include "agent/record.h"
#include "agent/meminfo.h"
#include "agent/span.h"
#include "agent/refset_events.h"
#include "agent/sessions.h"
#include "agent/sample.h"
#include "agent/site.h"
#include "agent/trace.h"
#include "agent/vm.h"
#include "common/out.h"

mt_real mt_real_fn;
mt_options mt_opt;
_Atomic int mt_state;
int mt_tracking;
_Atomic int mt_hot;
uint64_t mt_secret;
uint64_t mt_hash_key = 0x9E3779B97F4A7C15ull; /* till start-up sets them */
uint64_t mt_tomb_key = 0xC2B2AE3D27D4EB4Full;
int mt_tail_fit; /* option canary=fit (block.h's mt_tail_ask) */
int64_t mt_start_ns;
MT_TLS mt_tls mt_t;

/* ---- bootstrap arena ---------------------------------------------------
 * dlsym() may call calloc/malloc before we know where the real ones are.
 * Those few requests are served from static memory that is never reused
 * (so it stays zeroed for calloc) and recognised by address on free. */
_Alignas(16) char mt_arena[MT_ARENA_SIZE];
static _Atomic size_t arena_used;

void *mt_arena_alloc(size_t size)
{
    size_t need = 16 + ((size + 15) & ~(size_t)15);
    if (size > MT_ARENA_SIZE)
        return NULL;
    size_t at = atomic_fetch_add(&arena_used, need);
    if (at + need > MT_ARENA_SIZE)
        return NULL;
    size_t *h = (size_t *)(mt_arena + at);
    *h = size;
    return mt_arena + at + 16;
}

/* ---- messages ---------------------------------------------------------- */

/* Writes a message to stderr. A stderr that is a pipe nobody reads any
 * more must not kill the program with SIGPIPE for the agent's message:
 * the signal is blocked for the write, and taken back if the write raised
 * it. Async-signal-safe. */
static void flush_to_stderr(mt_out *o)
{
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    int saved = errno;
    int cancel = mt_cancel_off(); /* write and sigtimedwait would be cancellation points */
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    mt_out_flush(o);
    if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_only, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    mt_cancel_restore(cancel);
    errno = saved;
}

void mt_say(const char *msg)
{
    char buf[512];
    mt_out o;
    mt_out_init(&o, buf, sizeof buf, 2);
    mt_out_str(&o, "memtrail: ");
    mt_out_str(&o, msg);
    mt_out_char(&o, '\n');
    flush_to_stderr(&o);
}

void mt_heap_error(const char *what, const void *p, uint64_t size, unsigned cat)
{
    char buf[512];
    mt_out o;
    mt_out_init(&o, buf, sizeof buf, 2);
    mt_out_str(&o, "memtrail: ");
    mt_out_str(&o, what);
    mt_out_str(&o, ": block at ");
    mt_out_hex(&o, (uintptr_t)p);
    if (size != UINT64_MAX) {
        mt_out_str(&o, ", ");
        if (size >= 0xFFFFFFu)
            mt_out_str(&o, "at least ");
        mt_out_u64(&o, size);
        mt_out_str(&o, " bytes");
    }
    if (cat < MT_NCAT) {
        mt_out_str(&o, ", category ");
        mt_out_str(&o, mt_cats[cat].name);
    }
    mt_out_str(&o, mt_opt.on_error == MT_ON_ERROR_ABORT ? "; aborting (on_error=abort)\n"
                                                        : "; the program continues (on_error=report)\n");
    flush_to_stderr(&o);
    if (mt_opt.on_error == MT_ON_ERROR_ABORT) {
        mt_control_shutdown();
        abort();
    }
}

/* ---- options ----------------------------------------------------------- */

/* MEMTRAIL_OPTIONS (options.c) applied to the agent's state. Static: the
 * struct holds two paths, too much for the stack of whichever thread
 * mallocs first; start-up runs once. Returns 0, or -1 after printing what
 * is wrong. */
static int rec_start = 1; /* option start */

static int parse_options(const char *s)
{
    static mt_env_options o;
    static char err[MT_PATH_MAX + 256];
    o.mode = mt_opt.mode;
    o.on_error = mt_opt.on_error;
    o.canary_fit = mt_tail_fit;
    memcpy(o.output, mt_opt.output, sizeof o.output);
    o.depth = mt_site_opt.depth;
    o.unwind = mt_site_opt.unwind;
    o.sample_rate = (uint64_t)mt_site_opt.sample_rate;
    o.sample_seed = mt_site_opt.sample_seed;
    o.trace_buffer = mt_trace_opt.buffer;
    o.trace_time_unit_ns = mt_trace_opt.time_unit_ns;
    o.trace_level = mt_trace_opt.level;
    o.trace_chunk = mt_trace_opt.chunk_events;
    o.trace_threads = mt_trace_opt.threads;
    o.trace_wait = mt_trace_opt.wait;
    o.crash_report = mt_crash_report_opt;
    o.follow_exec = mt_follow_exec;
    o.query = mt_control_enabled;
    o.start = rec_start;
    o.refset_fd = mt_rs_fd_opt;
    o.peak_step = mt_info_opt.peak_step;
    o.limit = mt_info_opt.limit;
    o.info_interval_ms = mt_info_opt.interval_ms;
    o.alloc_timing = mt_info_opt.alloc_timing;
    o.span_faults = mt_info_opt.span_faults;
    o.run_pid = mt_trace_opt.run_pid;
    if (mt_options_parse(s, &o, err, sizeof err) < 0) {
        mt_say(err);
        return -1;
    }
    mt_opt.mode = o.mode;
    mt_opt.on_error = o.on_error;
    mt_tail_fit = o.canary_fit;
    memcpy(mt_opt.output, o.output, sizeof mt_opt.output);
    mt_site_opt.depth = o.depth;
    mt_site_opt.unwind = o.unwind;
    mt_site_opt.sample_rate = (int64_t)o.sample_rate;
    mt_site_opt.sample_seed = o.sample_seed;
    mt_trace_opt.buffer = o.trace_buffer;
    mt_trace_opt.time_unit_ns = o.trace_time_unit_ns;
    mt_trace_opt.level = o.trace_level;
    mt_trace_opt.chunk_events = o.trace_chunk;
    mt_trace_opt.threads = o.trace_threads;
    mt_trace_opt.wait = o.trace_wait;
    mt_crash_report_opt = o.crash_report;
    mt_follow_exec = o.follow_exec;
    mt_control_enabled = o.query;
    rec_start = o.start;
    mt_rs_fd_opt = o.refset_fd;
    mt_info_opt.peak_step = o.peak_step;
    mt_info_opt.limit = o.limit;
    mt_info_opt.interval_ms = o.info_interval_ms;
    mt_info_opt.alloc_timing = o.alloc_timing;
    mt_info_opt.span_faults = o.span_faults;
    mt_trace_opt.run_pid = o.run_pid;
    return 0;
}

/* An absolute output template, so a later chdir() does not move it. */
static void absolutize_output(void)
{
    if (mt_opt.output[0] == '/')
        return;
    char cwd[MT_PATH_MAX];
    if (!getcwd(cwd, sizeof cwd - 1))
        return;
    size_t c = strlen(cwd), n = strlen(mt_opt.output);
    if (c + 1 + n + 1 > sizeof mt_opt.output)
        return;
    memmove(mt_opt.output + c + 1, mt_opt.output, n + 1);
    memcpy(mt_opt.output, cwd, c);
    mt_opt.output[c] = '/';
}

/* ---- start-up and shutdown ---------------------------------------------- */

/* _Fork (the async-signal-safe fork) runs no fork handlers: a lock another
 * thread held at that moment would stay taken in the child for ever. */
typedef pid_t (*fork_fn)(void);
static fork_fn real_Fork;

MT_EXPORT pid_t _Fork(void)
{
    if (!real_Fork) {
        errno = ENOSYS;
        return -1;
    }
    /* A trace's fork point (a clock read and atomics: safe in a signal
     * handler), so the child's trace inherits the parent's blocks. */
    mt_trace_before_fork();
    pid_t pid = real_Fork();
    if (pid == 0)
        mt_fork_child_unhandled();
    return pid;
}

/* Another allocator preloaded before the agent (or one linked into the
 * program) gets the program's malloc calls: nothing is tracked, and the
 * calls that still reach the agent go where allocator.c's "the functions
 * the agent forwards to" says. */
static char first_allocator[256];

static int first_kind; /* allocator.h's MT_FIRST_*, or 0 */

/* Why the agent runs untracked when another malloc comes before its own. */
static void say_untracked(void)
{
    char msg[MT_PATH_MAX + 512] = "malloc is served by ";
    if (first_kind == MT_FIRST_PROGRAM) {
        char exe[MT_PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        strcat(msg, "the program itself (");
        strcat(msg, n > 0 ? exe : "its executable");
        strcat(msg,
               " defines malloc: an allocator linked into it), which comes before any preloaded library: "
               "the agent would not see the program's malloc calls, and runs untracked");
    } else {
        strcat(msg, first_allocator);
        strcat(msg, ", preloaded before the agent, which would not see the program's malloc calls: "
                    "running untracked (put libmemtrail.so first in LD_PRELOAD; memtrail run does)");
    }
    mt_say(msg);
}

static int resolve_real(void)
{
    first_kind = mt_allocator_precedes(first_allocator, sizeof first_allocator);
    mt_allocator_resolve(&mt_real_fn);
    mt_rs_resolve();
    mt_fd_guard_init();
    mt_crash_resolve();
    mt_vm_init();
    real_Fork = (fork_fn)dlsym(RTLD_NEXT, "_Fork");
    return mt_real_fn.malloc && mt_real_fn.free && mt_real_fn.calloc && mt_real_fn.realloc &&
           mt_real_fn.posix_memalign && mt_real_fn.malloc_usable_size;
}

/* A fork must not leave the category lock held in the child. */
static void before_fork(void)
{
    mt_trace_before_fork();
    /* Other threads' site updates wait from here to the fork; before the
     * agent's locks, which a thread inside an update could need. */
    mt_rec_fork_hold();
    mt_category_lock();
    mt_rlimit_before_fork();
    mt_vm_before_fork();
}
static void after_fork_parent(void)
{
    mt_rlimit_after_fork();
    mt_category_unlock();
    mt_rec_fork_release();
    mt_vm_after_fork(); /* last: a terminating signal that waited for it is sent again here */
}
/* A fork child's state past its locks, with fork handlers or without:
 * start says whether it starts a control socket and memory-info thread
 * of its own. */
static void child_after_fork(int start)
{
    mt_category_unlock();
    mt_fd_after_fork_child();
    mt_counters_after_fork_child();
    mt_site_after_fork_child();
    mt_sample_after_fork_child();
    mt_exec_note_pid();
    mt_report_after_fork_child();
    mt_control_after_fork_child(start);
    mt_rec_after_fork_child();
    mt_trace_after_fork_child(); /* before the sessions' dispatchers restart */
    /* Here, not in the engine's own handler (which then does nothing): the
     * dispatchers restart inside the agent, as its threads. */
    mt_xe_after_fork_child();
    mt_info_after_fork_child(start);
    mt_span_after_fork_child();
}

static void after_fork_child(void)
{
    mt_crash_after_fork_child();
    mt_vm_after_fork();
    mt_rlimit_after_fork();
    child_after_fork(1);
}

/* A child no fork handler ran in: made by _Fork, or by a raw clone system
 * call (claimed at its report: exec.c's mt_claim_process). Its locks are
 * let go rather than handed over (another thread may have held one), and
 * it starts no control socket or memory-info thread of its own: such a
 * child may be running in a signal handler, where glibc's thread and
 * stack locks another thread held stay taken (a pthread_create could
 * hang it). The sessions' dispatchers do restart, as they did before: a
 * trace or an event file needs its writer. Such a child is not
 * queryable; its report at exit is whole. */
void mt_fork_child_unhandled(void)
{
    mt_crash_after_fork_child();
    mt_rlimit_reset_after_fork();
    mt_vm_reset_after_fork();
    child_after_fork(0);
}

void mt_init_slow(void)
{
    int expect = MT_STATE_UNINIT;
    if (!atomic_compare_exchange_strong(&mt_state, &expect, MT_STATE_INIT)) {
        while (atomic_load(&mt_state) != MT_STATE_READY)
            __builtin_ia32_pause();
        return;
    }
    int saved_errno = errno; /* the program must find errno as the C runtime left it */
    mt_agent_enter();
    int ok = resolve_real();
    if (!ok)
        mt_say("cannot find the real malloc family (dlsym RTLD_NEXT failed); running untracked");
    const unsigned char *rnd = (const unsigned char *)getauxval(AT_RANDOM);
    if (rnd)
        memcpy(&mt_secret, rnd, sizeof mt_secret);
    mt_secret ^= (uint64_t)(uintptr_t)&mt_secret;
    mt_hash_key = (mt_secret * 0x9E3779B97F4A7C15ull) | 1;
    mt_tomb_key = (mt_secret * 0xC2B2AE3D27D4EB4Full) | 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    mt_start_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    mt_counters_init();
    mt_xe_init();
    xe_file_set_fd_guard(mt_fd_keep, mt_fd_forget);

    mt_opt.mode = MT_MODE_SUMMARY;
    mt_opt.on_error = MT_ON_ERROR_REPORT;
    strcpy(mt_opt.output, "memtrail.%p.mtr");
    const char *env = getenv("MEMTRAIL_OPTIONS");
    if (ok && env && parse_options(env) < 0)
        ok = 0;
    if (ok && first_kind && mt_opt.mode != MT_MODE_OFF) {
        say_untracked();
        ok = 0;
    }
    absolutize_output();
    mt_tracking = ok && mt_opt.mode != MT_MODE_OFF;
    mt_exec_init(env);
    if (mt_tracking && mt_opt.mode == MT_MODE_SAMPLE)
        mt_site_opt.sample = 1; /* before mt_site_init: it maps the sample counters */
    if (mt_tracking && (mt_opt.mode == MT_MODE_DETAIL || mt_opt.mode == MT_MODE_SAMPLE) &&
        mt_site_init() == 0)
        mt_site_opt.detail = 1;
    else
        mt_site_opt.sample = 0;
    if (mt_tracking && mt_opt.mode == MT_MODE_TRACE && mt_site_init() == 0 && mt_trace_init() == 0) {
        mt_site_opt.detail = 1;
        mt_site_opt.trace = 1;
    }
    if (mt_site_opt.detail)
        mt_rec_init(mt_opt.mode, rec_start);
    if (mt_tracking)
        mt_rs_start();
    if (mt_tracking) {
        mt_edge_init();
        mt_info_init();
        mt_span_init();
    }
    if (mt_tracking) {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        mt_report_capture_cmdline();
        mt_report_open_dir();
        mt_rlimit_reserve_take();
        mt_crash_install();
    }
    atomic_store(&mt_state, MT_STATE_READY);
    atomic_store(&mt_hot, mt_tracking);
    mt_agent_leave();
    errno = saved_errno;
}

__attribute__((constructor)) static void mt_constructor(void)
{
    if (atomic_load(&mt_state) == MT_STATE_UNINIT && !mt_t.in_agent)
        mt_init_slow();
    if (atomic_load(&mt_state) == MT_STATE_READY && mt_tracking) {
        mt_control_start();
        /* Here, not in mt_init_slow: a session starts a thread, which the
         * first malloc (perhaps inside libc's own start-up) cannot. */
        mt_trace_start();
        mt_xe_start_agent_sessions();
        mt_info_start();
    }
}

/* The report a process writes as it leaves (exit, _exit, _Exit). */
static void final_report(void *unused)
{
    (void)unused;
    mt_control_leave();      /* after a stop under way: it finishes its trace and answers */
    if (!mt_claim_process()) /* a vfork child: its parent's sessions and report */
        return;
    /* the agent's work: a terminating signal meanwhile waits for the
     * report, then ends the process without one of its own (crash.c) */
    mt_agent_enter();
    mt_crash_exit_report(MT_EXIT_REPORT_WRITING);
    mt_xe_stop_agent_sessions();
    mt_trace_report();
    if (atomic_load(&mt_hot) && !mt_site_opt.trace)
        mt_report_write_to(NULL, "exit");
    mt_crash_exit_report(MT_EXIT_REPORT_DONE);
    mt_agent_leave();
}

/* A raw exit_group that memtrail run holds (control.c "exit"; Go's
 * runtime leaves this way): the report at exit, from the control
 * socket's signal handler or thread, once. Event sessions are left as
 * they are (stopping them waits for threads). */
int mt_report_at_raw_exit(void)
{
    static _Atomic int done;
    if (atomic_exchange(&done, 1) || !mt_claim_process())
        return 0;
    mt_trace_crash("exit"); /* finishes a trace, as for a crash (one started on demand too) */
    if (mt_site_opt.trace)
        return 0;
    return atomic_load(&mt_hot) ? mt_report_write_to(NULL, "exit") : 0;
}

/* _exit and _Exit skip destructors (dash leaves this way): write the
 * report first. exit() reaches _exit inside libc without coming here. */
static _Noreturn void exit_now(int status)
{
    final_report(NULL);
    for (;;)
        syscall(SYS_exit_group, status);
}
MT_EXPORT void _exit(int status)
{
    exit_now(status);
}
MT_EXPORT void _Exit(int status)
{
    exit_now(status);
}

/* glibc's daemon() leaves its parent by an _exit inside libc, which the
 * hook above never sees: that process wrote no report, and no trace,
 * though the daemon's trace names it as its parent's. The same steps as
 * glibc's, the parent leaving through exit_now. */
MT_EXPORT int daemon(int nochdir, int noclose)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        exit_now(0);
    if (setsid() < 0)
        return -1;
    if (!nochdir)
        (void)chdir("/");
    if (noclose)
        return 0;
    /* stdin, stdout and stderr onto /dev/null, once it is seen to be it */
    int fd = open("/dev/null", O_RDWR);
    if (fd < 0)
        return -1;
    struct stat st;
    int bad = fstat(fd, &st) != 0 ? errno : !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3) ? ENODEV : 0;
    if (bad) {
        close(fd);
        errno = bad;
        return -1;
    }
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO)
        close(fd);
    return 0;
}

/* The report at exit must come after every library's destructors (they
 * free what their constructors allocated), but ours runs inside _dl_fini
 * before those of the libraries the program itself links. So our destructor
 * only queues the report as one more exit handler: glibc runs handlers
 * registered while it runs the others, after _dl_fini returns. The NULL
 * DSO handle keeps __cxa_finalize of our own library from running it early. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

__attribute__((destructor)) static void mt_destructor(void)
{
    if (!mt_tracking)
        return;
    if (__cxa_atexit(final_report, NULL, NULL) != 0)
        final_report(NULL);
}

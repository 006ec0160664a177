/* record.c — recording on demand (record.h): the state the hooks read,
 * and the control socket's requests that switch it.
 *
 *   start detail        call sites from now on (detail's site table)
 *   start sample        sampled call sites from now on (sample mode's)
 *   start trace [PATH]  every event from now on, in a trace file at PATH
 *                       (absolute; default: the configured output)
 *   stop                summary counting only; a trace is finished
 *
 * Which processes can: those started in detail, sample or trace mode
 * (their site table is set up at start-up; a summary-mode process has
 * none, and it cannot be made from a signal handler). A sample-mode
 * process samples and never records exact sites, a detail or trace one
 * never samples: a site table holds one kind of counts. A trace needs its writer thread
 * started and, at stop, joined: that is not for a signal handler, so trace
 * requests are served only by the control thread (query=thread, which
 * trace-mode processes use by default).
 *
 * A switch sends its own answer before it counts as done: the process's
 * exit (or exec) waits for a switch under way, 30 s at most, so a trace
 * stopped as the program ends is finished by the stop and its path
 * reaches the client. An answer the client is no longer there to read
 * goes to the program's stderr, one line. */
#include "agent/record.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/counters.h"
#include "agent/site.h"
#include "agent/trace.h"

_Atomic int mt_rec;
_Atomic long mt_rec_busy;
_Atomic int mt_rec_membarrier;

/* The thread answering a start or stop, from the request until its
 * answer is sent (0: none), and whether the process is leaving (its exit
 * or exec is under way). A process leaving in the middle of a stop would
 * cut the connection and end the thread: the client would get no answer,
 * nor learn where the trace went. So the leaving thread waits for the
 * switch (mt_rec_hold_switches), and a switch that begins once the
 * process is leaving is refused. Each side stores its own flag, then
 * reads the other's (seq_cst): one of them sees the other. */
static _Atomic pid_t switching;
static _Atomic int leaving; /* exits and execs under way */

/* The hooks count themselves in flight (a store to their shard) and then
 * read the state; a stop stores the state and then reads the counts. Each
 * side must order its store before its load (else a hook may miss the
 * stop while the stop misses the hook). With membarrier, the hooks'
 * side is a compiler barrier only, and the stop, between its store and
 * its loads, makes every thread of the process run a full barrier (one
 * running is interrupted for it; one not running passed one when it was
 * switched out): after it, a hook's count stored before its read of the
 * state is seen, or that read sees the stop. Registered before the state
 * says trace (the registration is the process's, kept across fork and
 * asked again in a fork child all the same). */
_Atomic int mt_site_gate = MT_SITE_NO_MB;

static void set_membarrier(int on)
{
    atomic_store(&mt_rec_membarrier, on);
    if (on)
        atomic_fetch_and(&mt_site_gate, ~MT_SITE_NO_MB);
    else
        atomic_fetch_or(&mt_site_gate, MT_SITE_NO_MB);
}

static void membarrier_register(void)
{
    if (!atomic_load(&mt_rec_membarrier))
        set_membarrier(syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0);
}

/* The stop's side, after the state's store: when it returns, every
 * thread has run a barrier since. If the call fails (it cannot once
 * registered, short of a seccomp filter put in since that answers with an
 * error; one that kills on the call would have killed the registration
 * first), the hooks go back to fenced counts from now on, and the stop
 * waits 10 ms for hooks that did not fence: a store leaves a CPU's store
 * buffer within microseconds. */
/* us microseconds, by the system call itself: glibc's nanosleep is a
 * cancellation point, and these waits run inside fork(), inside malloc
 * and at exit, maybe in a signal handler. */
static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, us % 1000000 * 1000};
    syscall(SYS_nanosleep, &ts, NULL);
}

static void membarrier_all(void)
{
    if (!atomic_load(&mt_rec_membarrier) ||
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    set_membarrier(0);
    sleep_us(10000);
}

_Atomic unsigned mt_hooks_extra;

/* Every change of mt_rec: with the hooks' bit (agent.h). Sampling has a
 * bit of its own: the hooks' fast path draws the sample itself. */
static void rec_set(int rec)
{
    unsigned sample = MT_EXTRA_SAMPLE | (mt_site_opt.sample_rate < MT_QUICK_MAX ? MT_EXTRA_SMALL_RATE : 0);
    if (rec != MT_REC_NONE)
        mt_extra_on(rec == MT_REC_SAMPLE ? sample : MT_EXTRA_RECORD, &mt_rec, rec);
    else
        mt_extra_off(MT_EXTRA_RECORD | MT_EXTRA_SAMPLE | MT_EXTRA_SMALL_RATE, &mt_rec);
}
_Atomic uint32_t mt_rec_first_id = 1;

void mt_rec_init(int mode, int start)
{
    if (mode != MT_MODE_SUMMARY) /* a trace's stop, a fork's hold (mt_rec_fork_hold) */
        membarrier_register();
    int rec = mode == MT_MODE_TRACE    ? MT_REC_TRACE
              : mode == MT_MODE_DETAIL ? MT_REC_DETAIL
              : mode == MT_MODE_SAMPLE ? MT_REC_SAMPLE
                                       : MT_REC_NONE;
    rec_set(start ? rec : MT_REC_NONE);
}

void mt_rec_after_fork_child(void)
{
    mt_t.forking = 0;
    atomic_store(&mt_site_gate, MT_SITE_NO_MB); /* no hold: whichever thread of the parent's held it */
    if (atomic_load(&mt_rec_membarrier)) {
        atomic_store(&mt_rec_membarrier, 0);
        membarrier_register();
    }
    atomic_store(&mt_rec_busy, 0);
    for (mt_shard *sh = mt_shard_first(); sh; sh = sh->next) {
        atomic_store(&sh->rec_busy, 0);
        atomic_store(&sh->site_busy, 0);
    }
    /* Those were the parent's threads and the parent's end. */
    atomic_store(&switching, 0);
    atomic_store(&leaving, 0);
}

/* Waits while busy() says so, 100 us at a time, 2 s at most (a thread
 * stopped inside a bracket, by a debugger, is not waited for longer).
 * 1: drained; 0: not. */
static int drain(int (*busy)(void))
{
    for (int spins = 0; busy() && spins < 20000; spins++)
        sleep_us(100);
    return !busy();
}

/* Site updates in flight in threads other than this one (seq_cst loads,
 * after the hold's store). This thread's own count is not waited for: a
 * fork from a signal handler that interrupted one cannot drain it. */
static int sites_busy(void)
{
    for (mt_shard *sh = mt_shard_first(); sh; sh = sh->next)
        if (sh != mt_t.shard && atomic_load(&sh->site_busy) != 0)
            return 1;
    return 0;
}

void mt_rec_fork_hold(void)
{
    if (!mt_site_opt.detail)
        return;     /* no sites: nothing to keep together */
    mt_t.forking++; /* a depth: a fork from a signal handler that landed in here nests */
    atomic_fetch_add(&mt_site_gate, MT_SITE_HOLD); /* a count: two threads may fork at once */
    membarrier_all();
    (void)drain(sites_busy); /* a bracket is a few stores long */
}

void mt_rec_fork_release(void)
{
    if (!mt_t.forking)
        return;
    mt_t.forking--;
    atomic_fetch_sub(&mt_site_gate, MT_SITE_HOLD);
}

/* Bounded too: were this thread holding a lock glibc's fork takes after
 * the prepare handlers (it takes none of its own inside the bracket), the
 * fork would wait for it, and it for the fork. The wait is outside the
 * bracket: the fork's hold waits for brackets in flight, and a bracket
 * waiting inside for the hold made each of them wait the other's 2 s. */
int mt_site_gate_slow(_Atomic long *busy)
{
    /* No membarrier on the fork's side: this side's fence, then the
     * hold read again. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&mt_site_gate) < MT_SITE_HOLD || mt_t.forking)
        return 1;
    mt_site_leave(busy);
    int spins = 0;
    for (; atomic_load(&mt_site_gate) >= MT_SITE_HOLD && spins < 20000; spins++)
        sleep_us(100);
    if (spins < 20000)
        return 0; /* the fork is done: the caller enters again */
    /* Still held after 2 s: go on, inside the bracket again. */
    atomic_store_explicit(busy, atomic_load_explicit(busy, memory_order_relaxed) + 1, memory_order_relaxed);
    return 1;
}

/* Hooks in flight anywhere (seq_cst loads, after the state's store). */
static int hooks_busy(void)
{
    if (atomic_load(&mt_rec_busy) != 0)
        return 1;
    for (mt_shard *sh = mt_shard_first(); sh; sh = sh->next)
        if (atomic_load(&sh->rec_busy) != 0)
            return 1;
    return 0;
}

static const char *const rec_names[] = {"summary counting", "detail recording", "trace recording",
                                        "sampled recording"};

/* Waits until no hook is between its read of the state (trace) and its
 * event: then the trace holds every allocation that saw it on. A hook
 * cannot block there for long (the engine's fire does not wait for us),
 * but a thread can be stopped inside one (a debugger, SIGSTOP of one
 * thread): bounded at 2 s. 1: drained; 0: not, and the session's buffers
 * must stay mapped. */
static int wait_hooks(void)
{
    membarrier_all();
    return drain(hooks_busy);
}

/* Can this process create a file in path's directory? (The trace is
 * created there at its first event: say now, not at stop, if it cannot.) */
static int dir_writable(const char *path)
{
    char dir[MT_PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, len);
    dir[len] = '\0';
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EEXIST;
        return 0;
    }
    return faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0; /* as the user who will create it */
}

static void start(const char *what, const char *path, int from_signal, mt_out *o)
{
    int now = atomic_load(&mt_rec);
    if (now != MT_REC_NONE) {
        mt_out_str(o, "error ");
        mt_out_str(o, rec_names[now]);
        mt_out_str(o, " is already on; 'stop' it first\n");
        return;
    }
    if (!mt_site_opt.detail) {
        mt_out_str(o, "error this process runs in summary mode: recording on demand needs it started in "
                      "detail or trace mode (with start=off to begin with summary counting only)\n");
        return;
    }
    if (strcmp(what, "sample") == 0) {
        if (path) {
            mt_out_str(o, "error 'start sample' takes no path (its sites go to the report)\n");
            return;
        }
        if (!mt_site_opt.sample) {
            mt_out_str(o,
                       "error this process records exact sites (detail mode): sampled and exact sites do not "
                       "mix; use 'start detail', or start it in sample mode\n");
            return;
        }
        rec_set(MT_REC_SAMPLE);
        mt_out_str(o, "ok sampled recording on: sampled call sites from now on ('memtrail query PID detail' "
                      "shows their estimates)\n");
        return;
    }
    if (mt_site_opt.sample) {
        mt_out_str(o, "error this process samples (sample mode): exact and sampled sites do not mix; use "
                      "'start sample'\n");
        return;
    }
    if (strcmp(what, "detail") == 0) {
        if (path) {
            mt_out_str(o, "error 'start detail' takes no path (its sites go to the report)\n");
            return;
        }
        rec_set(MT_REC_DETAIL);
        mt_out_str(
            o, "ok detail recording on: call sites from now on ('memtrail query PID detail' shows them)\n");
        return;
    }
    if (strcmp(what, "trace") != 0) {
        mt_out_str(o, "error cannot start '");
        mt_out_shown(o, what, strlen(what) < 32 ? strlen(what) : 32);
        mt_out_str(o, "' (accepted: detail, sample, trace)\n");
        return;
    }
    if (from_signal) {
        mt_out_str(o, "error trace recording on demand needs the control thread: start the program with "
                      "MEMTRAIL_OPTIONS=query=thread (or in trace mode)\n");
        return;
    }
    if (!path && !mt_site_opt.trace) {
        mt_out_str(o, "error 'start trace' needs -o FILE here (this process's output is its report)\n");
        return;
    }
    if (path && path[0] != '/') {
        mt_out_str(o, "error the trace's path must be absolute\n");
        return;
    }
    if (path && strlen(path) > MT_TRACE_PATH_MAX) {
        mt_out_str(o, "error the trace's path is too long (at most ");
        mt_out_u64(o, MT_TRACE_PATH_MAX);
        mt_out_str(o, " bytes)\n");
        return;
    }
    if (path && strchr(path, ',')) {
        mt_out_str(o, "error the trace's path must not contain ','\n");
        return;
    }
    if (path && !dir_writable(path)) {
        mt_out_str(o, "error cannot write ");
        mt_out_str(o, path);
        mt_out_str(o, ": ");
        mt_out_str(o, strerrordesc_np(errno) ? strerrordesc_np(errno) : "error");
        mt_out_str(o, " (checked as this process's user, in its directory)\n");
        return;
    }
    int rc = mt_trace_record_start(path, o);
    if (rc == -EALREADY) {
        mt_out_str(
            o, "error a trace is still open (a fork in the middle of a stop left it); 'stop' finishes it\n");
        return;
    }
    if (rc < 0)
        return;
    /* Ids from here on are this trace's: a free of an older block is
     * written with id 0 (docs/trace-analysis.md, frees_unknown). */
    atomic_store(&mt_rec_first_id, atomic_load(&mt_trace_last_id) + 1);
    atomic_fetch_add(&mt_trace_id_gen, 1); /* blocks taken before are not this trace's */
    membarrier_register();
    rec_set(MT_REC_TRACE);
    mt_out_str(o, "ok trace recording on: every event from now on ('stop' finishes the file)\n");
}

static void stop(int from_signal, mt_out *o)
{
    int now = atomic_load(&mt_rec);
    if (now == MT_REC_NONE && mt_trace_session_open() && !from_signal) {
        /* A fork child whose parent was stopping a trace: finish it. */
        mt_trace_record_stop(o, wait_hooks());
        return;
    }
    if (now == MT_REC_NONE) {
        mt_out_str(o, mt_site_opt.sample ? "error nothing is being recorded (summary counting only); "
                                           "'start sample' first\n"
                                         : "error nothing is being recorded (summary counting only); "
                                           "'start detail' or 'start trace' first\n");
        return;
    }
    if (now == MT_REC_TRACE && from_signal) {
        mt_out_str(o, "error stopping a trace needs the control thread (MEMTRAIL_OPTIONS=query=thread)\n");
        return;
    }
    rec_set(MT_REC_NONE);
    if (now == MT_REC_DETAIL || now == MT_REC_SAMPLE) {
        mt_out_str(o,
                   now == MT_REC_DETAIL
                       ? "ok detail recording off: summary counting only; the sites keep what they recorded\n"
                       : "ok sampled recording off: summary counting only; the sites keep what they "
                         "recorded\n");
        return;
    }
    mt_trace_record_stop(o, wait_hooks());
}

/* ---- a switch and the process's end ------------------------------------- */

#define SWITCH_WAIT_MS 30000

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mt_rec_hold_switches(void)
{
    atomic_fetch_add(&leaving, 1);
    pid_t who = atomic_load(&switching);
    if (who == 0 || who == (pid_t)syscall(SYS_gettid)) /* none, or this thread's own (a handler under it) */
        return;
    int saved_errno = errno;
    int64_t deadline = mono_ms() + SWITCH_WAIT_MS;
    while (atomic_load(&switching) != 0 && mono_ms() < deadline) {
        sleep_us(1000); /* (an _exit from a signal handler comes here) */
    }
    if (atomic_load(&switching) != 0)
        mt_say("a 'start' or 'stop' of recording was still under way after 30 s: the process leaves without "
               "its answer");
    errno = saved_errno;
}

void mt_rec_release_switches(void)
{
    atomic_fetch_sub(&leaving, 1);
}

/* Sends the answer. One that cannot reach its client (it left, or timed
 * out) goes to stderr as one line: what was done, where a trace went,
 * would be known to nobody otherwise. */
static void answer(int fd, const char *req, mt_out *o)
{
    if (mt_send_all(fd, o->buf, o->len) == 0)
        return;
    static char line[2 * MT_PATH_MAX + 1536];
    mt_out l;
    mt_out_init(&l, line, sizeof line, -1);
    mt_out_str(&l, "the answer to 'query PID ");
    mt_out_shown(&l, req, strlen(req) < 64 ? strlen(req) : 64);
    mt_out_str(&l, "' could not be sent (the client left): ");
    size_t from = o->len >= 3 && memcmp(o->buf, "ok ", 3) == 0 ? 3 : 0;
    for (size_t i = from; i < o->len; i++)
        if (o->buf[i] != '\n' || i + 1 < o->len)
            mt_out_char(&l, o->buf[i] == '\n' ? ' ' : o->buf[i]);
    mt_say(mt_out_cstr(&l));
}

/* The request's words, and the start or stop it asks for, answered into o. */
static void switch_recording(const char *req, int from_signal, mt_out *o)
{
    static char words[3][MT_PATH_MAX]; /* not on a signal handler's stack; serving is one at a time */
    int n = 0;
    for (const char *p = req; *p && n < 3;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        /* The last word of "start trace PATH" is the rest of the line. */
        size_t len = n == 2 ? strlen(p) : strcspn(p, " ");
        if (len >= MT_PATH_MAX) {
            mt_out_str(o, "error request too long\n");
            return;
        }
        memcpy(words[n], p, len);
        words[n++][len] = '\0';
        p += len;
    }
    if (n == 1 && strcmp(words[0], "stop") == 0) {
        stop(from_signal, o);
    } else if (n >= 2 && strcmp(words[0], "start") == 0) {
        start(words[1], n == 3 ? words[2] : NULL, from_signal, o);
    } else {
        mt_out_str(o, "error usage: 'start detail', 'start sample', 'start trace [PATH]' or 'stop'\n");
    }
}

void mt_rec_request(const char *req, int from_signal, int fd)
{
    static char text[2 * MT_PATH_MAX + 1024]; /* a trace's summary names its path */
    mt_out o;
    mt_out_init(&o, text, sizeof text, -1);
    atomic_store(&switching, (pid_t)syscall(SYS_gettid));
    if (atomic_load(&leaving))
        mt_out_str(
            &o, "error the process is ending (exit or exec): a trace being recorded is finished there (its "
                "stderr says where)\n");
    else
        switch_recording(req, from_signal, &o);
    answer(fd, req, &o);
    atomic_store(&switching, 0);
}

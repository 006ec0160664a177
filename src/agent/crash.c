/* crash.c — the report on fatal signals, like the NMT section of a JVM
 * hs_err file, and on the signals that end a process by their default
 * action (SIGTERM, SIGHUP, ...: term_sigs).
 *
 * At start-up the agent takes SIGSEGV, SIGBUS, SIGABRT, SIGFPE and SIGILL
 * where their disposition is still the default (a program or runtime that
 * installed its own handler keeps it; one that chains to the previous
 * handler, as CPython's faulthandler does, reaches ours after its own).
 * The handler runs on an alternate signal stack, so a stack overflow is
 * reported too, and does only async-signal-safe work: it sums the counters
 * (lock-free), prints a summary on stderr with mt_out, writes the report
 * file with the static-buffer writer (reason "signal SIGSEGV"), then lets
 * the default action happen, so the process dies of the same signal.
 *
 * Never looping, never hanging: the crash signals stay blocked while the
 * handler runs, so a fault inside it gets the default action from the
 * kernel at once; a crash signal raised again on the reporting thread
 * (abort() in a chained handler) and a crash on a second thread go to the
 * default action too (the second thread after giving the first a bounded
 * time to finish its report). The report writer's own lock is a bounded
 * try-lock, so a thread holding it cannot stall the crash report.
 *
 * Termination: a service is most often ended by SIGTERM (systemd, docker,
 * kill), a pipeline's writer by SIGPIPE, a terminal's program by SIGHUP or
 * SIGQUIT. With crash_report=on the agent takes those too where their
 * disposition is still the default, and writes the report quietly (as at
 * exit: no summary on stderr), reason "signal SIGTERM", before the process
 * dies of the signal as it would have (not in a container's PID 1, which
 * the kernel keeps from dying of a signal at its default; nor in a vfork
 * child: the default action there, at once). A signal that lands in the
 * agent's own work on a thread (a stack walk, a report) waits for it to
 * end; one during the report at exit, for that report, which is then the
 * last. SIGINT is left alone: CPython
 * installs its KeyboardInterrupt handler only when it finds SIGINT at
 * the default. Ruby does the same for SIGTERM and others, so the agent's
 * handler on these is hidden: sigaction and signal report SIG_DFL for it
 * (the interposers below), and a program that installs its own only over
 * the default still does. crash_report=crash keeps to the crash signals. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/site.h"
#include "agent/trace.h"
#include "agent/vm.h"
#include "common/out.h"

int mt_crash_report_opt = MT_CRASH_REPORT_ON;

#define CRASH_STACK_SIZE (64 * 1024)
#define CRASH_GUARD_SIZE 4096
/* How long a second crashing thread waits for the first one's report. */
#define CRASH_WAIT_STEPS 200 /* x 10 ms */
/* How long a terminating signal waits for the report at exit. */
#define REPORT_WAIT_STEPS (MT_REPORT_WAIT_MS / 10) /* x 10 ms */
static _Atomic int exit_report;                    /* MT_EXIT_REPORT_* (mt_crash_exit_report) */
static _Atomic int exit_signal;                    /* a terminating signal waiting for it, or 0 */

static const struct {
    int sig;
    const char *name;
} crash_sigs[] = {
    {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGABRT, "SIGABRT"}, {SIGFPE, "SIGFPE"}, {SIGILL, "SIGILL"},
};
#define NCRASH ((int)(sizeof crash_sigs / sizeof crash_sigs[0]))

static const struct {
    int sig;
    const char *name;
} term_sigs[] = {
    {SIGTERM, "SIGTERM"}, {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"},
    {SIGPIPE, "SIGPIPE"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
    {SIGALRM, "SIGALRM"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
};
#define NTERM ((int)(sizeof term_sigs / sizeof term_sigs[0]))

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static int crash_installed;      /* at least one handler is ours */
static _Atomic long crash_owner; /* tid of the thread writing the crash report */
static MT_TLS void *crash_stack; /* this thread's alternate stack, if we made it */
static void crash_free_stack(void *mem);

/* Written only by the one thread that owns the crash (crash_owner). */
static struct {
    mt_catsum sum[MT_NSLOT];
    char out[1024];
    char path[MT_PATH_MAX];
    char reason[32];
} cr;

static const char *crash_signame(int sig)
{
    for (int i = 0; i < NCRASH; i++)
        if (crash_sigs[i].sig == sig)
            return crash_sigs[i].name;
    for (int i = 0; i < NTERM; i++)
        if (term_sigs[i].sig == sig)
            return term_sigs[i].name;
    return "SIG?";
}

/* What si_code says about the cause, or NULL. */
static const char *crash_cause(int sig, int code)
{
    if (code == SI_USER)
        return "sent by kill()";
    if (code == SI_TKILL)
        return "raised by abort, raise or tgkill";
    if (code == SI_QUEUE)
        return "sent by sigqueue()";
    if (code == SI_KERNEL)
        return sig == SIGSEGV ? "general protection fault" : "sent by the kernel";
    switch (sig) {
    case SIGSEGV:
        return code == SEGV_MAPERR   ? "address not mapped"
               : code == SEGV_ACCERR ? "access not permitted"
                                     : NULL;
    case SIGBUS:
        return code == BUS_ADRALN   ? "misaligned address"
               : code == BUS_ADRERR ? "no page behind the address (e.g. past the end of a mapped file)"
               : code == BUS_OBJERR ? "hardware error"
                                    : NULL;
    case SIGFPE:
        return code == FPE_INTDIV   ? "integer division by zero"
               : code == FPE_INTOVF ? "integer overflow"
                                    : "floating-point exception";
    case SIGILL:
        return code == ILL_ILLOPC   ? "illegal opcode"
               : code == ILL_ILLOPN ? "illegal operand"
                                    : "illegal instruction";
    }
    return NULL;
}

static void out_padded(mt_out *o, const char *s, size_t width)
{
    size_t n = strlen(s);
    mt_out_str(o, s);
    do
        mt_out_char(o, ' ');
    while (++n < width);
}

static void out_counts(mt_out *o, const mt_catsum *c)
{
    mt_out_field(o, "live_bytes", c->live_bytes);
    mt_out_field(o, "live_count", c->live_count);
    mt_out_field(o, "peak_bytes", c->peak_bytes);
}

/* The human-readable summary: the signal and where, then the native memory
 * per category and the total. Takes the sums so that more figures (virtual
 * memory) can join them here. */
static void out_vm(mt_out *o, const mt_vm_sum *v)
{
    mt_out_field(o, "reserved", v->reserved);
    mt_out_field(o, "committed", v->committed);
    mt_out_field(o, "resident", v->resident);
}

/* The address space per category, as the report just written found it. */
static void crash_write_vm(mt_out *o, const mt_vm_report *vm, int ncats)
{
    if (!vm->proc.ok)
        return;
    mt_out_str(o, "memtrail: address space at the crash (bytes):\n");
    for (int i = 0; i < ncats; i++) {
        if (!vm->sum[i].reserved)
            continue;
        mt_out_str(o, "memtrail:   ");
        out_padded(o, mt_cats[i].name, 15);
        out_vm(o, &vm->sum[i]);
        mt_out_char(o, '\n');
    }
    mt_out_str(o, "memtrail:   ");
    out_padded(o, "process", 15);
    mt_out_field(o, "rss_bytes", vm->proc.rss);
    mt_out_field(o, "peak_rss_bytes", vm->proc.peak_rss);
    mt_out_field(o, "reserved", vm->proc.reserved);
    mt_out_field(o, "committed", vm->proc.committed);
    mt_out_char(o, '\n');
}

static void crash_write_summary(mt_out *o, int sig, const siginfo_t *si, const mt_catsum sum[MT_NSLOT],
                                int ncats)
{
    mt_out_str(o, "memtrail: fatal signal ");
    mt_out_str(o, crash_signame(sig));
    mt_out_str(o, " in pid ");
    mt_out_u64(o, (uint64_t)getpid());
    mt_out_str(o, " (");
    mt_out_str(o, program_invocation_short_name);
    mt_out_str(o, "), thread ");
    mt_out_u64(o, (uint64_t)syscall(SYS_gettid));
    const char *cause = crash_cause(sig, si->si_code);
    if (cause) {
        mt_out_str(o, ": ");
        mt_out_str(o, cause);
    }
    if ((sig == SIGSEGV || sig == SIGBUS) && si->si_code > 0 && si->si_code != SI_KERNEL) {
        mt_out_str(o, cause ? ", at address " : ": at address ");
        mt_out_hex(o, (uintptr_t)si->si_addr);
    }
    mt_out_str(o, "\nmemtrail: native memory at the crash:\n");
    for (int i = 0; i < ncats; i++) {
        if (mt_cats[i].kind == MT_KIND_VM)
            continue;
        mt_out_str(o, "memtrail:   ");
        out_padded(o, mt_cats[i].name, 15);
        out_counts(o, &sum[i]);
        if (mt_cats[i].kind == MT_KIND_OVERHEAD)
            mt_out_str(o, " (memtrail's own)");
        mt_out_char(o, '\n');
    }
    mt_out_str(o, "memtrail:   ");
    out_padded(o, "total", 15);
    out_counts(o, &sum[MT_SLOT_TOTAL]);
    mt_out_str(o, " (the program's)\n");
}

/* Leaves the process to the signal's default action. A fault the kernel
 * raised recurs when the instruction runs again, now fatal (and the core
 * shows the faulting frame); any other signal (abort, kill, a chained
 * handler's raise, and every terminating one: the kernel's SIGXCPU does
 * not recur by itself) is sent again to this thread and unblocked. */
static void die(int sig, const siginfo_t *si, int crash)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (crash && si->si_code > 0 && sig != SIGABRT)
        return;
    syscall(SYS_tgkill, (long)getpid(), syscall(SYS_gettid), (long)sig);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
}

/* A terminating signal during the report at exit: the thread writing it
 * dies of it when the report is done (mt_crash_exit_report). */
static void note_exit_signal(int sig)
{
    int none = 0;
    if (atomic_load(&exit_report) != MT_EXIT_REPORT_NONE)
        atomic_compare_exchange_strong(&exit_signal, &none, sig);
}

/* The bound on a signal's wait for the agent's work (fatal_signal): a
 * timer that sends it to this thread again, deleted when it is sent
 * again the usual way. Raw system calls: safe in a handler. */
#define DEFER_MAX_S (MT_REPORT_WAIT_MS / 1000)
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif
static MT_TLS int defer_timer = -1;

static void arm_deferral_timer(int sig)
{
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = sig;
    ev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    int id;
    if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &id) != 0)
        return;
    struct itimerspec at;
    memset(&at, 0, sizeof at);
    at.it_value.tv_sec = DEFER_MAX_S;
    if (syscall(SYS_timer_settime, id, 0, &at, NULL) != 0) {
        syscall(SYS_timer_delete, id);
        return;
    }
    defer_timer = id;
}

static void disarm_deferral_timer(void)
{
    if (defer_timer >= 0)
        syscall(SYS_timer_delete, defer_timer);
    defer_timer = -1;
}

/* The report at a fatal signal; crash: a crash signal (summary on stderr),
 * else a terminating one (quiet). */
static void fatal_signal(int sig, siginfo_t *si, int crash)
{
    int saved_errno = errno;
    /* A signal in a vfork child (its parent's memory: not even crash_owner
     * is its own) gets its default action at once, as without the agent. */
    if (!mt_own_process()) {
        die(sig, si, crash);
        errno = saved_errno;
        return;
    }
    if (!crash && (mt_t.in_agent > 0 || mt_t.vm_locked > 0)) {
        /* A terminating signal that lands in the agent's own work on this
         * thread (a stack walk, a report being written, a trace being
         * finished, the VM table held: locks this frame may hold) waits
         * for it: the outermost mt_agent_leave or mt_vm_unlock sends it
         * again. Not for ever: a second one meanwhile, or DEFER_MAX_S
         * later the same one again from a timer (a program's handler that
         * longjmp'd out of the agent's work left it unfinished), gets the
         * default action at once. During the report at exit, its writer
         * dies of it once the report is done, wherever this thread is. */
        if (mt_t.term_pending) {
            die(sig, si, crash);
        } else {
            mt_t.term_pending = (unsigned char)sig;
            note_exit_signal(sig);
            arm_deferral_timer(sig);
        }
        errno = saved_errno;
        return;
    }
    if (!crash && atomic_load(&exit_report) != MT_EXIT_REPORT_NONE) {
        /* The report at exit is written, or being written on another
         * thread: it is the last one. The process dies of the signal once
         * it is done (a bounded wait): the thread that wrote it sends it
         * to itself, before the exit that would end this thread too. */
        note_exit_signal(sig);
        for (int i = 0; atomic_load(&exit_report) != MT_EXIT_REPORT_DONE && i < REPORT_WAIT_STEPS; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        die(sig, si, crash);
        errno = saved_errno;
        return;
    }
    long tid = syscall(SYS_gettid);
    long owner = 0;
    if (!atomic_compare_exchange_strong(&crash_owner, &owner, tid)) {
        /* Another thread is writing the report and will end the process;
         * give it time to finish. On this thread, we were re-entered by a
         * crash signal raised in a handler (ours or one chained to it). */
        for (int i = 0; owner != tid && i < CRASH_WAIT_STEPS; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        die(sig, si, crash);
        errno = saved_errno;
        return;
    }
    mt_agent_enter();
    int ncats = atomic_load(&mt_ncats);
    mt_counters_sum(cr.sum);

    /* The malloc figures first: they need nothing that can fail. */
    mt_out o;
    if (crash) {
        mt_out_init(&o, cr.out, sizeof cr.out, 2);
        crash_write_summary(&o, sig, si, cr.sum, ncats);
        mt_out_flush(&o);
    }

    mt_out_init(&o, cr.reason, sizeof cr.reason, -1);
    mt_out_str(&o, "signal ");
    mt_out_str(&o, crash_signame(sig));
    mt_out_cstr(&o);
    /* Trace mode: the trace gets what was buffered, and the report goes
     * beside it (OUTPUT.mtr, mt_report_summary_path), not over it. */
    mt_trace_crash(cr.reason); /* a trace started on demand too */
    if (mt_report_summary_path(cr.path, sizeof cr.path) < 0)
        cr.path[0] = '\0';
    /* The report reads the kernel's view of the address space, which the
     * summary then shows. On failure the writer says why. */
    mt_control_cut_query();
    if (mt_report_write_to(NULL, cr.reason) == 0 && crash) {
        mt_out_init(&o, cr.out, sizeof cr.out, 2);
        crash_write_vm(&o, mt_report_last_vm(), ncats);
        mt_out_str(&o, "memtrail: crash report written to ");
        mt_out_str(&o, cr.path);
        mt_out_char(&o, '\n');
        mt_out_flush(&o);
    }
    mt_control_shutdown(); /* the process is going: no stale socket */
    mt_agent_leave();
    die(sig, si, crash);
    errno = saved_errno;
}

/* A terminating signal that waited for the agent's work on this thread
 * (fatal_signal), sent again now that the work is done: the handler
 * takes it as if it came now. */
void mt_crash_resend(void)
{
    int saved_errno = errno;
    int sig = mt_t.term_pending;
    mt_t.term_pending = 0;
    disarm_deferral_timer();
    syscall(SYS_tgkill, (long)getpid(), syscall(SYS_gettid), (long)sig);
    errno = saved_errno;
}

/* The report at exit begins (MT_EXIT_REPORT_WRITING) or is written
 * (MT_EXIT_REPORT_DONE): a terminating signal then adds no report of its own. */
void mt_crash_exit_report(int state)
{
    atomic_store(&exit_report, state);
    if (state != MT_EXIT_REPORT_DONE)
        return;
    /* One another thread noted, or one waiting on this thread (an exit
     * from a handler that interrupted the agent's work, where the leave
     * after this one is not the outermost). */
    int sig = atomic_load(&exit_signal);
    if (!sig)
        sig = mt_t.term_pending;
    if (sig)
        die(sig, NULL, 0);
}

void mt_crash_after_fork_child(void)
{
    mt_t.term_pending = 0;
    defer_timer = -1; /* the parent's: a child has no timers */
    atomic_store(&exit_report, MT_EXIT_REPORT_NONE);
    atomic_store(&exit_signal, 0);
}

static void crash_handler(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    fatal_signal(sig, si, 1);
}

static void term_handler(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    fatal_signal(sig, si, 0);
}

/* Gives the calling thread an alternate signal stack with a guard page
 * below it, unless it has one. */
void mt_crash_thread_start(void)
{
    if (!crash_installed || crash_stack)
        return;
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
        return;
    mt_agent_enter();
    char *mem = mt_os_alloc(CRASH_GUARD_SIZE + CRASH_STACK_SIZE);
    if (mem) {
        mprotect(mem, CRASH_GUARD_SIZE, PROT_NONE);
        stack_t st = {.ss_sp = mem + CRASH_GUARD_SIZE, .ss_size = CRASH_STACK_SIZE, .ss_flags = 0};
        if (sigaltstack(&st, NULL) == 0)
            crash_stack = mem;
        else
            crash_free_stack(mem);
    }
    mt_agent_leave();
}

/* Releases the alternate stack mt_crash_thread_start made for this thread. */
void mt_crash_thread_exit(void)
{
    char *mem = crash_stack;
    if (!mem)
        return;
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || (cur.ss_flags & SS_ONSTACK))
        return; /* running on it: leave it be */
    if (!(cur.ss_flags & SS_DISABLE) && cur.ss_sp != mem + CRASH_GUARD_SIZE)
        return; /* the program replaced it; ours may still be in use elsewhere */
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    crash_stack = NULL;
    mt_agent_enter();
    crash_free_stack(mem);
    mt_agent_leave();
}

static void crash_free_stack(void *mem)
{
    size_t size = (CRASH_GUARD_SIZE + CRASH_STACK_SIZE + 4095) & ~(size_t)4095;
    if (munmap(mem, size) == 0)
        atomic_fetch_sub(&mt_glob[MT_CAT_OVERHEAD].live_bytes, (int64_t)size);
}

/* Installs sa for sig if its disposition is still the default. */
static int take_if_default(int sig, const struct sigaction *sa)
{
    struct sigaction old;
    return real_sigaction(sig, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
           old.sa_handler == SIG_DFL && real_sigaction(sig, sa, NULL) == 0;
}

void mt_crash_install(void)
{
    if (!mt_crash_report_opt || crash_installed)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = crash_handler;
    /* SA_ONSTACK: a stack overflow can still be reported. All crash signals
     * blocked while it runs: a fault inside it is fatal at once. */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NCRASH; i++)
        sigaddset(&sa.sa_mask, crash_sigs[i].sig);
    for (int i = 0; i < NTERM; i++) /* a SIGPIPE from the summary, a SIGTERM meanwhile: after the report */
        sigaddset(&sa.sa_mask, term_sigs[i].sig);
    for (int i = 0; i < NCRASH; i++)
        if (take_if_default(crash_sigs[i].sig, &sa))
            crash_installed = 1;
    /* The terminating signals, but not in a PID namespace's init (a
     * container's PID 1): the kernel drops a signal at SIG_DFL sent to it,
     * so die() could not end it, and the program would run on after
     * its report. On the alternate stack too (a thread's may be small);
     * the crash signals and these blocked meanwhile. */
    if (mt_crash_report_opt == MT_CRASH_REPORT_ON && getpid() != 1) {
        sa.sa_sigaction = term_handler;
        for (int i = 0; i < NTERM; i++)
            (void)take_if_default(term_sigs[i].sig, &sa);
    }
    mt_crash_thread_start(); /* the thread that starts the agent, normally the main one */
}

/* ---- the agent's terminating-signal handler, hidden -------------------------
 * A program that asks sees SIG_DFL where the handler is term_handler: what
 * it would see without the agent, and what runtimes test before they
 * install their own (the header comment). Installing one replaces ours as
 * usual. The real functions are the next definitions (dlsym RTLD_NEXT),
 * found at start-up (mt_crash_resolve), before any handler can run: a
 * call from a signal handler never reaches dlsym. Before that, glibc's
 * own __sigaction; signal and its kin look theirs up at once. */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*sighandler_fn)(int);
typedef sighandler_fn (*signal_fn)(int, sighandler_fn);
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

static sigaction_fn next_sigaction;

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    sigaction_fn f = __atomic_load_n(&next_sigaction, __ATOMIC_ACQUIRE);
    return f ? f(sig, act, old) : __sigaction(sig, act, old);
}

/* Whether a handler the kernel holds is the agent's terminating one. */
static int is_term_handler(const struct sigaction *a)
{
    return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == term_handler;
}

MT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int rc = real_sigaction(sig, act, old);
    if (rc == 0 && old && is_term_handler(old)) {
        memset(old, 0, sizeof *old);
        old->sa_handler = SIG_DFL;
    }
    return rc;
}

/* signal and its other names (ssignal, bsd_signal, sysv_signal, and
 * __sysv_signal, which strict-standard builds call), and sigset: glibc's
 * call its internal sigaction, which no interposer sees, and hand back the
 * old handler: SIG_DFL where it was ours. */
enum { SIG_SIGNAL, SIG_SSIGNAL, SIG_BSD, SIG_SYSV, SIG_SYSV2, SIG_SIGSET, SIG_NTWINS };
static const char *const twin_names[SIG_NTWINS] = {"signal",      "ssignal",       "bsd_signal",
                                                   "sysv_signal", "__sysv_signal", "sigset"};
static signal_fn next_twin[SIG_NTWINS];

static signal_fn twin(int i)
{
    signal_fn f = __atomic_load_n(&next_twin[i], __ATOMIC_ACQUIRE);
    if (!f && (f = (signal_fn)dlsym(RTLD_NEXT, twin_names[i])) != NULL) /* before start-up only */
        __atomic_store_n(&next_twin[i], f, __ATOMIC_RELEASE);
    return f;
}

static sighandler_fn call_twin(int i, int sig, sighandler_fn h)
{
    signal_fn f = twin(i);
    if (!f) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    sighandler_fn old = f(sig, h);
    return old == (sighandler_fn)(void (*)(void))term_handler ? SIG_DFL : old;
}

void mt_crash_resolve(void)
{
    sigaction_fn f = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (f)
        __atomic_store_n(&next_sigaction, f, __ATOMIC_RELEASE);
    for (int i = 0; i < SIG_NTWINS; i++)
        (void)twin(i);
}

#define MT_SIGNAL_TWIN(name, i)                                                                              \
    MT_EXPORT sighandler_fn name(int sig, sighandler_fn h);                                                  \
    MT_EXPORT sighandler_fn name(int sig, sighandler_fn h)                                                   \
    {                                                                                                        \
        return call_twin(i, sig, h);                                                                         \
    }
MT_SIGNAL_TWIN(signal, SIG_SIGNAL)
MT_SIGNAL_TWIN(ssignal, SIG_SSIGNAL)
MT_SIGNAL_TWIN(bsd_signal, SIG_BSD)
MT_SIGNAL_TWIN(sysv_signal, SIG_SYSV)
MT_SIGNAL_TWIN(__sysv_signal, SIG_SYSV2)
MT_SIGNAL_TWIN(sigset, SIG_SIGSET)

/* termsig.c — ends by a signal whose default action terminates the
 * process (not a crash), after allocating known bytes in category
 * "termcat" and writing its ledger, so tests/agent/test_termsig.sh can
 * compare the report the agent writes at that signal with it.
 *
 * usage: termsig MODE LEDGER [FILE]
 *   TERM HUP QUIT USR1 USR2  kill(getpid(), SIG...): sent from outside, as
 *                            far as the process can tell
 *   PIPE     a write into a pipe nobody reads (the kernel's SIGPIPE)
 *   ALRM     alarm(1), then waits
 *   XCPU     a 1 s RLIMIT_CPU, then spins
 *   XFSZ     a 4 KiB RLIMIT_FSIZE, then writes 8 KiB into FILE
 *   smallfsize  a 4 KiB RLIMIT_FSIZE, then prints "bye" and exits 0: the
 *            agent's report at exit must not end it by SIGXFSZ
 *   wait     prints "ready", then waits to be killed from outside
 *   threads  two threads allocating and freeing all along (in category
 *            malloc), then SIGTERM as TERM
 *   disp     prints what sigaction, signal, sysv_signal, bsd_signal and
 *            sigset say the dispositions of SIGTERM, SIGHUP and SIGPIPE
 *            are ("dfl" or "other"), changing nothing, and exits 0
 *   vfork    SIGTERM in a vfork child (prints "child SIGTERM" when it died
 *            of it), then a NULL dereference in the parent
 *   sigcgt   prints "pid1=yes|no caught=yes|no": whether SIGTERM has a
 *            handler, as /proc/self/status says (SigCgt), and exits 0
 *   graceful installs its own SIGTERM handler only where it finds the
 *            default, as Ruby does; then SIGTERM: its handler sets a
 *            flag, main prints "graceful" and exits 0
 *   deep     allocates and frees 48 calls deep for ever; a timer on the
 *            process's CPU clock sends SIGTERM after FILE ms of it (in
 *            detail mode the signal lands in the agent's stack walk most
 *            of the time)
 *   ljmp     a SIGPROF handler of its own that siglongjmps (a timeout
 *            idiom), 1 ms timers while it allocates 40 calls deep: it
 *            jumps when the signal lands in the agent's code (most often
 *            its stack walk), leaving that work unfinished, as the program
 *            never knows; after 200, SIGTERM, then 15 s of sleep and
 *            "survived" (exit 0) if it did. (Not out of glibc's malloc:
 *            a jump from there breaks glibc's own heap, agent or not.)
 *   exitself 16384 blocks kept from as many stacks, then exit 0; a thread
 *   exitother watching FILE (a directory, the report's) sends SIGTERM to
 *            the main thread (exitself) or to itself (exitother) as soon
 *            as a file NAME.tmp.* appears there: the report at exit being
 *            written
 * A signal the process survives (it was ignored at start-up): exit 5. */
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "ledger.h"
#include "memtrail.h"

static ledger book;

/* ledger.h's EXPECT counter, which this program does not use */
static void unused(void) __attribute__((unused));
static void unused(void)
{
    (void)test_failures;
}

/* Blocks of known sizes in "termcat", one freed, the rest kept. */
static void allocate_known(void)
{
    static const size_t sizes[] = {100, 2000, 30000, 300000, 3 << 20};
    void *kept[sizeof sizes / sizeof sizes[0]];
    if (mt_tag_push("termcat") != 0 &&
        mt_is_active()) /* without the agent: all in malloc, no ledger to match */
        dprintf(2, "termsig: mt_tag_push failed\n");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        kept[i] = malloc(sizes[i]);
        memset(kept[i], 0x5a, sizes[i]);
        ledger_alloc(&book, (int64_t)sizes[i]);
    }
    free(kept[1]);
    ledger_free(&book, (int64_t)sizes[1]);
    mt_tag_pop();
}

static void *churn(void *arg)
{
    (void)arg;
    void *keep[32] = {0};
    for (unsigned i = 0;; i++) {
        free(keep[i % 32]);
        keep[i % 32] = malloc(16 + i % 4000);
    }
    return NULL;
}

typedef void (*handler_fn)(int);
extern handler_fn bsd_signal(int, handler_fn);
extern handler_fn sysv_signal(int, handler_fn);

/* What way `how` of asking says sig's disposition is: "dfl" or "other".
 * Each asks in a child of its own (fork keeps the handlers), as the first
 * and only call there: an earlier call's SIG_DFL, put back, would hide
 * whatever the next one should have seen. */
static const char *ask(int sig, int how)
{
    int p[2];
    if (pipe(p) != 0)
        return "error";
    pid_t c = fork();
    if (c == 0) {
        handler_fn h = SIG_ERR;
        struct sigaction old;
        if (how == 0)
            h = sigaction(sig, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) ? old.sa_handler : SIG_ERR;
        else if (how == 1)
            h = signal(sig, SIG_DFL);
        else if (how == 2)
            h = sysv_signal(sig, SIG_DFL);
        else if (how == 3)
            h = bsd_signal(sig, SIG_DFL);
        else {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
            h = sigset(sig, SIG_DFL); /* deprecated, and still called */
#pragma GCC diagnostic pop
        }
        char r = h == SIG_DFL ? 'd' : 'o';
        ssize_t w = write(p[1], &r, 1);
        _exit(w == 1 ? 0 : 1);
    }
    close(p[1]);
    char r = '?';
    ssize_t n = read(p[0], &r, 1);
    close(p[0]);
    waitpid(c, NULL, 0);
    return n != 1 ? "error" : r == 'd' ? "dfl" : "other";
}

static void print_disp(int sig, const char *name)
{
    printf("%s sigaction=%s signal=%s sysv_signal=%s bsd_signal=%s sigset=%s\n", name, ask(sig, 0),
           ask(sig, 1), ask(sig, 2), ask(sig, 3), ask(sig, 4));
}

/* "deep": a chain of 48 calls, then one malloc and free, again and
 * again. */
__attribute__((noinline)) static void down(int left, unsigned salt)
{
    if (left == 0) {
        char *p = malloc(16 + salt % 200);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    } else {
        down(left - 1, salt);
    }
    __asm__ volatile("" ::: "memory"); /* no tail call: a frame each */
}

static int deep(const char *ms)
{
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGTERM;
    timer_t t;
    long n = ms ? atol(ms) : 100;
    struct itimerspec at = {.it_value = {n / 1000, (n % 1000) * 1000000}};
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &t) != 0 || timer_settime(t, 0, &at, NULL) != 0)
        return 3;
    for (unsigned i = 0;; i++)
        down(48, i);
}

/* "ljmp" */
static sigjmp_buf jump_back;
static volatile sig_atomic_t jumps;
static uintptr_t agent_lo, agent_hi; /* the agent's code */

static int find_agent(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "/libmemtrail.so"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            agent_lo = info->dlpi_addr + ph->p_vaddr;
            agent_hi = agent_lo + ph->p_memsz;
        }
    }
    return 1;
}

static void on_prof(int sig, siginfo_t *si, void *ucv)
{
    (void)sig, (void)si;
    const ucontext_t *uc = ucv;
#if defined(__x86_64__)
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
#else
    uintptr_t pc = agent_lo;
#endif
    if (pc < agent_lo || pc >= agent_hi)
        return; /* not in the agent's code: glibc's malloc, say, which a jump would break */
    jumps++;
    siglongjmp(jump_back, 1);
}

static int ljmp(void)
{
    dl_iterate_phdr(find_agent, NULL);
    if (!agent_lo) {
        fprintf(stderr, "termsig ljmp: the agent is not loaded\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval every = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &every, NULL);
    sigsetjmp(jump_back, 1);
    while (jumps < 200)
        down(40, (unsigned)jumps);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    kill(getpid(), SIGTERM);
    sleep(15);
    printf("survived\n");
    return 0;
}

/* "exitself", "exitother": 2^14 stacks through a binary recursion, each
 * leaving a 16-byte block. */
static void split(unsigned bits, int left);
__attribute__((noinline)) static void split_a(unsigned bits, int left)
{
    split(bits, left);
    __asm__ volatile("nop" ::: "memory");
}
__attribute__((noinline)) static void split_b(unsigned bits, int left)
{
    split(bits, left);
    __asm__ volatile("nop; nop" ::: "memory");
}
__attribute__((noinline)) static void split(unsigned bits, int left)
{
    if (left == 0) {
        char *p = malloc(16);
        __asm__ volatile("" : : "r"(p) : "memory"); /* kept */
    } else if (bits & 1) {
        split_a(bits >> 1, left - 1);
    } else {
        split_b(bits >> 1, left - 1);
    }
    __asm__ volatile("" ::: "memory");
}

static pid_t main_tid;
static int watch_fd, to_watcher;

static void *watcher(void *arg)
{
    (void)arg;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(watch_fd, buf, sizeof buf);
        if (n <= 0)
            return NULL;
        for (char *q = buf; q < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)q;
            if (e->len && strstr(e->name, ".tmp.")) {
                syscall(SYS_tgkill, getpid(), to_watcher ? (pid_t)syscall(SYS_gettid) : main_tid, SIGTERM);
                for (;;)
                    pause();
            }
            q += sizeof *e + e->len;
        }
    }
}

static int exit_during_report(const char *dir, int other)
{
    main_tid = (pid_t)syscall(SYS_gettid);
    to_watcher = other;
    for (unsigned i = 0; i < 1u << 14; i++)
        split(i, 14);
    watch_fd = inotify_init1(IN_CLOEXEC);
    pthread_t t;
    if (!dir || watch_fd < 0 || inotify_add_watch(watch_fd, dir, IN_CREATE) < 0 ||
        pthread_create(&t, NULL, watcher, NULL) != 0)
        return 3;
    printf("exiting\n");
    return 0;
}

static volatile sig_atomic_t got_term;
static void on_term(int sig)
{
    (void)sig;
    got_term = 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        dprintf(2, "usage: termsig MODE LEDGER [FILE]\n");
        return 2;
    }
    const char *mode = argv[1], *file = argc > 3 ? argv[3] : NULL;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "sigcgt") == 0) { /* is SIGTERM caught, as the kernel says */
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        unsigned long long cgt = 0;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "SigCgt: %llx", &cgt) == 1)
                break;
        if (f)
            fclose(f);
        printf("pid1=%s caught=%s\n", getpid() == 1 ? "yes" : "no", cgt >> (SIGTERM - 1) & 1 ? "yes" : "no");
        return 0;
    }
    if (strcmp(mode, "disp") == 0) {
        print_disp(SIGTERM, "TERM");
        print_disp(SIGHUP, "HUP");
        print_disp(SIGPIPE, "PIPE");
        return 0;
    }
    allocate_known();
    ledger_write(argv[2], "termcat", &book, 0);
    if (strcmp(mode, "smallfsize") == 0) {
        struct rlimit r = {4096, RLIM_INFINITY};
        if (setrlimit(RLIMIT_FSIZE, &r) != 0)
            return 3;
        printf("bye\n");
        return 0;
    }
    static const struct {
        const char *name;
        int sig;
    } kills[] = {{"TERM", SIGTERM}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
    for (size_t i = 0; i < sizeof kills / sizeof kills[0]; i++)
        if (strcmp(mode, kills[i].name) == 0) {
            kill(getpid(), kills[i].sig);
            return 5;
        }
    if (strcmp(mode, "PIPE") == 0) {
        int p[2];
        if (pipe(p) != 0)
            return 3;
        close(p[0]);
        ssize_t w = write(p[1], "x", 1);
        (void)w;
        return 5;
    } else if (strcmp(mode, "ALRM") == 0) {
        alarm(1);
        for (int i = 0; i < 50; i++)
            usleep(100000);
        return 5;
    } else if (strcmp(mode, "XCPU") == 0) {
        struct rlimit r = {1, RLIM_INFINITY};
        if (setrlimit(RLIMIT_CPU, &r) != 0)
            return 3;
        for (volatile uint64_t i = 0; i < (1ull << 40); i++)
            ;
        return 5;
    } else if (strcmp(mode, "XFSZ") == 0 && file) {
        struct rlimit r = {4096, RLIM_INFINITY};
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || setrlimit(RLIMIT_FSIZE, &r) != 0)
            return 3;
        static char buf[8192];
        ssize_t w = write(fd, buf, sizeof buf);
        w = write(fd, buf, sizeof buf); /* the first may stop at the limit */
        (void)w;
        return 5;
    } else if (strcmp(mode, "wait") == 0) {
        printf("ready\n");
        for (int i = 0; i < 600; i++)
            usleep(100000);
        return 5;
    } else if (strcmp(mode, "threads") == 0) {
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, churn, NULL);
        usleep(200000);
        kill(getpid(), SIGTERM);
        usleep(2000000);
        return 5;
    } else if (strcmp(mode, "vfork") == 0) {
        /* SIGTERM in a vfork child, which shares this memory: it dies of
         * it; then this process crashes, and its crash report must come */
        pid_t c = vfork();
        if (c == 0) {
            kill(getpid(), SIGTERM);
            _exit(7);
        }
        int st = 0;
        waitpid(c, &st, 0);
        printf("child %s\n", WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM ? "SIGTERM" : "other");
        volatile int *null = NULL;
        *null = 1;
        return 5;
    } else if (strcmp(mode, "graceful") == 0) {
        struct sigaction mine, old;
        memset(&mine, 0, sizeof mine);
        mine.sa_handler = on_term;
        sigemptyset(&mine.sa_mask);
        sigaction(SIGTERM, &mine, &old);
        if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
            sigaction(SIGTERM, &old, NULL); /* someone else's: theirs stays */
        kill(getpid(), SIGTERM);
        for (int i = 0; i < 100 && !got_term; i++)
            usleep(10000);
        if (!got_term)
            return 4;
        printf("graceful\n");
        return 0;
    }
    if (strcmp(mode, "deep") == 0)
        return deep(file);
    if (strcmp(mode, "ljmp") == 0)
        return ljmp();
    if (strcmp(mode, "exitself") == 0 || strcmp(mode, "exitother") == 0)
        return exit_during_report(file, strcmp(mode, "exitother") == 0);
    dprintf(2, "termsig: unknown mode %s\n", mode);
    return 2;
}

/* crasher.c — dies of a fatal signal in one of several ways, after
 * allocating known bytes in category "crashcat" and writing its ledger, so
 * tests/agent/test_crash.sh can compare the crash report with it.
 *
 * usage: crasher MODE LEDGER [FILE]
 *   segv     NULL dereference           abort   abort()
 *   stack    unbounded recursion         bus     touch a truncated mapping (FILE)
 *   fpe      integer division by zero    ill     __builtin_trap()
 *   thread   NULL dereference in a second thread (which allocates too)
 *   threadstack  stack overflow in a second thread (which allocates too)
 *   own      NULL dereference with the program's own SIGSEGV handler
 *   inhook   free() of a pointer into PROT_NONE memory: the fault is in
 *            the agent's free hook
 *   busy     NULL dereference while another thread holds the report
 *            writer (stuck in readlink, interposed below); FILE = its report
 *   nested   abort(), then a fault inside the crash handler (in readlink)
 *
 * Lines on stdout: "addr 0x..." (the address a bus fault will report) and
 * "tid N" (the thread that crashes). */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ledger.h"
#include "memtrail.h"

static ledger book;
static const char *ledger_path;

/* Allocates blocks of known sizes in "crashcat", frees one of them, keeps
 * the rest live. The ledger is written by whoever calls write_book. */
static void allocate_known(int64_t salt)
{
    static const size_t sizes[] = {100, 2000, 30000, 300000, 3 << 20};
    void *kept[sizeof sizes / sizeof sizes[0]];
    EXPECT(mt_tag_push("crashcat") == 0, "mt_tag_push failed (agent active: %d)", mt_is_active());
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i] + (size_t)salt;
        kept[i] = malloc(n);
        memset(kept[i], 0x5a, n);
        ledger_alloc(&book, (int64_t)n);
    }
    free(kept[1]);
    ledger_free(&book, (int64_t)(sizes[1] + (size_t)salt));
    mt_tag_pop();
}

static void write_book(void)
{
    ledger_write(ledger_path, "crashcat", &book, 0);
}

static void say(const char *what, unsigned long v)
{
    dprintf(1, "%s 0x%lx\n", what, v);
}

static void null_deref(void)
{
    volatile int *p = NULL;
    *p = 1;
}

static volatile int recursion_limit = -1;
static int recurse(int depth)
{
    volatile char pad[512];
    pad[0] = (char)depth;
    if (depth == recursion_limit)
        return 0;
    return recurse(depth + 1) + pad[0];
}

static void *thread_main(void *arg)
{
    (void)arg;
    allocate_known(7);
    write_book();
    dprintf(1, "tid %ld\n", (long)syscall(SYS_gettid));
    null_deref();
    return NULL;
}

/* Stack overflow on a thread: its alternate stack comes from the agent's
 * pthread_create trampoline. */
static void *overflow_main(void *arg)
{
    (void)arg;
    allocate_known(7);
    write_book();
    dprintf(1, "tid %ld\n", (long)syscall(SYS_gettid));
    return (void *)(intptr_t)recurse(0);
}

static void own_handler(int sig)
{
    (void)sig;
    static const char msg[] = "own handler ran\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    _exit(42);
}

/* readlink, as the report writer calls it, for the busy and nested modes. */
enum { RL_PLAIN, RL_HOLD, RL_FAULT };
static _Atomic int readlink_mode;
static _Atomic int holding;
ssize_t readlink(const char *path, char *buf, size_t n)
{
    int mode = atomic_load(&readlink_mode);
    if (mode == RL_HOLD) {
        atomic_store(&holding, 1);
        for (;;)
            pause();
    }
    if (mode == RL_FAULT)
        null_deref();
    return syscall(SYS_readlink, path, buf, n);
}

static void *hold_writer(void *path)
{
    if (mt_report_write(path) < 0) /* without the agent: nothing to hold */
        atomic_store(&holding, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        dprintf(2, "usage: crasher MODE LEDGER [FILE]\n");
        return 2;
    }
    const char *mode = argv[1], *file = argc > 3 ? argv[3] : NULL;
    ledger_path = argv[2];
    allocate_known(0);

    if (strcmp(mode, "thread") == 0 || strcmp(mode, "threadstack") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, mode[6] ? overflow_main : thread_main, NULL);
        pthread_join(t, NULL);
        return 1;
    }
    write_book();
    if (strcmp(mode, "segv") == 0) {
        null_deref();
    } else if (strcmp(mode, "abort") == 0) {
        abort();
    } else if (strcmp(mode, "stack") == 0) {
        return recurse(0);
    } else if (strcmp(mode, "bus") == 0 && file) {
        int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, 8192) != 0)
            return 3;
        volatile char *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED || ftruncate(fd, 0) != 0)
            return 3;
        say("addr", (unsigned long)(m + 4096));
        return m[4096];
    } else if (strcmp(mode, "fpe") == 0) {
        volatile int zero = 0, one = 1;
        return one / zero;
    } else if (strcmp(mode, "ill") == 0) {
        __builtin_trap();
    } else if (strcmp(mode, "own") == 0) {
        signal(SIGSEGV, own_handler);
        null_deref();
    } else if (strcmp(mode, "inhook") == 0) {
        char *m = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return 3;
        free(m + 64);
    } else if (strcmp(mode, "busy") == 0 && file) {
        atomic_store(&readlink_mode, RL_HOLD);
        pthread_t t;
        pthread_create(&t, NULL, hold_writer, (void *)file);
        while (!atomic_load(&holding))
            sched_yield();
        null_deref();
    } else if (strcmp(mode, "nested") == 0) {
        atomic_store(&readlink_mode, RL_FAULT);
        abort();
    } else {
        dprintf(2, "crasher: unknown mode %s\n", mode);
        return 2;
    }
    return 1; /* not reached */
}

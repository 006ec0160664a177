/* segv.c — a hostile program for the agent: takes SIGSEGV itself (as JITs,
 * garbage collectors and sandboxes do) and survives its own faults:
 *   1. writes to a PROT_NONE page; the handler siglongjmps out; 3 times,
 *      allocating between the faults and inside the recovered path;
 *   2. writes to a PROT_NONE page; the handler mprotects it writable and
 *      returns, so the faulting write is retried and succeeds.
 * Prints "recovered" and "fixed" and exits 0. A tracker's own SIGSEGV
 * handler must not take these faults for a crash. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sigjmp_buf env;
static volatile sig_atomic_t fixing;
static char *volatile page;
static long pagesize;
static volatile sig_atomic_t faults;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    faults++;
    char *addr = si->si_addr;
    if (addr < page || addr >= page + pagesize)
        _exit(90); /* a fault we did not make */
    if (fixing) {
        mprotect(page, (size_t)pagesize, PROT_READ | PROT_WRITE);
        return;
    }
    siglongjmp(env, 1);
}

/* Writes to the PROT_NONE page; 1 when the handler jumped back here. The
 * sigsetjmp lives in its own frame so no local of main's is live across it. */
static __attribute__((noinline)) int fault_and_jump(int i)
{
    if (sigsetjmp(env, 1) == 0) {
        page[i] = 1; /* faults */
        return 0;
    }
    return 1;
}

int main(void)
{
    pagesize = sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        return 3;
    page = mmap(NULL, (size_t)pagesize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 4;

    int recovered = 0;
    for (int i = 0; i < 3; i++) {
        char *before = malloc(100 + (size_t)i);
        recovered += fault_and_jump(i);
        char *after = malloc(200);
        memset(after, i, 200);
        free(before);
        free(after);
    }
    if (recovered == 3)
        printf("recovered\n");

    fixing = 1;
    page[7] = 42; /* faults once; the handler makes the page writable */
    char *p = malloc(64);
    p[0] = page[7];
    if (p[0] == 42)
        printf("fixed\n");
    free(p);
    printf("faults %d\n", (int)faults);
    return 0;
}

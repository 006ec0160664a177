/* idstep.c — mallocs in a loop single-stepped (the x86 trap flag): after
 * every instruction of the loop, and so inside the agent's allocation-id
 * code right after the thread-local xadd that takes an id, a SIGTRAP handler
 * mallocs a block of its own (all kept live to the
 * end, so a duplicated id shows as an id allocated while live). In trace
 * mode every block must get an id of its own however the handler's malloc
 * nests (tests/agent/test_trace_threads.sh reads ids_reused: 0). Usage:
 * idstep N (N mallocs, kept live until the end, then freed). */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>

#define HELD_MAX (1 << 20)
static volatile sig_atomic_t traps;
static void *held[HELD_MAX]; /* the handler's blocks, live until the end */

static uintptr_t agent_lo, agent_hi; /* libmemtrail.so's code */

/* Only where the agent's own code runs: in libc's malloc its lock may be
 * held, and a handler's malloc there would deadlock in libc itself. */
static void on_trap(int sig, siginfo_t *si, void *uc_)
{
    (void)sig, (void)si;
    uintptr_t pc = (uintptr_t)((ucontext_t *)uc_)->uc_mcontext.gregs[REG_RIP];
    static uintptr_t prev; /* the instruction just run */
    uintptr_t last = prev;
    prev = pc;
    if (last < agent_lo || last + 4 > agent_hi)
        return;
    /* Right after a thread-local xadd (fs: [rex] 0f c1): the agent's
     * per-thread id counter, the moment a nested malloc is most likely to
     * meet a half-taken id. */
    const unsigned char *b = (const unsigned char *)last;
    int rex = (b[1] & 0xf0) == 0x40;
    if (b[0] != 0x64 || b[1 + rex] != 0x0f || b[2 + rex] != 0xc1)
        return;
    static unsigned seen;
    if (++seen % 7 == 0) /* not always: the ids' parity between main and the handler moves */
        return;
    if (traps < HELD_MAX)
        held[traps] = malloc(24);
    traps++;
}

static void trap_flag(int on)
{
    if (on)
        __asm__ volatile("pushf; orl $0x100, (%%rsp); popf" ::: "memory", "cc");
    else
        __asm__ volatile("pushf; andl $~0x100, (%%rsp); popf" ::: "memory", "cc");
}

static void find_agent(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perm[8];
        if (strstr(line, "libmemtrail.so") && sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 &&
            perm[2] == 'x')
            agent_lo = lo, agent_hi = hi;
    }
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    void **keep = calloc((size_t)n, sizeof *keep);
    find_agent();
    struct sigaction sa = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    if (!keep || sigaction(SIGTRAP, &sa, NULL) != 0)
        return 2;
    trap_flag(1);
    for (int i = 0; i < n; i++)
        keep[i] = malloc(40);
    trap_flag(0);
    for (int i = 0; i < n; i++)
        free(keep[i]);
    for (long i = 0; i < traps && i < HELD_MAX; i++)
        free(held[i]);
    free(keep);
    printf("%d mallocs, %ld nested in the id's xadd\n", n, (long)traps);
    return 0;
}

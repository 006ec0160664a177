/* mlocked.c — a traced program that locks its memory (mlockall), makes
 * bursts of allocations, then sleeps: prints how many clock ticks the
 * agent's dispatcher thread (memtrail-xe) used during the sleep, which
 * must be about none (tests/agent/test_trace_threads.sh). Prints "skip"
 * when the memory cannot be locked (RLIMIT_MEMLOCK). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The dispatcher's utime + stime, in clock ticks; -1 if not found. */
static long dispatcher_ticks(void)
{
    char path[64], comm[64], stat[1024];
    for (int tid = getpid(); tid < getpid() + 64; tid++) {
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int got = fgets(comm, sizeof comm, f) != NULL;
        fclose(f);
        if (!got || strncmp(comm, "memtrail-xe", 11) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
        f = fopen(path, "r");
        got = f && fgets(stat, sizeof stat, f) != NULL;
        if (f)
            fclose(f);
        char *p = got ? strrchr(stat, ')') : NULL;
        unsigned long ut, st;
        /* after "comm)": state and 10 fields, then utime and stime */
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
            return (long)(ut + st);
    }
    return -1;
}

int main(void)
{
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        puts("skip");
        return 0;
    }
    for (int r = 0; r < 10; r++) {
        for (int i = 0; i < 200000; i++) {
            void *p = malloc(32);
            __asm__ volatile("" ::"r"(p) : "memory");
            free(p);
        }
        usleep(20000);
    }
    usleep(300000); /* the dispatcher catches up and falls idle */
    long before = dispatcher_ticks();
    usleep(1500000);
    long after = dispatcher_ticks();
    printf("idle dispatcher ticks: %ld\n", before < 0 || after < 0 ? -1 : after - before);
    return 0;
}

/* vmthreads: starts threads with a known stack size, writes a report while
 * they wait, and prints, from /proc/self/maps, what the "stacks" category
 * must hold: the main thread's [stack] plus each thread's stack mapping
 * and the PROT_NONE guard right below it ("expect stacks RESERVED
 * COMMITTED"), and the kernel's Rss of those mappings ("stack_rss N").
 * Usage: vmthreads REPORT_PATH NTHREADS */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtrail.h"

static pthread_barrier_t ready, done;
static uintptr_t where[64];

static void *worker(void *arg)
{
    volatile char local[64];
    local[0] = 1;
    where[(intptr_t)arg] = (uintptr_t)&local[0];
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&done);
    return NULL;
}

/* Sum of the sizes (and Rss) of the VMAs containing the addresses in
 * where[], of the PROT_NONE VMA right below each, and of [stack]. */
static void measure(int n, long *reserved, long *committed, long *rss)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    uintptr_t s = 0, e = 0, prev_s = 0, prev_e = 0;
    char perms[8] = "", prev_perms[8] = "";
    int counted = 0, guard_of_next = 0;
    *reserved = *committed = *rss = 0;
    while (fgets(line, sizeof line, f)) {
        uintptr_t a, b;
        char p[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, p) == 3 && strchr(line, '-') < strchr(line, ' ')) {
            prev_s = s, prev_e = e;
            memcpy(prev_perms, perms, sizeof perms);
            s = a, e = b;
            memcpy(perms, p, sizeof perms);
            counted = strstr(line, "[stack]") != NULL;
            for (int i = 0; i < n && !counted; i++)
                counted = where[i] >= s && where[i] < e;
            guard_of_next = 0;
            if (counted) {
                *reserved += (long)(e - s);
                *committed += (long)(e - s);
                if (!strstr(line, "[stack]") && strncmp(prev_perms, "---", 3) == 0 && prev_e == s)
                    *reserved += (long)(prev_e - prev_s);
            }
            (void)guard_of_next;
            continue;
        }
        long kb;
        if (counted && sscanf(line, "Rss: %ld kB", &kb) == 1)
            *rss += kb * 1024;
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[2]);
    if (n < 1 || n > 64)
        return 2;
    pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
    pthread_barrier_init(&done, NULL, (unsigned)n + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t t[64];
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &attr, worker, (void *)(intptr_t)i) != 0)
            return 3;
    pthread_barrier_wait(&ready);
    if (mt_report_write(argv[1]) != 0) /* warm-up: the first scan touches the agent's buffers */
        return 4;
    if (mt_report_write(argv[1]) != 0)
        return 4;
    long reserved, committed, rss;
    measure(n, &reserved, &committed, &rss);
    printf("expect stacks %ld %ld %ld\n", reserved, committed, rss);
    pthread_barrier_wait(&done);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return 0;
}

/* peak.c — a peak known exactly across threads: the main thread holds
 * 1 MiB in 4 KiB blocks, then N threads each allocate 200 000 bytes in
 * 50-byte blocks and all wait at a barrier, so that at that moment every
 * block is live at once (the true peak: 1 MiB + N x 200 000), then free
 * them. All in category "pk", which nothing else uses; with PEAK_SOLO set
 * and not empty, in no category of the program's own (malloc's, where the
 * agent's common paths count), and the true peak then has the threads'
 * arrays of pointers too (live at the barrier). Prints "peak BYTES".
 * Usage: peak NTHREADS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "memtrail.h"

#define PER_THREAD 200000
#define SMALL 50

static pthread_barrier_t all_held;
static int solo;

static void tag(void)
{
    if (!solo)
        mt_tag_push("pk");
}
static void untag(void)
{
    if (!solo)
        mt_tag_pop();
}

static void *worker(void *arg)
{
    (void)arg;
    void **b = malloc(sizeof(void *) * (PER_THREAD / SMALL));
    tag();
    for (int i = 0; i < PER_THREAD / SMALL; i++)
        b[i] = malloc(SMALL);
    untag();
    pthread_barrier_wait(&all_held);
    pthread_barrier_wait(&all_held); /* the main thread has looked */
    for (int i = 0; i < PER_THREAD / SMALL; i++)
        free(b[i]);
    free(b);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n < 1 || n > 512)
        return 2;
    void *big[256];
    const char *e = getenv("PEAK_SOLO");
    solo = e && *e;
    tag();
    for (int i = 0; i < 256; i++)
        big[i] = malloc(4096);
    untag();
    pthread_barrier_init(&all_held, NULL, (unsigned)n + 1);
    pthread_t t[512];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    pthread_barrier_wait(&all_held);
    pthread_barrier_wait(&all_held);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 256; i++)
        free(big[i]);
    long arrays = solo ? (long)n * (long)(sizeof(void *) * (PER_THREAD / SMALL)) : 0;
    printf("peak %ld\n", 256L * 4096 + (long)n * PER_THREAD + arrays);
    return 0;
}

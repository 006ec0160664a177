/* edgeprog.c — blocks at the page offsets where free would have to ask the
 * kernel whether the header can be read (0 and 32, src/agent/edge.h), freed
 * without that question, and still told apart from freed ones.
 *
 * 4 threads allocate HEAP blocks of 16 to 1015 bytes each and BIG blocks of
 * 300 KiB (glibc maps those: their pointers sit at offset 32); the main
 * thread frees them all (cross-thread frees), some through realloc. Then
 * two double frees: a mapped block (unmapped by then) and a heap block at
 * an edge offset, if there is one. Prints
 *     edge E of N
 *     ledger allocs A frees F reallocs R
 * E: the blocks at edge offsets among the N handed out (the frees the set
 * spares a probe). The test counts the probes with strace.
 * Usage: edgeprog HEAP BIG */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtrail.h"

#define THREADS 4

static long heap_n, big_n;
static char **blocks[THREADS];
static long edges[THREADS];

static int edge(const void *p)
{
    return ((uintptr_t)p & (4095 & ~32)) == 0;
}

static void *worker(void *arg)
{
    long t = (long)(intptr_t)arg, n = heap_n + big_n;
    char **b = blocks[t];
    mt_tag_push("edge");
    for (long i = 0; i < n; i++) {
        size_t size = i < heap_n ? 16 + (size_t)((i * 7919 + t * 131) % 1000) : 300 * 1024;
        b[i] = malloc(size);
        if (!b[i])
            return (void *)1;
        memset(b[i], (int)(i & 0xff), size < 64 ? size : 64);
        edges[t] += edge(b[i]);
    }
    mt_tag_pop();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    heap_n = atol(argv[1]);
    big_n = atol(argv[2]);
    if (heap_n < 1 || big_n < 1)
        return 2;
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) {
        blocks[t] = calloc((size_t)(heap_n + big_n), sizeof(char *));
        if (!blocks[t] || pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0)
            return 3;
    }
    mt_tag_push("edge");
    long e = 0, allocs = 0, frees = 0, reallocs = 0;
    for (long t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        if (r)
            return 4;
        e += edges[t];
        allocs += heap_n + big_n;
    }
    /* Every block freed by a thread that did not allocate it; every 7th
     * first moved by realloc (the old pointer leaves the set, the new one
     * may enter it). */
    char *heap_edge = NULL;
    for (long t = 0; t < THREADS; t++)
        for (long i = 0; i < heap_n + big_n; i++) {
            char *p = blocks[t][i];
            if (i % 7 == 0) {
                char *q = realloc(p, i < heap_n ? 2000 : 600 * 1024);
                if (!q)
                    return 5;
                reallocs++;
                e += edge(q);
                p = q;
            }
            if (i < heap_n && edge(p) && !heap_edge) {
                heap_edge = p; /* freed below, then freed again */
                continue;
            }
            free(p);
            frees++;
        }
    char *big = malloc(5u << 20);
    big[0] = 1;
    free(big);
    free(big); /* unmapped: the agent must probe, and report */
    allocs++;
    frees++;
    if (heap_edge) {
        free(heap_edge);
        free(heap_edge); /* its tombstone tells it */
        frees++;
    }
    mt_tag_pop();
    printf("edge %ld of %ld\n", e, allocs + reallocs);
    printf("ledger allocs %ld frees %ld reallocs %ld double %d\n", allocs, frees, reallocs, heap_edge ? 2 : 1);
    for (long t = 0; t < THREADS; t++)
        free(blocks[t]);
    return 0;
}

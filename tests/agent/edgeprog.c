/* edgeprog.c — blocks at the page offsets where free would have to ask the
 * kernel whether the header can be read (0 and 32, src/agent/edge.h), freed
 * without that question, and still told apart from freed ones.
 *
 * 4 threads allocate HEAP blocks of 16 to 1015 bytes each and BIG blocks of
 * 300 KiB (glibc maps those: their pointers sit at offset 32); the main
 * thread frees them all (cross-thread frees), every 7th after a realloc.
 * Then up to four double frees (see below). Every block is in category
 * "edge". Prints
 *     edge E of N
 *     ledger allocs A frees F reallocs R double D unmapped U
 * E: the pointers at edge offsets among the N handed out (each a free or
 * realloc the set spares a probe); A, F, R: what the report's "edge"
 * category must count; D: the double frees it must report, U of them of
 * blocks glibc had mapped (unmapped by the first free). The test
 * counts the probes with strace.
 * Usage: edgeprog HEAP BIG */
#include <malloc.h>
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
    /* A fixed threshold: glibc maps every block of 128 KiB or more (it
     * would otherwise raise the threshold at the first free of one). */
    if (mallopt(M_MMAP_THRESHOLD, 128 * 1024) != 1)
        return 3;
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
    /* Double frees, each of which the agent must probe, and report:
     * - a mapped block, unmapped by its free;
     * - the old pointer of a mapped block that realloc moved (mremap),
     *   when it moved;
     * - a page-aligned block (offset 0: its header is on the page below);
     * - a heap block at an edge offset (its tombstone tells it). */
    int doubles = 0, unmapped = 0; /* unmapped: of those, blocks glibc had mapped */
    char *big = malloc(5u << 20);
    big[0] = 1;
    e += edge(big);
    free(big);
    free(big);
    allocs++, frees++, doubles++, unmapped++;
    char *old = malloc(300 * 1024), *moved;
    e += edge(old);
    old[0] = 1;
    char *keep = malloc(64); /* a neighbour, so the mapping cannot grow in place as easily */
    moved = realloc(old, 16u << 20);
    if (!moved)
        return 6;
    e += edge(moved);
    allocs += 2, reallocs++;
    if (moved != old) {
        free(old); /* realloc freed it */
        doubles++, unmapped++;
    }
    free(moved);
    free(keep);
    frees += 2;
    char *aligned = memalign(4096, 1u << 20);
    if (!aligned)
        return 7;
    e += edge(aligned);
    free(aligned);
    free(aligned);
    allocs++, frees++, doubles++, unmapped++;
    if (heap_edge) {
        free(heap_edge);
        free(heap_edge);
        frees++, doubles++;
    }
    mt_tag_pop();
    printf("edge %ld of %ld\n", e, allocs + reallocs);
    printf("ledger allocs %ld frees %ld reallocs %ld double %d unmapped %d\n", allocs, frees, reallocs,
           doubles, unmapped);
    for (long t = 0; t < THREADS; t++)
        free(blocks[t]);
    return 0;
}

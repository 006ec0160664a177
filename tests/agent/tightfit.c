/* tightfit.c — what the agent's blocks take from glibc: for every size
 * from 6 to 2100 bytes, the chunk glibc hands the agent for a block of
 * that size (its size word, 8 bytes below the agent's 16-byte header) is
 * the chunk glibc itself hands a request of size + 16 (__libc_malloc), so
 * the canary costs glibc nothing: with canary=fit, at sizes 7 and 8 bytes
 * past a multiple of 16 it takes what room the chunk has (block.h's
 * mt_tail_tight). With `full` (canary=full, the default), the chunk of
 * size + 18 instead. Then
 * every block is written to its last byte, resized by one byte either
 * way and freed, half before the program's first category ("fit") and
 * half after: no canary may be reported. Run with the agent
 * preloaded and glibc's per-thread cache off (GLIBC_TUNABLES=
 * glibc.malloc.tcache_count=0), so every chunk is carved fresh. Prints
 * "fit N sizes"; exit 1 on a mismatch. With `idle` it does none of it
 * (what the same program leaves live without those blocks). Usage:
 * tightfit [idle|full] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtrail.h"

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);

#define LO 6
#define HI 2100

static size_t chunk_of(const void *real)
{
    size_t w;
    memcpy(&w, (const char *)real - sizeof w, sizeof w);
    return w & ~(size_t)7;
}

static void *blocks[HI + 1];

int main(int argc, char **argv)
{
    if (!mt_is_active()) {
        fprintf(stderr, "tightfit: the agent is not loaded\n");
        return 2;
    }
    if (argc > 1 && strcmp(argv[1], "idle") == 0) {
        printf("fit 0 sizes\n");
        return 0;
    }
    size_t extra = argc > 1 && strcmp(argv[1], "full") == 0 ? 18 : 16;
    int bad = 0, fit = 0;
    for (size_t n = LO; n <= HI; n++) {
        char *p = malloc(n);
        void *q = __libc_malloc(n + extra);
        if (!p || !q) {
            fprintf(stderr, "tightfit: out of memory at %zu\n", n);
            return 2;
        }
        size_t ours = chunk_of(p - 16), glibc = chunk_of(q);
        if (ours != glibc) {
            printf("size %zu: chunk %zu under the agent, %zu for a request of %zu\n", n, ours, glibc,
                   n + extra);
            bad = 1;
        } else {
            fit++;
        }
        memset(p, 'a', n);
        blocks[n] = p;
        __libc_free(q);
    }
    for (size_t n = LO; n <= HI; n++) {
        if (n % 3 == 0)
            blocks[n] = realloc(blocks[n], n + 1);
        else if (n % 3 == 1)
            blocks[n] = realloc(blocks[n], n - 1);
    }
    /* half freed while the program has no category of its own (free's
     * inline common path), half after its first (free_moded: a category
     * pushed once sends every later call there) */
    for (size_t n = LO + 1; n <= HI; n += 2)
        free(blocks[n]);
    mt_tag_push("fit");
    for (size_t n = LO; n <= HI; n += 2)
        free(blocks[n]);
    mt_tag_pop();
    printf("fit %d sizes\n", fit);
    return bad;
}

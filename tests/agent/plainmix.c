/* plainmix.c — 4 threads call every malloc-family entry point (malloc,
 * calloc, realloc, reallocarray, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, malloc_usable_size, free) in a fixed pattern and print
 * a checksum of what they read back: the same output with or without the
 * agent, over any allocator. No memtrail API. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPS 20000

static void *worker(void *arg)
{
    uintptr_t seed = (uintptr_t)arg, sum = 0;
    void *keep[64] = {0};
    for (int i = 0; i < OPS; i++) {
        size_t n = 1 + (seed = seed * 6364136223846793005u + 1442695040888963407u) % 9000;
        int slot = (int)(seed >> 40) % 64;
        free(keep[slot]);
        void *p = NULL;
        switch (i % 8) {
        case 0: p = malloc(n); break;
        case 1: p = calloc(1, n); break;
        case 2: p = reallocarray(malloc(16), n, 1); break;
        case 3:
            if (posix_memalign(&p, 64, n) != 0)
                p = NULL;
            break;
        case 4: p = aligned_alloc(256, n); break;
        case 5: p = memalign(32, n); break;
        case 6: p = (i % 64 == 6) ? valloc(n) : pvalloc(n); break;
        default: p = realloc(malloc(n / 2 + 1), n); break;
        }
        if (!p || malloc_usable_size(p) < n) {
            printf("FAIL allocation %d of %zu\n", i % 8, n);
            exit(1);
        }
        memset(p, (int)(n & 0xff), n);
        sum += ((unsigned char *)p)[n - 1];
        keep[slot] = p;
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    return (void *)sum;
}

int main(void)
{
    pthread_t t[4];
    uintptr_t total = 0;
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        total += (uintptr_t)r;
    }
    printf("plainmix %lu\n", (unsigned long)total);
    return 0;
}

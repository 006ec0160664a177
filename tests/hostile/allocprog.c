/* allocprog.c — the small allocating program the allocator tests
 * (tests/hostile/test_programs.sh) run with jemalloc, tcmalloc or mimalloc
 * preloaded next to the agent: every common entry point, two threads,
 * and a checksum of the data it kept, so a mix-up of allocators shows. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    uint64_t sum = 0;
    char *ring[32] = {0};
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1664525u + 1013904223u;
        int slot = i % 32;
        size_t n = 1 + (seed >> 12) % 5000;
        switch (seed % 5) {
        case 0:
            free(ring[slot]);
            ring[slot] = calloc(1, n);
            break;
        case 1: ring[slot] = realloc(ring[slot], n); break;
        case 2: {
            void *p = NULL;
            free(ring[slot]);
            ring[slot] = posix_memalign(&p, 64, n) == 0 ? p : NULL;
            break;
        }
        default: free(ring[slot]); ring[slot] = malloc(n);
        }
        if (!ring[slot])
            return NULL;
        ring[slot][0] = (char)(i & 0x7f);
        sum += (unsigned char)ring[slot][0];
    }
    for (int k = 0; k < 32; k++)
        free(ring[k]);
    return (void *)(uintptr_t)sum;
}

int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, work, (void *)(uintptr_t)(i + 7)) != 0)
            return 3;
    uint64_t main_sum = (uint64_t)(uintptr_t)work((void *)(uintptr_t)3);
    uint64_t sums[2];
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        sums[i] = (uint64_t)(uintptr_t)r;
    }
    char *s = strdup("allocprog");
    void *a = aligned_alloc(4096, 8192);
    printf("sums %llu %llu %llu\n", (unsigned long long)main_sum, (unsigned long long)sums[0],
           (unsigned long long)sums[1]);
    printf("%s aligned %d usable %d\n", s, a && ((uintptr_t)a % 4096) == 0,
           a && malloc_usable_size(a) >= 8192);
    free(a);
    free(s);
    return 0;
}

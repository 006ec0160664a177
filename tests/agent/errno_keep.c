/* errno_keep.c — the hooks leave errno as the allocator left it. THREADS
 * threads each make OPS calls of malloc, realloc and free, with errno set
 * to a value of their own before every call; after every call that
 * succeeded errno must still hold it. Run in trace mode with the smallest
 * trace buffer, producers wait for buffers and wake the dispatcher (system
 * calls that set errno) many times a run.
 *
 * Usage: errno_keep THREADS OPS. Prints "calls N", then "errno kept", or
 * how many calls changed errno (the first on stderr) and exits 1. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 512

static long ops;
static _Atomic long changed, calls;

static void *worker(void *arg)
{
    uintptr_t me = (uintptr_t)arg;
    void *slot[SLOTS] = {0};
    uint64_t x = 0x9E3779B97F4A7C15ull * (me + 1);
    int mine = 7000 + (int)me; /* not a value any system call sets */
    for (long i = 0; i < ops; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned k = (unsigned)(x % SLOTS);
        size_t size = 1 + (size_t)(x >> 20) % 600;
        errno = mine;
        const char *what;
        int ok = 1;
        if (!slot[k]) {
            what = "malloc";
            slot[k] = malloc(size);
            ok = slot[k] != NULL;
        } else if (x >> 60 < 4) {
            what = "realloc";
            void *p = realloc(slot[k], size);
            ok = p != NULL;
            if (ok)
                slot[k] = p;
        } else {
            what = "free";
            free(slot[k]);
            slot[k] = NULL;
        }
        calls++;
        if (ok && errno != mine && changed++ == 0)
            fprintf(stderr, "thread %u: %s (call %ld) changed errno from %d to %d\n", (unsigned)me, what, i,
                    mine, errno);
    }
    for (unsigned k = 0; k < SLOTS; k++)
        free(slot[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: errno_keep THREADS OPS\n");
        return 2;
    }
    int n = atoi(argv[1]);
    ops = atol(argv[2]);
    if (n < 1 || n > 64 || ops < 1) {
        fprintf(stderr, "errno_keep: THREADS 1..64, OPS > 0\n");
        return 2;
    }
    pthread_t t[64];
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("calls %ld\n", (long)calls);
    if (changed) {
        printf("errno changed by %ld calls\n", (long)changed);
        return 1;
    }
    printf("errno kept\n");
    return 0;
}

/* trace_limits.c — programs for trace mode under limits
 * (tests/agent/test_trace_limits.sh):
 *   trace_limits aslimit MIB   sets RLIMIT_AS to MIB MiB, mallocs 1 MiB
 *                              blocks (each touched) until malloc returns
 *                              NULL, frees them all, prints "blocks N", exits 0
 *   trace_limits threads N K   N threads, each K malloc/free pairs of mixed
 *                              sizes (some kept a while); prints "done"
 * A program that lives within its limits; the agent must too. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define MAX_BLOCKS 65536

static void *blocks[MAX_BLOCKS];

static int as_limit(long mib)
{
    struct rlimit rl = {.rlim_cur = (rlim_t)mib << 20, .rlim_max = (rlim_t)mib << 20};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        perror("setrlimit");
        return 1;
    }
    int n = 0;
    while (n < MAX_BLOCKS) {
        char *p = malloc(1 << 20);
        if (!p)
            break;
        memset(p, 1, 1 << 20);
        blocks[n++] = p;
    }
    for (int i = 0; i < n; i++)
        free(blocks[i]);
    printf("blocks %d\n", n);
    return 0;
}

static long per_thread;

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    void *keep[16] = {0};
    for (long i = 0; i < per_thread; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t size = 16 + (seed >> 16) % 2000;
        void *p = malloc(size);
        if (p)
            memset(p, 2, 8);
        unsigned k = (seed >> 8) % 16;
        free(keep[k]);
        keep[k] = p;
    }
    for (int k = 0; k < 16; k++)
        free(keep[k]);
    return NULL;
}

static int threads(int n, long k)
{
    pthread_t t[64];
    if (n > 64)
        n = 64;
    per_thread = k;
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, churn, (void *)(size_t)(i + 1)) != 0)
            return 1;
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "aslimit") == 0)
        return as_limit(atol(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "threads") == 0)
        return threads(atoi(argv[2]), atol(argv[3]));
    fprintf(stderr, "usage: trace_limits aslimit MIB | threads N K\n");
    return 2;
}

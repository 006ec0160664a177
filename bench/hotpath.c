/* hotpath.c — the malloc+free pair whose instruction count bench/hotpath.sh
 * measures: N iterations of one malloc of 16 to 215 bytes, a write to it,
 * and the free of the block allocated 64 iterations before (a small
 * window, so glibc serves it from its thread cache and the agent's share
 * stands out). Usage: hotpath [N] (default 1000000). */
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    void *keep[64] = {0};
    for (long i = 0; i < n; i++) {
        void *p = malloc(16 + (size_t)(i * 7919) % 200);
        if (!p)
            return 1;
        *(volatile char *)p = 1;
        free(keep[i & 63]);
        keep[i & 63] = p;
    }
    for (int k = 0; k < 64; k++)
        free(keep[k]);
    return 0;
}

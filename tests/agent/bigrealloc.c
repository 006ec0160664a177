/* bigrealloc.c — blocks of 1 MiB and more only (test_sample.sh): in
 * sample mode at 512 KiB every one is sampled with weight 1, so its sites
 * must equal an exact detail run's, a block resized at one site included.
 *   site_new:    40 blocks of 1 MiB, half freed
 *   site_grow:   each kept block grown to 2, 3, then 4 MiB at this one site
 *   site_other:  each kept block moved to another site (5 MiB), then freed */
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")
#define MIB (1u << 20)

NOINLINE static void *site_new(size_t n)
{
    void *p = malloc(n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_grow(void *q, size_t n)
{
    void *p = realloc(q, n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_other(void *q, size_t n)
{
    void *p = realloc(q, n);
    KEEP_FRAME();
    return p;
}

int main(void)
{
    void *keep[20];
    int nk = 0;
    for (int i = 0; i < 40; i++) {
        void *p = site_new(MIB);
        if (!p)
            return 1;
        memset(p, 1, 64);
        if (i % 2)
            free(p);
        else
            keep[nk++] = p;
    }
    for (int i = 0; i < nk; i++)
        for (size_t n = 2; n <= 4; n++)
            if (!(keep[i] = site_grow(keep[i], n * MIB)))
                return 1;
    for (int i = 0; i < nk; i++) {
        if (!(keep[i] = site_other(keep[i], 5 * MIB)))
            return 1;
        if (i % 2)
            free(keep[i]);
    }
    return 0;
}

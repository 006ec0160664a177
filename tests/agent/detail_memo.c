/* detail_memo.c — one malloc call reached by two paths that leave the
 * stack alike up to the frame where they part: leaf() is called from
 * via_a() and from via_b(), whose code and frames are the same (noipa:
 * not folded into one), from the same loop. Every walk from leaf's
 * malloc so starts at the same return address and the same stack
 * pointer; only the return address one frame up tells the two apart.
 * The paths alternate irregularly; a third, via_c, calls leaf one frame
 * deeper, and a fourth, via_d, from below an alloca of varying size (its
 * frame found from rbp, which the walk must then take into account). The
 * agent's memo of recent walks (site_cfi.c) must still give each path its
 * own site.
 *
 * Prints its ledger: "path NAME allocs N bytes N", one line per path.
 * Usage: detail_memo [N=3000] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BARRIER() __asm__ volatile("" ::: "memory")
void via_a(size_t n);
void via_b(size_t n);
void via_c_inner(size_t n);
void via_c(size_t n);
void via_d(size_t n, size_t pad);
static void **keep;
static long nkeep;

__attribute__((noipa)) static void leaf(size_t n)
{
    keep[nkeep++] = malloc(n);
    BARRIER();
}

__attribute__((noipa)) void via_a(size_t n)
{
    leaf(n);
    BARRIER();
}

__attribute__((noipa)) void via_b(size_t n)
{
    leaf(n);
    BARRIER();
}

__attribute__((noipa)) void via_c_inner(size_t n)
{
    leaf(n);
    BARRIER();
}

__attribute__((noipa)) void via_c(size_t n)
{
    via_c_inner(n);
    BARRIER();
}

__attribute__((noipa)) void via_d(size_t n, size_t pad)
{
    volatile char *v = __builtin_alloca(pad);
    v[0] = 1;
    leaf(n);
    BARRIER();
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 3000;
    if (n < 1)
        return 2;
    keep = calloc((size_t)n, sizeof *keep);
    long count[4] = {0, 0, 0, 0}, bytes[4] = {0, 0, 0, 0};
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (long i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int k = (int)(s % 9), path = k < 3 ? 0 : k < 6 ? 1 : k < 7 ? 2 : 3;
        size_t size = 16 + (size_t)(s >> 20) % 200;
        if (path == 0)
            via_a(size);
        else if (path == 1)
            via_b(size);
        else if (path == 2)
            via_c(size);
        else
            via_d(size, 16 + (size_t)(s >> 40) % 3 * 48);
        count[path]++;
        bytes[path] += (long)size;
    }
    const char *names[4] = {"via_a", "via_b", "via_c_inner", "via_d"};
    for (int p = 0; p < 4; p++)
        printf("path %s allocs %ld bytes %ld\n", names[p], count[p], bytes[p]);
    for (long i = 0; i < nkeep; i++)
        free(keep[i]);
    free(keep);
    return 0;
}

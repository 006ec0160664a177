/* detail_memo.c — one malloc call reached by two paths that leave the
 * stack alike up to the frame where they part: leaf() is called from
 * via_a() and from via_b(), whose code and frames are the same (noipa:
 * not folded into one), from the same loop. Every walk from leaf's
 * malloc so starts at the same return address and the same stack
 * pointer; only the return address one frame up tells the two apart.
 * The paths alternate irregularly; a third, via_c, calls leaf one frame
 * deeper, and a fourth, via_d, from below an alloca of varying size (its
 * frame found from rbp, which the walk must then take into account). Two
 * more, via_w1 and via_w2, alloca different sizes and call via_e, which
 * allocas the difference: leaf's stack pointer is the same on both, but
 * via_e's rbp, and so where its caller's return address lies, is not. The
 * agent's memo of recent walks (site_cfi.c) must still give each path its
 * own site.
 *
 * Prints its ledger: "path NAME frame K allocs N bytes N", one line per
 * path: NAME is the function in the path's frame K (leaf's is frame 0).
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
void via_e(size_t n, size_t pad);
void via_w1(size_t n, size_t k);
void via_w2(size_t n, size_t k);
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

__attribute__((noipa)) void via_e(size_t n, size_t pad)
{
    volatile char *v = __builtin_alloca(pad);
    v[0] = 1;
    leaf(n);
    BARRIER();
}

/* k + via_e's pad is the same on both: leaf's stack pointer too. */
#define W_TOTAL 256
__attribute__((noipa)) void via_w1(size_t n, size_t k)
{
    volatile char *v = __builtin_alloca(k);
    v[0] = 1;
    via_e(n, W_TOTAL - k);
    BARRIER();
}

__attribute__((noipa)) void via_w2(size_t n, size_t k)
{
    volatile char *v = __builtin_alloca(k);
    v[0] = 1;
    via_e(n, W_TOTAL - k);
    BARRIER();
}

static void (*volatile w_fn[2])(size_t, size_t) = {via_w1, via_w2};
static volatile int w_reps = 2;

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 3000;
    if (n < 1)
        return 2;
    keep = calloc(2 * (size_t)n, sizeof *keep); /* the w paths take two a step */
    long count[6] = {0}, bytes[6] = {0};
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (long i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int k = (int)(s % 11), path = k < 3 ? 0 : k < 6 ? 1 : k < 7 ? 2 : k < 8 ? 3 : k < 9 ? 4 : 5;
        size_t size = 16 + (size_t)(s >> 20) % 200;
        if (path == 0)
            via_a(size);
        else if (path == 1)
            via_b(size);
        else if (path == 2)
            via_c(size);
        else if (path == 3)
            via_d(size, 16 + (size_t)(s >> 40) % 3 * 48);
        else {
            /* One call site for both (the same return address in main),
             * and the other path at once after: nothing between them
             * writes where the first one's frames were. */
            for (int j = 0; j < w_reps; j++) {
                int w = j ? path ^ 1 : path;
                size_t sz = j ? 16 + (size_t)(s >> 28) % 200 : size;
                w_fn[w - 4](sz, w == 4 ? 32 : 160);
                count[w]++;
                bytes[w] += (long)sz;
            }
            continue;
        }
        count[path]++;
        bytes[path] += (long)size;
    }
    const char *names[6] = {"via_a", "via_b", "via_c_inner", "via_d", "via_w1", "via_w2"};
    for (int p = 0; p < 6; p++)
        printf("path %s frame %d allocs %ld bytes %ld\n", names[p], p < 4 ? 1 : 2, count[p], bytes[p]);
    for (long i = 0; i < nkeep; i++)
        free(keep[i]);
    free(keep);
    return 0;
}

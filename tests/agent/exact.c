/* exact.c — allocates known amounts through every malloc-family entry
 * point (realloc chains, aligned variants, blocks above the mmap
 * threshold, frees) in category "exact" and writes its own ledger, which
 * the report must match to the byte. With API_REPORT, it also asks for a
 * report through mt_report_write(). Usage: exact LEDGER_FILE [API_REPORT] */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "ledger.h"
#include "memtrail.h"

static ledger L;
/* Opaque to the compiler, so it cannot see (and warn about) the overflow. */
static volatile size_t huge = SIZE_MAX / 2;

static void *m(size_t n)
{
    void *p = malloc(n);
    EXPECT(p != NULL, "malloc(%zu) failed", n);
    ledger_alloc(&L, (int64_t)n);
    return p;
}
static void f(void *p, size_t n)
{
    free(p);
    ledger_free(&L, (int64_t)n);
}
static void *re(void *p, size_t from, size_t to)
{
    void *q = realloc(p, to);
    EXPECT(q != NULL, "realloc(%zu -> %zu) failed", from, to);
    ledger_resize(&L, (int64_t)from, (int64_t)to);
    return q;
}
static int aligned_ok(void *p, size_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        dprintf(2, "usage: exact LEDGER_FILE [API_REPORT]\n");
        return 2;
    }
    int active = mt_is_active();
    EXPECT(mt_tag_push("exact") == 0, "mt_tag_push failed (agent active: %d)", active);

    /* plain blocks, including zero-sized and one above the mmap threshold */
    char *a = m(100), *b = m(0), *big = m(3u << 20);
    EXPECT(malloc_usable_size(a) == 100, "usable size %zu, want the requested 100", malloc_usable_size(a));
    big[0] = 1;
    big[(3u << 20) - 1] = 2;

    /* calloc: zeroed, counted as n*m */
    unsigned char *c = calloc(10, 30);
    ledger_alloc(&L, 300);
    int zero = 1;
    for (int i = 0; i < 300; i++)
        zero &= c[i] == 0;
    EXPECT(zero, "calloc memory not zeroed");
    errno = 0;
    EXPECT(calloc(huge, 4) == NULL && errno == ENOMEM, "calloc overflow not refused");

    /* a realloc chain: grow, shrink, cross the mmap threshold and back */
    char *r = m(10);
    memcpy(r, "memtrail!", 10);
    r = re(r, 10, 1000);
    EXPECT(memcmp(r, "memtrail!", 10) == 0, "realloc lost the contents");
    r = re(r, 1000, 50);
    r = re(r, 50, 200000);
    r = re(r, 200000, 7);
    EXPECT(memcmp(r, "memtrai", 7) == 0, "realloc chain lost the contents");
    /* realloc(NULL, n) allocates; realloc(p, 0) frees (glibc) */
    char *rn = realloc(NULL, 64);
    ledger_alloc(&L, 64);
    char *rz = m(33);
    EXPECT(realloc(rz, 0) == NULL, "realloc(p, 0) did not return NULL");
    ledger_free(&L, 33);

    /* reallocarray */
    char *ra = reallocarray(NULL, 10, 12);
    ledger_alloc(&L, 120);
    ra = reallocarray(ra, 20, 12);
    ledger_resize(&L, 120, 240);
    errno = 0;
    EXPECT(reallocarray(ra, huge, 3) == NULL && errno == ENOMEM, "reallocarray overflow not refused");

    /* the aligned family */
    void *pm = NULL;
    EXPECT(posix_memalign(&pm, 64, 200) == 0 && aligned_ok(pm, 64), "posix_memalign(64)");
    ledger_alloc(&L, 200);
    EXPECT(posix_memalign(&pm, 3, 10) == EINVAL, "posix_memalign accepted a bad alignment");
    void *pm2 = NULL;
    EXPECT(posix_memalign(&pm2, 8, 24) == 0 && aligned_ok(pm2, 8), "posix_memalign(8)");
    ledger_alloc(&L, 24);
    void *aa = aligned_alloc(256, 512);
    EXPECT(aa && aligned_ok(aa, 256), "aligned_alloc(256)");
    ledger_alloc(&L, 512);
    void *ma = memalign(128, 77);
    EXPECT(ma && aligned_ok(ma, 128), "memalign(128)");
    ledger_alloc(&L, 77);
    long page = sysconf(_SC_PAGESIZE);
    void *va = valloc(1000);
    EXPECT(va && aligned_ok(va, (size_t)page), "valloc");
    ledger_alloc(&L, 1000);
    void *pv = pvalloc(1000); /* rounded up to a whole page */
    EXPECT(pv && aligned_ok(pv, (size_t)page), "pvalloc");
    EXPECT(malloc_usable_size(pv) == (size_t)page, "pvalloc usable size %zu", malloc_usable_size(pv));
    ledger_alloc(&L, page);
    void *bigal = aligned_alloc(4096, 2u << 20); /* aligned and above the mmap threshold */
    EXPECT(bigal && aligned_ok(bigal, 4096), "aligned_alloc(4096, 2 MiB)");
    ledger_alloc(&L, 2u << 20);
    /* realloc of an aligned block moves it to a plain one, contents kept */
    memset(ma, 0x5c, 77);
    char *mr = re(ma, 77, 5000);
    EXPECT(mr[0] == 0x5c && mr[76] == 0x5c, "realloc of an aligned block lost the contents");
    EXPECT(malloc_usable_size(mr) == 5000, "usable size after realloc %zu", malloc_usable_size(mr));

    /* frees, in a different order than the allocations */
    f(big, 3u << 20);
    f(c, 300);
    f(a, 100);
    f(pm, 200);
    f(bigal, 2u << 20);
    f(va, 1000);
    free(NULL);

    /* left live on purpose: b, r, rn, ra, pm2, aa, pv, mr */
    (void)b;
    (void)rn;
    (void)aa;
    (void)pv;
    (void)pm2;
    EXPECT(mt_tag_pop() == 0, "mt_tag_pop failed");
    if (argc == 3)
        EXPECT(mt_report_write(argv[2]) == 0, "mt_report_write(%s) failed", argv[2]);
    EXPECT(mt_tag_pop() == -ENOENT, "mt_tag_pop on an empty stack should fail");
    ledger_write(argv[1], "exact", &L, 0);
    dprintf(1, "%s exact: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures ? 1 : 0;
}

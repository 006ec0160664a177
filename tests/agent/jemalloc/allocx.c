/* allocx.c — allocates known amounts through jemalloc's own entry points
 * (mallocx, rallocx, xallocx, sallocx, dallocx, sdallocx) and plain
 * malloc/free, in category "allocx", keeping its own ledger. Linked with
 * libjemalloc.so.2, as programs that use this API are. Usage: allocx LEDGER */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../ledger.h"
#include "memtrail.h"

/* jemalloc's API (its header comes with libjemalloc-dev; these are all
 * the test needs). */
void *mallocx(size_t size, int flags);
void *rallocx(void *ptr, size_t size, int flags);
size_t xallocx(void *ptr, size_t size, size_t extra, int flags);
size_t sallocx(const void *ptr, int flags);
void dallocx(void *ptr, int flags);
void sdallocx(void *ptr, size_t size, int flags);
#define LG_ALIGN(la) ((int)(la))
#define ZERO 0x40

static ledger L;

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    mt_tag_push("allocx");
    void *a = mallocx(100, 0);
    EXPECT(a != NULL, "mallocx(100)");
    ledger_alloc(&L, 100);
    EXPECT(sallocx(a, 0) >= 100, "sallocx < 100");
    memset(a, 7, 100);

    unsigned char *b = mallocx(5000, LG_ALIGN(12) | ZERO);
    EXPECT(b && ((uintptr_t)b & 4095) == 0, "mallocx aligned 4096: %p", (void *)b);
    EXPECT(b && all_zero(b, 5000), "MALLOCX_ZERO block not zero");
    ledger_alloc(&L, 5000);

    a = rallocx(a, 3000, 0);
    EXPECT(a && ((unsigned char *)a)[99] == 7, "rallocx lost the bytes");
    ledger_resize(&L, 100, 3000);

    unsigned char *c = rallocx(mallocx(64, 0), 256, LG_ALIGN(6) | ZERO);
    ledger_alloc(&L, 64);
    EXPECT(c && ((uintptr_t)c & 63) == 0 && all_zero(c + 64, 192), "rallocx aligned+zero");
    /* A move to a new alignment: a new block, then the old one freed. */
    ledger_alloc(&L, 256);
    ledger_free(&L, 64);

    size_t got = xallocx(a, 6000, 0, 0);
    EXPECT(got >= 3000, "xallocx shrank the block: %zu", got);
    if (got >= 6000)
        ledger_resize(&L, 3000, 6000), got = 6000;
    else
        got = 3000;

    dallocx(a, 0);
    ledger_free(&L, (int64_t)got);
    sdallocx(b, 5000, 0);
    ledger_free(&L, 5000);
    void *keep = mallocx(777, 0); /* live at exit */
    ledger_alloc(&L, 777);
    free(c);
    ledger_free(&L, 256);
    mt_tag_pop();
    ledger_write(argv[1], "allocx", &L, 0);
    (void)keep;
    return test_failures ? 1 : 0;
}

/* heaperr.c — heap errors the agent must report instead of crashing:
 * double free (small block, header overwritten by glibc; large block,
 * already unmapped), an overwritten canary, and frees/reallocs of blocks
 * the agent never handed out, and the cases where glibc overwrites the
 * header of a freed block: a tiny block, a chunk glibc sorted into a large
 * bin, and the old pointer of a realloc that moved (from a small bin, and
 * merged back into glibc's top chunk). realloc-fail: reallocs the allocator
 * refuses (an address-space limit) leave the blocks as they were, their
 * canaries too, so their frees report nothing; realloc-fail-quick: the
 * same for reallocs below 64 KiB (the agent's common path), refused once
 * the address space is used up.
 * Every case runs in category "victim" (the agent's common paths of
 * malloc, free and realloc through their out-of-line twins for programs
 * with categories), unless HEAPERR_SOLO is set: the program then has no
 * category of its own, and those paths run inline.
 * overflow-zero and overflow-odd: sizes whose canary glibc's chunk has
 * little room for (block.h's mt_tail_tight): a string's terminator one
 * byte past a 40-byte block (no canary: glibc's next size word is there),
 * and one byte past a 39-byte block (a 1-byte canary).
 * overflow-page and overflow-mapped: a canary pages away from its block's
 * header, and one in a chunk glibc mapped for itself; overflow-mapped-small:
 * one in a block below 64 KiB that glibc mapped for itself (a threshold
 * lowered to 512 bytes); mapped-tail: such a
 * chunk's page the program never touched stays uncommitted.
 * realloc-mapped: a block of the agent's common range resized (below
 * 64 KiB) into a chunk glibc maps for itself, filled, then freed twice:
 * the first free counts it once with no error (its canary, pages from
 * its header, is not written: no page committed), the second finds the
 * chunk unmapped.
 * Usage: heaperr double|double-big|tiny|largebin|realloc-old|realloc-top|realloc-fail|
 *                realloc-fail-quick|overflow|overflow-zero|overflow-odd|
 *                overflow-page|overflow-mapped|overflow-mapped-small|mapped-tail|realloc-mapped|
 *                foreign */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ledger.h"
#include "memtrail.h"

extern void *__libc_malloc(size_t);
extern void *__libc_memalign(size_t, size_t);

/* Reallocs of blocks of 6, 7 and 40 bytes (6 and 7: the tombstone, at p,
 * covers the canary; 40: it does not, at p + 16) to `to` bytes under an
 * address-space limit `margin` MiB above what the process maps: each must
 * be refused and leave its block as it was. use_up: the margin is taken
 * first by 64 KiB heap blocks, then 4 KiB ones, so that even a small
 * realloc is refused. */
static void refused_reallocs(size_t to, unsigned margin, int use_up)
{
    size_t sizes[] = {6, 7, 40};
    char *b[3];
    for (int i = 0; i < 3; i++) {
        b[i] = malloc(sizes[i]);
        memset(b[i], 'a' + i, sizes[i]);
    }
    if (use_up)
        mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* 64 KiB blocks from the heap */
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    EXPECT(f && fscanf(f, "%ld", &pages) == 1, "cannot read /proc/self/statm");
    if (f)
        fclose(f);
    struct rlimit old, low;
    EXPECT(getrlimit(RLIMIT_AS, &old) == 0, "getrlimit");
    low = old;
    low.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)margin << 20);
    EXPECT(setrlimit(RLIMIT_AS, &low) == 0, "setrlimit(RLIMIT_AS)");
    static char *fill[8192];
    int n = 0;
    while (use_up && n < 4096 && (fill[n] = malloc(64 * 1024)) != NULL)
        n++;
    EXPECT(!use_up || n < 4096, "64 KiB blocks never ran out under a %u MiB margin", margin);
    while (use_up && n < 8192 && (fill[n] = malloc(4 * 1024)) != NULL)
        n++;
    EXPECT(!use_up || n < 8192, "4 KiB blocks never ran out under a %u MiB margin", margin);
    for (int i = 0; i < 3; i++) {
        char *q = realloc(b[i], to);
        EXPECT(q == NULL, "realloc(%zu -> %zu) succeeded under a %u MiB margin%s", sizes[i], to, margin,
               use_up ? ", used up" : "");
        int same = 1;
        for (size_t j = 0; j < sizes[i]; j++)
            same &= b[i][j] == 'a' + i;
        EXPECT(same, "a refused realloc changed the %zu-byte block", sizes[i]);
    }
    EXPECT(setrlimit(RLIMIT_AS, &old) == 0, "setrlimit back");
    for (int i = 0; i < n; i++)
        free(fill[i]);
    for (int i = 0; i < 3; i++)
        free(b[i]);
}

/* Writes one byte past a block of `size` bytes, one that surely differs
 * from what was there (a fixed byte equals the random canary's once in
 * 256), and frees it. */
static void overflow(char *p, size_t size)
{
    memset(p, 'x', size);
    volatile size_t past = size;
    p[past] = (char)~p[past];
    free(p);
}

/* Whether glibc mapped the chunk under a block of ours for itself: the
 * agent's real block starts 16 bytes below p, and glibc's size word (bit
 * 0x2: IS_MMAPPED) sits 8 bytes below that. */
static int glibc_mapped(const char *p)
{
    size_t size;
    memcpy(&size, p - 16 - sizeof size, sizeof size);
    return (size & 2) != 0;
}

/* glibc maps a 1 MiB block for itself whatever an earlier free or the
 * environment did to its threshold, and no huge page makes the first
 * touch of a page commit its neighbours. */
static void map_big_blocks(void)
{
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    const char *what = argv[1];
    if (!getenv("HEAPERR_SOLO"))
        mt_tag_push("victim");
    if (strcmp(what, "double") == 0) {
        char *p = malloc(100);
        free(p);
        free(p);
    } else if (strcmp(what, "double-big") == 0) {
        char *p = malloc(5u << 20);
        p[0] = 1;
        free(p);
        free(p);
    } else if (strcmp(what, "tiny") == 0) {
        char *p = malloc(1);
        free(p);
        free(p);
    } else if (strcmp(what, "largebin") == 0) {
        char *g1 = malloc(3000), *p = malloc(3000), *g2 = malloc(3000);
        free(p);
        void *sort = malloc(5000); /* sorts p's chunk into a large bin */
        free(p);
        (void)g1, (void)g2, (void)sort;
    } else if (strcmp(what, "realloc-top") == 0) {
        /* glibc merges the old chunk into the top chunk and leaves the
         * agent's header under it as it was */
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
        char *p = malloc(300 * 1024);
        char *q = realloc(p, 4u << 20); /* mapped: the old chunk goes back to the top */
        EXPECT(q != p, "realloc did not move the block");
        free(p);
        free(q);
    } else if (strcmp(what, "realloc-old") == 0) {
        char *p = malloc(100);
        char *guard = malloc(100); /* p cannot grow in place */
        char *q = realloc(p, 10000);
        EXPECT(q != p, "realloc did not move the block");
        free(p);
        (void)guard;
    } else if (strcmp(what, "realloc-fail") == 0) {
        refused_reallocs(1u << 30, 64, 0);
    } else if (strcmp(what, "realloc-fail-quick") == 0) {
        /* below 64 KiB: the agent's common path */
        refused_reallocs(60000, 8, 1);
    } else if (strcmp(what, "overflow") == 0) {
        overflow(malloc(40), 40);
    } else if (strcmp(what, "overflow-zero") == 0) {
        char *p = malloc(40);
        volatile size_t n = 40;
        memset(p, 'x', n);
        p[n] = '\0';
        free(p);
    } else if (strcmp(what, "overflow-odd") == 0) {
        overflow(malloc(39), 39);
    } else if (strcmp(what, "overflow-page") == 0) {
        /* a heap block whose canary is pages away from its header */
        overflow(malloc(9000), 9000);
    } else if (strcmp(what, "overflow-mapped") == 0) {
        /* a chunk glibc mapped for itself, shrunk in place to one page:
         * the canary shares the header's page */
        map_big_blocks();
        char *p = malloc(1u << 20);
        char *q = realloc(p, 100);
        EXPECT(q && glibc_mapped(q), "realloc(1 MiB -> 100) left a chunk glibc mapped (%p)", (void *)q);
        overflow(q, 100);
    } else if (strcmp(what, "overflow-mapped-small") == 0) {
        /* the agent's common range, but a mapped chunk: the long way */
        mallopt(M_MMAP_THRESHOLD, 512);
        char *p = malloc(1000);
        EXPECT(p && glibc_mapped(p), "malloc(1000) under a 512-byte threshold left a chunk glibc mapped (%p)",
               (void *)p);
        overflow(p, 1000);
    } else if (strcmp(what, "realloc-mapped") == 0) {
        /* no top chunk left to grow into: a realloc past 4 KiB maps */
        mallopt(M_MMAP_THRESHOLD, 4096);
        mallopt(M_TOP_PAD, 0);
        mallopt(M_TRIM_THRESHOLD, 0);
        char *p = malloc(100);
        EXPECT(p && !glibc_mapped(p), "malloc(100) came from glibc's heap (%p)", (void *)p);
        memset(p, 'a', 100);
        char *q = realloc(p, 40000);
        EXPECT(q && glibc_mapped(q),
               "realloc(100 -> 40000) under a 4 KiB threshold left a chunk glibc mapped (%p)", (void *)q);
        EXPECT(q[0] == 'a' && q[99] == 'a', "realloc kept the block's bytes");
        memset(q, 'b', 40000);
        free(q);
        free(q);
    } else if (strcmp(what, "mapped-tail") == 0) {
        /* Shrunk in place (mremap) to 5 pages, of which the program
         * touches none but the first: the agent must not commit the page
         * its canary would be on (the kernel's mincore says). */
        map_big_blocks();
        char *p = malloc(1u << 20);
        char *q = realloc(p, 20000);
        EXPECT(q && glibc_mapped(q), "realloc(1 MiB -> 20000) left a chunk glibc mapped (%p)", (void *)q);
        unsigned char first = 0, tail = 1;
        long pg = sysconf(_SC_PAGESIZE);
        char *qpage = (char *)((uintptr_t)q & ~(uintptr_t)(pg - 1));
        char *tpage = (char *)((uintptr_t)(q + 20000) & ~(uintptr_t)(pg - 1));
        EXPECT(tpage > qpage, "the block's end is on its first page");
        EXPECT(mincore(qpage, (size_t)pg, &first) == 0 && mincore(tpage, (size_t)pg, &tail) == 0, "mincore");
        dprintf(1, "first page %s, end page %s\n", first & 1 ? "resident" : "not resident",
                tail & 1 ? "resident" : "not resident");
        free(q);
    } else if (strcmp(what, "foreign") == 0) {
        /* blocks from the allocator below the agent: no header */
        char *a = __libc_malloc(64);
        char *b = __libc_memalign(4096, 8192);
        char *c = __libc_malloc(1 << 20);
        EXPECT(malloc_usable_size(a) >= 64, "usable size of a foreign block");
        strcpy(a, "kept");
        a = realloc(a, 100000);
        EXPECT(a && strcmp(a, "kept") == 0, "realloc of a foreign block lost it");
        free(a);
        free(b);
        free(c);
    } else {
        return 2;
    }
    mt_tag_pop();
    dprintf(1, "survived %s\n", what);
    return 0;
}

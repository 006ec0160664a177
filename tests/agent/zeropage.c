/* zeropage.c — one kernel mapping (VMA) split between two categories:
 * two adjacent private anonymous mappings, which the kernel merges, made
 * under tags "zp-a" and "zp-b". In each, some pages are written (resident,
 * the program's) and more are only read (the shared zero page: mapped, yet
 * nobody's memory, and not in the kernel's RSS). Some kernels give a read
 * fault a page of its own instead (seen: 6.18 under a paging hypervisor):
 * the kernel's own Rss (/proc/self/smaps) for a page read alone in its
 * mapping tells which, and there the reads count as resident. Writes a report and
 * prints what each category must show: "expect CATEGORY resident_bytes".
 * Usage: zeropage REPORT_PATH */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "memtrail.h"

#define PG 4096L
#define HALF 64

/* The Rss of the mapping that starts at `start`, from /proc/self/smaps, in
 * bytes; -1 if it is not found. */
static long smaps_rss(const char *start)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    long kb = -1;
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line */
            in = lo == (unsigned long)start;
        else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Whether this kernel gives a read fault on private anonymous memory a
 * page of its own (1) or the shared zero page (0): one page read, alone
 * in its mapping (PROT_NONE neighbours, which nothing merges with), and
 * the kernel's Rss for it; -1 if that cannot be told. */
static int reads_take_pages(void)
{
    char *g = mmap(NULL, 3 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED || mprotect(g + PG, PG, PROT_READ | PROT_WRITE) != 0)
        return -1;
    volatile char c = g[PG];
    (void)c;
    long rss = smaps_rss(g + PG);
    munmap(g, 3 * PG);
    return rss == PG ? 1 : rss == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    char *r = mmap(NULL, 2 * HALF * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return 2;
    mt_tag_push("zp-a");
    char *a = mmap(r, HALF * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    mt_tag_pop();
    mt_tag_push("zp-b");
    char *b = mmap(r + HALF * PG, HALF * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                   -1, 0);
    mt_tag_pop();
    if (a == MAP_FAILED || b == MAP_FAILED)
        return 2;
    volatile long sink = 0;
    for (long i = 0; i < 10; i++)
        a[i * PG] = 1;
    for (long i = 10; i < 40; i++)
        sink += a[i * PG];
    for (long i = 0; i < 20; i++)
        b[i * PG] = 1;
    for (long i = 20; i < 60; i++)
        sink += b[i * PG];
    int reads = reads_take_pages();
    if (reads < 0) {
        fprintf(stderr, "zeropage: cannot tell from /proc/self/smaps what a read fault maps\n");
        return 4;
    }
    if (mt_report_write(argv[1]) != 0)
        return 3;
    printf("expect zp-a %ld\nexpect zp-b %ld\n", (10 + reads * 30) * PG, (20 + reads * 40) * PG);
    return (int)(sink & 0);
}

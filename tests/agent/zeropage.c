/* zeropage.c — one kernel mapping (VMA) split between two categories:
 * two adjacent private anonymous mappings, which the kernel merges, made
 * under tags "zp-a" and "zp-b". In each, some pages are written (resident,
 * the program's) and more are only read (the shared zero page: mapped, yet
 * nobody's memory, and not in the kernel's RSS). Writes a report and
 * prints what each category must show: "expect CATEGORY resident_bytes".
 * Usage: zeropage REPORT_PATH */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "memtrail.h"

#define PG 4096L
#define HALF 64

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
    if (mt_report_write(argv[1]) != 0)
        return 3;
    printf("expect zp-a %ld\nexpect zp-b %ld\n", 10 * PG, 20 * PG);
    return (int)(sink & 0);
}

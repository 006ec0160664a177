/* many_sites.c — a detail report with many sites for the html test's
 * large page: a binary recursion of depth N (argv[1]) with one kept
 * allocation of 16 bytes per leaf, each leaf reached by its own return
 * addresses, so 2^N sites of 16 bytes. Prints the number of leaves. */
#include <stdio.h>
#include <stdlib.h>

static void *volatile keep;
static long leaves;

__attribute__((noinline)) static void leaf(void)
{
    keep = malloc(16);
    leaves++;
}

__attribute__((noinline)) static void walk(int d)
{
    if (d == 0) {
        leaf();
        return;
    }
    walk(d - 1); /* two call sites: two return addresses per level */
    __asm__ volatile("");
    walk(d - 1);
    __asm__ volatile("");
}

int main(int argc, char **argv)
{
    walk(argc > 1 ? atoi(argv[1]) : 10);
    printf("%ld\n", leaves);
    return 0;
}

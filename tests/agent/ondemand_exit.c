/* ondemand_exit.c — a program that allocates and frees without pause for
 * SECONDS, then returns from main (test_ondemand.sh stops its trace around
 * that moment: the stop and the exit race). Prints its pid first.
 * Usage: ondemand_exit SECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.5, t0 = now();
    printf("%d\n", (int)getpid());
    fflush(stdout);
    static void *keep[1024];
    unsigned i = 0;
    while (now() - t0 < secs) {
        for (int k = 0; k < 1000; k++, i++) {
            free(keep[i % 1024]);
            keep[i % 1024] = malloc(32 + i % 200);
        }
    }
    for (unsigned k = 0; k < 1024; k++)
        free(keep[k]);
    return 0;
}

/* topprog.c — a program to watch with `memtrail top` (tests/cli/test_top.sh),
 * run in detail mode. Each sort puts another category and site first:
 *
 *   big_live    category "big":    4 x 100 KiB kept       (live 400KB, allocs 4)
 *   spike       category "spike":  4 MiB allocated, freed (peak 4MB, live 0, allocs 1)
 *   many_small  category "churny": 2000 x 32 B, each freed (allocs 2000, live 0)
 *
 * then writes DIR/ready (its pid) and waits for DIR/go; then big_more
 * keeps 2 x 100 KiB more in "big" (live 600KB, allocs 6), writes
 * DIR/ready2 and waits for DIR/stop (at most about two minutes), then exits.
 * Nothing else allocates while it waits (access() and nanosleep).
 *
 * Usage: topprog DIR */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memtrail.h"
#include "pidfile.h"

#define BLOCK (100 * 1024)
#define BARRIER() __asm__ volatile("" ::: "memory")

static void *keep[8];
static int nkeep;

__attribute__((noinline)) static void big_live(int n)
{
    for (int i = 0; i < n; i++) {
        keep[nkeep] = malloc(BLOCK);
        memset(keep[nkeep++], 1, BLOCK);
    }
    BARRIER();
}

__attribute__((noinline)) static void big_more(int n)
{
    for (int i = 0; i < n; i++) {
        keep[nkeep] = malloc(BLOCK);
        memset(keep[nkeep++], 2, BLOCK);
    }
    BARRIER();
}

__attribute__((noinline)) static void spike(void)
{
    char *p = malloc(4 << 20);
    memset(p, 3, 4 << 20);
    BARRIER();
    free(p);
}

__attribute__((noinline)) static void many_small(void)
{
    for (int i = 0; i < 2000; i++) {
        void *p = malloc(32);
        BARRIER();
        free(p);
    }
}

/* DIR/name holding our pid. */
static void signal_ready(const char *dir, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pidfile_write(path);
}

static void wait_for(const char *dir, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct timespec ts = {0, 50 * 1000000};
    for (int i = 0; i < 2400 && access(path, F_OK) != 0; i++)
        nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    mt_tag_push("big");
    big_live(4);
    mt_tag_pop();
    mt_tag_push("spike");
    spike();
    mt_tag_pop();
    mt_tag_push("churny");
    many_small();
    mt_tag_pop();
    signal_ready(argv[1], "ready");
    wait_for(argv[1], "go");
    mt_tag_push("big");
    big_more(2);
    mt_tag_pop();
    signal_ready(argv[1], "ready2");
    wait_for(argv[1], "stop");
    return 0;
}

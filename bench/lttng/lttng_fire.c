/* lttng_fire.c — the LTTng-UST peer of bench/xe_fire.c: fires the
 * memtrail_bench:alloc tracepoint (memtrail_bench_tp.h, the same fields as
 * memtrail's allocation events) N times from each of T threads, several
 * runs, and prints the cost per event per thread the same way xe_fire
 * does (wall time of the parallel phase / N). Run by bench/lttng/run.sh
 * inside an active LTTng session; it refuses to time a tracepoint that no
 * session enabled (that would measure one predicted branch).
 * Usage: lttng_fire --events N --threads T --runs R [--pin] [--label L] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memtrail_bench_tp.h"

static uint64_t nevents = 10000000;
static int pin;
static pthread_barrier_t go;

typedef struct {
    pthread_t t;
    int idx;
    struct timespec t0, t1;
} prod;

static double ts_sec(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec * 1e-9;
}

static void *producer(void *arg)
{
    prod *p = arg;
    if (pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(p->idx % CPU_SETSIZE, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    pthread_barrier_wait(&go);
    clock_gettime(CLOCK_MONOTONIC, &p->t0);
    uint64_t addr = 0x7f0000000000ull + ((uint64_t)p->idx << 36);
    for (uint64_t i = 0; i < nevents; i++) {
        uint64_t size = 16 + (i & 255) * 16;
        lttng_ust_tracepoint(memtrail_bench, alloc, 1, 0, size, addr, 0, 0, 0, 0, 0);
        addr += size;
    }
    clock_gettime(CLOCK_MONOTONIC, &p->t1);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int threads = 1, runs = 5;
    const char *label = "default";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--events") && i + 1 < argc)
            nevents = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--pin"))
            pin = 1;
        else {
            fprintf(stderr, "lttng_fire: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (threads < 1 || threads > 64 || runs < 1 || runs > 100 || nevents == 0) {
        fprintf(stderr, "lttng_fire: bad --threads/--runs/--events\n");
        return 2;
    }
    if (!lttng_ust_tracepoint_enabled(memtrail_bench, alloc)) {
        fprintf(stderr, "lttng_fire: tracepoint memtrail_bench:alloc is not enabled by any "
                        "session (is lttng-sessiond running, the session started?)\n");
        return 1;
    }
    double ns[100];
    prod *ps = calloc((size_t)threads, sizeof *ps);
    for (int r = 0; r < runs; r++) {
        pthread_barrier_init(&go, NULL, (unsigned)threads);
        for (int i = 0; i < threads; i++) {
            ps[i].idx = i;
            pthread_create(&ps[i].t, NULL, producer, &ps[i]);
        }
        double t0 = 1e300, t1 = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(ps[i].t, NULL);
            if (ts_sec(&ps[i].t0) < t0)
                t0 = ts_sec(&ps[i].t0);
            if (ts_sec(&ps[i].t1) > t1)
                t1 = ts_sec(&ps[i].t1);
        }
        pthread_barrier_destroy(&go);
        ns[r] = (t1 - t0) * 1e9 / (double)nevents;
        printf("RUN impl=lttng label=%s threads=%d run=%d ns=%.2f\n", label, threads, r + 1, ns[r]);
    }
    qsort(ns, (size_t)runs, sizeof ns[0], cmp_double);
    printf("RESULT impl=lttng label=%s threads=%d pin=%s min=%.2f median=%.2f fired=%llu\n", label, threads,
           pin ? "producers" : "none", ns[0], runs % 2 ? ns[runs / 2] : (ns[runs / 2 - 1] + ns[runs / 2]) / 2,
           (unsigned long long)nevents * (unsigned long long)threads * (unsigned long long)runs);
    free(ps);
    return 0;
}

/* info_cost.c — what memory info and request spans cost, for bench/info.sh.
 * Run under the agent (LD_PRELOAD=libmemtrail.so); without it the mt_*
 * calls are the stub's no-ops and the figures say so.
 *
 *   info_cost snapshot WRITERS READERS SECONDS
 *       READERS threads call mt_memory_info(MT_EVENT_ANY) in a loop while
 *       WRITERS threads map and unmap memory (a GROW and a TRIM event per
 *       round) and allocate past new peaks. Prints ns per call (each
 *       reader's CPU time over its calls, so time-slicing on few cores does
 *       not count), the events the writers caused, and, in the same run,
 *       what the usual alternatives cost: mallinfo2() and reading
 *       /proc/self/statm.
 *   info_cost spans N
 *       N empty span begin/end pairs; then N malloc(64)/free pairs outside
 *       and inside a span (the cost of timing an allocator call).
 *   info_cost requests N K
 *       N requests of K mixed malloc/free each and a little work, each
 *       inside a span when INFO_COST_SPANS=on. bench/info.sh times whole
 *       runs of it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "memtrail.h"

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static _Atomic int stop;

static void *writer(void *arg)
{
    (void)arg;
    size_t grow = 1 << 20;
    char *held[64] = {0};
    unsigned n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        /* a GROW and a TRIM each round */
        char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            m[0] = 1;
            munmap(m, 1 << 20);
        }
        /* climb to new peaks now and then, and come back down */
        unsigned slot = n++ % 64;
        free(held[slot]);
        held[slot] = malloc(grow);
        if (held[slot])
            memset(held[slot], 1, 4096);
        if (slot == 63)
            grow += 1 << 16;
    }
    for (int i = 0; i < 64; i++)
        free(held[i]);
    return NULL;
}

struct reader_result {
    uint64_t calls, torn;
    double cpu_s;
};

static void *reader(void *arg)
{
    struct reader_result *r = arg;
    struct mt_memory_info info;
    double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    uint64_t last = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 1000; i++) {
            if (mt_memory_info(MT_EVENT_ANY, &info) != 0)
                continue;
            if (info.index < last)
                r->torn++; /* an index going backwards would be a torn or stale read */
            last = info.index;
        }
        r->calls += 1000;
    }
    r->cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID) - t0;
    return NULL;
}

/* ns per call of fn over n calls, on this thread's CPU clock. */
static double per_call(void (*fn)(void), long n)
{
    double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < n; i++)
        fn();
    return (now_s(CLOCK_THREAD_CPUTIME_ID) - t0) * 1e9 / (double)n;
}

static void call_mallinfo2(void)
{
    struct mallinfo2 m = mallinfo2();
    __asm__ volatile("" : : "r"(m.fordblks));
}

static int statm_fd = -1;
static void read_statm(void)
{
    char buf[128];
    ssize_t n = pread(statm_fd, buf, sizeof buf, 0);
    __asm__ volatile("" : : "r"(n));
}

static void call_info(void)
{
    struct mt_memory_info info;
    mt_memory_info(MT_EVENT_ANY, &info);
    __asm__ volatile("" : : "r"(info.index));
}

static void call_count(void)
{
    uint64_t c = mt_event_count(MT_EVENT_ANY);
    __asm__ volatile("" : : "r"(c));
}

static int snapshot(int writers, int readers, double seconds)
{
    if (writers < 0 || writers > 16 || readers < 1 || readers > 16 || seconds <= 0)
        return 2;
    statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    struct mt_memory_info probe;
    int rc = mt_memory_info(MT_EVENT_ANY, &probe);
    printf("agent %s\n", rc == 0 ? "yes" : "no (stub)");
    /* alone first: the call's own cost */
    printf("alone mt_memory_info_ns %.1f\n", per_call(call_info, 2000000));
    printf("alone mt_event_count_ns %.1f\n", per_call(call_count, 20000000));
    printf("alone mallinfo2_ns %.1f\n", per_call(call_mallinfo2, 200000));
    printf("alone statm_read_ns %.1f\n", per_call(read_statm, 200000));
    uint64_t ev0 = mt_event_count(MT_EVENT_ANY);
    pthread_t w[16], r[16];
    struct reader_result res[16];
    memset(res, 0, sizeof res);
    for (int i = 0; i < writers; i++)
        pthread_create(&w[i], NULL, writer, NULL);
    for (int i = 0; i < readers; i++)
        pthread_create(&r[i], NULL, reader, &res[i]);
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&stop, 1);
    for (int i = 0; i < writers; i++)
        pthread_join(w[i], NULL);
    uint64_t calls = 0, torn = 0;
    double cpu = 0;
    for (int i = 0; i < readers; i++) {
        pthread_join(r[i], NULL);
        calls += res[i].calls;
        torn += res[i].torn;
        cpu += res[i].cpu_s;
    }
    printf("concurrent readers %d writers %d calls %llu events %llu backwards %llu\n", readers, writers,
           (unsigned long long)calls, (unsigned long long)(mt_event_count(MT_EVENT_ANY) - ev0),
           (unsigned long long)torn);
    printf("concurrent mt_memory_info_ns %.1f\n", calls ? cpu * 1e9 / (double)calls : 0.0);
    return 0;
}

static void span_pair(void)
{
    mt_span_begin("bench");
    mt_span_end();
}

static void malloc_free(void)
{
    void *p = malloc(64);
    __asm__ volatile("" : : "r"(p) : "memory");
    free(p);
}

static int spans(long n)
{
    if (n < 1)
        return 2;
    int rc = mt_span_begin("probe");
    printf("agent %s\n", rc == 0 ? "yes" : "no (stub)");
    if (rc == 0)
        mt_span_end();
    per_call(span_pair, n / 10); /* warm: the name's table entry and pages */
    printf("span_pair_ns %.1f\n", per_call(span_pair, n));
    double outside = per_call(malloc_free, n);
    mt_span_begin("bench-malloc");
    double inside = per_call(malloc_free, n);
    mt_span_end();
    printf("malloc_free_outside_span_ns %.1f\n", outside);
    printf("malloc_free_inside_span_ns %.1f\n", inside);
    return 0;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int requests(long n, int k, int on)
{
    if (n < 1 || k < 1 || k > 4096)
        return 2;
    uint64_t s = 88172645463325252ull, sum = 0;
    void *held[64] = {0};
    for (long i = 0; i < n; i++) {
        if (on)
            mt_span_begin((i & 3) == 0 ? "put" : "get");
        void *tmp[4096];
        for (int j = 0; j < k; j++) {
            size_t sz = 16 + xorshift(&s) % 2048;
            tmp[j] = malloc(sz);
            memset(tmp[j], (int)j, sz < 64 ? sz : 64);
            sum += ((unsigned char *)tmp[j])[0];
        }
        for (int j = 0; j < k; j++)
            free(tmp[j]);
        unsigned slot = (unsigned)(xorshift(&s) % 64);
        free(held[slot]);
        held[slot] = malloc(64 + xorshift(&s) % 8192);
        if (on)
            mt_span_end();
    }
    for (int i = 0; i < 64; i++)
        free(held[i]);
    printf("requests %ld sum %llu\n", n, (unsigned long long)sum);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "snapshot") == 0)
        return snapshot(atoi(argv[2]), atoi(argv[3]), atof(argv[4]));
    if (argc >= 3 && strcmp(argv[1], "spans") == 0)
        return spans(atol(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "requests") == 0) {
        const char *on = getenv("INFO_COST_SPANS");
        return requests(atol(argv[2]), atoi(argv[3]), on && strcmp(on, "on") == 0);
    }
    fprintf(stderr, "usage: info_cost snapshot WRITERS READERS SECONDS | spans N | requests N K\n");
    return 2;
}

/* spans.c — request spans under test (tests/agent/test_spans.sh). The
 * program keeps its own books (its clock, its counts) and prints them; the
 * script compares them with the report's span lines.
 *
 *   spans server THREADS REQUESTS   THREADS threads serve REQUESTS requests
 *       each: "get" (even) and "put" (odd) spans around a few mallocs; every
 *       10th request (i % 10 == 3) is a get with a put nested inside; two
 *       in 50 (i % 50 == 7, a put, and 32, a get) ask for SLOW_SIZE bytes,
 *       which libslowalloc.so stalls. Then the main thread opens 17 nested spans (16 recorded,
 *       the 17th dropped), closes them, and ends one span too many.
 *       Prints "count get G", "count put P", "stalled get|put N", "slow NAME
 *       NS" for every span of at least 2 ms by its own clock, "injected
 *       get|put NS" (the stalls' real length, from libslowalloc.so), and
 *       "rc ..." lines with the return codes that differ from what is
 *       expected.
 *   spans map REQUESTS              one thread; each "put" span maps 16 MiB
 *       (MAP_POPULATE) and unmaps it, nothing else. Prints "count put N"
 *       and "map_ns NS": the time inside mmap and munmap by its own clock.
 *   spans limits                    64 names, a 65th (-ENOSPC), NULL
 *       (-EINVAL), a name of 63 bytes, names of 64 and 70 (-EINVAL), one
 *       with a space, all inside an open "outer" span that must stay
 *       balanced.
 *   spans fork                      begins "outer", forks; the child ends
 *       it (the span goes on in the child) and exits.
 *   spans wide DIR                  five names with hundreds of buckets each
 *       (a report over 64 KiB); writes DIR/ready, waits for DIR/stop.
 *   spans bench N                   N begin/end pairs, N malloc/free pairs
 *       outside and inside a span: "pair_ns", "malloc_free_ns", ...
 *   spans named NAME...             a span under each NAME (the bytes as
 *       given: escape sequences, bytes that are not UTF-8), a malloc in it */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtrail.h"

#define SLOW_SIZE 123456
#define SLOW_NS 2000000ull /* spans this long are listed ("slow") */
#define MAX_SLOW 4096

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int failures;
static void expect_rc(const char *what, int got, int want)
{
    if (got != want) {
        printf("rc %s got %d want %d\n", what, got, want);
        failures++;
    }
}

/* ---- server ------------------------------------------------------------ */

static pthread_mutex_t books_lock = PTHREAD_MUTEX_INITIALIZER;
static long count_get, count_put, stalled_get, stalled_put;
static uint64_t injected_get, injected_put; /* the stalls' real length, summed */
static uint64_t (*last_stall_ns)(void);     /* libslowalloc.so's */
static struct {
    const char *name;
    uint64_t ns;
} slow[MAX_SLOW];
static int nslow;

static void note_slow(const char *name, uint64_t ns)
{
    if (ns < SLOW_NS)
        return;
    pthread_mutex_lock(&books_lock);
    if (nslow < MAX_SLOW)
        slow[nslow++] = (typeof(slow[0])){name, ns};
    pthread_mutex_unlock(&books_lock);
}

/* The request's work: a few allocations, touched and freed. Returns the
 * stall's length, 0 without one. */
static uint64_t work(unsigned seed, int stall)
{
    uint64_t stalled = 0;
    void *p[4];
    for (int k = 0; k < 4; k++) {
        p[k] = malloc(32 + (seed * 7 + (unsigned)k * 131) % 2000);
        memset(p[k], k, 16);
    }
    if (stall) {
        char *s = malloc(SLOW_SIZE);
        s[0] = 1;
        stalled = last_stall_ns ? last_stall_ns() : 0;
        free(s);
    }
    for (int k = 0; k < 4; k++)
        free(p[k]);
    return stalled;
}

static int served_by_threads;

static void *serve(void *arg)
{
    long gets = 0, puts = 0, sg = 0, sp = 0;
    uint64_t ig = 0, ip = 0;
    int rq = served_by_threads;
    for (int i = 0; i < rq; i++) {
        const char *name = i % 2 == 0 ? "get" : "put";
        int nested = i % 10 == 3, stall = i % 50 == 7 || i % 50 == 32;
        if (nested)
            name = "get";
        uint64_t t0 = now_ns();
        expect_rc("begin", mt_span_begin(name), 0);
        uint64_t stalled = work((unsigned)i, stall);
        if (nested) {
            uint64_t u0 = now_ns();
            expect_rc("begin inner", mt_span_begin("put"), 0);
            work((unsigned)i + 1, 0);
            expect_rc("end inner", mt_span_end(), 0);
            note_slow("put", now_ns() - u0);
            puts++;
        }
        expect_rc("end", mt_span_end(), 0);
        note_slow(name, now_ns() - t0);
        if (name[0] == 'g') {
            gets++;
            sg += stall;
            ig += stalled;
        } else {
            puts++;
            sp += stall;
            ip += stalled;
        }
    }
    pthread_mutex_lock(&books_lock);
    count_get += gets;
    count_put += puts;
    stalled_get += sg;
    stalled_put += sp;
    injected_get += ig;
    injected_put += ip;
    pthread_mutex_unlock(&books_lock);
    (void)arg;
    return NULL;
}

static int server(int threads, int requests)
{
    pthread_t t[64];
    served_by_threads = requests;
    last_stall_ns = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "slowalloc_last_stall_ns");
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, serve, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    /* 17 levels: the 17th is dropped, and its end must not close the 16th. */
    for (int d = 0; d < 17; d++)
        expect_rc("deep begin", mt_span_begin(d % 2 ? "put" : "get"), d < 16 ? 0 : -EOVERFLOW);
    for (int d = 0; d < 17; d++)
        expect_rc("deep end", mt_span_end(), 0);
    count_get += 8;
    count_put += 8;
    expect_rc("extra end", mt_span_end(), -ENOENT);
    printf("count get %ld\ncount put %ld\nstalled get %ld\nstalled put %ld\n", count_get, count_put,
           stalled_get, stalled_put);
    printf("injected get %llu\ninjected put %llu\n", (unsigned long long)injected_get,
           (unsigned long long)injected_put);
    for (int i = 0; i < nslow; i++)
        printf("slow %s %llu\n", slow[i].name, (unsigned long long)slow[i].ns);
    return failures != 0;
}

/* ---- map --------------------------------------------------------------- */

static int map_requests(int n)
{
    uint64_t inside = 0;
    size_t len = 16u << 20;
    for (int i = 0; i < n; i++) {
        expect_rc("begin", mt_span_begin("put"), 0);
        uint64_t t0 = now_ns();
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        uint64_t t1 = now_ns();
        if (p == MAP_FAILED)
            return 1;
        p[0] = 1;
        uint64_t t2 = now_ns();
        munmap(p, len);
        inside += t1 - t0 + now_ns() - t2;
        expect_rc("end", mt_span_end(), 0);
    }
    printf("count put %d\nmap_ns %llu\n", n, (unsigned long long)inside);
    return failures != 0;
}

/* ---- limits ------------------------------------------------------------ */

static int limits(void)
{
    char names[64][16];
    expect_rc("outer", mt_span_begin("outer"), 0);
    expect_rc("null", mt_span_begin(NULL), -EINVAL);
    expect_rc("null end", mt_span_end(), 0);
    expect_rc("empty", mt_span_begin(""), -EINVAL);
    expect_rc("empty end", mt_span_end(), 0);
    /* A name in a buffer reused for another name: told apart by content.
     * MT_SPAN_NAME_MAX bytes are a name; one more is refused (-EINVAL),
     * not cut to the name before it, and its end is still its own. */
    char buf[80];
    memset(buf, 'x', MT_SPAN_NAME_MAX);
    buf[MT_SPAN_NAME_MAX] = '\0';
    expect_rc("63 bytes", mt_span_begin(buf), 0);
    expect_rc("63 bytes end", mt_span_end(), 0);
    memset(buf, 'x', MT_SPAN_NAME_MAX + 1);
    buf[MT_SPAN_NAME_MAX + 1] = '\0';
    expect_rc("64 bytes", mt_span_begin(buf), -EINVAL);
    expect_rc("64 bytes end", mt_span_end(), 0);
    memset(buf, 'y', 70);
    buf[70] = '\0';
    expect_rc("70 bytes", mt_span_begin(buf), -EINVAL);
    expect_rc("70 bytes end", mt_span_end(), 0);
    strcpy(buf, "two words");
    expect_rc("space", mt_span_begin(buf), 0);
    expect_rc("space end", mt_span_end(), 0);
    /* outer, the 63-byte one and "two words" are 3; 61 more make 64. */
    for (int i = 0; i < 61; i++) {
        snprintf(names[i], sizeof names[i], "n%02d", i);
        expect_rc("name", mt_span_begin(names[i]), 0);
        expect_rc("name end", mt_span_end(), 0);
    }
    expect_rc("65th", mt_span_begin("one-too-many"), -ENOSPC);
    expect_rc("65th end", mt_span_end(), 0);
    expect_rc("known again", mt_span_begin("n05"), 0);
    expect_rc("known again end", mt_span_end(), 0);
    expect_rc("outer end", mt_span_end(), 0);
    expect_rc("unmatched", mt_span_end(), -ENOENT);
    expect_rc("unmatched 2", mt_span_end(), -ENOENT);
    printf("limits done\n");
    return failures != 0;
}

/* ---- fork -------------------------------------------------------------- */

static int fork_child(void)
{
    expect_rc("outer", mt_span_begin("outer"), 0);
    printf("pid %d\n", (int)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        /* The child's copy of the open span ends here, and is counted in
         * the child's report; the parent's goes on. */
        expect_rc("child end", mt_span_end(), 0);
        expect_rc("child unmatched", mt_span_end(), -ENOENT);
        fflush(stdout);
        _exit(failures != 0);
    }
    int st;
    waitpid(pid, &st, 0);
    expect_rc("parent end", mt_span_end(), 0);
    printf("fork done\n");
    return failures != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

/* ---- wide -------------------------------------------------------------- */

static void spin_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) {
    }
}

/* Spans of 1 us to about 1 ms, 1% apart: hundreds of buckets a name, a
 * report far longer than 64 KiB. Then DIR/ready, and waits for DIR/stop. */
static int wide(const char *dir)
{
    static const char *const n[] = {"w1", "w2", "w3", "w4", "w5"};
    char path[4096];
    for (int k = 0; k < 5; k++)
        for (double d = 1000; d < 1000000; d *= 1.01) {
            mt_span_begin(n[k]);
            spin_ns((uint64_t)d);
            mt_span_end();
        }
    snprintf(path, sizeof path, "%s/ready", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fclose(f);
    snprintf(path, sizeof path, "%s/stop", dir);
    for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++)
        usleep(10000);
    return 0;
}

/* ---- bench ------------------------------------------------------------- */

static double per(uint64_t t0, long n)
{
    return (double)(now_ns() - t0) / (double)n;
}

static void *volatile sink;

static double malloc_free_ns(long n)
{
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        sink = malloc(48);
        free(sink);
    }
    return per(t0, n);
}

static int bench(long n)
{
    for (long i = 0; i < 1000; i++) { /* the name registered, pages touched */
        mt_span_begin("bench");
        mt_span_end();
    }
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        mt_span_begin("bench");
        mt_span_end();
    }
    double pair = per(t0, n);
    double outside = malloc_free_ns(n);
    mt_span_begin("bench-malloc");
    double inside = malloc_free_ns(n);
    mt_span_end();
    printf("pair_ns %.1f\nmalloc_free_ns outside %.1f inside %.1f\n", pair, outside, inside);
    return 0;
}

/* ---- named ------------------------------------------------------------ */

static int named(int n, char **names)
{
    for (int i = 0; i < n; i++) {
        expect_rc("named", mt_span_begin(names[i]), 0);
        free(malloc(100));
        expect_rc("named end", mt_span_end(), 0);
    }
    return failures != 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 4 && strcmp(argv[1], "server") == 0)
        return server(atoi(argv[2]), atoi(argv[3]));
    if (argc >= 3 && strcmp(argv[1], "map") == 0)
        return map_requests(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "limits") == 0)
        return limits();
    if (argc >= 2 && strcmp(argv[1], "fork") == 0)
        return fork_child();
    if (argc >= 3 && strcmp(argv[1], "wide") == 0)
        return wide(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "bench") == 0)
        return bench(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "named") == 0)
        return named(argc - 2, argv + 2);
    fprintf(stderr, "usage: spans server THREADS REQUESTS | map N | limits | fork | wide DIR | bench N | "
                    "named NAME...\n");
    return 2;
}

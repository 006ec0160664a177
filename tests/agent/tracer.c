/* tracer.c — programs for trace mode's tests (tests/agent/test_trace.sh),
 * each with a known outcome:
 *   tracer known      single thread, every entry point; leaks exactly 10 x 100
 *                     bytes from leak_small() and 3 x 5000 from leak_big(),
 *                     and 50 temporaries from make_temporaries(); the rest freed
 *   tracer handoff N  N pairs of threads: one allocates, the other frees what it
 *                     is handed (through a lock-free ring), so frees follow their
 *                     allocs on other threads; nothing leaks
 *   tracer fork       the parent leaks 7 x 700 bytes, its child 11 x 1100
 *   tracer flood N    N malloc/free pairs as fast as it can
 *   tracer forkflood N  a fork child floods N malloc/free pairs; the parent waits
 *   tracer forkbusy   two threads allocate and free without pause while the
 *                     main thread forks 5 children, each leaking 9 x 900 bytes
 *   tracer maps       3 mmaps, a moving mremap, 3 munmaps, the break moved up
 *                     and back: 5 mapping events of each kind
 *   tracer temps      4 threads, each 2000 blocks from temp_worker() freed
 *                     right after they were allocated, one in 100 realloc'd
 *                     in between (8000 temporary blocks, 80 reallocs), then
 *                     one block from realloc_leak() realloc'd and leaked
 *                     (4 x 300 bytes: leaks, not temporaries)
 *   tracer hot        allocate_many() mallocs and frees 100 blocks; regrow()
 *                     20 times grows a block by realloc at one call site, 10
 *                     steps from NULL, then frees it: 20 allocations, 180
 *                     reallocs there (more calls than allocate_many's, fewer
 *                     allocations)
 *   tracer reallocs   one block of 100 bytes realloc'd to 150 (moved to
 *                     resize_a's stack), 50 and 400 (there), 1000 (moved to
 *                     resize_b's) and freed; one of 10 realloc'd to 20
 *                     (moved to resize_a's, at another call) and leaked:
 *                     allocated 110 + growth 50 + 350 + 600 + 10 = 1120 bytes
 *   tracer apireport N  leaks 6 x 600 bytes in category apicat, then calls
 *                     mt_report_write(NULL) and prints "rc=R"; with N > 0, N
 *                     threads then call it without end (a block allocated
 *                     and freed between calls) while main exits after 20 ms
 * Functions are noinline so their names appear in the stacks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memtrail.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

static NOINLINE void leak_small(void)
{
    for (int i = 0; i < 10; i++) {
        char *p = malloc(100);
        memset(p, 1, 100);
        sink = p;
    }
}

static NOINLINE void leak_big(void)
{
    for (int i = 0; i < 3; i++) {
        char *p = malloc(5000);
        p[0] = 1;
        sink = p;
    }
}

static NOINLINE void make_temporaries(void)
{
    for (int i = 0; i < 50; i++) {
        char *p = malloc(64 + (size_t)i);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

static NOINLINE void churn(void)
{
    void *keep[200];
    for (int i = 0; i < 200; i++)
        keep[i] = malloc((size_t)(i * 37 % 3000) + 1);
    for (int i = 0; i < 200; i += 2)
        keep[i] = realloc(keep[i], (size_t)(i * 53 % 9000) + 16);
    void *c = calloc(300, 17);
    void *a = NULL;
    if (posix_memalign(&a, 4096, 10000) != 0)
        abort();
    void *al = aligned_alloc(64, 640);
    void *big = malloc(3u << 20); /* above the mmap threshold */
    memset(big, 0, 4096);
    for (int i = 0; i < 200; i++)
        free(keep[i]);
    free(c);
    free(a);
    free(al);
    free(big);
    void *r = NULL;
    for (int i = 1; i <= 20; i++)
        r = realloc(r, (size_t)i * 1000);
    free(r);
}

static int known(void)
{
    churn();
    make_temporaries();
    leak_small();
    leak_big();
    return 0;
}

/* ---- handoff ---- */

#define RING 1024
typedef struct ring {
    _Atomic(void *) slot[RING];
    _Atomic unsigned head, tail;
    long count;
} ring;

static void *producer(void *arg)
{
    ring *r = arg;
    for (long i = 0; i < r->count; i++) {
        void *p = malloc((size_t)(i % 500) + 8);
        unsigned h = atomic_load(&r->head);
        while (h - atomic_load(&r->tail) >= RING)
            sched_yield();
        atomic_store(&r->slot[h % RING], p);
        atomic_store(&r->head, h + 1);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    ring *r = arg;
    for (long i = 0; i < r->count; i++) {
        unsigned t = atomic_load(&r->tail);
        while (atomic_load(&r->head) == t)
            sched_yield();
        free(atomic_load(&r->slot[t % RING]));
        atomic_store(&r->tail, t + 1);
    }
    return NULL;
}

static int handoff(int pairs)
{
    ring *rings = calloc((size_t)pairs, sizeof *rings);
    pthread_t *th = calloc((size_t)pairs * 2, sizeof *th);
    for (int i = 0; i < pairs; i++) {
        rings[i].count = 20000;
        pthread_create(&th[2 * i], NULL, producer, &rings[i]);
        pthread_create(&th[2 * i + 1], NULL, consumer, &rings[i]);
    }
    for (int i = 0; i < 2 * pairs; i++)
        pthread_join(th[i], NULL);
    free(th);
    free(rings);
    return 0;
}

/* ---- fork ---- */

static NOINLINE void leak_n(int n, size_t size)
{
    for (int i = 0; i < n; i++)
        sink = malloc(size);
}

static int forked(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        leak_n(11, 1100);
        return 0;
    }
    leak_n(7, 700);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int flood(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = malloc((size_t)(i & 255) + 1);
        sink = p;
        free(p);
    }
    return 0;
}

static int forkflood(long n)
{
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0)
        return flood(n);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static _Atomic int busy_stop;

static void *busy(void *arg)
{
    (void)arg;
    while (!atomic_load(&busy_stop)) {
        void *p = malloc(48);
        sink = p;
        free(p);
    }
    return NULL;
}

static int forkbusy(void)
{
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, busy, NULL);
    int bad = 0;
    for (int k = 0; k < 5; k++) {
        usleep(20000);
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            leak_n(9, 900);
            exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    atomic_store(&busy_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return bad;
}

/* ---- temporaries ---- */

static NOINLINE void realloc_leak(void)
{
    char *p = malloc(100);
    p[0] = 1;
    p = realloc(p, 300);
    sink = p;
}

static NOINLINE void *temp_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        char *p = malloc(16 + (size_t)(i % 64) * 8);
        p[0] = 1;
        if (i % 100 == 0)
            p = realloc(p, 5000);
        sink = p;
        free(p);
    }
    realloc_leak();
    return NULL;
}

static int temps(void)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, temp_worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    return 0;
}

static NOINLINE void allocate_many(void)
{
    for (int i = 0; i < 100; i++) {
        char *p = malloc(32);
        p[0] = 1;
        sink = p;
        free(p);
    }
}

static NOINLINE void regrow(void)
{
    for (int k = 0; k < 20; k++) {
        char *p = NULL;
        for (int i = 1; i <= 10; i++) { /* the first from NULL: an allocation */
            p = realloc(p, (size_t)i * 64);
            p[0] = 1;
            sink = p;
        }
        free(p);
    }
}

static int hot(void)
{
    allocate_many();
    regrow();
    return 0;
}

/* ---- reallocs ---- */

static NOINLINE void *resize_a(void *p, size_t n)
{
    void *q = realloc(p, n);
    sink = q; /* no tail call: resize_a stays in the stack */
    return q;
}

static void *volatile sink_b; /* not sink: resize_b's code differs from resize_a's, not folded into it */

static NOINLINE void *resize_b(void *p, size_t n)
{
    void *q = realloc(p, n);
    sink_b = q;
    return q;
}

static volatile size_t resizes[] = {150, 50, 400, 0}; /* volatile: the loop stays one call site */

static int reallocs(void)
{
    char *p = malloc(100);
    /* the first moves the block to resize_a's stack, the others resize it there */
    for (int i = 0; resizes[i]; i++)
        p = resize_a(p, resizes[i]);
    p = resize_b(p, 1000);
    free(p);
    char *q = malloc(10);
    q = resize_a(q, 20);
    sink = q;
    return 0;
}

static int maps(void)
{
    size_t pg = 4096;
    char *a = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = mmap(NULL, 8 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *c = mmap(NULL, 16 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED || c == MAP_FAILED)
        return 1;
    char *b2 = mremap(b, 8 * pg, 64 * pg, MREMAP_MAYMOVE);
    if (b2 == MAP_FAILED)
        return 1;
    munmap(a, 4 * pg);
    munmap(b2, 64 * pg);
    munmap(c, 16 * pg);
    if (sbrk(16 * (intptr_t)pg) == (void *)-1 || sbrk(-16 * (intptr_t)pg) == (void *)-1)
        return 1;
    return 0;
}

/* ---- mt_report_write(NULL) in trace mode: the report goes beside the trace ---- */

static NOINLINE void *api_worker(void *arg)
{
    (void)arg;
    for (;;) {
        mt_report_write(NULL);
        char *p = malloc(100);
        p[0] = 1;
        sink = p;
        free(p);
    }
    return NULL;
}

static int apireport(int threads)
{
    mt_tag_push("apicat");
    for (int i = 0; i < 6; i++) {
        char *p = malloc(600);
        p[0] = 1;
        sink = p;
    }
    mt_tag_pop();
    printf("rc=%d\n", mt_report_write(NULL));
    fflush(stdout);
    if (threads <= 0)
        return 0;
    pthread_t th;
    for (int i = 0; i < threads; i++)
        pthread_create(&th, NULL, api_worker, NULL);
    usleep(20000);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "known") == 0)
        return known();
    if (argc >= 3 && strcmp(argv[1], "handoff") == 0)
        return handoff(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "fork") == 0)
        return forked();
    if (argc >= 3 && strcmp(argv[1], "flood") == 0)
        return flood(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "forkflood") == 0)
        return forkflood(atol(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "forkbusy") == 0)
        return forkbusy();
    if (argc >= 2 && strcmp(argv[1], "maps") == 0)
        return maps();
    if (argc >= 2 && strcmp(argv[1], "temps") == 0)
        return temps();
    if (argc >= 2 && strcmp(argv[1], "hot") == 0)
        return hot();
    if (argc >= 2 && strcmp(argv[1], "reallocs") == 0)
        return reallocs();
    if (argc >= 3 && strcmp(argv[1], "apireport") == 0)
        return apireport(atoi(argv[2]));
    fprintf(
        stderr,
        "usage: tracer known | handoff N | fork | flood N | forkflood N | forkbusy | maps | temps | hot | "
        "reallocs | apireport N\n");
    return 2;
}

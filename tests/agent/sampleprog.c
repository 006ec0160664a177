/* sampleprog.c — sample mode's test program (test_sample.sh): allocates
 * known amounts from distinct call sites and writes its own ledger, the
 * truth the sampled estimates are checked against.
 *
 * Usage: sampleprog one LEDGER          single thread, every site below
 *        sampleprog threads LEDGER      8 threads x 1M mixed ops each
 *        sampleprog fork LEDGER         "one", then a child that allocates
 *                                       at site_child (ledger LEDGER.child)
 *        sampleprog phases DIR          phase 1 at site_small, phase 2 at
 *                                       site_mid, phase 3 at site_calloc;
 *                                       waits for DIR/goN between them
 *
 * Ledger lines (the counting of docs/sampling.md: a realloc is the free
 * of the old block at its site and an allocation of the new size at the
 * realloc's site):
 *   func NAME ADDRESS              a site function (its entry)
 *   ledger THREAD SITE SIZE ALLOCS FREES
 * THREAD is the thread's function (main, or thread0..7). Nothing else
 * allocates while the books are kept. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
/* Keeps a call from being a tail call (its caller's frame stays). */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

enum { S_SMALL, S_MID, S_CALLOC, S_LARGE, S_CHAIN, S_REALLOC, S_RARE, S_CHILD, NSITES };
static const char *const site_names[NSITES] = {"site_small", "site_mid",     "site_calloc", "site_large",
                                               "site_chain", "site_realloc", "site_rare",   "site_child"};

NOINLINE static void *site_small(size_t n)
{
    void *p = malloc(n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_mid(size_t n)
{
    void *p = malloc(n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_calloc(size_t n)
{
    void *p = calloc(1, n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_large(size_t n)
{
    void *p = malloc(n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_chain(size_t n)
{
    void *p = malloc(n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_realloc(void *q, size_t n)
{
    void *p = realloc(q, n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_rare(size_t n)
{
    void *p = malloc(n);
    KEEP_FRAME();
    return p;
}
NOINLINE static void *site_child(size_t n)
{
    void *p = malloc(n);
    KEEP_FRAME();
    return p;
}
static void *const site_fns[NSITES] = {(void *)site_small, (void *)site_mid,   (void *)site_calloc,
                                       (void *)site_large, (void *)site_chain, (void *)site_realloc,
                                       (void *)site_rare,  (void *)site_child};

/* The books: per thread, site and size index. */
#define NTHREADS 8
#define NSIZES 8
static const size_t sizes[NSITES][NSIZES] = {
    [S_SMALL] = {16, 24, 32, 48, 64, 96, 128, 40},
    [S_MID] = {256, 512, 1024, 2048, 4096, 8192, 768, 1536},
    [S_CALLOC] = {100, 1000, 10000, 100, 1000, 10000, 100, 1000},
    [S_LARGE] = {1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20},
    [S_CHAIN] = {64, 64, 64, 64, 64, 64, 64, 64},
    [S_REALLOC] = {3000, 20000, 3000, 20000, 3000, 20000, 3000, 20000},
    [S_RARE] = {40, 40, 40, 40, 40, 40, 40, 40},
    [S_CHILD] = {200, 300, 400, 500, 600, 700, 800, 900},
};
static long allocs[NTHREADS + 1][NSITES][NSIZES], frees[NTHREADS + 1][NSITES][NSIZES];

static int size_index(int site, size_t n)
{
    for (int k = 0; k < NSIZES; k++)
        if (sizes[site][k] == n)
            return k;
    abort();
}

/* A block and where it was counted. */
typedef struct blk {
    void *p;
    int site;
    size_t size;
} blk;

static void *take(int t, int site, size_t n)
{
    void *p = site == S_SMALL    ? site_small(n)
              : site == S_MID    ? site_mid(n)
              : site == S_CALLOC ? site_calloc(n)
              : site == S_LARGE  ? site_large(n)
              : site == S_CHAIN  ? site_chain(n)
              : site == S_RARE   ? site_rare(n)
                                 : site_child(n);
    if (!p)
        abort();
    memset(p, 1, n < 64 ? n : 64);
    allocs[t][site][size_index(site, n)]++;
    return p;
}

static void give(int t, blk *b)
{
    free(b->p);
    frees[t][b->site][size_index(b->site, b->size)]++;
    b->p = NULL;
}

static void resize(int t, blk *b, size_t n)
{
    b->p = site_realloc(b->p, n);
    if (!b->p)
        abort();
    frees[t][b->site][size_index(b->site, b->size)]++;
    allocs[t][S_REALLOC][size_index(S_REALLOC, n)]++;
    b->site = S_REALLOC;
    b->size = n;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The single-threaded run: each site's volume is in test_sample.sh's
 * comments; blocks kept live are in `keep`. */
static blk keep[200000];
static void run_one(void)
{
    size_t nk = 0;
    /* site_small: 300000 blocks of 16..128 bytes, 2 of 3 freed. */
    for (int i = 0; i < 300000; i++) {
        size_t n = sizes[S_SMALL][i % NSIZES];
        blk b = {take(0, S_SMALL, n), S_SMALL, n};
        if (i % 3 == 0)
            keep[nk++] = b;
        else
            give(0, &b);
    }
    /* site_mid: 40000 blocks of 256..8192, every 10th kept. */
    for (int i = 0; i < 40000; i++) {
        size_t n = sizes[S_MID][(i * 7) % NSIZES];
        blk b = {take(0, S_MID, n), S_MID, n};
        if (i % 10 == 0)
            keep[nk++] = b;
        else
            give(0, &b);
    }
    /* site_calloc: 30000 blocks of 100, 1000, 10000, half kept. */
    for (int i = 0; i < 30000; i++) {
        size_t n = sizes[S_CALLOC][i % 3];
        blk b = {take(0, S_CALLOC, n), S_CALLOC, n};
        if (i % 2 == 0)
            keep[nk++] = b;
        else
            give(0, &b);
    }
    /* site_large: 40 more blocks of 1 MiB, 10 kept. */
    for (int i = 0; i < 40; i++) {
        blk b = {take(0, S_LARGE, 1 << 20), S_LARGE, 1 << 20};
        if (i % 4 == 0)
            keep[nk++] = b;
        else
            give(0, &b);
    }
    /* Chains: 64 bytes at site_chain, grown to 3000 then 20000 at
     * site_realloc; half kept. */
    for (int i = 0; i < 5000; i++) {
        blk b = {take(0, S_CHAIN, 64), S_CHAIN, 64};
        resize(0, &b, 3000);
        resize(0, &b, 20000);
        if (i % 2 == 0)
            keep[nk++] = b;
        else
            give(0, &b);
    }
    for (int i = 0; i < 10; i++)
        keep[nk++] = (blk){take(0, S_RARE, 40), S_RARE, 40};
}

/* The threads' run: 1M ops each over a ring of 4096 slots: an empty slot
 * gets a block (site and size by the thread's generator), a full one is
 * freed or, one time in 8, realloc'd. What is live at the end stays. */
#define RING 4096
/* The threads make their first allocation in turn, thread 0 first: the
 * agent numbers a thread's sampling generator by its first allocation, so
 * with a fixed seed each thread draws the same numbers every run. */
static _Atomic int first_turn;
static NOINLINE void work(int t)
{
    while (atomic_load(&first_turn) != t)
        sched_yield();
    blk *ring = calloc(RING, sizeof *ring); /* site 0's: < 1% of the bytes */
    atomic_store(&first_turn, t + 1);
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
    for (long op = 0; op < 1000000; op++) {
        uint64_t r = rng_next(&s);
        blk *b = &ring[r % RING];
        r >>= 12;
        if (!b->p) {
            int site = (r & 3) == 0 ? S_MID : (r & 3) == 1 ? S_CALLOC : S_SMALL;
            size_t n = sizes[site][(r >> 2) % NSIZES];
            b->p = take(t, site, n);
            b->site = site;
            b->size = n;
        } else if ((r & 7) == 0 && b->site != S_REALLOC) {
            resize(t, b, sizes[S_REALLOC][(r >> 3) % NSIZES]);
        } else {
            give(t, b);
        }
    }
    KEEP_FRAME();
}

#define THREAD_FN(k)                                                                                         \
    NOINLINE static void *thread##k(void *arg)                                                               \
    {                                                                                                        \
        (void)arg;                                                                                           \
        work(k);                                                                                             \
        KEEP_FRAME();                                                                                        \
        return NULL;                                                                                         \
    }
THREAD_FN(0)
THREAD_FN(1)
THREAD_FN(2)
THREAD_FN(3)
THREAD_FN(4)
THREAD_FN(5)
THREAD_FN(6)
THREAD_FN(7)
static void *(*const thread_fns[NTHREADS])(void *) = {thread0, thread1, thread2, thread3,
                                                      thread4, thread5, thread6, thread7};

static void write_ledger(const char *path, int nthreads, int main_too)
{
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    for (int s = 0; s < NSITES; s++)
        fprintf(f, "func %s %p\n", site_names[s], site_fns[s]);
    for (int t = 0; t < nthreads; t++)
        fprintf(f, "func thread%d %p\n", t, (void *)thread_fns[t]);
    for (int t = 0; t <= NTHREADS; t++) {
        if (t == NTHREADS ? !main_too : t >= nthreads)
            continue;
        for (int s = 0; s < NSITES; s++)
            for (int k = 0; k < NSIZES; k++) {
                /* Sizes repeat in the table: count each once. */
                int first = 1;
                for (int j = 0; j < k; j++)
                    first &= sizes[s][j] != sizes[s][k];
                if (!first || (!allocs[t][s][k] && !frees[t][s][k]))
                    continue;
                char who[16] = "main";
                if (t < NTHREADS)
                    snprintf(who, sizeof who, "thread%d", t);
                fprintf(f, "ledger %s %s %zu %ld %ld\n", who, site_names[s], sizes[s][k], allocs[t][s][k],
                        frees[t][s][k]);
            }
    }
    fclose(f);
}

static void wait_for(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < 3000 && access(path, F_OK) != 0; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

static void say(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    const char *what = argv[1], *out = argv[2];
    if (strcmp(what, "one") == 0 || strcmp(what, "fork") == 0) {
        run_one();
        /* thread index NTHREADS is main: its lines say "main" */
        memcpy(allocs[NTHREADS], allocs[0], sizeof allocs[0]);
        memcpy(frees[NTHREADS], frees[0], sizeof frees[0]);
        memset(allocs[0], 0, sizeof allocs[0]);
        memset(frees[0], 0, sizeof frees[0]);
        if (strcmp(what, "fork") == 0) {
            fflush(NULL);
            pid_t pid = fork();
            if (pid == 0) {
                memset(allocs, 0, sizeof allocs);
                memset(frees, 0, sizeof frees);
                for (int i = 0; i < 50000; i++) {
                    size_t n = sizes[S_CHILD][i % NSIZES];
                    blk b = {take(NTHREADS, S_CHILD, n), S_CHILD, n};
                    if (i % 4)
                        give(NTHREADS, &b);
                }
                char path[4096];
                snprintf(path, sizeof path, "%s.child", out);
                write_ledger(path, 0, 1);
                exit(0);
            }
            int st;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        write_ledger(out, 0, 1);
        return 0;
    }
    if (strcmp(what, "threads") == 0) {
        pthread_t th[NTHREADS];
        for (int t = 0; t < NTHREADS; t++)
            if (pthread_create(&th[t], NULL, thread_fns[t], NULL) != 0)
                return 1;
        for (int t = 0; t < NTHREADS; t++)
            pthread_join(th[t], NULL);
        write_ledger(out, NTHREADS, 0);
        return 0;
    }
    if (strcmp(what, "phases") == 0) {
        static blk kept[200000];
        int nk = 0;
        for (int i = 0; i < 20000; i++) {
            size_t n = sizes[S_SMALL][i % NSIZES];
            kept[nk++] = (blk){take(NTHREADS, S_SMALL, n), S_SMALL, n};
        }
        say(out, "ready1");
        wait_for(out, "go2");
        for (int i = 0; i < 20000; i++) {
            size_t n = sizes[S_MID][i % NSIZES];
            blk b = {take(NTHREADS, S_MID, n), S_MID, n};
            if (i % 2)
                give(NTHREADS, &b);
            else
                kept[nk++] = b;
        }
        say(out, "ready2");
        wait_for(out, "go3");
        for (int i = 0; i < 20000; i++) {
            size_t n = sizes[S_CALLOC][i % 3];
            kept[nk++] = (blk){take(NTHREADS, S_CALLOC, n), S_CALLOC, n};
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/ledger", out);
        write_ledger(path, 0, 1);
        return kept[0].p ? 0 : 1;
    }
    return 2;
}

/* tthreads.c — the threaded allocation workload of trace mode at scale
 * (issue 18): bench/trace.sh times it, tests/agent/test_trace_threads.sh
 * checks traces of it against the ledger it prints. Plain C, linked with
 * nothing of memtrail's; its own books are the independent truth.
 *
 *   tthreads [MODE] THREADS [PAIRS]        (PAIRS: default 2000000)
 *   plain (no MODE)  each thread makes PAIRS malloc/free pairs on its own
 *                    256-slot table, sizes 16-527 B from a per-thread
 *                    deterministic PRNG, then frees its table.
 *   --cross          THREADS even: thread 2k allocates PAIRS blocks and hands
 *                    each through a lock-free ring to thread 2k+1, which frees
 *                    it: every block is freed on another thread.
 *   --pool           all threads share a pool of 4096 slots: each step takes a
 *                    random slot (an atomic exchange) and frees or reallocates
 *                    what another thread may have put there, or fills it; main
 *                    frees what is left after the join. PAIRS steps a thread.
 *   --fork           plain, and the main thread forks while the threads run: the
 *                    child frees half of 64 blocks of 300 B that main allocated
 *                    before, makes 1000 pairs of its own and leaks 5 x 300 B.
 * In every mode thread i also leaks exactly i+1 blocks of 4000 B from
 * leak_known() (a stack of its own in traces).
 *
 * Output, one line on stdout per process at its end (the child's first in
 * --fork), every figure counting the program's own calls only:
 *   ledger mode=M threads=N allocs=A frees=F reallocs=R leaked_blocks=L
 *          leaked_bytes=B [min_peak_bytes=P max_peak_bytes=Q]
 * allocs counts malloc calls, reallocs realloc calls (each frees one block
 * and makes one), frees free calls: leaked_blocks = allocs - frees (but in
 * the --fork child, whose frees include 32 inherited blocks). --pool's
 * counts depend on how threads interleave; the others' are fixed. The peak
 * depends on it in every mode, so only bounds are given (plain and --fork):
 * the largest peak of one thread (the others may have run before or after
 * it) and the sum of the threads' peaks. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MAX_THREADS 256
#define TABLE_SLOTS 256
#define LEAK_SIZE 4000
#define RING_SLOTS 1024
#define POOL_SLOTS 4096
#define INHERITED 64
#define INHERITED_SIZE 300

enum mode { MODE_PLAIN, MODE_CROSS, MODE_POOL, MODE_FORK };
static const char *const mode_names[] = {"plain", "cross", "pool", "fork"};

/* One thread's books. */
struct books {
    int64_t allocs, frees, reallocs, live, peak, leaked_blocks, leaked_bytes;
};

/* A lock-free single-producer, single-consumer ring between a --cross pair. */
struct ring {
    _Atomic uint64_t head, tail; /* pushed, popped */
    _Atomic int done;            /* the producer made its last push */
    void *slot[RING_SLOTS];
};

struct worker {
    pthread_t tid;
    int index;
    struct books b;
    struct ring *ring; /* --cross: the pair's ring */
    char pad[64];      /* books of two threads never share a cache line */
};

static enum mode mode;
static long pairs = 2000000;
static struct worker workers[MAX_THREADS];
static struct ring rings[MAX_THREADS / 2];
static _Atomic(char *) pool[POOL_SLOTS];
static void *leaked[MAX_THREADS][MAX_THREADS];

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pick_size(uint64_t r)
{
    return 16 + (size_t)(r >> 20) % 512;
}

static void note_alloc(struct books *b, size_t n)
{
    b->allocs++;
    b->live += (int64_t)n;
    if (b->live > b->peak)
        b->peak = b->live;
}

/* Thread i leaks i+1 blocks of LEAK_SIZE: what a trace's leaks must show. */
static NOINLINE void leak_known(struct books *b, int i)
{
    for (int k = 0; k <= i; k++) {
        char *p = malloc(LEAK_SIZE);
        memset(p, k, LEAK_SIZE);
        leaked[i][k] = p;
        note_alloc(b, LEAK_SIZE);
        b->leaked_blocks++;
        b->leaked_bytes += LEAK_SIZE;
    }
}

static NOINLINE void table_loop(struct books *b, uint64_t seed)
{
    char *table[TABLE_SLOTS] = {0};
    size_t sizes[TABLE_SLOTS] = {0};
    uint64_t s = seed;
    for (long k = 0; k < pairs; k++) {
        uint64_t r = next_random(&s);
        unsigned slot = (unsigned)(r % TABLE_SLOTS);
        if (table[slot]) {
            free(table[slot]);
            b->frees++;
            b->live -= (int64_t)sizes[slot];
        }
        sizes[slot] = pick_size(r);
        table[slot] = malloc(sizes[slot]);
        table[slot][0] = (char)k;
        note_alloc(b, sizes[slot]);
    }
    for (unsigned slot = 0; slot < TABLE_SLOTS; slot++) {
        if (table[slot]) {
            free(table[slot]);
            b->frees++;
            b->live -= (int64_t)sizes[slot];
        }
    }
}

static NOINLINE void produce(struct books *b, struct ring *q, uint64_t seed)
{
    uint64_t s = seed;
    for (long k = 0; k < pairs; k++) {
        size_t n = pick_size(next_random(&s));
        char *p = malloc(n);
        p[0] = (char)k;
        b->allocs++;
        uint64_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
        while (head - atomic_load_explicit(&q->tail, memory_order_acquire) == RING_SLOTS)
            sched_yield();
        q->slot[head % RING_SLOTS] = p;
        atomic_store_explicit(&q->head, head + 1, memory_order_release);
    }
    atomic_store_explicit(&q->done, 1, memory_order_release);
}

static NOINLINE void consume(struct books *b, struct ring *q)
{
    uint64_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    for (;;) {
        int done = atomic_load_explicit(&q->done, memory_order_acquire);
        if (atomic_load_explicit(&q->head, memory_order_acquire) == tail) {
            if (done)
                return;
            sched_yield();
            continue;
        }
        free(q->slot[tail % RING_SLOTS]);
        b->frees++;
        atomic_store_explicit(&q->tail, ++tail, memory_order_release);
    }
}

/* Takes a random slot; frees or reallocates what is there (another thread's
 * block as often as not), or fills it. A block put back where another thread
 * was quicker is freed. */
static NOINLINE void pool_loop(struct books *b, uint64_t seed)
{
    uint64_t s = seed;
    for (long k = 0; k < pairs; k++) {
        uint64_t r = next_random(&s);
        _Atomic(char *) *slot = &pool[r % POOL_SLOTS];
        char *p = atomic_exchange(slot, NULL);
        if (p && (r >> 12) % 3 == 0) {
            free(p);
            b->frees++;
            continue;
        }
        if (p) {
            p = realloc(p, pick_size(r));
            b->reallocs++;
        } else {
            p = malloc(pick_size(r));
            b->allocs++;
        }
        p[0] = (char)k;
        char *empty = NULL;
        if (!atomic_compare_exchange_strong(slot, &empty, p)) {
            free(p);
            b->frees++;
        }
    }
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(w->index + 1);
    switch (mode) {
    case MODE_PLAIN:
    case MODE_FORK: table_loop(&w->b, seed); break;
    case MODE_CROSS:
        if (w->index % 2 == 0)
            produce(&w->b, w->ring, seed);
        else
            consume(&w->b, w->ring);
        break;
    case MODE_POOL: pool_loop(&w->b, seed); break;
    }
    leak_known(&w->b, w->index);
    return NULL;
}

static void print_ledger(const char *name, int threads, const struct books *b, int with_peak,
                         int64_t min_peak, int64_t max_peak)
{
    printf(
        "ledger mode=%s threads=%d allocs=%lld frees=%lld reallocs=%lld leaked_blocks=%lld leaked_bytes=%lld",
        name, threads, (long long)b->allocs, (long long)b->frees, (long long)b->reallocs,
        (long long)b->leaked_blocks, (long long)b->leaked_bytes);
    if (with_peak)
        printf(" min_peak_bytes=%lld max_peak_bytes=%lld", (long long)min_peak, (long long)max_peak);
    printf("\n");
    fflush(stdout);
}

/* The --fork child: frees half of what it inherited, works a little, leaks 5. */
static NOINLINE void fork_child(char **inherited)
{
    struct books b = {0};
    for (int k = 0; k < INHERITED / 2; k++) {
        free(inherited[k]);
        b.frees++;
    }
    for (int k = 0; k < 1000; k++) {
        char *p = malloc(64 + (size_t)k % 200);
        p[0] = 1;
        b.allocs++;
        free(p);
        b.frees++;
    }
    for (int k = 0; k < 5; k++) {
        leaked[0][k] = malloc(INHERITED_SIZE);
        b.allocs++;
        b.leaked_blocks++;
        b.leaked_bytes += INHERITED_SIZE;
    }
    print_ledger("fork-child", 1, &b, 0, 0, 0);
    exit(0);
}

static int usage(void)
{
    fprintf(stderr, "usage: tthreads [--cross|--pool|--fork] THREADS [PAIRS]\n"
                    "  THREADS 1 to 256 (even with --cross), PAIRS >= 1 (default 2000000)\n");
    return 2;
}

int main(int argc, char **argv)
{
    int a = 1;
    if (a < argc && argv[a][0] == '-') {
        if (strcmp(argv[a], "--cross") == 0)
            mode = MODE_CROSS;
        else if (strcmp(argv[a], "--pool") == 0)
            mode = MODE_POOL;
        else if (strcmp(argv[a], "--fork") == 0)
            mode = MODE_FORK;
        else
            return usage();
        a++;
    }
    if (a >= argc || argc - a > 2)
        return usage();
    int threads = atoi(argv[a]);
    if (a + 1 < argc)
        pairs = atol(argv[a + 1]);
    if (threads < 1 || threads > MAX_THREADS || pairs < 1 || (mode == MODE_CROSS && threads % 2))
        return usage();

    struct books mainb = {0};
    char *inherited[INHERITED] = {0};
    if (mode == MODE_FORK) {
        for (int k = 0; k < INHERITED; k++) {
            inherited[k] = malloc(INHERITED_SIZE);
            inherited[k][0] = 1;
            note_alloc(&mainb, INHERITED_SIZE);
        }
    }
    for (int i = 0; i < threads; i++) {
        workers[i].index = i;
        workers[i].ring = &rings[i / 2];
        if (pthread_create(&workers[i].tid, NULL, run_worker, &workers[i]) != 0) {
            perror("tthreads: pthread_create");
            return 1;
        }
    }
    if (mode == MODE_FORK) {
        pid_t child = fork();
        if (child < 0) {
            perror("tthreads: fork");
            return 1;
        }
        if (child == 0)
            fork_child(inherited);
        int st = 0;
        if (waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "tthreads: the fork child failed (status %d)\n", st);
            return 1;
        }
    }
    for (int i = 0; i < threads; i++)
        pthread_join(workers[i].tid, NULL);

    /* What is left: the inherited blocks (--fork), the pool (--pool). */
    for (int k = 0; k < INHERITED; k++) {
        if (inherited[k]) {
            free(inherited[k]);
            mainb.frees++;
            mainb.live -= INHERITED_SIZE;
        }
    }
    for (int k = 0; k < POOL_SLOTS; k++) {
        char *p = atomic_exchange(&pool[k], NULL);
        if (p) {
            free(p);
            mainb.frees++;
        }
    }

    struct books total = mainb;
    int64_t min_peak = mainb.peak, max_peak = mainb.peak;
    for (int i = 0; i < threads; i++) {
        const struct books *b = &workers[i].b;
        total.allocs += b->allocs;
        total.frees += b->frees;
        total.reallocs += b->reallocs;
        total.leaked_blocks += b->leaked_blocks;
        total.leaked_bytes += b->leaked_bytes;
        if (b->peak > min_peak)
            min_peak = b->peak;
        max_peak += b->peak;
    }
    if (total.allocs - total.frees != total.leaked_blocks) {
        fprintf(stderr, "tthreads: books do not balance: %lld allocs - %lld frees != %lld leaked\n",
                (long long)total.allocs, (long long)total.frees, (long long)total.leaked_blocks);
        return 1;
    }
    int with_peak = mode == MODE_PLAIN || mode == MODE_FORK;
    print_ledger(mode_names[mode], threads, &total, with_peak, min_peak, max_peak);
    return 0;
}

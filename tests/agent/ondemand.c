/* ondemand.c — recording on demand's test program (test_ondemand.sh):
 * THREADS threads allocate in three phases, in category "ondemand", and
 * keep the books of each phase. Between phases the program waits for the
 * script (files in DIR: it writes readyN when phase N-1 is done, and runs
 * phase N once goN exists), which switches recording on before phase 2
 * and off after it. The books of phase 2 are what the recording must hold.
 *
 * Phase 1 allocates blocks kept for later (OLD per thread). Phase 2, per
 * thread: NEW blocks by malloc, calloc and aligned_alloc (sizes vary by
 * thread and index); half of them freed, a quarter realloc'd (once each,
 * at a call site other than the allocation's); a third of the old blocks
 * freed and a third realloc'd (blocks the recording never saw). Phase 3:
 * every phase-2 block left freed, the rest of the old ones realloc'd and
 * freed, new blocks allocated and freed.
 *
 * Ledger lines (DIR/ledgerN), one per phase, summed over the threads:
 *   allocs frees reallocs frees_unknown reallocs_unknown allocated_bytes
 *   live_bytes live_count
 * where, for phase 2: frees/reallocs of blocks allocated in phase 2, the
 * _unknown ones of blocks from phase 1; allocated_bytes = sizes allocated
 * + the growth of each realloc of a phase-2 block + the new size of each
 * phase-1 block realloc'd (its old size unknown to the recording); live =
 * phase-2 blocks (and realloc'd old ones) live at its end. DIR/total: the category's summary over the whole
 * run: "live_bytes live_count allocs frees reallocs".
 *
 * With "fork", a child forked at the end of phase 2 (see fork_child).
 * With "exec", the program runs /bin/true instead of phase 3, once the
 * script says go3 (recording still on).
 *
 * Nothing here allocates outside the books while the program runs its
 * phases: the waits are access() and nanosleep, the ledgers written with
 * snprintf and write. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtrail.h"

#define THREADS 4
#define OLD 60
#define NEW 120

typedef struct books {
    int64_t allocs, frees, reallocs, frees_unknown, reallocs_unknown, allocated_bytes;
} books;

typedef struct worker {
    pthread_t t;
    int index;
    void *old[OLD];
    size_t old_size[OLD];
    void *blk[NEW];
    size_t size[NEW];
    books b[4]; /* per phase */
    int64_t total_live, total_count, total_allocs, total_frees, total_reallocs;
} worker;

static worker workers[THREADS];
static pthread_barrier_t start_phase, end_phase;
static int phase;

static size_t size_of(int t, int i)
{
    return 16 + (size_t)((i * 37 + t * 11) % 900);
}

/* Distinct functions: distinct call sites (and stacks) for each kind. */
static __attribute__((noinline)) void *take(worker *w, int ph, size_t n, int how)
{
    void *p = how == 0 ? malloc(n) : how == 1 ? calloc(1, n) : aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (how == 2)
        n = (n + 63) & ~(size_t)63;
    if (!p)
        _exit(90);
    w->b[ph].allocs++;
    w->b[ph].allocated_bytes += (int64_t)n;
    w->total_live += (int64_t)n;
    w->total_count++;
    w->total_allocs++;
    return p;
}

static __attribute__((noinline)) void give(worker *w, int ph, void *p, size_t n, int unknown)
{
    free(p);
    if (unknown)
        w->b[ph].frees_unknown++;
    else
        w->b[ph].frees++;
    w->total_live -= (int64_t)n;
    w->total_count--;
    w->total_frees++;
}

static __attribute__((noinline)) void *resize(worker *w, int ph, void *p, size_t from, size_t to, int unknown)
{
    void *q = realloc(p, to);
    if (!q)
        _exit(91);
    w->b[ph].reallocs++;
    if (unknown)
        w->b[ph].reallocs_unknown++;
    /* a block the recording holds is one block: its growth; another, its new size */
    w->b[ph].allocated_bytes += unknown ? (int64_t)to : to > from ? (int64_t)(to - from) : 0;
    w->total_live += (int64_t)to - (int64_t)from;
    w->total_reallocs++;
    return q;
}

static void phase1(worker *w)
{
    for (int i = 0; i < OLD; i++) {
        w->old_size[i] = size_of(w->index, i) + 3;
        w->old[i] = take(w, 1, w->old_size[i], i % 3);
        if (i % 3 == 2)
            w->old_size[i] = (w->old_size[i] + 63) & ~(size_t)63;
    }
    for (int i = 0; i < 50; i++) /* churn */
        give(w, 1, take(w, 1, size_of(w->index, i), 0), size_of(w->index, i), 0);
}

static void phase2(worker *w)
{
    for (int i = 0; i < NEW; i++) {
        w->size[i] = size_of(w->index, i);
        w->blk[i] = take(w, 2, w->size[i], i % 3);
        if (i % 3 == 2)
            w->size[i] = (w->size[i] + 63) & ~(size_t)63;
    }
    for (int i = 0; i < NEW; i++) {
        if (i % 2 == 0) {
            give(w, 2, w->blk[i], w->size[i], 0);
            w->blk[i] = NULL;
        } else if (i % 4 == 1) {
            size_t to = i % 8 == 1 ? w->size[i] * 3 : w->size[i] / 2 + 1;
            w->blk[i] = resize(w, 2, w->blk[i], w->size[i], to, 0);
            w->size[i] = to;
        }
    }
    for (int i = 0; i < OLD; i++) {
        if (i % 3 == 0) {
            give(w, 2, w->old[i], w->old_size[i], 1);
            w->old[i] = NULL;
        } else if (i % 3 == 1) {
            size_t to = w->old_size[i] + 100;
            w->old[i] = resize(w, 2, w->old[i], w->old_size[i], to, 1);
            w->old_size[i] = to;
        }
    }
}

static void phase3(worker *w)
{
    for (int i = 0; i < NEW; i++)
        if (w->blk[i])
            give(w, 3, w->blk[i], w->size[i], 0);
    for (int i = 0; i < OLD; i++) {
        if (!w->old[i])
            continue;
        w->old[i] = resize(w, 3, w->old[i], w->old_size[i], w->old_size[i] + 7, 0);
        give(w, 3, w->old[i], w->old_size[i] + 7, 0);
    }
    for (int i = 0; i < 40; i++)
        give(w, 3, take(w, 3, size_of(w->index, i), i % 2), size_of(w->index, i), 0);
}

static void *run(void *arg)
{
    worker *w = arg;
    if (mt_tag_push("ondemand") != 0 && mt_is_active())
        _exit(92);
    for (;;) {
        pthread_barrier_wait(&start_phase);
        int ph = phase;
        if (ph == 1)
            phase1(w);
        else if (ph == 2)
            phase2(w);
        else if (ph == 3)
            phase3(w);
        pthread_barrier_wait(&end_phase);
        if (ph == 3)
            return NULL;
    }
}

static void put(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        _exit(93);
    close(fd);
}

static void wait_for(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; access(path, F_OK) != 0; i++) {
        if (i > 6000)
            _exit(94); /* a minute: the script is gone */
        nanosleep(&ts, NULL);
    }
}

/* The live blocks of phase ph's books at its end (phase 2: its own blocks
 * and the old ones it realloc'd). */
static void live_after_2(int64_t *bytes, int64_t *count)
{
    *bytes = *count = 0;
    for (int t = 0; t < THREADS; t++) {
        const worker *w = &workers[t];
        for (int i = 0; i < NEW; i++)
            if (w->blk[i])
                *bytes += (int64_t)w->size[i], ++*count;
        for (int i = 0; i < OLD; i++)
            if (i % 3 == 1)
                *bytes += (int64_t)w->old_size[i], ++*count;
    }
}

static void write_ledger(const char *dir, int ph)
{
    books s = {0};
    for (int t = 0; t < THREADS; t++) {
        const books *b = &workers[t].b[ph];
        s.allocs += b->allocs, s.frees += b->frees, s.reallocs += b->reallocs;
        s.frees_unknown += b->frees_unknown, s.reallocs_unknown += b->reallocs_unknown;
        s.allocated_bytes += b->allocated_bytes;
    }
    int64_t lb = 0, lc = 0;
    if (ph == 2)
        live_after_2(&lb, &lc);
    char text[512], name[32];
    snprintf(text, sizeof text, "%lld %lld %lld %lld %lld %lld %lld %lld\n", (long long)s.allocs,
             (long long)s.frees, (long long)s.reallocs, (long long)s.frees_unknown,
             (long long)s.reallocs_unknown, (long long)s.allocated_bytes, (long long)lb, (long long)lc);
    snprintf(name, sizeof name, "ledger%d", ph);
    put(dir, name, text);
}

/* With "fork": at the end of phase 2 (recording on) a child allocates
 * and frees CHILD_BLOCKS blocks of 100 bytes, frees 5 blocks it inherited
 * and leaves by _exit; its pid goes to DIR/child. */
#define CHILD_BLOCKS 10
static void fork_child(const char *dir)
{
    pid_t c = fork();
    if (c < 0)
        _exit(95);
    if (c == 0) {
        for (int i = 0; i < CHILD_BLOCKS; i++)
            free(malloc(100));
        for (int i = 0, n = 0; i < NEW && n < 5; i++)
            if (workers[0].blk[i]) {
                free(workers[0].blk[i]);
                workers[0].blk[i] = NULL;
                n++;
            }
        char text[32];
        snprintf(text, sizeof text, "%d\n", (int)getpid());
        put(dir, "child", text);
        _exit(0);
    }
    int status;
    waitpid(c, &status, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 3 && (strcmp(argv[2], "fork") == 0 || strcmp(argv[2], "exec") == 0))) {
        dprintf(2, "usage: ondemand DIR [fork|exec]\n");
        return 2;
    }
    const char *dir = argv[1];
    int do_fork = argc == 3 && strcmp(argv[2], "fork") == 0;
    int do_exec = argc == 3 && strcmp(argv[2], "exec") == 0;
    pthread_barrier_init(&start_phase, NULL, THREADS + 1);
    pthread_barrier_init(&end_phase, NULL, THREADS + 1);
    for (int t = 0; t < THREADS; t++) {
        workers[t].index = t;
        if (pthread_create(&workers[t].t, NULL, run, &workers[t]) != 0)
            return 3;
    }
    for (int ph = 1; ph <= 3; ph++) {
        char name[16];
        snprintf(name, sizeof name, "ready%d", ph);
        put(dir, name, "");
        snprintf(name, sizeof name, "go%d", ph);
        wait_for(dir, name);
        phase = ph;
        pthread_barrier_wait(&start_phase);
        pthread_barrier_wait(&end_phase);
        if (ph == 2 && do_fork)
            fork_child(dir);
        write_ledger(dir, ph);
        if (ph == 2 && do_exec) {
            put(dir, "ready3", "");
            wait_for(dir, "go3");
            execl("/bin/true", "true", (char *)NULL);
            _exit(96);
        }
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(workers[t].t, NULL);
    int64_t live = 0, count = 0, allocs = 0, frees = 0, reallocs = 0;
    for (int t = 0; t < THREADS; t++) {
        live += workers[t].total_live, count += workers[t].total_count, allocs += workers[t].total_allocs;
        frees += workers[t].total_frees, reallocs += workers[t].total_reallocs;
    }
    char text[256];
    snprintf(text, sizeof text, "%lld %lld %lld %lld %lld\n", (long long)live, (long long)count,
             (long long)allocs, (long long)frees, (long long)reallocs);
    put(dir, "total", text);
    put(dir, "ready4", "");
    wait_for(dir, "go4"); /* the script reads the summary while the process runs */
    return 0;
}

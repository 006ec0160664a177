/* threads.c — N threads × M mixed operations (malloc, calloc, realloc,
 * aligned, free) in two categories, every block freed at the end, while the
 * main thread holds known blocks. Each thread keeps its own ledger; the
 * script checks the report balances exactly and the peak lies between the
 * largest single-thread peak and the sum of them.
 * Usage: threads LEDGER_FILE [threads=8] [ops=1000000] */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "ledger.h"
#include "memtrail.h"

#define WINDOW 512
static long ops = 1000000;

typedef struct job {
    int id;
    ledger l;
} job;

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg)
{
    job *j = arg;
    if (mt_tag_push(j->id % 2 ? "t-odd" : "t-even") != 0)
        return (void *)1;
    void *live[WINDOW] = {0};
    size_t sizes[WINDOW] = {0};
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(j->id + 1);
    for (long i = 0; i < ops; i++) {
        uint64_t r = next(&s);
        int slot = (int)(r % WINDOW);
        size_t sz = (r >> 12) % 100 < 95 ? 1 + (r >> 20) % 512 : 1 + (r >> 20) % 200000;
        unsigned kind = (unsigned)(r >> 40) % 8;
        if (live[slot] && kind < 2) {
            live[slot] = realloc(live[slot], sz);
            ledger_resize(&j->l, (int64_t)sizes[slot], (int64_t)sz);
        } else {
            if (live[slot]) {
                free(live[slot]);
                ledger_free(&j->l, (int64_t)sizes[slot]);
            }
            if (kind == 2)
                live[slot] = calloc(1, sz);
            else if (kind == 3)
                live[slot] = aligned_alloc(64, sz);
            else
                live[slot] = malloc(sz);
            ledger_alloc(&j->l, (int64_t)sz);
        }
        sizes[slot] = sz;
        ((char *)live[slot])[0] = (char)i;
    }
    for (int i = 0; i < WINDOW; i++) {
        if (live[i]) {
            free(live[i]);
            ledger_free(&j->l, (int64_t)sizes[i]);
        }
    }
    mt_tag_pop();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    int n = argc > 2 ? atoi(argv[2]) : 8;
    if (argc > 3)
        ops = atol(argv[3]);
    if (n < 1 || n > 64)
        return 2;
    job jobs[64];
    pthread_t t[64];
    /* the main thread's own blocks, live at exit */
    mt_tag_push("main-held");
    ledger mainl = {0};
    void *held[10];
    for (int i = 0; i < 10; i++) {
        held[i] = malloc(1000 + (size_t)i);
        ledger_alloc(&mainl, 1000 + i);
    }
    mt_tag_pop();
    (void)held;
    for (int i = 0; i < n; i++) {
        jobs[i] = (job){.id = i};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    ledger odd = {0}, even = {0};
    int64_t max_peak = 0, sum_peaks_odd = 0, sum_peaks_even = 0;
    for (int i = 0; i < n; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        EXPECT(rv == NULL, "worker %d failed to tag", i);
        ledger *l = i % 2 ? &odd : &even;
        l->allocs += jobs[i].l.allocs;
        l->frees += jobs[i].l.frees;
        l->reallocs += jobs[i].l.reallocs;
        l->live += jobs[i].l.live;
        l->count += jobs[i].l.count;
        if (jobs[i].l.peak > max_peak)
            max_peak = jobs[i].l.peak;
        *(i % 2 ? &sum_peaks_odd : &sum_peaks_even) += jobs[i].l.peak;
    }
    /* peak column: the sum of the threads' peaks (an upper bound); the
     * script also gets the largest single-thread peak (a lower bound) */
    odd.peak = sum_peaks_odd;
    even.peak = sum_peaks_even;
    ledger_write(argv[1], "t-odd", &odd, 0);
    ledger_write(argv[1], "t-even", &even, 1);
    ledger_write(argv[1], "main-held", &mainl, 1);
    FILE *fp = fopen(argv[1], "a");
    fprintf(fp, "max_thread_peak %lld 0 0 0 0 0\n", (long long)max_peak);
    fclose(fp);
    dprintf(1, "%s threads: %d failures\n", test_failures ? "FAIL" : "PASS", test_failures);
    return test_failures ? 1 : 0;
}

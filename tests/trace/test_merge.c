/* test_merge.c — trace mode's merge of per-CPU runs (src/agent/trace_merge.c):
 * events come out in key order across runs, those at or past the mark stay
 * staged, nearly sorted input is put in order within a run; and a run's
 * pages stay while it is fed between emits (under load each sweep empties
 * it, and giving them back then faulted them straight back in), go back
 * once it is empty and took no event for a sweep, down to twice a sweep's
 * events after a burst, and at a fork child's clear; told by mincore. */
#include "../../src/agent/trace_merge.c"

#include <stdlib.h>
#include <unistd.h>

#include "unit.h"

typedef struct got {
    uint64_t keys[4096];
    uint32_t ids[4096];
    size_t n;
} got;

static void take(void *ctx, mt_trace_event *ev, size_t n)
{
    got *g = ctx;
    for (size_t i = 0; i < n; i++, ev++) {
        if (g->n < 4096) {
            g->keys[g->n] = ev->time_ns;
            g->ids[g->n] = ev->id;
        }
        g->n++;
    }
}

static void put(trace_merge *m, unsigned which, uint64_t key, uint32_t id)
{
    mt_trace_event *ev = trace_merge_put(m, which, key);
    if (ev) {
        ev->type = MT_TRACE_ALLOC;
        ev->id = id;
    }
}

/* n events into run 0 with keys from *key on. */
static void feed(trace_merge *m, uint64_t *key, int n)
{
    for (int i = 0; i < n; i++, ++*key)
        put(m, 0, *key, (uint32_t)*key);
}

/* A sweep: n events fed, then every staged event emitted; how many. */
static size_t sweep_of(trace_merge *m, uint64_t *key, int n)
{
    feed(m, key, n);
    got g = {.n = 0};
    trace_merge_emit(m, UINT64_MAX, take, &g);
    return g.n;
}

/* Pages of [p, p + n) resident now. */
static size_t resident_pages(const void *p, size_t n)
{
    size_t pages = (n + PAGE - 1) / PAGE;
    unsigned char *vec = calloc(pages, 1);
    size_t k = 0;
    if (vec && mincore((void *)p, pages * PAGE, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            k += vec[i] & 1;
    free(vec);
    return k;
}

static void order(void)
{
    trace_merge *m = trace_merge_create(3);
    CHECK("merge: created", m != NULL);
    if (!m)
        return;
    /* Three runs, each nearly sorted (a later key first, then earlier). */
    uint64_t keys[3][6] = {{10, 40, 30, 70, 90, 80}, {20, 25, 60, 50, 100, 95}, {5, 15, 45, 35, 85, 120}};
    uint32_t id = 1;
    for (unsigned r = 0; r < 3; r++)
        for (int i = 0; i < 6; i++)
            put(m, r, keys[r][i], id++);
    CHECK("merge: 18 staged", trace_merge_staged(m) == 18);
    got g = {.n = 0};
    uint64_t out = trace_merge_emit(m, 90, take, &g);
    int sorted = 1;
    for (size_t i = 1; i < g.n; i++)
        sorted &= g.keys[i - 1] <= g.keys[i];
    int below = 1;
    for (size_t i = 0; i < g.n; i++)
        below &= g.keys[i] < 90;
    CHECK("merge: every key below the mark, none other (14 of 18)", out == 14 && g.n == 14 && below);
    CHECK("merge: in key order across runs", sorted);
    CHECK("merge: 4 stay staged (90, 95, 100, 120)", trace_merge_staged(m) == 4);
    got rest = {.n = 0};
    trace_merge_emit(m, UINT64_MAX, take, &rest);
    CHECK("merge: the rest in order at the last mark", rest.n == 4 && rest.keys[0] == 90 &&
                                                           rest.keys[1] == 95 && rest.keys[2] == 100 &&
                                                           rest.keys[3] == 120);
    /* Equal keys: the lower run first, then staging order. */
    put(m, 1, 500, 1001);
    put(m, 0, 500, 1002);
    put(m, 0, 500, 1003);
    got eq = {.n = 0};
    trace_merge_emit(m, UINT64_MAX, take, &eq);
    CHECK("merge: equal keys by run, then staging order",
          eq.n == 3 && eq.ids[0] == 1002 && eq.ids[1] == 1003 && eq.ids[2] == 1001);
    trace_merge_destroy(m);
}

static void pages(void)
{
    trace_merge *m = trace_merge_create(1);
    if (!m) {
        CHECK("merge pages: created", 0);
        return;
    }
    run *r = &m->runs[0];
    /* 8 sweeps of a busy CPU: 100000 events (4.8 MB) between emits. */
    enum { PER_SWEEP = 100000 };
    uint64_t key = 1;
    size_t low = SIZE_MAX;
    for (int sweep = 0; sweep < 8; sweep++) {
        sweep_of(m, &key, PER_SWEEP);
        size_t k = resident_pages(r->ev, r->touched);
        if (k < low)
            low = k;
    }
    size_t full = PER_SWEEP * sizeof(mt_trace_event) / PAGE;
    CHECK("merge pages: a run fed between emits keeps its pages (none faulted back at each sweep)",
          low >= full && r->touched >= PER_SWEEP * sizeof(mt_trace_event));
    /* Then a trickle: a run still fed keeps twice a sweep's events, not
     * the burst's pages. */
    for (int sweep = 0; sweep < 2; sweep++)
        sweep_of(m, &key, 1000);
    CHECK("merge pages: after a burst, a run fed a trickle keeps no more than its reserve",
          r->touched == RUN_KEEP && resident_pages(r->ev, r->cap_bytes) <= RUN_KEEP / PAGE);
    for (int sweep = 0; sweep < 2; sweep++)
        sweep_of(m, &key, PER_SWEEP);
    /* A quiet sweep: empty at this emit and the one before, nothing put. */
    got g = {.n = 0};
    trace_merge_emit(m, UINT64_MAX, take, &g);
    size_t after = resident_pages(r->ev, r->cap_bytes);
    CHECK("merge pages: a run quiet for a sweep gives its pages back but its reserve",
          g.n == 0 && r->touched == RUN_KEEP && after <= RUN_KEEP / PAGE);
    /* And fills again as before. */
    CHECK("merge pages: used again after", sweep_of(m, &key, 1000) == 1000);
    /* A fork child's clear drops the parent's events and their pages. */
    feed(m, &key, PER_SWEEP);
    trace_merge_clear(m);
    CHECK("merge pages: a clear gives the pages back at once",
          trace_merge_staged(m) == 0 && r->touched == RUN_KEEP &&
              resident_pages(r->ev, r->cap_bytes) <= RUN_KEEP / PAGE);
    trace_merge_destroy(m);
}

/* Many runs, keys drawn from a narrow range (ties across and within runs),
 * emitted at random marks: the output equals a stable sort of the input by
 * (key, run, staging order), every time a run gives several in a row. */
typedef struct staged_ev {
    uint64_t key;
    unsigned run;
    uint32_t id;
} staged_ev;

static int cmp_staged(const void *a, const void *b)
{
    const staged_ev *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->run != y->run)
        return x->run < y->run ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void against_sort(void)
{
    enum { RUNS = 7, EVENTS = 3000 };
    static staged_ev all[EVENTS];
    trace_merge *m = trace_merge_create(RUNS);
    CHECK("merge: created (7 runs)", m != NULL);
    if (!m)
        return;
    srand(18);
    uint64_t last[RUNS] = {0};
    size_t n = 0, emitted = 0, wrong = 0;
    uint64_t mark = 0;
    got *g = calloc(1, sizeof *g);
    CHECK("merge: room for what seven runs give", g != NULL);
    for (int round = 0; round < 6 && g; round++) {
        /* Each run's keys rise (with repeats), as a CPU's stamps do. */
        for (int i = 0; i < EVENTS / 6; i++, n++) {
            unsigned r = (unsigned)rand() % RUNS;
            if (rand() % 4 == 0) /* a burst from one CPU */
                r = 0;
            last[r] += (uint64_t)(rand() % 3);
            if (last[r] < mark)
                last[r] = mark;
            all[n] = (staged_ev){last[r], r, (uint32_t)n};
            put(m, r, last[r], (uint32_t)n);
        }
        mark = round == 5 ? UINT64_MAX : mark + 1 + (uint64_t)(rand() % 300);
        g->n = 0;
        trace_merge_emit(m, mark, take, g);
        /* What this emit should give: the staged events below the mark. */
        qsort(all + emitted, n - emitted, sizeof *all, cmp_staged);
        size_t want = emitted;
        while (want < n && all[want].key < mark)
            want++;
        if (g->n != want - emitted)
            wrong++;
        for (size_t i = 0; i < g->n && i < want - emitted; i++)
            wrong += g->ids[i] != all[emitted + i].id;
        emitted = want;
    }
    free(g);
    CHECK("merge: 7 runs with ties, six marks: a stable sort by (key, run, staging order)",
          wrong == 0 && emitted == n);
    trace_merge_destroy(m);
}

int main(void)
{
    order();
    against_sort();
    pages();
    return failures != 0;
}
